"""Asynchronous copies (compiler/ops/asynccopy.py): every cp.async form on hand-written PTX
(sizes 4, 8 and 16, src-size with zero fill, ignore-src, cache hints and policies, groups),
cp.async.mbarrier.arrive with and without .noinc, the non-tensor cp.async.bulk in both
directions with its mbarrier and bulk groups, the refusals (the tensor forms, wrong sizes);
and CUDA C++ that nvcc turns into them: cuda_pipeline.h's primitives, cuda::memcpy_async
with cuda::barrier, and a cuda::pipeline of several stages, for sm_80 (test_wait) and sm_90
(try_wait), with blocks that are not whole warps and several blocks per launch.
"""
from __future__ import annotations

import numpy as np
import pytest

import anycuda as ac
from anycuda.ptx import PtxError
from anycuda.runtime.errors import CudaError
from conformance import poison, ptx_launcher

HEADER = ".version 8.3\n.target sm_90\n.address_size 64\n"
FILL = 0xAB          # what shared memory holds before the copies


launch = ptx_launcher(HEADER, "asynccopy.ptx")


# Each thread owns 64 bytes of shared memory, filled with FILL, and copies into them:
#   [0, 4)   cp.async.ca 4                          [4, 8) stays FILL
#   [8, 16)  cp.async.ca 8, src-size 5 (immediate)
#   [16, 32) cp.async.ca 16, src-size t % 17 (a register)
#   [32, 48) cp.async.cg 16 with a cache policy (createpolicy) and a prefetch size
#   [48, 64) cp.async.ca 16, ignore-src when t is odd
# then waits for its groups and writes its 64 bytes out.
FORMS = """
.visible .entry forms(.param .u64 pin, .param .u64 pout)
{
  .reg .b32 %r<16>; .reg .b64 %rd<16>; .reg .pred %p<4>;
  .shared .align 16 .b8 buf[16384];
  ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, buf; mad.lo.u32 %r3, %r1, 64, %r2;         // this thread's 64 bytes
  mov.u32 %r4, 0;
FILL:
  add.u32 %r5, %r3, %r4;
  st.shared.u32 [%r5], 0xABABABAB;
  add.u32 %r4, %r4, 4;
  setp.lt.u32 %p1, %r4, 64;
  @%p1 bra FILL;
  mul.wide.u32 %rd3, %r1, 64; add.s64 %rd4, %rd1, %rd3;   // this thread's 64 input bytes
  cp.async.ca.shared.global [%r3], [%rd4], 4;
  cp.async.ca.shared::cta.global [%r3+8], [%rd4+8], 8, 5;
  cp.async.commit_group;
  rem.u32 %r6, %r1, 17;
  cp.async.ca.shared.global.L2::64B [%r3+16], [%rd4+16], 16, %r6;
  createpolicy.fractional.L2::evict_last.L2::evict_unchanged.b64 %rd5, 0f3F000000;
  createpolicy.fractional.L2::evict_first.b64 %rd9;
  cp.async.cg.shared.global.L2::cache_hint.L2::128B [%r3+32], [%rd4+32], 16, %rd5;
  cp.async.commit_group;
  and.b32 %r7, %r1, 1; setp.ne.u32 %p2, %r7, 0;
  cp.async.ca.shared.global [%r3+48], [%rd4+48], 16, %p2;
  cp.async.commit_group;
  cp.async.wait_group 1;
  cp.async.wait_all;
  add.s64 %rd6, %rd2, %rd3;
  mov.u32 %r4, 0;
OUT:
  add.u32 %r5, %r3, %r4;
  ld.shared.u32 %r8, [%r5];
  cvt.u64.u32 %rd7, %r4; add.s64 %rd8, %rd6, %rd7;
  st.global.u32 [%rd8], %r8;
  add.u32 %r4, %r4, 4;
  setp.lt.u32 %p1, %r4, 64;
  @%p1 bra OUT;
  ret;
}
"""


