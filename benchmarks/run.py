"""anycuda benchmark suite (first part): CUDA kernels through anycuda against the same
computations hand-written in C and built with `gcc -O3 -march=native -fopenmp`, in one run,
on the same inputs. Every output is checked against numpy before it is timed.

    python benchmarks/run.py            # table on stdout, results in benchmarks/results.json

Medians over repeated runs; the ratio column is anycuda time / C time (lower is better).
Not yet here (see NOTES.md): PoCL, Numba's simulator, the remaining kernels, the plot.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import anycuda as ac

HERE = Path(__file__).parent
REPEATS = 7


def median_time(fn, repeats=REPEATS):
    fn()                                   # warm up (and first-touch the pages)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def build_reference():
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        sys.exit("the C reference needs gcc")
    out = Path(tempfile.mkdtemp(prefix="anycuda-bench-")) / "reference.so"
    subprocess.run([cc, "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-o", str(out),
                    str(HERE / "kernels" / "reference.c")], check=True)
    lib = ctypes.CDLL(str(out))
    lib.reduce_sum.restype = ctypes.c_float
    return lib


def ptr(a):
    return ctypes.c_void_p(a.ctypes.data)


def main():
    rng = np.random.default_rng(0)
    lib = build_reference()
    mod = ac.RawModule(code=(HERE / "kernels" / "bench.cu").read_text(), name="bench.cu")
    results = []

    def record(name, t_any, t_c, extra=""):
        results.append({"kernel": name, "anycuda_ms": t_any * 1e3, "c_openmp_ms": t_c * 1e3,
                        "ratio": t_any / t_c, "note": extra})

    # --- memory-bound: saxpy, vector add, against a STREAM-style triad
    n = 1 << 25
    x, y0 = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    hx, hy = x.copy(), y0.copy()
    dx, dy = ac.asarray(x), ac.asarray(y0)
    k = mod.get_function("saxpy")
    k(((n + 255) // 256,), (256,), (np.int32(n), np.float32(2), dx, dy))
    assert np.allclose(dy.get(), 2 * x + y0, rtol=1e-6)
    t_any = median_time(lambda: k(((n + 255) // 256,), (256,), (np.int32(n), np.float32(2), dx, dy)))
    t_c = median_time(lambda: lib.saxpy(n, ctypes.c_float(2), ptr(hx), ptr(hy)))
    triad_out = np.empty_like(hx)
    t_triad = median_time(lambda: lib.triad(ptr(hx), ptr(hy), ptr(triad_out), ctypes.c_float(3), n))
    triad_gbs = 3 * 4 * n / t_triad / 1e9
    record("saxpy", t_any, t_c, f"{3 * 4 * n / t_any / 1e9:.1f} GB/s; triad {triad_gbs:.1f} GB/s")

    a, b = ac.asarray(x), ac.asarray(y0)
    c = ac.empty(n, np.float32)
    k = mod.get_function("vector_add")
    k(((n + 255) // 256,), (256,), (a, b, c, np.int32(n)))
    assert np.array_equal(c.get(), x + y0)
    hc = np.empty_like(x)
    t_any = median_time(lambda: k(((n + 255) // 256,), (256,), (a, b, c, np.int32(n))))
    t_c = median_time(lambda: lib.vector_add(ptr(x), ptr(y0), ptr(hc), n))
    record("vector_add", t_any, t_c, f"{3 * 4 * n / t_any / 1e9:.1f} GB/s; triad {triad_gbs:.1f} GB/s")

    # --- compute-bound: tiled SGEMM against numpy's BLAS too
    m = 512
    A = rng.standard_normal((m, m), dtype=np.float32)
    B = rng.standard_normal((m, m), dtype=np.float32)
    dA, dB, dC = ac.asarray(A), ac.asarray(B), ac.empty((m, m), np.float32)
    k = mod.get_function("sgemm")
    run = lambda: k((m // 16, m // 16), (16, 16), (dA, dB, dC, np.int32(m)))
    run()
    ref = A.astype(np.float64) @ B
    assert np.allclose(dC.get(), ref, rtol=1e-3, atol=1e-3)
    hC = np.empty_like(A)
    t_any = median_time(run, 3)
    t_c = median_time(lambda: lib.sgemm(ptr(A), ptr(B), ptr(hC), m), 3)
    assert np.allclose(hC, ref, rtol=1e-3, atol=1e-3)
    t_blas = median_time(lambda: A @ B)
    flops = 2 * m ** 3
    record("sgemm_tiled", t_any, t_c, f"{flops / t_any / 1e9:.2f} GFLOP/s; numpy BLAS {flops / t_blas / 1e9:.1f}")

    # --- block reduction with warp shuffles
    n = 1 << 24
    xs = rng.random(n, dtype=np.float32)
    dxs, out = ac.asarray(xs), ac.zeros(1, np.float32)
    k = mod.get_function("reduce_sum")

    def reduce_any():
        out.set(np.zeros(1, np.float32))
        k((256,), (256,), (dxs, out, np.int32(n)))
    reduce_any()
    assert np.isclose(out.get()[0], xs.astype(np.float64).sum(), rtol=1e-4)
    t_any = median_time(reduce_any)
    t_c = median_time(lambda: lib.reduce_sum(ptr(xs), n))
    record("reduce_shfl", t_any, t_c, f"{4 * n / t_any / 1e9:.1f} GB/s")

    # --- launch overhead of an empty kernel through the Python API
    empty = ac.RawModule(ptx=".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry e() { ret; }\n")
    e = empty.get_function("e")
    t_launch = median_time(lambda: [e((1,), (1,), ()) for _ in range(1000)]) / 1000

    print(f"{'kernel':14s} {'anycuda ms':>11s} {'C/OpenMP ms':>12s} {'ratio':>7s}  notes")
    for r in results:
        print(f"{r['kernel']:14s} {r['anycuda_ms']:11.2f} {r['c_openmp_ms']:12.2f} {r['ratio']:7.2f}  {r['note']}")
    geo = float(np.exp(np.mean(np.log([r["ratio"] for r in results]))))
    print(f"geometric mean of anycuda / C: {geo:.2f}")
    print(f"empty-kernel launch through Python: {t_launch * 1e6:.1f} us")
    print(f"threads: {os.environ.get('ANYCUDA_NUM_THREADS', 'all cores')}")
    (HERE / "results.json").write_text(json.dumps({"results": results, "geomean_ratio": geo,
                                                   "launch_us": t_launch * 1e6}, indent=2))


if __name__ == "__main__":
    main()
