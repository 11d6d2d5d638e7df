"""Affine resumes (FunctionLowering._reload, rounds.affine_spills): when every thread of a
block resumes at a loop's back-edge yield with the induction register holding first + t for
thread t, a uniform round rebuilds it from `first` instead of reloading it, so that the
round's loads and stores are contiguous vectors. Where the form does not hold (a stride per
thread, a 2-D block that repeats indices, a thread that moved its index, threads that left
early) the round reloads as before. numpy is the reference; outputs are poisoned first."""
import numpy as np
import pytest
from llvmlite import ir

import anycuda as ac
from anycuda.compiler import abi
from anycuda.compiler.simt import rounds
from anycuda.compiler.vector import warpregions
from conformance import force_affine_check, poison

# Each kernel has a barrier, so that its loops get yields (analysis.grid_stride_yields);
# TAG makes the source unique per test so that no compiled copy is shared between tests
# that change the compiler.
SOURCE = r"""
// TAG
extern "C" __global__ void grid_sum(const float* x, float* out, int n, int spread) {
    __shared__ float s[1024];
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int nt = blockDim.x * blockDim.y * blockDim.z;
    float v = 0.0f;
    for (int i = blockIdx.x * nt + t * spread; i < n; i += gridDim.x * nt * spread) v += x[i];
    s[t] = v;
    __syncthreads();
    if (t == 0) {
        float total = 0.0f;
        for (int k = 0; k < nt; ++k) total += s[k];
        out[blockIdx.x] = total;
    }
}

// threads whose element is negative skip the next one: indices drift apart
extern "C" __global__ void drifting_sum(const float* x, float* out, int n) {
    __shared__ float s[1024];
    float v = 0.0f;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < n; i += gridDim.x * blockDim.x) {
        v += x[i];
        if (x[i] < 0.0f) i += 1;
    }
    s[threadIdx.x] = v;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}

// a 64-bit induction, and a block-stride loop per row
extern "C" __global__ void row_scale(float* y, const float* x, long long cols, float a) {
    __shared__ float s[1];
    if (threadIdx.x == 0) s[0] = a;
    __syncthreads();
    const float* row = x + blockIdx.x * cols;
    for (long long i = threadIdx.x; i < cols; i += blockDim.x) y[blockIdx.x * cols + i] = s[0] * row[i] + i;
}

// k: a tile loop's counter, the same in every thread, saved across both barriers
extern "C" __global__ void tile_counter(const int* x, int* out, int n) {
    __shared__ int s[1024];
    int acc = 0;
    for (int k = 0; k < n; k += 4) {
        s[threadIdx.x] = x[k + threadIdx.x % 4];
        __syncthreads();
        acc += s[(threadIdx.x + 1) % blockDim.x] * (k + 1);
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// c is computed as if alike in every thread, but threads take different numbers of steps
extern "C" __global__ void uneven_counter(int* out) {
    __shared__ int s[1024];
    int c = 0;
    for (int j = 0; j < (int)(threadIdx.x & 3); ++j) c += 5;
    s[threadIdx.x] = c;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = c * 10 + s[(threadIdx.x + 1) % blockDim.x];
}

// only the threads threadIdx.x < 2-D block's x extent index data: 2-D blocks repeat indices
extern "C" __global__ void column_sum(const float* x, float* out, int n) {
    __shared__ float s[1024];
    int t = threadIdx.x + blockDim.x * threadIdx.y;
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
    s[t] = v;
    __syncthreads();
    out[blockIdx.x * blockDim.x * blockDim.y + t] = s[t];
}
"""


def _module(tag):
    return ac.RawModule(code=SOURCE.replace("TAG", tag))


def _grid_sum(mod, rng, n, grid, block, spread):
    x = rng.standard_normal(max(n, 1)).astype(np.float32)
    out = poison(grid, np.float32)
    mod.get_function("grid_sum")((grid,), block, (ac.asarray(x), out, np.int32(n), np.int32(spread)))
    nt = int(np.prod(block))
    stride = grid * nt * spread
    want = [sum(float(x[i]) for t in range(nt) for i in range(b * nt + t * spread, n, stride)) for b in range(grid)]
    return out.get(), np.float32(want)


