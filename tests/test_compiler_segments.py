"""Rows of threads in segments (compiler/analysis/quotients.py, compiler/simt/segments.py): a kernel
without sites that divides a flat index linear in threadIdx.x (`i / C`, `i % C`) runs each row of
its block's threads in runs over which every such quotient is one value. Each thread must still
get its own quotient and remainder, as C's truncating division gives them, wherever a run ends
(inside a block, at its edge, past it), where the dividend is negative or wraps, where the
divisor is negative, and where the runs are too short to be taken."""
from __future__ import annotations

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.analysis import quotients
from anycuda.compiler.lowering.module import ModuleLowering
from anycuda.cudac import compile_to_ptx
from anycuda.ptx.parser import parse
from conftest import ran_as_block_program

SOURCE = r"""
// llm.c's encoder: the token row, the position and the channel from divisions of the flat index
extern "C" __global__ void encoder(float* out, const int* tokens, const float* wte, const float* wpe,
                                   int B, int T, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * T * C) return;
    int bt = i / C, c = i % C, t = bt % T;
    out[i] = wte[tokens[bt] * C + c] + wpe[t * C + c];
}
// a signed dividend k * i + shift: negative for the first threads where shift is, wrapping where
// it is near 2^31, falling where k is
extern "C" __global__ void shifted(int* q, int* r, int n, int k, int shift, int d) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { int a = k * i + shift; q[i] = a / d; r[i] = a % d; }
}
// an unsigned one, wrapping past 2^32 where shift is large
extern "C" __global__ void wrapping(unsigned* q, unsigned* r, unsigned n, unsigned shift, unsigned d) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { unsigned a = i + shift; q[i] = a / d; r[i] = a % d; }
}
// 2-D blocks, each row of threads its own part of the flat index, the divisor by threadIdx.y
extern "C" __global__ void rows2d(int* q, int width, int height, int base) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < width && y < height) q[y * width + x] = (y * width + x) / (base + (int)threadIdx.y) * 1000 + x % 100;
}
// by an immediate: a gather of a value per hundred elements
extern "C" __global__ void by_constant(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i / 100] * (float)(i % 100);
}
// dividends not linear in threadIdx.x: never segmented
extern "C" __global__ void nonlinear(int* q, int n, int d) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) q[i] = (i * i) / d + (i + (int)(threadIdx.x & 31)) / d;
}
"""


@pytest.fixture(scope="module")
def kernels(compile_cuda):
    return compile_cuda(SOURCE, name="segments.cu")


def _lowered():
    return ModuleLowering(parse(compile_to_ptx(SOURCE, name="segments.cu"), "segments.ptx"), "segments.ptx").lower()


def test_which_kernels_run_in_segments():
    """The encoder's `i / C`, the shifted and wrapping dividends and a row's own flat index
    segment their rows; a square or a lane's index does not, nor (yet) a division by an
    immediate, which nvcc writes as a multiplication's high half and shifts."""
    lowered = _lowered()
    text = {fn.name: str(fn) for fn in lowered.mod.functions}
    segmented = {name for k, name in enumerate(lowered.kernels) if "seg.head" in text[f"ptx.k{k}.block"]}
    assert segmented == {"encoder", "shifted", "wrapping", "rows2d"}


def test_what_segments_are_made_of():
    """The encoder has one division to segment by (nvcc writes its `i % C` as i - (i / C) * C;
    `bt % T` divides a quotient, the same along a segment anyway), whose operands the SEGMENT
    case computes from %ctaid.x, %ntid.x, %tid.x and the parameter C alone."""
    ptx = parse(compile_to_ptx(SOURCE, name="segments.cu"), "segments.ptx")
    fn = next(f for f in ptx.functions if f.name == "encoder")
    params = [p.name for p in fn.params]
    found = quotients.segmenting(fn.body, params)
    assert len(found.divisions) == 1 and found.divisions[0].signed
    assert [fn.body[pos].opcode for pos in found.at] == ["div"]
    closure = [fn.body[pos] for pos in found.closure]
    assert {st.opcode for st in closure} <= {"ld", "mov", "mad", "mul", "add"}
    nonlinear = next(f for f in ptx.functions if f.name == "nonlinear")
    assert quotients.segmenting(nonlinear.body, [p.name for p in nonlinear.params]) is None


