"""Windows of shared memory in registers (compiler/vector/sharedwindows.py): where only the
first warp runs from stretch to stretch, its loads of what it stored before come from a vector
it keeps, not from memory.

Each kernel runs against numpy on fresh random inputs with poisoned outputs. The tree sums check
that a window is made (in the IR) and that the sums are right for every block size and a last
block cut short; the others write the window's memory some other way between its uses (a store
through another register, a generic pointer, an atomic, every warp in a stretch between), read
lanes outside it or read it as another type, or lie at the end of the shared memory: each must
see memory as it is.
"""
from __future__ import annotations

import numpy as np
import pytest

from anycuda.compiler import pipeline
from conftest import ran_as_block_program

SOURCE = r"""
#define TREE_SUM(NAME, T)                                                                  \
extern "C" __global__ void NAME(const T* in, T* out, int n) {                              \
    extern __shared__ T s_##NAME[];                                                        \
    unsigned int tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;             \
    s_##NAME[tid] = i < n ? in[i] : (T)0;                                                  \
    __syncthreads();                                                                       \
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {                                \
        if (tid < s) s_##NAME[tid] += s_##NAME[tid + s];                                   \
        __syncthreads();                                                                   \
    }                                                                                      \
    if (tid == 0) out[blockIdx.x] = s_##NAME[0];                                           \
}
TREE_SUM(tree_f32, float)
TREE_SUM(tree_f64, double)
TREE_SUM(tree_i32, int)

// The first warp's steps, with its window's memory written some other way between its uses in
// one stretch and from one stretch to the next: a store through another register (the
// elements reversed), a generic pointer (`p`, which is `s` where `generic` is 1), an atomic.
#define REWRITTEN(NAME, WRITE)                                                             \
extern "C" __global__ void NAME(const float* in, float* out, int generic, float* elsewhere) { \
    __shared__ float s[64];                                                                \
    unsigned int tid = threadIdx.x;                                                        \
    s[tid] = in[blockIdx.x * blockDim.x + tid];                                            \
    __syncthreads();                                                                       \
    if (tid < 32) s[tid] += s[tid + 32];                                                   \
    __syncthreads();                                                                       \
    if (tid < 16) {                                                                        \
        float* p = generic ? s : elsewhere;                                                \
        float a = s[tid];                                                                  \
        WRITE;                                                                             \
        out[blockIdx.x * 64 + 32 + tid] = s[tid] * 3.0f;                                   \
    }                                                                                      \
    __syncthreads();                                                                       \
    if (tid < 32) out[blockIdx.x * 64 + tid] = s[tid] + 0.5f * s[tid + 1];                 \
}
REWRITTEN(untouched, (void)p; (void)a)
REWRITTEN(reversed, (void)p; s[15 - tid] = a + 100.0f)
REWRITTEN(through_generic, p[tid + 4] = -1.0f)
REWRITTEN(by_atomic, (void)p; (void)a; atomicAdd(&s[tid ^ 1], 1.0f))

// another warp writes the first warp's window (through the same register: `lane` is alike in
// both warps) in a stretch between two of the first warp's
extern "C" __global__ void another_warp_between(const float* in, float* out) {
    __shared__ float s[64];
    unsigned int tid = threadIdx.x, lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    s[tid] = in[blockIdx.x * blockDim.x + tid];
    __syncthreads();
    if (tid < 32) s[lane] += 1.0f;
    __syncthreads();
    if (tid >= 32) s[lane] = s[lane + 32] * 2.0f;
    __syncthreads();
    if (tid < 32) out[blockIdx.x * 32 + lane] = s[lane] * 3.0f;
}

// a store through the window's register at another offset
extern "C" __global__ void shifted_store(const float* in, float* out) {
    __shared__ float s[64];
    unsigned int tid = threadIdx.x;
    s[tid] = in[blockIdx.x * blockDim.x + tid];
    __syncthreads();
    if (tid < 32) s[tid] += 1.0f;
    __syncthreads();
    if (tid < 16) s[tid + 1] = s[tid] * 2.0f;
    __syncthreads();
    if (tid < 31) out[blockIdx.x * 32 + tid] = s[tid];     // (a test of its own: one warp only)
}

// lanes that read past the window (tid + 24 for tid < 30), and the window read as ints
extern "C" __global__ void outside_and_bits(const float* in, unsigned int* out) {
    __shared__ float s[64];
    unsigned int tid = threadIdx.x;
    s[tid] = in[blockIdx.x * blockDim.x + tid];
    __syncthreads();
    if (tid < 32) s[tid] = s[tid] + 1.0f;
    __syncthreads();
    const unsigned int* bits = (const unsigned int*)s;
    if (tid < 30) out[blockIdx.x * 32 + tid] = bits[tid] ^ __float_as_uint(s[tid + 24]);
}

// the warp-synchronous tail of the classic reduction: after the barriers, the first warp
// sums through a volatile pointer, each step reading the half its step before stored and
// the half beyond (lanes outside the window); then thread 0 stores the block's sum
#define WARP_TAIL(NAME, T)                                                                 \
extern "C" __global__ void NAME(const T* in, T* out, int n) {                              \
    __shared__ T s_##NAME[1024];                                                           \
    unsigned int tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;             \
    s_##NAME[tid] = i < n ? in[i] : (T)0;                                                  \
    __syncthreads();                                                                       \
    for (unsigned int s = blockDim.x / 2; s > 32; s >>= 1) {                               \
        if (tid < s) s_##NAME[tid] += s_##NAME[tid + s];                                   \
        __syncthreads();                                                                   \
    }                                                                                      \
    if (tid < 32) {                                                                        \
        volatile T* v = s_##NAME;                                                          \
        v[tid] += v[tid + 32]; v[tid] += v[tid + 16]; v[tid] += v[tid + 8];                \
        v[tid] += v[tid + 4]; v[tid] += v[tid + 2]; v[tid] += v[tid + 1];                  \
    }                                                                                      \
    if (tid == 0) out[blockIdx.x] = s_##NAME[0];                                           \
}
WARP_TAIL(warp_tail_f32, float)
WARP_TAIL(warp_tail_f64, double)
WARP_TAIL(warp_tail_i32, int)

// the first warp's inclusive scan of its lanes through a volatile buffer whose first 32
// elements are zeros (the scan sample's form): each step reads `d` lanes before the window,
// lane 0's from the zeros; then lanes under 24 add the element 16 on, lanes 16 to 23 reading
// past the window under a mask that runs some of the lanes outside it
extern "C" __global__ void warp_scan(const int* in, int* out) {
    __shared__ int buf[128];
    unsigned int tid = threadIdx.x;
    for (unsigned int i = tid; i < 128; i += blockDim.x) buf[i] = 0;
    __syncthreads();
    if (tid < 32) {
        volatile int* v = buf + 32 + tid;
        v[0] = in[blockIdx.x * 32 + tid];
        for (int d = 1; d < 32; d <<= 1) v[0] += v[-d];
        if (tid < 24) v[0] += v[16];
        out[blockIdx.x * 32 + tid] = v[0];
    }
}

// a window that would reach past the end of the block's shared memory (40 floats)
extern "C" __global__ void at_the_end(const float* in, float* out) {
    __shared__ float s[40];
    unsigned int tid = threadIdx.x;
    if (tid < 40) s[tid] = in[blockIdx.x * 40 + tid];
    __syncthreads();
    if (tid < 24) s[tid + 16] += 1.0f;
    __syncthreads();
    if (tid < 16) s[tid + 16] += s[tid + 24];
    __syncthreads();
    if (tid < 32) out[blockIdx.x * 32 + tid] = tid < 24 ? s[tid + 16] : -7.0f;
}
"""


