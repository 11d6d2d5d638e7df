"""The benchmark kernels: for each, inputs, a numpy reference, a check, and the same
computation as (1) CUDA C++ through anycuda (kernels/cuda/*.cu), (2) hand-written C built
with gcc -O3 -march=native -fopenmp (kernels/reference.c and kernels/idioms.c), (3) OpenCL C on PoCL
(kernels/bench.cl) and (4) Python for Numba's CUDA simulator (kernels/sim.py).

An implementation is a function of a backend handle that returns `(run, result)`: `run()`
performs the computation once (every launch it needs, synchronised) and `result()` returns
its output as numpy array(s) for `Bench.check`. Repeated runs are valid runs: inputs are
never overwritten, or are restored inside `run` (same work for every implementation).
Used by run.py (timing) and tests/test_benchmarks.py (correctness only).
"""
from __future__ import annotations

import ctypes
import math
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"
SIZES = ("full", "quick", "sim")


def cdiv(a, b):
    return (a + b - 1) // b


def p(a):
    """A numpy array's data as a C pointer argument."""
    return ctypes.c_void_p(a.ctypes.data)


def variants(base, **table):
    """One subclass of `base` per name (also the name of its kernel), with that row's attributes."""
    return [type(name, (base,), dict(name=name, kernel=name, **attrs)) for name, attrs in table.items()]


# ------------------------------------------------------------------ backends

class AnyCUDA:
    """anycuda, one RawModule per kernels/cuda/<file>.cu (compiled on first use)."""

    def __init__(self):
        import anycuda
        self.ac = anycuda
        self.modules = {}

    def fn(self, cu: str, name: str, options=()):
        """Kernel `name` of kernels/cuda/<cu>, built with nvcc's `options` (-use_fast_math)."""
        key = (cu, tuple(options))
        if key not in self.modules:
            self.modules[key] = self.ac.RawModule(code=(KERNELS / "cuda" / cu).read_text(), name=cu,
                                                  options=tuple(options))
        return self.modules[key].get_function(name)

    def sync(self):
        self.ac.synchronize()


C_SOURCES = ("reference.c", "idioms.c", "idioms_sort.c")     # built into one library


def build_c_reference(cc: str | None = None) -> ctypes.CDLL:
    cc = cc or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("the C reference needs gcc")
    out = Path(tempfile.mkdtemp(prefix="anycuda-bench-")) / "reference.so"
    subprocess.run([cc, "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-o", str(out),
                    *(str(KERNELS / f) for f in C_SOURCES), "-lm"], check=True)
    lib = ctypes.CDLL(str(out))
    lib.reduce_sum.restype = ctypes.c_float
    return lib


class PoCL:
    """PoCL through pyopencl; `reason` says why not where it is missing."""

    def __init__(self):
        self.reason = None
        try:
            import pyopencl as cl
        except ImportError:
            self.reason = "pyopencl is not installed (pip install pyopencl; apt-get install pocl-opencl-icd)"
            return
        try:
            devices = [d for pl in cl.get_platforms() if "Portable" in pl.name for d in pl.get_devices()]
        except cl.Error as e:
            devices, self.reason = [], f"no OpenCL platform ({e})"
        if not devices:
            self.reason = self.reason or "no PoCL platform (apt-get install pocl-opencl-icd)"
            return
        self.cl = cl
        self.device = devices[0]
        self.ctx = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.ctx)
        # the suite's kernels and the idioms' (idioms*.py) in one program
        source = "\n".join((KERNELS / f).read_text() for f in ("bench.cl", "idioms.cl", "idioms_more.cl"))
        self.prog = cl.Program(self.ctx, source).build()
        self.kernels = {}

    def buffer(self, host=None, nbytes=None):
        mf = self.cl.mem_flags
        if host is None:
            return self.cl.Buffer(self.ctx, mf.READ_WRITE, size=nbytes)
        return self.cl.Buffer(self.ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host)

    def launch(self, name, global_size, local_size, *args):
        if name not in self.kernels:
            self.kernels[name] = self.cl.Kernel(self.prog, name)
        self.kernels[name](self.queue, global_size, local_size, *args)

    def copy_in(self, buf, host):
        self.cl.enqueue_copy(self.queue, buf, host)

    def finish(self):
        self.queue.finish()

    def read(self, buf, shape, dtype):
        out = np.empty(shape, dtype)
        self.cl.enqueue_copy(self.queue, out, buf)
        return out

    def local(self, nbytes):
        return self.cl.LocalMemory(nbytes)