@pytest.mark.parametrize("block", [1, 33, 100])
def test_cp_async_forms(rng, block):
    src = rng.integers(0, 256, (block, 64), dtype=np.uint8)
    out = np.full((block, 64), 0xCD, np.uint8)
    launch(FORMS, "forms", (1, 1, 1), (block, 1, 1), src, out)
    want = np.full((block, 64), FILL, np.uint8)
    for t in range(block):
        want[t, 0:4] = src[t, 0:4]
        want[t, 8:16] = 0
        want[t, 8:13] = src[t, 8:13]
        n = t % 17
        want[t, 16:32] = 0
        want[t, 16:16 + n] = src[t, 16:16 + n]
        want[t, 32:48] = src[t, 32:48]
        want[t, 48:64] = 0 if t & 1 else src[t, 48:64]
    assert np.array_equal(out, want)


# Copies a block program takes (compiler/vector/blockcopies.py): 16 bytes a thread into one run
# of shared memory, 8 bytes a thread from and to places apart, 4 bytes under a guard (even
# threads); then each thread reads back another thread's pieces.
BLOCK_COPIES = """
.visible .entry copies(.param .u64 pin, .param .u64 pout)
{
  .reg .b32 %r<24>; .reg .b64 %rd<16>; .reg .pred %p<4>;
  .shared .align 16 .b8 s[16384];
  ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %ctaid.x;
  mad.lo.u32 %r4, %r3, %r2, %r1;
  mov.u32 %r5, s;
  mad.lo.u32 %r6, %r1, 4, %r5; add.u32 %r6, %r6, 12288;
  st.shared.u32 [%r6], 0xDEADBEEF;
  mul.wide.u32 %rd3, %r4, 16; add.s64 %rd4, %rd1, %rd3;
  mad.lo.u32 %r7, %r1, 16, %r5;
  cp.async.cg.shared.global [%r7], [%rd4], 16, 16;
  mul.lo.u32 %r8, %r1, 5; rem.u32 %r8, %r8, %r2; mad.lo.u32 %r8, %r3, %r2, %r8;
  mul.wide.u32 %rd5, %r8, 8; add.s64 %rd6, %rd1, %rd5;
  mul.lo.u32 %r9, %r1, 7; rem.u32 %r9, %r9, %r2; mad.lo.u32 %r9, %r9, 8, %r5; add.u32 %r9, %r9, 8192;
  cp.async.ca.shared.global [%r9], [%rd6], 8;
  and.b32 %r10, %r1, 1; setp.eq.u32 %p1, %r10, 0;
  mul.wide.u32 %rd7, %r4, 4; add.s64 %rd8, %rd1, %rd7;
  @%p1 cp.async.ca.shared.global [%r6], [%rd8], 4;
  cp.async.commit_group;
  cp.async.wait_group 0;
  bar.sync 0;
  sub.u32 %r11, %r2, 1; sub.u32 %r11, %r11, %r1;
  mad.lo.u32 %r12, %r11, 16, %r5;
  ld.shared.v4.u32 {%r13, %r14, %r15, %r16}, [%r12];
  mad.lo.u32 %r17, %r11, 8, %r5; add.u32 %r17, %r17, 8192;
  ld.shared.v2.u32 {%r18, %r19}, [%r17];
  ld.shared.u32 %r20, [%r6];
  mul.wide.u32 %rd9, %r4, 32; add.s64 %rd10, %rd2, %rd9;
  st.global.v4.u32 [%rd10], {%r13, %r14, %r15, %r16};
  st.global.v2.u32 [%rd10+16], {%r18, %r19};
  st.global.u32 [%rd10+24], %r20;
  ret;
}
"""


