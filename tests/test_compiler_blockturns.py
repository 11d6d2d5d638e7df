"""Grid-stride loops in turns in block programs (blockloops.turned_loops, blockstretches.py):
each turn runs one round of every warp of the block, so the warps read a row of the grid
together, and lanes that leave in different rounds keep what they held when they left.

Each kernel runs against numpy on fresh random inputs with poisoned outputs, at sizes where
warps run different numbers of rounds and lanes of one warp part in their last round (n not
a multiple of anything), where some warps never enter the loop (n below the block's
threads), and n = 0; the test checks that it ran as a block program and, in the IR, that the
loop was made in turns (or, for the loops not taken, that it was not).
"""
from __future__ import annotations

import numpy as np
import pytest

from anycuda.compiler import pipeline
from conftest import ran_as_block_program

SOURCE = r"""
// a sum per thread through a grid-stride loop, then the block's sum through shared memory
#define BLOCK_SUM(NAME, T, I)                                                              \
extern "C" __global__ void NAME(const T* in, T* out, I n) {                                \
    __shared__ T s[256];                                                                   \
    T acc = 0;                                                                             \
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)blockDim.x * gridDim.x) \
        acc += in[i];                                                                      \
    s[threadIdx.x] = acc;                                                                  \
    __syncthreads();                                                                       \
    if (threadIdx.x == 0) {                                                                \
        T total = 0;                                                                       \
        for (int t = 0; t < blockDim.x; ++t) total += s[t];                                \
        out[blockIdx.x] = total;                                                           \
    }                                                                                      \
}
BLOCK_SUM(sum_f32_int, float, int)
BLOCK_SUM(sum_f64_size_t, double, size_t)
BLOCK_SUM(sum_i32_int, int, int)

// a register the loop writes and code after it reads without carrying it round (the last
// element), and registers carried round (a sum, a count of rounds): lanes leaving in
// different rounds keep their own
extern "C" __global__ void last_seen(const int* in, int* out, int n) {
    __shared__ int s[256];
    int last = -1, rounds = 0, acc = 0, i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < n; i += blockDim.x * gridDim.x) {
        int v = in[i];
        acc += v;
        last = v;
        rounds++;
    }
    s[threadIdx.x] = rounds;
    __syncthreads();
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[3 * t] = last * 3 + 1;
    out[3 * t + 1] = s[threadIdx.x] + s[blockDim.x - 1 - threadIdx.x];
    out[3 * t + 2] = acc;
}

// a branch in the loop's body and a warp shuffle after it
extern "C" __global__ void clipped_sum(const float* in, float* out, int n, float cap) {
    __shared__ float s[8];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        float v = in[i];
        if (v > cap) v = cap;
        acc += v;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
    if (threadIdx.x % 32 == 0) s[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int w = 0; w < blockDim.x / 32; ++w) total += s[w];
        out[blockIdx.x] = total;
    }
}

// a break out of the loop: not taken in turns, and still right
extern "C" __global__ void first_negative(const float* in, int* out, int n) {
    __shared__ int s[256];
    int found = n;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        if (in[i] < 0.0f) { found = i; break; }
    s[threadIdx.x] = found;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = min(s[threadIdx.x], s[blockDim.x - 1 - threadIdx.x]);
}
"""

SIZES = (0, 1, 37, 1000, 4099, 30011)


@pytest.fixture(scope="module")
def ptx():
    from anycuda.cudac import compile_to_ptx
    return compile_to_ptx(SOURCE, name="turns.cu")


def _in_turns(ptx, kernel, threads) -> bool:
    """Whether the block program of `kernel` runs a loop in turns: its rounds go again while
    some warp goes round (blockstretches._round_again)."""
    return "round.again" in pipeline.block_program_ir(ptx, "turns.ptx", kernel, threads)


def _kernel_in_turns(compile_cuda, ptx, name, threads):
    """Kernel `name` of SOURCE, after checking that its block program runs a loop in turns."""
    assert _in_turns(ptx, name, threads)
    return compile_cuda(SOURCE, name="turns.cu").get_function(name)


