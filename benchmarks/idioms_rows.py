"""Row-wise idioms of the benchmark suite: the softmax and layernorm of LLM training (suite.py's
`softmax` is a block per row, its `layernorm` a warp per row with plain shuffles) in the other
spellings llm.c and the code written after it use: a softmax with a warp per row, as plain
shuffles and as cooperative groups' online softmax; a layernorm with a warp per row through
cooperative groups (cg::reduce, __ldcs/__stcs) and with a block per row. The computations,
numpy references, checks and OpenMP C loops are suite.py's; only the CUDA kernel
(kernels/cuda/idioms_rows.cu) and its launch shape change. The PoCL versions are the same
kernels in OpenCL (kernels/idioms_more.cl), 32 work-items where CUDA has a warp.
"""
from __future__ import annotations

import numpy as np

import suite
from suite import Bench, cdiv, variants

THREADS = 256


class RowKernel:
    """A suite row computation run by `kernel` with `rows` rows per block of `block` threads."""
    pocl = Bench.pocl           # not the suite's own spelling under this name: the subclasses' own
    sim = Bench.sim
    cu, kernel, rows, block = "idioms_rows.cu", "", 1, (THREADS,)

    def launch(self, g, args):
        k = g.fn(self.cu, self.kernel)
        grid = (cdiv(self.N, self.rows),)

        def run():
            k(grid, self.block, args)
            g.sync()
        return run

    def pocl_launch(self, cl, args):
        name, size = f"idiom_{self.kernel}", (cdiv(self.N, self.rows) * self.block[0],)

        def run():
            cl.launch(name, size, self.block, *args)
            cl.finish()
        return run


def _poisoned(g, shape):
    return g.ac.asarray(np.full(shape, np.nan, np.float32))     # every element must be written


class SoftmaxIdiom(RowKernel, suite.Softmax):
    sizes = {"full": dict(N=8192, C=1024, threads=THREADS), "quick": dict(N=67, C=300, threads=THREADS)}

    def anycuda(self, g):
        x, y = g.ac.asarray(self.x), _poisoned(g, (self.N, self.C))
        return self.launch(g, (y, x, np.int32(self.N), np.int32(self.C))), y.get

    def pocl(self, cl):
        x, y = cl.buffer(self.x), cl.buffer(np.full((self.N, self.C), np.nan, np.float32))
        run = self.pocl_launch(cl, (y, x, np.int32(self.N), np.int32(self.C)))
        return run, lambda: cl.read(y, (self.N, self.C), np.float32)


class LayerNormIdiom(RowKernel, suite.LayerNorm):
    sizes = {"full": dict(N=8192, C=768), "quick": dict(N=67, C=100)}

    def anycuda(self, g):
        x, w, b = g.ac.asarray(self.x), g.ac.asarray(self.w), g.ac.asarray(self.b)
        y, m, r = _poisoned(g, (self.N, self.C)), _poisoned(g, self.N), _poisoned(g, self.N)
        run = self.launch(g, (y, m, r, x, w, b, np.int32(self.N), np.int32(self.C)))
        return run, lambda: (y.get(), m.get(), r.get())

    def pocl(self, cl):
        x, w, b = cl.buffer(self.x), cl.buffer(self.w), cl.buffer(self.b)
        y, m, r = (cl.buffer(np.full(shape, np.nan, np.float32)) for shape in ((self.N, self.C), self.N, self.N))
        run = self.pocl_launch(cl, (y, m, r, x, w, b, np.int32(self.N), np.int32(self.C)))
        return run, lambda: (cl.read(y, (self.N, self.C), np.float32), cl.read(m, self.N, np.float32),
                             cl.read(r, self.N, np.float32))


WARPS = THREADS // 32


BENCHMARKS = (variants(SoftmaxIdiom, softmax_warp=dict(rows=WARPS), softmax_online_cg=dict(rows=WARPS))
              + variants(LayerNormIdiom, layernorm_cg=dict(rows=WARPS), layernorm_block=dict(rows=1)))
