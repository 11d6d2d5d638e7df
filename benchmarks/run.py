"""anycuda benchmark suite (first part): CUDA kernels through anycuda against the same
computations hand-written in C and built with `gcc -O3 -march=native -fopenmp`, in one run,
on the same inputs. Every output is checked against numpy before it is timed.

    python benchmarks/run.py            # table on stdout, results in benchmarks/results.json

Medians over repeated runs; the ratio column is anycuda time / C time (lower is better).
PoCL (OpenCL C versions in kernels/bench.cl) is timed when pyopencl and pocl-opencl-icd are
installed. Not yet here (see NOTES.md): Numba's simulator, the remaining kernels, the plot.
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


class PoCL:
    """The same kernels as OpenCL C on PoCL (skipped, with the reason, where it is missing)."""

    def __init__(self):
        self.reason = None
        try:
            import pyopencl as cl
        except ImportError:
            self.reason = "pyopencl is not installed (pip install pyopencl; apt-get install pocl-opencl-icd)"
            return
        devices = [d for p in cl.get_platforms() if "Portable" in p.name for d in p.get_devices()]
        if not devices:
            self.reason = "no PoCL platform (apt-get install pocl-opencl-icd)"
            return
        self.cl = cl
        self.ctx = cl.Context(devices[:1])
        self.queue = cl.CommandQueue(self.ctx)
        self.prog = cl.Program(self.ctx, (HERE / "kernels" / "bench.cl").read_text()).build()
        self.kernels = {}

    def buffer(self, host, copy=True):
        mf = self.cl.mem_flags
        flags = mf.READ_WRITE | (mf.COPY_HOST_PTR if copy else 0)
        return self.cl.Buffer(self.ctx, flags, size=host.nbytes, hostbuf=host if copy else None)

    def run(self, name, global_size, local_size, *args):
        if name not in self.kernels:
            self.kernels[name] = self.cl.Kernel(self.prog, name)
        self.kernels[name](self.queue, global_size, local_size, *args)
        self.queue.finish()

    def read(self, buf, like):
        out = np.empty_like(like)
        self.cl.enqueue_copy(self.queue, out, buf)
        return out


def main():
    rng = np.random.default_rng(0)
    lib = build_reference()
    mod = ac.RawModule(code=(HERE / "kernels" / "bench.cu").read_text(), name="bench.cu")
    results = []

    pocl = PoCL()

    def record(name, t_any, t_c, extra="", t_pocl=None):
        results.append({"kernel": name, "anycuda_ms": t_any * 1e3, "c_openmp_ms": t_c * 1e3,
                        "pocl_ms": None if t_pocl is None else t_pocl * 1e3,
                        "ratio": t_any / t_c, "note": extra})

    def pocl_time(check, *launch):
        """Median time of a PoCL launch, after `check` has verified its output."""
        if pocl.reason:
            return None
        pocl.run(*launch)
        check()
        return median_time(lambda: pocl.run(*launch))

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
    if not pocl.reason:
        px, py = pocl.buffer(x), pocl.buffer(y0.copy())
        t_pocl = pocl_time(lambda: None, "saxpy", (n,), (256,), np.int32(n), np.float32(2), px, py)
        y_check = y0.copy()
        pyc = pocl.buffer(y_check)
        pocl.run("saxpy", (n,), (256,), np.int32(n), np.float32(2), px, pyc)
        assert np.allclose(pocl.read(pyc, y_check), 2 * x + y0, rtol=1e-6)
    else:
        t_pocl = None
    record("saxpy", t_any, t_c, f"{3 * 4 * n / t_any / 1e9:.1f} GB/s; triad {triad_gbs:.1f} GB/s", t_pocl)

    a, b = ac.asarray(x), ac.asarray(y0)
    c = ac.empty(n, np.float32)
    k = mod.get_function("vector_add")
    k(((n + 255) // 256,), (256,), (a, b, c, np.int32(n)))
    assert np.array_equal(c.get(), x + y0)
    hc = np.empty_like(x)
    t_any = median_time(lambda: k(((n + 255) // 256,), (256,), (a, b, c, np.int32(n))))
    t_c = median_time(lambda: lib.vector_add(ptr(x), ptr(y0), ptr(hc), n))
    t_pocl = None
    if not pocl.reason:
        pa, pb, pc = pocl.buffer(x), pocl.buffer(y0), pocl.buffer(np.empty_like(x), copy=False)
        t_pocl = pocl_time(lambda: np.testing.assert_array_equal(pocl.read(pc, x), x + y0),
                           "vector_add", (n,), (256,), pa, pb, pc, np.int32(n))
    record("vector_add", t_any, t_c, f"{3 * 4 * n / t_any / 1e9:.1f} GB/s; triad {triad_gbs:.1f} GB/s", t_pocl)

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
    t_pocl = None
    if not pocl.reason:
        pA, pB, pC = pocl.buffer(A), pocl.buffer(B), pocl.buffer(np.empty_like(A), copy=False)
        t_pocl = pocl_time(lambda: np.testing.assert_allclose(pocl.read(pC, A), ref, rtol=1e-3, atol=1e-3),
                           "sgemm", (m, m), (16, 16), pA, pB, pC, np.int32(m))
    record("sgemm_tiled", t_any, t_c, f"{flops / t_any / 1e9:.2f} GFLOP/s; numpy BLAS {flops / t_blas / 1e9:.1f}",
           t_pocl)

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
    t_pocl = None
    if not pocl.reason:
        pxs, ppart = pocl.buffer(xs), pocl.buffer(np.zeros(256, np.float32), copy=False)
        t_pocl = pocl_time(lambda: np.testing.assert_allclose(pocl.read(ppart, np.zeros(256, np.float32)).sum(),
                                                              xs.astype(np.float64).sum(), rtol=1e-4),
                           "reduce_sum", (256 * 256,), (256,), pxs, ppart, np.int32(n))
    record("reduce_shfl", t_any, t_c, f"{4 * n / t_any / 1e9:.1f} GB/s", t_pocl)

    # --- launch overhead of an empty kernel through the Python API
    empty = ac.RawModule(ptx=".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry e() { ret; }\n")
    e = empty.get_function("e")
    t_launch = median_time(lambda: [e((1,), (1,), ()) for _ in range(1000)]) / 1000

    print(f"{'kernel':14s} {'anycuda ms':>11s} {'C/OpenMP ms':>12s} {'PoCL ms':>9s} {'ratio':>7s}  notes")
    for r in results:
        pocl_ms = "-" if r["pocl_ms"] is None else f"{r['pocl_ms']:.2f}"
        print(f"{r['kernel']:14s} {r['anycuda_ms']:11.2f} {r['c_openmp_ms']:12.2f} {pocl_ms:>9s} "
              f"{r['ratio']:7.2f}  {r['note']}")
    if pocl.reason:
        print(f"PoCL column skipped: {pocl.reason}")
    geo = float(np.exp(np.mean(np.log([r["ratio"] for r in results]))))
    print(f"geometric mean of anycuda / C: {geo:.2f}")
    print(f"empty-kernel launch through Python: {t_launch * 1e6:.1f} us")
    print(f"threads: {os.environ.get('ANYCUDA_NUM_THREADS', 'all cores')}")
    (HERE / "results.json").write_text(json.dumps({"results": results, "geomean_ratio": geo,
                                                   "launch_us": t_launch * 1e6}, indent=2))


if __name__ == "__main__":
    main()
