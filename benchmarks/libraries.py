"""anycuda's CUDA libraries against the CPU library a hand-ported program would call, through
the functions the C libraries call after marshalling, in the same run, medians of paired
rounds: cuBLAS products against numpy's `matmul` of the same size and type, the 16-bit float
conversions of the f16/bf16 products against the numpy casts they replace, cuFFT transforms
against numpy.fft and scipy.fft (all threads) of the same data (target: within 1.5x).

Targets (issue 34): within 10% of numpy at n >= 512 for S/D/f16/bf16 GEMM, batched 64x64x64 x
1,000 products. f16 is compared with numpy's f16 product (same type, as the target says) and
with its f32 product (what BLAS gives); bf16, which numpy lacks, with the f32 product.

    python benchmarks/libraries.py [--quick]
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time

import numpy as np

import anycuda as ac
from anycuda.libraries.cublas import functions

COMPUTE_32F, R_16F, R_32F, R_16BF = 68, 2, 0, 14


def _device(values: np.ndarray, keep: list) -> int:
    mem = ac.Memory(max(values.nbytes, 1))
    ctypes.memmove(mem.ptr, values.ctypes.data, values.nbytes)
    keep.append(mem)
    return mem.ptr


def seconds_per_call(fn, min_run: float) -> float:
    """Seconds per call of `fn`, called back to back for at least `min_run` seconds (also
    tensorcores.py's measure)."""
    runs, start = 0, time.perf_counter()
    while True:
        fn()
        runs += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_run:
            return elapsed / runs


def _finished(fn):
    """`fn` and the wait for what it queued: library calls are asynchronous, as on a GPU, so a
    call alone would time its queueing."""
    def call():
        fn()
        ac.synchronize()
    return call


def _paired(ours, theirs, repeats: int, min_run: float) -> dict:
    ours = _finished(ours)
    a, b = [], []
    for _ in range(repeats):
        ours()
        a.append(seconds_per_call(ours, min_run))
        theirs()
        b.append(seconds_per_call(theirs, min_run))
    ratio = statistics.median(x / y for x, y in zip(a, b))
    return {"anycuda_ms": statistics.median(a) * 1e3, "numpy_ms": statistics.median(b) * 1e3, "ratio": ratio}


def _gemm_cases(n: int, rng):
    table = functions.table()
    handle = np.zeros(1, np.uint64)
    table["cublasCreate_v2"][1](handle.ctypes.data)
    h = int(handle[0])
    keep = []
    one32, zero32 = np.array([1], np.float32), np.array([0], np.float32)
    one64, zero64 = np.array([1], np.float64), np.array([0], np.float64)
    cases = {}
    for name, dtype, call in (("sgemm", np.float32, "cublasSgemm_v2"), ("dgemm", np.float64, "cublasDgemm_v2")):
        a, b = rng.standard_normal((n, n)).astype(dtype), rng.standard_normal((n, n)).astype(dtype)
        dA, dB, dC = _device(a, keep), _device(b, keep), _device(np.zeros((n, n), dtype), keep)
        one, zero = (one32, zero32) if dtype == np.float32 else (one64, zero64)
        fn = table[call][1]
        cases[f"{name} {n}"] = (lambda fn=fn, dA=dA, dB=dB, dC=dC, one=one, zero=zero:
                                fn(h, 0, 0, n, n, n, one.ctypes.data, dA, n, dB, n, zero.ctypes.data, dC, n),
                                lambda a=a, b=b: np.matmul(a, b))
    gemm_ex = table["cublasGemmEx"][1]
    for name, code, store in (("f16 gemm", R_16F, np.float16), ("bf16 gemm", R_16BF, np.uint16)):
        a32, b32 = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
        a = a32.astype(np.float16) if store == np.float16 else (a32.view(np.uint32) >> 16).astype(np.uint16)
        b = b32.astype(np.float16) if store == np.float16 else (b32.view(np.uint32) >> 16).astype(np.uint16)
        dA, dB, dC = _device(a, keep), _device(b, keep), _device(np.zeros((n, n), store), keep)
        ours = (lambda dA=dA, dB=dB, dC=dC, code=code:
                gemm_ex(h, 0, 0, n, n, n, one32.ctypes.data, dA, code, n, dB, code, n,
                        zero32.ctypes.data, dC, code, n, COMPUTE_32F, -1))
        cases[f"{name} {n} (numpy f32)"] = (ours, lambda a=a32, b=b32: np.matmul(a, b))
        if store == np.float16:
            cases[f"{name} {n} (numpy f16)"] = (ours, lambda a=a, b=b: np.matmul(a, b))
    return cases, keep


def _batched_case(count: int, size: int, rng):
    table = functions.table()
    handle = np.zeros(1, np.uint64)
    table["cublasCreate_v2"][1](handle.ctypes.data)
    h = int(handle[0])
    keep = []
    a = rng.standard_normal((count, size, size)).astype(np.float32)
    b = rng.standard_normal((count, size, size)).astype(np.float32)
    dA, dB, dC = _device(a, keep), _device(b, keep), _device(np.zeros_like(a), keep)
    one, zero = np.array([1], np.float32), np.array([0], np.float32)
    fn = table["cublasSgemmStridedBatched"][1]
    stride = size * size
    return (lambda: fn(h, 0, 0, size, size, size, one.ctypes.data, dA, size, stride, dB, size, stride,
                       zero.ctypes.data, dC, size, stride, count),
            lambda: np.matmul(a, b)), keep


def _fft_cases(quick: bool, rng):
    """cufftExec* through anycuda's cuFFT against numpy.fft and scipy.fft (one thread and all)."""
    import scipy.fft
    from anycuda.libraries.cufft import functions as fft_functions
    from anycuda.runtime.device import worker_count
    table = fft_functions.table()
    keep, cases = [], {}
    n1 = 1 << (16 if quick else 20)
    n2 = 256 if quick else 1024
    for name, shape, kind in (("C2C 1-D", (n1,), 0x29), ("C2C 2-D", (n2, n2), 0x29), ("R2C 2-D", (n2, n2), 0x2A)):
        real = kind == 0x2A
        x = rng.standard_normal(shape).astype(np.float32) if real else \
            (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        out = np.zeros(1, np.int32)
        sizes = np.array(shape, np.int32)
        table["cufftPlanMany"][1](out.ctypes.data, len(shape), sizes.ctypes.data, 0, 1, 0, 0, 1, 0, kind, 1)
        src = _device(x, keep)
        dst = _device(np.zeros(x.size + 2 * shape[-1] + 2, np.complex64), keep)
        execute = table["cufftExecR2C" if real else "cufftExecC2C"][1]
        args = (int(out[0]), src, dst) if real else (int(out[0]), src, dst, -1)
        ours = lambda execute=execute, args=args: execute(*args)
        numpy_fn = (lambda x=x: np.fft.rfftn(x)) if real else (lambda x=x: np.fft.fftn(x))
        scipy_fn = (lambda x=x: scipy.fft.rfftn(x, workers=worker_count())) if real else \
            (lambda x=x: scipy.fft.fftn(x, workers=worker_count()))
        cases[f"{name} {'x'.join(map(str, shape))} (numpy.fft)"] = (ours, numpy_fn)
        cases[f"{name} {'x'.join(map(str, shape))} (scipy.fft)"] = (ours, scipy_fn)
    return cases, keep


def _conversion_cases(quick: bool, rng):
    """The 16-bit float conversions of the f16/bf16 products (libraries/halves.py) against the
    numpy casts they replace, on one n x n operand: widening to float32, narrowing from it."""
    from anycuda.libraries import halves
    n = 256 if quick else 1024
    x = rng.standard_normal((n, n)).astype(np.float32)
    f16, bf16 = x.astype(np.float16), (x.view(np.uint32) >> 16).astype(np.uint16)
    out16, outb = np.empty_like(f16), np.empty_like(bf16)

    def numpy_narrow_bf16():
        bits = x.view(np.uint32)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        outb[...] = np.where(np.isnan(x), np.uint16(0x7FC0), rounded)
    return {f"widen f16 {n}x{n} (astype)": (lambda: halves.widen(f16, False), lambda: f16.astype(np.float32)),
            f"narrow f16 {n}x{n} (astype)": (lambda: halves.narrow(out16, x, False),
                                             lambda: np.copyto(out16, x, casting="unsafe")),
            f"widen bf16 {n}x{n} (shift)": (lambda: halves.widen(bf16, True),
                                            lambda: (bf16.astype(np.uint32) << 16).view(np.float32)),
            f"narrow bf16 {n}x{n} (bit ops)": (lambda: halves.narrow(outb, x, True), numpy_narrow_bf16)}, []


def _random_cases(quick: bool):
    """curandGenerateUniform on Philox4x32-10 against numpy's Philox generating float32."""
    from anycuda.libraries.curand import functions as rand_functions
    table = rand_functions.table()
    keep = []
    n = 1 << (20 if quick else 24)
    out = np.zeros(1, np.uint64)
    table["curandCreateGenerator"][1](out.ctypes.data, 161)
    dst = _device(np.zeros(n, np.float32), keep)
    generate = table["curandGenerateUniform"][1]
    numpy_gen = np.random.Generator(np.random.Philox(1))
    return {f"Philox uniform f32 x {n}": (lambda: generate(int(out[0]), dst, n),
                                            lambda: numpy_gen.random(n, dtype=np.float32))}, keep


def measure(quick: bool = False) -> dict:
    rng = np.random.default_rng(0)
    repeats, min_run = (3, 0.0) if quick else (7, 0.2)
    out = {}
    for n in ((256,) if quick else (512, 1024)):
        cases, keep = _gemm_cases(n, rng)
        for name, (ours, theirs) in cases.items():
            out[name] = _paired(ours, theirs, repeats, min_run)
    (ours, theirs), keep = _batched_case(100 if quick else 1000, 64, rng)
    out["batched 64x64x64 sgemm"] = _paired(ours, theirs, repeats, min_run)
    for cases, keep in (_conversion_cases(quick, rng), _fft_cases(quick, rng), _random_cases(quick)):
        for name, (ours, theirs) in cases.items():
            out[name] = _paired(ours, theirs, repeats, min_run)
    return out


def print_results(results: dict) -> None:
    print("\nanycuda's cuBLAS and cuFFT against numpy (and scipy.fft) on the same data")
    print(f"{'call':36s} {'anycuda ms':>11s} {'theirs ms':>10s} {'ratio':>7s}")
    for name, r in results.items():
        print(f"{name:36s} {r['anycuda_ms']:11.2f} {r['numpy_ms']:10.2f} {r['ratio']:7.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    print_results(measure(ap.parse_args().quick))
    sys.exit(0)
