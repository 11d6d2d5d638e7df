"""The idiom batch of the benchmark suite: computations of suite.py written the other ways people
write them (issue: the suite covers the idioms, not one spelling). Streaming kernels as
one-thread-per-element with an `if (i < n)` guard, with an early `return`, and as grid-stride
loops, in float, double and half, int and size_t indices; sums as the shared-memory tree with
a second pass, as warp shuffles with a second pass, as cub::BlockReduce with a second pass and
as one atomicAdd per element; inclusive scans as Hillis-Steele and as Blelloch's
work-efficient scan; naive and tiled transposes; the 5-point stencil with 16x16 and 32x8
blocks, with and without a shared-memory halo; the SGEMM as 16x16 and 32x32 shared tiles of
one output a thread, as 32x8 threads for a 32x32 tile and as 4x4 register blocks of a 64x64
tile, all guarding the edges; histograms with global atomics (a grid-stride loop and a thread
an element) and with per-block shared bins. And computations the suite lacks, in their common
spellings: CSR sparse matrix-vector products with a thread a row and with a warp a row
(shuffle sum); gather and scatter through a permutation; a 3-D 7-point stencil with a thread a
point in 32x4x4 blocks and with 32x8 threads marching along z, from global memory and with the
plane in shared memory; Black-Scholes prices with a guard and as a grid-stride loop; llm.c's
GELU with a guard, as a grid-stride loop and as that loop built with -use_fast_math; a column
broadcast by a row through `i / C` and `i % C` (CuPy's index arithmetic), with a guard and as
a grid-stride loop. Three modules hold the rest: idioms_rows.py (softmax and layernorm as
llm.c's kernels write them), idioms_sort.py (sorting networks and radix sorts) and
idioms_compute.py (n-body, Monte Carlo with curand, convolution).

Each is a suite.Bench with the `kernel` it launches and its main `block` shape (same `(run, result)` protocol, checked against numpy) with a CUDA C++
implementation (kernels/cuda/idioms_*.cu) and the hand-written OpenMP C loop it competes
with (kernels/idioms.c, or reference.c's where the computation is the same), and the same
algorithm in OpenCL C for PoCL (kernels/idioms.cl, idioms_more.cl; none for half or the radix
sort). No simulator versions yet: run.py skips the columns a benchmark does not
implement.
"""
from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite  # noqa: E402  (benchmarks/ is a folder of scripts)
from suite import Bench, _close, _equal, cdiv, p, variants  # noqa: E402

STREAM_THREADS = 256
STRIDE_BLOCKS = 1024            # the grid of a grid-stride loop: fixed, whatever n is


# ------------------------------------------------------------------ streaming

class Streaming(Bench):
    """z = f(x, y) over n elements; subclasses name the operation, type, index and spelling."""
    cu, unit = "idioms_streaming.cu", "GB/s"
    sizes = {"full": dict(n=1 << 24), "quick": dict(n=100_003)}
    op, dtype, index, spelling = "", np.float32, ctypes.c_int, "guard"
    arrays = 2                  # arrays read or written per element, for the bytes moved
    memory_bound = True
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
            _close(out, self.ref, *TOLERANCES[self.tag], self.name)

    def scalar(self):
        return (ctypes.c_double if self.dtype == np.float64 else ctypes.c_float)(self.a)

    def kernel_scalar(self):
        return np.float32(self.a) if self.dtype == np.float16 else self.a

    block = (STREAM_THREADS,)

    def grid(self):
        return (STRIDE_BLOCKS,) if self.spelling == "stride" else (cdiv(self.n, STREAM_THREADS),)

    def output_is_y(self):
        return self.op == "saxpy"

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        x, y = g.ac.asarray(self.x), g.ac.asarray(self.y0)
        z = g.ac.empty(self.n, self.dtype)
        z.set(np.full(self.n, np.nan, self.dtype))          # poisoned: every element must be written
        n = np.uint64(self.n) if self.index is ctypes.c_size_t else np.int32(self.n)
        args = (n, self.kernel_scalar(), x, y, z)

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

    def pocl(self, cl):
        # (the `return` spelling is the guard's in OpenCL: kernels/idioms.cl)
        spelling = "stride" if self.spelling == "stride" else "guard"
        x, y = cl.buffer(self.x), cl.buffer(self.y0)
        z = cl.buffer(np.full(self.n, np.nan, self.dtype))
        threads = STRIDE_BLOCKS * STREAM_THREADS if spelling == "stride" else cdiv(self.n, STREAM_THREADS) * STREAM_THREADS
        name, args = f"{self.op}_{self.tag}_{spelling}", (np.int64(self.n), self.dtype(self.a), x, y, z)

        def run():                              # (saxpy accumulates into y, as the others do)
            cl.launch(name, (threads,), (STREAM_THREADS,), *args)
            cl.finish()
        return run, lambda: cl.read(y if self.output_is_y() else z, self.n, self.dtype)


