"""Warp-synchronous forms in block programs, as real programs write them (NVIDIA's scan,
reduction and threadFenceReduction samples): `volatile` shared memory, __syncwarp, the
warp's votes and reductions (redux.sync), and 64-bit values moved as two halves. A kernel
with one of them kept the scalar rounds (the scan sample's scan kernel 10.8 ms a launch, 2.7 as
a block program). Each kernel runs as a block program and gives numpy's answer on fresh
inputs with poisoned outputs."""
from __future__ import annotations

import numpy as np
import pytest

from anycuda.compiler import pipeline
from anycuda.compiler.vector import blockprograms
from conftest import ran_as_block_program

VOLATILE = r"""
// The classic reduction whose last warp sums without barriers through a volatile pointer.
__device__ void warp_tail(volatile float* s, unsigned t) {
    s[t] += s[t + 32]; s[t] += s[t + 16]; s[t] += s[t + 8];
    s[t] += s[t + 4];  s[t] += s[t + 2];  s[t] += s[t + 1];
}
extern "C" __global__ void volatile_sum(const float* in, float* out, int n) {
    __shared__ float s[256];
    unsigned t = threadIdx.x, i = blockIdx.x * 256 + t;
    s[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned k = 128; k > 32; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t < 32) warp_tail(s, t);
    if (t == 0) out[blockIdx.x] = s[0];
}

// An inclusive scan of each block's elements through a volatile buffer whose first half is
// zeros, `size` (a power of two, at most the block) given at run time: the scan sample's form.
extern "C" __global__ void volatile_scan(const unsigned* in, unsigned* out, unsigned size) {
    __shared__ unsigned buf[2 * 256];
    volatile unsigned* v = buf;
    unsigned t = threadIdx.x, pos = 2 * t - (t & (size - 1));
    unsigned x = in[blockIdx.x * blockDim.x + t];
    v[pos] = 0;
    pos += size;
    v[pos] = x;
    for (unsigned offset = 1; offset < size; offset <<= 1) {
        __syncthreads();
        unsigned sum = v[pos] + v[pos - offset];
        __syncthreads();
        v[pos] = sum;
    }
    out[blockIdx.x * blockDim.x + t] = v[pos];
}
"""

VOLATILE_GLOBAL = """.version 8.0
.target sm_80
.address_size 64
.visible .entry volatile_global(.param .u64 p)
{
  .reg .b32 %r<3>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  bar.sync 0;
  ld.volatile.global.u32 %r1, [%rd1];
  st.global.u32 [%rd1+4], %r1;
  ret;
}
"""


def test_volatile_shared_memory(compile_cuda, rng, poison):
    """Volatile loads and stores of shared memory take a block program (the warp's lanes in
    step, warps one after another: one order of the block's threads), the warp-synchronous
    tail and the scan's loop around barriers included; sums and scans against numpy."""
    import anycuda as ac
    mod = compile_cuda(VOLATILE, name="volatile.cu")
    n = 256 * 37 + 11
    x = rng.standard_normal(n).astype(np.float32)
    out = poison(37 + 1, np.float32)
    mod.get_function("volatile_sum")((38,), (256,), (ac.asarray(x), out, np.int32(n)))
    want = np.add.reduceat(np.concatenate([x, np.zeros(38 * 256 - n, np.float32)]).astype(np.float64),
                           np.arange(0, 38 * 256, 256))
    np.testing.assert_allclose(out.get(), want, rtol=1e-5, atol=1e-4)
    assert ran_as_block_program(mod.get_function("volatile_sum"), 256)
    blocks = 9
    u = rng.integers(0, 1000, blocks * 256, dtype=np.uint32)
    for size in (4, 64, 256):
        got = poison(blocks * 256, np.uint32)
        mod.get_function("volatile_scan")((blocks,), (256,), (ac.asarray(u), got, np.uint32(size)))
        want = np.cumsum(u.reshape(-1, size).astype(np.uint64), axis=1).astype(np.uint32).ravel()
        np.testing.assert_array_equal(got.get(), want)
    assert ran_as_block_program(mod.get_function("volatile_scan"), 256)


def test_volatile_global_memory_is_not_taken():
    """A volatile access of global memory, which the host or another block may write at any
    time, keeps the rounds."""
    with pytest.raises(blockprograms.NotVectorisable, match="volatile"):
        pipeline.block_program_ir(VOLATILE_GLOBAL, "vg.ptx", "volatile_global", 64)
