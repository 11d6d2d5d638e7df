"""What cuBLAS's arguments mean: operations, fill modes, sides and diagonals as CBLAS names
them, the leading-dimension rules every routine checks, and numpy views of column-major
matrices at device addresses (for the routines CBLAS lacks: geam, dgmm, batched pointers)."""
from __future__ import annotations

import numpy as np

from .. import blas
from ..memory import array
from .status import require

OP_N, OP_T, OP_C = 0, 1, 2

_OPS = {OP_N: blas.NO_TRANS, OP_T: blas.TRANS, OP_C: blas.CONJ_TRANS}
_FILLS = {0: blas.LOWER, 1: blas.UPPER}
_SIDES = {0: blas.LEFT, 1: blas.RIGHT}
_DIAGS = {0: blas.NON_UNIT, 1: blas.UNIT}


def _member(table: dict, value: int, what: str) -> int:
    require(value in table, f"{what} {value}")
    return table[value]


def op(value: int, letter: str) -> int:
    """CBLAS's transpose for a cublasOperation_t (conjugation means nothing to real types)."""
    cblas = _member(_OPS, value, "operation")
    return blas.TRANS if cblas == blas.CONJ_TRANS and letter in "sd" else cblas


def fill(value: int) -> int:
    return _member(_FILLS, value, "fill mode")


def side(value: int) -> int:
    return _member(_SIDES, value, "side mode")


def diag(value: int) -> int:
    return _member(_DIAGS, value, "diagonal type")


def sizes(**named) -> None:
    """Every size argument is at least 0."""
    for name, value in named.items():
        require(value >= 0, f"{name} = {value} is negative")


def leading(ld: int, rows: int, name: str) -> None:
    """A leading dimension holds at least the matrix's rows (and is at least 1)."""
    require(ld >= max(1, rows), f"{name} = {ld} is below max(1, {rows})")


def stored_rows(operation: int, rows: int, cols: int) -> int:
    """Rows of the matrix as stored, for op(X) of `rows` x `cols`."""
    return rows if operation == OP_N else cols


def check_rank_2k(trans: int, n: int, k: int, lda: int, ldb: int, ldc: int) -> None:
    """The sizes and leading dimensions of a rank-2k update (syr2k, her2k, syrkx, herkx): op(A)
    and op(B) are n x k, C is n x n."""
    sizes(n=n, k=k)
    rows = stored_rows(trans, n, k)
    leading(lda, rows, "lda")
    leading(ldb, rows, "ldb")
    leading(ldc, n, "ldc")


def view(address: int, rows: int, cols: int, ld: int, dtype) -> np.ndarray:
    """The column-major `rows` x `cols` matrix at `address` with leading dimension `ld`."""
    dtype = np.dtype(dtype)
    if rows == 0 or cols == 0:
        return np.empty((rows, cols), dtype)
    flat = array(address, (cols - 1) * ld + rows, dtype)
    return np.lib.stride_tricks.as_strided(flat, shape=(rows, cols), strides=(dtype.itemsize, ld * dtype.itemsize))


def operand(address: int, operation: int, rows: int, cols: int, ld: int, dtype) -> np.ndarray:
    """op(X) as a `rows` x `cols` view (a transposed or conjugated view of what is stored)."""
    if operation == OP_N:
        return view(address, rows, cols, ld, dtype)
    stored = view(address, cols, rows, ld, dtype).T
    return stored.conj() if operation == OP_C and np.iscomplexobj(stored) else stored


def stacked_transposes(address: int, operation: int, rows: int, cols: int, ld: int, stride: int, count: int,
                       dtype) -> np.ndarray:
    """op(X_i)^T for a strided batch of `count` matrices (op(X_i) being `rows` x `cols`), as one
    (count, cols, rows) view: the row-major reading of column-major data, which is what numpy's
    stacked product wants."""
    dtype = np.dtype(dtype)
    size = dtype.itemsize
    stored_rows, stored_cols = (rows, cols) if operation == OP_N else (cols, rows)
    extent = (count - 1) * stride + (stored_cols - 1) * ld + stored_rows
    flat = array(address, extent, dtype)
    if operation == OP_N:
        strides = (stride * size, ld * size, size)
    else:
        strides = (stride * size, size, ld * size)
    view = np.lib.stride_tricks.as_strided(flat, shape=(count, cols, rows), strides=strides)
    return view.conj() if operation == OP_C and dtype.kind == "c" else view


def vector(address: int, n: int, inc: int, dtype) -> np.ndarray:
    """n elements `inc` apart (a negative `inc` walks from the far end, as BLAS does)."""
    dtype = np.dtype(dtype)
    if n <= 0:
        return np.empty(0, dtype)
    step = abs(inc)
    flat = array(address, (n - 1) * step + 1, dtype)
    v = flat[::step]
    return v[::-1] if inc < 0 else v


def pointers(address: int, count: int) -> list:
    """The device addresses in an array of `count` pointers (the batched routines' Aarray)."""
    return [int(p) for p in array(address, count, np.uint64)]
