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


def test_volatile_global_memory_is_taken():
    """A volatile access of global memory outside a spin is made where the program says, once:
    a block program takes it (ops/spinwaits.py leaves a spin on such a word to the rounds)."""
    assert pipeline.block_program_ir(VOLATILE_GLOBAL, "vg.ptx", "volatile_global", 64)     # (refused before)
    spin = VOLATILE_GLOBAL.replace("  ld.volatile.global.u32 %r1, [%rd1];\n",
                                   "SPIN:\n  ld.volatile.global.u32 %r1, [%rd1];\n  setp.eq.u32 %p1, %r1, 0;\n"
                                   "  @%p1 bra SPIN;\n").replace(".reg .b32 %r<3>;", ".reg .b32 %r<3>; .reg .pred %p<2>;")
    with pytest.raises(blockprograms.NotVectorisable, match="spins"):
        pipeline.block_program_ir(spin, "spin.ptx", "volatile_global", 64)


COLLECTIVES = r"""
// A warp's votes and reductions, __syncwarp and __activemask, each lane's results in a row of
// `out`; a block barrier makes it a block program.
extern "C" __global__ void collectives(const int* in, unsigned* out) {
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t, *o = out + 12 * i, eighth = 0xFFu << (t & 24);
    int v = in[i];
    __syncthreads();
    o[0] = __ballot_sync(0xffffffffu, v > 0);
    o[1] = __all_sync(0xffffffffu, v > -90);
    o[2] = __any_sync(0xffffffffu, v > 95);
    o[3] = __uni_sync(0xffffffffu, v > -100);
    o[4] = __reduce_add_sync(0xffffffffu, (unsigned)v);
    o[5] = (unsigned)__reduce_min_sync(0xffffffffu, v);
    o[6] = __reduce_max_sync(0xffffffffu, (unsigned)v);
    o[7] = __reduce_xor_sync(0xffffffffu, (unsigned)v) | __reduce_and_sync(0xffffffffu, (unsigned)v & 0xF0u);
    __syncwarp();
    o[8] = (t & 31) < 12 ? __reduce_add_sync(0x00000fffu, (unsigned)v) : 7u;
    o[9] = (t & 31) < 20 ? __activemask() : 0u;
    o[10] = __reduce_add_sync(eighth, (unsigned)v);       // each eight lanes a mask of their own
    o[11] = __ballot_sync(eighth, v > 0) | __all_sync(eighth, v > 0);
}

// A warp's sum of doubles by shuffles (a double moves as two 32-bit halves), the member mask a
// ballot's, known only when it runs.
extern "C" __global__ void double_warp_sum(const double* in, double* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    double v = in[i];
    unsigned members = __ballot_sync(0xffffffffu, v == v);
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(members, v, offset);
    __syncthreads();
    if (threadIdx.x % 32 == 0) out[i / 32] = v;
}

// Bit fields out of and into each lane's word, positions and lengths from the lanes' data.
extern "C" __global__ void bit_fields(const unsigned* in, unsigned* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, x = in[i], p = x & 31, n = (x >> 5) & 15, u, f;
    int s;
    __syncthreads();
    asm("bfe.u32 %0, %1, %2, %3;" : "=r"(u) : "r"(x), "r"(p), "r"(n));
    asm("bfe.s32 %0, %1, %2, %3;" : "=r"(s) : "r"(x), "r"(p), "r"(n));
    asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(f) : "r"(~x), "r"(x), "r"(p), "r"(n));
    out[3 * i] = u; out[3 * i + 1] = (unsigned)s; out[3 * i + 2] = f;
}
"""


def _collectives_reference(v):
    """What `collectives` writes, from numpy: rows of 12 per thread."""
    w = v.reshape(-1, 32).astype(np.int64)
    u = w & 0xFFFFFFFF
    bits = lambda p: (p.astype(np.int64) << np.arange(32)).sum(axis=1)    # noqa: E731
    first12 = u[:, :12]
    per_warp = np.stack([
        bits(w > 0), (w > -90).all(axis=1), (w > 95).any(axis=1),
        (w > -100).all(axis=1) | ~(w > -100).any(axis=1),
        u.sum(axis=1) & 0xFFFFFFFF, w.min(axis=1) & 0xFFFFFFFF, u.max(axis=1),
        np.bitwise_xor.reduce(u, axis=1) | np.bitwise_and.reduce(u & 0xF0, axis=1),
        first12.sum(axis=1) & 0xFFFFFFFF, np.full(len(w), 0xFFFFF)], axis=1).astype(np.uint32)
    rows = np.repeat(per_warp, 32, axis=0).reshape(len(w), 32, 10)
    rows[:, 12:, 8] = 7
    rows[:, 20:, 9] = 0
    eights = w.reshape(len(w), 4, 8)
    sums = np.repeat((eights & 0xFFFFFFFF).sum(axis=2) & 0xFFFFFFFF, 8, axis=1)
    positive = eights > 0
    ballots = (positive.astype(np.int64) << np.arange(32).reshape(4, 8)).sum(axis=2)
    own = np.repeat(ballots | positive.all(axis=2), 8, axis=1)
    rows = np.concatenate([rows, np.stack([sums, own], axis=2).astype(np.uint32)], axis=2)
    return rows.reshape(-1, 12)


