"""Loops in block programs (compiler/vector/blockloops.py): a loop between two barriers runs
over the warp's lanes while some lane goes round, each lane leaving with its own values.

Each kernel runs against numpy on fresh random inputs with poisoned outputs, at block sizes
that leave the last block partial, and the test checks that a block program ran it (or, for a
loop around a barrier, that it did not, and still ran right).
"""
from __future__ import annotations

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler import pipeline
from anycuda.compiler.vector import blockloops
from ptx_generators import HEADER
from conftest import ran_as_block_program

SOURCE = r"""
// a grid-stride sum, then the block's sum through warp shuffles and shared memory
extern "C" __global__ void stride_sum(const int* in, int* out, int n) {
    __shared__ int sums[32];
    int s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) s += in[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) sums[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        int total = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += sums[w];
        out[blockIdx.x] = total;
    }
}

// each thread its own trip count (Collatz steps), a break at a limit, then a neighbour's count
extern "C" __global__ void steps(const int* in, int* out, int* last, int limit) {
    __shared__ int seen[1024];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    unsigned v = in[i];
    int k = 0;
    while (v != 1u) {
        if (k == limit) break;
        v = (v & 1u) ? 3u * v + 1u : v >> 1;
        ++k;
    }
    seen[t] = k;
    __syncthreads();
    out[i] = k * 1000 + seen[t ^ 1];
    last[i] = (int)v;
}

// a loop only odd threads enter: the others keep what they had; nested loops inside
extern "C" __global__ void odd_only(const float* in, float* out, int n) {
    __shared__ float s[1024];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    float v = (float)t;
    if (t & 1) {
        for (int r = 0; r < (t & 7); ++r)
            for (int c = 0; c <= r; ++c) v += in[(i + r * 7 + c) % n];
    }
    s[t] = v;
    __syncthreads();
    if (i < n) out[i] = s[t] - s[t ^ 1];
}

// an index whose stride changes round the loop (no shape kept for it), and a return inside
// a loop after the barrier
extern "C" __global__ void hops(const int* in, int* out, int n) {
    __shared__ int s[1024];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? in[i] : 0;
    __syncthreads();
    int j = t, acc = 0;
    for (int r = 0; r < 6; r += (s[t] & 1) + 1) {
        acc += s[j % blockDim.x];
        j = j * 3 + 1;
        if (acc > 2000000) return;
    }
    if (i < n) out[i] = acc;
}

// a loop around barriers (tiles of a row) behind a test on n: a loop of stretches
extern "C" __global__ void tiles(const float* in, float* out, int n) {
    __shared__ float tile[256];
    float acc = 0.0f;
    for (int k = 0; k < n; k += blockDim.x) {
        tile[threadIdx.x] = k + threadIdx.x < n ? in[k + threadIdx.x] : 0.0f;
        __syncthreads();
        acc += tile[(threadIdx.x + 1) % blockDim.x];
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// the tiled matrix product as people write it: square tiles of blockDim.x, one output a thread
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int m) {
    extern __shared__ float sh[];
    int T = blockDim.x, tx = threadIdx.x, ty = threadIdx.y;
    float* As = sh;
    float* Bs = sh + T * T;
    int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < m; k0 += T) {
        As[ty * T + tx] = row < m && k0 + tx < m ? A[row * m + k0 + tx] : 0.0f;
        Bs[ty * T + tx] = k0 + ty < m && col < m ? B[(k0 + ty) * m + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += As[ty * T + k] * Bs[k * T + tx];
        __syncthreads();
    }
    if (row < m && col < m) C[row * m + col] = acc;
}

// the same with blockDim.y = blockDim.x / 4: each thread four outputs, rows blockDim.y apart
extern "C" __global__ void matmul4(const float* A, const float* B, float* C, int m) {
    extern __shared__ float sh[];
    int T = blockDim.x, Y = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
    float* As = sh;
    float* Bs = sh + T * T;
    int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (int k0 = 0; k0 < m; k0 += T) {
        for (int j = 0; j < 4; ++j) {
            int r = ty + j * Y;
            As[r * T + tx] = row + j * Y < m && k0 + tx < m ? A[(row + j * Y) * m + k0 + tx] : 0.0f;
            Bs[r * T + tx] = k0 + r < m && col < m ? B[(k0 + r) * m + col] : 0.0f;
        }
        __syncthreads();
        for (int k = 0; k < T; ++k) {
            float b = Bs[k * T + tx];
            a0 += As[ty * T + k] * b;
            a1 += As[(ty + Y) * T + k] * b;
            a2 += As[(ty + 2 * Y) * T + k] * b;
            a3 += As[(ty + 3 * Y) * T + k] * b;
        }
        __syncthreads();
    }
    if (col < m) {
        if (row < m) C[row * m + col] = a0;
        if (row + Y < m) C[(row + Y) * m + col] = a1;
        if (row + 2 * Y < m) C[(row + 2 * Y) * m + col] = a2;
        if (row + 3 * Y < m) C[(row + 3 * Y) * m + col] = a3;
    }
}

// a loop in the then-part writes a register the else-part reads: the lanes of the else wait
// past the loop with their own values
extern "C" __global__ void else_reads(const int* in, int* out) {
    __shared__ int s[1024];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    int x = in[i], y;
    if (t % 3) {
        int acc = 0;
        for (int k = 0; k < (t & 7); ++k) { x = x * 5 + k; acc += x; }
        y = acc;
    } else {
        y = x + 1000;
    }
    s[t] = y;
    __syncthreads();
    out[i] = s[t ^ 1] - y;
}

// a step a warp (warps take their own trip counts round a barrier: CUDA leaves that undefined)
extern "C" __global__ void warp_rounds(int* out) {
    __shared__ int s[1024];
    unsigned t = threadIdx.x, v = 0;
#pragma unroll 1
    for (unsigned k = 0; k <= (t >> 5); ++k) {
        s[t] = t + k;
        __syncthreads();
        v += s[(t + 1) % blockDim.x];
    }
    out[t] = v;
}
"""