OPERATIONS = {                  # op: (expected from (a, x, y), arrays moved, index type)
    "copy": (lambda a, x, y: x, 2, ctypes.c_int),
    "scale": (lambda a, x, y: a * x, 2, ctypes.c_size_t),
    "saxpy": (lambda a, x, y: a * x + y, 3, ctypes.c_int),
    "triad": (lambda a, x, y: x + a * y, 3, ctypes.c_size_t),
}
TYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16}
SPELLINGS = {"f32": ("guard", "stride", "return"), "f64": ("guard", "stride"), "f16": ("guard", "stride")}
# (rtol, atol) against numpy's f64 result of the same inputs: half rounds after each operation
TOLERANCES = {"f32": (1e-6, 0), "f64": (1e-14, 0), "f16": (2e-3, 1e-3)}


def streaming_benchmarks():
    out = []
    for op, (f, arrays, index) in OPERATIONS.items():
        for tag, dtype in TYPES.items():
            for spelling in SPELLINGS[tag]:
                extra = {"pocl": Bench.pocl} if tag == "f16" else {}       # (no OpenCL half here)
                out.append(type(f"Streaming_{op}_{tag}_{spelling}", (Streaming,), dict(
                    name=f"{op}_{tag}_{spelling}", kernel=f"{op}_{tag}_{spelling}", op=op, tag=tag,
                    dtype=dtype, index=index, spelling=spelling, arrays=arrays, repeats_exactly=op != "saxpy",
                    expected=lambda self, f=f: f(self.a, self.x, self.y0), **extra)))
    return out


# ------------------------------------------------------------------ reductions

class Sum(Bench):
    """The sum of n numbers; the C reference is an OpenMP reduction."""
    cu, unit = "idioms_reduce.cu", "GB/s"
    sizes = {"full": dict(n=1 << 24), "quick": dict(n=100_003)}
    dtype = np.float32
    memory_bound = True
    rtol = 1e-5

    def setup(self, n):
        self.n = n
        if self.dtype == np.int32:
            self.x = self.rng.integers(0, 10, n, dtype=np.int32)      # the total fits an int
        else:
            self.x = self.rng.random(n, dtype=self.dtype)
        self.ref = self.x.astype(np.float64).sum()
        self.work = self.x.itemsize * n

    def check(self, out):
        if self.dtype == np.int32:
            if int(out) != int(self.ref):
                raise AssertionError(f"sum {int(out)} != numpy's {int(self.ref)}")
        elif not np.isclose(float(out), self.ref, rtol=self.rtol, atol=0):
            raise AssertionError(f"sum {float(out)} != numpy's {self.ref} (rtol {self.rtol})")

    def c(self, lib):
        name, result = {np.int32: ("reduce_sum_i32", ctypes.c_int), np.float64: ("reduce_sum_f64", ctypes.c_double),
                        np.float32: ("reduce_sum", ctypes.c_float)}[self.dtype]
        fn = getattr(lib, name)
        fn.restype = result
        box = [None]

        def run():
            box[0] = fn(p(self.x), self.n)
        return run, lambda: box[0]


class ReduceTree(Sum):
    name = kernel = "reduce_tree"
    THREADS = 256
    block = (THREADS,)

    def passes(self):
        """The lengths each pass reads: n, its blocks' partials, ... down to one."""
        sizes = [self.n]
        while sizes[-1] > 1:
            sizes.append(cdiv(sizes[-1], self.THREADS))
        return sizes

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        x = g.ac.asarray(self.x)
        sizes = self.passes()
        bufs = [x] + [g.ac.empty(m, self.dtype) for m in sizes[1:]]
        shared = self.x.itemsize * self.THREADS

        def run():
            for src, dst, m in zip(bufs, bufs[1:], sizes):
                k((cdiv(m, self.THREADS),), (self.THREADS,), (src, dst, np.int32(m)), shared_mem=shared)
            g.sync()
        return run, lambda: bufs[-1].get()[0]

    def pocl(self, cl):
        sizes, t = self.passes(), self.THREADS
        bufs = [cl.buffer(self.x)] + [cl.buffer(np.full(m, np.nan, np.float32)) for m in sizes[1:]]
        shared = cl.local(4 * t)

        def run():
            for src, dst, m in zip(bufs, bufs[1:], sizes):
                cl.launch("idiom_reduce_tree", (cdiv(m, t) * t,), (t,), src, dst, np.int32(m), shared)
            cl.finish()
        return run, lambda: cl.read(bufs[-1], 1, np.float32)[0]


class ReduceTreeF64(ReduceTree):
    """The same tree in double (no OpenCL double here); C: an OpenMP reduction in double."""
    name = kernel = "reduce_tree_f64"
    dtype, rtol = np.float64, 1e-12
    pocl = Bench.pocl


class ReduceTreeWarpSync(ReduceTree):
    """The tree with a warp-synchronous tail through volatile shared memory (no OpenCL
    version: OpenCL has no warps to be in step)."""
    name = kernel = "reduce_tree_warpsync"
    pocl = Bench.pocl


