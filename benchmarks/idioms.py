"""The idiom batch of the benchmark suite: computations of suite.py written the other ways
people write them (issue: the suite covers the idioms, not one spelling). Streaming kernels
as one-thread-per-element with an `if (i < n)` guard and as grid-stride loops, in float and
double, int and size_t indices; sums as the shared-memory tree with a second pass, as warp
shuffles with a second pass and as one atomicAdd per element; naive and tiled transposes;
the 5-point stencil with 16x16 and 32x8 blocks, with and without a shared-memory halo.

Each is a suite.Bench with the `kernel` it launches and its main `block` shape (same `(run, result)` protocol, checked against numpy) with a CUDA C++
implementation (kernels/cuda/idioms_*.cu) and the hand-written OpenMP C loop it competes
with (kernels/idioms.c, or reference.c's where the computation is the same). No PoCL or
simulator versions yet: run.py skips the columns a benchmark does not implement.
"""
from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite  # noqa: E402  (benchmarks/ is a folder of scripts)
from suite import Bench, _close, _equal, cdiv, p  # noqa: E402

STREAM_THREADS = 256
STRIDE_BLOCKS = 1024            # the grid of a grid-stride loop: fixed, whatever n is


# ------------------------------------------------------------------ streaming

class Streaming(Bench):
    """z = f(x, y) over n elements; subclasses name the operation, type, index and spelling."""
    cu, unit = "idioms_streaming.cu", "GB/s"
    sizes = {"full": dict(n=1 << 24), "quick": dict(n=100_003)}
    op, dtype, index, spelling = "", np.float32, ctypes.c_int, "guard"
    arrays = 2                  # arrays read or written per element, for the bytes moved
    repeats_exactly = True      # False where a run updates its input (saxpy's y)

    def setup(self, n):
        self.n, self.a = n, self.dtype(2.5)
        self.x = self.rng.random(n).astype(self.dtype)
        self.y0 = self.rng.random(n).astype(self.dtype)
        self.ref = self.expected()
        self.work = self.arrays * self.x.itemsize * n

    def expected(self):
        raise NotImplementedError

    def check(self, out):
        if self.op == "copy":
            _equal(out, self.ref, self.name)
        else:                   # a*x + y may be fused into one rounding, or not
            _close(out, self.ref, 1e-6 if self.dtype == np.float32 else 1e-14, 0, self.name)

    def scalar(self):
        return (ctypes.c_float if self.dtype == np.float32 else ctypes.c_double)(self.a)

    block = (STREAM_THREADS,)

    def grid(self):
        return (cdiv(self.n, STREAM_THREADS),) if self.spelling == "guard" else (STRIDE_BLOCKS,)

    def output_is_y(self):
        return self.op == "saxpy"

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        x, y = g.ac.asarray(self.x), g.ac.asarray(self.y0)
        z = g.ac.empty(self.n, self.dtype)
        z.set(np.full(self.n, np.nan, self.dtype))          # poisoned: every element must be written
        n = np.uint64(self.n) if self.index is ctypes.c_size_t else np.int32(self.n)
        args = (n, self.a, x, y, z)

        def run():
            k(self.grid(), (STREAM_THREADS,), args)
            g.sync()
        return run, (y if self.output_is_y() else z).get

    def c(self, lib):
        fn = getattr(lib, f"{self.op}_{self.tag}")
        y, z = self.y0.copy(), np.full(self.n, np.nan, self.dtype)
        n, a = self.index(self.n), self.scalar()
        # p() inside the call: the closure keeps y and z alive for as long as run is
        return (lambda: fn(n, a, p(self.x), p(y), p(z))), (lambda: y if self.output_is_y() else z)


OPERATIONS = {                  # op: (expected from (a, x, y), arrays moved, index type)
    "copy": (lambda a, x, y: x, 2, ctypes.c_int),
    "scale": (lambda a, x, y: a * x, 2, ctypes.c_size_t),
    "saxpy": (lambda a, x, y: a * x + y, 3, ctypes.c_int),
    "triad": (lambda a, x, y: x + a * y, 3, ctypes.c_size_t),
}
TYPES = {"f32": np.float32, "f64": np.float64}


def streaming_benchmarks():
    out = []
    for op, (f, arrays, index) in OPERATIONS.items():
        for tag, dtype in TYPES.items():
            for spelling in ("guard", "stride"):
                out.append(type(f"Streaming_{op}_{tag}_{spelling}", (Streaming,), dict(
                    name=f"{op}_{tag}_{spelling}", kernel=f"{op}_{tag}_{spelling}", op=op, tag=tag,
                    dtype=dtype, index=index, spelling=spelling, arrays=arrays, repeats_exactly=op != "saxpy",
                    expected=lambda self, f=f: f(self.a, self.x, self.y0))))
    return out


# ------------------------------------------------------------------ reductions

class Sum(Bench):
    """The sum of n numbers; the C reference is an OpenMP reduction."""
    cu, unit = "idioms_reduce.cu", "GB/s"
    sizes = {"full": dict(n=1 << 24), "quick": dict(n=100_003)}
    dtype = np.float32
    rtol = 1e-5

    def setup(self, n):
        self.n = n
        if self.dtype == np.int32:
            self.x = self.rng.integers(0, 10, n, dtype=np.int32)      # the total fits an int
        else:
            self.x = self.rng.random(n, dtype=np.float32)
        self.ref = self.x.astype(np.float64).sum()
        self.work = 4 * n

    def check(self, out):
        if self.dtype == np.int32:
            if int(out) != int(self.ref):
                raise AssertionError(f"sum {int(out)} != numpy's {int(self.ref)}")
        elif not np.isclose(float(out), self.ref, rtol=self.rtol, atol=0):
            raise AssertionError(f"sum {float(out)} != numpy's {self.ref} (rtol {self.rtol})")

    def c(self, lib):
        fn = lib.reduce_sum_i32 if self.dtype == np.int32 else lib.reduce_sum
        fn.restype = ctypes.c_int if self.dtype == np.int32 else ctypes.c_float
        box = [None]

        def run():
            box[0] = fn(p(self.x), self.n)
        return run, lambda: box[0]