@pytest.mark.parametrize("block", [64, 96, 40])
@pytest.mark.parametrize("path", ["rounds", "block program"])
def test_copies_a_block_program_takes(rng, block, path, monkeypatch):
    if path == "rounds":
        monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")
    blocks = 3
    src = rng.integers(0, 2 ** 32, blocks * block * 4, dtype=np.uint64).astype(np.uint32)
    out = np.full((blocks * block, 8), 0xCDCDCDCD, np.uint32)
    prog = launch(BLOCK_COPIES, "copies", (blocks, 1, 1), (block, 1, 1), src, out)
    assert (prog.kernel("copies")._programs.get((block, 1, 1)) is not None) == (path == "block program")
    for c in range(blocks):
        for t in range(block):
            row, other = out[c * block + t], block - 1 - t
            assert np.array_equal(row[:4], src[4 * (c * block + other):4 * (c * block + other) + 4])
            writer = next(u for u in range(block) if 7 * u % block == other)     # whose 8 bytes landed there
            piece = c * block + 5 * writer % block
            assert np.array_equal(row[4:6], src[2 * piece:2 * piece + 2])
            assert row[6] == (src[c * block + t] if t % 2 == 0 else 0xDEADBEEF)
            assert row[7] == 0xCDCDCDCD


# Each thread copies its element into s[t] and signals the object with cp.async.mbarrier.arrive
# (.noinc: the object expects one arrival per thread; without: the copy's arrival is taken
# back and the thread arrives itself); all then wait and read s[T - 1 - t].
ARRIVE = """
.visible .entry arrive(.param .u64 pin, .param .u64 pout, .param .u32 noinc)
{
  .reg .b32 %r<16>; .reg .b64 %rd<16>; .reg .pred %p<4>;
  .shared .align 8 .b64 bar;
  .shared .align 4 .b32 s[1024];
  ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout]; ld.param.u32 %r9, [noinc];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, bar;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared.b64 [%r4], %r2;
  bar.sync 0;
  mad.lo.u32 %r5, %r3, %r2, %r1;
  mul.wide.u32 %rd3, %r5, 4; add.s64 %rd4, %rd1, %rd3;
  mov.u32 %r6, s; mad.lo.u32 %r7, %r1, 4, %r6;
  cp.async.ca.shared.global [%r7], [%rd4], 4;
  setp.ne.u32 %p2, %r9, 0;
  @%p2 bra NOINC;
  cp.async.mbarrier.arrive.shared.b64 [%r4];
  mbarrier.arrive.shared.b64 %rd5, [%r4];
  bra WAIT;
NOINC:
  cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r4];
WAIT:
  mbarrier.try_wait.parity.shared.b64 %p3, [%r4], 0;
  @!%p3 bra WAIT;
  sub.u32 %r8, %r2, 1; sub.u32 %r8, %r8, %r1;
  mad.lo.u32 %r7, %r8, 4, %r6;
  ld.shared.u32 %r10, [%r7];
  add.s64 %rd6, %rd2, %rd3;
  st.global.u32 [%rd6], %r10;
  ret;
}
"""


@pytest.mark.parametrize("block", [1, 33, 100, 256])
@pytest.mark.parametrize("noinc", [0, 1])
def test_cp_async_mbarrier_arrive(rng, block, noinc):
    grid = 3
    x = rng.integers(0, 1 << 31, grid * block).astype(np.uint32)
    out = np.full(grid * block, 0xCDCDCDCD, np.uint32)
    launch(ARRIVE, "arrive", (grid, 1, 1), (block, 1, 1), x, out, noinc)
    assert np.array_equal(out, x.reshape(grid, block)[:, ::-1].ravel())


