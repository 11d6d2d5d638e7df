"""Warp regions (compiler/vector/warpregions.py): from a fixed shuffle on, a warp's lanes run as one
vector program, with masks for the lanes that part at branches, until each stops (the end,
a barrier, a shuffle not all lanes reach). References are numpy computations of what each
thread does; outputs are poisoned first. Blocks with a partial warp take the general
rounds, which the same references check."""
import numpy as np
import pytest

import anycuda as ac
from llvmlite import ir
from conformance import made_regions, poison, region_site

SOURCE = r"""
#define FULL 0xffffffffu
__device__ int warp_sum(int v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}

// layernorm's shape in integers (exact): one warp per row of C, warp-stride row loops
// around two warp sums, lane 0 writes the row's totals. C need not be a multiple of 32,
// so the lanes' loops may run different counts.
extern "C" __global__ void rows(const int* x, int* out, int* totals, int N, int C) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    const int* r = x + (size_t)row * C;
    int s = 0;
    for (int i = lane; i < C; i += 32) s += r[i];
    s = warp_sum(s);
    int q = 0;
    for (int i = lane; i < C; i += 32) q += (r[i] - s) * (r[i] ^ i);
    q = warp_sum(q);
    if (lane == 0) {
        totals[2 * row] = s;
        totals[2 * row + 1] = q;
    }
    for (int i = lane; i < C; i += 32) out[(size_t)row * C + i] = r[i] * s + q - i;
}

// lanes part after the shuffles (loops of lane-dependent length reading x out of order, a
// branch by parity, a store through a permutation), meet again at a shuffle of the whole
// warp, then the block's threads pass a barrier and read each other's values
extern "C" __global__ void apart(const int* x, int* out, int* scattered, int n) {
    __shared__ int sh[1024];
    unsigned t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
    int lane = t & 31;
    int v = x[g];
    v += __shfl_xor_sync(FULL, v, 1);
    v += __shfl_xor_sync(FULL, v, 2);
    int acc = 0;
    for (int k = 0; k <= lane % 5; ++k) acc += (v ^ k) + x[g ^ k];
    if (lane & 1) acc = -acc;
    scattered[(g * 7) & (n - 1)] = acc;
    acc += __shfl_down_sync(FULL, acc, 3);
    sh[t] = acc;
    __syncthreads();
    out[g] = sh[blockDim.x - 1 - t] + acc;
}

// float arithmetic a region takes: conversion, division, reciprocal square root
extern "C" __global__ void row_norm(const float* x, float* out, int C) {
    int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const float* r = x + (size_t)row * C;
    float s = 0.0f;
    for (int i = lane; i < C; i += 32) s += r[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
    float m = s / C;
    float v = 0.0f;
    for (int i = lane; i < C; i += 32) v += (r[i] - m) * (r[i] - m);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    float k = rsqrtf(v / C + 1e-5f);
    for (int i = lane; i < C; i += 32) out[(size_t)row * C + i] = (r[i] - m) * k;
}

// reduce's shape: a grid-stride loop, then a warp sum. The loop has a yield at its back
// edge (the rounds run one iteration for all threads at a time); the entry region runs a
// warp's whole loop through the yields, in lockstep, and stops at the first shuffle
extern "C" __global__ void grid_sums(const int* x, int* out, int n) {
    int v = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        v += x[i] ^ i;
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) >> 5] = v;
}

// an atomic after the shuffles and no loop: no region (the rounds vectorise straight code)
extern "C" __global__ void counted(const int* x, int* out, int* count) {
    unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
    int v = warp_sum(x[g]);
    out[g] = v + atomicAdd(count, 1) * 0;
}
"""


def _warp_sum(v):
    """Per warp (rows of 32 lanes) the butterfly sum every lane ends with."""
    return np.repeat(v.reshape(-1, 32).sum(axis=1, dtype=np.int64), 32)


def _rows_reference(x, N, C):
    x = x.reshape(N, C).astype(np.int64)
    i = np.arange(C)
    s = x.sum(axis=1)
    q = ((x - s[:, None]) * (x ^ i)).sum(axis=1)
    wrap = lambda a: a.astype(np.int64).astype(np.uint32).astype(np.int32)
    out = x * s[:, None] + q[:, None] - i
    return wrap(out).ravel(), wrap(np.stack([s, q], axis=1)).ravel()