@pytest.fixture(scope="module")
def ptx():
    from anycuda.cudac import compile_to_ptx
    return compile_to_ptx(SOURCE, name="windows.cu")


@pytest.fixture(scope="module")
def module(compile_cuda):
    return compile_cuda(SOURCE, name="windows.cu")


def _has_window(ptx, kernel, threads) -> bool:
    return "window.made" in pipeline.block_program_ir(ptx, "windows.ptx", kernel, threads)


@pytest.mark.parametrize("kernel, dtype", [("tree_f32", np.float32), ("tree_f64", np.float64), ("tree_i32", np.int32)])
def test_tree_sums_through_windows(ptx, module, rng, poison, kernel, dtype):
    fn = module.get_function(kernel)
    for threads in (32, 64, 128, 256, 512, 1024):       # (32: a block of one warp has windows too)
        assert _has_window(ptx, kernel, threads)
        _check_block_sums(fn, rng, poison, dtype, 5, threads, threads * np.dtype(dtype).itemsize)


def _check_block_sums(fn, rng, poison, dtype, blocks, threads, shared_mem=0):
    """Run a kernel summing each block's elements of n (the last block cut short) against
    numpy, on fresh inputs with a poisoned output; it must have run as a block program."""
    import anycuda as ac
    n = blocks * threads - 37
    x = (rng.integers(-1000, 1000, n) if dtype == np.int32 else rng.standard_normal(n)).astype(dtype)
    out = poison(blocks, dtype)
    fn((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)), shared_mem=shared_mem)
    padded = np.zeros(blocks * threads, np.float64)
    padded[:n] = x
    want = padded.reshape(blocks, threads).sum(axis=1)
    if dtype == np.int32:
        np.testing.assert_array_equal(out.get(), want, err_msg=f"threads={threads}")
    else:
        np.testing.assert_allclose(out.get(), want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-3,
                                   err_msg=f"threads={threads}")
    assert ran_as_block_program(fn, threads)


