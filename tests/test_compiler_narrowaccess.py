"""Bytes and 16-bit elements gathered and scattered in block programs (irutil._narrow_gather,
blockmemory._merge_into_words): x86 gathers and scatters nothing narrower than 32 bits, so a
gather of u8/u16 reads the 32-bit words holding the elements and shifts each down, and a
scatter to shared memory where each lane's element lies in a word of its own (lane t's word in
bank t + c, as cub lays out its radix ranking's u16 counters) reads, merges and writes back
those words. Lanes that share a word (neighbouring elements) take the store lane by lane.

Each kernel runs against numpy on fresh random inputs with poisoned outputs, and the tests
check that a block program ran it.
"""
from __future__ import annotations

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler import irutil, pipeline
from anycuda.cudac import compile_to_ptx
from conftest import ran_as_block_program

GATHER = r"""
// elements of bytes and halves picked through loaded indices: a gather each, odd and even
// 16-bit positions alike, and a half read at an odd byte address (across a word or not)
extern "C" __global__ void picked(const int* idx, const unsigned char* b, const unsigned short* h,
                                  const unsigned char* raw, unsigned* out8, unsigned* out16,
                                  unsigned* out_odd, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    __syncthreads();                                    // (a block program)
    if (i >= n) return;
    int j = idx[i];
    out8[i] = b[j];
    out16[i] = h[j];
    // PTX leaves a misaligned access undefined; x86 reads it, and so must the wider read
    out_odd[i] = *(const unsigned short*)(raw + 2 * j + 1);
}
"""

COUNTERS = r"""
// cub's radix ranking in small: each thread's digit counters in words of its own (lane t's
// word in bank t), two u16 counters a word and four u8 ones; each key adds one to a counter
#define T 256
extern "C" __global__ void count_digits(const unsigned* keys, unsigned* halves, unsigned* bytes, int shift) {
    __shared__ unsigned h[8][T];            // digit d: word d & 7, half d >> 3
    __shared__ unsigned q[4][T];            // digit d & 15: word (d >> 2) & 3, byte d & 3
    unsigned short* hc = (unsigned short*)h;
    unsigned char* qc = (unsigned char*)q;
    int t = threadIdx.x;
    for (int w = 0; w < 8; ++w) h[w][t] = 0;
    for (int w = 0; w < 4; ++w) q[w][t] = 0;
    for (int k = 0; k < 8; ++k) {
        unsigned key = keys[(blockIdx.x * T + t) * 8 + k];
        if (key & 0x80000000u) continue;                // some lanes sit some keys out
        unsigned d = (key >> shift) & 15;
        unsigned short* c = hc + ((d & 7) * T + t) * 2 + (d >> 3);
        *c = *c + 1;
        unsigned char* e = qc + (((d >> 2) & 3) * T + t) * 4 + (d & 3);
        *e = *e + 1;
    }
    __syncthreads();
    for (int w = 0; w < 8; ++w) halves[(blockIdx.x * 8 + w) * T + t] = h[w][t];
    for (int w = 0; w < 4; ++w) bytes[(blockIdx.x * 4 + w) * T + t] = q[w][t];
}
"""

PLACED = r"""
// each thread's byte and half to a place of a permutation of the block's: neighbouring
// places share a word, so lanes meet in words (stored lane by lane); a masked store leaves
// the element already there
extern "C" __global__ void placed(const int* place, const unsigned short* v16, const unsigned char* v8,
                                  unsigned short* o16, unsigned char* o8) {
    __shared__ unsigned short s16[256];
    __shared__ unsigned char s8[256];
    int t = threadIdx.x, g = blockIdx.x * 256 + t;
    s16[t] = 0xFFFF;
    s8[t] = 0xEE;
    __syncthreads();
    int j = place[g];
    unsigned short a = v16[g];
    if (a & 1) s16[j] = a;
    s8[j] = v8[g];
    __syncthreads();
    o16[g] = s16[t];
    o8[g] = s8[t];
}
"""


def test_narrow_gathers_read_words(monkeypatch):
    """Where the CPU gathers 32-bit words (AVX2), a gather of bytes or halves is one of words:
    no gather of i8 or i16 is left in the block program."""
    monkeypatch.setattr(irutil, "_host_gathers_fast", lambda: True)
    ir_text = pipeline.block_program_ir(compile_to_ptx(GATHER, name="g.cu"), "g.ptx", "picked", 256)
    assert "llvm.masked.gather.v32i32" in ir_text
    assert "gather.v32i8" not in ir_text and "gather.v32i16" not in ir_text


