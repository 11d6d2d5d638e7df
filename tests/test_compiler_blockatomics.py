"""What brought cub's block radix sort into block programs: atomics of a block's shared memory
in straight code (blockops._atom), loops entered in their middle, peeled
(vector/looppeeling.py), and lanes that part inside a part a warp may skip, meeting again
(laneparts.Parts.chosen). And what brought threadFenceReduction's single pass: atomics of
global memory in straight code, atomic across the workers, and fences.

Each kernel runs against numpy on fresh random inputs with poisoned outputs, and the test
checks that a block program ran it (or, for an atomic in a loop, that the rounds did).
Atomics' old values depend on the order the lanes ran in, which CUDA leaves open: the tests
check what holds in any order (the old values of one counter are 0 .. count - 1, each once).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.analysis.cfg import branch_target
from anycuda.compiler.vector import looppeeling
from anycuda.ptx import ir, parse
from conftest import ran_as_block_program

SOURCE = r"""
// each thread's digit counted in shared memory, eight items a thread in straight code: the
// rank of each item among its digit's (the old value), the counts, the smallest and largest
// key of each digit, and an exchange and a compare-and-swap per digit
extern "C" __global__ void digit_atomics(const unsigned* keys, unsigned* ranks, unsigned* counts,
                                         int* lows, int* highs, float* sums, int n) {
    __shared__ unsigned c[16];
    __shared__ int lo[16], hi[16];
    __shared__ float f[16];
    __shared__ unsigned swapped[16];
    int t = threadIdx.x, base = blockIdx.x * blockDim.x * 8;
    if (t < 16) { c[t] = 0; lo[t] = 1 << 30; hi[t] = -1; f[t] = 0.0f; swapped[t] = 0; }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 8; k++) {
        int i = base + k * blockDim.x + t;
        if (i < n) {
            unsigned key = keys[i], d = key & 15;
            ranks[i] = atomicAdd(&c[d], 1u);
            atomicMin(&lo[d], (int)(key >> 4));
            atomicMax(&hi[d], (int)(key >> 4));
            atomicAdd(&f[d], 0.5f);
            atomicCAS(&swapped[d], 0u, key);
        }
    }
    __syncthreads();
    if (t < 16) {
        counts[blockIdx.x * 16 + t] = c[t] + (swapped[t] != 0 && (swapped[t] & 15) != t ? 1000000 : 0);
        lows[blockIdx.x * 16 + t] = lo[t];
        highs[blockIdx.x * 16 + t] = hi[t];
        sums[blockIdx.x * 16 + t] = f[t];
    }
}

// loads of pairs (one span loaded for the group), an atomic on the second of each pair, the
// pair loaded again: the second load sees the atomic's sum
extern "C" __global__ void loads_around_atomics(const int* in, int* out) {
    __shared__ int s[2048];
    int t = threadIdx.x;
    s[2 * t] = in[2 * t];
    s[2 * t + 1] = in[2 * t + 1];
    __syncthreads();
    int a = s[2 * t], b = s[2 * t + 1];
    atomicAdd(&s[2 * t + 1], a);
    int c = s[2 * t], d = s[2 * t + 1];
    out[t] = a + 3 * b + 7 * c + 11 * d;
}

// the same counts in global memory, every block into one set of counters (atomic across the
// workers that run the blocks), with the operations shared memory has and inc, dec, exch and
// a red (no result)
extern "C" __global__ void global_atomics(const unsigned* keys, unsigned* ranks, unsigned* counts,
                                          int* lows, int* highs, float* sums, unsigned* wraps,
                                          unsigned* downs, unsigned* swapped, unsigned* last, int n) {
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    __syncthreads();
    if (i < n) {
        unsigned key = keys[i], d = key & 15;
        ranks[i] = atomicAdd(&counts[d], 1u);
        atomicMin(&lows[d], (int)(key >> 4));
        atomicMax(&highs[d], (int)(key >> 4));
        atomicAdd(&sums[d], 0.5f);
        atomicInc(&wraps[d], 6u);
        atomicDec(&downs[d], 9u);
        atomicCAS(&swapped[d], 0u, key);
        atomicExch(&last[d], key);
    }
}