def _rewritten_reference(x, kernel):
    s = x.astype(np.float32).copy()
    s[:32] += s[32:64]
    if kernel == "reversed":
        s[15 - np.arange(16)] = s[:16] + 100
    if kernel == "through_generic":
        s[4:20] = -1
    if kernel == "by_atomic":
        s[np.arange(16) ^ 1] += 1
    return np.concatenate([s[:32] + np.float32(0.5) * s[1:33], s[:16] * np.float32(3), np.full(16, np.nan, np.float32)])


@pytest.mark.parametrize("kernel", ["untouched", "reversed", "through_generic", "by_atomic"])
def test_memory_written_between_the_window_s_uses(ptx, module, rng, poison, kernel):
    import anycuda as ac
    fn = module.get_function(kernel)
    blocks, threads = 3, 64
    x = rng.standard_normal(blocks * threads).astype(np.float32)
    assert _has_window(ptx, kernel, threads)
    out, elsewhere = poison(blocks * 64, np.float32), ac.zeros(64, np.float32)
    fn((blocks,), (threads,), (ac.asarray(x), out, np.int32(1), elsewhere))
    want = np.concatenate([_rewritten_reference(x[b * threads:(b + 1) * threads], kernel) for b in range(blocks)])
    np.testing.assert_allclose(out.get(), want, rtol=1e-6, equal_nan=True)
    assert ran_as_block_program(fn, threads)


