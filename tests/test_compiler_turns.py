"""Turns (compiler/vector/warpregions.py): a region whose warp runs a grid-stride loop in lockstep
gives way to the block's next warp every few iterations (warpregions.TURN_ROWS rows of all
the buffers the loop walks: 4 iterations over one buffer, 2 over two, 1 over three), its live registers
left in its turn area, and the block function calls each warp's region again until none
does; where that region starts the kernel, the block function itself gives way after each
pass over its warps and a worker keeps launch.BLOCKS_IN_FLIGHT blocks in flight (with or
without sites).
References are numpy computations; outputs are poisoned first."""
import re

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.cpu import launch
from anycuda.compiler.vector import warpregions
from conformance import made_regions, poison

SOURCE = r"""
// a float sum and a flag per warp, a double sum of squares and a 64-bit count of positives
// per thread, all live across the grid-stride loop's back edge
extern "C" __global__ void warp_stats(const float* x, float* sums, double* squares,
                                      long long* positives, int* big, int n) {
    float s = 0.0f;
    double q = 0.0;
    long long pos = 0;
    bool seen = false;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = x[i];
        s += v;
        q += (double)v * v;
        pos += v > 0.0f;
        seen = seen || v > 3.0f;
    }
    int any = seen;
    for (int o = 16; o > 0; o >>= 1) {
        s += __shfl_xor_sync(0xffffffff, s, o);
        any |= __shfl_xor_sync(0xffffffff, any, o);
    }
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    squares[t] = q;
    positives[t] = pos;
    if ((threadIdx.x & 31) == 0) { sums[t >> 5] = s; big[t >> 5] = any; }
}

// the order warps run in: a ticket from a global counter per element, in lane order, after a
// barrier (turns at the yield before the loop's back edge)
extern "C" __global__ void tickets(int* ticket, int* counter, int n) {
    __shared__ int first;
    if (threadIdx.x == 0) first = *counter;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        ticket[i] = atomicAdd(counter, 1) - first;
}

// the same without a barrier: no sites, no yields; the entry region takes turns at the loop's head
extern "C" __global__ void tickets_no_sites(int* ticket, int* counter, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        ticket[i] = atomicAdd(counter, 1);
}

// the same loop walking two buffers (a copy beside the tickets), and three
extern "C" __global__ void tickets_two_buffers(int* ticket, int* counter, const int* a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        ticket[i] = atomicAdd(counter, 1) + a[i];
}
extern "C" __global__ void tickets_three_buffers(int* ticket, int* counter, const int* a, int* b, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        ticket[i] = atomicAdd(counter, 1);
        b[i] = a[i] + 1;
    }
}

// no sites: a grid-stride saxpy that also keeps a double sum and a 64-bit count per thread
// across the loop's head, with a size_t index
extern "C" __global__ void stride_stats(const float* x, float* y, double* sums, long long* counts, float a, int n) {
    double s = 0.0;
    long long c = 0;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i];
        y[i] = a * v + y[i];
        s += v;
        if (v > 0.0f) ++c;
    }
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    sums[t] = s;
    counts[t] = c;
}

// a region from a run of shuffles (the row's first value to every lane), then a grid-stride loop
extern "C" __global__ void scaled_sums(const float* x, const float* scale, float* out, int n) {
    float k = scale[blockIdx.x * blockDim.x + threadIdx.x];
    k = __shfl_sync(0xffffffff, k, 0);
    k += __shfl_sync(0xffffffff, k, 1);
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += k * x[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// tickets in the order the loop runs, which starts the kernel: its blocks give way (the
// shuffle after the loop gives the kernel its sites)
extern "C" __global__ void block_tickets(int* ticket, int* counter, int n) {
    int k = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x, ++k)
        ticket[i] = atomicAdd(counter, 1);
    k += __shfl_xor_sync(0xffffffff, k, 1);
    if (k < 0) *counter = -1;
}

// a sum per thread whose block `bad` reads the address `wild` at its iteration `at`
extern "C" __global__ void wild_late(const float* x, float* out, int n, int bad, int at, const float* wild) {
    float s = 0.0f;
    int k = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x, ++k)
        s += blockIdx.x == bad && k == at ? *wild : x[i];
    s += __shfl_xor_sync(0xffffffff, s, 1);
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// the same without the shuffle: no sites
extern "C" __global__ void wild_late_no_sites(const float* x, float* out, int n, int bad, int at, const float* wild) {
    float s = 0.0f;
    int k = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x, ++k)
        s += blockIdx.x == bad && k == at ? *wild : x[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// a row loop (a constant stride, no yield): no turns
extern "C" __global__ void row_sums(const float* x, float* out, int cols) {
    int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    float s = 0.0f;
    for (int i = lane; i < cols; i += 32) s += x[(size_t)row * cols + i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    if (lane == 0) out[row] = s;
}
"""


