"""Row-wise idioms of the benchmark suite: the softmax and layernorm of LLM training (suite.py's
`softmax` is a block per row, its `layernorm` a warp per row with plain shuffles) in the other
spellings llm.c and the code written after it use: a softmax with a warp per row, as plain
shuffles and as cooperative groups' online softmax; a layernorm with a warp per row through
cooperative groups (cg::reduce, __ldcs/__stcs) and with a block per row. The computations,
numpy references, checks and OpenMP C loops are suite.py's; only the CUDA kernel
(kernels/cuda/idioms_rows.cu) and its launch shape change.
"""
from __future__ import annotations

import numpy as np

import suite
from suite import Bench, cdiv, variants

THREADS = 256


class RowKernel:
    """A suite row computation run by `kernel` with `rows` rows per block of `block` threads."""
    pocl = Bench.pocl           # PoCL and the simulator run the suite's own spelling
    sim = Bench.sim
    cu, kernel, rows, block = "idioms_rows.cu", "", 1, (THREADS,)

    def launch(self, g, args):
        k = g.fn(self.cu, self.kernel)
        grid = (cdiv(self.N, self.rows),)

        def run():
            k(grid, self.block, args)
            g.sync()
        return run


def _poisoned(g, shape):
    return g.ac.asarray(np.full(shape, np.nan, np.float32))     # every element must be written


class SoftmaxIdiom(RowKernel, suite.Softmax):
    sizes = {"full": dict(N=8192, C=1024, threads=THREADS), "quick": dict(N=67, C=300, threads=THREADS)}

    def anycuda(self, g):
        x, y = g.ac.asarray(self.x), _poisoned(g, (self.N, self.C))
        return self.launch(g, (y, x, np.int32(self.N), np.int32(self.C))), y.get


class LayerNormIdiom(RowKernel, suite.LayerNorm):
    sizes = {"full": dict(N=8192, C=768), "quick": dict(N=67, C=100)}

    def anycuda(self, g):
        x, w, b = g.ac.asarray(self.x), g.ac.asarray(self.w), g.ac.asarray(self.b)
        y, m, r = _poisoned(g, (self.N, self.C)), _poisoned(g, self.N), _poisoned(g, self.N)
        run = self.launch(g, (y, m, r, x, w, b, np.int32(self.N), np.int32(self.C)))
        return run, lambda: (y.get(), m.get(), r.get())


WARPS = THREADS // 32


BENCHMARKS = (variants(SoftmaxIdiom, softmax_warp=dict(rows=WARPS), softmax_online_cg=dict(rows=WARPS))
              + variants(LayerNormIdiom, layernorm_cg=dict(rows=WARPS), layernorm_block=dict(rows=1)))
