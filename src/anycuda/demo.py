"""`anycuda demo`: bundled CUDA examples run on this CPU, each checked against numpy.

The examples are our own .cu files shipped with the PTX nvcc made from them, so the demo
needs no CUDA compiler.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from importlib import resources
from typing import Callable

import numpy as np

from .array import asarray, full, zeros
from .rawmodule import RawModule


@dataclass
class Example:
    name: str
    kernel: str
    describe: str
    run: Callable          # (kernel, rng) -> (result, reference, tolerance)


def _vector_add(k, rng):
    n = 1 << 22
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    c = full(n, np.nan, np.float32)
    k(((n + 255) // 256,), (256,), (asarray(a), asarray(b), c, np.int32(n)))
    return c.get(), a + b, 0.0


def _matmul(k, rng):
    M, N, K = 300, 200, 250
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = full((M, N), np.nan, np.float32)
    k(((N + 15) // 16, (M + 15) // 16), (16, 16),
      (asarray(A), asarray(B), C, np.int32(M), np.int32(N), np.int32(K)))
    return C.get(), A.astype(np.float64) @ B.astype(np.float64), 1e-3


def _reduce(k, rng):
    n = 1 << 22
    x = rng.random(n, dtype=np.float32)
    out = zeros(1, np.float32)
    k((64,), (256,), (asarray(x), out, np.int32(n)))
    return out.get()[0], x.astype(np.float64).sum(), 1e-4


def _histogram(k, rng):
    n = 1 << 22
    data = rng.integers(0, 256, n, dtype=np.uint8)
    bins = zeros(256, np.uint32)
    k((64,), (256,), (asarray(data), bins, np.int32(n)))
    return bins.get(), np.bincount(data, minlength=256), 0.0


def _softmax(k, rng):
    rows, cols = 512, 1000
    x = rng.standard_normal((rows, cols), dtype=np.float32) * 4
    y = full((rows, cols), np.nan, np.float32)
    k((rows,), (256,), (asarray(x), y, np.int32(cols)))
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return y.get(), e / e.sum(axis=1, keepdims=True), 1e-5


EXAMPLES = [
    Example("vector_add", "vector_add", "c = a + b over 4M floats", _vector_add),
    Example("matmul_tiled", "matmul_tiled", "300x250 @ 250x200 with 16x16 shared-memory tiles", _matmul),
    Example("reduce_shfl", "reduce_sum", "sum of 4M floats with warp shuffles and atomics", _reduce),
    Example("histogram", "histogram", "256-bin histogram of 4M bytes with shared atomics", _histogram),
    Example("softmax", "softmax_rows", "row softmax of 512x1000 (warp reductions)", _softmax),
]


def _error(result, reference):
    result = np.asarray(result, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if result.shape != reference.shape or not np.all(np.isfinite(result)):
        return float("inf")
    scale = max(1.0, float(np.abs(reference).max()))
    return float(np.abs(result - reference).max()) / scale


def run_example(ex: Example, repeats: int = 3, out=print) -> bool:
    ptx = resources.files("anycuda.examples").joinpath(ex.name + ".ptx").read_text()
    t0 = time.perf_counter()
    kernel = RawModule(ptx=ptx, name=ex.name + ".ptx").get_function(ex.kernel)
    load_ms = (time.perf_counter() - t0) * 1e3
    rng = np.random.default_rng()
    times, ok, err = [], True, 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        result, reference, tol = ex.run(kernel, rng)
        times.append((time.perf_counter() - t) * 1e3)
        err = _error(result, reference)
        ok = ok and err <= tol
    status = "OK" if ok else f"MISMATCH (max relative error {err:.3g})"
    out(f"{ex.name:14s} {status:10s} {np.median(times):8.1f} ms per run (incl. copies)  "
        f"load {load_ms:6.1f} ms   {ex.describe}")
    return ok


def main(names=None, list_only=False, out=print) -> int:
    chosen = EXAMPLES if not names else [e for e in EXAMPLES if e.name in names]
    if names and len(chosen) != len(set(names)):
        unknown = set(names) - {e.name for e in EXAMPLES}
        out(f"unknown example(s): {', '.join(sorted(unknown))}; try: anycuda demo --list")
        return 2
    if list_only:
        for e in EXAMPLES:
            out(f"{e.name:14s} {e.describe}")
        return 0
    results = [run_example(e, out=out) for e in chosen]
    out(f"{sum(results)} of {len(results)} examples correct")
    return 0 if all(results) else 1
