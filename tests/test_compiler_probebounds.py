"""Block-wide bounds of the known branches' predicates (compiler/simt/probebounds.py): where they
show that no thread of a block takes a known branch, the block skips the probe's loop over
its threads and runs the copy without the guards. References are numpy; outputs are
poisoned first, so a block that wrongly skipped its guards (stores past n, or at the
border) shows."""
import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.simt import probebounds
from anycuda.compiler.lowering.module import ModuleLowering
from anycuda.cudac import compile_to_ptx
from anycuda.ptx.parser import parse
from conformance import poison

SOURCE = r"""
extern "C" __global__ void scaled(const int* x, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = 3 * x[i] + i;
}

extern "C" __global__ void grid2d(int* out, int cols, int rows) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows) out[y * cols + x] = x * 1000 + y;
}

extern "C" __global__ void border(const int* in, int* out, int nx, int ny) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    int i = y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) { out[i] = -in[i]; return; }
    out[i] = in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx];
}

// an unsigned index that wraps inside a block (off near 2^32): the bounds of the block's
// indices are no interval there
extern "C" __global__ void wrapping(int* out, unsigned off, unsigned n) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned i = t + off;
    if (i < n) out[t] = (int)i;
}

// the same where the branch is taken below n: bounds that forgot the wrap would see only
// indices above n and let the block skip a guard some of its threads take
extern "C" __global__ void wrapping_below(int* out, unsigned off, unsigned n) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned i = t + off;
    if (i < n) return;
    out[t] = (int)i;
}

// a 3x3 neighbourhood summed where it lies inside the image: nvcc tests `xx < 0 || yy < 0`
// as `(xx | yy) < 0`
extern "C" __global__ void taps(const int* in, int* out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int s = 0;
    for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
            int xx = x + dx, yy = y + dy;
            if (xx >= 0 && xx < w && yy >= 0 && yy < h) s += in[yy * w + xx] << (3 * (dy + 1) + dx + 1);
        }
    out[y * w + x] = s;
}

// predicates through min, max and a mask; neighbours clamped to the image
extern "C" __global__ void clamped(const int* in, int* out, int w, int n) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int left = max(x - 1, 0), right = min(x + 1, w - 1);
    if (min(x, w) < n && max(x - n, -1) < 0 && (x & 1023) < w) out[x] = in[left] - in[right];
}

// 64-bit values: a shifted index against a 64-bit limit, and a lower bound
extern "C" __global__ void wide(int* out, long long lo, long long hi) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    long long j = (long long)t << 33;
    if (j >= lo && j < hi) out[t] = t;
}
"""


def _run(name, grid, block, *args, tag=""):
    ac.RawModule(code=SOURCE + tag).get_function(name)(grid, block, args)


def _untouched(a):
    return a == poison(1, np.int32).get()[0]


@pytest.mark.parametrize("block", [256, 100, 32])
def test_exit_guard(rng, block):
    for n in (1, block, 5 * block + int(rng.integers(1, block)), int(rng.integers(3000, 5000))):
        blocks = (n + block - 1) // block
        x = rng.integers(-1000, 1000, blocks * block).astype(np.int32)
        out = poison(blocks * block, np.int32)
        _run("scaled", (blocks,), (block,), ac.asarray(x), out, np.int32(n))
        got = out.get()
        np.testing.assert_array_equal(got[:n], 3 * x[:n] + np.arange(n))
        assert _untouched(got[n:]).all()