@pytest.mark.parametrize("C", [768, 100, 31, 1])
@pytest.mark.parametrize("rows_per_block", [4, 1])
def test_warp_stride_rows(rng, C, rows_per_block):
    N = 9
    x = rng.integers(-1000, 1000, N * C).astype(np.int32)
    out, totals = poison(N * C, np.int32), poison(2 * N, np.int32)
    grid = -(-N // rows_per_block)
    ac.RawModule(code=SOURCE).get_function("rows")(
        (grid,), (32 * rows_per_block,), (ac.asarray(x), out, totals, np.int32(N), np.int32(C)))
    want_out, want_totals = _rows_reference(x, N, C)
    np.testing.assert_array_equal(totals.get(), want_totals)
    np.testing.assert_array_equal(out.get(), want_out)


def _apart_reference(x, block):
    n = x.size
    g = np.arange(n)
    lane = g % 32
    v = x.astype(np.int64).reshape(-1, 32)
    v = v + v[:, np.arange(32) ^ 1]
    v = (v + v[:, np.arange(32) ^ 2]).ravel()
    acc = np.zeros(n, np.int64)
    for k in range(5):
        take = k <= lane % 5
        acc += np.where(take, (v ^ k) + x[g ^ k], 0)
    acc = np.where(lane & 1, -acc, acc)
    scattered = np.empty(n, np.int64)
    scattered[(g * 7) & (n - 1)] = acc
    a = acc.reshape(-1, 32)
    src = np.arange(32) + 3
    down = np.where(src < 32, a[:, np.minimum(src, 31)], a)
    acc = (a + down).ravel()
    t = g % block
    partner = g - t + (block - 1 - t)
    return (acc[partner] + acc).astype(np.int32), scattered.astype(np.int32)


@pytest.mark.parametrize("block", [256, 64, 128])
def test_lanes_that_part_and_meet_again(rng, block):
    # a multiple of the block; (7 g) & (n - 1) is a permutation when n is a power of two
    n = 2048
    x = rng.integers(-(1 << 16), 1 << 16, n).astype(np.int32)
    out = poison(n, np.int32)
    scattered = poison(n, np.int32)
    ac.RawModule(code=SOURCE).get_function("apart")(
        (n // block,), (block,), (ac.asarray(x), out, scattered, np.int32(n)))
    want, want_scattered = _apart_reference(x, block)
    np.testing.assert_array_equal(out.get(), want)
    if n & (n - 1) == 0:
        np.testing.assert_array_equal(scattered.get(), want_scattered)


def _row_norm_reference(x):
    x64 = x.astype(np.float64)
    m = x64.mean(axis=1, keepdims=True)
    return (x64 - m) / np.sqrt(((x64 - m) ** 2).mean(axis=1, keepdims=True) + 1e-5)


def _row_norm(x, tag=""):
    N, C = x.shape
    out = poison(N * C, np.float32)
    ac.RawModule(code=SOURCE + tag).get_function("row_norm")((N // 4,), (128,), (ac.asarray(x), out, np.int32(C)))
    return out.get().reshape(N, C)


def test_float_rows(rng):
    x = (rng.standard_normal((16, 200)) + 0.5).astype(np.float32)
    np.testing.assert_allclose(_row_norm(x), _row_norm_reference(x), rtol=1e-4, atol=1e-5)


def test_an_atomic_after_a_run(rng):
    n = 256
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out, count = poison(n, np.int32), ac.asarray(np.zeros(1, np.int32))
    ac.RawModule(code=SOURCE).get_function("counted")((2,), (128,), (ac.asarray(x), out, count))
    np.testing.assert_array_equal(out.get(), _warp_sum(x).astype(np.int32))
    assert count.get()[0] == n


def test_regions_are_made_where_loops_follow_a_run():
    """A region per kernel whose run of shuffles is followed by a loop; none for `counted`.
    (Each region function is named after its kernel's index and its first shuffle's site.)"""
    assert set(made_regions(SOURCE)[0]) == {"rows", "apart", "row_norm", "grid_sums"}


def test_the_region_is_what_runs(rng, monkeypatch):
    """With the region's stores made no-ops (and a fresh compile), full warps leave their
    outputs poisoned: the lanes went through the region function, not the step function."""
    from anycuda.compiler.vector import warpregions
    monkeypatch.setenv("ANYCUDA_CACHE", "0")
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")      # (a block program would take the kernel, loops and all)
    monkeypatch.setattr(warpregions, "REGION_OPS", dict(warpregions.REGION_OPS, st=lambda w, st: None))
    N, C = 8, 64
    x = rng.integers(-1000, 1000, N * C).astype(np.int32)
    out, totals = poison(N * C, np.int32), poison(2 * N, np.int32)
    ac.RawModule(code=SOURCE + "// stores dropped\n").get_function("rows")(
        (N // 4,), (128,), (ac.asarray(x), out, totals, np.int32(N), np.int32(C)))
    want_out, want_totals = _rows_reference(x, N, C)
    assert not np.array_equal(out.get(), want_out)
    assert not np.array_equal(totals.get(), want_totals)


def _grid_sums(x, grid, block, tag=""):
    """(got, want) of grid_sums: per warp, the sum of its lanes' grid-stride sums."""
    n = x.size
    out = poison(grid * block // 32, np.int32)
    ac.RawModule(code=SOURCE + tag).get_function("grid_sums")((grid,), (block,), (ac.asarray(x), out, np.int32(n)))
    i = np.arange(n)
    per_thread = np.bincount(i % (grid * block), weights=x ^ i, minlength=grid * block).astype(np.int64)
    return out.get(), per_thread.reshape(-1, 32).sum(axis=1).astype(np.int32)


@pytest.mark.parametrize("grid,block", [(3, 256), (5, 96), (2, 32)])
def test_grid_stride_loop_through_yields(rng, grid, block):
    """Trip counts differ between lanes (n is no multiple of the grid), and a warp's last
    iteration may end part of the way through it."""
    for n in (grid * block * 7 + int(rng.integers(1, grid * block)), grid * block - 5, 0):
        x = rng.integers(-(1 << 16), 1 << 16, max(n, 1))[:n].astype(np.int32)
        got, want = _grid_sums(x, grid, block)
        np.testing.assert_array_equal(got, want)


def _reverse_lockstep_loads(monkeypatch):
    """Make lockstep's loads through a strided address reverse the lanes (with a fresh
    compile): code that ran in lockstep then gives wrong results. Returns the real loader."""
    from anycuda.compiler.vector import warpregions
    monkeypatch.setenv("ANYCUDA_CACHE", "0")
    real = warpregions.WarpRegion.load_lanes

    def reversed_lanes(self, *args):
        return [self.b.shuffle_vector(v, ir.Constant(v.type, None),
                                      ir.Constant(ir.VectorType(ir.IntType(32), 32), list(range(31, -1, -1))))
                for v in real(self, *args)]
    monkeypatch.setattr(warpregions.WarpRegion, "load_lanes", reversed_lanes)
    return real


def test_the_grid_stride_loop_runs_in_the_region(rng, monkeypatch):
    """With lockstep's loads made to reverse the lanes the sums come out wrong (each x[i]
    meets another i): the region, in lockstep, ran the loop, not the rounds between its
    yields."""
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")      # (a block program would take the kernel, loops and all)
    _reverse_lockstep_loads(monkeypatch)
    x = rng.integers(1, 1 << 16, 3 * 256 * 5).astype(np.int32)
    got, want = _grid_sums(x, 3, 256, "// lanes reversed\n")
    assert not np.array_equal(got, want)


# Kernels without barriers or shuffles whose threads loop: each warp runs from the start as
# one region (warpregions.EntryRegion) when the block is whole warps, else thread by thread.
ENTRY_SOURCE = r"""
// scan's last kernel: a block-stride loop, a guard on n, one total per block read by every lane
extern "C" __global__ void add_totals(int* out, const int* totals, int n, int per) {
    if (blockIdx.x == 0) return;
    int add = totals[blockIdx.x - 1];
    int base = blockIdx.x * per;
    for (int k = threadIdx.x; k < per; k += blockDim.x)
        if (base + k < n) out[base + k] += add;
}

// lanes part: some leave at once, the others loop counts of their own, reading x out of
// order; the block may be two-dimensional
extern "C" __global__ void walk(const int* x, int* out, int mask) {
    int t = threadIdx.y * blockDim.x + threadIdx.x;
    int g = blockIdx.x * blockDim.x * blockDim.y + t;
    if ((g & 7) == 3) return;
    int s = threadIdx.x * 3 + threadIdx.y;
    for (int i = 0; i < (g & 3) + (int)threadIdx.y; ++i) s += x[(g * 13 + i * 7) & mask] ^ i;
    out[g] = s;
}

// a bitonic sort step: stores under a branch of each thread's own through a partner's
// index, i ^ j (a region without a loop: lockstep stores them as masked vectors)
extern "C" __global__ void exchange(float* data, int j, int k) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned l = i ^ j;
    if (l > i) {
        float a = data[i], b = data[l];
        if ((a > b) == ((i & k) == 0)) {
            data[i] = b;
            data[l] = a;
        }
    }
}

// the same step where the array ends inside a warp (n not a multiple of 32): a lane whose
// partner is past the end skips it, so lanes part at two branches before the loads
extern "C" __global__ void exchange_upto(float* data, int j, int k, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned l = i ^ j;
    if (l > i && l < n) {
        float a = data[i], b = data[l];
        if ((a > b) == ((i & k) == 0)) {
            data[i] = b;
            data[l] = a;
        }
    }
}

// lanes part at nested branches that write a register read after them, in a loop
extern "C" __global__ void nested(const int* x, int* out, int mask, int rounds) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    int s = x[g];
    for (int r = 0; r < rounds; ++r) {
        int v = s;
        if (x[(g + r) & mask] & 1) {
            v = v * 3 + r;
            if (v & 2) { v ^= 0x55; out[g] = r; }
        }
        s = v + 1;
    }
    out[g] = s;
}

// no loop: the loop over threads vectorises it as it is, no region
extern "C" __global__ void straight(const int* x, int* out) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    out[g] = x[g] * 3;
}
"""


def _add_totals_reference(out, totals, n, per):
    want = out.astype(np.int64)
    for blk in range(1, -(-n // per)):
        lo, hi = blk * per, min((blk + 1) * per, n)
        want[lo:hi] += totals[blk - 1]
    return want.astype(np.int32)


@pytest.mark.parametrize("block", [256, 96, 100])
@pytest.mark.parametrize("per", [1024, 300])
def test_entry_region_block_stride_loop(rng, block, per):
    """Blocks of 256 and 96 threads run as warps, 100 threads (a partial warp) thread by
    thread; per = 300 leaves lanes of the last iteration outside the loop, and n the last
    block's tail outside the guard. Past n the array stays as it was."""
    n = 7 * per + int(rng.integers(1, per))
    blocks = -(-n // per)
    start = rng.integers(-1000, 1000, blocks * per + 64).astype(np.int32)
    totals = rng.integers(-1000, 1000, blocks).astype(np.int32)
    out = ac.asarray(start)
    ac.RawModule(code=ENTRY_SOURCE).get_function("add_totals")(
        (blocks,), (block,), (out, ac.asarray(totals), np.int32(n), np.int32(per)))
    got = out.get()
    np.testing.assert_array_equal(got[:n], _add_totals_reference(start[:n], totals, n, per))
    np.testing.assert_array_equal(got[n:], start[n:])


def _walk_reference(x, bx, by, blocks):
    mask = x.size - 1
    total = bx * by * blocks
    g = np.arange(total)
    t = g % (bx * by)
    tx, ty = t % bx, t // bx
    s = (tx * 3 + ty).astype(np.int64)
    for i in range(3 + by):
        take = i < (g & 3) + ty
        s += np.where(take, x[(g * 13 + i * 7) & mask].astype(np.int64) ^ i, 0)
    return s.astype(np.int32), (g & 7) == 3


@pytest.mark.parametrize("bx,by", [(32, 1), (128, 1), (64, 2), (16, 4), (8, 3)])
def test_entry_region_lanes_part(rng, bx, by):
    """Lanes leave early and loop counts of their own; blocks 64 x 2 (a warp's x wraps once)
    and 16 x 4 (several times) give the lanes' two-dimensional index, 8 x 3 is not whole
    warps. Threads that left keep their outputs poisoned."""
    x = rng.integers(-(1 << 16), 1 << 16, 1024).astype(np.int32)
    blocks = 5
    out = poison(bx * by * blocks, np.int32)
    ac.RawModule(code=ENTRY_SOURCE).get_function("walk")(
        (blocks,), (bx, by), (ac.asarray(x), out, np.int32(x.size - 1)))
    want, left = _walk_reference(x, bx, by, blocks)
    got = out.get()
    np.testing.assert_array_equal(got[~left], want[~left])
    assert (got[left] == poison(1, np.int32).get()[0]).all()


def test_entry_regions_are_made_where_threads_loop():
    made = {kernel for kernel, fns in made_regions(ENTRY_SOURCE)[0].items() if 0 in map(region_site, fns)}
    assert made == {"add_totals", "walk", "exchange", "exchange_upto", "nested"}


@pytest.mark.parametrize("block", [256, 96])
@pytest.mark.parametrize("j,k", [(64, 128), (1024, 2048), (32, 4096), (16, 32), (1, 2), (48, 256)])
def test_entry_region_exchanges(rng, block, j, k):
    """One compare-exchange step of a bitonic sort against numpy: j a multiple of 32 (each
    warp's partners consecutive: masked vector loads and stores in lockstep), j below 32
    (partners in the same warp: the flipped form's check fails, the lanes leave lockstep)
    and 48 (neither)."""
    n = 96 * 64
    x = rng.standard_normal(n).astype(np.float32)
    data = ac.asarray(x)
    ac.RawModule(code=ENTRY_SOURCE).get_function("exchange")((n // block,), (block,), (data, np.int32(j), np.int32(k)))
    want = x.copy()
    i = np.arange(n)
    l = i ^ j
    first = l > i
    a, b = x[i[first]], x[l[first]]
    swap = (a > b) == ((i[first] & k) == 0)
    want[i[first][swap]], want[l[first][swap]] = b[swap], a[swap]
    np.testing.assert_array_equal(data.get(), want)


def _exchange_reference(x, j, k, n=None):
    n = x.size if n is None else n
    want = x.copy()
    i = np.arange(n)
    l = i ^ j
    first = (l > i) & (l < n)
    a, b = x[i[first]], x[l[first]]
    swap = (a > b) == ((i[first] & k) == 0)
    want[i[first][swap]], want[l[first][swap]] = b[swap], a[swap]
    return want


def test_partners_in_a_warp_are_one_permuted_window(rng, monkeypatch):
    """Where j < 32 the flipped check fails and the region made for partners in the same
    warp runs: the partner's element is one load of the warp's 32 elements, permuted lane
    by lane ^ j. With the permutation made to do nothing (a fresh compile) the step comes
    out wrong for j < 32, and stays right for j = 64 (the strided region, no window)."""
    from anycuda.compiler.vector import warpregions
    monkeypatch.setenv("ANYCUDA_CACHE", "0")
    monkeypatch.setattr(warpregions.WarpRegion, "_permute_lanes", lambda self, v, u: v)
    k = ac.RawModule(code=ENTRY_SOURCE + "// not permuted\n").get_function("exchange")
    n = 4096
    for j, right in ((1, False), (16, False), (64, True)):
        x = rng.standard_normal(n).astype(np.float32)
        data = ac.asarray(x)
        k((n // 256,), (256,), (data, np.int32(j), np.int32(4096)))
        assert np.array_equal(data.get(), _exchange_reference(x, j, 4096)) == right, j


@pytest.mark.parametrize("j", [1, 2, 8, 16, 32])
def test_partner_windows_that_do_not_hold(rng, j):
    """The window is the aligned one around lane 0's address: an array one element off that
    alignment goes lane by lane; an array that ends inside a warp leaves the lanes past its
    end out of the masked load and store (the elements past n stay as they were)."""
    n, k = 2048, 64
    x = rng.standard_normal(n + 64).astype(np.float32)
    data = ac.asarray(x)
    ac.RawModule(code=ENTRY_SOURCE).get_function("exchange")(
        (n // 128,), (128,), (np.uint64(data.data.ptr + 4), np.int32(j), np.int32(k)))
    got = data.get()
    np.testing.assert_array_equal(got[1:n + 1], _exchange_reference(x[1:n + 1], j, k))
    assert got[0] == x[0] and np.array_equal(got[n + 1:], x[n + 1:])
    for end in (n - 7, n - 32 + 1):
        data = ac.asarray(x)
        ac.RawModule(code=ENTRY_SOURCE).get_function("exchange_upto")(
            (n // 128,), (128,), (data, np.int32(j), np.int32(k), np.uint32(end)))
        want = x.copy()
        want[:end] = _exchange_reference(x[:end], j, k)
        np.testing.assert_array_equal(data.get(), want)


def test_nested_branches_in_lockstep(rng):
    """Lanes part at a branch whose skipped code branches again to the same place: both run
    in lockstep under masks, and the register they write keeps the skipping lanes' values."""
    n = 8 * 128
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poison(n, np.int32)
    ac.RawModule(code=ENTRY_SOURCE).get_function("nested")((8,), (128,), (ac.asarray(x), out, np.int32(n - 1), np.int32(3)))
    g = np.arange(n)
    s = x.astype(np.int64)
    for r in range(3):
        v = s.copy()
        odd = (x[(g + r) & (n - 1)] & 1) == 1
        v = np.where(odd, v * 3 + r, v)
        v = np.where(odd & ((v & 2) != 0), v ^ 0x55, v)
        s = v + 1
    np.testing.assert_array_equal(out.get(), s.astype(np.int32))


def test_entry_regions_store_stop_codes_only_where_they_are_read():
    """A kernel without sites (its warps run start to end in the region) reads no stop codes:
    its region stores none (a 128-byte store per warp cost bitonic sort 6%); one with sites
    (grid_sums' grid-stride loop) hands its lanes' stops to the scheduler through them."""
    without, with_sites = made_regions(ENTRY_SOURCE)[0], made_regions(SOURCE)[0]
    for kernel, made, stores in (("exchange", without, False), ("add_totals", without, False),
                                 ("walk", without, False), ("grid_sums", with_sites, True)):
        (region,) = made[kernel]
        assert _reads_codes(region) is stores, kernel


def _reads_codes(region) -> bool:
    """Whether region function `region` (or the one for partners it hands a warp to) uses its
    stop codes' pointer."""
    codes = region.args[6]
    for blk in region.blocks:
        for ins in blk.instructions:
            if codes in getattr(ins, "operands", ()):
                callee = getattr(ins, "callee", None)
                if not (isinstance(callee, ir.Function) and callee.name.endswith(".partners")) \
                        or _reads_codes(callee):
                    return True
    return False


def test_the_entry_region_is_what_runs(rng, monkeypatch):
    """With the region's stores made no-ops, blocks of whole warps leave the output as it was,
    a block with a partial warp (thread by thread) does not."""
    from anycuda.compiler.vector import warpregions
    monkeypatch.setenv("ANYCUDA_CACHE", "0")
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")      # (a block program would take the kernel, loops and all)
    monkeypatch.setattr(warpregions, "REGION_OPS", dict(warpregions.REGION_OPS, st=lambda w, st: None))
    k = ac.RawModule(code=ENTRY_SOURCE + "// stores dropped\n").get_function("add_totals")
    per, n = 512, 4 * 512
    totals = np.arange(1, 5, dtype=np.int32)
    for block, changed in ((128, False), (100, True)):
        out = ac.asarray(np.zeros(n, np.int32))
        k((4,), (block,), (out, ac.asarray(totals), np.int32(n), np.int32(per)))
        assert (out.get()[per:] != 0).all() == changed


# Lockstep (warpregions, compiler/vector/laneshapes.py): where a warp's lanes run together, the
# registers they hold as base + lane * stride are one scalar. The forms that rely on a
# condition (no lane wraps when widened, none carries past a warp's bits) must leave lockstep
# when it fails, mid-piece, and give the same answers.
LOCKSTEP_SOURCE = r"""
#define FULL 0xffffffffu
extern "C" __global__ void straddle(const int* x, int* out, unsigned bias, int C) {
    unsigned t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
    int v = x[g];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    unsigned w = t + bias;          // widened below: wraps past 2^32 in some lanes for a large bias
    unsigned q = w >> 5;            // alike in a warp only when bias is a multiple of 32
    long long acc = 0;
    for (int k = 0; k < C; ++k)
        acc += (long long)(size_t)(w + k) * 3 + q * k + x[(t * 7 + k) % 64];
    out[g] = (int)(acc ^ (acc >> 32)) + v;
}

// lanes part at forward branches and meet again: a store by one lane, by five, a value some
// lanes change; in lockstep the skipped code runs for the others under a mask
extern "C" __global__ void some_lanes(const int* x, int* out, int* firsts, int C) {
    int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int rows = gridDim.x * (blockDim.x >> 5);
    const int* r = x + (size_t)row * C;
    int s = 0;
    for (int i = lane; i < C; i += 32) s += r[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
    if (lane == 0) firsts[row] = s + r[0];
    if (lane < 5) firsts[rows + row * 5 + lane] = r[lane * 2] ^ s;
    for (int i = lane; i < C; i += 32) {
        int v = r[i];
        if (v > 0) { v = v * 3 + r[i + 1 < C ? i + 1 : 0]; firsts[6 * rows + row] = i; }
        out[(size_t)row * C + i] = v + s;
    }
}

"""


def _straddle_reference(x, block, bias, C):
    n = x.size
    g = np.arange(n, dtype=np.int64)
    t = g % block
    v = np.repeat(x.astype(np.int64).reshape(-1, 32).sum(axis=1), 32)
    w = (t + bias) % 2 ** 32
    q = w >> 5
    acc = np.zeros(n, np.int64)
    for k in range(C):
        acc += ((w + k) % 2 ** 32) * 3 + (q * k) % 2 ** 32 + x[(t * 7 + k) % 64]
    mixed = (acc ^ (acc >> 32)) % 2 ** 32
    return ((mixed + v) % 2 ** 32).astype(np.uint32).astype(np.int32)


@pytest.mark.parametrize("bias", [0, 3, 2 ** 32 - 16, 2 ** 32 - 100])
def test_lockstep_conditions_that_fail(rng, bias):
    block, C = 128, 5
    x = rng.integers(-1000, 1000, 4 * block).astype(np.int32)
    out = poison(x.size, np.int32)
    ac.RawModule(code=LOCKSTEP_SOURCE).get_function("straddle")(
        (4,), (block,), (ac.asarray(x), out, np.uint32(bias), np.int32(C)))
    np.testing.assert_array_equal(out.get(), _straddle_reference(x, block, bias, C))


def test_lockstep_is_what_runs(rng, monkeypatch):
    """With lockstep's loads through a strided address made to reverse the lanes (and a
    fresh compile), the rows come out wrong: the whole warp ran its row loops in lockstep,
    one vector load per row step. Lockstep never entered (every warp through the masked
    copy) gives the right rows too."""
    from anycuda.compiler.vector import warpregions
    monkeypatch.setenv("ANYCUDA_CACHE", "0")
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")      # (a block program would take the kernel, loops and all)
    x = (rng.standard_normal((8, 96)) + 0.5).astype(np.float32)
    want = _row_norm_reference(x)
    np.testing.assert_allclose(_row_norm(x, "// as written\n"), want, rtol=1e-4, atol=1e-5)
    real = _reverse_lockstep_loads(monkeypatch)
    assert not np.allclose(_row_norm(x, "// reversed\n"), want, rtol=1e-4, atol=1e-5)
    monkeypatch.setattr(warpregions.WarpRegion, "load_lanes", real)
    monkeypatch.setattr(warpregions.WarpRegion, "_strides_hold", lambda self, registers: ir.Constant(ir.IntType(1), 0))
    np.testing.assert_allclose(_row_norm(x, "// never in lockstep\n"), want, rtol=1e-4, atol=1e-5)


def test_lanes_part_and_stay_in_lockstep(rng):
    N, C = 8, 96
    x = rng.integers(-1000, 1000, N * C).astype(np.int32)
    out, firsts = poison(N * C, np.int32), poison(7 * N, np.int32)
    ac.RawModule(code=LOCKSTEP_SOURCE).get_function("some_lanes")(
        (N // 4,), (128,), (ac.asarray(x), out, firsts, np.int32(C)))
    r = x.reshape(N, C).astype(np.int64)
    s = r.sum(axis=1)
    i = np.arange(C)
    v = np.where(r > 0, r * 3 + r[:, (i + 1) % C], r)
    np.testing.assert_array_equal(out.get(), ((v + s[:, None]) % 2 ** 32).astype(np.uint32).astype(np.int32).ravel())
    got = firsts.get()
    np.testing.assert_array_equal(got[:N], (s + r[:, 0]).astype(np.int32))
    np.testing.assert_array_equal(got[N:6 * N].reshape(N, 5), (r[:, 0:10:2] ^ s[:, None]).astype(np.int32))
    # the index of one of the row's positive elements (lanes' stores to one address are not
    # ordered: any of them may be the one left)
    for row, i in zip(r, got[6 * N:]):
        assert 0 <= i < C and row[i] > 0


# A loop in lockstep whose branch orders a strided index against a value alike in every
# lane: lanes 0 and 31 decide whether every lane or none takes it, unless the lanes'
# indices wrap (an unsigned index near 2^32), where they do not.
ENDS_PTX = """
.version 7.0
.target sm_50
.address_size 64
.visible .entry counts(.param .u64 out, .param .u32 start, .param .u32 n)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [start];
    ld.param.u32 %r2, [n];
    mov.u32 %r3, %tid.x;
    add.u32 %r4, %r1, %r3;
    mov.u32 %r5, 0;
    mov.u32 %r6, 0;
$loop:
    setp.ge.u32 %p1, %r4, %r2;
    @%p1 bra $skip;
    add.u32 %r5, %r5, %r6;
    add.u32 %r5, %r5, 1;
$skip:
    add.u32 %r4, %r4, 32;
    add.u32 %r6, %r6, 1;
    setp.lt.u32 %p2, %r6, 4;
    @%p2 bra $loop;
    mul.wide.u32 %rd2, %r3, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    ret;
}
"""


@pytest.mark.parametrize("start,n", [(0xFFFFFFF0, 0xFFFFFFF8), (0xFFFFFFE8, 0xFFFFFFF4), (100, 130), (5, 1000),
                                     (1000, 5), (0xFFFFFFFF, 0)])
def test_branches_decided_by_the_end_lanes(start, n):
    """count = sum over k < 4 of (k + 1) where (start + t + 32k) mod 2^32 < n: lanes that wrap
    (the first two), lanes that part, every lane in, none."""
    out = poison(64, np.int32)
    ac.RawModule(ptx=ENDS_PTX, name="ends.ptx").get_function("counts")((1,), (64,), (out, np.uint32(start), np.uint32(n)))
    i = (start + np.arange(64)[:, None] + 32 * np.arange(4)[None, :]) % 2 ** 32
    np.testing.assert_array_equal(out.get(), ((i < n) * np.arange(1, 5)).sum(axis=1))


# After a loop of barriers, a register written in the region's first piece and then by a
# guarded instruction whose guard is false in every lane: no piece reads the register
# after this one (a temporary), but the guard must still keep the value its lanes had (the
# guarded add was done in every lane). Found by tests/ptx_generators.py.
GUARDED_TEMPORARY = """.version 8.0
.target sm_80
.address_size 64
.visible .entry guarded_temp(.param .u64 out)
{
    .reg .pred %p<2>; .reg .b32 %r<9>; .reg .b64 %rd<4>;
    .shared .align 4 .b32 sh[1024];
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    mad.lo.u32 %r2, %r1, 11, 31676;
    mad.lo.u32 %r3, %r1, 9, 23757;
    mad.lo.u32 %r4, %r1, 7, 15838;
    shl.b32 %r6, %r1, 2;
    mov.u32 %r7, sh;
    add.u32 %r7, %r7, %r6;
    mov.u32 %r8, 0;
$L:
    st.shared.u32 [%r7], %r1;
    bar.sync 0;
    add.u32 %r8, %r8, 1;
    setp.lt.u32 %p1, %r8, 2;
    @%p1 bra $L;
    and.b32 %r4, %r1, %r2;
    setp.ne.u32 %p1, %r2, 9939;
    @!%p1 add.u32 %r4, %r4, %r3;
    st.global.u32 [%rd3], %r4;
    ret;
}
"""


@pytest.mark.parametrize("block", [32, 64, 40])
def test_a_guard_keeps_a_temporary(block):
    k = ac.RawModule(ptx=GUARDED_TEMPORARY, name="guarded_temp.ptx").get_function("guarded_temp")
    out = poison(block, np.uint32)
    k((1,), (block,), (out,))
    t = np.arange(block, dtype=np.uint32)
    np.testing.assert_array_equal(out.get(), t & (t * 11 + 31676))


CHAINS_SOURCE = r"""
// a thread per linked list: each turn reads vals[j], x[cols[j]] and next[j] at addresses the
// last turn loaded (gathers, not a walk through memory of its own: analysis/walks.py), the
// lists of different lengths (lanes leave)
extern "C" __global__ void chain_sums(int n, const int* first, const int* next, const int* cols, const int* vals,
                                      const int* x, int* y) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n) {
        int sum = 0;
        for (int j = first[row]; j >= 0; j = next[j]) sum += vals[j] * x[cols[j]];
        y[row] = sum;
    }
}
"""


@pytest.mark.parametrize("block", [128, 96])
def test_gathers_of_a_list_per_thread(rng, block):
    """The entry region's gathers (one masked gather per access, the lanes that left the loop
    masked off) against numpy's sums, in integers (exact); lists of 0 to 70 entries, their
    entries in a random order."""
    made = made_regions(CHAINS_SOURCE)[0]
    assert 0 in map(region_site, made.get("chain_sums", [])), "no entry region for chain_sums"
    n, m = 1000, 300
    lengths = rng.integers(0, 71, n)
    total = int(lengths.sum())
    order = rng.permutation(total)                 # entry k of the lists, in list order, at order[k]
    starts = np.concatenate([[0], np.cumsum(lengths)])
    nxt = np.full(total, -1, np.int32)
    first = np.full(n, -1, np.int32)
    for r in range(n):
        here = order[starts[r]:starts[r + 1]]
        if len(here):
            first[r] = here[0]
            nxt[here[:-1]] = here[1:]
    cols = rng.integers(0, m, total).astype(np.int32)
    vals = rng.integers(-1000, 1000, total).astype(np.int32)
    x = rng.integers(-1000, 1000, m).astype(np.int32)
    want = np.array([(vals[order[a:b]].astype(np.int64) * x[cols[order[a:b]]]).sum()
                     for a, b in zip(starts[:-1], starts[1:])])
    y = poison(n, np.int32)
    k = ac.RawModule(code=CHAINS_SOURCE).get_function("chain_sums")
    k(((n + block - 1) // block,), (block,),
      (np.int32(n), *(ac.asarray(a) for a in (first, nxt, cols, vals, x)), y))
    np.testing.assert_array_equal(y.get(), want.astype(np.int32))


def test_shared_atomics_run_lane_after_lane_in_unrolled_copies(rng):
    """A warp region's atomics on shared memory (a block's histogram) run lane after lane in a
    loop of ATOMIC_LANES_UNROLLED copies of the update (its count and test were half the loop's
    instructions); bins that repeat within a warp, and partial warps at the end, count right."""
    from importlib import resources
    from anycuda.compiler.vector.regionops import ATOMIC_LANES_UNROLLED
    source = resources.files("anycuda.examples").joinpath("histogram.cu").read_text()
    made, mod = made_regions(source)
    assert made["histogram"]
    assert f'!"llvm.loop.unroll.count", i32 {ATOMIC_LANES_UNROLLED}' in str(mod)
    for n in (100_003, 4097):
        data = np.where(rng.random(n) < 0.7, rng.integers(0, 4, n), rng.integers(0, 256, n)).astype(np.uint8)
        bins = ac.asarray(np.zeros(256, np.uint32))
        ac.RawModule(code=source).get_function("histogram")((7,), (256,), (ac.asarray(data), bins, np.int32(n)))
        np.testing.assert_array_equal(bins.get(), np.bincount(data, minlength=256).astype(np.uint32))


# Integer division in a region (regionops._div): a grid-stride loop's `i / C`, `i % C`
# (CuPy's and llm.c's index arithmetic) once kept its kernel out of warp regions, each thread
# walking its whole loop alone.
DIVISION_SOURCE = r"""
extern "C" __global__ void strided_quotients(int* q, int* r, unsigned* uq, const int* d, int n, int C) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        int a = i - n / 2;                      // negative for the first half
        q[i] = a / C * 1000 + a / d[i];         // by the block's divisor and by each thread's own
        r[i] = a % C * 1000 + a % d[i];
        uq[i] = (unsigned)i / (unsigned)C + (unsigned)i % 7u;
    }
}
"""


def test_grid_stride_division_runs_in_the_entry_region():
    assert "strided_quotients" in made_regions(DIVISION_SOURCE)[0]


@pytest.mark.parametrize("C", [768, 37, -5])
@pytest.mark.parametrize("grid, block", [(5, 128), (3, 96), (2, 100)])
def test_grid_stride_division_matches_c(rng, monkeypatch, C, grid, block):
    """Signed quotients and remainders toward zero of negative and positive dividends, by the
    block's divisor (positive or negative) and by each thread's own, and unsigned ones, for
    blocks of whole warps (the region) and with a partial warp (thread by thread)."""
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")      # (a block program would take the kernel, loops and all)
    n = int(rng.integers(3000, 6000))
    d = rng.integers(1, 60, n).astype(np.int32) * rng.choice(np.array([-1, 1], np.int32), n)
    q, r, uq = poison(n, np.int32), poison(n, np.int32), poison(n, np.uint32)
    ac.RawModule(code=DIVISION_SOURCE).get_function("strided_quotients")(
        (grid,), (block,), (q, r, uq, ac.asarray(d), np.int32(n), np.int32(C)))
    a = np.arange(n, dtype=np.int64) - n // 2

    def trunc(x, y):
        quotient = np.sign(x) * np.sign(y) * (np.abs(x) // np.abs(y))
        return quotient, x - quotient * y
    (qc, rc), (qd, rd) = trunc(a, np.int64(C)), trunc(a, d.astype(np.int64))
    np.testing.assert_array_equal(q.get(), qc * 1000 + qd)
    np.testing.assert_array_equal(r.get(), rc * 1000 + rd)
    i = np.arange(n, dtype=np.uint64)
    np.testing.assert_array_equal(uq.get(), i // np.uint64(C % 2 ** 32) + i % np.uint64(7))


# Float and bit forms a region computes as the step function does: __fdividef (div.approx),
# tanhf's and expf's reciprocals (rcp.approx.ftz), copysignf, popc/clz/brev and mad.wide, in a
# grid-stride loop (once, any of them kept the loop out of the region, each thread walking it
# alone: a grid-stride GELU took 11x the time of a thread per element).
FORMS_SOURCE = r"""
extern "C" __global__ void forms(float* f, unsigned* u, const float* x, const float* y,
                                 const unsigned long long* bits, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        float a = x[i], c = y[i];
        f[3 * i] = __fdividef(a, c);
        f[3 * i + 1] = 0.5f * a * (1.0f + tanhf(0.7978845608f * (a + 0.044715f * a * a * a)));
        f[3 * i + 2] = copysignf(c, a) + expf(-fabsf(a)) / (1.0f + expf(c));
        unsigned long long v = bits[i];
        u[3 * i] = __popc((unsigned)v) + 100 * __popcll(v);
        u[3 * i + 1] = __clz((int)(v >> 7)) + 100 * __clzll((long long)v);
        unsigned long long wide;
        long long swide;
        asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(wide) : "r"((unsigned)v), "r"(0x9e3779b9u), "l"(v));
        asm("mad.wide.s32 %0, %1, %2, %3;" : "=l"(swide) : "r"((int)(v >> 32)), "r"(-12345), "l"((long long)v));
        u[3 * i + 2] = __brev((unsigned)v) ^ (unsigned)(__brevll(v) >> 13) ^ (unsigned)(wide >> 17) ^ (unsigned)swide;
    }
}
"""


def test_float_and_bit_forms_run_in_the_entry_region():
    assert "forms" in made_regions(FORMS_SOURCE)[0]


def test_float_and_bit_forms_match_thread_by_thread(rng, monkeypatch):
    """Blocks of whole warps (the region) and blocks with a partial warp (the step function,
    thread by thread) give the same bits, special values included: subnormals, zeros,
    infinities, NaN, divisors past 2^126, and bit patterns of all ones and zero."""
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")      # (a block program would take the kernel, loops and all)
    n = 4000
    specials = np.array([0.0, -0.0, 1e-40, -1e-40, np.inf, -np.inf, np.nan, 3e38, -3e38, 1.0], np.float32)
    x = (rng.standard_normal(n) * 4).astype(np.float32)
    y = (rng.standard_normal(n) * 4).astype(np.float32)
    x[:100] = np.resize(specials, 100)
    y[:100] = np.resize(np.roll(specials, 3), 100)
    bits = rng.integers(0, 2 ** 63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)
    bits[:4] = [0, 2 ** 64 - 1, 1, 2 ** 63]
    k = ac.RawModule(code=FORMS_SOURCE).get_function("forms")
    got = []
    for grid, block in ((4, 128), (5, 100)):
        f, u = poison(3 * n, np.float32), poison(3 * n, np.uint32)
        k((grid,), (block,), (f, u, ac.asarray(x), ac.asarray(y), ac.asarray(bits), np.int32(n)))
        got.append((f.get(), u.get()))
    np.testing.assert_array_equal(got[0][0].view(np.uint32), got[1][0].view(np.uint32))
    np.testing.assert_array_equal(got[0][1], got[1][1])
    v = bits.astype(object)
    popc = [bin(int(b) & 0xFFFFFFFF).count("1") + 100 * bin(int(b)).count("1") for b in v]
    np.testing.assert_array_equal(got[0][1][0::3], popc)

    def signed32(x):
        return (x + 2 ** 31) % 2 ** 32 - 2 ** 31

    def rev(x, n):
        return int(format(x, f"0{n}b")[::-1], 2)
    # (of the signed product's sum only its low 32 bits are kept)
    mixed = [(rev(b & 0xFFFFFFFF, 32) ^ (rev(b, 64) >> 13) ^ (((b & 0xFFFFFFFF) * 0x9E3779B9 + b) % 2 ** 64 >> 17)
              ^ (signed32(b >> 32) * -12345 + b)) % 2 ** 32 for b in map(int, v)]
    np.testing.assert_array_equal(got[0][1][2::3], mixed)
    with np.errstate(all="ignore"):
        close = np.isfinite(x) & np.isfinite(y) & (np.abs(y) > 1e-30) & (np.abs(y) < 2.0 ** 126)
        np.testing.assert_allclose(got[0][0][0::3][close], (x / y)[close], rtol=1e-6)


# nvcc's -use_fast_math (llm.c's build) puts .ftz on every f32 operation; vector forms flush
# subnormal inputs and results as the step function does (warpruns._flushes). Before, any
# .ftz kept a kernel out of warp regions and runs: llm.c's layernorm 93 ms against 1.8.
FAST_MATH_SOURCE = r"""
extern "C" __global__ void fast(float* out, int* flags, const float* x, const float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        float a = x[i], c = y[i];
        float s = a * c + a;                      // a fused multiply-add, flushed
        float t = fmaxf(a, c) - fminf(a, c) * 0.5f;
        float v = a / c + sqrtf(fabsf(c)) + expf(a) + rsqrtf(fabsf(a) + 1.0f);
        out[4 * i] = s;
        out[4 * i + 1] = t;
        out[4 * i + 2] = v;
        out[4 * i + 3] = (a * 1e-20f) * (c * 1e-20f);      // subnormal products flushed to zero
        flags[i] = (a < c) + 2 * (a * c == 0.0f);
    }
}
"""


def test_fast_math_runs_in_regions():
    from anycuda.compiler.lowering.module import ModuleLowering
    from anycuda.cudac import compile_to_ptx
    from anycuda.ptx.parser import parse
    ptx = compile_to_ptx(FAST_MATH_SOURCE, options=("-use_fast_math",), name="fast.cu")
    assert ".ftz.f32" in ptx
    mod = ModuleLowering(parse(ptx, "fast.ptx"), "fast.ptx").lower().mod
    assert any(".region" in fn.name and [blk.name for blk in fn.blocks] != ["unused"] for fn in mod.functions)


def test_fast_math_matches_thread_by_thread(rng, monkeypatch):
    """Whole warps (region and runs) and a block with a partial warp (thread by thread) give
    the same bits, with subnormal inputs and results (flushed to zero both ways)."""
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")      # (a block program would take the kernel, loops and all)
    n = 32 * 97
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    y = (rng.standard_normal(n) * 3).astype(np.float32)
    x[::7] = (rng.standard_normal(x[::7].size) * 1e-39).astype(np.float32)      # subnormals
    y[::11] = np.float32(-1e-40)
    k = ac.RawModule(code=FAST_MATH_SOURCE, options=("-use_fast_math",), name="fast.cu").get_function("fast")
    got = []
    for grid, block in ((3, 128), (4, 100)):
        out, flags = poison(4 * n, np.float32), poison(n, np.int32)
        k((grid,), (block,), (out, flags, ac.asarray(x), ac.asarray(y), np.int32(n)))
        got.append((out.get(), flags.get()))
    region, threads = got
    np.testing.assert_array_equal(region[0].view(np.uint32), threads[0].view(np.uint32))
    np.testing.assert_array_equal(region[1], threads[1])
    tiny = region[0][3::4]
    assert ((tiny == 0) | (np.abs(tiny) >= 2.0 ** -126)).all() and (tiny == 0).sum() > n // 2   # no subnormal
    flushed_x = np.where(np.abs(x) < 2.0 ** -126, np.float32(0), x)
    flushed_y = np.where(np.abs(y) < 2.0 ** -126, np.float32(0), y)
    np.testing.assert_array_equal(region[1] & 1, (flushed_x < flushed_y).astype(np.int32))