# Thread 0 expects the bytes of a bulk copy into shared memory on an mbarrier and issues it;
# every thread waits, doubles its element into a second buffer, and thread 0 bulk-copies
# that buffer out in a bulk group.
BULK = """
.visible .entry bulk(.param .u64 pin, .param .u64 pout)
{
  .reg .b32 %r<16>; .reg .b64 %rd<16>; .reg .pred %p<4>;
  .shared .align 8 .b64 bar;
  .shared .align 16 .b32 s[1024];
  .shared .align 16 .b32 d[1024];
  ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, bar;
  shl.b32 %r5, %r2, 2;                                  // the block's bytes
  mul.wide.u32 %rd3, %r3, %r5;
  add.s64 %rd4, %rd1, %rd3; add.s64 %rd5, %rd2, %rd3;
  setp.eq.u32 %p1, %r1, 0;
  @!%p1 bra WAIT;
  mbarrier.init.shared::cta.b64 [%r4], 1;
  fence.proxy.async.shared::cta;
  mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %rd6, [%r4], %r5;
  mov.u32 %r6, s;
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r6], [%rd4], %r5, [%r4];
WAIT:
  bar.sync 0;
LOOP:
  mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p2, [%r4], 0;
  @!%p2 bra LOOP;
  mov.u32 %r6, s; mad.lo.u32 %r7, %r1, 4, %r6;
  ld.shared.u32 %r8, [%r7];
  add.u32 %r8, %r8, %r8;
  mov.u32 %r6, d; mad.lo.u32 %r7, %r1, 4, %r6;
  st.shared.u32 [%r7], %r8;
  fence.proxy.async.shared::cta;
  bar.sync 0;
  @!%p1 bra DONE;
  mov.u32 %r6, d;
  mov.b64 %rd7, 0;
  cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%rd5], [%r6], %r5, %rd7;
  cp.async.bulk.commit_group;
  cp.async.bulk.prefetch.L2.global [%rd4], %r5;
  cp.async.bulk.prefetch.L2.global.L2::cache_hint [%rd4], %r5, %rd7;
  cp.async.bulk.wait_group.read 0;
  cp.async.bulk.wait_group 0;
DONE:
  ret;
}
"""


@pytest.mark.parametrize("block", [4, 36, 100, 256])
def test_cp_async_bulk_both_ways(rng, block):
    grid = 3
    x = rng.integers(0, 1 << 30, grid * block).astype(np.uint32)
    out = np.full(grid * block, 0xCDCDCDCD, np.uint32)
    launch(BULK, "bulk", (grid, 1, 1), (block, 1, 1), x, out)
    assert np.array_equal(out, 2 * x)


# Hopper's producer idiom: the lane elect.sync picks in the last warp expects the bytes and
# issues the bulk copy, while every other thread already waits on the phase (a collective and
# mbarrier waits in one kernel, without a barrier)
ELECTED = """
.visible .entry elected(.param .u64 pin, .param .u64 pout)
{
  .reg .b32 %r<16>; .reg .b64 %rd<16>; .reg .pred %p<4>;
  .shared .align 8 .b64 bar;
  .shared .align 16 .b32 s[1024];
  ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, bar;
  shl.b32 %r5, %r2, 2;
  mul.wide.u32 %rd3, %r3, %r5;
  add.s64 %rd4, %rd1, %rd3; add.s64 %rd5, %rd2, %rd3;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared.b64 [%r4], 1;
  bar.sync 0;
  add.u32 %r9, %r2, -1; shr.u32 %r9, %r9, 5;            // the last warp
  shr.u32 %r10, %r1, 5;
  setp.ne.u32 %p3, %r10, %r9;
  @%p3 bra LOOP;
  elect.sync _|%p2, 0xFFFFFFFF;
  @!%p2 bra LOOP;
  mbarrier.arrive.expect_tx.shared.b64 %rd6, [%r4], %r5;
  mov.u32 %r6, s;
  cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [%r6], [%rd4], %r5, [%r4];
LOOP:
  mbarrier.try_wait.parity.shared.b64 %p2, [%r4], 0;
  @!%p2 bra LOOP;
  mov.u32 %r6, s; sub.u32 %r7, %r2, 1; sub.u32 %r7, %r7, %r1; mad.lo.u32 %r7, %r7, 4, %r6;
  ld.shared.u32 %r8, [%r7];
  mul.wide.u32 %rd7, %r1, 4; add.s64 %rd8, %rd5, %rd7;
  st.global.u32 [%rd8], %r8;
  ret;
}
"""


@pytest.mark.parametrize("block", [32, 40, 128])
def test_an_elected_producer_and_waiting_consumers(rng, block):
    grid = 3
    x = rng.integers(0, 1 << 30, grid * block).astype(np.uint32)
    out = np.full(grid * block, 0xCDCDCDCD, np.uint32)
    launch(ELECTED, "elected", (grid, 1, 1), (block, 1, 1), x, out)
    assert np.array_equal(out, x.reshape(grid, block)[:, ::-1].ravel())


