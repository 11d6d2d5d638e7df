"""Values a block program's next stretch computes again rather than keeping them in a stack
array (compiler/vector/recompute.py), and tile loads of two runs (blockmemory._two_runs).

Kernels run against numpy on fresh random inputs with poisoned outputs, at block shapes whose
tiles the image does not fill; the block program's IR is looked at for what its stretches
keep. recompute.py's two functions are also tried on IR made here.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from llvmlite import ir

import anycuda as ac
from anycuda.compiler import pipeline
from anycuda.compiler.vector import blockmemory, recompute
from anycuda.cudac import compile_to_ptx
from conftest import ran_as_block_program

KERNELS = r"""
// each thread's place in its tile, the tile's address and the image's bounds are needed after
// the barrier: all of them functions of the thread's index and the parameters
extern "C" __global__ void cross(const float* in, float* out, int w, int h) {
    __shared__ float t[18][18];
    int tx = threadIdx.x, ty = threadIdx.y;
    int x = blockIdx.x * 16 + tx, y = blockIdx.y * 16 + ty;
    bool inside = x < w && y < h;
    t[ty + 1][tx + 1] = inside ? in[y * w + x] : 0.0f;
    if (tx == 0) t[ty + 1][0] = x > 0 && y < h ? in[y * w + x - 1] : 0.0f;
    if (tx == 15) t[ty + 1][17] = x + 1 < w && y < h ? in[y * w + x + 1] : 0.0f;
    if (ty == 0) t[0][tx + 1] = y > 0 && x < w ? in[(y - 1) * w + x] : 0.0f;
    if (ty == 15) t[17][tx + 1] = y + 1 < h && x < w ? in[(y + 1) * w + x] : 0.0f;
    __syncthreads();
    if (inside)
        out[y * w + x] = t[ty + 1][tx] + t[ty + 1][tx + 2] + t[ty][tx + 1] + t[ty + 2][tx + 1]
                         - 4.0f * t[ty + 1][tx + 1];
}

// v is a loaded value: it must still be kept (no shape, no function of the index)
extern "C" __global__ void loaded(const int* in, int* out) {
    __shared__ int s[256];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    int v = in[i] * 3 + 1;
    s[t] = in[i];
    __syncthreads();
    int mirrored = s[255 - t];
    __syncthreads();
    s[t] += mirrored;
    __syncthreads();
    out[i] = v + s[(t + 1) % 256] + t / 3;
}

// a loop around barriers: its state is kept, what the index fixes is computed again
extern "C" __global__ void tiles(const float* a, float* out, int n, int tiles) {
    __shared__ float s[32][33];
    int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.x * 32 + ty;
    float sum = 0.0f;
    for (int k = 0; k < tiles; ++k) {
        int col = k * 32 + tx;
        s[ty][tx] = row < n ? a[(size_t)row * tiles * 32 + col] : 0.0f;
        __syncthreads();
        sum += s[tx][ty] * (float)(tx + 1);
        __syncthreads();
    }
    if (row < n) out[row * 32 + tx] = sum;
}
"""


def _scalar_stores_into_kept_slots(ir_text) -> int:
    """How many stores of a scalar i32 or i64 go into a kept slot (an element of a `kept`
    array, one per warp): what a warp's uniform values cost to keep."""
    slots = set(re.findall(r'(%"[^"]+") = getelementptr \[\d+ x i(?:32|64)\], \[\d+ x i(?:32|64)\]\* %"kept', ir_text))
    stores = re.findall(r'store i(?:32|64) %"[^"]+", i(?:32|64)\* (%"[^"]+")', ir_text)
    return sum(1 for ptr in stores if ptr in slots)


def _kept_slots(ir_text) -> int:
    return len(re.findall(r'%"kept[.\d]*" = alloca', ir_text))


def _cross_reference(img):
    pad = np.pad(img.astype(np.float64), 1)
    return pad[1:-1, :-2] + pad[1:-1, 2:] + pad[:-2, 1:-1] + pad[2:, 1:-1] - 4 * pad[1:-1, 1:-1]


def test_what_the_index_fixes_is_not_kept():
    """The tile's row, its address, and the bounds the block checks after the barrier are
    computed again: no scalar goes into a kept slot (before: the row and the address did)."""
    ptx = compile_to_ptx(KERNELS, name="recompute.cu")
    ir_text = pipeline.block_program_ir(ptx, "recompute.ptx", "cross", (16, 16, 1))
    assert ir_text.count("stretch1.warp") > 0
    assert _scalar_stores_into_kept_slots(ir_text) == 0


