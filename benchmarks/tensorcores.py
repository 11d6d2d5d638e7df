"""Warp matrix instructions through anycuda against the GEMMs a port would use instead, on the
same n x n problem (C = A B, row-major), in one run, medians of paired rounds:

- WMMA: kernels/cuda/tensorcores.cu `wmma_gemm`, nvcuda::wmma 16x16x16, f16 in, f32 accumulated;
- mma.sync: `mma_gemm`, the same tiling with inline PTX ldmatrix + mma.sync m16n8k16;
- tiled SGEMM: the suite's shared-memory kernel (kernels/cuda/sgemm.cu), f32 in and out;
- cublasGemmEx with f16 A and B, f32 C and compute (anycuda's cuBLAS, the function its C entry
  point calls);
- numpy's f32 matmul (BLAS).

Every output is checked against numpy (the f16 inputs' exact values multiplied in f64) before
it is timed. Target (issue "warp matrix instructions"): the mma.sync GEMM within 3x of the tiled
SGEMM. The CUDA C needs nvcc (<mma.h> is the toolkit's).

    python benchmarks/tensorcores.py [--quick] [--n 1024]
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import anycuda as ac
from anycuda import cudac
from anycuda.libraries.cublas import functions

sys.path.insert(0, str(Path(__file__).resolve().parent))
from libraries import seconds_per_call  # noqa: E402  (benchmarks/ is a folder of scripts)

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "kernels" / "cuda" / "tensorcores.cu"
SGEMM = HERE / "kernels" / "cuda" / "sgemm.cu"
COMPUTE_32F, R_16F, R_32F = 68, 2, 0
SETTLE = 0.1      # seconds between timed runs, for BLAS's spinning threads (as run.py)


def _check(name: str, out: np.ndarray, ref: np.ndarray, n: int) -> None:
    # f32 sums of n products in another order than the f64 reference: errors grow like sqrt(n)
    tol = 1e-5 * math.sqrt(n) * np.abs(ref).max() + 1e-6
    err = np.abs(out.astype(np.float64) - ref).max()
    if not err <= tol:
        raise AssertionError(f"{name}: largest error {err:.3g} against numpy exceeds {tol:.3g}")


def cases(n: int, rng) -> tuple[dict, list]:
    """{name: run} for each implementation at size n, each checked once; and what keeps their
    device memory alive."""
    if n % 64:
        raise ValueError("n must be a multiple of 64")
    if not cudac.find_nvcc():
        raise RuntimeError("the WMMA kernel needs nvcc on PATH (<mma.h>)")
    a16 = rng.standard_normal((n, n)).astype(np.float16)
    b16 = rng.standard_normal((n, n)).astype(np.float16)
    a32, b32 = a16.astype(np.float32), b16.astype(np.float32)
    ref = a32.astype(np.float64) @ b32.astype(np.float64)
    runs, keep = {}, []

    module = ac.RawModule(code=SOURCE.read_text(), options=("-arch=sm_80",), name="tensorcores.cu", backend="nvcc")
    A16, B16 = ac.asarray(a16), ac.asarray(b16)
    for name, kernel in (("WMMA f16 GEMM", "wmma_gemm"), ("mma.sync f16 GEMM", "mma_gemm")):
        C = ac.empty((n, n), np.float32)
        fn = module.get_function(kernel)
        run = (lambda fn=fn, C=C: (fn((n // 64, n // 64), (128,), (A16, B16, C, np.int32(n))), ac.synchronize()))
        run()
        _check(name, C.get(), ref, n)
        runs[name] = run
        keep.append(C)
    keep += [A16, B16]

    sgemm = ac.RawModule(code=SGEMM.read_text(), name="sgemm.cu").get_function("sgemm")
    A32, B32, C32 = ac.asarray(a32), ac.asarray(b32), ac.empty((n, n), np.float32)
    runs["tiled SGEMM f32"] = lambda: (sgemm((n // 16, n // 16), (16, 16), (A32, B32, C32, np.int32(n))),
                                       ac.synchronize())
    runs["tiled SGEMM f32"]()
    _check("tiled SGEMM f32", C32.get(), ref, n)
    keep += [A32, B32, C32]

    table = functions.table()
    handle = np.zeros(1, np.uint64)
    table["cublasCreate_v2"][1](handle.ctypes.data)
    h = int(handle[0])
    gemm_ex = table["cublasGemmEx"][1]
    one, zero = np.array([1], np.float32), np.array([0], np.float32)
    Cb = ac.empty((n, n), np.float32)
    # cuBLAS is column-major: row-major C = A B is column-major C^T = B^T A^T, i.e. (B, A)
    runs["cublasGemmEx f16 -> f32"] = lambda: (
        gemm_ex(h, 0, 0, n, n, n, one.ctypes.data, B16.data.ptr, R_16F, n, A16.data.ptr, R_16F, n,
                zero.ctypes.data, Cb.data.ptr, R_32F, n, COMPUTE_32F, -1), ac.synchronize())
    runs["cublasGemmEx f16 -> f32"]()
    _check("cublasGemmEx f16 -> f32", Cb.get(), ref, n)
    keep += [Cb, one, zero]

    runs["numpy f32 matmul"] = lambda: np.matmul(a32, b32)
    _check("numpy f32 matmul", np.matmul(a32, b32), ref, n)
    return runs, keep


def measure(quick: bool = False, n: int | None = None) -> dict:
    """{"n", "times_ms": {name: median ms}, "mma/sgemm", "wmma/sgemm"}: rounds that time every
    implementation once in turn; the ratios are the medians of the rounds' ratios."""
    n = n or (256 if quick else 1024)
    repeats, min_run = (3, 0.0) if quick else (7, 0.2)
    runs, keep = cases(n, np.random.default_rng(0))
    for run in runs.values():
        run()
    rounds = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            time.sleep(SETTLE)
            rounds[name].append(seconds_per_call(run, min_run))
    del keep
    sg = rounds["tiled SGEMM f32"]
    return {"n": n,
            "times_ms": {name: statistics.median(t) * 1e3 for name, t in rounds.items()},
            "mma/sgemm": statistics.median(x / y for x, y in zip(rounds["mma.sync f16 GEMM"], sg)),
            "wmma/sgemm": statistics.median(x / y for x, y in zip(rounds["WMMA f16 GEMM"], sg))}


def print_results(results: dict) -> None:
    n = results["n"]
    print(f"\nwarp matrix GEMMs through anycuda, {n} x {n} x {n} (target: mma.sync within 3x of the tiled SGEMM)")
    print(f"{'implementation':26s} {'ms':>9s} {'GFLOP/s':>8s}")
    for name, ms in results["times_ms"].items():
        print(f"{name:26s} {ms:9.2f} {2 * n ** 3 / ms / 1e6:8.2f}")
    print(f"mma.sync / tiled SGEMM {results['mma/sgemm']:.2f}x, WMMA / tiled SGEMM {results['wmma/sgemm']:.2f}x")


if __name__ == "__main__":
    # timed runs measure optimised code, not the quick code a tiered JIT runs first (as run.py;
    # read when a kernel is compiled, so setting it here, after the imports, is in time)
    os.environ.setdefault("ANYCUDA_JIT", "optimised")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int, help="matrix size, a multiple of 64 (default 1024; 256 with --quick)")
    args = ap.parse_args()
    print_results(measure(args.quick, args.n))
    sys.exit(0)