// threadFenceReduction's single pass, written as CUDA's programming guide writes its
// __threadfence example: each block's partial sum to global memory through a volatile pointer,
// a fence, a ticket from an atomic; the block that takes the last ticket sums the partials
// and puts the counter back for the next launch
__device__ unsigned retired;

extern "C" __global__ void last_block_sums(const float* in, volatile float* partial, float* total, int n) {
    __shared__ float s[256];
    __shared__ bool last;
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = s[0];
    __threadfence();
    if (t == 0) last = atomicInc(&retired, gridDim.x) == gridDim.x - 1;
    __syncthreads();
    if (last) {
        float sum = 0.0f;
        for (int b = t; b < gridDim.x; b += blockDim.x) sum += partial[b];    // volatile loads
        s[t] = sum;
        __syncthreads();
        for (int k = blockDim.x / 2; k > 0; k >>= 1) {
            if (t < k) s[t] += s[t + k];
            __syncthreads();
        }
        if (t == 0) { *total = s[0]; retired = 0; }
    }
}

// the same count in a loop: a block program would run a spin on a lock in such a loop for
// ever (warps run one after another), so the rounds keep it
extern "C" __global__ void looped_atomics(const unsigned* keys, unsigned* counts, int n) {
    __shared__ unsigned c[16];
    int t = threadIdx.x;
    if (t < 16) c[t] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&c[keys[i] & 15], 1u);
    __syncthreads();
    if (t < 16) atomicAdd(&counts[t], c[t]);
}