@pytest.mark.parametrize("n", [256 * 5, 256 * 3 + 77])
def test_narrow_gathers_match_numpy(compile_cuda, rng, poison, n):
    m = 3001                                           # odd: the last half ends the buffer
    b = rng.integers(0, 256, m).astype(np.uint8)
    h = rng.integers(0, 1 << 16, m).astype(np.uint16)
    raw = rng.integers(0, 256, 2 * m + 2).astype(np.uint8)
    idx = rng.integers(0, m, n).astype(np.int32)
    idx[:5] = [m - 1, 0, m - 1, 1, m - 2]
    out8, out16, out_odd = (poison(n, np.uint32) for _ in range(3))
    k = compile_cuda(GATHER, name="g.cu").get_function("picked")
    k(((n + 255) // 256,), (256,), (ac.asarray(idx), ac.asarray(b), ac.asarray(h), ac.asarray(raw),
                                    out8, out16, out_odd, np.int32(n)))
    np.testing.assert_array_equal(out8.get(), b[idx])
    np.testing.assert_array_equal(out16.get(), h[idx])
    odd = raw[2 * idx + 1].astype(np.uint32) | (raw[2 * idx + 2].astype(np.uint32) << 8)
    np.testing.assert_array_equal(out_odd.get(), odd)
    assert ran_as_block_program(k, 256)


@pytest.mark.parametrize("shift", [0, 13])
def test_counters_in_words_of_their_own(compile_cuda, rng, poison, shift):
    """Read-modify-writes of u16 and u8 counters, each thread's in its own words, several
    keys of a thread on one counter: against counts made by numpy."""
    blocks, t = 3, 256
    keys = rng.integers(0, 1 << 32, blocks * t * 8, dtype=np.uint64).astype(np.uint32)
    keys[rng.random(keys.size) < 0.2] &= 0x7FFFFFFF
    keys[: t * 8: 7] = keys[0] & 0x7FFFFFFF              # many keys of one digit
    halves, bytes_ = poison(blocks * 8 * t, np.uint32), poison(blocks * 4 * t, np.uint32)
    k = compile_cuda(COUNTERS, name="c.cu").get_function("count_digits")
    k((blocks,), (t,), (ac.asarray(keys), halves, bytes_, np.int32(shift)))
    per = keys.reshape(blocks, t, 8)
    counted = per < 0x80000000
    digits = (per >> shift) & 15
    counts = np.stack([((digits == d) & counted).sum(axis=2) for d in range(16)], axis=1)  # block, digit, thread
    counts = counts.astype(np.uint32)
    want_h = counts[:, 0:8] | (counts[:, 8:16] << 16)
    c4 = counts.reshape(blocks, 4, 4, t)                  # block, word, byte, thread
    want_q = c4[:, :, 0] | (c4[:, :, 1] << 8) | (c4[:, :, 2] << 16) | (c4[:, :, 3] << 24)
    np.testing.assert_array_equal(halves.get().reshape(blocks, 8, t), want_h)
    np.testing.assert_array_equal(bytes_.get().reshape(blocks, 4, t), want_q)
    assert ran_as_block_program(k, t)


def test_lanes_that_meet_in_words_store_their_own_elements(compile_cuda, rng, poison):
    blocks = 4
    place = np.concatenate([rng.permutation(256) for _ in range(blocks)]).astype(np.int32)
    place[:256] = np.concatenate([np.arange(32) ^ 1, 32 + rng.permutation(224)])   # a warp of neighbours, swapped
    v16 = rng.integers(0, 1 << 16, blocks * 256).astype(np.uint16)
    v8 = rng.integers(0, 256, blocks * 256).astype(np.uint8)
    o16, o8 = poison(blocks * 256, np.uint16), poison(blocks * 256, np.uint8)
    k = compile_cuda(PLACED, name="p.cu").get_function("placed")
    k((blocks,), (256,), (ac.asarray(place), ac.asarray(v16), ac.asarray(v8), o16, o8))
    want16 = np.full((blocks, 256), 0xFFFF, np.uint16)
    want8 = np.full((blocks, 256), 0xEE, np.uint8)
    for blk in range(blocks):
        g = slice(blk * 256, (blk + 1) * 256)
        odd = (v16[g] & 1) == 1
        want16[blk, place[g][odd]] = v16[g][odd]
        want8[blk, place[g]] = v8[g]
    np.testing.assert_array_equal(o16.get(), want16.ravel())
    np.testing.assert_array_equal(o8.get(), want8.ravel())
    assert ran_as_block_program(k, 256)