def test_votes_reductions_and_syncwarp(compile_cuda, rng, poison):
    """vote.sync (ballot, all, any, uni), redux.sync (add, min, max, xor, and), a partial
    member mask, masks that differ by lane (each eight lanes their own), __syncwarp and
    __activemask in a block program, each lane's results against numpy's of its warp."""
    import anycuda as ac
    mod = compile_cuda(COLLECTIVES, name="collectives.cu")
    blocks, threads = 5, 128
    for trial in range(2):
        v = rng.integers(-99, 100, blocks * threads).astype(np.int32)
        if trial:
            v[:32] = 50          # a warp whose votes are all alike
        out = poison(blocks * threads * 12, np.uint32)
        mod.get_function("collectives")((blocks,), (threads,), (ac.asarray(v), out))
        np.testing.assert_array_equal(out.get().reshape(-1, 12), _collectives_reference(v))
    assert ran_as_block_program(mod.get_function("collectives"), threads)


def test_doubles_through_shuffles_with_a_mask_known_at_run_time(compile_cuda, rng, poison):
    """A double taken apart into halves for two shuffles and put together again
    (`mov.b64 {lo, hi}`), under a member mask from a ballot: warps' sums against numpy."""
    import anycuda as ac
    mod = compile_cuda(COLLECTIVES, name="collectives.cu")
    x = rng.standard_normal(4 * 256)
    out = poison(4 * 8, np.float64)
    mod.get_function("double_warp_sum")((4,), (256,), (ac.asarray(x), out))
    np.testing.assert_allclose(out.get(), x.reshape(-1, 32).sum(axis=1), rtol=1e-12, atol=1e-12)
    assert ran_as_block_program(mod.get_function("double_warp_sum"), 256)


def test_bit_fields(compile_cuda, rng, poison):
    """bfe (unsigned and signed) and bfi with positions and lengths that differ by lane, in
    a block program, against the PTX ISA's definitions computed in numpy."""
    import anycuda as ac
    mod = compile_cuda(COLLECTIVES, name="collectives.cu")
    x = rng.integers(0, 1 << 32, 2 * 128, dtype=np.uint64)
    out = poison(3 * x.size, np.uint32)
    mod.get_function("bit_fields")((2,), (128,), (ac.asarray(x.astype(np.uint32)), out))
    p, n = x & 31, (x >> 5) & 15
    ones = (np.uint64(1) << n) - np.uint64(1)
    field = (x >> p) & ones
    # signed: the value sign-extended, so a field past bit 31 takes the sign there too
    extended = x.astype(np.uint32).astype(np.int32).astype(np.int64).astype(np.uint64)
    top = np.minimum(p + n - 1, 31)
    sign = ((x >> top) & 1).astype(bool) & (n > 0)
    signed = np.where(sign, ((extended >> p) & ones) | (~ones & np.uint64(0xFFFFFFFF)), field)
    inserted = (x & ~(ones << p)) | ((~x << p) & (ones << p))
    want = np.stack([field, signed, inserted & np.uint64(0xFFFFFFFF)], axis=1).astype(np.uint32)
    np.testing.assert_array_equal(out.get().reshape(-1, 3), want)
    assert ran_as_block_program(mod.get_function("bit_fields"), 128)


def test_a_tile_reduce_beside_a_tile_shuffle(rng):
    """Cooperative groups' tiles of 4 (shuffles under each tile's own mask, known only at run
    time), their two results stored side by side: one interleaved store of a float and a
    shuffle's bits, which a block program's store group joined without making them one type
    (the program failed and the kernel ran in the rounds)."""
    import anycuda as ac
    from conformance import load_cuda, poison
    n = 64
    v = rng.standard_normal(n).astype(np.float32)
    out = poison((n, 2), np.float32)
    kernel = load_cuda("warp").get_function("tiles4")
    kernel((2,), (32,), (ac.asarray(v), out))
    tiles = v.reshape(-1, 4)
    np.testing.assert_array_equal(out.get()[:, 0], tiles.min(1).repeat(4))
    np.testing.assert_array_equal(out.get()[:, 1], tiles[:, 3].repeat(4))
    assert ran_as_block_program(kernel, 32)