class ReduceShfl(Sum):
    name = kernel = "reduce_shfl"
    THREADS, MAX_BLOCKS = 512, 1024
    SECOND_PASS_THREADS = 1024      # one block of them sums the partials
    block = (THREADS,)

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        x = g.ac.asarray(self.x)
        blocks = min(cdiv(self.n, self.THREADS), self.MAX_BLOCKS)
        part = g.ac.empty(blocks, np.float32)

        def run():
            k((blocks,), (self.THREADS,), (x, part, np.int32(self.n)))
            k((1,), (self.SECOND_PASS_THREADS,), (part, part, np.int32(blocks)))
            g.sync()
        return run, lambda: part.get()[0]

    def pocl(self, cl):
        name, t, t2 = f"idiom_{self.kernel}", self.THREADS, self.SECOND_PASS_THREADS
        x = cl.buffer(self.x)
        blocks = min(cdiv(self.n, t), self.MAX_BLOCKS)
        part = cl.buffer(np.full(blocks, np.nan, np.float32))

        def run():
            cl.launch(name, (blocks * t,), (t,), x, part, np.int32(self.n))
            cl.launch(name, (t2,), (t2,), part, part, np.int32(blocks))
            cl.finish()
        return run, lambda: cl.read(part, 1, np.float32)[0]


class ReduceCub(ReduceShfl):
    """The same two passes with cub::BlockReduce (its block size is a template argument)."""
    name = kernel = "reduce_cub"
    THREADS = SECOND_PASS_THREADS = 256
    block = (THREADS,)


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

    def pocl(self, cl):
        x, out = cl.buffer(self.x), cl.buffer(np.zeros(1, self.dtype))
        zero = np.zeros(1, self.dtype)

        def run():
            cl.copy_in(out, zero)
            cl.launch(f"idiom_{self.kernel}", (cdiv(self.n, 256) * 256,), self.block, x, out, np.int32(self.n))
            cl.finish()
        return run, lambda: cl.read(out, 1, self.dtype)[0]


class ReduceAtomicF32(ReduceAtomic):
    name = kernel = "reduce_atomic_f32"
    dtype = np.float32


class ReduceAtomicI32(ReduceAtomic):
    name = kernel = "reduce_atomic_i32"
    dtype = np.int32


# ------------------------------------------------------------------ scans

class ScanIdiom(suite.Scan):
    """suite.Scan's inclusive sum by a textbook kernel scanning `per_block` elements a block
    with `block` threads; the block totals are scanned by the same kernel, level by level,
    then added back down (kernels/cuda/idioms_scan.cu)."""
    sim = Bench.sim
    cu, kernel, per_block, block = "idioms_scan.cu", "", 512, (512,)

    def levels(self):
        """The lengths each level scans: n, then its blocks' totals, ... down to one block."""
        sizes = [self.n]
        while sizes[-1] > self.per_block:
            sizes.append(cdiv(sizes[-1], self.per_block))
        return sizes

    def anycuda(self, g):
        scan, add = g.fn(self.cu, self.kernel), g.fn(self.cu, "scan_add_totals")
        sizes = self.levels()
        x = g.ac.asarray(self.x)
        y = g.ac.asarray(np.full(self.n, -1, np.int32))     # poisoned: the inputs are >= 0
        totals = [g.ac.empty(cdiv(m, self.per_block), np.int32) for m in sizes]
        data = [y] + totals[:-1]                            # level k scans data[k] in place
        per_block = np.int32(self.per_block)

        def run():
            scan((cdiv(self.n, self.per_block),), self.block, (x, y, totals[0], np.int32(self.n)))
            for k in range(1, len(sizes)):
                scan((cdiv(sizes[k], self.per_block),), self.block, (data[k], data[k], totals[k], np.int32(sizes[k])))
            for k in reversed(range(len(sizes) - 1)):
                add((cdiv(sizes[k], self.per_block),), (256,), (data[k], data[k + 1], np.int32(sizes[k]), per_block))
            g.sync()
        return run, y.get

    def pocl(self, cl):
        name, sizes, t = f"idiom_{self.kernel}", self.levels(), self.block[0]
        x = cl.buffer(self.x)
        y = cl.buffer(np.full(self.n, -1, np.int32))                # poisoned: the inputs are >= 0
        totals = [cl.buffer(nbytes=4 * cdiv(m, self.per_block)) for m in sizes]
        data = [y] + totals[:-1]                                    # level k scans data[k] in place
        per_block = np.int32(self.per_block)

        def groups(m, threads):
            return (cdiv(m, self.per_block) * threads,)

        def run():
            cl.launch(name, groups(self.n, t), self.block, x, y, totals[0], np.int32(self.n))
            for k in range(1, len(sizes)):
                cl.launch(name, groups(sizes[k], t), self.block, data[k], data[k], totals[k], np.int32(sizes[k]))
            for k in reversed(range(len(sizes) - 1)):
                cl.launch("idiom_scan_add_totals", groups(sizes[k], 256), (256,), data[k], data[k + 1],
                          np.int32(sizes[k]), per_block)
            cl.finish()
        return run, lambda: cl.read(y, self.n, np.int32)


SCANS = variants(ScanIdiom, scan_hillis_steele=dict(per_block=512, block=(512,)),
                 scan_blelloch=dict(per_block=512, block=(256,)))