def _refused(body, *words):
    ptx = f"""
.visible .entry bad(.param .u64 p)
{{
  .reg .b32 %r<4>; .reg .b64 %rd<4>;
  .shared .align 16 .b8 buf[64]; .shared .align 8 .b64 bar;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, buf; mov.u32 %r2, bar; mov.u32 %r3, 0;
  {body}
  ret;
}}
"""
    with pytest.raises((CudaError, PtxError)) as e:
        launch(ptx, "bad", (1, 1, 1), (1, 1, 1), np.zeros(16, np.uint32))
    for w in words:
        assert w in str(e.value)


def test_tensor_copies_are_refused_by_name():
    _refused("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
             "[%r1], [%rd1, {%r3}], [%r2];", "cp.async.bulk.tensor")


def test_wrong_copy_sizes_are_refused():
    _refused("cp.async.cg.shared.global [%r1], [%rd1], 8;", "cp.async", "16")
    _refused("cp.async.ca.shared.global [%r1], [%rd1], 12;", "cp.async", "4 or 8 or 16")
    _refused("cp.async.bulk.shared::cluster.global.multicast::cluster.mbarrier::complete_tx::bytes "
             "[%r1], [%rd1], 16, [%r2], 1;", "multicast")


# ---------------------------------------------------------------- CUDA C++ through nvcc

