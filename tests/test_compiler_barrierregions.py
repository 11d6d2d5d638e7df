"""Regions from barriers and atomics in regions (compiler/vector/warpregions.py, BarrierRegion and
_atom): after a barrier that the whole block leaves together, each full warp runs on as
vector code where it loops; atomics run lane after lane. References are numpy
computations; outputs are poisoned first. Blocks with a partial warp take the rounds,
which the same references check."""
import numpy as np
import pytest

import anycuda as ac
from conformance import made_regions, poison, region_site

SOURCE = r"""
// histogram's shape: a private histogram per block in shared memory, a grid-stride loop of
// atomic adds after a barrier, merged into the global bins after another
extern "C" __global__ void bins(const unsigned char* data, unsigned* out, int n) {
    __shared__ unsigned h[256];
    int t = threadIdx.y * blockDim.x + threadIdx.x, nt = blockDim.x * blockDim.y;
    for (int i = t; i < 256; i += nt) h[i] = 0;
    __syncthreads();
    for (int i = blockIdx.x * nt + t; i < n; i += gridDim.x * nt)
        atomicAdd(&h[data[i]], 1u);
    __syncthreads();
    for (int i = t; i < 256; i += nt)
        if (h[i]) atomicAdd(&out[i], h[i]);
}

// what atomics return, lane by lane: a counting sort's scatter (each value to the next free
// slot of its bucket, slots taken with shared atomic adds, lanes of a warp often on one
// bucket), tickets from a global counter, claims by compare-and-swap, float sums and
// integer extremes per bucket
extern "C" __global__ void buckets(const int* x, int* slots, int* tickets, int* count, int* claims,
                                   int* won, float* sums, int* lo, int* hi, int n, int cap) {
    __shared__ int fill[16];
    __shared__ float s[16];
    int t = threadIdx.x;
    if (t < 16) { fill[t] = 0; s[t] = 0.0f; }
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) {
        int v = x[i], k = v & 15;
        int at = atomicAdd(&fill[k], 1);
        slots[(blockIdx.x * 16 + k) * cap + at] = v;
        tickets[atomicAdd(count, 1)] = i;
        won[i] = atomicCAS(&claims[v & 1023], -1, i) == -1;
        atomicAdd(&s[k], (float)(v >> 4));
        atomicMin(&lo[k], v);
        atomicMax(&hi[k], v);
    }
    __syncthreads();
    if (t < 16) { atomicAdd(&sums[t], s[t]); }
}

// a barrier followed by straight code only: no region (the rounds vectorise it as it is)
extern "C" __global__ void flip(const int* x, int* out) {
    __shared__ int sh[1024];
    int t = threadIdx.x;
    sh[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = sh[blockDim.x - 1 - t] - t;
}
"""


def _bins(data, grid, block, tag=""):
    out = ac.asarray(np.zeros(256, np.uint32))
    ac.RawModule(code=SOURCE + tag).get_function("bins")((grid,), block, (ac.asarray(data), out, np.int32(data.size)))
    return out.get()


@pytest.mark.parametrize("grid,block", [(3, (256, 1)), (5, (100, 1)), (2, (32, 1)), (4, (16, 16))])
def test_shared_atomics_after_a_barrier(rng, grid, block):
    """Uneven trip counts, a skewed distribution (the lanes of a warp often add to one bin),
    n shorter than the grid, none; a 2D block."""
    for n in (int(rng.integers(20_000, 30_000)), grid * block[0] * block[1] - 7, 0):
        data = np.minimum(rng.exponential(20.0, n), 255).astype(np.uint8)
        np.testing.assert_array_equal(_bins(data, grid, block), np.bincount(data, minlength=256))


def _buckets(x, grid, block, tag=""):
    n, cap = x.size, x.size
    slots, tickets = poison(grid * 16 * cap, np.int32), poison(n, np.int32)
    count, claims = ac.asarray(np.zeros(1, np.int32)), ac.asarray(np.full(1024, -1, np.int32))
    won, sums = poison(n, np.int32), ac.asarray(np.zeros(16, np.float32))
    lo, hi = ac.asarray(np.full(16, 1 << 30, np.int32)), ac.asarray(np.full(16, -(1 << 30), np.int32))
    ac.RawModule(code=SOURCE + tag).get_function("buckets")(
        (grid,), (block,), (ac.asarray(x), slots, tickets, count, claims, won, sums, lo, hi, np.int32(n), np.int32(cap)))
    return dict(slots=slots.get().reshape(grid, 16, cap), tickets=tickets.get(), count=count.get()[0],
                claims=claims.get(), won=won.get(), sums=sums.get(), lo=lo.get(), hi=hi.get())


