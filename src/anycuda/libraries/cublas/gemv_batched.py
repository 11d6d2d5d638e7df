"""Batched matrix-vector products: cublas<T>gemvBatched (arrays of pointers) and
cublas<T>gemvStridedBatched (one base address and a stride per operand), y_i = alpha op(A_i) x_i
+ beta y_i.

S, D, C and Z run the CPU BLAS's gemv once per matrix. The mixed-precision forms are named by
their input, compute and output types (HSS: half A and x, float compute and y; T is bfloat16);
CBLAS has no gemv on half or bfloat16, so each product widens its operands to float, computes
with numpy's BLAS and narrows y once (blocks.widen / blocks.store), with float alpha and beta.
Both forms share one argument check and one loop: they differ only in how the i-th operands'
addresses are found.
"""
from __future__ import annotations

import numpy as np

from .. import blas
from . import blocks, matrices as mx
from .calls import DTYPES, queue
from .level3 import scalar
from .status import require

_STORED = {"H": blocks.R_16F, "T": blocks.R_16BF, "S": blocks.R_32F}


def _check(trans, letter, m, n, lda, incx, incy, count) -> int:
    t = mx.op(trans, letter)
    mx.sizes(m=m, n=n)
    mx.leading(lda, m, "lda")
    require(incx != 0 and incy != 0, "incx and incy must not be 0")
    require(count >= 0, f"batchCount = {count}")
    return t


def _product(types: str):
    """product(trans, m, n, alpha, A, lda, x, incx, beta, y, incy) for one matrix of a batch,
    alpha and beta as read (0-d arrays), and the byte sizes of (A and x, y) elements."""
    if len(types) == 1:
        letter = types.lower()
        gemv = blas.routine(letter, "gemv")

        def cblas(t, m, n, a, A, lda, x, incx, b, y, incy):
            gemv(blas.COL_MAJOR, t, m, n, scalar(a, letter), A, lda, x, incx, scalar(b, letter), y, incy)
        size = DTYPES[letter].itemsize
        return cblas, (size, size)
    source, result = _STORED[types[0]], _STORED[types[2]]
    source_dtype, result_dtype = blocks.STORAGE[source], blocks.STORAGE[result]

    def widened(t, m, n, a, A, lda, x, incx, b, y, incy):
        matrix = blocks.widen(mx.view(A, m, n, lda, source_dtype), source, np.float32)
        if t != blas.NO_TRANS:
            matrix = matrix.T
        rows, cols = matrix.shape
        yv = mx.vector(y, rows, incy, result_dtype)
        out = np.float32(a) * (matrix @ blocks.widen(mx.vector(x, cols, incx, source_dtype), source, np.float32))
        if b != 0:        # beta 0: y is not read (it may hold NaN), as in BLAS
            out += np.float32(b) * blocks.widen(yv, result, np.float32)
        blocks.store(yv, out, result)
    return widened, (np.dtype(source_dtype).itemsize, np.dtype(result_dtype).itemsize)


def _letter(types: str) -> str:
    """The type letter of alpha and beta (float for the mixed forms)."""
    return types.lower() if len(types) == 1 else "s"


def make_gemv_batched(types: str):
    types = types.upper()
    product, _ = _product(types)

    def call(hid, trans, m, n, alpha, Aarray, lda, xarray, incx, beta, yarray, incy, count):
        t = _check(trans, _letter(types), m, n, lda, incx, incy, count)
        if m == 0 or n == 0 or count == 0:
            return

        def work(a, b):
            for A, x, y in zip(mx.pointers(Aarray, count), mx.pointers(xarray, count), mx.pointers(yarray, count)):
                product(t, m, n, a, A, lda, x, incx, b, y, incy)
        queue(hid, work, (alpha, beta), DTYPES[_letter(types)])
    return call


def make_gemv_strided_batched(types: str):
    types = types.upper()
    product, (size, result_size) = _product(types)

    def call(hid, trans, m, n, alpha, A, lda, strideA, x, incx, stridex, beta, y, incy, stridey, count):
        t = _check(trans, _letter(types), m, n, lda, incx, incy, count)
        if m == 0 or n == 0 or count == 0:
            return

        def work(a, b):
            for i in range(count):
                product(t, m, n, a, A + i * strideA * size, lda, x + i * stridex * size, incx, b,
                        y + i * stridey * result_size, incy)
        queue(hid, work, (alpha, beta), DTYPES[_letter(types)])
    return call


FAMILIES = {"gemvBatched": make_gemv_batched, "gemvStridedBatched": make_gemv_strided_batched}
