"""Block programs (compiler/vector/blockprograms.py): an acyclic kernel's block of W x 1 x 1 threads
as one vector program, made at the first launch of that shape.

Each kernel here runs against numpy on fresh random inputs with poisoned outputs, at block
sizes that leave the last block partial, and the test checks which way it ran: through a
block program (KernelImage._programs[W] set) or, for what a block program does not take,
through the rounds. The conformance and golden tests run the same way, so every acyclic
kernel they launch with such blocks goes through a block program too.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from anycuda.compiler import pipeline
from anycuda.compiler.vector import blockprograms
from conftest import ran_as_block_program

SOURCE = r"""
// every kind of access a block program tells apart, a barrier, shuffles and a lone lane's store
extern "C" __global__ void shapes(const float* in, float* out, int n) {
    __shared__ float tile[1024];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    float a = 0.0f, b = 0.0f, c = 0.0f;
    if (i < n) {
        a = in[i];                          // consecutive lanes
        b = in[2 * i + 1];                  // every second element
        c = in[3 * i + 2];                  // every third
    }
    float d = in[n - 1 - blockIdx.x];       // one address for the whole block
    tile[t] = a * 2.0f + b;
    __syncthreads();
    float e = tile[blockDim.x - 1 - t];     // lanes apart (reversed)
    float s = c;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    if (i < n) {                            // stores four apart
        out[4 * i] = e;
        out[4 * i + 1] = s;
        out[4 * i + 2] = d;
        out[4 * i + 3] = a - b;
    }
    if (t == blockDim.x - 1) out[4 * n + blockIdx.x] = a + c;
}

// lanes that leave early (and hold no barrier), lanes that part at a branch and meet again
extern "C" __global__ void collatz_step(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i];
    if (v & 1) v = 3 * v + 1;
    else v >>= 1;
    __syncthreads();
    out[i] = v;
}

// a few lanes at addresses apart (one by one), through shared memory
extern "C" __global__ void sparse_moves(const int* perm, const float* in, float* out) {
    __shared__ float s[1024];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = -1.0f;
    __syncthreads();
    if ((t & 15) == 3) s[perm[i]] = in[blockIdx.x * blockDim.x + perm[i]];
    __syncthreads();
    out[i] = s[t];
}

// an index that wraps past 2^32 inside a warp: the lanes' addresses are not one ramp
extern "C" __global__ void wrapping(const float* p, float* out, unsigned off) {
    unsigned idx = off + threadIdx.x;
    float v = -1.0f;
    if (idx < off) v = p[idx];              // the lanes after the wrap read p[0], p[1], ...
    __syncthreads();
    out[threadIdx.x] = v;
}

// a 64-bit value widened from an index that wraps inside a warp, kept across a barrier: it is
// not one ramp, so its lanes wait in the warp's array instead of being rebuilt from the shape
extern "C" __global__ void wrapping_kept(unsigned long long* out, unsigned off) {
    unsigned long long w = off + threadIdx.x;
    out[threadIdx.x] = w;
    __syncthreads();
    out[blockDim.x + threadIdx.x] = w + 1;
}

// spans that whole warps skip (warp 1 runs the first, lanes 3..9 of warp 2 the second): a
// register written there (v), one first written there (u), one whose shape changes (idx)
extern "C" __global__ void skipped_spans(const int* in, int* out) {
    int t = threadIdx.x, g = blockIdx.x * blockDim.x + t, warp = t >> 5, lane = t & 31;
    int v = in[g], u, idx = t;
    if (warp == 1) {
        v = v * 3 + __shfl_xor_sync(0xffffffffu, v, 1);
        v ^= __shfl_xor_sync(0xffffffffu, v, 2) + lane;
        v += __shfl_down_sync(0xffffffffu, v, 5);
        u = v - 7;
        idx = 3 * t + 1;
    }
    if (warp == 2 && lane >= 3 && lane < 10) {
        v = (v << 3) - in[g ^ 1] * 5 + (v >> 2) + (lane ^ 9) * in[g ^ 2] - (v & 63) * 11 + (g | 4);
        u = v * v + 1;
    }
    __syncthreads();
    out[g] = v + (warp == 1 || (warp == 2 && lane >= 3 && lane < 10) ? u : 0) + idx;
}

// interleaved loads (in[4t + j]) taken from one span, loaded once: the first at offset 8, one
// before it (a group of its own), a store into the span (through `alias`, the same array)
// that the next load sees
extern "C" __global__ void load_group(const int* in, int* alias, int* out, int n) {
    __shared__ int first[32];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int a = 4 * t + 2 < n ? in[4 * t + 2] : 0;
    int b = 4 * t < n ? in[4 * t] : 0;
    int c = 4 * t + 1 < n ? in[4 * t + 1] : 0;
    if (4 * t + 3 < n) alias[4 * t + 3] = a - b;
    int d = 4 * t + 3 < n ? in[4 * t + 3] : 0;
    if ((threadIdx.x & 31) == 0) first[threadIdx.x >> 5] = a;
    __syncthreads();
    if (t < n) out[t] = a * 3 + b * 5 + c * 7 + d * 11 + first[threadIdx.x >> 5];
}

// floats across a barrier: cvt to and between floats, div, sqrt, rsqrt, abs and neg
extern "C" __global__ void float_forms(const int* in, const float* x, const double* d, float* out, double* wide) {
    __shared__ float s[1024];
    int t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
    float f = (float)in[g];
    float q = x[g] / (f + 1000.5f);
    s[t] = q;
    __syncthreads();
    float o = s[blockDim.x - 1 - t];
    float r = sqrtf(fabsf(o)) - rsqrtf(fabsf(q) + 1.0f);
    out[g] = -r * (float)d[g];
    wide[g] = (double)q * 0.5;
}

// integer division and remainder across a barrier (zero divisors and INT_MIN / -1 among them)
extern "C" __global__ void int_divide(const int* a, const int* c, const unsigned* ua, const unsigned* uc,
                                      int* out, unsigned* uout) {
    __shared__ int s[1024];
    int t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
    int q = a[g] / c[g];
    s[t] = q;
    __syncthreads();
    out[2 * g] = s[blockDim.x - 1 - t];
    out[2 * g + 1] = a[g] % c[g];
    uout[2 * g] = ua[g] / uc[g];
    uout[2 * g + 1] = ua[g] % uc[g];
}

// no barrier and no shuffle: the loop over the block's threads vectorises it as it is
extern "C" __global__ void plain_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// warp totals through shared memory between two barriers, as a block scan does
__device__ int warp_scan(int v, int lane) {
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        int u = __shfl_up_sync(0xffffffff, v, o);
        if (lane >= o) v += u;
    }
    return v;
}

extern "C" __global__ void warp_sums(const int* in, int* out, int n) {
    __shared__ int sums[32];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t, lane = t & 31, warp = t >> 5;
    int v = warp_scan(i < n ? in[i] : 0, lane);
    if (lane == 31) sums[warp] = v;
    __syncthreads();
    int before = 0;
    for (int w = 0; w < warp; ++w) before += sums[w];     // a loop of a count per warp (blockloops.py)
    if (i < n) out[i] = v + before;
}