CUDA = r"""
#include <cuda/barrier>
#include <cuda/pipeline>
#include <cuda_pipeline.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// __pipeline_memcpy_async of 16, 8 and 4 bytes (the last with zero fill past `valid`), two
// groups, each waited for in turn
extern "C" __global__ void primitives(const float4* a, const float2* b, const float* c, float* out, int valid) {
  extern __shared__ float4 sa[];
  float2* sb = (float2*)(sa + blockDim.x);
  float* sc = (float*)(sb + blockDim.x);
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  __pipeline_memcpy_async(&sa[t], &a[i], sizeof(float4));
  __pipeline_commit();
  __pipeline_memcpy_async(&sb[t], &b[i], sizeof(float2));
  __pipeline_memcpy_async(&sc[t], &c[i], sizeof(float), i < valid ? 0 : sizeof(float));
  __pipeline_commit();
  __pipeline_wait_prior(1);
  __syncthreads();
  int r = blockDim.x - 1 - t;
  float4 v = sa[r];
  out[i * 4 + 0] = v.x + v.y + v.z + v.w;
  __pipeline_wait_prior(0);
  __syncthreads();
  out[i * 4 + 1] = sb[r].x - sb[r].y;
  out[i * 4 + 2] = sc[r];
  out[i * 4 + 3] = 1.0f;
}

// the whole block's tile copied with cuda::memcpy_async on one cuda::barrier, then each
// thread's own element with the per-thread form on a second one
extern "C" __global__ void with_barrier(const float* in, float* out) {
  extern __shared__ float s[];
  __shared__ cuda::barrier<cuda::thread_scope_block> bars[2];
  auto block = cg::this_thread_block();
  int T = blockDim.x, base = blockIdx.x * T * 2;
  if (block.thread_rank() == 0) {
    init(&bars[0], block.size());
    init(&bars[1], block.size());
  }
  block.sync();
  cuda::memcpy_async(block, s, in + base, sizeof(float) * T, bars[0]);
  bars[0].arrive_and_wait();
  cuda::memcpy_async(s + T + threadIdx.x, in + base + T + threadIdx.x, sizeof(float), bars[1]);
  auto token = bars[1].arrive();
  bars[1].wait(std::move(token));
  out[blockIdx.x * T + threadIdx.x] = s[T - 1 - threadIdx.x] * s[T + (threadIdx.x + 1) % T];
}

// a copy of 16-byte aligned size: a bulk copy that completes its bytes before the thread
// that issued it expects them (sm_90: tx-count goes below zero first), cp.async 16 before
extern "C" __global__ void aligned(const float* in, float* out) {
  extern __shared__ __align__(16) float s[];
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  auto block = cg::this_thread_block();
  if (block.thread_rank() == 0) init(&bar, block.size());
  block.sync();
  int T = blockDim.x, base = blockIdx.x * T;
  cuda::memcpy_async(block, s, in + base, cuda::aligned_size_t<16>(sizeof(float) * T), bar);
  bar.arrive_and_wait();
  out[base + threadIdx.x] = s[T - 1 - threadIdx.x] + 1.0f;
}

// phases of a cuda::barrier that a third of the threads leave after the first
// (arrive_and_drop: mbarrier.arrive_drop); each phase sums into its own slot
extern "C" __global__ void dropping(int* out, int rounds) {
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  __shared__ int slots[16];
  auto block = cg::this_thread_block();
  int t = threadIdx.x;
  if (t == 0) init(&bar, block.size());
  if (t < 16) slots[t] = 0;
  block.sync();
  int total = 0;
  for (int k = 0; k < rounds; ++k) {
    atomicAdd(&slots[k], t + k);
    if (k == 0 && t % 3 == 0) {
      bar.arrive_and_drop();
      out[blockIdx.x * blockDim.x + t] = -1;
      return;
    }
    bar.arrive_and_wait();
    total += slots[k];
  }
  out[blockIdx.x * blockDim.x + t] = total;
}

// a tiled sum over `tiles` tiles of blockDim.x floats through a pipeline of S stages
template <int S>
__device__ void tiled_sum(const float* in, float* out, int tiles) {
  extern __shared__ float s[];
  __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, S> state;
  auto block = cg::this_thread_block();
  auto pipe = cuda::make_pipeline(block, &state);
  int T = blockDim.x;
  const float* mine = in + (size_t)blockIdx.x * tiles * T;
  float acc = 0;
  for (int fetched = 0, used = 0; used < tiles; ++used) {
    for (; fetched < tiles && fetched < used + S; ++fetched) {
      pipe.producer_acquire();
      cuda::memcpy_async(block, s + (fetched % S) * T, mine + fetched * T, sizeof(float) * T, pipe);
      pipe.producer_commit();
    }
    pipe.consumer_wait();
    acc += s[(used % S) * T + (T - 1 - threadIdx.x)] * (used + 1);
    pipe.consumer_release();
  }
  out[blockIdx.x * T + threadIdx.x] = acc;
}
extern "C" __global__ void pipeline2(const float* in, float* out, int tiles) { tiled_sum<2>(in, out, tiles); }
extern "C" __global__ void pipeline3(const float* in, float* out, int tiles) { tiled_sum<3>(in, out, tiles); }
"""

_modules = {}


def cuda_module(arch):
    if arch not in _modules:
        try:
            _modules[arch] = ac.RawModule(code=CUDA, options=(f"-arch={arch}", "-diag-suppress=20054"),
                                          name=f"asynccopy_{arch}.cu")
        except ac.CompileError as e:
            if "no CUDA C++ compiler" in str(e):
                pytest.skip(str(e))
            raise
    return _modules[arch]