# ------------------------------------------------------------------ transposes and stencils

class Reshaped:
    """A computation (and its C reference; a suite kernel's, or a base class's) run by
    another CUDA kernel and block shape: `kernel`, `block` (threads) and `tile` (elements per
    block, x first; as many as the grid has dimensions, `extent` may name more). The kernels
    take (inputs, output, extents); `operands` names them. PoCL runs `cl_kernel`, the same
    kernel in OpenCL (idiom_<kernel> in kernels/idioms_more.cl unless named), on the same shapes.
    The output is of `dtype`."""
    sim = Bench.sim             # the parent's would run the parent's kernel
    kernel, block, tile, cl_kernel = "", (16, 16), (16, 16), ""
    dtype = np.float32

    def grid(self):
        return tuple(cdiv(e, t) for e, t in zip(self.extent(), self.tile))

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        inputs, out_shape, extents = self.operands()
        srcs = [g.ac.asarray(host) for host in inputs]
        dst = g.ac.asarray(np.full(out_shape, np.nan, self.dtype))    # poisoned: all must be written
        args = (*srcs, dst, *(np.int32(e) for e in extents))

        def run():
            k(self.grid(), self.block, args)
            g.sync()
        return run, dst.get

    def pocl(self, cl):
        inputs, out_shape, extents = self.operands()
        srcs = [cl.buffer(host) for host in inputs]
        dst = cl.buffer(np.full(out_shape, np.nan, np.float32))
        args = (*srcs, dst, *(np.int32(e) for e in extents))
        name = self.cl_kernel or f"idiom_{self.kernel}"
        size = tuple(n * t for n, t in zip(self.grid(), self.block))

        def run():
            cl.launch(name, size, self.block, *args)
            cl.finish()
        return run, lambda: cl.read(dst, out_shape, np.float32)


class TransposeIdiom(Reshaped, suite.Transpose):
    cu = "idioms_transpose.cu"

    def extent(self):
        return self.cols, self.rows

    def operands(self):
        return (self.a,), (self.cols, self.rows), (self.rows, self.cols)


class StencilIdiom(Reshaped, suite.Stencil):
    def extent(self):
        return self.nx, self.ny

    def operands(self):
        return (self.u,), (self.ny, self.nx), (self.nx, self.ny)


def reshaped(base, name, cu, kernel, block, tile=None, cl_kernel=""):
    return type(name, (base,), dict(name=name, cu=cu, kernel=kernel, block=block, tile=tile or block,
                                    cl_kernel=cl_kernel))


RESHAPED = [
    reshaped(TransposeIdiom, "transpose_naive_16x16", "idioms_transpose.cu", "transpose_naive", (16, 16)),
    reshaped(TransposeIdiom, "transpose_naive_32x8", "idioms_transpose.cu", "transpose_naive", (32, 8)),
    reshaped(TransposeIdiom, "transpose_tiled_32x32", "idioms_transpose.cu", "transpose_tiled32", (32, 32)),
    reshaped(StencilIdiom, "stencil5_16x16", "stencil.cu", "stencil5", (16, 16), cl_kernel="stencil5"),
    reshaped(StencilIdiom, "stencil5_smem_16x16", "idioms_stencil.cu", "stencil5_smem_16x16", (16, 16)),
    reshaped(StencilIdiom, "stencil5_smem_32x8", "idioms_stencil.cu", "stencil5_smem_32x8", (32, 8)),
]


# ------------------------------------------------------------------ SGEMM

class SgemmIdiom(Reshaped, suite.Sgemm):
    """suite.Sgemm's matrices, check and C reference (reference.c's sgemm) with tiled kernels
    that guard the edges: the quick size is not a multiple of any tile."""
    cu = "idioms_sgemm.cu"
    sizes = {"full": dict(m=1024), "quick": dict(m=100)}

    def extent(self):
        return self.m, self.m

    def operands(self):
        return (self.A, self.B), (self.m, self.m), (self.m,)


class TypedGemmIdiom(SgemmIdiom):
    """SgemmIdiom in another type (`dtype`): the same matrices rounded to it, checked against
    numpy's float64 product of the rounded matrices with `tolerance` (rtol, atol per sqrt(m));
    C: idioms.c's `c_function`. No OpenCL version (PoCL's half is not there; no fp64 kernel
    written), no simulator run."""
    pocl = Bench.pocl
    dtype, tolerance, c_function = np.float64, (1e-9, 1e-9), "dgemm"

    def setup(self, m):
        super().setup(m)
        self.A, self.B = self.A.astype(self.dtype), self.B.astype(self.dtype)
        self.ref = self.A.astype(np.float64) @ self.B.astype(np.float64)

    def check(self, out):
        rtol, atol = self.tolerance
        _close(np.asarray(out, np.float64), self.ref, rtol, atol * np.sqrt(self.m), "C")


class HgemmIdiom(TypedGemmIdiom):
    """Half matrices multiplied as people write it without tensor cores: 16 x 16 half tiles in
    shared memory, products summed in float, each output rounded to half once (2^-11 relative).
    C: idioms.c's hgemm, the same in _Float16 and float."""
    dtype, tolerance, c_function = np.float16, (2e-3, 2e-3), "hgemm"