// passes over a shared tile whose test sits in the middle (B, the test, then A between
// passes): nvcc enters such a loop by a jump over A, as it does cub's radix sort passes.
// Before it, a choice alike in every lane (a uniform branch) and, inside what it skips, lanes
// that part to the same label (cub's `if (warp == last) { ... if (lane == 0) ... }`): they
// must make all lanes again there, or the loop's test is not alike in the lanes.
extern "C" __global__ void middle_test_passes(const int* in, int* out, int lo, int hi) {
    __shared__ int s[256];
    __shared__ int first;
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    int lane = t % 32, extra = 0;
    s[t] = in[i];
    if (t == 0) first = 0;
    if (hi > lo) {
        extra = (in[i] >> 1) & 3;
        if (lane == 0) first = lo;
    }
    for (int k = lo;;) {
        __syncthreads();
        int x = s[(t + 1) % blockDim.x] + first;
        __syncthreads();
        s[t] = x + k;
        k += 4;
        if (k >= hi) break;
        __syncthreads();
        s[t] = s[t] ^ (t * 7);
    }
    __syncthreads();
    out[i] = s[t] + extra;
}
"""


@pytest.fixture
def module(compile_cuda):
    return compile_cuda(SOURCE, name="blockatomics.cu")


@pytest.mark.parametrize("threads,n", [(128, 128 * 8 * 5), (256, 256 * 8 * 3 - 77), (96, 96 * 8 * 2 + 5)])
def test_shared_atomics_in_straight_code(module, rng, poison, threads, n):
    keys = rng.integers(0, 1 << 20, n, dtype=np.uint32)
    blocks = -(-n // (threads * 8))
    ranks, counts = poison(n, np.uint32), poison(blocks * 16, np.uint32)
    lows, highs, sums = poison(blocks * 16, np.int32), poison(blocks * 16, np.int32), poison(blocks * 16, np.float32)
    k = module.get_function("digit_atomics")
    k((blocks,), (threads,), (ac.asarray(keys), ranks, counts, lows, highs, sums, np.int32(n)))
    got_ranks = ranks.get()
    assert ran_as_block_program(k, threads)
    tile = threads * 8
    for blk in range(blocks):
        part = keys[blk * tile:(blk + 1) * tile]
        digits = part & 15
        want_counts = np.bincount(digits, minlength=16)
        np.testing.assert_array_equal(counts.get()[blk * 16:(blk + 1) * 16], want_counts)
        for d in range(16):
            mine = got_ranks[blk * tile:(blk + 1) * tile][digits == d]
            np.testing.assert_array_equal(np.sort(mine), np.arange(want_counts[d]))
            high = part[digits == d] >> 4
            assert lows.get()[blk * 16 + d] == (high.min() if high.size else 1 << 30)
            assert highs.get()[blk * 16 + d] == (high.max() if high.size else -1)
        np.testing.assert_array_equal(sums.get()[blk * 16:(blk + 1) * 16], 0.5 * want_counts)


@pytest.mark.parametrize("threads", [64, 256])
def test_loads_after_an_atomic_see_it(module, rng, poison, threads):
    x = rng.integers(-1000, 1000, 2 * threads).astype(np.int32)
    out = poison(threads, np.int32)
    k = module.get_function("loads_around_atomics")
    k((1,), (threads,), (ac.asarray(x), out))
    a, b = x[0::2].astype(np.int64), x[1::2].astype(np.int64)
    np.testing.assert_array_equal(out.get(), (a + 3 * b + 7 * a + 11 * (a + b)).astype(np.int32))
    assert ran_as_block_program(k, threads)


@pytest.mark.parametrize("threads,blocks", [(128, 9), (96, 14)])
def test_global_atomics_in_straight_code(module, rng, poison, threads, blocks):
    """Every block's lanes on sixteen global counters: the ranks of each digit's keys are 0 ..
    count - 1 once each whatever the order, and the sums, extremes, wrapping counts and
    exchanges are what any order gives."""
    n = threads * blocks - 3
    keys = rng.integers(1, 1 << 20, n, dtype=np.uint32)
    d = keys & 15
    ranks = poison(n, np.uint32)
    zeros = lambda dtype: ac.asarray(np.zeros(16, dtype))             # noqa: E731
    counts, wraps, downs, swapped, last = (zeros(np.uint32) for _ in range(5))
    lows, highs = ac.asarray(np.full(16, 1 << 30, np.int32)), ac.asarray(np.full(16, -1, np.int32))
    sums = zeros(np.float32)
    k = module.get_function("global_atomics")
    k((blocks,), (threads,), (ac.asarray(keys), ranks, counts, lows, highs, sums, wraps, downs, swapped, last,
                              np.int32(n)))
    want = np.bincount(d, minlength=16)
    np.testing.assert_array_equal(counts.get(), want)
    for digit in range(16):
        np.testing.assert_array_equal(np.sort(ranks.get()[d == digit]), np.arange(want[digit]))
        high = keys[d == digit] >> 4
        assert lows.get()[digit] == (high.min() if high.size else 1 << 30)
        assert highs.get()[digit] == (high.max() if high.size else -1)
        assert swapped.get()[digit] in (set(keys[d == digit]) or {0})
        assert last.get()[digit] in (set(keys[d == digit]) or {0})
    np.testing.assert_array_equal(sums.get(), 0.5 * want)
    np.testing.assert_array_equal(wraps.get(), want % 7)               # 0, 1, .., 6, 0, ...
    np.testing.assert_array_equal(downs.get(), (-want) % 10)           # 0, 9, 8, .., 0, 9, ...
    assert ran_as_block_program(k, threads)


def test_the_last_block_sums_the_partials(module, rng, poison):
    """threadFenceReduction's single pass as a block program, three launches in a row (the last
    block puts the counter back): each total against numpy's."""
    threads, blocks = 256, 61
    n = threads * blocks - 100
    k = module.get_function("last_block_sums")
    for _ in range(3):
        x = rng.standard_normal(n).astype(np.float32)
        partial, total = poison(blocks, np.float32), poison(1, np.float32)
        k((blocks,), (threads,), (ac.asarray(x), partial, total, np.int32(n)))
        np.testing.assert_allclose(total.get()[0], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)
    assert ran_as_block_program(k, threads)