ARCHS = ["sm_80", "sm_90"]
BLOCKS = [1, 33, 96, 200]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("block", BLOCKS)
def test_pipeline_primitives(rng, arch, block):
    grid = 3
    n = grid * block
    a = rng.standard_normal((n, 4)).astype(np.float32)
    b = rng.standard_normal((n, 2)).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32)
    valid = n - block // 2 - 1
    out = poison((n, 4), np.float32)
    cuda_module(arch).get_function("primitives")((grid,), (block,), (ac.asarray(a), ac.asarray(b), ac.asarray(c),
                                                                   out, np.int32(valid)), shared_mem=28 * block)
    rev = np.arange(n).reshape(grid, block)[:, ::-1].ravel()
    want = np.stack([a.sum(1)[rev], (b[:, 0] - b[:, 1])[rev], np.where(rev < valid, c[rev], 0), np.ones(n)], 1)
    assert np.allclose(out.get(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("block", BLOCKS)
def test_memcpy_async_with_a_barrier(rng, arch, block):
    grid = 4
    x = rng.standard_normal(grid * 2 * block).astype(np.float32)
    out = poison(grid * block, np.float32)
    cuda_module(arch).get_function("with_barrier")((grid,), (block,), (ac.asarray(x), out), shared_mem=8 * block)
    tiles = x.reshape(grid, 2, block)
    t = np.arange(block)
    want = tiles[:, 0, ::-1] * tiles[:, 1, (t + 1) % block]
    assert np.array_equal(out.get(), want.ravel())


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("block", [4, 36, 96, 200])
def test_memcpy_async_of_an_aligned_size(rng, arch, block):
    grid = 3
    x = rng.standard_normal(grid * block).astype(np.float32)
    out = poison(grid * block, np.float32)
    cuda_module(arch).get_function("aligned")((grid,), (block,), (ac.asarray(x), out), shared_mem=4 * block)
    assert np.array_equal(out.get(), (x.reshape(grid, block)[:, ::-1] + np.float32(1)).ravel())


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("block", BLOCKS)
def test_a_barrier_that_threads_leave(arch, block):
    grid, rounds = 2, 5
    out = poison(grid * block, np.int32)
    cuda_module(arch).get_function("dropping")((grid,), (block,), (out, np.int32(rounds)))
    t = np.arange(block)
    stay = t % 3 != 0
    total = t.sum() + sum(int((t[stay] + k).sum()) for k in range(1, rounds))
    want = np.where(stay, total, -1)
    assert np.array_equal(out.get(), np.tile(want, grid))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("block", BLOCKS)
def test_pipeline_of_stages(rng, arch, stages, block):
    grid, tiles = 3, 7
    x = rng.standard_normal((grid, tiles, block)).astype(np.float32)
    out = poison(grid * block, np.float32)
    cuda_module(arch).get_function(f"pipeline{stages}")((grid,), (block,), (ac.asarray(x), out, np.int32(tiles)),
                                                          shared_mem=4 * stages * block)
    weights = np.arange(1, tiles + 1, dtype=np.float64)[None, :, None]
    want = (x[:, :, ::-1] * weights).sum(1)
    assert np.allclose(out.get(), want.ravel(), rtol=1e-5, atol=1e-5)


# elect.sync's answer differs between the lanes of a warp (only the leader gets true): code
# after it, in any execution path, must keep it per lane
ELECT_EACH_LANE = """
.visible .entry elect_each(.param .u64 pout, .param .u32 pmask)
{
  .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .pred %p<2>;
  ld.param.u64 %rd1, [pout]; ld.param.u32 %r5, [pmask];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %ctaid.x;
  mad.lo.u32 %r4, %r3, %r2, %r1;
  elect.sync %r6|%p1, %r5;
  selp.u32 %r7, 1, 0, %p1;
  shl.b32 %r7, %r7, 8;
  or.b32 %r7, %r7, %r6;
  mul.wide.u32 %rd2, %r4, 4; add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r7;
  ret;
}
"""


@pytest.mark.parametrize("block", [32, 64, 96])
@pytest.mark.parametrize("mask", [0xFFFFFFFF, 0xFFFFFFF0])
def test_elect_picks_the_lowest_member_lane_of_each_warp(block, mask):
    grid = 2
    out = np.full(grid * block, 0xCDCDCDCD, np.uint32)
    members = [lane for lane in range(32) if mask >> lane & 1]
    launch(ELECT_EACH_LANE, "elect_each", (grid, 1, 1), (block, 1, 1), out, mask)
    lanes = np.arange(grid * block) % block % 32
    leader = members[0]
    want = np.where(lanes == leader, (1 << 8) | leader, leader).astype(np.uint32)
    # lanes outside the member mask: elect.sync's result is undefined for them on a GPU
    inside = np.isin(lanes, members)
    assert np.array_equal(out[inside], want[inside])