SGEMMS = [
    reshaped(HgemmIdiom, "hgemm_tiled_16x16", "idioms_sgemm.cu", "hgemm_tiled_16x16", (16, 16)),
    reshaped(TypedGemmIdiom, "dgemm_tiled_16x16", "idioms_sgemm.cu", "dgemm_tiled_16x16", (16, 16)),
    reshaped(SgemmIdiom, "sgemm_tiled_16x16", "idioms_sgemm.cu", "sgemm_tiled_16x16", (16, 16)),
    reshaped(SgemmIdiom, "sgemm_tiled_32x32", "idioms_sgemm.cu", "sgemm_tiled_32x32", (32, 32)),
    reshaped(SgemmIdiom, "sgemm_tiled_32x8", "idioms_sgemm.cu", "sgemm_tiled_32x8", (32, 8), (32, 32)),
    reshaped(SgemmIdiom, "sgemm_regblock_64x64", "idioms_sgemm.cu", "sgemm_regblock_64x64", (16, 16), (64, 64)),
]


# ------------------------------------------------------------------ sparse, indexed and atomic

class Spmv(Bench):
    """y = A x, A in CSR with 16 to 64 nonzeros a row at random columns (sorted within a row,
    as CSR builders leave them): the loads of x go anywhere. `rows` per block of 256 threads:
    one a thread (scalar) or one a warp (vector). C: idioms.c's spmv_csr, a row per iteration."""
    cu, unit = "idioms_spmv.cu", "GB/s"
    sizes = {"full": dict(n=1 << 18), "quick": dict(n=3000)}
    block, rows = (256,), 256

    def setup(self, n):
        self.n = n
        lengths = self.rng.integers(16, 65, n)
        self.rowptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
        row = np.repeat(np.arange(n, dtype=np.int64), lengths)
        self.cols = (np.sort(row * n + self.rng.integers(0, n, row.size)) % n).astype(np.int32)
        self.vals = self.rng.standard_normal(row.size, dtype=np.float32)
        self.x = self.rng.random(n, dtype=np.float32)
        self.ref = np.add.reduceat(self.vals.astype(np.float64) * self.x[self.cols], self.rowptr[:-1])
        self.work = 12 * row.size + 8 * n           # value, column and x per nonzero; row pointer and y per row

    def check(self, out):
        _close(out, self.ref, 1e-4, 1e-4, self.name)     # float sums of at most 64 terms

    def inputs(self):
        return self.rowptr, self.cols, self.vals, self.x

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        y = g.ac.asarray(np.full(self.n, np.nan, np.float32))         # poisoned: every row must be written
        args = (np.int32(self.n), *(g.ac.asarray(a) for a in self.inputs()), y)
        grid = (cdiv(self.n, self.rows),)

        def run():
            k(grid, self.block, args)
            g.sync()
        return run, y.get

    def c(self, lib):
        y = np.full(self.n, np.nan, np.float32)
        return (lambda: lib.spmv_csr(self.n, *map(p, self.inputs()), p(y))), (lambda: y)

    def pocl(self, cl):
        inputs = [cl.buffer(a) for a in self.inputs()]
        y = cl.buffer(np.full(self.n, np.nan, np.float32))
        threads = cdiv(self.n, self.rows) * 256
        local = (cl.local(256 * 4),) if self.kernel == "spmv_csr_vector" else ()

        def run():
            cl.launch(self.kernel, (threads,), (256,), np.int32(self.n), *inputs, y, *local)
            cl.finish()
        return run, lambda: cl.read(y, self.n, np.float32)