def _strided_sums(values, stride):
    """Thread t's sum of values[t], values[t + stride], ... (in float64 or int64)."""
    padded = np.zeros(-(-max(len(values), 1) // stride) * stride,
                      np.int64 if values.dtype.kind == "i" else np.float64)
    padded[:len(values)] = values
    return padded.reshape(-1, stride).sum(axis=0)


@pytest.mark.parametrize("kernel, dtype", [("sum_f32_int", np.float32), ("sum_f64_size_t", np.float64),
                                           ("sum_i32_int", np.int32)])
@pytest.mark.parametrize("threads", [64, 256])
def test_grid_stride_sums_in_turns(compile_cuda, ptx, rng, poison, kernel, dtype, threads):
    import anycuda as ac
    fn = _kernel_in_turns(compile_cuda, ptx, kernel, threads)
    index = np.uint64 if "size_t" in kernel else np.int32
    for n in SIZES:
        for blocks in (1, 3, 7):
            x = (rng.integers(-1000, 1000, max(n, 1)) if dtype == np.int32 else rng.standard_normal(max(n, 1))).astype(dtype)
            out = poison(blocks, dtype)
            fn((blocks,), (threads,), (ac.asarray(x), out, index(n)))
            want = _strided_sums(x[:n], blocks * threads).reshape(blocks, threads).sum(axis=1)
            got = out.get().astype(np.float64)
            if dtype == np.int32:
                np.testing.assert_array_equal(got, want, err_msg=f"n={n} blocks={blocks}")
            else:
                np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-4,
                                           err_msg=f"n={n} blocks={blocks}")
    assert ran_as_block_program(fn, threads)


def test_lanes_leaving_in_different_rounds_keep_their_exit_values(compile_cuda, ptx, rng, poison):
    import anycuda as ac
    threads = 256
    fn = _kernel_in_turns(compile_cuda, ptx, "last_seen", threads)
    for n in SIZES:
        blocks = 3
        x = rng.integers(-1000, 1000, max(n, 1)).astype(np.int32)
        out = poison(3 * blocks * threads, np.int32)
        fn((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)))
        stride, t = blocks * threads, np.arange(blocks * threads)
        rounds = np.where(t < n, (n - 1 - t) // stride + 1, 0)
        last = np.where(rounds > 0, x[np.clip(t + (rounds - 1) * stride, 0, max(n - 1, 0))], -1) * 3 + 1
        r = rounds.reshape(blocks, threads)
        got = out.get().reshape(-1, 3)
        np.testing.assert_array_equal(got[:, 0], last, err_msg=f"n={n}")
        np.testing.assert_array_equal(got[:, 1], (r + r[:, ::-1]).ravel(), err_msg=f"n={n}")
        np.testing.assert_array_equal(got[:, 2], _strided_sums(x[:n], stride), err_msg=f"n={n}")
    assert ran_as_block_program(fn, threads)


def test_branches_in_the_loop_and_shuffles_after_it(compile_cuda, ptx, rng, poison):
    import anycuda as ac
    threads = 128
    fn = _kernel_in_turns(compile_cuda, ptx, "clipped_sum", threads)
    for n in SIZES:
        blocks = 5
        x = rng.standard_normal(max(n, 1)).astype(np.float32)
        out = poison(blocks, np.float32)
        fn((blocks,), (threads,), (ac.asarray(x), out, np.int32(n), np.float32(0.5)))
        want = _strided_sums(np.minimum(x[:n], np.float32(0.5)), blocks * threads).reshape(blocks, threads).sum(axis=1)
        np.testing.assert_allclose(out.get(), want, rtol=1e-5, atol=1e-4, err_msg=f"n={n}")
    assert ran_as_block_program(fn, threads)


def test_a_loop_with_a_break_is_not_in_turns(compile_cuda, ptx, rng, poison):
    import anycuda as ac
    threads = 256
    assert not _in_turns(ptx, "first_negative", threads)
    mod = compile_cuda(SOURCE, name="turns.cu")
    fn = mod.get_function("first_negative")
    n, blocks = 30011, 3
    x = rng.random(n).astype(np.float32)
    x[rng.choice(n, 40, replace=False)] *= -1
    out = poison(blocks * threads, np.int32)
    fn((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)))
    stride, t = blocks * threads, np.arange(blocks * threads)
    found = np.full(t.size, n)
    for k in range(t.size):
        hits = np.flatnonzero(x[t[k]::stride] < 0)
        if hits.size:
            found[k] = t[k] + hits[0] * stride
    f = found.reshape(blocks, threads)
    np.testing.assert_array_equal(out.get(), np.minimum(f, f[:, ::-1]).ravel())