def test_atomics_in_a_loop_keep_the_rounds(module, rng, poison):
    n, threads = 20000, 128
    keys = rng.integers(0, 1 << 20, n, dtype=np.uint32)
    counts = ac.asarray(np.zeros(16, np.uint32))
    k = module.get_function("looped_atomics")
    k((7,), (threads,), (ac.asarray(keys), counts, np.int32(n)))
    np.testing.assert_array_equal(counts.get(), np.bincount(keys & 15, minlength=16))
    assert not ran_as_block_program(k, threads)


def _passes_reference(x, lo, hi, threads):
    s = x.reshape(-1, threads).astype(np.int64)
    t = np.arange(threads)
    extra = (s >> 1) & 3 if hi > lo else 0
    k = lo
    while True:
        s = np.roll(s, -1, axis=1) + (lo if hi > lo else 0) + k
        k += 4
        if k >= hi:
            break
        s = s ^ (t * 7)
    return (s + extra).ravel().astype(np.int32)


@pytest.mark.parametrize("lo,hi", [(0, 8), (3, 20), (5, 6), (0, 0), (9, 2)])
def test_a_loop_entered_in_its_middle(module, rng, poison, lo, hi):
    threads, blocks = 256, 5
    x = rng.integers(-1000, 1000, threads * blocks).astype(np.int32)
    out = poison(x.size, np.int32)
    k = module.get_function("middle_test_passes")
    k((blocks,), (threads,), (ac.asarray(x), out, np.int32(lo), np.int32(hi)))
    np.testing.assert_array_equal(out.get(), _passes_reference(x, lo, hi, threads))
    assert ran_as_block_program(k, threads)


def _loops(body):
    labels = {st.name: pos for pos, st in enumerate(body) if isinstance(st, ir.Label)}
    branches = [(pos, branch_target(st, labels)) for pos, st in enumerate(body)]
    return [(target, pos) for pos, target in branches if target is not None and target < pos], branches


def test_peeling_enters_the_loop_at_its_head(module):
    """nvcc's text jumps into the loop's middle; peeled, nothing outside the loop lands
    inside it but at its head, and the copy of its second half comes first."""
    pfn = next(f for f in parse(ac.compile(SOURCE, name="blockatomics.cu"), "k").functions
               if f.name == "middle_test_passes")
    (head, back), = _loops(pfn.body)[0]
    _, branches = _loops(pfn.body)
    assert any(head < target <= back and not head <= pos <= back for pos, target in branches if target is not None), \
        "nvcc no longer enters this loop in its middle: the test needs another kernel"
    peeled = looppeeling.peel_middle_entries(pfn).body
    (head, back), = _loops(peeled)[0]
    _, branches = _loops(peeled)
    assert not [pos for pos, target in branches if target is not None and head < target <= back
                and not head <= pos <= back]
    assert len(peeled) > len(pfn.body)


def test_peeling_leaves_a_loop_with_another_way_in_alone():
    """A second branch into the loop's first half (here to its head from before the jump):
    peeling would need more than one copy, so the function stays as it is."""
    text = r"""
.version 7.0
.target sm_75
.address_size 64
.visible .entry k(.param .u32 n)
{
    .reg .pred %p<3>;
    .reg .b32 %r<4>;
    ld.param.u32 %r1, [n];
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra HEAD;
    bra.uni MIDDLE;
HEAD:
    add.u32 %r1, %r1, 1;
MIDDLE:
    add.u32 %r1, %r1, 2;
    setp.lt.u32 %p2, %r1, 100;
    @%p2 bra HEAD;
    ret;
}
"""
    pfn = parse(text, "k").functions[0]
    assert looppeeling.peel_middle_entries(pfn) is pfn
    simple = text.replace("    @%p1 bra HEAD;\n", "")
    pfn = parse(simple, "k").functions[0]
    peeled = looppeeling.peel_middle_entries(pfn)
    assert peeled is not pfn
    ops = [(st.opcode, st.operands[0].name if st.opcode == "bra" else None, st.guard)
           for st in peeled.body if isinstance(st, ir.Instruction)]
    # the copy of MIDDLE's add, the negated test to the exit, then the loop as it was
    assert [op for op, _, _ in ops[2:5]] == ["add", "setp", "bra"]
    assert ops[4][2] == dataclasses.replace(ops[-2][2], negated=True)