CASES = [  # n, grid, block, spread: uneven trip counts, 2-D and 3-D blocks, a per-thread stride
    (10_000, 3, (128, 1, 1), 1), (3 * 96 * 7, 3, (96, 1, 1), 1), (5000, 2, (16, 8, 1), 1),
    (4000, 2, (8, 4, 2), 1), (6000, 3, (64, 1, 1), 2), (50, 4, (64, 1, 1), 1), (0, 2, (32, 1, 1), 1)]


@pytest.mark.parametrize("n,grid,block,spread", CASES)
def test_grid_stride_sums(rng, n, grid, block, spread):
    got, want = _grid_sum(_module("plain"), rng, n, grid, block, spread)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_drifting_indices_and_64_bit_rows(rng):
    mod = _module("drift")
    n, grid, block = 20_000, 3, 64
    x = rng.standard_normal(n).astype(np.float32)
    out = poison(grid * block, np.float32)
    mod.get_function("drifting_sum")((grid,), (block,), (ac.asarray(x), out, np.int32(n)))
    want = np.zeros(grid * block)
    for t in range(grid * block):
        i = t
        while i < n:
            want[t] += x[i]
            if x[i] < 0:
                i += 1
            i += grid * block
    np.testing.assert_allclose(out.get(), want, rtol=1e-4, atol=1e-3)

    rows, cols = 5, 1000
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    y = poison((rows, cols), np.float32)
    mod.get_function("row_scale")((rows,), (96,), (y, ac.asarray(x), np.int64(cols), np.float32(1.5)))
    # nvcc may fuse the multiply-add: compare with the exact value, to the ulp of the sum's terms
    want = 1.5 * x.astype(np.float64) + np.arange(cols)
    np.testing.assert_allclose(y.get(), want, rtol=1e-6, atol=1e-4)


def test_two_dimensional_block_that_repeats_indices(rng):
    n, grid, block = 3000, 2, (32, 4, 1)
    x = rng.standard_normal(n).astype(np.float32)
    out = poison(grid * 128, np.float32)
    _module("columns").get_function("column_sum")((grid,), block, (ac.asarray(x), out, np.int32(n)))
    want = np.zeros((grid, 4, 32))
    for b in range(grid):
        for tx in range(32):
            want[b, :, tx] = x[b * 32 + tx:n:grid * 32].astype(np.float64).sum()
    np.testing.assert_allclose(out.get(), want.ravel(), rtol=1e-4, atol=1e-3)


def _shift_first(monkeypatch, shift):
    """Make the scheduler store first + shift as each affine register's base: where the
    affine resume runs, results move; where the check turns it away, they must not. The
    resume is a round's: without warp regions (an entry region runs a warp's grid-stride
    loop through its yields, and no round resumes there)."""
    original = rounds.affine_spills
    monkeypatch.setattr(warpregions, "emit_regions", lambda f: {})

    def shifted(b, spill, header, n, slots, holds):
        ok = original(b, spill, header, n, slots, holds)
        for slot, _, size, _, _ in slots:
            ptr = b.bitcast(b.gep(header, [ir.Constant(ir.IntType(64), abi.FRAME_HEADER + 8 * slot)]),
                            ir.IntType(8 * size).as_pointer())
            b.store(b.add(b.load(ptr), ir.Constant(ir.IntType(8 * size), shift)), ptr)
        return ok
    monkeypatch.setattr(rounds, "affine_spills", shifted)
    monkeypatch.setenv("ANYCUDA_CACHE", "0")