@pytest.mark.parametrize("C, block", [(768, 256), (40, 256), (7, 128), (1000, 96), (48, 33), (129, 1024)])
def test_encoder_matches_numpy(kernels, rng, poison, C, block):
    """Runs of C threads that start and end inside blocks, at their edges and past them; runs
    shorter than quotients.MIN_RUN (C = 7) divide per thread."""
    B, T, V = 2, int(rng.integers(5, 40)), 50
    tokens = rng.integers(0, V, (B, T), dtype=np.int32)
    wte = rng.random((V, C), dtype=np.float32)
    wpe = rng.random((T, C), dtype=np.float32)
    n = B * T * C
    out = poison(n, np.float32)
    k = kernels.get_function("encoder")
    k((-(-n // block),), (block,), (out, ac.asarray(tokens), ac.asarray(wte), ac.asarray(wpe), np.int32(B),
                                    np.int32(T), np.int32(C)))
    np.testing.assert_array_equal(out.get(), (wte[tokens] + wpe).ravel())
    assert not ran_as_block_program(k, block)       # (the loop over threads ran it)


def _truncated(a, d):
    """C's quotient and remainder of int64 arrays, truncating toward zero."""
    q = np.sign(a) * np.sign(d) * (np.abs(a) // np.abs(d))
    return q, a - q * d


@pytest.mark.parametrize("k, shift, d", [(1, 0, 768), (1, -300, 50), (2, -1001, 64), (3, 5, 100), (-1, 4000, 37),
                                         (1, 2 ** 31 - 1500, 90), (1, 17, -45), (1, -7, 3), (5, 0, 200)])
def test_signed_quotients_match_c(kernels, poison, k, shift, d):
    """A dividend negative for some threads (they divide toward zero), falling (k < 0),
    overflowing 2^31 inside a block, a negative divisor, short runs: each thread's quotient and
    remainder as C computes them, with 32-bit wrapping of the dividend."""
    n, block = 5000, 256
    q, r = poison(n, np.int32), poison(n, np.int32)
    kernels.get_function("shifted")((-(-n // block),), (block,),
                                    (q, r, np.int32(n), np.int32(k), np.int32(shift), np.int32(d)))
    a = (np.int64(k) * np.arange(n) + shift + 2 ** 31) % 2 ** 32 - 2 ** 31
    want_q, want_r = _truncated(a, np.int64(d))
    np.testing.assert_array_equal(q.get(), want_q)
    np.testing.assert_array_equal(r.get(), want_r)


@pytest.mark.parametrize("shift, d", [(0, 768), (2 ** 32 - 2000, 100), (2 ** 31 + 3, 1000), (5, 2 ** 31 + 7)])
def test_unsigned_quotients_match_c(kernels, poison, shift, d):
    """An unsigned dividend that wraps past 2^32 inside a block, and a divisor above 2^31."""
    n, block = 6000, 512
    q, r = poison(n, np.uint32), poison(n, np.uint32)
    kernels.get_function("wrapping")((-(-n // block),), (block,), (q, r, np.uint32(n), np.uint32(shift), np.uint32(d)))
    a = (np.arange(n, dtype=np.uint64) + np.uint64(shift)) % np.uint64(2 ** 32)
    np.testing.assert_array_equal(q.get(), a // np.uint64(d))
    np.testing.assert_array_equal(r.get(), a % np.uint64(d))


@pytest.mark.parametrize("block", [(32, 4), (16, 16), (33, 3), (128, 1)])
def test_rows_of_2d_blocks_segment_apart(kernels, rng, poison, block):
    """Each row of a 2-D block has its own dividend and (by threadIdx.y) divisor."""
    width, height, base = int(rng.integers(100, 300)), int(rng.integers(20, 60)), int(rng.integers(40, 90))
    q = poison(width * height, np.int32)
    grid = (-(-width // block[0]), -(-height // block[1]))
    kernels.get_function("rows2d")(grid, block, (q, np.int32(width), np.int32(height), np.int32(base)))
    y, x = np.mgrid[0:height, 0:width]
    want = (y * width + x) // (base + y % block[1]) * 1000 + x % 100
    np.testing.assert_array_equal(q.get().reshape(height, width), want)


def test_division_by_an_immediate(kernels, rng, poison):
    n = 10_000
    x = rng.random(n // 100 + 1, dtype=np.float32)
    out = poison(n, np.float32)
    kernels.get_function("by_constant")((-(-n // 256),), (256,), (out, ac.asarray(x), np.int32(n)))
    i = np.arange(n)
    np.testing.assert_array_equal(out.get(), x[i // 100] * (i % 100).astype(np.float32))


def test_nonlinear_dividends_divide_per_thread(kernels, poison):
    n, d = 3000, 77
    q = poison(n, np.int32)
    kernels.get_function("nonlinear")((-(-n // 256),), (256,), (q, np.int32(n), np.int32(d)))
    i = np.arange(n, dtype=np.int64)
    a = (i * i + 2 ** 31) % 2 ** 32 - 2 ** 31
    want = _truncated(a, np.int64(d))[0] + (i + i % 256 % 32) // d
    np.testing.assert_array_equal(q.get(), want)