class ReduceTree(Sum):
    name = kernel = "reduce_tree"
    THREADS = 256
    block = (THREADS,)

    def anycuda(self, g):
        k = g.fn(self.cu, "reduce_tree")
        x = g.ac.asarray(self.x)
        sizes = [self.n]                            # the lengths each pass reads
        while sizes[-1] > 1:
            sizes.append(cdiv(sizes[-1], self.THREADS))
        bufs = [x] + [g.ac.empty(m, np.float32) for m in sizes[1:]]
        shared = 4 * self.THREADS

        def run():
            for src, dst, m in zip(bufs, bufs[1:], sizes):
                k((cdiv(m, self.THREADS),), (self.THREADS,), (src, dst, np.int32(m)), shared_mem=shared)
            g.sync()
        return run, lambda: bufs[-1].get()[0]


class ReduceShfl(Sum):
    name = kernel = "reduce_shfl"
    THREADS, MAX_BLOCKS = 512, 1024
    block = (THREADS,)              # and one block of 1024 for the second pass

    def anycuda(self, g):
        k = g.fn(self.cu, "reduce_shfl")
        x = g.ac.asarray(self.x)
        blocks = min(cdiv(self.n, self.THREADS), self.MAX_BLOCKS)
        part = g.ac.empty(blocks, np.float32)

        def run():
            k((blocks,), (self.THREADS,), (x, part, np.int32(self.n)))
            k((1,), (1024,), (part, part, np.int32(blocks)))
            g.sync()
        return run, lambda: part.get()[0]


class ReduceAtomic(Sum):
    """One atomicAdd per element into one total (float: in whatever order the threads run,
    so the tolerance is that of a float sum of n terms in any order, not the tree's)."""
    sizes = {"full": dict(n=1 << 22), "quick": dict(n=100_003)}
    rtol = 1e-4
    block = (256,)

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        x, out = g.ac.asarray(self.x), g.ac.zeros(1, self.dtype)
        zero = np.zeros(1, self.dtype)

        def run():
            out.set(zero)
            k((cdiv(self.n, 256),), self.block, (x, out, np.int32(self.n)))
            g.sync()
        return run, lambda: out.get()[0]


class ReduceAtomicF32(ReduceAtomic):
    name = kernel = "reduce_atomic_f32"
    dtype = np.float32


class ReduceAtomicI32(ReduceAtomic):
    name = kernel = "reduce_atomic_i32"
    dtype = np.int32


# ------------------------------------------------------------------ transposes and stencils

class Reshaped:
    """A suite kernel's computation (and C reference) run by another CUDA kernel and block
    shape: `kernel`, `block` ((x, y) threads) and `tile` ((x, y) elements per block). The
    kernels take (input, output, two extents); `operands` names them."""
    pocl = Bench.pocl           # the parent's PoCL and simulator versions run the parent's kernel
    sim = Bench.sim
    kernel, block, tile = "", (16, 16), (16, 16)

    def grid(self):
        cols, rows = self.extent()
        return (cdiv(cols, self.tile[0]), cdiv(rows, self.tile[1]))

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        host, out_shape, extents = self.operands()
        src = g.ac.asarray(host)
        dst = g.ac.asarray(np.full(out_shape, np.nan, np.float32))    # poisoned: all must be written
        args = (src, dst, *(np.int32(e) for e in extents))

        def run():
            k(self.grid(), self.block, args)
            g.sync()
        return run, dst.get


class TransposeIdiom(Reshaped, suite.Transpose):
    cu = "idioms_transpose.cu"

    def extent(self):
        return self.cols, self.rows

    def operands(self):
        return self.a, (self.cols, self.rows), (self.rows, self.cols)


class StencilIdiom(Reshaped, suite.Stencil):
    def extent(self):
        return self.nx, self.ny

    def operands(self):
        return self.u, (self.ny, self.nx), (self.nx, self.ny)


def reshaped(base, name, cu, kernel, block, tile=None):
    return type(name, (base,), dict(name=name, cu=cu, kernel=kernel, block=block, tile=tile or block))


RESHAPED = [
    reshaped(TransposeIdiom, "transpose_naive_16x16", "idioms_transpose.cu", "transpose_naive", (16, 16)),
    reshaped(TransposeIdiom, "transpose_naive_32x8", "idioms_transpose.cu", "transpose_naive", (32, 8)),
    reshaped(TransposeIdiom, "transpose_tiled_32x32", "idioms_transpose.cu", "transpose_tiled32", (32, 32)),
    reshaped(StencilIdiom, "stencil5_16x16", "stencil.cu", "stencil5", (16, 16)),
    reshaped(StencilIdiom, "stencil5_smem_16x16", "idioms_stencil.cu", "stencil5_smem_16x16", (16, 16)),
    reshaped(StencilIdiom, "stencil5_smem_32x8", "idioms_stencil.cu", "stencil5_smem_32x8", (32, 8)),
]

BENCHMARKS = (streaming_benchmarks() + [ReduceTree, ReduceShfl, ReduceAtomicF32, ReduceAtomicI32]
              + RESHAPED)
BY_NAME = {b.name: b for b in BENCHMARKS}