@pytest.fixture(scope="module")
def mod():
    return ac.RawModule(code=SOURCE)


def test_grid_stride_regions_take_turns():
    """Regions whose warps run a grid-stride loop leave a turn state (from the start, after a
    run of shuffles); a row loop's region runs its warp whole."""
    made = {kernel: [fn.turn_bytes for fn in fns] for kernel, fns in made_regions(SOURCE)[0].items()}
    for kernel in ("warp_stats", "tickets", "scaled_sums", "tickets_no_sites", "stride_stats"):
        assert made.get(kernel) and max(made[kernel]) > 0, (kernel, made)
    assert made.get("row_sums") == [0], made


@pytest.mark.parametrize("n, grid, workers", [(64 * 37 * 3 + 5, 3, None), (100_003, 3, None),
                                              (192 * 13 * 20 + 1000, 13, 1), (192 * 13 * 20 + 1000, 13, None)])
def test_state_across_turns(mod, rng, request, n, grid, workers):
    """Warps with one iteration more than others, a last iteration where lanes part, and
    float, double, 64-bit and predicate registers carried from turn to turn; more blocks than
    a worker keeps in flight, with blocks of both trip counts among them."""
    if workers:
        request.getfixturevalue("one_worker")
    block = 192
    x = (rng.standard_normal(n) * 1.5).astype(np.float32)
    warps = grid * block // 32
    sums, squares = poison(warps, np.float32), poison(grid * block, np.float64)
    positives, big = poison(grid * block, np.int64), poison(warps, np.int32)
    mod.get_function("warp_stats")((grid,), (block,), (ac.asarray(x), sums, squares, positives, big, np.int32(n)))
    stride = grid * block
    per_thread = [x[t::stride] for t in range(stride)]
    lanes = lambda f: np.array([f(v) for v in per_thread]).reshape(warps, 32)
    np.testing.assert_allclose(sums.get(), lanes(lambda v: v.astype(np.float64).sum()).sum(axis=1),
                               rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(squares.get(), lanes(lambda v: (v.astype(np.float64) ** 2).sum()).ravel(),
                               rtol=1e-10)
    np.testing.assert_array_equal(positives.get(), lanes(lambda v: (v > 0).sum()).ravel())
    np.testing.assert_array_equal(big.get() != 0, lanes(lambda v: (v > 3).any()).any(axis=1))


def test_warps_interleave(mod):
    """The block's warps run the loop a turn at a time: warp 1's first ticket comes before
    warp 0's ticket of iteration TURN_ROWS (a loop over one buffer; run whole, warp 0 would
    finish first). Every element gets a ticket, each ticket once."""
    grid, block = 1, 128
    k = warpregions.TURN_ROWS
    n = grid * block * (3 * k + 1)
    ticket, counter = poison(n, np.int32), ac.zeros(1, np.int32)
    mod.get_function("tickets")((grid,), (block,), (ticket, counter, np.int32(n)))
    got = ticket.get()
    np.testing.assert_array_equal(np.sort(got), np.arange(n))
    assert got[32] < got[k * block]
    # each warp's 32 lanes take consecutive tickets, in lane order
    assert (np.diff(got.reshape(-1, 32), axis=1) == 1).all()


def test_warps_interleave_without_sites(mod, one_worker):
    """A kernel without barriers or shuffles: its entry region gives way at the grid-stride
    loop's head as a region with sites does at its yield."""
    grid, block = 2, 96
    k = warpregions.TURN_ROWS
    n = grid * block * (2 * k + 3) + 40
    ticket, counter = poison(n, np.int32), ac.zeros(1, np.int32)
    mod.get_function("tickets_no_sites")((grid,), (block,), (ticket, counter, np.int32(n)))
    got = ticket.get()
    np.testing.assert_array_equal(np.sort(got), np.arange(n))
    stride = grid * block
    # warp 1 of block 0 takes its first ticket before warp 0 of block 0 its (k+1)-th
    assert got[32] < got[k * stride]
    assert set(_turns(got, stride)[1:-1]) == {k}
    assert (np.diff(got[: n // 32 * 32].reshape(-1, 32), axis=1) == 1).all()


def _turns(got, stride) -> list:
    """The lengths of warp 0's turns: its runs of iterations whose tickets follow each other
    (32 apart, a ticket a lane), in order (on one worker: another's blocks would take tickets
    between them)."""
    mine = got[0:len(got) - 31:stride]
    breaks = np.flatnonzero(np.diff(mine) != 32) + 1
    return np.diff(np.concatenate(([0], breaks, [len(mine)]))).tolist()


@pytest.mark.parametrize("kernel, buffers", [("tickets_two_buffers", 2), ("tickets_three_buffers", 3)])
def test_turns_shorten_with_buffers(mod, rng, one_worker, kernel, buffers):
    """A loop over more buffers runs fewer iterations a turn (rows of each buffer a power of
    two apart share a cache set): TURN_ROWS // buffers, at least one; its results as before."""
    grid, block = 2, 96
    k = max(1, warpregions.TURN_ROWS // buffers)
    n = grid * block * (2 * warpregions.TURN_ROWS + 3) + 40
    a = rng.integers(0, 1000, n).astype(np.int32)
    ticket, counter = poison(n, np.int32), ac.zeros(1, np.int32)
    extra = (ac.asarray(a),) if buffers == 2 else (ac.asarray(a), poison(n, np.int32))
    mod.get_function(kernel)((grid,), (block,), (ticket, counter, *extra, np.int32(n)))
    got = ticket.get() - (a if buffers == 2 else 0)
    np.testing.assert_array_equal(np.sort(got), np.arange(n))
    if buffers == 3:
        np.testing.assert_array_equal(extra[1].get(), a + 1)
    stride = grid * block
    assert got[32] < got[k * stride]
    assert set(_turns(got, stride)[1:-1]) == {k}


@pytest.mark.parametrize("n, grid, block, workers", [(64 * 5 * 30 + 17, 5, 64, None), (100_003, 7, 256, None),
                                                     (100_003, 7, 256, 1), (5000, 3, 100, None), (1000, 40, 64, None)])
def test_state_across_turns_without_sites(mod, rng, request, n, grid, block, workers):
    """Registers of four types kept across the turns of a kernel without sites, warps with
    one iteration more than others and some with none; a block of 100 threads (a partial
    warp) runs thread by thread."""
    if workers:
        request.getfixturevalue("one_worker")
    x = rng.standard_normal(n).astype(np.float32)
    y0 = rng.standard_normal(n).astype(np.float32)
    y = ac.asarray(y0)
    threads = grid * block
    sums, counts = poison(threads, np.float64), poison(threads, np.int64)
    a = np.float32(1.75)
    mod.get_function("stride_stats")((grid,), (block,), (ac.asarray(x), y, sums, counts, a, np.int32(n)))
    np.testing.assert_allclose(y.get(), a * x + y0, rtol=1e-6, atol=1e-6)
    per_thread = [x[t::threads] for t in range(threads)]
    np.testing.assert_allclose(sums.get(), [v.astype(np.float64).sum() for v in per_thread], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(counts.get(), [(v > 0).sum() for v in per_thread])


def _prefetches(fn) -> tuple:
    """(prefetch calls behind a test of the warp's counted rounds, prefetch calls behind none,
    the tests `rounds + k <= last pass` with their k) in a region function: a gate is
    `select own, test, true` where `own` says the caller passed a turn area (argument 8)."""
    text = str(fn)
    own = re.findall(r'(%"\.\d+") = icmp ne i8\* %"\.8", null', text)
    gates = set(re.findall(r'(%"\.\d+") = select\s+i1 (?:' + "|".join(map(re.escape, own)) + r'), i1 %"\.\d+", i1 1',
                           text)) if own else set()
    gated_blocks = {label for cond, label in re.findall(r'br i1 (%"\.\d+"), label %"([^"]+)"', text) if cond in gates}
    gated = plain = 0
    for blk in fn.blocks:
        n = str(blk).count("call void @\"llvm.prefetch.p0\"")
        gated, plain = (gated + n, plain) if blk.name in gated_blocks else (gated, plain + n)
    sums = dict(re.findall(r'(%"\.\d+") = add i64 %"\.\d+", (\d+)\n', text))
    tests = [int(sums[a]) for a in re.findall(r'= icmp ule i64 (%"\.\d+"), %"\.\d+"', text) if a in sums]
    return gated, plain, tests


def test_far_rounds_prefetch_no_further_than_the_last_pass(mod, rng, one_worker):
    """A grid-stride loop's accesses step a grid's row each round: their prefetches
    PREFETCH_AHEAD rounds on are made only while the warp's pass will still run that far, by
    the count of its last pass kept in its turn area (regionmemory._rounds_left): past the
    last rounds lies past the array's end, where a prefetch of an address no page maps walks
    the page tables every time (a Zen 1 in a VM: saxpy_f32_stride's prefetches past its
    arrays). A row loop's constant step of 128 bytes prefetches every round. Values against
    numpy with passes of 5, 1 and 3 rounds in turn on one worker (counts left by another
    launch predict wrong and change no value), the turn state past the counts."""
    from anycuda.compiler.vector.regionmemory import PREFETCH_AHEAD
    made = made_regions(SOURCE)[0]
    (stride,), (rows,) = made["stride_stats"], made["row_sums"]
    gated, plain, tests = _prefetches(stride)
    assert gated >= 2 and plain == 0 and tests and set(tests) == {PREFETCH_AHEAD}, (gated, plain, tests)
    gated, plain, tests = _prefetches(rows)
    assert gated == 0 and plain >= 1 and not tests, (gated, plain, tests)
    k = mod.get_function("stride_stats")
    grid, block = 9, 128
    threads = grid * block
    for rounds in (5, 1, 3, 5):
        n = threads * rounds - 37
        x = rng.standard_normal(n).astype(np.float32)
        y0 = rng.standard_normal(n).astype(np.float32)
        y = ac.asarray(y0)
        sums, counts = poison(threads, np.float64), poison(threads, np.int64)
        k((grid,), (block,), (ac.asarray(x), y, sums, counts, np.float32(0.5), np.int32(n)))
        np.testing.assert_allclose(y.get(), np.float32(0.5) * x + y0, rtol=1e-6, atol=1e-6)
        per_thread = [x[t::threads] for t in range(threads)]
        np.testing.assert_allclose(sums.get(), [v.astype(np.float64).sum() for v in per_thread], rtol=1e-12,
                                   atol=1e-12)
        np.testing.assert_array_equal(counts.get(), [(v > 0).sum() for v in per_thread])


def test_turns_after_a_run_of_shuffles(mod, rng):
    grid, block, n = 2, 256, 2 * 256 * 21 + 77
    x = rng.standard_normal(n).astype(np.float32)
    scale = rng.standard_normal(grid * block).astype(np.float32)
    out = poison(grid * block, np.float32)
    mod.get_function("scaled_sums")((grid,), (block,), (ac.asarray(x), ac.asarray(scale), out, np.int32(n)))
    warp_first = scale.reshape(-1, 32)[:, :2]
    k = np.repeat(warp_first[:, 0] + warp_first[:, 0], 32)      # lane 1 holds lane 0's value too
    want = np.array([k[t] * x[t::grid * block].astype(np.float64) for t in range(grid * block)], dtype=object)
    want = np.array([w.sum() for w in want])
    np.testing.assert_allclose(out.get(), want, rtol=1e-4, atol=1e-3)


def test_row_loop(mod, rng):
    rows, cols = 16, 700
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = poison(rows, np.float32)
    mod.get_function("row_sums")((2,), (256,), (ac.asarray(x), out, np.int32(cols)))
    np.testing.assert_allclose(out.get(), x.sum(axis=1), rtol=1e-4, atol=1e-3)


def test_blocks_in_flight(mod, one_worker):
    """One worker runs BLOCKS_IN_FLIGHT blocks' turns in rounds: block 1 starts before block
    0's second turn, and block BLOCKS_IN_FLIGHT only when block 0 has ended. Every element
    gets a ticket, each ticket once; each warp's lanes take consecutive ones."""
    g, k = launch.BLOCKS_IN_FLIGHT, warpregions.TURN_ROWS       # (one buffer)
    assert g >= 2
    grid, block = 2 * g + 1, 64
    n = grid * block * 3 * k + 40            # the first warp of block 0 runs one iteration more
    ticket, counter = poison(n, np.int32), ac.zeros(1, np.int32)
    mod.get_function("block_tickets")((grid,), (block,), (ticket, counter, np.int32(n)))
    got = ticket.get()
    np.testing.assert_array_equal(np.sort(got), np.arange(n))
    assert (np.diff(got[: n - 40].reshape(-1, 32), axis=1) == 1).all()
    owner = (np.arange(n) % (grid * block)) // block         # each element's block
    first = [got[owner == b].min() for b in range(grid)]
    assert all(first[b] < got[k * grid * block] for b in range(1, g))     # block 0's iteration k
    assert first[g] > got[owner == 0].max()


@pytest.mark.parametrize("grid", [2 * launch.BLOCKS_IN_FLIGHT + 1, 40 * launch.BLOCKS_IN_FLIGHT + 3])
def test_blocks_in_flight_without_sites(mod, one_worker, grid):
    """A kernel without sites keeps BLOCKS_IN_FLIGHT blocks in flight too, across its chunks
    (17 blocks on one worker come in chunks of one): block 1 starts before block 0's second
    turn, and block BLOCKS_IN_FLIGHT only when block 0 has ended."""
    g, k = launch.BLOCKS_IN_FLIGHT, warpregions.TURN_ROWS       # (one buffer)
    block = 64
    n = grid * block * 3 * k + 40
    ticket, counter = poison(n, np.int32), ac.zeros(1, np.int32)
    mod.get_function("tickets_no_sites")((grid,), (block,), (ticket, counter, np.int32(n)))
    got = ticket.get()
    np.testing.assert_array_equal(np.sort(got), np.arange(n))
    assert (np.diff(got[: n - 40].reshape(-1, 32), axis=1) == 1).all()
    owner = (np.arange(n) % (grid * block)) // block
    first = [got[owner == b].min() for b in range(grid)]
    assert all(first[b] < got[k * grid * block] for b in range(1, g))
    assert first[g] > got[owner == 0].max()


@pytest.mark.parametrize("kernel", ["wild_late", "wild_late_no_sites"])
def test_fault_in_a_block_that_gave_way(mod, rng, kernel):
    """A wild read in a late iteration of one block, after its block gave way: the launch
    fails naming that block and the address; the module runs on."""
    grid, block = 9, 128
    n = grid * block * 4 * warpregions.TURN_ROWS
    x = rng.standard_normal(n).astype(np.float32)
    out = poison(grid * block, np.float32)
    wild = 0xDEAD0000
    args = (ac.asarray(x), out, np.int32(n), np.int32(6), np.int32(3 * warpregions.TURN_ROWS + 1))
    with pytest.raises(ac.CudaError) as e:
        mod.get_function(kernel)((grid,), (block,), args + (np.uint64(wild),))
        ac.synchronize()
    assert e.value.code == ac.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    assert "block 6" in str(e.value) and f"0x{wild:x}" in str(e.value)
    mod.get_function(kernel)((grid,), (block,), args[:3] + (np.int32(-1), np.int32(0), np.uint64(wild)))
    sums = x.reshape(-1, grid * block).astype(np.float64).sum(axis=0)
    if kernel == "wild_late":           # (lane pairs add their sums)
        sums = np.repeat(sums.reshape(-1, 2).sum(axis=1), 2)
    np.testing.assert_allclose(out.get(), sums, rtol=1e-4, atol=1e-3)
