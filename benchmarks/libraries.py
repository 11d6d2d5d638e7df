"""anycuda's CUDA libraries against the CPU library a hand-ported program would call: cuBLAS
products (through anycuda's cuBLAS functions, the code the C library calls after marshalling)
against numpy's `matmul` of the same size and type, in the same run, medians of paired rounds.

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


def _timed(fn, min_run: float) -> float:
    fn()
    runs, start = 0, time.perf_counter()
    while True:
        fn()
        runs += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_run:
            return elapsed / runs


def _paired(ours, theirs, repeats: int, min_run: float) -> dict:
    a, b = [], []
    for _ in range(repeats):
        a.append(_timed(ours, min_run))
        b.append(_timed(theirs, min_run))
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
    return out


def print_results(results: dict) -> None:
    print("\ncuBLAS (anycuda's) against numpy's matmul of the same size")
    print(f"{'product':32s} {'anycuda ms':>11s} {'numpy ms':>10s} {'ratio':>7s}")
    for name, r in results.items():
        print(f"{name:32s} {r['anycuda_ms']:11.2f} {r['numpy_ms']:10.2f} {r['ratio']:7.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    print_results(measure(ap.parse_args().quick))
    sys.exit(0)