extern "C" __global__ void warp_sums_unrolled(const int* in, int* out, int n) {
    __shared__ int sums[32];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t, lane = t & 31, warp = t >> 5;
    int v = warp_scan(i < n ? in[i] : 0, lane);
    if (lane == 31) sums[warp] = v;
    __syncthreads();
    if (warp == 0) sums[lane] = warp_scan(lane < (int)(blockDim.x >> 5) ? sums[lane] : 0, lane);
    __syncthreads();
    if (warp > 0) v += sums[warp - 1];
    if (i < n) out[i] = v;
}
"""


@pytest.fixture
def module(compile_cuda):
    return compile_cuda(SOURCE, name="blockprograms.cu")


def _shapes_reference(x, n, threads):
    blocks = -(-n // threads)
    out = np.zeros(4 * n + blocks, np.float32)
    a, b, c = x[:n], x[1:2 * n:2], x[2:3 * n:3]
    t = np.arange(blocks * threads)
    full_a = np.zeros(blocks * threads, np.float32)
    full_b = np.zeros(blocks * threads, np.float32)
    full_c = np.zeros(blocks * threads, np.float32)
    full_a[:n], full_b[:n], full_c[:n] = a, b, c
    tile = (full_a * np.float32(2) + full_b).reshape(blocks, threads)
    e = tile[:, ::-1].ravel()
    s = full_c.reshape(-1, 32).sum(axis=1, dtype=np.float32)      # order differs: compared with a tolerance
    s = np.repeat(s, 32)
    d = np.repeat(x[n - 1 - np.arange(blocks)], threads)
    out[0:4 * n:4], out[1:4 * n:4], out[2:4 * n:4], out[3:4 * n:4] = e[:n], s[:n], d[:n], (full_a - full_b)[:n]
    last = t.reshape(blocks, threads)[:, -1]
    out[4 * n:] = full_a[last] + full_c[last]
    return out


@pytest.mark.parametrize("threads,n", [(256, 1000), (96, 500), (1024, 2048)])
def test_access_shapes(module, rng, poison, threads, n):
    import anycuda as ac
    x = rng.standard_normal(3 * n + 8).astype(np.float32)
    blocks = -(-n // threads)
    out = poison(4 * n + blocks, np.float32)
    k = module.get_function("shapes")
    k((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)))
    got, want = out.get(), _shapes_reference(x, n, threads)
    assert ran_as_block_program(k, threads)
    sums = np.zeros(got.size, bool)
    sums[1:4 * n:4] = True
    np.testing.assert_array_equal(got[~sums], want[~sums])
    np.testing.assert_allclose(got[sums], want[sums], rtol=1e-5, atol=1e-5)


def test_early_exit_and_divergence(module, rng, poison):
    import anycuda as ac
    n = 777
    x = rng.integers(-10 ** 6, 10 ** 6, n).astype(np.int32)
    out = poison(n + 64, np.int32)
    k = module.get_function("collatz_step")
    k(((n + 127) // 128,), (128,), (ac.asarray(x), out, np.int32(n)))
    want = np.where(x & 1, 3 * x + 1, x >> 1).astype(np.int32)
    got = out.get()
    assert ran_as_block_program(k, 128)
    np.testing.assert_array_equal(got[:n], want)
    assert (got[n:] == np.frombuffer(b"\xcd" * 4, np.int32)[0]).all(), "written past n"


@pytest.mark.parametrize("name,program", [("warp_sums", True), ("warp_sums_unrolled", True)])
def test_block_scan_both_ways(module, rng, poison, name, program):
    import anycuda as ac
    n, threads = 1500, 256
    x = rng.integers(-100, 100, n).astype(np.int32)
    out = poison(n, np.int32)
    k = module.get_function(name)
    k(((n + threads - 1) // threads,), (threads,), (ac.asarray(x), out, np.int32(n)))
    padded = np.zeros(-(-n // threads) * threads, np.int64)
    padded[:n] = x
    want = np.cumsum(padded.reshape(-1, threads), axis=1).ravel()[:n].astype(np.int32)
    np.testing.assert_array_equal(out.get(), want)
    assert ran_as_block_program(k, threads) == program


def test_shapes_a_block_program_does_not_take(module, rng, poison):
    """Blocks whose rows are not whole vectors (blockprograms.lane_width) run in the rounds, and right."""
    import anycuda as ac
    n = 300
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    k = module.get_function("collatz_step")
    for block in ((100,), (12, 4)):
        out = poison(n, np.int32)
        k(((n + block[0] - 1) // block[0],), block, (ac.asarray(x), out, np.int32(n)))   # (the rows of y alike)
        np.testing.assert_array_equal(out.get(), np.where(x & 1, 3 * x + 1, x >> 1))
    assert not blockprograms.supported_shape((100, 1, 1)) and not blockprograms.supported_shape((12, 4, 1))


def _skipped_spans_reference(x, threads):
    out = np.empty_like(x)
    for blk in range(len(x) // threads):
        v = x[blk * threads:(blk + 1) * threads].astype(np.int64).copy()
        t = np.arange(threads)
        u = np.zeros(threads, np.int64)
        idx = t.copy()
        g = blk * threads + t
        if threads > 32:
            w = slice(32, 64)
            lane = t[w] - 32
            a = v[w] * 3 + v[w][lane ^ 1]
            a = a ^ (a[lane ^ 2] + lane)
            a = a + a[np.where(lane + 5 < 32, lane + 5, lane)]       # (past the end: its own)
            a = ((a + 2 ** 31) % 2 ** 32) - 2 ** 31
            v[w], u[w], idx[w] = a, a - 7, 3 * t[w] + 1
        if threads > 64:
            for tt in range(64 + 3, 64 + 10):
                lane, gg = tt - 64, g[tt]
                a = (v[tt] << 3) - x[gg ^ 1] * 5 + (v[tt] >> 2) + (lane ^ 9) * x[gg ^ 2] - (v[tt] & 63) * 11 + (gg | 4)
                a = ((a + 2 ** 31) % 2 ** 32) - 2 ** 31
                v[tt], u[tt] = a, ((a * a + 1 + 2 ** 31) % 2 ** 32) - 2 ** 31
        out[blk * threads:(blk + 1) * threads] = (v + u + idx + 2 ** 31) % 2 ** 32 - 2 ** 31
    return out


@pytest.mark.parametrize("threads", [64, 96, 256])
def test_spans_whole_warps_skip(module, rng, poison, threads):
    """What warps skip keeps its values from before; what they run is as if nothing was
    skipped (a span is skipped only where its mask is empty at run time)."""
    import anycuda as ac
    x = rng.integers(-1000, 1000, 3 * threads).astype(np.int32)
    out = poison(x.size, np.int32)
    k = module.get_function("skipped_spans")
    k((3,), (threads,), (ac.asarray(x), out))
    np.testing.assert_array_equal(out.get(), _skipped_spans_reference(x, threads))
    assert ran_as_block_program(k, threads)


@pytest.mark.parametrize("n", [4 * 512, 4 * 500 + 3])
def test_a_group_of_interleaved_loads(module, rng, poison, n):
    """Warps whose lanes all load take their elements from the group's span; the warp where
    the loads' bounds checks part (n not a multiple of 128), and those past it, load as
    before; the store between two loads is seen."""
    import anycuda as ac
    threads = 128
    x = rng.integers(-1000, 1000, n + 8).astype(np.int32)
    dx = ac.asarray(x)
    out = poison(n, np.int32)
    k = module.get_function("load_group")
    k((-(-n // threads),), (threads,), (dx, dx, out, np.int32(n)))
    t = np.arange(n)
    at = lambda j: np.where(4 * t + j < n, x[np.minimum(4 * t + j, n - 1)], 0)
    a, b, c = at(2), at(0), at(1)
    d = np.where(4 * t + 3 < n, a - b, 0)
    want = a * 3 + b * 5 + c * 7 + d * 11 + a[t // 32 * 32]
    np.testing.assert_array_equal(out.get(), want)
    assert ran_as_block_program(k, threads)


# a register rewritten in place (`add %rd4, %rd4, 4096`, its shape kept) between two loads of
# what would be a group: the second load is from its new value, not from the first one's span
REWRITTEN_PTX = """.version 8.0
.target sm_80
.address_size 64

