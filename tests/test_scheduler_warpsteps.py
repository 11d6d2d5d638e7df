"""A warp's volatile accesses in step in the rounds (compiler/ops/warpsteps.py): the
warp-synchronous idiom (a tail summed through volatile shared memory without barriers) gives a
GPU's lockstep answer where the rounds run a kernel, which they do for its first launches while
its block program compiles and for every kernel no block program takes. Block programs are
switched off here (ANYCUDA_BLOCK_PROGRAMS=0), so that the rounds run every launch."""
from __future__ import annotations

import numpy as np
import pytest

from anycuda.compiler.analysis.suspensions import is_warp_step
from anycuda.compiler.ops import warpsteps
from anycuda.ptx import ir as pir
from anycuda.ptx.parser import parse

SOURCE = r"""
// The classic tail, in a function kept out of line: its pointer is generic.
__device__ __noinline__ void warp_tail(volatile float* s, unsigned t) {
    s[t] += s[t + 32]; s[t] += s[t + 16]; s[t] += s[t + 8];
    s[t] += s[t + 4];  s[t] += s[t + 2];  s[t] += s[t + 1];
}

extern "C" __global__ void tail_sum(const float* in, float* out, int n) {
    __shared__ float s[256];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k >= 64; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t < 32) warp_tail(s, t);
    if (t == 0) out[blockIdx.x] = s[0];
}

// Each warp's inclusive scan through volatile shared memory, no barrier: the lanes below each
// offset sit out (the scan sample's warp scan).
extern "C" __global__ void warp_scan(const unsigned* in, unsigned* out) {
    __shared__ unsigned buf[1024];
    volatile unsigned* v = buf;
    unsigned t = threadIdx.x, lane = t & 31, i = blockIdx.x * blockDim.x + t;
    v[t] = in[i];
    for (unsigned offset = 1; offset < 32; offset <<= 1)
        if (lane >= offset) v[t] += v[t - offset];
    out[i] = v[t];
}

// Two parts of a warp on two paths at once (lanes 0-23 and 24-31), each moving its part's
// words one place up in step: `v[k + 1] = v[k]` reads every old word before any lane writes (a
// thread at a time, each lane would read what the lane below it had just written). Threads
// past the first 64 leave.
extern "C" __global__ void parts_shift(const int* in, int* out) {
    __shared__ int buf[2 * 34];
    volatile int* v = buf;
    unsigned t = threadIdx.x, lane = t & 31, w = t >> 5;
    if (t >= 64) return;
    bool low = lane < 24;
    unsigned base = low ? 0 : 25, k = low ? lane : lane - 24;
    volatile int* mine = v + 34 * w + base;
    int* o = out + 34 * (blockIdx.x * 2 + w) + base;
    mine[k] = in[blockIdx.x * 64 + t];
    if (low) {
        mine[k + 1] = mine[k];
    } else {
        mine[k + 1] = mine[k] + 1000;
    }
    o[k + 1] = mine[k + 1];
    if (k == 0) o[0] = mine[0];
}
"""


@pytest.fixture
def rounds(monkeypatch):
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")


@pytest.mark.parametrize("threads", [256, 128, 64])
def test_a_warp_synchronous_tail_sums_as_a_gpu_does(rounds, compile_cuda, rng, poison, threads):
    """The tree reduction with a volatile tail, the tail in a function of its own (a generic
    pointer): each block's sum against numpy's."""
    import anycuda as ac
    mod = compile_cuda(SOURCE, name="warpsteps.cu")
    blocks = 23
    n = blocks * threads - 5
    x = rng.standard_normal(n).astype(np.float32)
    out = poison(blocks, np.float32)
    mod.get_function("tail_sum")((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)))
    padded = np.concatenate([x, np.zeros(blocks * threads - n, np.float32)]).astype(np.float64)
    np.testing.assert_allclose(out.get(), padded.reshape(blocks, threads).sum(axis=1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("threads", [256, 96, 48])
def test_a_warp_scan_without_barriers(rounds, compile_cuda, rng, poison, threads):
    """Each warp's inclusive scan, lanes sitting out below each offset; 96 and 48 threads
    leave the last warp partial (the general rounds, not the uniform ones)."""
    import anycuda as ac
    mod = compile_cuda(SOURCE, name="warpsteps.cu")
    blocks = 5
    u = rng.integers(0, 1000, blocks * threads, dtype=np.uint32)
    got = poison(blocks * threads, np.uint32)
    mod.get_function("warp_scan")((blocks,), (threads,), (ac.asarray(u), got))
    want = np.concatenate([np.cumsum(u[b * threads:(b + 1) * threads][w:w + 32])
                           for b in range(blocks) for w in range(0, threads, 32)]).astype(np.uint32)
    np.testing.assert_array_equal(got.get(), want)


@pytest.mark.parametrize("threads", [64, 80])
def test_two_parts_of_a_warp_on_two_paths(rounds, compile_cuda, rng, poison, threads):
    """The lanes of each path go in step with each other: each part's words one place up
    (80 threads: a partial warp that leaves at once, the general rounds)."""
    import anycuda as ac
    mod = compile_cuda(SOURCE, name="warpsteps.cu")
    blocks = 3
    x = rng.integers(-500, 500, blocks * 64).astype(np.int32)
    got = poison(blocks * 2 * 34, np.int32)
    mod.get_function("parts_shift")((blocks,), (threads,), (ac.asarray(x), got))
    want = np.empty((blocks * 2, 34), np.int32)
    warps = x.reshape(-1, 32)
    want[:, 0], want[:, 1:25] = warps[:, 0], warps[:, :24]
    want[:, 25], want[:, 26:34] = warps[:, 24], warps[:, 24:] + 1000
    np.testing.assert_array_equal(got.get().reshape(-1, 34), want)


STEPS = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p)
{
  .reg .b32 %r<9>; .reg .b64 %rd<3>; .reg .pred %p<2>;
  .shared .align 4 .b8 s[256];
  ld.param.u64 %rd1, [p];
  ld.volatile.shared.u32 %r1, [s];
  ld.volatile.shared.u32 %r2, [s+4];
  st.volatile.shared.u32 [s], %r2;
  ld.volatile.shared.u32 %r3, [s+8];
  st.volatile.u32 [%rd1], %r3;
  bar.sync 0;
  st.volatile.shared.u32 [s], %r3;
  ld.volatile.global.u32 %r4, [%rd1];
  st.volatile.global.u32 [%rd1], %r4;
$L1:
  ld.volatile.shared.u32 %r5, [s+12];
  ld.shared.u32 %r6, [s+16];
  st.shared.u32 [s+16], %r6;
  ret;
}
"""


def test_where_the_steps_go():
    """A step before a store after any access, before a load after a store, none between two
    loads, none after a barrier, none for volatile global memory or plain accesses, one after a
    label (reached from anywhere)."""
    body = parse(STEPS, "steps.ptx").functions[0].body
    placed = warpsteps.with_steps(body)
    stepped = [body.index(placed[i + 1]) for i, st in enumerate(placed)
               if isinstance(st, pir.Instruction) and is_warp_step(st)]
    accesses = [st for st in body if isinstance(st, pir.Instruction) and st.opcode in ("ld", "st")]
    assert [accesses.index(body[i]) for i in stepped] == [3, 4, 5, 9]
    assert len(placed) == len(body) + 4