@pytest.mark.parametrize("w,h", [(16 * 5, 16 * 3), (16 * 4 + 7, 16 * 2 + 9)])
def test_computed_again_gives_the_gpu_result(compile_cuda, rng, poison, w, h):
    img = rng.standard_normal((h, w)).astype(np.float32)
    out = poison(w * h, np.float32)
    k = compile_cuda(KERNELS, name="recompute.cu").get_function("cross")
    k((-(-w // 16), -(-h // 16)), (16, 16), (ac.asarray(img), out, np.int32(w), np.int32(h)))
    np.testing.assert_allclose(out.get().reshape(h, w), _cross_reference(img), rtol=1e-5, atol=1e-5)
    assert ran_as_block_program(k, (16, 16, 1))


def test_a_loaded_value_is_still_kept(compile_cuda, rng, poison):
    ptx = compile_to_ptx(KERNELS, name="recompute.cu")
    assert _kept_slots(pipeline.block_program_ir(ptx, "recompute.ptx", "loaded", 256)) >= 1
    n = 256 * 5
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poison(n, np.int32)
    k = compile_cuda(KERNELS, name="recompute.cu").get_function("loaded")
    k((n // 256,), (256,), (ac.asarray(x), out))
    s = x.reshape(-1, 256)
    s = s + s[:, ::-1]
    t = np.arange(256)
    want = x * 3 + 1 + np.roll(s, -1, axis=1).reshape(-1) + np.tile(t // 3, n // 256)
    np.testing.assert_array_equal(out.get(), want)
    assert ran_as_block_program(k, 256)


def test_what_a_loop_around_barriers_leaves_is_not_kept(monkeypatch):
    """At a loop around barriers, the registers its rounds do not write (the thread's row and
    column, the tile's addresses) are computed again in each round: fewer slots than with
    everything kept (the loop's own state is kept either way)."""
    ptx = compile_to_ptx(KERNELS, name="recompute.cu")

    def slots():
        return _kept_slots(pipeline.block_program_ir(ptx, "recompute.ptx", "tiles", (32, 32, 1)))
    computed_again = slots()
    # nvcc's `if (tiles > 0)` around the loop: what is made before the loop is a phi of its
    # value and none, which stands for the value
    monkeypatch.setattr(recompute, "_through", lambda value, one_way: value)
    not_through_phis = slots()
    monkeypatch.setattr(recompute, "recomputable", lambda *args: False)
    everything = slots()
    assert 0 < computed_again < not_through_phis < everything, (computed_again, not_through_phis, everything)


@pytest.mark.parametrize("n", [64, 50])
def test_a_loop_around_barriers_keeps_its_state(compile_cuda, rng, poison, n):
    tiles = 3
    a = rng.standard_normal((n, tiles * 32)).astype(np.float32)
    out = poison(n * 32, np.float32)
    k = compile_cuda(KERNELS, name="recompute.cu").get_function("tiles")
    k((-(-n // 32),), (32, 32), (ac.asarray(a), out, np.int32(n), np.int32(tiles)))
    padded = np.zeros((-(-n // 32) * 32, tiles * 32))
    padded[:n] = a
    blocks = padded.reshape(-1, 32, tiles, 32)          # [block, row in block, tile, column]
    # thread (tx, ty) of block b adds s[tx][ty] = a[b*32 + tx, k*32 + ty] times tx + 1
    want = np.einsum("bxkt,x->btx", blocks, np.arange(1, 33, dtype=np.float64)).reshape(-1, 32)[:n]
    np.testing.assert_allclose(out.get().reshape(n, 32), want, rtol=1e-4, atol=1e-4)
    assert ran_as_block_program(k, (32, 32, 1))


# ------------------------------------------------------------------ recompute.py itself

def _function():
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.IntType(32)]), "f")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    return fn, b


def _loop_over_warps(fn, b, name="warp"):
    """A block after the builder's whose phi counts warps (as a stretch's loop does); the
    builder is left in it."""
    before = b.block
    loop = fn.append_basic_block(name + ".loop")
    b.branch(loop)
    b.position_at_end(loop)
    warp = b.phi(ir.IntType(32), name)
    warp.add_incoming(ir.Constant(ir.IntType(32), 0), before)
    return warp


def test_only_pure_trees_over_the_counter_are_computed_again():
    fn, b = _function()
    entry = fn.entry_basic_block
    param = b.add(fn.args[0], ir.Constant(ir.IntType(32), 1))      # (in the entry block: a leaf)
    warp = _loop_over_warps(fn, b)
    row = b.urem(warp, ir.Constant(ir.IntType(32), 16))
    address = b.add(b.mul(row, ir.Constant(ir.IntType(32), 80)), param)
    slot = b.alloca(ir.IntType(32))
    loaded = b.add(b.load(slot), row)
    by_zero = b.udiv(row, ir.Constant(ir.IntType(32), 0))
    by_param = b.udiv(row, param)
    counters = {warp}
    assert recompute.recomputable(address, counters, entry)
    assert recompute.recomputable(b.icmp_unsigned("<", address, param), counters, entry)
    for value in (loaded, by_zero, by_param, b.phi(ir.IntType(32))):
        assert not recompute.recomputable(value, counters, entry)
    assert not recompute.recomputable(address, set(), entry)       # (another loop's phi)


def test_a_phi_of_a_value_and_none_stands_for_the_value():
    """A register first written in a part a warp may skip: after two such parts it is a phi
    of a phi; computed again, it is the part's value (no phi is copied)."""
    fn, b = _function()
    entry = fn.entry_basic_block
    warp = _loop_over_warps(fn, b)
    value = b.shl(warp, ir.Constant(ir.IntType(32), 2))
    inner, outer = b.phi(ir.IntType(32), "inner"), b.phi(ir.IntType(32), "outer")
    assert not recompute.recomputable(outer, {warp}, entry, {})
    one_way = {outer: inner, inner: value}
    assert recompute.recomputable(outer, {warp}, entry, one_way)
    again = recompute.recompute(b, outer, warp, {warp}, entry, {}, one_way)
    assert again.opname == "shl" and again is not value


def test_the_copy_counts_on_the_current_counter():
    fn, b = _function()
    entry = fn.entry_basic_block
    w1 = _loop_over_warps(fn, b, "w1")
    row = b.urem(w1, ir.Constant(ir.IntType(32), 16))
    value = b.add(b.mul(row, row), fn.args[0])
    w2 = _loop_over_warps(fn, b, "w2")
    memo = {}
    again = recompute.recompute(b, value, w2, {w1, w2}, entry, memo)
    assert recompute.recompute(b, value, w2, {w1, w2}, entry, memo) is again
    b.ret_void()
    text = str(fn)
    copied = text[text.index("w2.loop:"):]
    assert '%"w2"' in copied and '%"w1"' not in copied
    assert copied.count("urem") == 1 and copied.count("mul") == 1      # (the shared part once)


# ------------------------------------------------------------------ two runs

TWO_RUNS = r"""
// a 16 x 16 block loads its 18 x 18 tile (halo of one) through t / 18, t % 18: a warp's 32
// lanes are two runs, or three
extern "C" __global__ void halo18(const float* in, float* out, int w, int h) {
    __shared__ float tile[18][18];
    int x0 = blockIdx.x * 16 - 1, y0 = blockIdx.y * 16 - 1;
    for (int t = threadIdx.y * 16 + threadIdx.x; t < 18 * 18; t += 256) {
        int ty = t / 18, tx = t % 18, xx = x0 + tx, yy = y0 + ty;
        tile[ty][tx] = xx >= 0 && xx < w && yy >= 0 && yy < h ? in[yy * w + xx] : 0.0f;
    }
    __syncthreads();
    int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
    if (x < w && y < h)
        out[y * w + x] = tile[threadIdx.y][threadIdx.x + 1] - tile[threadIdx.y + 2][threadIdx.x + 1]
                         + 0.5f * tile[threadIdx.y + 1][threadIdx.x + 2];
}
"""


@pytest.mark.parametrize("w,h", [(16 * 4, 16 * 2), (16 * 3 + 5, 16 + 11)])
def test_two_runs_without_a_loop(compile_cuda, rng, poison, monkeypatch, w, h):
    """The tile's load of two runs takes the loop-free path (made in the program), and the
    blocks inside the image and at its edges give numpy's result."""
    made = []
    original = blockmemory.BlockMemory._two_runs

    def recorded(self, *args):
        made.append(self.in_shared)
        return original(self, *args)
    monkeypatch.setattr(blockmemory.BlockMemory, "_two_runs", recorded)
    pipeline.block_program_ir(compile_to_ptx(TWO_RUNS, name="halo.cu"), "halo.ptx", "halo18", (16, 16, 1))
    assert False in made, made
    img = rng.standard_normal((h, w)).astype(np.float32)
    out = poison(w * h, np.float32)
    k = compile_cuda(TWO_RUNS, name="halo.cu").get_function("halo18")
    k((-(-w // 16), -(-h // 16)), (16, 16), (ac.asarray(img), out, np.int32(w), np.int32(h)))
    pad = np.pad(img.astype(np.float64), 1)
    want = pad[:-2, 1:-1] - pad[2:, 1:-1] + 0.5 * pad[1:-1, 2:]
    np.testing.assert_allclose(out.get().reshape(h, w), want, rtol=1e-5, atol=1e-5)
    assert ran_as_block_program(k, (16, 16, 1))