SPMVS = variants(Spmv, spmv_csr_scalar={}, spmv_csr_vector=dict(rows=256 // 32))


class HistogramIdiom(suite.Histogram):
    """suite.Histogram's skewed bytes and C reference (reference.c's histogram256, which zeroes
    its bins as each run here does) with the kernels of idioms_histogram.cu: the grid-stride
    loops on the same grid, the one-thread-an-element kernel on a grid that covers the data."""
    cu = "idioms_histogram.cu"
    sim = Bench.sim
    block = (256,)

    one_thread_each = False     # a grid that covers the data, one element a thread

    @property
    def grid(self) -> int:
        return cdiv(self.n, 256) if self.one_thread_each else self.blocks

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        data, bins = g.ac.asarray(self.data), g.ac.asarray(np.full(256, 0xDEADBEEF, np.uint32))
        zero = np.zeros(256, np.uint32)
        args = (data, bins, np.int32(self.n))

        def run():
            bins.set(zero)
            k((self.grid,), self.block, args)
            g.sync()
        return run, bins.get

    def pocl(self, cl):
        data, bins = cl.buffer(self.data), cl.buffer(np.full(256, 0xDEADBEEF, np.uint32))
        zero = np.zeros(256, np.uint32)

        def run():
            cl.copy_in(bins, zero)
            cl.launch(f"idiom_{self.kernel}", (self.grid * 256,), self.block, data, bins, np.int32(self.n))
            cl.finish()
        return run, lambda: cl.read(bins, 256, np.uint32)


HISTOGRAMS = variants(HistogramIdiom, histogram_global_atomics={}, histogram_shared_atomics={},
                      histogram_global_thread=dict(one_thread_each=True))


class Indexed(Bench):
    """Gather (out = x[idx]) and scatter (out[idx] = x), one element a thread, idx a random
    permutation: one side streams, the other lands anywhere. C: idioms.c's loop of that name."""
    cu, unit = "idioms_gather.cu", "GB/s"
    sizes = {"full": dict(n=1 << 24), "quick": dict(n=100_003)}
    block = (STREAM_THREADS,)

    def setup(self, n):
        self.n = n
        self.x = self.rng.random(n, dtype=np.float32)
        self.idx = self.rng.permutation(n).astype(np.int32)
        self.ref = self.expected()
        self.work = 12 * n

    def expected(self):
        raise NotImplementedError

    def check(self, out):
        _equal(out, self.ref, self.name)

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        out = g.ac.asarray(np.full(self.n, np.nan, np.float32))       # poisoned: all must be written
        args = (np.int32(self.n), g.ac.asarray(self.idx), g.ac.asarray(self.x), out)
        grid = (cdiv(self.n, STREAM_THREADS),)

        def run():
            k(grid, self.block, args)
            g.sync()
        return run, out.get

    def c(self, lib):
        fn, out = getattr(lib, self.kernel), np.full(self.n, np.nan, np.float32)
        return (lambda: fn(self.n, p(self.idx), p(self.x), p(out))), (lambda: out)

    def pocl(self, cl):
        idx, x = cl.buffer(self.idx), cl.buffer(self.x)
        out = cl.buffer(np.full(self.n, np.nan, np.float32))

        def run():
            cl.launch(self.kernel, (cdiv(self.n, STREAM_THREADS) * STREAM_THREADS,), (STREAM_THREADS,),
                      np.int32(self.n), idx, x, out)
            cl.finish()
        return run, lambda: cl.read(out, self.n, np.float32)


INDEXED = variants(Indexed, gather=dict(expected=lambda self: self.x[self.idx]),
                   scatter=dict(expected=lambda self: self.x[np.argsort(self.idx)]))


class Embedding(Bench):
    """An LLM's token and position embeddings summed (GPT-2's encoder: B sequences of T tokens,
    C channels, a vocabulary of V rows): a thread per element whose row, position and channel
    come from divisions of the flat index by the runtime T and C (llm.c's form), or a block per
    token looping over its channels. C: idioms.c's `embedding`, a token row at a time."""
    cu, unit = "idioms_gather.cu", "GB/s"
    sizes = {"full": dict(B=8, T=1024, C=768, V=8192), "quick": dict(B=2, T=37, C=40, V=50)}
    memory_bound = True

    def setup(self, B, T, C, V):
        self.B, self.T, self.C = B, T, C
        self.tokens = self.rng.integers(0, V, (B, T), dtype=np.int32)
        self.wte = self.rng.random((V, C), dtype=np.float32)
        self.wpe = self.rng.random((T, C), dtype=np.float32)
        self.ref = self.wte[self.tokens] + self.wpe
        self.work = 12 * B * T * C        # an element written, its token's and its position's read

    def check(self, out):
        _equal(out, self.ref, self.name)

    def shape(self):
        """(grid, block) of the launch, and the global size PoCL takes for it."""
        if self.kernel == "embedding_rows":
            return (1, self.B * self.T), (STREAM_THREADS,), (STREAM_THREADS, self.B * self.T), (STREAM_THREADS, 1)
        n = cdiv(self.B * self.T * self.C, STREAM_THREADS)
        return (n,), (STREAM_THREADS,), (n * STREAM_THREADS,), (STREAM_THREADS,)

    def _args(self, out, put):
        return (out, *(put(a) for a in (self.tokens, self.wte, self.wpe)), np.int32(self.B), np.int32(self.T),
                np.int32(self.C))

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        out = g.ac.asarray(np.full(self.ref.shape, np.nan, np.float32))      # poisoned: all must be written
        args, (grid, block, _, _) = self._args(out, g.ac.asarray), self.shape()

        def run():
            k(grid, block, args)
            g.sync()
        return run, out.get

    def c(self, lib):
        out = np.full(self.ref.shape, np.nan, np.float32)
        return (lambda: lib.embedding(p(out), p(self.tokens), p(self.wte), p(self.wpe), self.B, self.T, self.C)), \
            (lambda: out)

    def pocl(self, cl):
        out = cl.buffer(np.full(self.ref.shape, np.nan, np.float32))
        args, (_, _, size, local) = self._args(out, cl.buffer), self.shape()

        def run():
            cl.launch(self.kernel, size, local, *args)
            cl.finish()
        return run, lambda: cl.read(out, self.ref.shape, np.float32)


EMBEDDINGS = variants(Embedding, embedding_flat={}, embedding_rows={})


# ------------------------------------------------------------------ 3-D stencil

class Stencil7(Reshaped, Bench):
    """The 7-point Jacobi step on an nx x ny x nz grid (x fastest): interior points become
    0.4 u + 0.1 (the six neighbours' sum), boundary points are copied. One kernel a thread per
    point in 3-D blocks, the others a thread per (x, y) marching along z (reading global memory,
    or the plane through shared memory); idioms.c's stencil7."""
    cu, unit = "idioms_stencil3d.cu", "GB/s"
    sizes = {"full": dict(nz=256, ny=256, nx=256), "quick": dict(nz=17, ny=18, nx=20)}

    def setup(self, nz, ny, nx):
        self.nx, self.ny, self.nz = nx, ny, nz
        u = self.u = self.rng.random((nz, ny, nx), dtype=np.float32)
        i = slice(1, -1)
        self.ref = u.copy()
        self.ref[i, i, i] = np.float32(0.4) * u[i, i, i] + np.float32(0.1) * (
            ((u[i, i, :-2] + u[i, i, 2:]) + (u[i, :-2, i] + u[i, 2:, i])) + (u[:-2, i, i] + u[2:, i, i]))
        self.work = 8 * u.size

    def check(self, out):
        _close(out, self.ref, 1e-6, 1e-7, self.name)

    def extent(self):
        return self.nx, self.ny, self.nz

    def operands(self):
        return (self.u,), self.u.shape, self.extent()

    def c(self, lib):
        v = np.full_like(self.u, np.nan)
        return (lambda: lib.stencil7(p(self.u), p(v), *self.extent())), (lambda: v)


STENCILS3D = [
    reshaped(Stencil7, "stencil7_3d_block", "idioms_stencil3d.cu", "stencil7_3d_block", (32, 4, 4)),
    reshaped(Stencil7, "stencil7_zloop", "idioms_stencil3d.cu", "stencil7_zloop", (32, 8)),
    reshaped(Stencil7, "stencil7_smem_zloop", "idioms_stencil3d.cu", "stencil7_smem_zloop", (32, 8)),
]


# ------------------------------------------------------------------ Black-Scholes

def normal_cdf(d):
    """Abramowitz and Stegun's 26.2.17 (error under 7.5e-8), the approximation the kernels use."""
    k = 1 / (1 + 0.2316419 * np.abs(d))
    poly = k * (0.319381530 + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429))))
    tail = np.exp(-0.5 * d * d) * poly / np.sqrt(2 * np.pi)
    return np.where(d > 0, 1 - tail, tail)