def load_sim():
    """kernels/sim.py (it turns on Numba's CUDA simulator before importing numba)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("anycuda_bench_sim", KERNELS / "sim.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------ benchmarks

class Bench:
    name = ""
    cu = ""                     # kernels/cuda/<cu>
    sizes = {}                  # size name -> parameters
    unit = None                 # "GB/s" or "GFLOP/s": what `work` counts per run
    memory_bound = False        # a stream through memory (run.py times the triad yardstick with it)

    def __init__(self, size: str = "full", seed: int = 0):
        self.size_name = size
        self.params = self.sizes[size]
        self.rng = np.random.default_rng(seed)
        self.setup(**self.params)

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params.items())

    work = 0.0                  # bytes or flops per run (for bitonic sort: compare-exchanges);
                                # proportional to the work, so work ratios compare sizes

    def rate(self, seconds: float) -> str:
        if not self.unit or seconds <= 0:
            return ""
        scale = 1e9
        return f"{self.work / seconds / scale:.1f} {self.unit}"

    # implementations: return (run, result)
    def anycuda(self, g: AnyCUDA):
        raise NotImplementedError

    def c(self, lib):
        raise NotImplementedError

    def pocl(self, cl: PoCL):
        raise NotImplementedError

    def sim(self, s):
        raise NotImplementedError

    @classmethod
    def implements(cls, impl: str) -> bool:
        """Whether this benchmark has an implementation for `impl` ("pocl", "sim", ...)."""
        return getattr(cls, impl) is not getattr(Bench, impl)


def _close(out, ref, rtol, atol, what=""):
    out = np.asarray(out)
    if out.shape != np.shape(ref):
        raise AssertionError(f"{what} shape {out.shape} != {np.shape(ref)}")
    if not np.allclose(out, ref, rtol=rtol, atol=atol):
        err = np.abs(out.astype(np.float64) - ref)
        i = np.unravel_index(np.argmax(err), err.shape)
        raise AssertionError(f"{what} differs from numpy: max error {err.max():.3g} at {i} "
                             f"(got {out[i]}, want {ref[i]})")


def _equal(out, ref, what=""):
    out = np.asarray(out)
    if out.shape != np.shape(ref) or not np.array_equal(out, ref):
        bad = np.flatnonzero(out.ravel() != np.ravel(ref)) if out.shape == np.shape(ref) else []
        raise AssertionError(f"{what} differs from numpy"
                             + (f" at {len(bad)} places, first flat index {bad[0]}" if len(bad) else
                                f": shape {out.shape} != {np.shape(ref)}"))


class Saxpy(Bench):
    name, cu, unit = "saxpy", "saxpy.cu", "GB/s"
    sizes = {"full": dict(n=1 << 25), "quick": dict(n=100_000), "sim": dict(n=2048)}

    def setup(self, n):
        self.n, self.a = n, np.float32(2.0)
        self.x = self.rng.random(n, dtype=np.float32)
        self.y0 = self.rng.random(n, dtype=np.float32)
        self.ref = self.a * self.x + self.y0
        self.work = 12 * n

    def check(self, out):
        _close(out, self.ref, 1e-6, 0, "y")

    def anycuda(self, g):
        k = g.fn(self.cu, "saxpy")
        x, y = g.ac.asarray(self.x), g.ac.asarray(self.y0)
        args = (np.int32(self.n), self.a, x, y)
        grid = (cdiv(self.n, 256),)

        def run():
            k(grid, (256,), args)
            g.sync()
        return run, y.get

    def c(self, lib):
        y = self.y0.copy()
        return (lambda: lib.saxpy(self.n, ctypes.c_float(self.a), p(self.x), p(y))), (lambda: y)

    def pocl(self, cl):
        x, y = cl.buffer(self.x), cl.buffer(self.y0)

        def run():
            cl.launch("saxpy", (cdiv(self.n, 256) * 256,), (256,), np.int32(self.n), self.a, x, y)
            cl.finish()
        return run, lambda: cl.read(y, self.n, np.float32)

    def sim(self, s):
        y = self.y0.copy()
        return (lambda: s.saxpy[cdiv(self.n, 256), 256](self.n, self.a, self.x, y)), (lambda: y)


class VectorAdd(Bench):
    name, cu, unit = "vector_add", "vector_add.cu", "GB/s"
    sizes = {"full": dict(n=1 << 25), "quick": dict(n=100_000), "sim": dict(n=2048)}

    def setup(self, n):
        self.n = n
        self.a = self.rng.random(n, dtype=np.float32)
        self.b = self.rng.random(n, dtype=np.float32)
        self.ref = self.a + self.b
        self.work = 12 * n

    def check(self, out):
        _equal(out, self.ref, "c")

    def anycuda(self, g):
        k = g.fn(self.cu, "vector_add")
        a, b, c = g.ac.asarray(self.a), g.ac.asarray(self.b), g.ac.empty(self.n, np.float32)
        args, grid = (a, b, c, np.int32(self.n)), (cdiv(self.n, 256),)

        def run():
            k(grid, (256,), args)
            g.sync()
        return run, c.get

    def c(self, lib):
        c = np.empty_like(self.a)
        return (lambda: lib.vector_add(p(self.a), p(self.b), p(c), self.n)), (lambda: c)

    def pocl(self, cl):
        a, b, c = cl.buffer(self.a), cl.buffer(self.b), cl.buffer(nbytes=self.a.nbytes)

        def run():
            cl.launch("vector_add", (cdiv(self.n, 256) * 256,), (256,), a, b, c, np.int32(self.n))
            cl.finish()
        return run, lambda: cl.read(c, self.n, np.float32)

    def sim(self, s):
        c = np.empty_like(self.a)
        return (lambda: s.vector_add[cdiv(self.n, 256), 256](self.a, self.b, c, self.n)), (lambda: c)


class Sgemm(Bench):
    name, cu, unit = "sgemm", "sgemm.cu", "GFLOP/s"
    c_function = "sgemm"            # reference.c's (idioms name others for other types)
    sizes = {"full": dict(m=1024), "quick": dict(m=64), "sim": dict(m=32)}

    def setup(self, m):
        self.m = m
        self.A = self.rng.standard_normal((m, m), dtype=np.float32)
        self.B = self.rng.standard_normal((m, m), dtype=np.float32)
        self.ref = self.A.astype(np.float64) @ self.B
        self.work = 2 * m ** 3

    def check(self, out):
        _close(out, self.ref, 1e-3, 1e-3 * math.sqrt(self.m), "C")

    def anycuda(self, g):
        k = g.fn(self.cu, "sgemm")
        A, B, C = g.ac.asarray(self.A), g.ac.asarray(self.B), g.ac.empty((self.m, self.m), np.float32)
        args, grid = (A, B, C, np.int32(self.m)), (self.m // 16, self.m // 16)

        def run():
            k(grid, (16, 16), args)
            g.sync()
        return run, C.get

    def c(self, lib):
        C = np.empty_like(self.A)
        fn = getattr(lib, self.c_function)
        return (lambda: fn(p(self.A), p(self.B), p(C), self.m)), (lambda: C)

    def pocl(self, cl):
        A, B, C = cl.buffer(self.A), cl.buffer(self.B), cl.buffer(nbytes=self.A.nbytes)

        def run():
            cl.launch("sgemm", (self.m, self.m), (16, 16), A, B, C, np.int32(self.m))
            cl.finish()
        return run, lambda: cl.read(C, (self.m, self.m), np.float32)

    def sim(self, s):
        C = np.empty_like(self.A)
        grid = (self.m // 16, self.m // 16)
        return (lambda: s.sgemm[grid, (16, 16)](self.A, self.B, C, self.m)), (lambda: C)


class Reduce(Bench):
    name, cu, unit = "reduce", "reduce.cu", "GB/s"
    sizes = {"full": dict(n=1 << 24), "quick": dict(n=100_000), "sim": dict(n=4096)}

    def setup(self, n):
        self.n = n
        self.x = self.rng.random(n, dtype=np.float32)
        self.ref = self.x.astype(np.float64).sum()
        self.work = 4 * n
        self.blocks = min(256, cdiv(n, 256 * 8))

    def check(self, out):
        if not np.isclose(float(out), self.ref, rtol=1e-5):
            raise AssertionError(f"sum {float(out)} != numpy's {self.ref}")

    def anycuda(self, g):
        k = g.fn(self.cu, "reduce_sum")
        x, out = g.ac.asarray(self.x), g.ac.zeros(1, np.float32)
        zero = np.zeros(1, np.float32)
        args = (x, out, np.int32(self.n))

        def run():
            out.set(zero)
            k((self.blocks,), (256,), args)
            g.sync()
        return run, lambda: out.get()[0]

    def c(self, lib):
        box = [None]

        def run():
            box[0] = lib.reduce_sum(p(self.x), self.n)
        return run, lambda: box[0]

    def pocl(self, cl):
        x, part = cl.buffer(self.x), cl.buffer(nbytes=4 * self.blocks)

        def run():
            cl.launch("reduce_sum", (self.blocks * 256,), (256,), x, part, np.int32(self.n))
            cl.finish()
        return run, lambda: cl.read(part, self.blocks, np.float32).astype(np.float64).sum()

    def sim(self, s):
        out = np.zeros(1, np.float32)

        def run():
            out[0] = 0
            s.reduce_sum[self.blocks, 256](self.x, out, self.n)
        return run, lambda: out[0]


class Histogram(Bench):
    name, cu, unit = "histogram", "histogram.cu", "GB/s"
    sizes = {"full": dict(n=1 << 26), "quick": dict(n=100_000), "sim": dict(n=4096)}

    def setup(self, n):
        self.n = n
        # a skewed distribution (many hits on few bins), like real data
        self.data = np.minimum(self.rng.exponential(40.0, n), 255).astype(np.uint8)
        self.ref = np.bincount(self.data, minlength=256).astype(np.uint32)
        self.work = n
        self.blocks = min(256, cdiv(n, 256 * 16))

    def check(self, out):
        _equal(out, self.ref, "bins")

    def anycuda(self, g):
        k = g.fn(self.cu, "histogram256")
        data, bins = g.ac.asarray(self.data), g.ac.zeros(256, np.uint32)
        zero = np.zeros(256, np.uint32)
        args = (data, bins, np.int32(self.n))

        def run():
            bins.set(zero)
            k((self.blocks,), (256,), args)
            g.sync()
        return run, bins.get

    def c(self, lib):
        bins = np.zeros(256, np.uint32)
        return (lambda: lib.histogram256(p(self.data), p(bins), self.n)), (lambda: bins)

    def pocl(self, cl):
        data, bins = cl.buffer(self.data), cl.buffer(nbytes=1024)
        zero = np.zeros(256, np.uint32)

        def run():
            cl.copy_in(bins, zero)
            cl.launch("histogram256", (self.blocks * 256,), (256,), data, bins, np.int32(self.n))
            cl.finish()
        return run, lambda: cl.read(bins, 256, np.uint32)

    def sim(self, s):
        bins = np.zeros(256, np.uint32)

        def run():
            bins[:] = 0
            s.histogram256[self.blocks, 256](self.data, bins, self.n)
        return run, lambda: bins


class Stencil(Bench):
    name, cu, unit = "stencil5", "stencil.cu", "GB/s"
    sizes = {"full": dict(ny=4096, nx=4096), "quick": dict(ny=100, nx=130), "sim": dict(ny=48, nx=64)}

    def setup(self, ny, nx):
        self.nx, self.ny = nx, ny
        u = self.rng.random((ny, nx), dtype=np.float32)
        self.u = u
        ref = u.copy()
        c = u[1:-1, 1:-1]
        ref[1:-1, 1:-1] = np.float32(0.5) * c + np.float32(0.125) * (
            (u[1:-1, :-2] + u[1:-1, 2:]) + (u[:-2, 1:-1] + u[2:, 1:-1]))
        self.ref = ref
        self.work = 8 * nx * ny

    def check(self, out):
        _close(out, self.ref, 1e-6, 1e-7, "stencil")

    def grid(self):
        return (cdiv(self.nx, 32), cdiv(self.ny, 8))

    def anycuda(self, g):
        k = g.fn(self.cu, "stencil5")
        u, v = g.ac.asarray(self.u), g.ac.empty((self.ny, self.nx), np.float32)
        args = (u, v, np.int32(self.nx), np.int32(self.ny))

        def run():
            k(self.grid(), (32, 8), args)
            g.sync()
        return run, v.get

    def c(self, lib):
        v = np.empty_like(self.u)
        return (lambda: lib.stencil5(p(self.u), p(v), self.nx, self.ny)), (lambda: v)

    def pocl(self, cl):
        u, v = cl.buffer(self.u), cl.buffer(nbytes=self.u.nbytes)
        gx, gy = self.grid()

        def run():
            cl.launch("stencil5", (gx * 32, gy * 8), (32, 8), u, v, np.int32(self.nx), np.int32(self.ny))
            cl.finish()
        return run, lambda: cl.read(v, self.u.shape, np.float32)

    def sim(self, s):
        v = np.empty_like(self.u)
        return (lambda: s.stencil5[self.grid(), (32, 8)](self.u, v, self.nx, self.ny)), (lambda: v)


class Transpose(Bench):
    name, cu, unit = "transpose", "transpose.cu", "GB/s"
    sizes = {"full": dict(rows=4096, cols=4096), "quick": dict(rows=100, cols=170),
             "sim": dict(rows=64, cols=64)}

    def setup(self, rows, cols):
        self.rows, self.cols = rows, cols
        self.a = self.rng.random((rows, cols), dtype=np.float32)
        self.ref = np.ascontiguousarray(self.a.T)
        self.work = 8 * rows * cols

    def check(self, out):
        _equal(out, self.ref, "transpose")

    def grid(self):
        return (cdiv(self.cols, 32), cdiv(self.rows, 32))

    def anycuda(self, g):
        k = g.fn(self.cu, "transpose")
        a, t = g.ac.asarray(self.a), g.ac.empty((self.cols, self.rows), np.float32)
        args = (a, t, np.int32(self.rows), np.int32(self.cols))

        def run():
            k(self.grid(), (32, 8), args)
            g.sync()
        return run, t.get

    def c(self, lib):
        t = np.empty((self.cols, self.rows), np.float32)
        return (lambda: lib.transpose(p(self.a), p(t), self.rows, self.cols)), (lambda: t)

    def pocl(self, cl):
        a, t = cl.buffer(self.a), cl.buffer(nbytes=self.a.nbytes)
        gx, gy = self.grid()

        def run():
            cl.launch("transpose", (gx * 32, gy * 8), (32, 8), a, t, np.int32(self.rows), np.int32(self.cols))
            cl.finish()
        return run, lambda: cl.read(t, (self.cols, self.rows), np.float32)

    def sim(self, s):
        t = np.empty((self.cols, self.rows), np.float32)
        return (lambda: s.transpose[self.grid(), (32, 8)](self.a, t, self.rows, self.cols)), (lambda: t)


class Scan(Bench):
    name, cu, unit = "scan", "scan.cu", "GB/s"
    sizes = {"full": dict(n=1 << 24), "quick": dict(n=100_000), "sim": dict(n=2500)}
    PER_BLOCK = 1024            # 256 threads x 4 elements

    def setup(self, n):
        self.n = n
        self.x = self.rng.integers(0, 10, n, dtype=np.int32)
        self.ref = np.cumsum(self.x, dtype=np.int64).astype(np.int32)
        self.blocks = cdiv(n, self.PER_BLOCK)
        self.work = 8 * n

    def check(self, out):
        _equal(out, self.ref, "scan")

    def anycuda(self, g):
        kb, kt, ka = (g.fn(self.cu, k) for k in ("scan_blocks", "scan_totals", "scan_add"))
        x, y = g.ac.asarray(self.x), g.ac.empty(self.n, np.int32)
        tot = g.ac.empty(self.blocks, np.int32)
        n = np.int32(self.n)

        def run():
            kb((self.blocks,), (256,), (x, y, tot, n))
            kt((1,), (256,), (tot, np.int32(self.blocks)))
            ka((self.blocks,), (256,), (y, tot, n))
            g.sync()
        return run, y.get

    def c(self, lib):
        y = np.empty_like(self.x)
        return (lambda: lib.scan_inclusive(p(self.x), p(y), self.n)), (lambda: y)

    def pocl(self, cl):
        x, y, tot = cl.buffer(self.x), cl.buffer(nbytes=self.x.nbytes), cl.buffer(nbytes=4 * self.blocks)
        n, b = np.int32(self.n), self.blocks

        def run():
            cl.launch("scan_blocks", (b * 256,), (256,), x, y, tot, n)
            cl.launch("scan_totals", (256,), (256,), tot, np.int32(b))
            cl.launch("scan_add", (b * 256,), (256,), y, tot, n)
            cl.finish()
        return run, lambda: cl.read(y, self.n, np.int32)

    def sim(self, s):
        y, tot = np.empty_like(self.x), np.empty(self.blocks, np.int32)

        def run():
            s.scan_blocks[self.blocks, 256](self.x, y, tot, self.n)
            s.scan_totals[1, 256](tot, self.blocks)
            s.scan_add[self.blocks, 256](y, tot, self.n)
        return run, lambda: y


class Softmax(Bench):
    name, cu, unit = "softmax", "softmax.cu", "GB/s"
    sizes = {"full": dict(N=8192, C=1024, threads=256), "quick": dict(N=64, C=300, threads=256),
             "sim": dict(N=4, C=200, threads=64)}

    def setup(self, N, C, threads):
        self.N, self.C, self.threads = N, C, threads
        self.x = (3 * self.rng.standard_normal((N, C))).astype(np.float32)
        e = np.exp(self.x.astype(np.float64) - self.x.max(axis=1, keepdims=True))
        self.ref = e / e.sum(axis=1, keepdims=True)
        self.work = 8 * N * C

    def check(self, out):
        _close(out, self.ref, 1e-4, 1e-9, "softmax")

    def anycuda(self, g):
        k = g.fn(self.cu, "softmax_forward")
        x, y = g.ac.asarray(self.x), g.ac.empty((self.N, self.C), np.float32)
        args = (y, x, np.int32(self.N), np.int32(self.C))

        def run():
            k((self.N,), (self.threads,), args)
            g.sync()
        return run, y.get

    def c(self, lib):
        y = np.empty_like(self.x)
        return (lambda: lib.softmax_forward(p(y), p(self.x), self.N, self.C)), (lambda: y)

    def pocl(self, cl):
        x, y = cl.buffer(self.x), cl.buffer(nbytes=self.x.nbytes)

        def run():
            cl.launch("softmax_forward", (self.N * self.threads,), (self.threads,), y, x,
                      np.int32(self.N), np.int32(self.C))
            cl.finish()
        return run, lambda: cl.read(y, self.x.shape, np.float32)

    def sim(self, s):
        y = np.empty_like(self.x)
        return (lambda: s.softmax_forward[self.N, self.threads](y, self.x, self.N, self.C)), (lambda: y)


class LayerNorm(Bench):
    name, cu, unit = "layernorm", "layernorm.cu", "GB/s"
    sizes = {"full": dict(N=8192, C=768), "quick": dict(N=64, C=100), "sim": dict(N=8, C=96)}
    ROWS = 4                    # rows (warps) per block of 128 threads

    def setup(self, N, C):
        self.N, self.C = N, C
        self.x = (self.rng.standard_normal((N, C)) + 0.5).astype(np.float32)
        self.w = self.rng.standard_normal(C).astype(np.float32)
        self.b = self.rng.standard_normal(C).astype(np.float32)
        x = self.x.astype(np.float64)
        mean = x.mean(axis=1)
        rstd = 1 / np.sqrt(((x - mean[:, None]) ** 2).mean(axis=1) + 1e-5)
        self.ref = ((x - mean[:, None]) * rstd[:, None] * self.w + self.b, mean, rstd)
        self.work = 8 * N * C

    def check(self, out):
        y, mean, rstd = out
        _close(mean, self.ref[1], 1e-5, 1e-6, "mean")
        _close(rstd, self.ref[2], 1e-5, 0, "rstd")
        _close(y, self.ref[0], 1e-4, 1e-5, "out")

    def anycuda(self, g):
        k = g.fn(self.cu, "layernorm_forward")
        x, w, b = g.ac.asarray(self.x), g.ac.asarray(self.w), g.ac.asarray(self.b)
        y, m, r = g.ac.empty((self.N, self.C), np.float32), g.ac.empty(self.N, np.float32), g.ac.empty(self.N, np.float32)
        args = (y, m, r, x, w, b, np.int32(self.N), np.int32(self.C))

        def run():
            k((cdiv(self.N, self.ROWS),), (32 * self.ROWS,), args)
            g.sync()
        return run, lambda: (y.get(), m.get(), r.get())

    def c(self, lib):
        y, m, r = np.empty_like(self.x), np.empty(self.N, np.float32), np.empty(self.N, np.float32)
        return (lambda: lib.layernorm_forward(p(y), p(m), p(r), p(self.x), p(self.w), p(self.b),
                                              self.N, self.C)), (lambda: (y, m, r))

    def pocl(self, cl):
        x, w, b = cl.buffer(self.x), cl.buffer(self.w), cl.buffer(self.b)
        y, m, r = cl.buffer(nbytes=self.x.nbytes), cl.buffer(nbytes=4 * self.N), cl.buffer(nbytes=4 * self.N)

        def run():
            cl.launch("layernorm_forward", (cdiv(self.N, self.ROWS) * 32 * self.ROWS,), (32 * self.ROWS,),
                      y, m, r, x, w, b, np.int32(self.N), np.int32(self.C))
            cl.finish()
        return run, lambda: (cl.read(y, self.x.shape, np.float32), cl.read(m, self.N, np.float32),
                             cl.read(r, self.N, np.float32))

    def sim(self, s):
        y, m, r = np.empty_like(self.x), np.empty(self.N, np.float32), np.empty(self.N, np.float32)
        grid = cdiv(self.N, self.ROWS)
        return (lambda: s.layernorm_forward[grid, 32 * self.ROWS](y, m, r, self.x, self.w, self.b, self.N, self.C)), \
            (lambda: (y, m, r))


class NBody(Bench):
    name, cu, unit = "nbody", "nbody.cu", "GFLOP/s"
    sizes = {"full": dict(n=8192, threads=256), "quick": dict(n=512, threads=256),
             "sim": dict(n=128, threads=64)}
    EPS2 = np.float32(0.01)

    def setup(self, n, threads):
        self.n, self.threads = n, threads
        pos = self.rng.random((n, 4), dtype=np.float32)
        pos[:, 3] = (0.5 + self.rng.random(n)) / n
        self.pos = pos
        ref = np.empty((n, 4))
        p64 = pos.astype(np.float64)
        for lo in range(0, n, 256):
            d = p64[None, :, :3] - p64[lo:lo + 256, None, :3]
            inv = 1 / np.sqrt((d * d).sum(axis=2) + float(self.EPS2))
            ref[lo:lo + 256, :3] = ((p64[None, :, 3] * inv ** 3)[:, :, None] * d).sum(axis=1)
        ref[:, 3] = 0
        self.ref = ref
        self.work = 20 * n * n           # the customary 20 flops per interaction

    def check(self, out):
        out = np.asarray(out)
        err = np.linalg.norm(out - self.ref) / np.linalg.norm(self.ref)
        if out.shape != self.ref.shape or not err < 1e-5:
            raise AssertionError(f"accelerations differ from numpy: relative error {err:.3g}")

    def anycuda(self, g):
        k = g.fn(self.cu, "nbody_accel")
        pos, acc = g.ac.asarray(self.pos), g.ac.empty((self.n, 4), np.float32)
        args = (pos, acc, np.int32(self.n), self.EPS2)

        def run():
            k((self.n // self.threads,), (self.threads,), args, shared_mem=16 * self.threads)
            g.sync()
        return run, acc.get

    def c(self, lib):
        acc = np.empty_like(self.pos)
        return (lambda: lib.nbody_accel(p(self.pos), p(acc), self.n, ctypes.c_float(self.EPS2))), (lambda: acc)

    def pocl(self, cl):
        pos, acc = cl.buffer(self.pos), cl.buffer(nbytes=self.pos.nbytes)

        def run():
            cl.launch("nbody_accel", (self.n,), (self.threads,), pos, acc, np.int32(self.n), self.EPS2,
                      cl.local(16 * self.threads))
            cl.finish()
        return run, lambda: cl.read(acc, self.pos.shape, np.float32)

    def sim(self, s):
        acc = np.empty_like(self.pos)
        return (lambda: s.nbody_accel[self.n // self.threads, self.threads](self.pos, acc, self.n, self.EPS2)), \
            (lambda: acc)


class Bitonic(Bench):
    name, cu, unit = "bitonic_sort", "bitonic.cu", None
    sizes = {"full": dict(n=1 << 20), "quick": dict(n=1 << 12), "sim": dict(n=256)}

    def setup(self, n):
        self.n = n
        self.x = self.rng.standard_normal(n).astype(np.float32)
        self.ref = np.sort(self.x)
        self.steps = [(j, k) for k in (1 << e for e in range(1, n.bit_length()))
                      for j in (k >> s for s in range(1, k.bit_length()))]
        self.threads = min(256, n)
        self.work = len(self.steps) * n // 2        # compare-exchanges

    def rate(self, seconds):
        return f"{self.n / seconds / 1e6:.1f} Mkeys/s"

    def check(self, out):
        _equal(out, self.ref, "sorted")

    def anycuda(self, g):
        k = g.fn(self.cu, "bitonic_step")
        d = g.ac.empty(self.n, np.float32)
        grid = (self.n // self.threads,)
        steps = [(np.int32(j), np.int32(k_)) for j, k_ in self.steps]

        def run():
            d.set(self.x)              # the unsorted input again, every run
            for j, k_ in steps:
                k(grid, (self.threads,), (d, j, k_))
            g.sync()
        return run, d.get

    def c(self, lib):
        d = np.empty_like(self.x)

        def run():
            np.copyto(d, self.x)
            lib.bitonic_sort(p(d), self.n)
        return run, lambda: d

    def pocl(self, cl):
        d = cl.buffer(nbytes=self.x.nbytes)
        steps = [(np.int32(j), np.int32(k_)) for j, k_ in self.steps]

        def run():
            cl.copy_in(d, self.x)
            for j, k_ in steps:
                cl.launch("bitonic_step", (self.n,), (self.threads,), d, j, k_)
            cl.finish()
        return run, lambda: cl.read(d, self.n, np.float32)

    def sim(self, s):
        d = np.empty_like(self.x)

        def run():
            np.copyto(d, self.x)
            for j, k_ in self.steps:
                s.bitonic_step[self.n // self.threads, self.threads](d, j, k_)
        return run, lambda: d


BENCHMARKS = [Saxpy, VectorAdd, Sgemm, Reduce, Histogram, Stencil, Transpose, Scan, Softmax,
              LayerNorm, NBody, Bitonic]
BY_NAME = {b.name: b for b in BENCHMARKS}