def test_the_affine_resume_runs_and_the_check_guards_it(rng, monkeypatch):
    """With the stored base moved by one element, the sums over consecutive indices change
    (the affine resume ran, from the header's base) and the sums with a stride per thread
    do not (the check sent those rounds to the reloading resume)."""
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")      # (a block program would take the kernel, loops and all)
    _shift_first(monkeypatch, 1)
    mod = _module("shifted")
    got, want = _grid_sum(mod, rng, 20_000, 2, (128, 1, 1), 1)
    assert not np.allclose(got, want, rtol=1e-4, atol=1e-3)
    got, want = _grid_sum(mod, rng, 20_000, 2, (128, 1, 1), 3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def _tile_and_uneven(mod, rng):
    """(got, want) of tile_counter and of uneven_counter."""
    n, block = 64, 96
    x = rng.integers(-50, 50, n + 4).astype(np.int32)
    out = poison(2 * block, np.int32)
    mod.get_function("tile_counter")((2,), (block,), (ac.asarray(x), out, np.int32(n)))
    t = np.arange(block)
    want = sum(x[k + (t + 1) % block % 4].astype(np.int64) * (k + 1) for k in range(0, n, 4))
    tile = out.get(), np.tile(want.astype(np.int32), 2)
    out = poison(2 * block, np.int32)
    mod.get_function("uneven_counter")((2,), (block,), (out,))
    c = 5 * (t & 3)
    return tile, (out.get(), np.tile(c * 10 + c[(t + 1) % block], 2))


def test_counters_alike_in_every_thread(rng):
    for got, want in _tile_and_uneven(_module("counters"), rng):
        np.testing.assert_array_equal(got, want)


def test_without_the_check_an_uneven_counter_would_be_rebuilt_wrongly(rng, monkeypatch):
    """With the check's answer forced to yes, the uneven counter takes thread 0's value
    (so the rebuilding resume is used after a barrier, and the check is what keeps it
    right), while the tile loop's counter, alike in every thread, gives the same sums."""
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")      # (a block program would take the kernel, loops and all)
    force_affine_check(monkeypatch)
    (tile, tile_want), (uneven, uneven_want) = _tile_and_uneven(_module("counters forced"), rng)
    np.testing.assert_array_equal(tile, tile_want)
    assert not np.array_equal(uneven, uneven_want)


# A grid-stride loop whose odd threads step one element further once, at the fourth
# iteration: the induction register holds first + t for the first rounds and not after, so
# the check that a round makes of its own results (rounds.RoundFunction) must send
# the later rounds back to the reloading resume.
LATE_DRIFT = r"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry late_drift(.param .u64 px, .param .u64 pout, .param .u32 pn)
{
    .reg .pred %p<4>;
    .reg .f32 %f<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b8 s[4096];
    ld.param.u64 %rd1, [px];
    ld.param.u64 %rd2, [pout];
    ld.param.u32 %r7, [pn];
    mov.u32 %r1, %ntid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r15, %r2, %r1, %r3;
    mov.u32 %r5, %nctaid.x;
    mul.lo.s32 %r4, %r5, %r1;
    mov.u32 %r8, 0;
    and.b32 %r9, %r3, 1;
    setp.eq.u32 %p2, %r9, 1;
    mov.f32 %f1, 0f00000000;
    setp.ge.s32 %p1, %r15, %r7;
    @%p1 bra DONE;
LOOP:
    mul.wide.s32 %rd3, %r15, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f2, [%rd4];
    add.f32 %f1, %f1, %f2;
    setp.eq.u32 %p3, %r8, 3;
    and.pred %p3, %p3, %p2;
    @%p3 add.s32 %r15, %r15, 1;
    add.s32 %r8, %r8, 1;
    add.s32 %r15, %r15, %r4;
    setp.lt.s32 %p1, %r15, %r7;
    @%p1 bra LOOP;
DONE:
    shl.b32 %r10, %r3, 2;
    mov.u32 %r11, s;
    add.s32 %r12, %r11, %r10;
    st.shared.f32 [%r12], %f1;
    bar.sync 0;
    ld.shared.f32 %f3, [%r12];
    mad.lo.s32 %r13, %r2, %r1, %r3;
    mul.wide.u32 %rd5, %r13, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.f32 [%rd6], %f3;
    ret;
}
"""


@pytest.mark.parametrize("n,grid,nt", [(20_000, 3, 64), (9_000, 2, 96)])
def test_a_form_that_breaks_after_some_rounds(rng, n, grid, nt):
    x = rng.standard_normal(n).astype(np.float32)
    out = poison(grid * nt, np.float32)
    ac.RawModule(ptx=LATE_DRIFT).get_function("late_drift")((grid,), (nt,), (ac.asarray(x), out, np.int32(n)))
    want = np.zeros(grid * nt)
    for g in range(grid * nt):
        i, it = g, 0
        while i < n:
            want[g] += x[i]
            if it == 3 and g % nt & 1:
                i += 1
            it += 1
            i += grid * nt
    np.testing.assert_allclose(out.get(), want, rtol=1e-4, atol=1e-3)