def black_scholes(S, X, T, r, v):
    """(call, put) prices of European options: spot S, strike X, T years, rate r, volatility v."""
    sqrt_t = np.sqrt(T)
    d1 = (np.log(S / X) + (r + 0.5 * v * v) * T) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    n1, n2, disc = normal_cdf(d1), normal_cdf(d2), X * np.exp(-r * T)
    return S * n1 - disc * n2, disc * (1 - n2) - S * (1 - n1)


class BlackScholes(Bench):
    """Call and put prices of n options in float (expf, logf, sqrtf: arithmetic, not memory,
    bound, so the rate is options a second), one option a thread behind a guard or in a
    grid-stride loop; checked against the same formula in float64. C: idioms.c's blackscholes."""
    cu, unit = "idioms_blackscholes.cu", None
    sizes = {"full": dict(n=1 << 22), "quick": dict(n=100_003)}
    R, V = np.float32(0.02), np.float32(0.30)
    block, spelling = (STREAM_THREADS,), "guard"

    def setup(self, n):
        self.n = n
        self.S = self.rng.uniform(5, 30, n).astype(np.float32)
        self.X = self.rng.uniform(1, 100, n).astype(np.float32)
        self.T = self.rng.uniform(0.25, 10, n).astype(np.float32)
        S, X, T = (a.astype(np.float64) for a in (self.S, self.X, self.T))
        self.ref = black_scholes(S, X, T, float(self.R), float(self.V))
        self.work = n                   # options

    def rate(self, seconds):
        return f"{self.n / seconds / 1e6:.1f} Moptions/s"

    def check(self, out):
        for what, got, want in zip(("call", "put"), out, self.ref):
            _close(got, want, 1e-4, 1e-4, f"{self.name} {what}")   # prices up to 100: float's absolute error

    def grid(self):
        return (cdiv(self.n, STREAM_THREADS),) if self.spelling == "guard" else (STRIDE_BLOCKS,)

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        call, put = (g.ac.asarray(np.full(self.n, np.nan, np.float32)) for _ in range(2))     # poisoned
        args = (np.int32(self.n), *(g.ac.asarray(a) for a in (self.S, self.X, self.T)), self.R, self.V, call, put)

        def run():
            k(self.grid(), self.block, args)
            g.sync()
        return run, lambda: (call.get(), put.get())

    def pocl(self, cl):
        call, put = (cl.buffer(np.full(self.n, np.nan, np.float32)) for _ in range(2))     # poisoned
        args = (np.int32(self.n), *(cl.buffer(a) for a in (self.S, self.X, self.T)), self.R, self.V, call, put)
        size = (self.grid()[0] * STREAM_THREADS,)

        def run():
            cl.launch(f"idiom_{self.kernel}", size, self.block, *args)
            cl.finish()
        return run, lambda: (cl.read(call, self.n, np.float32), cl.read(put, self.n, np.float32))

    def c(self, lib):
        call, put = np.full(self.n, np.nan, np.float32), np.full(self.n, np.nan, np.float32)
        r, v = ctypes.c_float(self.R), ctypes.c_float(self.V)
        return (lambda: lib.blackscholes(self.n, p(self.S), p(self.X), p(self.T), r, v, p(call), p(put))), \
            (lambda: (call, put))