@pytest.fixture
def module(compile_cuda):
    return compile_cuda(SOURCE, name="blockloops.cu")


@pytest.mark.parametrize("threads,blocks,n", [(256, 7, 10_001), (1024, 2, 3_000), (64, 40, 100)])
def test_grid_stride_sum(module, rng, poison, threads, blocks, n):
    x = rng.integers(-10**4, 10**4, n).astype(np.int32)
    out = poison(blocks, np.int32)
    k = module.get_function("stride_sum")
    k((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)))
    stride = threads * blocks
    padded = np.zeros(-(-n // stride) * stride, np.int64)
    padded[:n] = x
    want = padded.reshape(-1, blocks, threads).sum(axis=(0, 2))
    np.testing.assert_array_equal(out.get(), want.astype(np.int32))
    assert ran_as_block_program(k, threads)


def _steps_reference(x, limit):
    ks, vs = [], []
    for v in x.astype(np.uint64):
        k = 0
        while v != 1 and k != limit:
            v = (3 * v + 1) % 2 ** 32 if v & 1 else v >> 1
            k += 1
        ks.append(k)
        vs.append(v)
    return np.array(ks, np.int64), np.array(vs, np.uint64).astype(np.uint32).view(np.int32)


@pytest.mark.parametrize("threads", [64, 256])
def test_own_trip_counts_and_a_break(module, rng, poison, threads):
    blocks, limit = 3, 60
    x = rng.integers(1, 5000, blocks * threads).astype(np.int32)
    out, last = poison(x.size, np.int32), poison(x.size, np.int32)
    k = module.get_function("steps")
    k((blocks,), (threads,), (ac.asarray(x), out, last, np.int32(limit)))
    ks, vs = _steps_reference(x, limit)
    partner = ks.reshape(blocks, threads)[:, np.arange(threads) ^ 1].ravel()
    np.testing.assert_array_equal(out.get(), (ks * 1000 + partner).astype(np.int32))
    np.testing.assert_array_equal(last.get(), vs)
    assert ran_as_block_program(k, threads)


def test_lanes_that_never_enter_keep_their_values(module, rng, poison):
    threads, n = 128, 500
    x = rng.standard_normal(n).astype(np.float32)
    out = poison(n, np.float32)
    k = module.get_function("odd_only")
    k((-(-n // threads),), (threads,), (ac.asarray(x), out, np.int32(n)))
    gi = np.arange(-(-n // threads) * threads)
    t = gi % threads
    v = t.astype(np.float32)
    for idx in np.nonzero(t & 1)[0]:
        acc = np.float32(t[idx])
        for r in range(t[idx] & 7):
            for c in range(r + 1):
                acc = np.float32(acc + x[(gi[idx] + r * 7 + c) % n])
        v[idx] = acc
    want = (v - v.reshape(-1, threads)[:, np.arange(threads) ^ 1].ravel())[:n]
    np.testing.assert_allclose(out.get(), want, rtol=1e-5, atol=1e-4)
    assert ran_as_block_program(k, threads)


def test_a_stride_that_changes_round_the_loop(module, rng, poison):
    threads, n = 256, 700
    x = rng.integers(-10**5, 10**5, n).astype(np.int32)
    x[::97] = 1_900_000            # some threads return inside the loop
    out = poison(n, np.int32)
    k = module.get_function("hops")
    k((-(-n // threads),), (threads,), (ac.asarray(x), out, np.int32(n)))
    got, want, written = out.get(), np.empty(n, np.int64), np.zeros(n, bool)
    for i in range(n):
        blk, t = divmod(i, threads)
        s = np.zeros(threads, np.int64)
        part = x[blk * threads:(blk + 1) * threads]
        s[:len(part)] = part
        j, acc, r = t, 0, 0
        while r < 6:
            acc += s[j % threads]
            j = (j * 3 + 1) % 2 ** 32
            if acc > 2_000_000:
                break
            r += (s[t] & 1) + 1
        else:
            want[i], written[i] = acc, True
    np.testing.assert_array_equal(got[written], want[written].astype(np.int32))
    assert (got[~written] == np.frombuffer(b"\xcd" * 4, np.int32)[0]).all()      # (the poison)
    assert ran_as_block_program(k, threads)


@pytest.mark.parametrize("n", [300, 64, 1, 0])
def test_a_loop_around_a_barrier(module, rng, poison, n):
    """A loop of stretches behind a uniform test (n = 0: the loop is skipped, the else part
    runs), its state kept from round to round."""
    threads, blocks = 64, 3
    x = rng.standard_normal(max(n, 1)).astype(np.float32)
    out = poison(threads * blocks, np.float32)
    k = module.get_function("tiles")
    k((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)))
    padded = np.zeros(max(-(-n // threads), 1) * threads, np.float32)
    padded[:n] = x[:n]
    want = padded.reshape(-1, threads)[:, (np.arange(threads) + 1) % threads].sum(axis=0)
    np.testing.assert_allclose(out.get(), np.tile(want, blocks), rtol=1e-5, atol=1e-5)
    assert ran_as_block_program(k, threads)


@pytest.mark.parametrize("kernel,block,m", [("matmul", (16, 16), 70), ("matmul", (32, 32), 33), ("matmul", (8, 8), 21),
                                            ("matmul4", (32, 8), 70), ("matmul4", (16, 4), 50)])
def test_tiled_matmul(module, rng, poison, kernel, block, m):
    a = rng.standard_normal((m, m)).astype(np.float32)
    b = rng.standard_normal((m, m)).astype(np.float32)
    out = poison((m, m), np.float32)
    k = module.get_function(kernel)
    T = block[0]
    k((-(-m // T), -(-m // T)), block, (ac.asarray(a), ac.asarray(b), out, np.int32(m)), shared_mem=8 * T * T)
    np.testing.assert_allclose(out.get(), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert k.kernel._programs.get((*block, 1)) is not None


def _warp_rounds_reference(threads):
    """Warp w goes round w + 1 times; a warp that has left no longer writes its slots, and
    the barrier counts only the warps still in the loop (as on a GPU)."""
    t = np.arange(threads)
    s, v = np.zeros(threads, np.int64), np.zeros(threads, np.int64)
    for k in range(threads // 32):
        going = (t >> 5) >= k
        s[going] = t[going] + k
        v[going] += s[(t[going] + 1) % threads]
    return v.astype(np.int32)


@pytest.mark.parametrize("programs", ["1", "0"])
def test_warps_that_part_round_a_barrier(compile_cuda, poison, monkeypatch, programs):
    """Warps taking their own trip counts round a barrier (undefined in CUDA): a warp that
    leaves waits past the loop while the others go round, in a block program as in the rounds."""
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", programs)
    k = compile_cuda(SOURCE, name=f"blockloops{programs}.cu").get_function("warp_rounds")
    for threads in (96, 32):
        out = poison(threads, np.int32)
        k((1,), (threads,), (out,))
        np.testing.assert_array_equal(out.get(), _warp_rounds_reference(threads))
        assert ran_as_block_program(k, threads) == (programs == "1")


LOOPS = HEADER + """.visible .entry into(.param .u32 n)
{
  .reg .b32 %r<3>; .reg .pred %p<3>;
  ld.param.u32 %r2, [n];
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p2, %r1, 5;
  @%p2 bra INSIDE;
  bar.sync 0;
LOOP:
  add.s32 %r1, %r1, 1;
INSIDE:
  setp.lt.s32 %p1, %r1, %r2;
  @%p1 bra LOOP;
  ret;
}
"""


def test_a_branch_into_a_loop_is_refused():
    with pytest.raises(blockloops.NotVectorisable, match="into a loop"):
        pipeline.block_program_ir(LOOPS, "loops.ptx", "into", 64)


CONVERSIONS = r"""
// float to integer in each rounding, and floats rounded to whole floats, in a block program
extern "C" __global__ void conversions(const float* x, const double* y, int* i32, unsigned* u32,
                                       long long* i64, unsigned long long* u64, float* whole, double* dwhole) {
    __shared__ float s[256];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = x[i];
    __syncthreads();
    float v = s[t];
    double d = y[i];
    i32[4 * i] = __float2int_rn(v);
    i32[4 * i + 1] = __float2int_rz(v);
    i32[4 * i + 2] = __float2int_rd(v);
    i32[4 * i + 3] = __double2int_ru(d);
    u32[i] = __float2uint_rz(v);
    i64[i] = __float2ll_rd(v);
    u64[i] = __double2ull_rn(d);
    whole[3 * i] = rintf(v);
    whole[3 * i + 1] = floorf(v);
    whole[3 * i + 2] = ceilf(v);
    dwhole[i] = trunc(d);
}
"""


def test_float_to_integer_conversions_in_a_block_program(compile_cuda, rng, poison, monkeypatch):
    """Against numpy where the value is in range, and against the rounds (whose conversions the
    golden files check against a GPU) for NaN, infinities and values out of range."""
    n = 512
    special = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.5, -2.5, 0.5, -0.5, 1e20, -1e-30, 4294967295.0],
                       np.float32)
    x = (rng.standard_normal(n) * 1000).astype(np.float32)
    x[:len(special)] = special
    y = (rng.standard_normal(n) * 1e6).astype(np.float64)
    y[:len(special)] = special.astype(np.float64)
    k = compile_cuda(CONVERSIONS, name="conversions.cu").get_function("conversions")

    def run():
        outs = [poison(4 * n, np.int32), poison(n, np.uint32), poison(n, np.int64), poison(n, np.uint64),
                poison(3 * n, np.float32), poison(n, np.float64)]
        k((n // 256,), (256,), (ac.asarray(x), ac.asarray(y), *outs))
        return [o.get() for o in outs]

    got = run()
    assert ran_as_block_program(k, 256)
    ok = np.isfinite(x) & (np.abs(x) < 2e9)
    i32 = got[0].reshape(n, 4)
    np.testing.assert_array_equal(i32[ok, 0], np.rint(x[ok]).astype(np.int32))
    np.testing.assert_array_equal(i32[ok, 1], np.trunc(x[ok]).astype(np.int32))
    np.testing.assert_array_equal(i32[ok, 2], np.floor(x[ok]).astype(np.int32))
    fine = np.isfinite(y) & (np.abs(y) < 2e9)
    np.testing.assert_array_equal(i32[fine, 3], np.ceil(y[fine]).astype(np.int32))
    np.testing.assert_array_equal(got[4].reshape(n, 3)[ok], np.stack([np.rint(x), np.floor(x), np.ceil(x)], 1)[ok])
    np.testing.assert_array_equal(got[5][fine], np.trunc(y[fine]))
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")
    k = compile_cuda(CONVERSIONS, name="conversions_rounds.cu").get_function("conversions")
    rounds = run()
    assert not ran_as_block_program(k, 256)
    for a, c in zip(got, rounds):
        np.testing.assert_array_equal(a.view(np.uint8), c.view(np.uint8))


def test_lanes_waiting_past_a_loop_keep_what_it_writes(module, rng, poison):
    threads, blocks = 96, 2
    x = rng.integers(-1000, 1000, threads * blocks).astype(np.int32)
    out = poison(x.size, np.int32)
    k = module.get_function("else_reads")
    k((blocks,), (threads,), (ac.asarray(x), out))
    t = np.arange(x.size) % threads
    y = np.empty(x.size, np.int64)
    for i, v in enumerate(x.astype(np.int64)):
        if t[i] % 3:
            acc = 0
            for kk in range(t[i] & 7):
                v = (v * 5 + kk + 2 ** 31) % 2 ** 32 - 2 ** 31
                acc += v
            y[i] = acc
        else:
            y[i] = v + 1000
    partner = y.reshape(blocks, threads)[:, np.arange(threads) ^ 1].ravel()
    np.testing.assert_array_equal(out.get(), ((partner - y + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32))
    assert ran_as_block_program(k, threads)


BACK_TO_BACK = HEADER + """.visible .entry back_to_back(.param .u64 p, .param .u32 n)
{
  .reg .b32 %r<8>; .reg .pred %p<3>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r2, [n];
  mov.u32 %r3, %tid.x;
  mul.wide.u32 %rd2, %r3, 4;
  add.s64 %rd3, %rd1, %rd2;
  mov.u32 %r1, 0;
LOOP:
  bar.sync 0;
  ld.global.u32 %r4, [%rd3];
  add.s32 %r4, %r4, %r1;
  st.global.u32 [%rd3], %r4;
  add.s32 %r1, %r1, 1;
  setp.lt.s32 %p1, %r1, %r2;
  @%p1 bra LOOP;
LOOP2:
  bar.sync 0;
  ld.global.u32 %r4, [%rd3];
  add.s32 %r4, %r4, 100;
  st.global.u32 [%rd3], %r4;
  add.s32 %r1, %r1, -1;
  setp.gt.s32 %p2, %r1, 0;
  @%p2 bra LOOP2;
}
"""


@pytest.mark.parametrize("n", [1, 5])
def test_loops_around_barriers_back_to_back_to_the_end(rng, n):
    """Two loops of stretches, the second straight after the first and its back branch the
    kernel's last instruction."""
    x = rng.integers(-1000, 1000, 64).astype(np.int32)
    data = ac.asarray(x)
    k = ac.RawModule(ptx=BACK_TO_BACK, name=f"back_to_back{n}.ptx").get_function("back_to_back")
    k((1,), (64,), (data, np.uint32(n)))
    np.testing.assert_array_equal(data.get(), x + n * (n - 1) // 2 + 100 * n)
    assert ran_as_block_program(k, 64)


ROWS = r"""
// a warp per row of C, as llm.c's layernorm: nvcc splits each `i += 32` loop into a remainder
// loop of ((C - 1 - lane) / 32 + 1) % 4 turns behind a branch (alike in a warp only when C is
// a multiple of 32) and a loop unrolled by four that goes on from the remainder's i
extern "C" __global__ void rows(const int* in, int* out, int* sums, int N, int C) {
    int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    const int* x = in + (size_t)row * C;
    int s = 0;
    for (int i = lane; i < C; i += 32) s += x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) sums[row] = s;
    int* y = out + (size_t)row * C;
    for (int i = lane; i < C; i += 32) y[i] = 3 * x[i] - s;
}
"""


@pytest.mark.parametrize("C", [768, 96, 100, 33, 7])
def test_a_warp_per_row_whatever_the_rows_length(compile_cuda, rng, poison, C):
    """The block program keeps the shape of `i` through the remainder loop and the branch
    before it on condition that every lane took them alike (C a multiple of 32); where
    they did not, the accesses go lane by lane: both against numpy."""
    k = compile_cuda(ROWS, name="rows.cu").get_function("rows")
    N = 13                                           # 4 rows a block: the last block's warps partly idle
    x = rng.integers(-1000, 1000, (N, C)).astype(np.int32)
    out, sums = poison(N * C, np.int32), poison(N, np.int32)
    k((-(-N // 4),), (128,), (ac.asarray(x), out, sums, np.int32(N), np.int32(C)))
    s = x.sum(axis=1)
    np.testing.assert_array_equal(sums.get(), s)
    np.testing.assert_array_equal(out.get().reshape(N, C), 3 * x - s[:, None])
    assert ran_as_block_program(k, 128)


MASKED_SHAPE = HEADER + """.visible .entry masked_shape(.param .u64 out, .param .u32 k)
{
  .reg .b32 %r<4>; .reg .pred %p<2>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [k];
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %r2;
  setp.ge.u32 %p1, %r2, %r1;
  @%p1 bra SKIP;
  add.u32 %r3, %r2, 1000;
SKIP:
  bar.sync 0;
  mul.wide.u32 %rd2, %r3, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  ret;
}
"""


@pytest.mark.parametrize("k", [0, 5, 40, 64])
def test_a_shape_written_under_a_mask_holds_only_where_every_lane_wrote_it(poison, k):
    """j = tid, then j = tid + 1000 for tid < k behind a branch: lanes past k keep tid, so the
    new shape (stride 1 from 1000) fits the block only when k covers it; out[j] = tid."""
    out = poison(1100, np.int32)
    f = ac.RawModule(ptx=MASKED_SHAPE, name=f"masked_shape{k}.ptx").get_function("masked_shape")
    f((1,), (64,), (out, np.uint32(k)))
    want = np.frombuffer(b"\xcd" * 4400, np.int32).copy()
    t = np.arange(64)
    want[np.where(t < k, t + 1000, t)] = t
    np.testing.assert_array_equal(out.get(), want)
    assert ran_as_block_program(f, 64)