def _per_block(x, threads, step):
    return np.concatenate([step(x[b * threads:(b + 1) * threads].copy()) for b in range(len(x) // threads)])


def _first_warp_results(ptx, module, rng, poison, kernel, out_dtype, step, blocks=3, threads=64):
    """(got, want), each (blocks, 32): kernel's out[b * 32 + t], which must use a window and run
    as a block program, and step(block's input) for each block."""
    import anycuda as ac
    fn = module.get_function(kernel)
    assert _has_window(ptx, kernel, threads)
    x = rng.standard_normal(blocks * threads).astype(np.float32)
    out = poison(blocks * 32, out_dtype)
    fn((blocks,), (threads,), (ac.asarray(x), out))
    got = out.get().reshape(blocks, 32)          # (the launch has run: its program is made)
    assert ran_as_block_program(fn, threads)
    return got, _per_block(x, threads, step).reshape(blocks, 32)


def test_another_warp_writes_between_the_first_warp_s_stretches(ptx, module, rng, poison):
    def step(s):
        s[:32] += 1
        s[:32] = s[32:64] * np.float32(2)
        return s[:32] * np.float32(3)
    got, want = _first_warp_results(ptx, module, rng, poison, "another_warp_between", np.float32, step, blocks=4)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_store_at_another_offset_of_the_window_s_register(ptx, module, rng, poison):
    def step(s):
        s[:32] += 1
        s[1:17] = s[0:16] * np.float32(2)
        return s[:32]
    got, want = _first_warp_results(ptx, module, rng, poison, "shifted_store", np.float32, step)
    np.testing.assert_allclose(got[:, :31], want[:, :31], rtol=1e-6)


def test_lanes_outside_the_window_and_its_bits_as_ints(ptx, module, rng, poison):
    def step(s):
        s[:32] += 1
        return s[:32].view(np.uint32) ^ s[24:56].view(np.uint32)
    got, want = _first_warp_results(ptx, module, rng, poison, "outside_and_bits", np.uint32, step)
    np.testing.assert_array_equal(got[:, :30], want[:, :30])


@pytest.mark.parametrize("threads", [64, 128])
def test_a_window_past_the_end_of_shared_memory(module, rng, poison, threads):
    import anycuda as ac
    fn = module.get_function("at_the_end")
    blocks = 3
    x = rng.standard_normal(blocks * 40).astype(np.float32)
    out = poison(blocks * 32, np.float32)
    fn((blocks,), (threads,), (ac.asarray(x), out))
    want = []
    for b in range(blocks):
        s = x[b * 40:(b + 1) * 40].copy()
        s[16:40] += 1
        s[16:32] += s[24:40]
        want.append(np.concatenate([s[16:40], np.full(8, -7, np.float32)]))
    np.testing.assert_allclose(out.get(), np.concatenate(want), rtol=1e-6)


@pytest.mark.parametrize("kernel, dtype", [("warp_tail_f32", np.float32), ("warp_tail_f64", np.float64),
                                           ("warp_tail_i32", np.int32)])
def test_warp_synchronous_tails_through_windows(ptx, module, rng, poison, kernel, dtype):
    fn = module.get_function(kernel)
    elem = {np.float32: "float", np.float64: "double", np.int32: "i32"}[dtype]
    for threads in (64, 128, 256, 1024):
        # (the steps from `v[tid + 16]` on read the lanes past the window apart: 16, 8, ... 1 of
        # them; in blocks of 64 the loop before the tail is skipped whole, and its dead barrier
        # must not cut the tail's stretches)
        code = pipeline.block_program_ir(ptx, "windows.ptx", kernel, threads)
        assert "window.made" in code and all(f"<{k} x {elem}>" in code for k in (16, 8, 4, 2, 1))
        _check_block_sums(fn, rng, poison, dtype, 4, threads)


@pytest.mark.parametrize("threads", [32, 64, 256])
def test_a_warp_scan_reading_before_and_past_its_window(ptx, module, rng, poison, threads):
    import anycuda as ac
    fn = module.get_function("warp_scan")
    assert _has_window(ptx, "warp_scan", threads)
    blocks = 3
    x = rng.integers(-1000, 1000, blocks * 32).astype(np.int32)
    out = poison(blocks * 32, np.int32)
    fn((blocks,), (threads,), (ac.asarray(x), out))
    scan = np.cumsum(x.reshape(blocks, 32), axis=1).astype(np.int32)
    # lanes under 24 add the element 16 on: lanes 16 to 23 read the buffer's zeros past the scan
    beyond = np.concatenate([scan, np.zeros((blocks, 16), np.int32)], axis=1)[:, 16:48]
    want = np.where(np.arange(32) < 24, scan + beyond, scan)
    np.testing.assert_array_equal(out.get().reshape(blocks, 32), want)
    assert ran_as_block_program(fn, threads)