@pytest.mark.parametrize("block", [(16, 16), (32, 4), (8, 3)])
def test_two_dimensional_guard(block):
    for cols, rows in ((70, 45), (64, 32), (1, 1)):
        grid = ((cols + block[0] - 1) // block[0] + 1, (rows + block[1] - 1) // block[1] + 1)
        out = poison(cols * rows + 64, np.int32)
        _run("grid2d", grid, block, out, np.int32(cols), np.int32(rows))
        got = out.get()
        x, y = np.meshgrid(np.arange(cols), np.arange(rows))
        np.testing.assert_array_equal(got[:cols * rows], (x * 1000 + y).ravel())
        assert _untouched(got[cols * rows:]).all()


def test_border(rng):
    nx, ny = 100, 37
    a = rng.integers(-1000, 1000, (ny, nx)).astype(np.int32)
    out = poison(nx * ny, np.int32)
    _run("border", ((nx + 31) // 32, (ny + 7) // 8), (32, 8), ac.asarray(a), out, np.int32(nx), np.int32(ny))
    want = -a.copy()
    want[1:-1, 1:-1] = a[1:-1, :-2] + a[1:-1, 2:] + a[:-2, 1:-1] + a[2:, 1:-1]
    np.testing.assert_array_equal(out.get().reshape(ny, nx), want)


@pytest.mark.parametrize("w,h", [(100, 37), (16, 16), (1, 5), (33, 1)])
def test_taps_inside_the_image(rng, w, h):
    a = rng.integers(-1000, 1000, (h, w)).astype(np.int32)
    out = poison(w * h, np.int32)
    _run("taps", ((w + 15) // 16, (h + 7) // 8), (16, 8), ac.asarray(a), out, np.int32(w), np.int32(h))
    padded = np.pad(a.astype(np.int64), 1)
    want = sum(padded[dy:dy + h, dx:dx + w] << (3 * dy + dx) for dy in range(3) for dx in range(3))
    np.testing.assert_array_equal(out.get().reshape(h, w), want.astype(np.int32))


@pytest.mark.parametrize("w,n", [(1024, 3000), (500, 4096), (1, 300)])
def test_clamped_neighbours(rng, w, n):
    blocks = (n + 127) // 128 + 1
    a = rng.integers(-1000, 1000, blocks * 128 + 1).astype(np.int32)
    out = poison(blocks * 128, np.int32)
    _run("clamped", (blocks,), (128,), ac.asarray(a), out, np.int32(w), np.int32(n))
    x = np.arange(blocks * 128)
    stores = (np.minimum(x, w) < n) & (np.maximum(x - n, -1) < 0) & ((x & 1023) < w)
    want = a[np.maximum(x - 1, 0)] - a[np.minimum(x + 1, w - 1)]
    got = out.get()
    np.testing.assert_array_equal(got[stores], want[stores])
    assert _untouched(got[~stores]).all()


@pytest.mark.parametrize("off,n", [(2 ** 32 - 300, 2 ** 32 - 100), (2 ** 32 - 300, 50), (2 ** 32 - 300, 1000), (2 ** 32 - 1, 2 ** 32 - 1),
                                   (5, 700), (0, 2 ** 32 - 1)])
def test_indices_that_wrap(off, n):
    block, blocks = 128, 8
    i = (np.arange(block * blocks, dtype=np.uint64) + off) % 2 ** 32
    for name, stores in (("wrapping", i < n), ("wrapping_below", i >= n)):
        out = poison(block * blocks, np.int32)
        _run(name, (blocks,), (block,), out, np.uint32(off), np.uint32(n))
        got = out.get()
        np.testing.assert_array_equal(got[stores], i[stores].astype(np.uint32).view(np.int32))
        assert _untouched(got[~stores]).all()


@pytest.mark.parametrize("lo,hi", [(0, 2 ** 62), (5 << 33, 300 << 33), (-(2 ** 63), 2 ** 63 - 1), (2 ** 40, 2 ** 41 + 1)])
def test_wide_values(lo, hi):
    block, blocks = 64, 8
    out = poison(block * blocks, np.int32)
    _run("wide", (blocks,), (block,), out, np.int64(lo), np.int64(hi))
    t = np.arange(block * blocks)
    j = t.astype(object) * 2 ** 33
    taken = np.array([lo <= v < hi for v in j])
    got = out.get()
    np.testing.assert_array_equal(got[taken], t[taken])
    assert _untouched(got[~taken]).all()


def test_bounds_are_made_where_they_follow_the_predicates():
    ptx = compile_to_ptx(SOURCE + r"""
extern "C" __global__ void flipped(int* out, int j) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if ((i ^ j) > i) out[i] = 1;
}
""")
    kernels = [k.name for k in parse(ptx, "b.ptx").functions if k.is_kernel]
    mod = ModuleLowering(parse(ptx, "b.ptx"), "b.ptx").lower().mod
    made = {kernels[int(fn.name.split(".")[1][1:])] for fn in mod.functions if fn.name.endswith(".bounds")}
    assert made == {"scaled", "grid2d", "border", "wrapping", "wrapping_below", "wide", "taps", "clamped"}   # not through an xor


def test_the_bounds_are_what_decides(monkeypatch):
    """With bounds that always say that no thread takes a guard (and a fresh compile), the
    block holding n's end runs the copy without the guards too and stores past n: the
    bounds' answer is what a block skips its probe on."""
    from llvmlite import ir
    monkeypatch.setenv("ANYCUDA_CACHE", "0")
    monkeypatch.setattr(probebounds._Evaluator, "run", lambda self: ir.Constant(ir.IntType(1), 1))
    n, block = 1000, 128
    x = np.arange(1024, dtype=np.int32)
    out = poison(1024, np.int32)
    _run("scaled", (8,), (block,), ac.asarray(x), out, np.int32(n), tag="// bounds always pass\n")
    assert not _untouched(out.get()[n:]).any()