.visible .entry rewritten(.param .u64 p_in, .param .u64 p_out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [p_in];
    ld.param.u64 %rd2, [p_out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    ld.global.u32 %r3, [%rd4+8];
    add.s64 %rd4, %rd4, 4096;
    add.s64 %rd4, %rd4, 4096;
    ld.global.u32 %r4, [%rd4+4];
    bar.sync 0;
    add.s32 %r5, %r2, %r3;
    add.s32 %r6, %r5, %r4;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.u32 [%rd6], %r6;
    ret;
}
"""


def test_a_register_rewritten_between_loads(rng, poison):
    import anycuda as ac
    threads = 128
    x = rng.integers(-1000, 1000, 4 * threads + 2048).astype(np.int32)
    out = poison(threads, np.int32)
    k = ac.RawModule(ptx=REWRITTEN_PTX, name="rewritten.ptx").get_function("rewritten")
    k((1,), (threads,), (ac.asarray(x), out))
    t = np.arange(threads)
    np.testing.assert_array_equal(out.get(), x[4 * t] + x[4 * t + 2] + x[2048 + 4 * t + 1])
    assert ran_as_block_program(k, threads)


# two stores of a pair, `out[2i]` and `out[2i + 1]`, each under a guard of its own (scan's
# last lines), with a load between them: a shared load may go before the first store, which
# then waits to be made with the second as one; a global or generic load reads what it wrote
PAIR_PTX = """.version 8.0
.target sm_80
.address_size 64

.visible .entry pair(.param .u64 p_out, .param .u64 p_seen, .param .u32 p_n)
{
    .reg .pred %p<3>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b32 sh[256];
    ld.param.u64 %rd1, [p_out];
    ld.param.u64 %rd2, [p_seen];
    ld.param.u32 %r1, [p_n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r5, %r3, %r4, %r2;
    shl.b32 %r6, %r5, 1;
    mov.u32 %r7, sh;
    shl.b32 %r8, %r2, 2;
    add.s32 %r9, %r7, %r8;
    mul.lo.s32 %r10, %r5, 7;
    st.shared.u32 [%r9], %r10;
    bar.sync 0;
    mul.wide.s32 %rd3, %r6, 4;
    add.s64 %rd4, %rd1, %rd3;
    setp.ge.s32 %p1, %r6, %r1;
    @%p1 bra SKIP1;
    add.s32 %r11, %r10, 1;
    st.global.u32 [%rd4], %r11;
SKIP1:
    MIDDLE
    add.s32 %r13, %r6, 1;
    setp.ge.s32 %p2, %r13, %r1;
    @%p2 bra SKIP2;
    add.s32 %r14, %r12, 2;
    st.global.u32 [%rd4+4], %r14;
SKIP2:
    mul.wide.s32 %rd5, %r5, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.u32 [%rd6], %r12;
    ret;
}
"""


@pytest.mark.parametrize("middle", ["ld.shared.u32 %r12, [%r9];", "ld.global.u32 %r12, [%rd4];",
                                    "ld.u32 %r12, [%rd4];"])
@pytest.mark.parametrize("n", [2 * 256 * 3, 2 * 256 * 3 - 77])
def test_a_pair_of_stores_under_guards_of_their_own(rng, poison, middle, n):
    """The pair's values land where their guards hold, whatever the load between them reads
    (the first store's value, through a global or generic address), in full and partial
    blocks."""
    import anycuda as ac
    threads = 256
    k = ac.RawModule(ptx=PAIR_PTX.replace("MIDDLE", middle), name="pair.ptx").get_function("pair")
    out_host = rng.integers(-1000, 1000, 2 * threads * 3).astype(np.int32)
    out, seen = ac.asarray(out_host), poison(threads * 3, np.int32)
    k((3,), (threads,), (out, seen, np.int32(n)))
    i = np.arange(threads * 3)
    first = np.where(2 * i < n, 7 * i + 1, out_host[0::2])
    read = 7 * i if "shared" in middle else first
    want = out_host.copy()
    want[0::2] = first
    want[1::2] = np.where(2 * i + 1 < n, read + 2, out_host[1::2])
    np.testing.assert_array_equal(out.get(), want)
    np.testing.assert_array_equal(seen.get(), read)
    assert ran_as_block_program(k, threads)


def test_float_forms(module, rng, poison):
    """Conversions to and between floats, division and roots in a block program, against
    numpy in the same precision (rsqrt.approx within 2^-22, as a GPU's)."""
    import anycuda as ac
    threads, blocks = 256, 3
    n = threads * blocks
    ints = rng.integers(-1000, 1000, n).astype(np.int32)
    x = rng.standard_normal(n).astype(np.float32)
    d = rng.standard_normal(n)
    out, wide = poison(n, np.float32), poison(n, np.float64)
    k = module.get_function("float_forms")
    k((blocks,), (threads,), (ac.asarray(ints), ac.asarray(x), ac.asarray(d), out, wide))
    q = x / (ints.astype(np.float32) + np.float32(1000.5))
    o = q.reshape(blocks, threads)[:, ::-1].ravel()
    r = np.sqrt(np.abs(o)) - np.float32(1) / np.sqrt(np.abs(q) + np.float32(1))
    np.testing.assert_allclose(out.get(), -r * d.astype(np.float32), rtol=2 ** -20, atol=2 ** -22)
    np.testing.assert_array_equal(wide.get(), q.astype(np.float64) * 0.5)
    assert ran_as_block_program(k, threads)


def test_integer_division(module, rng, poison):
    """div and rem lane by lane, as a GPU gives them: x / 0 and x % 0 all ones, INT_MIN / -1
    INT_MIN, x % -1 zero, the remainder's sign the dividend's."""
    import anycuda as ac
    threads, blocks = 128, 2
    n = threads * blocks
    a = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    c = rng.integers(-50, 50, n).astype(np.int32)
    a[:8], c[:8] = [-2 ** 31, -2 ** 31, 7, -7, 0, 5, -2 ** 31, 1], [-1, 0, 0, -1, 0, -3, 1, -1]
    ua = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    uc = rng.integers(0, 40, n).astype(np.uint32)
    out, uout = poison(2 * n, np.int32), poison(2 * n, np.uint32)
    k = module.get_function("int_divide")
    k((blocks,), (threads,), tuple(ac.asarray(v) for v in (a, c, ua, uc)) + (out, uout))
    a64, c64 = a.astype(np.int64), c.astype(np.int64)
    safe = np.where(c64 == 0, 1, c64)
    q = np.where(c64 == 0, -1, np.trunc(a64 / safe).astype(np.int64))
    q = ((q + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)          # INT_MIN / -1 wraps
    r = np.where(c64 == 0, -1, np.fmod(a64, safe)).astype(np.int32)
    usafe = np.where(uc == 0, 1, uc)
    want = np.empty(2 * n, np.int32)
    want[0::2], want[1::2] = q.reshape(blocks, threads)[:, ::-1].ravel(), r
    uwant = np.empty(2 * n, np.uint32)
    uwant[0::2] = np.where(uc == 0, 0xFFFFFFFF, ua // usafe)
    uwant[1::2] = np.where(uc == 0, 0xFFFFFFFF, ua % usafe)
    np.testing.assert_array_equal(out.get(), want)
    np.testing.assert_array_equal(uout.get(), uwant)
    assert ran_as_block_program(k, threads)


# shifts by each lane's own amount, past the width too (PTX clamps: shl and shr.u give 0,
# shr.s the sign), of 32- and 64-bit values, across a barrier
SHIFTS_PTX = """.version 8.0
.target sm_80
.address_size 64

.visible .entry lane_shifts(.param .u64 p_a, .param .u64 p_n, .param .u64 p_out)
{
    .reg .b32 %r<12>;
    .reg .b64 %rd<20>;
    .shared .align 8 .b8 sh[8192];
    ld.param.u64 %rd1, [p_a];
    ld.param.u64 %rd2, [p_n];
    ld.param.u64 %rd3, [p_out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r2, [%rd5];
    add.s64 %rd6, %rd2, %rd4;
    ld.global.u32 %r3, [%rd6];
    shl.b32 %r4, %r2, %r3;
    shr.s32 %r5, %r2, %r3;
    shr.u32 %r6, %r2, %r3;
    cvt.s64.s32 %rd7, %r2;
    shl.b64 %rd8, %rd7, %r3;
    shr.s64 %rd9, %rd7, %r3;
    mov.u32 %r7, sh;
    mul.lo.u32 %r8, %r1, 8;
    add.u32 %r9, %r7, %r8;
    st.shared.u64 [%r9], %rd8;
    bar.sync 0;
    ld.shared.u64 %rd10, [%r9];
    mul.wide.u32 %rd11, %r1, 40;
    add.s64 %rd12, %rd3, %rd11;
    cvt.u64.u32 %rd13, %r4;
    cvt.u64.u32 %rd14, %r5;
    cvt.u64.u32 %rd15, %r6;
    st.global.u64 [%rd12], %rd13;
    st.global.u64 [%rd12+8], %rd14;
    st.global.u64 [%rd12+16], %rd15;
    st.global.u64 [%rd12+24], %rd10;
    st.global.u64 [%rd12+32], %rd9;
    ret;
}
"""


def test_shifts_by_a_register(rng, poison):
    import anycuda as ac
    threads = 128
    a = rng.integers(-2 ** 31, 2 ** 31, threads, dtype=np.int64).astype(np.int32)
    n = rng.integers(0, 70, threads).astype(np.uint32)
    n[:4] = [0, 31, 32, 64]
    out = poison(5 * threads, np.uint64)
    k = ac.RawModule(ptx=SHIFTS_PTX, name="shifts.ptx").get_function("lane_shifts")
    k((1,), (threads,), (ac.asarray(a), ac.asarray(n), out))
    a64, ua, nn, ns = a.astype(np.int64), a.view(np.uint32).astype(np.uint64), n.astype(np.uint64), n.astype(np.int64)
    low = lambda v: np.asarray(v, np.int64).astype(np.uint64) & 0xFFFFFFFF
    want = np.stack([
        np.where(nn >= 32, 0, (ua << np.minimum(nn, 31)) & 0xFFFFFFFF),
        low(a64 >> np.minimum(ns, 31)),
        np.where(nn >= 32, 0, ua >> np.minimum(nn, 31)),
        np.where(nn >= 64, 0, a64.astype(np.uint64) << np.minimum(nn, 63)),
        (a64 >> np.minimum(ns, 63)).astype(np.uint64)], axis=1).ravel()
    np.testing.assert_array_equal(out.get(), want)
    assert ran_as_block_program(k, threads)


def test_few_lanes_apart(module, rng, poison):
    import anycuda as ac
    threads, blocks = 128, 3
    perm = np.concatenate([rng.permutation(threads) for _ in range(blocks)]).astype(np.int32)
    x = rng.standard_normal(threads * blocks).astype(np.float32)
    out = poison(threads * blocks, np.float32)
    k = module.get_function("sparse_moves")
    k((blocks,), (threads,), (ac.asarray(perm), ac.asarray(x), out))
    want = np.full((blocks, threads), -1.0, np.float32)
    p2, x2 = perm.reshape(blocks, threads), x.reshape(blocks, threads)
    for b in range(blocks):
        for t in range(3, threads, 16):
            want[b, p2[b, t]] = x2[b, p2[b, t]]
    np.testing.assert_array_equal(out.get(), want.ravel())
    assert ran_as_block_program(k, threads)


def test_an_index_that_wraps_in_a_warp(module, rng, poison):
    """The run-time check finds the lanes' addresses are not one ramp (read as one, lane t would
    read p[off + t] = x[t + 2^32 - 5]) and takes them lane by lane."""
    import anycuda as ac
    off = 2 ** 32 - 5
    host = rng.standard_normal(64).astype(np.float32)
    out = poison(64, np.float32)
    k = module.get_function("wrapping")
    k((1,), (64,), (ac.asarray(host), out, np.uint32(off)))
    want = np.full(64, -1.0, np.float32)
    want[5:] = host[:59]
    np.testing.assert_array_equal(out.get(), want)
    assert ran_as_block_program(k, 64)


def test_a_wrapped_index_kept_across_a_barrier(module, poison):
    """Warp 0's widened index wraps (its kept lanes are its own values); warp 1's does not
    (its lanes are rebuilt from base + stride * t)."""
    off = 2 ** 32 - 5
    out = poison(128, np.uint64)
    k = module.get_function("wrapping_kept")
    k((1,), (64,), (out, np.uint32(off)))
    w = (off + np.arange(64, dtype=np.uint64)) % 2 ** 32
    np.testing.assert_array_equal(out.get(), np.concatenate([w, w + 1]))
    assert ran_as_block_program(k, 64)


def test_kernels_without_barriers_keep_the_thread_loop(module, rng, poison):
    import anycuda as ac
    n = 1000
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = poison(n, np.float32)
    k = module.get_function("plain_add")
    k(((n + 255) // 256,), (256,), (ac.asarray(a), ac.asarray(b), out, np.int32(n)))
    np.testing.assert_array_equal(out.get(), a + b)
    assert not ran_as_block_program(k, 256)


def test_switched_off(module, rng, poison, monkeypatch):
    import anycuda as ac
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")
    n = 200
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poison(n, np.int32)
    k = module.get_function("collatz_step")
    k(((n + 63) // 64,), (64,), (ac.asarray(x), out, np.int32(n)))
    np.testing.assert_array_equal(out.get(), np.where(x & 1, 3 * x + 1, x >> 1))
    assert not ran_as_block_program(k, 64)


def test_what_a_block_program_refuses():
    ptx = """.version 8.0
.target sm_80
.address_size 64
.visible .entry looping(.param .u64 p, .param .u32 n)
{
  .reg .b32 %r<3>; .reg .pred %p<2>; .reg .b64 %rd<2>;
  mov.u32 %r1, 0;
  mov.u32 %r2, %tid.x;
LOOP:
  bar.sync 0;
  add.s32 %r1, %r1, 1;
  setp.lt.s32 %p1, %r1, %r2;
  @%p1 bra LOOP;
  ret;
}
.visible .entry plain(.param .u64 p)
{
  ret;
}
.visible .entry atomic(.param .u64 p)
{
  .reg .b32 %r<3>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  bar.sync 0;
  atom.add.u32 %r1, [%rd1], 1;
  ret;
}
"""
    for kernel, why in (("looping", "lanes may part"), ("atomic", "atom"), ("plain", "no barrier")):
        with pytest.raises(blockprograms.NotVectorisable, match=why):
            pipeline.block_program_ir(ptx, "refused.ptx", kernel, 64)


@pytest.mark.parametrize("address", [0, 0x7FFF_0000_0000])
def test_a_wild_store_is_an_illegal_address(address):
    """A block program's memory fault fails the launch as on a GPU, naming the block; the
    process and the next launch are fine."""
    from anycuda.runtime.errors import CudaError, CUresult
    from anycuda.runtime.program import load_program
    ptx = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p)
{
  .reg .b64 %rd<3>; .reg .b32 %r<3>; .reg .pred %p1;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %tid.x;
  bar.sync 0;
  setp.ne.u32 %p1, %r1, 5;
  @%p1 bra OK;
  st.global.u32 [%rd1], %r2;
OK:
  ret;
}"""
    k = load_program(ptx, "wild.ptx").kernel("k")
    with pytest.raises(CudaError) as e:
        k.launch((8, 1, 1), (64, 1, 1), address.to_bytes(8, "little"))
    assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    assert "block 5" in str(e.value) and f"0x{address:x}" in str(e.value)
    assert k._programs[(64, 1, 1)] is not None
    out = np.full(1, 0xCDCDCDCD, np.uint32)
    k.launch((8, 1, 1), (64, 1, 1), out.ctypes.data.to_bytes(8, "little"))
    assert out[0] < 64                                 # one of block 5's threads wrote its index


MUL_HI = r"""
extern "C" __global__ void high_halves(const int* a, const int* b, int* o, unsigned* uo, long long* wo,
                                       const long long* a64) {
    __shared__ int s[256];
    int t = threadIdx.x;
    s[t] = a[t];
    __syncthreads();
    o[t] = __mulhi(s[t], b[t]);
    uo[t] = __umulhi((unsigned)s[t], (unsigned)b[t]);
    wo[t] = __mul64hi(a64[t], a64[255 - t]);
}
"""


def test_high_halves_of_products(compile_cuda, rng, poison):
    """mul.hi (a division by a constant is one) in a block program, against Python's integers."""
    import anycuda as ac
    k = compile_cuda(MUL_HI, name="mulhi.cu").get_function("high_halves")
    a, b = (rng.integers(-2 ** 31, 2 ** 31, 256).astype(np.int32) for _ in range(2))
    a64 = rng.integers(-2 ** 62, 2 ** 62, 256).astype(np.int64)
    o, uo, wo = poison(256, np.int32), poison(256, np.uint32), poison(256, np.int64)
    k((1,), (256,), (ac.asarray(a), ac.asarray(b), o, uo, wo, ac.asarray(a64)))
    np.testing.assert_array_equal(o.get(), ((a.astype(np.int64) * b) >> 32).astype(np.int32))
    np.testing.assert_array_equal(uo.get(), ((a.view(np.uint32).astype(np.uint64) * b.view(np.uint32)) >> 32))
    np.testing.assert_array_equal(wo.get(), [(int(x) * int(y)) >> 64 for x, y in zip(a64, a64[::-1])])
    assert ran_as_block_program(k, 256)


NEXT_BLOCKS = r"""
// a block passing several barriers between its loads (a tree): its load prefetched for the
// worker's next blocks
extern "C" __global__ void tree_sums(const float* in, float* out, int n) {
    __shared__ float s[256];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
// one barrier: only its first load prefetched
extern "C" __global__ void neighbours(const float* in, const float* bias, float* out, int n) {
    __shared__ float s[256];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = s[t] + s[255 - t] + bias[i];
}
"""


def test_loads_prefetched_for_the_next_blocks(compile_cuda, rng, poison):
    """A kernel whose blocks pass many barriers prefetches its loads for the worker's next
    blocks (blockmemory._prefetch_next_blocks); with one barrier, only its first load. Prefetches
    change no value: the sums over many blocks, each worker's chunks stepping back and forth,
    are exact (integers in floats)."""
    import anycuda as ac
    from anycuda.cudac import compile_to_ptx
    ptx = compile_to_ptx(NEXT_BLOCKS, name="next_blocks.cu")
    assert "llvm.prefetch" in pipeline.block_program_ir(ptx, "next.ptx", "tree_sums", 256)
    one_barrier = pipeline.block_program_ir(ptx, "next.ptx", "neighbours", 256)
    assert len(re.findall(r'%"block\.step\d+" = alloca', one_barrier)) == 1       # (of its two loads)
    mod = compile_cuda(NEXT_BLOCKS, name="next_blocks.cu")
    n = 256 * 700 + int(rng.integers(1, 256))
    x = rng.integers(-1000, 1000, n).astype(np.float32)
    blocks = (n + 255) // 256
    for _ in range(3):
        out = poison(blocks, np.float32)
        mod.get_function("tree_sums")((blocks,), (256,), (ac.asarray(x), out, np.int32(n)))
        padded = np.zeros(blocks * 256, np.float32)
        padded[:n] = x
        np.testing.assert_array_equal(out.get(), padded.reshape(blocks, 256).sum(axis=1))
    assert ran_as_block_program(mod.get_function("tree_sums"), 256)


NEXT_ROUNDS = r"""
// a march along z with the plane in shared memory: a loop around two barriers whose loads
// and stores of global memory step by a plane each round
extern "C" __global__ void plane_march(const float* in, float* out, int nx, int ny, int nz) {
    __shared__ float plane[4][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 4 + threadIdx.y;
    size_t sz = (size_t)nx * ny, i = (size_t)y * nx + x;
    for (int z = 0; z < nz; ++z) {
        __syncthreads();
        plane[threadIdx.y][threadIdx.x] = in[z * sz + i];
        __syncthreads();
        out[z * sz + i] = plane[threadIdx.y][threadIdx.x] - plane[3 - threadIdx.y][31 - threadIdx.x];
    }
}
// the same march adding to what `out` holds: its stores are to a buffer the kernel reads
extern "C" __global__ void plane_accumulate(const float* in, float* out, int nx, int ny, int nz) {
    __shared__ float plane[4][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 4 + threadIdx.y;
    size_t sz = (size_t)nx * ny, i = (size_t)y * nx + x;
    for (int z = 0; z < nz; ++z) {
        __syncthreads();
        plane[threadIdx.y][threadIdx.x] = in[z * sz + i];
        __syncthreads();
        out[z * sz + i] += plane[3 - threadIdx.y][31 - threadIdx.x];
    }
}
// a loop within a stretch (a column's sum, then a barrier): its load steps by a row
extern "C" __global__ void column_sums(const float* in, float* out, int rows, int cols) {
    __shared__ float s[64];
    int c = blockIdx.x * 64 + threadIdx.x;
    float acc = 0.0f;
    for (int r = 0; r < rows; ++r) acc += in[(size_t)r * cols + c];
    s[threadIdx.x] = acc;
    __syncthreads();
    out[c] = s[threadIdx.x] + s[63 - threadIdx.x];
}
// a grid-stride sum, in turns: the block's warps read a row together
extern "C" __global__ void grid_strided(const float* in, float* out, int n) {
    __shared__ float s[64];
    float acc = 0.0f;
    for (int i = blockIdx.x * 64 + threadIdx.x; i < n; i += gridDim.x * 64) acc += in[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    out[blockIdx.x * 64 + threadIdx.x] = s[threadIdx.x] + s[63 - threadIdx.x];
}
"""


def test_loops_prefetch_their_next_rounds(compile_cuda, rng, poison):
    """Global loads in a block program's loops are prefetched some rounds ahead by the step
    their address took, and stores in them for writing (blockmemory._prefetch_next_rounds),
    but for stores that may stream past the caches (to a buffer the kernel does not read:
    fetching the line to own it is the transfer a streaming store saves):
    a 3-D stencil marching along z steps by a plane, which no hardware prefetcher follows.
    A grid-stride loop (`grid_strided`, whose step comes from gridDim) runs in turns
    (blockloops.turned_loops), so its warps read a row together and its next rounds are
    prefetched too. Where a round steps a page or more (the march's planes here, 4 KB), the
    loads prefetch the next block's part of that round as well, by the step from block to block
    (`block.step`, _prefetch_next_block_round). Prefetches change no value: the kernels
    against numpy."""
    import re
    import anycuda as ac
    from anycuda.cudac import compile_to_ptx
    ptx = compile_to_ptx(NEXT_ROUNDS, name="next_rounds.cu")
    reading = re.compile(r'llvm\.prefetch\.p0"?\([^,]+, i32 0,')
    writing = re.compile(r'llvm\.prefetch\.p0"?\([^,]+, i32 1,')
    march = pipeline.block_program_ir(ptx, "next.ptx", "plane_march", (32, 4, 1))
    assert "round.step" in march and reading.search(march) and not writing.search(march)
    accumulate = pipeline.block_program_ir(ptx, "next.ptx", "plane_accumulate", (32, 4, 1))
    assert reading.search(accumulate) and writing.search(accumulate)
    assert re.search(r'%"block\.step\d+" = alloca', march) and "8191" in march     # (|step| >= irutil.FAR_STEP)
    sums = pipeline.block_program_ir(ptx, "next.ptx", "column_sums", 64)
    assert "round.step" in sums and reading.search(sums)
    assert "round.step" in pipeline.block_program_ir(ptx, "next.ptx", "grid_strided", 64)
    mod = compile_cuda(NEXT_ROUNDS, name="next_rounds.cu")
    nx, ny, nz = 64, 16, 21                   # (a plane of 4 KB: the next block's part is prefetched)
    u = rng.standard_normal((nz, ny, nx)).astype(np.float32)
    out = poison(u.size, np.float32)
    mod.get_function("plane_march")((nx // 32, ny // 4), (32, 4), (ac.asarray(u), out, np.int32(nx), np.int32(ny), np.int32(nz)))
    tiles = u.reshape(nz, ny // 4, 4, nx // 32, 32)
    want = (tiles - tiles[:, :, ::-1, :, ::-1]).reshape(u.shape)
    np.testing.assert_array_equal(out.get().reshape(u.shape), want)
    mod.get_function("plane_accumulate")((nx // 32, ny // 4), (32, 4),
                                         (ac.asarray(u), out, np.int32(nx), np.int32(ny), np.int32(nz)))
    np.testing.assert_array_equal(out.get().reshape(u.shape), want + tiles[:, :, ::-1, :, ::-1].reshape(u.shape))
    rows, cols = 37, 256
    x = rng.integers(-100, 100, (rows, cols)).astype(np.float32)
    sums_out = poison(cols, np.float32)
    mod.get_function("column_sums")((cols // 64,), (64,), (ac.asarray(x), sums_out, np.int32(rows), np.int32(cols)))
    col = x.sum(axis=0).reshape(-1, 64)
    np.testing.assert_array_equal(sums_out.get(), (col + col[:, ::-1]).ravel())
    assert ran_as_block_program(mod.get_function("column_sums"), 64)


DOUBLE_BUFFERED_SCAN = r"""
// Hillis and Steele over a double buffer (the suite's scan_hillis_steele): `buf[from][t -
// offset]` under `t >= offset`, where warp 0's 32-bit shared offsets cross 0 (the lanes below
// it are masked off) at every step that reads the first buffer; `reach` reads that much
// further below in the last step
extern "C" __global__ void hillis_steele(const int* in, int* out, int n, int reach) {
    __shared__ int buf[2][THREADS];
    int t = threadIdx.x, i = blockIdx.x * THREADS + t, from = 0;
    buf[0][t] = i < n ? in[i] : 0;
    __syncthreads();
    for (int offset = 1; offset < THREADS; offset <<= 1) {
        int to = 1 - from, below = offset * 2 >= THREADS ? reach : 0;
        buf[to][t] = t >= offset ? buf[from][t] + buf[from][t - offset - below] : buf[from][t];
        __syncthreads();
        from = to;
    }
    if (i < n) out[i] = buf[from][t];
}
"""


@pytest.mark.parametrize("threads", [64, 128, 256])
def test_offsets_below_a_shared_buffer_under_a_mask(compile_cuda, rng, poison, threads):
    """The lanes a mask runs past the point where a warp's 32-bit shared offsets cross 0 take
    the vector access (blockmemory._widened_address): the scans against numpy, with a
    partial last block. A lane that runs below the buffer is still an illegal address."""
    import anycuda as ac
    from anycuda.runtime.errors import CudaError, CUresult
    src = DOUBLE_BUFFERED_SCAN.replace("THREADS", str(threads))
    k = compile_cuda(src, name=f"double_buffered{threads}.cu").get_function("hillis_steele")
    n = threads * 5 - 19
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poison(n, np.int32)
    k((5,), (threads,), (ac.asarray(x), out, np.int32(n), np.int32(0)))
    padded = np.zeros(5 * threads, np.int64)
    padded[:n] = x
    want = np.cumsum(padded.reshape(5, threads), axis=1).ravel()[:n].astype(np.int32)
    np.testing.assert_array_equal(out.get(), want)
    assert ran_as_block_program(k, threads)
    with pytest.raises(CudaError) as e:
        k((5,), (threads,), (ac.asarray(x), out, np.int32(n), np.int32(1 << 20)))
        ac.synchronize()
    assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS


BLOCK_STRIDE = r"""
// a block-stride loop of a few rounds a warp (scan's adding of the block totals): each warp's
// first round steps back from the warp before it's last
extern "C" __global__ void add_totals(int* out, const int* totals, int n, int per_block) {
    int b = blockIdx.x;
    if (b == 0) return;
    int add = totals[b - 1], end = min(n, (b + 1) * per_block);
    for (int i = b * per_block + threadIdx.x; i < end; i += blockDim.x) out[i] += add;
}
"""


def test_a_warps_first_round_prefetches_by_the_last_step(compile_cuda, rng):
    """Where a loop within a stretch is entered (each warp's pass), its accesses' last
    addresses are forgotten and their steps kept (blockmemory.forget_round_addresses): the
    step from the warp before's last round to this warp's first was a prefetch a block behind.
    Prefetches change no value: the sums against numpy, with a partial last block."""
    import re
    import anycuda as ac
    from anycuda.cudac import compile_to_ptx
    ir_text = pipeline.block_program_ir(compile_to_ptx(BLOCK_STRIDE, name="stride.cu"), "s.ptx", "add_totals", 256)
    for last in set(re.findall(r'%"(round\.last\d+)" = alloca', ir_text)):
        assert ir_text.count(f'store i64 0, i64* %"{last}"') == 2      # (at the start, and at the loop's entry)
    assert re.findall(r'%"round\.last\d+" = alloca', ir_text)
    k = compile_cuda(BLOCK_STRIDE, name="stride.cu").get_function("add_totals")
    per_block, blocks = 512, 9
    n = per_block * blocks - 100
    out = rng.integers(-1000, 1000, n).astype(np.int32)
    totals = rng.integers(-1000, 1000, blocks).astype(np.int32)
    d = ac.asarray(out)
    k((blocks,), (256,), (d, ac.asarray(totals), np.int32(n), np.int32(per_block)))
    want = out + np.concatenate([[0], totals[:-1]]).repeat(per_block)[:n]
    np.testing.assert_array_equal(d.get(), want)
    assert ran_as_block_program(k, 256)


ROW_PASSES = r"""
// a block per row, each warp striding over it in a few rounds, and a small array read by
// every row (layernorm's weight): a prefetch four rounds ahead lies past both
extern "C" __global__ void scaled_rows(float* out, const float* in, const float* weight, int C) {
    const float* x = in + (size_t)blockIdx.x * C;
    for (int i = threadIdx.x; i < C; i += blockDim.x)
        out[(size_t)blockIdx.x * C + i] = x[i] * weight[i];
}
// a grid-stride loop, run in turns (a loop around barriers: a pass a block)
extern "C" __global__ void strided_sums(const float* in, float* out, int n) {
    __shared__ float s[256];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += in[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int j = 0; j < 256; ++j) t += s[j];
        out[blockIdx.x] = t;
    }
}
"""


def _rounds_tests(ir_text):
    """The worker-frame offsets (rounds so far, last pass's) of each test `rounds + k <= last`
    in a block program's IR, with k."""
    frame = dict(re.findall(r'(%"\.\d+") = getelementptr i8, i8\* %"\.2", i64 (\d+)', ir_text))
    pointers = dict(re.findall(r'(%"\.\d+") = bitcast i8\* (%"\.\d+") to i64\*', ir_text))
    loads = {value: int(frame[pointers[ptr]]) for value, ptr in
             re.findall(r'(%"\.\d+") = load i64, i64\* (%"\.\d+")', ir_text) if pointers.get(ptr) in frame}
    sums = {value: (loads[x], int(k)) for value, x, k in re.findall(r'(%"\.\d+") = add i64 (%"\.\d+"), (\d+)\n', ir_text)
            if x in loads}
    return [(sums[a][0], loads[b], sums[a][1]) for a, b in re.findall(r'= icmp ule i64 (%"\.\d+"), (%"\.\d+")', ir_text)
            if a in sums and b in loads]


def test_loops_prefetch_no_further_than_their_last_pass(compile_cuda, rng, poison):
    """A loop's accesses whose rounds step far (a grid's row here: 7 KB) prefetch its next
    rounds only while the loop will still run that many rounds by the count of its last pass,
    kept in the worker's frame (blockmemory._rounds_left; _close_pass at each pass's start: a
    loop within a stretch's entry, each warp's pass; a loop around barriers, the block's
    start), and an access whose address does not come from %ctaid (every block reads the
    same `weight[i]`) prefetches none: a prefetch past a small array's end, or past a
    grid-stride loop's input, walked the page tables for a page that is not present at every
    row. The IR: each prefetching site tests rounds so far + ROUNDS_AHEAD against its last
    pass's count, both in the worker frame. Values against numpy with passes of 4, 1 and 3
    rounds in turn on the same workers (a count from another launch predicts wrong, and
    changes no value)."""
    import anycuda as ac
    from anycuda.compiler.vector.blockmemory import ROUND_COUNTS, ROUNDS_AHEAD
    from anycuda.cudac import compile_to_ptx
    ptx = compile_to_ptx(ROW_PASSES, name="rows.cu")
    for kernel, sites in (("scaled_rows", 1), ("strided_sums", 1)):        # (`x[i]`, not `weight[i]`; `in[i]`)
        ir_text = pipeline.block_program_ir(ptx, "rows.ptx", kernel, 256)
        assert len(re.findall(r'%"round\.step\d+" = alloca', ir_text)) == sites
        tests = _rounds_tests(ir_text)
        assert sorted(tests) == [(ROUND_COUNTS + 16 * j, ROUND_COUNTS + 16 * j + 8, ROUNDS_AHEAD) for j in range(sites)]
    mod = compile_cuda(ROW_PASSES, name="rows.cu")
    k = mod.get_function("scaled_rows")
    for C in (1000, 100, 700):
        rows = 23
        x = rng.standard_normal((rows, C)).astype(np.float32)
        w = rng.standard_normal(C).astype(np.float32)
        out = poison(rows * C, np.float32)
        k((rows,), (256,), (out, ac.asarray(x), ac.asarray(w), np.int32(C)))
        np.testing.assert_array_equal(out.get().reshape(rows, C), x * w)
    assert ran_as_block_program(k, 256)
    sums = mod.get_function("strided_sums")
    for n in (256 * 7 * 9 + 5, 256 * 7 - 3, 256 * 7 * 3):
        x = rng.integers(-100, 100, n).astype(np.float32)
        out = poison(7, np.float32)
        sums((7,), (256,), (ac.asarray(x), out, np.int32(n)))
        padded = np.zeros(-(-n // 1792) * 1792, np.float32)
        padded[:n] = x
        np.testing.assert_array_equal(out.get(), padded.reshape(-1, 7, 256).sum(axis=(0, 2)))
    assert ran_as_block_program(sums, 256)


NO_BARRIERS = r"""
// no barrier or shuffle: each thread marches along z (a memory-bound loop, 13 instructions
// per access), which the loop over a block's threads ran thread after thread
extern "C" __global__ void column_march(const float* in, float* out, int nx, int ny, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= nx) return;
    for (int z = 1; z < nz - 1; ++z) {
        size_t i = ((size_t)z * ny + y) * nx + x;
        out[i] = in[i - (size_t)nx * ny] + in[i + (size_t)nx * ny] - 2.0f * in[i];
    }
}
// every thread reads the same element each round, then works on it: not memory-bound
extern "C" __global__ void all_pairs(const float* p, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float xi = p[i % n], s = 0.0f;
    for (int j = 0; j < n; ++j) {
        float d = p[j] - xi;
        s += d * d * rsqrtf(d * d + 0.5f) + sinf(d) * cosf(d * xi);
    }
    out[i] = s;
}
// a grid-stride loop keeps the rounds' order: neighbouring threads, neighbouring lines
extern "C" __global__ void strided_copy(const float* in, float* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = in[i];
}
"""


def test_a_memory_bound_loop_without_barriers_takes_a_block_program(compile_cuda, rng, poison):
    """A kernel with no barrier or shuffle takes a block program where a thread runs a
    memory-bound loop that is not a grid-stride loop (blockprograms.check_takes): its lanes
    then go through the loop together, as vectors (stencil7_zloop 33.5 -> 23 ms). One whose
    loop reads one address for all threads, or strides over the grid, does not. Values
    against numpy."""
    import anycuda as ac
    from anycuda.cudac import compile_to_ptx
    ptx = compile_to_ptx(NO_BARRIERS, name="no_barriers.cu")
    pipeline.block_program_ir(ptx, "nb.ptx", "column_march", 64)
    for kernel in ("all_pairs", "strided_copy"):
        with pytest.raises(blockprograms.NotVectorisable, match="memory-bound"):
            pipeline.block_program_ir(ptx, "nb.ptx", kernel, 64)
    mod = compile_cuda(NO_BARRIERS, name="no_barriers.cu")
    nx, ny, nz = 200, 3, 9
    u = rng.standard_normal((nz, ny, nx)).astype(np.float32)
    for _ in range(2):
        out = poison(u.size, np.float32)
        mod.get_function("column_march")((4, ny), (64,), (ac.asarray(u), out, np.int32(nx), np.int32(ny), np.int32(nz)))
        got = out.get().reshape(u.shape)[1:-1]
        np.testing.assert_allclose(got, u[:-2] + u[2:] - np.float32(2) * u[1:-1], rtol=1e-6, atol=1e-6)
    assert ran_as_block_program(mod.get_function("column_march"), 64)


MODULE_VARIABLES = r"""
// module variables read by a block program: a __constant__ filter, a __device__ table whose
// address a thread takes, and a __device__ scalar set from the host
__constant__ float taps[3];
__device__ int offsets[256];
__device__ float scale;
extern "C" __global__ void filtered(const float* in, float* out, int n) {
    __shared__ float s[258];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t + 1] = i < n ? in[i] : 0.0f;
    if (t == 0) s[0] = i > 0 && i - 1 < n ? in[i - 1] : 0.0f;
    if (t == blockDim.x - 1) s[t + 2] = i + 1 < n ? in[i + 1] : 0.0f;
    __syncthreads();
    const int* table = offsets;
    if (i < n) out[i] = scale * (taps[0] * s[t] + taps[1] * s[t + 1] + taps[2] * s[t + 2]) + table[t];
}
"""


def test_module_variables_in_a_block_program(compile_cuda, rng, poison):
    """A kernel reading `__constant__` and `__device__` variables runs as a block program
    (the variables declared in its module and linked to the module's copies) and computes
    what numpy does; the variables set from the host are what it reads, again after a change."""
    import anycuda as ac
    from anycuda.cudac import compile_to_ptx
    ptx = compile_to_ptx(MODULE_VARIABLES, name="module_variables.cu")
    assert "ptx.g.taps" in pipeline.block_program_ir(ptx, "vars.ptx", "filtered", 256)
    mod = compile_cuda(MODULE_VARIABLES, name="module_variables.cu")
    k = mod.get_function("filtered")
    n = 256 * 9 - 17
    x = rng.integers(-50, 50, n).astype(np.float32)
    padded = np.concatenate([[0], x, [0]]).astype(np.float32)
    for _ in range(2):
        taps = rng.integers(-4, 5, 3).astype(np.float32)
        offsets = rng.integers(-1000, 1000, 256).astype(np.int32)
        scale = np.float32(rng.integers(1, 4))
        mod.get_global("taps").copy_from_host(taps)
        mod.get_global("offsets").copy_from_host(offsets)
        mod.get_global("scale").copy_from_host(np.array([scale]))
        out = poison(n, np.float32)
        k(((n + 255) // 256,), (256,), (ac.asarray(x), out, np.int32(n)))
        want = scale * (taps[0] * padded[:-2] + taps[1] * padded[1:-1] + taps[2] * padded[2:]) + np.resize(offsets, n)
        np.testing.assert_array_equal(out.get(), want.astype(np.float32))
    assert ran_as_block_program(k, 256)


ROW_PRODUCT = r"""
// a warp per row, as llm.c's cooperative-groups kernels write it (a row's mean, then the
// squares about it): the row's start is mul.wide.s32 of the row and C, two values alike in
// the warp's lanes
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
extern "C" __global__ void row_sums(const float* in, float* out, int rows, int C) {
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
    int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (row >= rows) return;
    const float* x = in + (size_t)row * C;
    float s = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) s += x[i];
    float m = cg::reduce(warp, s, cg::plus<float>()) / C;
    float v = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) v += (x[i] - m) * (x[i] - m);
    v = cg::reduce(warp, v, cg::plus<float>());
    if (warp.thread_rank() == 0) out[row] = v;
}
"""


def test_a_row_start_from_a_wide_product_keeps_vector_loads(compile_cuda, rng, poison, monkeypatch):
    """The product in twice the width of two values alike in every lane keeps that shape,
    so the row loops' loads have shapes (vector loads where the index does not wrap), not
    gathers alone (layernorm_cg: 5.7 -> 2.6 ms)."""
    import anycuda as ac
    from anycuda.compiler.vector import blockmemory
    from anycuda.cudac import compile_to_ptx
    ptx = compile_to_ptx(ROW_PRODUCT, name="row_product.cu")
    assert "mul.wide.s32" in ptx
    shapes = []
    accessed = blockmemory.BlockMemory._memory

    def recorded(self, addrs, shape, elem, size, value):
        shapes.append((value is None, shape is not None and shape.stride == 4))     # (a load, a ramp of floats)
        return accessed(self, addrs, shape, elem, size, value)
    monkeypatch.setattr(blockmemory.BlockMemory, "_memory", recorded)
    pipeline.block_program_ir(ptx, "rows.ptx", "row_sums", 256)
    assert [ramp for load, ramp in shapes if load] == [True, True], shapes
    rows, C = 77, 300
    x = rng.integers(-100, 100, (rows, C)).astype(np.float32)
    x -= x.mean(axis=1, keepdims=True).round()      # every row's mean a whole number: sums stay exact
    out = poison(rows, np.float32)
    k = compile_cuda(ROW_PRODUCT, name="row_product.cu").get_function("row_sums")
    k(((rows + 7) // 8,), (256,), (ac.asarray(x), out, np.int32(rows), np.int32(C)))
    d = x.astype(np.float64) - x.astype(np.float64).sum(axis=1, keepdims=True) / C
    np.testing.assert_allclose(out.get(), (d * d).sum(axis=1), rtol=1e-5)
    assert ran_as_block_program(k, 256)


VECTOR_ACCESSES = r"""
// float4 and int4 loads and stores, float2 stores, through global and shared memory
extern "C" __global__ void quads(const float4* in, const int4* ids, float2* sums, int4* out, int n) {
    __shared__ float4 tile[256];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    tile[t] = i < n ? in[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    __syncthreads();
    float4 a = tile[t], b = tile[t ^ 1];
    if (i < n) {
        sums[i] = make_float2(a.x + b.y, a.z * b.w);
        int4 k = ids[i];
        out[i] = make_int4(k.w, k.z + 1, k.y * 2, k.x - t);
    }
}
"""


def test_vector_loads_and_stores_in_a_block_program(compile_cuda, rng, poison):
    """ld/st .v2 and .v4 (float4, int4, float2) in global and shared memory, element by
    element as groups of interleaved accesses: the kernel runs as a block program (it was
    refused before: the suite's nbody, whose float4 loads kept it in the rounds) and
    matches numpy, with a partial last block."""
    import anycuda as ac
    k = compile_cuda(VECTOR_ACCESSES, name="quads.cu").get_function("quads")
    n = 256 * 5 - 37
    x = rng.standard_normal((n, 4)).astype(np.float32)
    ids = rng.integers(-1000, 1000, (n, 4)).astype(np.int32)
    sums, out = poison(2 * n, np.float32), poison(4 * n, np.int32)
    k((5,), (256,), (ac.asarray(x), ac.asarray(ids), sums, out, np.int32(n)))
    padded = np.zeros((256 * 5, 4), np.float32)
    padded[:n] = x
    partner = padded[np.arange(256 * 5) ^ 1][:n]
    np.testing.assert_array_equal(sums.get().reshape(n, 2), np.stack([x[:, 0] + partner[:, 1], x[:, 2] * partner[:, 3]], 1))
    t = np.arange(n) % 256
    np.testing.assert_array_equal(out.get().reshape(n, 4),
                                  np.stack([ids[:, 3], ids[:, 2] + 1, ids[:, 1] * 2, ids[:, 0] - t], 1))
    assert ran_as_block_program(k, 256)


def test_a_vector_load_into_its_own_address_register(rng, poison):
    """`ld.shared.v2.u32 {%r1, %r2}, [%r1]`: both elements from the address the register held
    before the load, whichever is written first; a `_` element is not loaded."""
    import anycuda as ac
    ptx = """.version 8.0
.target sm_80
.address_size 64
.visible .entry chase(.param .u64 out)
{
  .reg .b32 %r<8>; .reg .b64 %rd<4>;
  .shared .align 8 .b8 pairs[2048];
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 3;
  mov.u32 %r3, pairs;
  add.u32 %r4, %r3, %r2;
  mul.lo.u32 %r5, %r1, 7;
  st.shared.v2.u32 [%r4], {%r5, %r1};
  bar.sync 0;
  ld.shared.v2.u32 {%r4, %r6}, [%r4];
  ld.shared.v2.u32 {_, %r7}, [pairs];
  add.u32 %r6, %r6, %r7;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 8;
  add.u64 %rd3, %rd1, %rd2;
  st.global.v2.u32 [%rd3], {%r4, %r6};
  ret;
}
"""
    assert "block" in pipeline.block_program_ir(ptx, "chase.ptx", "chase", 256)
    out = poison(2 * 256, np.uint32)
    ac.RawModule(ptx=ptx).get_function("chase")((1,), (256,), (out,))
    t = np.arange(256, dtype=np.uint32)
    np.testing.assert_array_equal(out.get().reshape(256, 2), np.stack([7 * t, t], 1))


SELECTED_INDICES = r"""
// neighbours' indices chosen by selects at the grid's edges (no shape: consecutive only where
// the block is inside the grid), and a store through a rotated index
extern "C" __global__ void clamped_march(int nx, int ny, int nz, const float* in, float* out, float* rot) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    for (int z = 0; z < nz; ++z) {
        size_t i = ((size_t)z * ny + y) * nx + x;
        size_t xm = x > 0 ? i - 1 : i, xp = x < nx - 1 ? i + 1 : i;
        size_t zm = z > 0 ? i - (size_t)nx * ny : i, zp = z < nz - 1 ? i + (size_t)nx * ny : i;
        out[i] = in[xp] + in[xm] + in[zp] + in[zm] - 4.0f * in[i];
        rot[((size_t)z * ny + y) * nx + (x < nx - 1 ? x + 1 : 0)] = in[i];
    }
}
"""


@pytest.mark.parametrize("block", [(32, 8), (16, 16), (64, 1)])
def test_selected_indices_are_looked_at_when_they_run(compile_cuda, rng, poison, monkeypatch, block):
    """An access whose addresses have no shape is one vector access where they turn out
    consecutive when it runs, else a gather or scatter (blockmemory._runs_or_gathered):
    both ways run here (blocks inside the grid, blocks at its edges), against numpy."""
    import anycuda as ac
    from anycuda.compiler.vector import blockmemory
    from anycuda.cudac import compile_to_ptx
    ptx = compile_to_ptx(SELECTED_INDICES, name="selected.cu")
    looked = []
    original = blockmemory.BlockMemory._runs_or_gathered

    def recorded(self, addrs, elem, size, value):
        looked.append(value is None)
        return original(self, addrs, elem, size, value)
    monkeypatch.setattr(blockmemory.BlockMemory, "_runs_or_gathered", recorded)
    pipeline.block_program_ir(ptx, "selected.ptx", "clamped_march", block + (1,))
    assert True in looked and False in looked, looked            # loads and the rotated store
    nx, ny, nz = 3 * block[0] + 5, 2 * block[1] + 3, 6
    u = rng.standard_normal((nz, ny, nx)).astype(np.float32)
    out, rot = poison(u.size, np.float32), poison(u.size, np.float32)
    k = compile_cuda(SELECTED_INDICES, name="selected.cu").get_function("clamped_march")
    grid = ((nx + block[0] - 1) // block[0], (ny + block[1] - 1) // block[1])
    k(grid, block, (np.int32(nx), np.int32(ny), np.int32(nz), ac.asarray(u), out, rot))
    xm = np.concatenate([u[:, :, :1], u[:, :, :-1]], axis=2)
    xp = np.concatenate([u[:, :, 1:], u[:, :, -1:]], axis=2)
    zm = np.concatenate([u[:1], u[:-1]], axis=0)
    zp = np.concatenate([u[1:], u[-1:]], axis=0)
    want = xp + xm + zp + zm - np.float32(4) * u
    np.testing.assert_allclose(out.get().reshape(u.shape), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(rot.get().reshape(u.shape), np.roll(u, 1, axis=2))
    assert k.kernel._programs.get(block + (1,)) is not None, "not run as a block program"


BACK_STEPS = r"""
// a march along z whose points read the row and the plane behind and ahead through size_t
// strides; nvcc writes the steps back as additions of negated strides (neg.s64)
__device__ float back_point(const float* in, int x, int y, int z, int nx, int ny, int nz) {
    size_t sy = nx, sz = (size_t)nx * ny, i = z * sz + y * sy + x;
    if (y == 0 || z == 0 || y == ny - 1 || z == nz - 1) return in[i];
    return 0.5f * in[i] + 0.125f * ((in[i - sy] + in[i + sy]) + (in[i - sz] + in[i + sz]));
}
extern "C" __global__ void back_steps(const float* in, float* out, int nx, int ny, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < nx && y < ny)
        for (int z = 0; z < nz; ++z) out[(size_t)z * nx * ny + (size_t)y * nx + x] = back_point(in, x, y, z, nx, ny, nz);
}
"""


def test_negated_strides_keep_their_shape(compile_cuda, rng, poison, monkeypatch):
    """A negated value alike in every lane stays one (blockops._shape_of, "neg"): the loads
    behind by a row and a plane are vector loads, not accesses without a shape (stencil7_zloop:
    two of its seven loads a turn). Values against numpy."""
    import anycuda as ac
    from anycuda.compiler.vector import blockmemory
    from anycuda.cudac import compile_to_ptx
    ptx = compile_to_ptx(BACK_STEPS, name="back_steps.cu")
    assert "neg.s64" in ptx
    shapes = []
    accessed = blockmemory.BlockMemory._memory

    def recorded(self, addrs, shape, elem, size, value):
        shapes.append(shape is not None and shape.stride == 4)
        return accessed(self, addrs, shape, elem, size, value)
    monkeypatch.setattr(blockmemory.BlockMemory, "_memory", recorded)
    pipeline.block_program_ir(ptx, "back.ptx", "back_steps", (32, 4, 1))
    assert shapes and all(shapes), shapes
    nx, ny, nz = 70, 9, 5
    u = rng.standard_normal((nz, ny, nx)).astype(np.float32)
    out = poison(u.size, np.float32)
    k = compile_cuda(BACK_STEPS, name="back_steps.cu").get_function("back_steps")
    k((3, 3), (32, 4), (ac.asarray(u), out, np.int32(nx), np.int32(ny), np.int32(nz)))
    want = u.copy()
    i = slice(1, -1)
    want[i, i] = np.float32(0.5) * u[i, i] + np.float32(0.125) * ((u[i, :-2] + u[i, 2:]) + (u[:-2, i] + u[2:, i]))
    np.testing.assert_allclose(out.get().reshape(u.shape), want, rtol=1e-6, atol=1e-6)


SKIPPED_LOOP = r"""
.version 7.0
.target sm_70
.address_size 64
// a warp that skips the first loop (mode == 0: a uniform branch) reads `a` (%r4) at the
// start of the second, where the first loop (skipped) let go of it: after it, its lanes jump
// past the second and never read it again (curand_uniform4's two loops over philox's state)
.visible .entry skipped_loop(.param .u32 mode, .param .u32 n, .param .u64 out) {
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u32 %r1, [mode];
    ld.param.u32 %r2, [n];
    ld.param.u64 %rd1, [out];
    mov.u32 %r3, %tid.x;
    mad.lo.u32 %r4, %r3, 3, 1;
    mov.u32 %r5, 0;
    bar.sync 0;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra $SECOND;
    mov.u32 %r6, 0;
$FIRST:
    mad.lo.u32 %r4, %r4, 5, 1;
    add.u32 %r5, %r5, %r4;
    add.u32 %r6, %r6, 1;
    setp.lt.u32 %p2, %r6, %r2;
    @%p2 bra $FIRST;
    bra.uni $END;
$SECOND:
    mov.u32 %r6, 0;
$LOOP2:
    xor.b32 %r7, %r4, %r6;
    add.u32 %r5, %r5, %r7;
    mad.lo.u32 %r4, %r4, 7, 3;
    add.u32 %r6, %r6, 1;
    setp.lt.u32 %p3, %r6, %r2;
    @%p3 bra $LOOP2;
$END:
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    ret;
}
"""


@pytest.mark.parametrize("mode", [0, 1])
def test_a_register_a_skipped_loop_let_go_of(poison, mode):
    """What a warp holds in a register that a part it skips let go of is kept for the code
    after the part (blockprograms._merge): it was lost, and the second loop started from
    undefined lanes (mc_pi_philox counted wrong points). Against a Python model."""
    import anycuda as ac
    n, threads = 5, 64
    out = poison(threads, np.uint32)
    k = ac.RawModule(ptx=SKIPPED_LOOP, name="skipped_loop.ptx").get_function("skipped_loop")
    k((1,), (threads,), (np.uint32(mode), np.uint32(n), out))
    want = []
    for t in range(threads):
        a, acc = 3 * t + 1, 0
        for i in range(n):
            if mode:
                a = (5 * a + 1) % 2 ** 32
                acc += a
            else:
                acc += a ^ i
                a = (7 * a + 3) % 2 ** 32
        want.append(acc % 2 ** 32)
    np.testing.assert_array_equal(out.get(), np.array(want, np.uint32))
    assert ran_as_block_program(k, threads)


TILE_HALO = r"""
// a tile and its halo loaded by a block's threads in turns (t / W, t % W: rows of W = 20 in
// vectors of 16 or 32 lanes, two runs of a row each), then written to a padded matrix
#define W 20
extern "C" __global__ void tile_halo(const float* in, float* out, int w, int h, int ld) {
    __shared__ float tile[W][W];
    int x0 = blockIdx.x * 16 - 2, y0 = blockIdx.y * 16 - 2;
    int threads = blockDim.x * blockDim.y;
    for (int t = threadIdx.y * blockDim.x + threadIdx.x; t < W * W; t += threads) {
        int ty = t / W, tx = t % W, xx = x0 + tx, yy = y0 + ty;
        tile[ty][tx] = xx >= 0 && xx < w && yy >= 0 && yy < h ? in[yy * w + xx] : 0.0f;
    }
    __syncthreads();
    float* mine = out + (size_t)(blockIdx.y * gridDim.x + blockIdx.x) * W * ld;
    for (int t = threadIdx.y * blockDim.x + threadIdx.x; t < W * W; t += threads)
        mine[(t / W) * ld + t % W] = 2.0f * tile[t / W][t % W];
}
"""


@pytest.mark.parametrize("block", [(16, 16), (32, 8)])
def test_accesses_in_two_runs(compile_cuda, rng, poison, block):
    """Addresses that are two runs of consecutive elements (a tile's rows across a vector of
    lanes) are two masked vector accesses (blockmemory._runs_or_gathered); the blocks
    at the image's edges take the other ways. Against numpy, the padding left poisoned."""
    import anycuda as ac
    w, h, ld, W = 37, 21, 23, 20
    img = rng.standard_normal((h, w)).astype(np.float32)
    gx, gy = (w + 15) // 16, (h + 15) // 16
    out = poison(gx * gy * W * ld, np.float32)
    k = compile_cuda(TILE_HALO, name="tile_halo.cu").get_function("tile_halo")
    k((gx, gy), block, (ac.asarray(img), out, np.int32(w), np.int32(h), np.int32(ld)))
    padded = np.zeros((h + 4 + 16, w + 4 + 16), np.float32)
    padded[2:2 + h, 2:2 + w] = img
    got = out.get().reshape(gy, gx, W, ld)
    for by in range(gy):
        for bx in range(gx):
            want = 2 * padded[by * 16:by * 16 + W, bx * 16:bx * 16 + W]
            np.testing.assert_array_equal(got[by, bx, :, :W], want)
    assert np.isnan(got[..., W:]).all()
    assert k.kernel._programs.get(block + (1,)) is not None, "not run as a block program"


WARP_SLOTS = r"""
// a block reduction's slot per warp: nvcc writes the unsigned `threadIdx.x / 32`, times 4, as
// `(tid >> 3) & ~3`, alike in a warp's lanes though `tid >> 3` is no ramp; an int's division
// and remainder add their rounding before the shift (the lanes lie in one run of 32: checked
// at run time)
#define WARP_SLOTS(NAME, T)                                                                  \
extern "C" __global__ void NAME(const float* in, float* out, int n) {                       \
    __shared__ float sums[32];                                                               \
    int t = threadIdx.x, lane = (T)threadIdx.x % 32, warp = (T)threadIdx.x / 32;            \
    int i = blockIdx.x * blockDim.x + t;                                                     \
    float v = i < n ? in[i] : 0.0f;                                                          \
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);                 \
    if (lane == 0) sums[warp] = v;                                                           \
    __syncthreads();                                                                         \
    if (t < blockDim.x / 32) out[blockIdx.x * 32 + t] = sums[t];                             \
}
WARP_SLOTS(warp_slots, unsigned)
WARP_SLOTS(warp_slots_signed, int)
"""


@pytest.mark.parametrize("threads", [64, 256, 1024])
@pytest.mark.parametrize("kernel", ["warp_slots", "warp_slots_signed"])
def test_a_warps_slot_from_shifted_and_masked_thread_index_is_uniform(compile_cuda, rng, poison, threads, kernel):
    """`and` right after `shr` of a ramp whose lanes lie in one aligned run keeps the bits the
    shift left alike (blockops._high_bits_alike); an int's `t / 32` shifts a ramp of unknown
    alignment, uniform where a check at run time finds its lanes in one run of 32
    (blockops._one_run): the warp's slot is one scalar value (its store one store), and the
    sums are right."""
    import re
    import anycuda as ac
    from anycuda.cudac import compile_to_ptx
    ptx = compile_to_ptx(WARP_SLOTS, name="warp_slots.cu")
    program = pipeline.block_program_ir(ptx, "warp_slots.ptx", kernel, threads)
    if kernel == "warp_slots":
        mask = re.search(r"shr\.[us]32\s+(%r\d+), %r\d+, 3;\s+and\.b32\s+%r\d+, \1, (\d+);", ptx)
        assert mask, "nvcc no longer writes the slot as a shift and a mask"
        assert re.search(rf"= and i32 %[^,]+, {mask.group(2)}\b", program)
    else:
        assert re.search(r"= ashr i32 %[^,]+, 5\b", program)
    mod = compile_cuda(WARP_SLOTS, name="warp_slots.cu")
    n, blocks = 3 * threads - 45, 3
    x = rng.standard_normal(n).astype(np.float32)
    out = poison(blocks * 32, np.float32)
    mod.get_function(kernel)((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)))
    padded = np.zeros(blocks * threads, np.float32)
    padded[:n] = x
    got = out.get().reshape(blocks, 32)[:, :threads // 32]
    np.testing.assert_allclose(got, padded.reshape(blocks, threads // 32, 32).sum(axis=2), rtol=1e-5, atol=1e-5)
    assert ran_as_block_program(mod.get_function(kernel), threads)


RUNS_AT_RUN_TIME = r"""
// indices of unknown alignment: whether a warp's lanes lie in one run of 32 is known only
// when the kernel runs (blockops._one_run); lanes that cross a run read with their own values
extern "C" __global__ void offset_runs(int* out, const int* table, int off) {
    __shared__ int s[1024];
    int t = threadIdx.x + off;
    int a = table[t / 32 + 64], b = table[(t & -32) + 64], d = table[t % 32 + 64];
    s[threadIdx.x] = a + 7 * b + 13 * d;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}
// a bitonic step's pair, 2p - (p & 127): a run of 128 starts at warps 0 and 4 only, so the
// other warps' `p & 127` starts at 32, 64 or 96
extern "C" __global__ void pair_lows(const int* table, int* out) {
    __shared__ int s[512];
    unsigned p = threadIdx.x;
    s[p] = table[p];
    s[p + 256] = table[p + 256];
    __syncthreads();
    unsigned i = 2 * p - (p & 127);
    out[blockIdx.x * blockDim.x + p] = s[i] - 3 * s[i + 128];
}
"""


def test_masked_index_whose_runs_start_between_warps(compile_cuda, rng, poison):
    import anycuda as ac
    mod = compile_cuda(RUNS_AT_RUN_TIME, name="offset_runs.cu")
    table = rng.integers(-1000, 1000, 512).astype(np.int32)
    out = poison(512, np.int32)
    mod.get_function("pair_lows")((2,), (256,), (ac.asarray(table), out))
    p = np.tile(np.arange(256), 2)
    i = 2 * p - (p & 127)
    np.testing.assert_array_equal(out.get(), table[i] - 3 * table[i + 128])
    assert ran_as_block_program(mod.get_function("pair_lows"), 256)


@pytest.mark.parametrize("off", [0, 5, 31, 32, -7, -40, 1000])
def test_runs_checked_at_run_time(compile_cuda, rng, poison, off):
    import anycuda as ac
    mod = compile_cuda(RUNS_AT_RUN_TIME, name="offset_runs.cu")
    threads, blocks = 256, 2
    table = rng.integers(-1000, 1000, 2048).astype(np.int32)
    out = poison(threads * blocks, np.int32)
    mod.get_function("offset_runs")((blocks,), (threads,), (out, ac.asarray(table), np.int32(off)))
    t = np.tile(np.arange(threads, dtype=np.int64) + off, blocks)
    q = np.trunc(t / 32).astype(np.int64)
    tab = table.astype(np.int64)
    want = tab[q + 64] + 7 * tab[(t & -32) + 64] + 13 * tab[t - q * 32 + 64]
    np.testing.assert_array_equal(out.get(), want.astype(np.int32))
    assert ran_as_block_program(mod.get_function("offset_runs"), threads)


NEIGHBOURS = r"""
// a march along z reading each point's neighbours in its row, x - 1 and x + 1 (nvcc reads the
// three through one register: [%rd+-4], [%rd], [%rd+4]), and the planes below and above
extern "C" __global__ void row_march(const float* in, float* out, int nx, int ny, int nz) {
    __shared__ float s[4][32];
    int x = 1 + blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 4 + threadIdx.y;
    size_t sz = (size_t)nx * ny, i = (size_t)y * nx + x;
    for (int z = 1; z + 1 < nz; ++z) {
        size_t j = z * sz + i;
        __syncthreads();
        s[threadIdx.y][threadIdx.x] = (in[j - 1] + in[j] + in[j + 1]) + (in[j - sz] + in[j + sz]);
        __syncthreads();
        out[j] = s[threadIdx.y][31 - threadIdx.x];
    }
}
"""


def test_loads_a_line_apart_share_their_prefetches(compile_cuda, rng, poison):
    """Loads through one register (written once) less than a line apart take one prefetch
    site between them (blockmemory._near_a_prefetched_site): the first fetches their lines,
    and the sites left go to other addresses. Against numpy."""
    import re
    import anycuda as ac
    from anycuda.cudac import compile_to_ptx
    from anycuda.ptx import parse
    ptx = compile_to_ptx(NEIGHBOURS, name="neighbours.cu")
    from anycuda.compiler.analysis.dataflow import definition_positions
    body = next(f for f in parse(ptx, "n.ptx").functions if f.name == "row_march").body
    written = definition_positions(body)
    loads = {}
    for pos, st in enumerate(body):
        if getattr(st, "opcode", None) == "ld" and "global" in st.mods:
            addr = st.operands[1]
            if len(written.get(addr.base.name, ())) == 1:
                loads.setdefault(addr.base.name, []).append(pos)
    ir_text = pipeline.block_program_ir(ptx, "n.ptx", "row_march", (32, 4, 1))
    prefetched = {int(p) for p in re.findall(r'%"round\.step(\d+)" = alloca', ir_text)}
    # (nvcc unrolls the march, and reads x - 1, x, x + 1 through one register)
    shares = {r: len(prefetched.intersection(sites)) for r, sites in loads.items() if len(sites) >= 3}
    assert shares and max(shares.values()) == 1 and 1 in shares.values(), (loads, prefetched)
    assert len(prefetched) > sum(shares.values())        # the planes below and above too
    nx, ny, nz = 66, 8, 9
    u = rng.standard_normal((nz, ny, nx)).astype(np.float32)
    out = poison(u.size, np.float32)
    k = compile_cuda(NEIGHBOURS, name="neighbours.cu").get_function("row_march")
    k(((nx - 2) // 32, ny // 4), (32, 4), (ac.asarray(u), out, np.int32(nx), np.int32(ny), np.int32(nz)))
    c = slice(1, nx - 1)
    sums = (u[1:-1, :, :-2] + u[1:-1, :, 1:-1] + u[1:-1, :, 2:]) + (u[:-2, :, c] + u[2:, :, c])
    tiles = sums.reshape(nz - 2, ny // 4, 4, (nx - 2) // 32, 32)
    got = out.get().reshape(nz, ny, nx)[1:-1, :, c]
    np.testing.assert_allclose(got, tiles[..., ::-1].reshape(got.shape), rtol=1e-6)
    assert ran_as_block_program(k, (32, 4, 1))


# u32 division and remainder by a divisor every lane of a warp holds alike (a parameter, and
# %ntid), across a barrier, next to division by each lane's own divisor
UNIFORM_DIVISION_PTX = """.version 8.0
.target sm_80
.address_size 64

.visible .entry uniform_divisions(.param .u64 p_a, .param .u32 p_d, .param .u64 p_c, .param .u64 p_out)
{
    .reg .b32 %r<16>;
    .reg .b64 %rd<12>;
    .shared .align 4 .b8 sh[1024];
    ld.param.u64 %rd1, [p_a];
    ld.param.u32 %r1, [p_d];
    ld.param.u64 %rd2, [p_c];
    ld.param.u64 %rd3, [p_out];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mul.wide.u32 %rd4, %r2, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r4, [%rd5];
    add.s64 %rd6, %rd2, %rd4;
    ld.global.u32 %r11, [%rd6];
    mov.u32 %r5, sh;
    add.u32 %r6, %r5, %r2;
    add.u32 %r6, %r6, %r2;
    add.u32 %r6, %r6, %r2;
    add.u32 %r6, %r6, %r2;
    st.shared.u32 [%r6], %r4;
    bar.sync 0;
    ld.shared.u32 %r7, [%r6];
    div.u32 %r8, %r7, %r1;
    rem.u32 %r9, %r7, %r1;
    add.u32 %r12, %r7, %r2;
    rem.u32 %r10, %r12, %r3;
    div.u32 %r13, %r7, %r11;
    div.s32 %r14, %r7, %r1;
    rem.s32 %r15, %r7, %r1;
    mul.wide.u32 %rd7, %r2, 24;
    add.s64 %rd8, %rd3, %rd7;
    st.global.u32 [%rd8], %r8;
    st.global.u32 [%rd8+4], %r9;
    st.global.u32 [%rd8+8], %r10;
    st.global.u32 [%rd8+12], %r13;
    st.global.u32 [%rd8+16], %r14;
    st.global.u32 [%rd8+20], %r15;
    ret;
}
"""


def test_division_by_a_divisor_alike_in_the_warp(rng, poison):
    """div and rem (u32, s32) by a parameter and by %ntid (alike in every lane) as one 64-bit
    division and two multiplications a lane (bitops.uniform_quotient), exact for every
    dividend: divisors 0 (all ones, as a GPU gives), 1, powers of two, 2^32 - 1 and random ones,
    dividends at the edges and random; a lane's own divisor still divides lane by lane."""
    import anycuda as ac
    k = ac.RawModule(ptx=UNIFORM_DIVISION_PTX, name="uniformdiv.ptx").get_function("uniform_divisions")
    threads = 256
    for d in [0, 1, 2, 3, 7, 32, 641, 65536, 2 ** 31, 2 ** 31 + 1, 2 ** 32 - 2, 2 ** 32 - 1,
              *rng.integers(1, 2 ** 32, 6, dtype=np.uint64)]:
        d = int(d)
        a = rng.integers(0, 2 ** 32, threads, dtype=np.uint64).astype(np.uint32)
        a[:8] = [0, 1, d % 2 ** 32, (d - 1) % 2 ** 32, 2 ** 32 - 1, 2 ** 32 - 2, 2 ** 31, (2 * d) % 2 ** 32]
        c = rng.integers(0, 2 ** 32, threads, dtype=np.uint64).astype(np.uint32)
        c[:2] = [0, 1]
        out = poison(6 * threads, np.uint32)
        k((1,), (threads,), (ac.asarray(a), np.uint32(d), ac.asarray(c), out))
        a64, c64 = a.astype(np.uint64), c.astype(np.uint64)
        want = np.empty((threads, 6), np.uint64)
        want[:, 0] = 0xFFFFFFFF if d == 0 else a64 // d
        want[:, 1] = 0xFFFFFFFF if d == 0 else a64 % d
        want[:, 2] = (a64 + np.arange(threads, dtype=np.uint64)) % 2 ** 32 % threads
        want[:, 3] = np.where(c64 == 0, 0xFFFFFFFF, a64 // np.maximum(c64, 1))
        sa, sd = a.view(np.int32).astype(np.int64), d - 2 ** 32 if d >= 2 ** 31 else d
        sq = np.trunc(sa / (sd or 1)).astype(np.int64) if sd else np.full(threads, -1)
        if sd == -1:
            sq = -sa                     # (INT_MIN / -1 wraps to INT_MIN below)
        want[:, 4] = sq % 2 ** 32
        want[:, 5] = (sa - sq * sd) % 2 ** 32 if sd else 0xFFFFFFFF
        np.testing.assert_array_equal(out.get().reshape(threads, 6), want, err_msg=f"divisor {d}")
    assert ran_as_block_program(k, threads)
    code = pipeline.block_program_ir(UNIFORM_DIVISION_PTX, "uniformdiv.ptx", "uniform_divisions", threads)
    assert len(re.findall(r"= (?:udiv|urem) <32 x i32>", code)) == 1       # the lane's own divisor alone
