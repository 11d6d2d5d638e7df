"""Stores under a mask where the CPU's masked stores are slow (AMD's AVX ones before Zen 4; NEON
has none; irutil.masked_stores_slow): to shared memory (irutil.private_store), a span that lies
in the block's shared memory is loaded, blended with the lanes' values and stored whole, which
only the worker running the block may do; a span reaching past the shared memory keeps the
masked store. A fixed mask (every other element of an interleaved store) is a plain store per
lane, in any memory. ANYCUDA_MASKED_STORES=blend / masked chooses either way, so both run here
whatever the CPU.

Block programs make them so (the rounds' loops over threads are vectorised by LLVM, which makes
its own masked stores). Each kernel runs in block programs and in the rounds
(ANYCUDA_BLOCK_PROGRAMS=0), against numpy on fresh random inputs with poisoned outputs: lanes
off the mask must keep what other warps wrote (before a barrier, and in the same stretch), and
a span past the end of the shared memory must be written as well as one inside it.
"""
from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from llvmlite import ir

from anycuda.compiler import irutil, pipeline
from anycuda.compiler.types import I1, I64
from conftest import ran_as_block_program

SOURCE = r"""
// every third thread rewrites its element of a tile the whole block wrote; the others' elements
// are read back by other warps after the barrier
template <typename T> __device__ void every_third(const T* in, T* out) {
    __shared__ T s[256];
    unsigned int t = threadIdx.x, n = blockDim.x;
    s[t] = in[blockIdx.x * n + t];
    __syncthreads();
    if (t % 3 == 0) s[t] = s[t] * (T)-2;
    __syncthreads();
    out[blockIdx.x * n + t] = s[n - 1 - t];
}
extern "C" __global__ void every_third_f32(const float* in, float* out) { every_third(in, out); }
extern "C" __global__ void every_third_f64(const double* in, double* out) { every_third(in, out); }
extern "C" __global__ void every_third_i32(const int* in, int* out) { every_third(in, out); }

// two warps write alternate elements of one span in one stretch: warp 0 the even ones, warp 1
// (after it) the odd ones, through another register; neither may undo the other's
extern "C" __global__ void two_warps_one_span(const float* in, float* out) {
    __shared__ float s[64];
    unsigned int t = threadIdx.x;
    s[t] = in[blockIdx.x * 64 + t];
    __syncthreads();
    float v = in[blockIdx.x * 64 + (t ^ 1)] + 1000.0f;
    if (t < 32 && t % 2 == 0) s[t] = v;
    if (t >= 32 && t % 2 == 1) s[t - 32] = v;
    __syncthreads();
    out[blockIdx.x * 64 + t] = s[t];
}

// a masked store whose span (32 floats from s + 16) reaches past the 40 floats of shared memory
extern "C" __global__ void past_the_end(const float* in, float* out) {
    __shared__ float s[40];
    unsigned int t = threadIdx.x;
    if (t < 40) s[t] = in[blockIdx.x * 40 + t];
    __syncthreads();
    if (t < 24) s[t + 16] = s[t + 16] * 3.0f + 1.0f;
    __syncthreads();
    if (t < 40) out[blockIdx.x * 40 + t] = s[t];
}

// every other element of global memory from each of two registers (a and b = a + 1): two
// stores of a fixed mask each, the last block cut short
extern "C" __global__ void interleaved_pairs(const int* in, int* out, int n) {
    __shared__ int s[512];
    int t = threadIdx.x, a = blockIdx.x * 2 * blockDim.x + 2 * t, b = a + 1;
    s[2 * t] = a < n ? in[a] : 0;
    s[2 * t + 1] = b < n ? in[b] : 0;
    __syncthreads();
    if (a < n) out[a] = s[2 * t + 1] * 3;
    if (b < n) out[b] = s[2 * t] - 1;
}
"""

MODES = ("blend", "masked")
WAYS = ("block programs", "rounds")


@pytest.fixture(scope="module")
def ptx():
    from anycuda.cudac import compile_to_ptx
    return compile_to_ptx(SOURCE, name="sharedstores.cu")