BLACKSCHOLES = variants(BlackScholes, blackscholes={}, blackscholes_stride=dict(spelling="stride"))

# ------------------------------------------------------------------ elementwise

class Gelu(Bench):
    """llm.c's GELU (tanh approximation) of n floats, a thread an element behind a guard or a
    grid-stride loop, the loop also built with -use_fast_math as llm.c builds it (every f32
    operation .ftz, tanhf approximated); checked against float64. C: idioms.c's gelu."""
    cu, unit = "idioms_elementwise.cu", "GB/s"
    sizes = {"full": dict(n=1 << 24), "quick": dict(n=100_003)}
    spelling, options = "guard", ()

    def setup(self, n):
        self.n = n
        self.x = (self.rng.standard_normal(n) * 3).astype(np.float32)
        x = self.x.astype(np.float64)
        self.ref = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
        self.work = 8 * n

    def check(self, out):
        _close(out, self.ref, 1e-5, 1e-5 if self.options else 1e-6, self.name)

    def anycuda(self, g):
        k = g.fn(self.cu, f"gelu_{self.spelling}", self.options)
        x, out = g.ac.asarray(self.x), g.ac.asarray(np.full(self.n, np.nan, np.float32))    # poisoned
        grid = (STRIDE_BLOCKS,) if self.spelling == "stride" else (cdiv(self.n, STREAM_THREADS),)

        def run():
            k(grid, (STREAM_THREADS,), (out, x, np.int32(self.n)))
            g.sync()
        return run, out.get

    def c(self, lib):
        out = np.full(self.n, np.nan, np.float32)
        return (lambda: lib.gelu(self.n, p(self.x), p(out))), (lambda: out)


GELUS = variants(Gelu, gelu_guard={}, gelu_stride=dict(spelling="stride"),
                 gelu_fast_stride=dict(spelling="stride", options=("-use_fast_math",)))


class Broadcast(Bench):
    """A column x broadcast by a row y, out[i] = x[i / C] * y[i % C] over R x C floats (CuPy's
    elementwise index arithmetic), a thread an element or a grid-stride loop. C: idioms.c's
    broadcast, a row at a time."""
    cu, unit = "idioms_elementwise.cu", "GB/s"
    sizes = {"full": dict(R=16384, C=1000), "quick": dict(R=97, C=131)}
    spelling = "guard"
    memory_bound = True

    def setup(self, R, C):
        self.R, self.C = R, C
        self.x = self.rng.random(R, dtype=np.float32)
        self.y = self.rng.random(C, dtype=np.float32)
        self.ref = (self.x[:, None] * self.y[None, :]).ravel()
        self.work = 4 * R * C                 # the output written (x and y stay in cache)

    def check(self, out):
        _equal(out, self.ref, self.name)

    def anycuda(self, g):
        k = g.fn(self.cu, f"broadcast_{self.spelling}")
        n = self.R * self.C
        x, y = g.ac.asarray(self.x), g.ac.asarray(self.y)
        out = g.ac.asarray(np.full(n, np.nan, np.float32))        # poisoned
        grid = (STRIDE_BLOCKS,) if self.spelling == "stride" else (cdiv(n, STREAM_THREADS),)

        def run():
            k(grid, (STREAM_THREADS,), (out, x, y, np.int32(n), np.int32(self.C)))
            g.sync()
        return run, out.get

    def c(self, lib):
        out = np.full(self.R * self.C, np.nan, np.float32)
        return (lambda: lib.broadcast(self.R, self.C, p(self.x), p(self.y), p(out))), (lambda: out)


BROADCASTS = variants(Broadcast, broadcast_guard={}, broadcast_stride=dict(spelling="stride"))

import idioms_rows  # noqa: E402  (the row-wise kernels of LLM training, their own module)
import idioms_sort  # noqa: E402  (sorting networks and radix sorts, their own module)
import idioms_compute  # noqa: E402  (n-body, Monte Carlo, convolution)

BENCHMARKS = (streaming_benchmarks() + [ReduceTree, ReduceTreeF64, ReduceTreeWarpSync, ReduceShfl, ReduceCub, ReduceAtomicF32, ReduceAtomicI32] + SCANS
              + RESHAPED + SGEMMS + SPMVS + HISTOGRAMS + INDEXED + EMBEDDINGS + STENCILS3D + BLACKSCHOLES + GELUS
              + BROADCASTS + idioms_rows.BENCHMARKS + idioms_sort.BENCHMARKS + idioms_compute.BENCHMARKS)
BY_NAME = {b.name: b for b in BENCHMARKS}