@pytest.mark.parametrize("grid,block", [(2, 256), (3, 100), (1, 64)])
def test_what_atomics_return(rng, grid, block):
    n = int(rng.integers(3000, 4000))
    x = rng.integers(0, 1 << 14, n).astype(np.int32)
    got = _buckets(x, grid, block)
    i = np.arange(n)
    k = x & 15
    owner = (i // block) % grid                   # the block whose grid-stride loop takes i
    poisoned = poison(1, np.int32).get()[0]
    for blk in range(grid):
        for key in range(16):
            mine = np.sort(x[(owner == blk) & (k == key)])
            row = got["slots"][blk, key]
            # each slot taken once, in order from 0: the values of the bucket, the rest untouched
            np.testing.assert_array_equal(np.sort(row[:mine.size]), mine)
            assert (row[mine.size:] == poisoned).all()
    assert got["count"] == n
    np.testing.assert_array_equal(np.sort(got["tickets"]), i)
    claimed = np.unique(x & 1023)
    assert (got["claims"][np.setdiff1d(np.arange(1024), claimed)] == -1).all()
    winners = got["claims"][claimed]
    np.testing.assert_array_equal(x[winners] & 1023, claimed)        # a thread of that key
    np.testing.assert_array_equal(np.sort(i[got["won"] == 1]), np.sort(winners))
    assert set(np.unique(got["won"])) <= {0, 1}
    sums = np.bincount(k, weights=x >> 4, minlength=16)               # exact in float32 (< 2^24)
    np.testing.assert_array_equal(got["sums"], sums.astype(np.float32))
    present = np.bincount(k, minlength=16) > 0
    for key in np.flatnonzero(present):
        assert got["lo"][key] == x[k == key].min() and got["hi"][key] == x[k == key].max()


def test_straight_code_after_a_barrier(rng):
    x = rng.integers(-1000, 1000, 512).astype(np.int32)
    out = poison(512, np.int32)
    ac.RawModule(code=SOURCE).get_function("flip")((2,), (256,), (ac.asarray(x), out))
    np.testing.assert_array_equal(out.get(), x.reshape(2, 256)[:, ::-1].ravel() - np.tile(np.arange(256), 2))


def test_regions_are_made_after_barriers_where_threads_loop():
    """bins: one after each barrier, and one from its start (its zeroing loop's trip count is
    an integer division, which regions take); buckets: one after its first barrier (the one
    after its second has no loop); flip: none."""
    regions, mod = made_regions(SOURCE)
    made = {kernel: sorted(map(region_site, fns)) for kernel, fns in regions.items()}
    assert set(made) == {"bins", "buckets"}
    assert len(made["bins"]) == 3 and made["bins"][0] == 0
    assert len(made["buckets"]) == 1 and made["buckets"][0] != 0
    # the strided loads of a region's loops are prefetched ahead
    assert any(fn.name.startswith("llvm.prefetch") for fn in mod.functions)


def test_the_barrier_region_is_what_runs(rng, monkeypatch):
    """With the region's atomics made no-ops (and a fresh compile), blocks of full warps count
    nothing after the barrier; a block with a partial warp goes through the rounds and counts
    right."""
    from anycuda.compiler.vector import warpregions
    monkeypatch.setenv("ANYCUDA_CACHE", "0")
    monkeypatch.setattr(warpregions, "REGION_OPS", dict(warpregions.REGION_OPS, atom=lambda w, st: None))
    data = rng.integers(0, 256, 5000).astype(np.uint8)
    want = np.bincount(data, minlength=256)
    assert not _bins(data, 2, (128, 1), "// atomics dropped\n").any()
    np.testing.assert_array_equal(_bins(data, 2, (100, 1), "// atomics dropped\n"), want)


PREFETCH_SOURCE = r"""
// a row per warp, its loop stepping a pointer by a constant (layernorm's row loops)
extern "C" __global__ void row_sums(const float* x, float* out, int rows, int cols) {
    int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    float s = 0.0f;
    for (int i = lane; i < cols; i += 32) s += x[(size_t)row * cols + i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    if (lane == 0) out[row] = s;
}
// a grid-stride loop: the step is the grid's width, known only when the kernel runs
extern "C" __global__ void grid_sums(const float* x, float* out, int n) {
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    if ((threadIdx.x & 31) == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) >> 5] = s;
}
"""


def test_region_prefetch_steps(rng):
    """A region loop's strided load is prefetched ahead by its step: a constant one where the
    loop moves its pointer by an immediate (no stack slot to measure it), measured as the
    region runs for a grid-stride loop. Both sums check against numpy."""
    regions, _ = made_regions(PREFETCH_SOURCE)
    for name in ("row_sums", "grid_sums"):
        text = "".join(str(fn) for fn in regions.get(name, []))
        assert "llvm.prefetch" in text, name
        assert ('%"last' in text or "%last" in text) == (name == "grid_sums"), name
    m = ac.RawModule(code=PREFETCH_SOURCE)
    rows, cols = 37, 300
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = poison(rows, np.float32)
    m.get_function("row_sums")((5,), (256,), (ac.asarray(x), out, np.int32(rows), np.int32(cols)))
    np.testing.assert_allclose(out.get(), x.sum(axis=1), rtol=1e-4, atol=1e-4)
    n, grid, block = 50_000, 6, 128
    y = rng.standard_normal(n).astype(np.float32)
    sums = poison(grid * block // 32, np.float32)
    m.get_function("grid_sums")((grid,), (block,), (ac.asarray(y), sums, np.int32(n)))
    i = np.arange(grid * block)
    want = np.array([y[t::grid * block].sum() for t in i]).reshape(-1, 32).sum(axis=1)
    np.testing.assert_allclose(sums.get(), want, rtol=1e-4, atol=1e-3)


STORE_PREFETCH_SOURCE = r"""
// a row per warp: the store's pointer steps by a constant in the row loop after the shuffles
extern "C" __global__ void centre_rows(const float* x, float* y, int rows, int cols) {
    int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    float s = 0.0f;
    for (int i = lane; i < cols; i += 32) s += x[(size_t)row * cols + i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    for (int i = lane; i < cols; i += 32) y[(size_t)row * cols + i] = x[(size_t)row * cols + i] - s / cols;
}
// a grid-stride loop: the store's step is the grid's width, known only when the kernel runs
extern "C" __global__ void scale_all(const float* x, float* y, int n) {
    float s = __shfl_sync(0xffffffff, x[threadIdx.x & 31], 0);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i] * s;
}
"""


def test_region_store_prefetch(rng):
    """A region loop's strided store is prefetched for writing where its pointer steps by a
    constant, and not where the step would have to be measured. Both outputs (poisoned)
    check against numpy."""
    import re
    regions, _ = made_regions(STORE_PREFETCH_SOURCE)
    write = re.compile(r'llvm\.prefetch\.p0"?\([^,]+, i32 1,')       # (address, rw 1: for writing, ...)
    for name, wanted in (("centre_rows", True), ("scale_all", False)):
        text = "".join(str(fn) for fn in regions[name])
        assert bool(write.search(text)) == wanted, name
    m = ac.RawModule(code=STORE_PREFETCH_SOURCE)
    rows, cols = 37, 300
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    y = poison(rows * cols, np.float32)
    m.get_function("centre_rows")((5,), (256,), (ac.asarray(x), y, np.int32(rows), np.int32(cols)))
    want = x - x.sum(axis=1, dtype=np.float64)[:, None] / cols
    np.testing.assert_allclose(y.get().reshape(rows, cols), want, rtol=1e-4, atol=1e-4)
    n = 50_000
    z = rng.standard_normal(n).astype(np.float32)
    out = poison(n, np.float32)
    m.get_function("scale_all")((6,), (128,), (ac.asarray(z), out, np.int32(n)))
    np.testing.assert_array_equal(out.get(), z * z[0])