@pytest.fixture(params=[(m, w) for m in MODES for w in WAYS], ids=lambda p: f"{p[0]}-{p[1].split()[0]}")
def module(request, monkeypatch, fresh_cache, ptx):
    """The kernels compiled afresh with masked stores made one way, run one way."""
    import anycuda as ac
    mode, way = request.param
    monkeypatch.setenv("ANYCUDA_MASKED_STORES", mode)
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "1" if way == "block programs" else "0")
    return ac.RawModule(ptx=ptx, name=f"sharedstores_{mode}.ptx")


@pytest.mark.parametrize("kernel, dtype", [("every_third_f32", np.float32), ("every_third_f64", np.float64),
                                           ("every_third_i32", np.int32)])
def test_lanes_off_the_mask_keep_what_other_warps_wrote(module, rng, poison, kernel, dtype):
    import anycuda as ac
    fn = module.get_function(kernel)
    for threads in (64, 96, 256):
        blocks = 3
        x = (rng.integers(-1000, 1000, blocks * threads) if dtype == np.int32
             else rng.standard_normal(blocks * threads)).astype(dtype)
        out = poison(blocks * threads, dtype)
        fn((blocks,), (threads,), (ac.asarray(x), out))
        s = x.reshape(blocks, threads).copy()
        s[:, ::3] *= -2
        np.testing.assert_array_equal(out.get().reshape(blocks, threads), s[:, ::-1], err_msg=f"threads={threads}")
        assert ran_as_block_program(fn, threads) == _programs_on()


def _programs_on() -> bool:
    return pipeline.block_programs_enabled()


def test_two_warps_writing_one_span_in_one_stretch(module, rng, poison):
    import anycuda as ac
    fn = module.get_function("two_warps_one_span")
    blocks = 4
    x = rng.standard_normal(blocks * 64).astype(np.float32)
    out = poison(blocks * 64, np.float32)
    fn((blocks,), (64,), (ac.asarray(x), out))
    s = x.reshape(blocks, 64).copy()
    swapped = x.reshape(blocks, 64)[:, np.arange(64) ^ 1] + np.float32(1000)
    s[:, 0:32:2] = swapped[:, 0:32:2]
    s[:, 1:32:2] = swapped[:, 33:64:2]
    np.testing.assert_array_equal(out.get().reshape(blocks, 64), s)
    assert ran_as_block_program(fn, 64) == _programs_on()


@pytest.mark.parametrize("threads", [64, 128])
def test_a_span_past_the_end_of_shared_memory(module, rng, poison, threads):
    import anycuda as ac
    fn = module.get_function("past_the_end")
    blocks = 3
    x = rng.standard_normal(blocks * 40).astype(np.float32)
    out = poison(blocks * 40, np.float32)
    fn((blocks,), (threads,), (ac.asarray(x), out))
    s = x.reshape(blocks, 40).copy()
    s[:, 16:40] = s[:, 16:40] * np.float32(3) + np.float32(1)        # (fused or not: one rounding apart)
    np.testing.assert_allclose(out.get().reshape(blocks, 40), s, rtol=1e-6, atol=1e-6)
    assert ran_as_block_program(fn, threads) == _programs_on()


def test_interleaved_stores_of_fixed_masks(module, rng, poison):
    import anycuda as ac
    from conftest import is_poison
    fn = module.get_function("interleaved_pairs")
    threads, blocks = 256, 3
    n = blocks * 2 * threads - 75
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poison(blocks * 2 * threads, np.int32)
    fn((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)))
    got = out.get()
    want = np.empty(n, np.int32)
    pairs = np.concatenate([x, [0]])                  # (an odd n: the last a's partner is 0)
    want[0::2] = pairs[1::2][:len(want[0::2])] * 3
    want[1::2] = x[0::2][:len(want[1::2])] - 1
    np.testing.assert_array_equal(got[:n], want)
    assert is_poison(got[n:]).all()
    assert ran_as_block_program(fn, threads) == _programs_on()


