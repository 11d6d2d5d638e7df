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


def _assert_sums_close(got, want, magnitudes, dtype, msg):
    """Float sums against float64's: a sum's rounding grows with its terms' magnitudes (float32:
    30,011 normal values summed to -3.7585 where float64 gives -3.7583), while a term missed or
    added moves it by about one term (~1 here)."""
    eps = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=0, atol=eps * magnitudes.max() + eps, err_msg=msg)


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
                _assert_sums_close(got, want, _strided_sums(np.abs(x[:n]), blocks * threads).reshape(blocks, threads).sum(axis=1),
                                   dtype, f"n={n} blocks={blocks}")
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
        _assert_sums_close(out.get(), want, _strided_sums(np.abs(x[:n]), blocks * threads).reshape(blocks, threads).sum(axis=1),
                           np.float32, f"n={n}")
    assert ran_as_block_program(fn, threads)


UNROLLED_COPY = """.version 8.0
.target sm_80
.address_size 64

// `for (int p = tid; p < n; p += nt) o[p] = i[p];` over bytes, as nvcc -O3 writes it: a
// remainder loop of (rounds % 4) rounds, then the loop unrolled by four
.visible .entry copy_u8(
	.param .u64 copy_u8_param_0,
	.param .u64 copy_u8_param_1,
	.param .u32 copy_u8_param_2
)
{
	.reg .pred 	%p<6>;
	.reg .b16 	%rs<6>;
	.reg .b32 	%r<29>;
	.reg .b64 	%rd<25>;


	ld.param.u64 	%rd11, [copy_u8_param_0];
	ld.param.u64 	%rd12, [copy_u8_param_1];
	ld.param.u32 	%r12, [copy_u8_param_2];
	cvta.to.global.u64 	%rd1, %rd11;
	cvta.to.global.u64 	%rd2, %rd12;
	mov.u32 	%r13, %ctaid.x;
	mov.u32 	%r14, %ntid.x;
	mov.u32 	%r15, %tid.x;
	mad.lo.s32 	%r27, %r14, %r13, %r15;
	mov.u32 	%r16, %nctaid.x;
	mul.lo.s32 	%r2, %r14, %r16;
	setp.ge.s32 	%p1, %r27, %r12;
	@%p1 bra 	$L__BB0_7;

	add.s32 	%r17, %r2, %r12;
	add.s32 	%r18, %r27, %r2;
	not.b32 	%r19, %r18;
	add.s32 	%r20, %r17, %r19;
	div.u32 	%r3, %r20, %r2;
	add.s32 	%r21, %r3, 1;
	and.b32  	%r26, %r21, 3;
	setp.eq.s32 	%p2, %r26, 0;
	@%p2 bra 	$L__BB0_4;

	cvt.s64.s32 	%rd13, %r27;
	add.s64 	%rd24, %rd1, %rd13;
	cvt.s64.s32 	%rd4, %r2;
	add.s64 	%rd23, %rd2, %rd13;

$L__BB0_3:
	.pragma "nounroll";
	ld.global.u8 	%rs1, [%rd23];
	st.global.u8 	[%rd24], %rs1;
	add.s32 	%r27, %r27, %r2;
	add.s64 	%rd24, %rd24, %rd4;
	add.s64 	%rd23, %rd23, %rd4;
	add.s32 	%r26, %r26, -1;
	setp.ne.s32 	%p3, %r26, 0;
	@%p3 bra 	$L__BB0_3;

$L__BB0_4:
	setp.lt.u32 	%p4, %r3, 3;
	@%p4 bra 	$L__BB0_7;

	cvt.s64.s32 	%rd10, %r2;

$L__BB0_6:
	cvt.s64.s32 	%rd14, %r27;
	add.s64 	%rd15, %rd2, %rd14;
	ld.global.u8 	%rs2, [%rd15];
	add.s64 	%rd16, %rd1, %rd14;
	st.global.u8 	[%rd16], %rs2;
	add.s64 	%rd17, %rd15, %rd10;
	ld.global.u8 	%rs3, [%rd17];
	add.s64 	%rd18, %rd16, %rd10;
	st.global.u8 	[%rd18], %rs3;
	add.s32 	%r22, %r27, %r2;
	add.s32 	%r23, %r22, %r2;
	add.s64 	%rd19, %rd17, %rd10;
	ld.global.u8 	%rs4, [%rd19];
	add.s64 	%rd20, %rd18, %rd10;
	st.global.u8 	[%rd20], %rs4;
	add.s32 	%r24, %r23, %r2;
	add.s64 	%rd21, %rd19, %rd10;
	ld.global.u8 	%rs5, [%rd21];
	add.s64 	%rd22, %rd20, %rd10;
	st.global.u8 	[%rd22], %rs5;
	add.s32 	%r27, %r24, %r2;
	setp.lt.s32 	%p5, %r27, %r12;
	@%p5 bra 	$L__BB0_6;

$L__BB0_7:
	ret;

}
"""


def test_an_unrolled_copy_whose_remainder_loop_every_lane_skips(rng, poison):
    """nvcc's remainder loop before the loop unrolled by four: every lane skips it (its rounds
    a multiple of four), every lane runs it 1-3 times, or the lanes part; past a remainder loop
    no lane entered the unrolled loop's index kept no shape, and its accesses were gathers
    (blockstretches: the exit shapes of lanes that never enter)."""
    import anycuda as ac
    assert "round.again" in pipeline.block_program_ir(UNROLLED_COPY, "copy.ptx", "copy_u8", 64)
    fn = ac.RawModule(ptx=UNROLLED_COPY, name="copy.ptx").get_function("copy_u8")
    blocks, threads = 3, 64
    stride = blocks * threads
    for n in (stride * 8, stride * 9, stride * 10, stride * 11, stride * 8 + 5, stride * 12 - 1, 17, 0):
        x = rng.integers(0, 256, max(n, 1)).astype(np.uint8)
        out = poison(max(n, 1), np.uint8)
        fn((blocks,), (threads,), (out, ac.asarray(x), np.int32(n)))
        np.testing.assert_array_equal(out.get()[:n], x[:n], err_msg=f"n={n}")
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