def _block_program_ir(ptx, monkeypatch, mode, kernel) -> str:
    """The IR of `kernel`'s block program for 256 threads, masked stores made `mode`'s way."""
    monkeypatch.setenv("ANYCUDA_MASKED_STORES", mode)
    return pipeline.block_program_ir(ptx, "sharedstores.ptx", kernel, 256)


def test_blended_where_masked_stores_are_slow_masked_otherwise(ptx, monkeypatch):
    """The block program's IR in each mode: blended stores (a volatile load: LLVM's x86 back
    end would make a masked store again of a plain one) with the masked store kept for spans
    outside, in parts of 32 bytes (irutil._chunked_masked_store), or only masked stores."""
    blended, masked = (_block_program_ir(ptx, monkeypatch, mode, "every_third_f32") for mode in MODES)
    assert "load volatile <32 x float>" in blended and "llvm.masked.store.v8f32" in blended
    assert "llvm.masked.store.v32f32" not in blended
    assert "load volatile" not in masked and "llvm.masked.store.v32f32" in masked


def test_fixed_masks_stored_lane_by_lane_where_masked_stores_are_slow(ptx, monkeypatch):
    """out[a] and out[b]'s stores of every other element: plain stores of their lanes, or
    masked stores of 64 elements."""
    blended, masked = (_block_program_ir(ptx, monkeypatch, mode, "interleaved_pairs") for mode in MODES)
    fixed = re.compile(r"call void @\"?llvm\.masked\.store\.v64i32[^\n]*<64 x i1> <")
    assert fixed.search(masked) and not fixed.search(blended)


def test_masked_stores_slow_follows_the_cpu_unless_asked(monkeypatch):
    from llvmlite import binding as llvm
    monkeypatch.delenv("ANYCUDA_MASKED_STORES", raising=False)
    features, name = llvm.get_host_cpu_features(), llvm.get_host_cpu_name()
    amd_avx = features.get("avx", False) and name.startswith(("znver", "bdver", "btver"))
    assert irutil.masked_stores_slow() == (not features.get("avx512f", False)
                                           and (amd_avx or not features.get("avx", False)))
    for asked, slow in (("blend", True), ("masked", False), (" BLEND ", True)):
        monkeypatch.setenv("ANYCUDA_MASKED_STORES", asked)
        assert irutil.masked_stores_slow() is slow


def test_masked_loads_slow_follows_the_cpu_unless_asked(monkeypatch):
    """Masked loads are slow where masked stores are (AMD before AVX-512), unless asked."""
    monkeypatch.delenv("ANYCUDA_MASKED_LOADS", raising=False)
    monkeypatch.delenv("ANYCUDA_MASKED_STORES", raising=False)
    assert irutil.masked_loads_slow() == irutil.masked_stores_slow()
    for asked, slow in (("plain", True), ("masked", False), (" PLAIN ", True)):
        monkeypatch.setenv("ANYCUDA_MASKED_LOADS", asked)
        assert irutil.masked_loads_slow() is slow


def test_span_inside_at_its_bounds():
    """span_inside(address, 16 bytes, lo, hi), compiled and run: a span ending exactly at hi is
    inside; one byte further, or starting below lo (also where the difference wraps), is not."""
    from anycuda.compiler.build import jit
    mod = ir.Module(name="span")
    fn = ir.Function(mod, ir.FunctionType(I1, [I64, I64, I64]), name="inside16")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(irutil.span_inside(b, fn.args[0], 16, fn.args[1], fn.args[2]))
    loaded = jit.LoadedObject(jit.compile_to_object(str(mod), "span"))
    inside = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64)(
        loaded.address("inside16"))
    lo, hi = 0x10000, 0x10040
    cases = {lo: True, hi - 16: True, hi - 15: False, lo - 1: False, hi: False, 0: False,
             (1 << 64) - 8: False, lo + 8: True}
    assert {a: inside(a, lo, hi) for a in cases} == cases
