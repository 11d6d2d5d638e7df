"""Matrix products on types the CPU's BLAS lacks (16F, 16BF, 8I), block by block: each block of
the operands is widened to the work precision and multiplied by numpy's BLAS, each block of the
result is scaled, finished (cuBLASLt's epilogues) and narrowed once. A product whose widened
operands fit WHOLE_BYTES is one block; larger ones never copy a whole matrix.

Operands are numpy views of any strides (column- or row-major, transposed). The loop runs in
the orientation the destination is stored in: for a column-major D it computes
D^T = op(B)^T op(A)^T, whose blocks numpy writes in D's own layout (writing row-major blocks
into a column-major matrix would transpose every block on the way back).
"""
from __future__ import annotations

import numpy as np

from .. import halves

BLOCK = 512          # rows/columns of a block of D and of the shared dimension: ~1 MB of f32 each
WHOLE_BYTES = 256 << 20   # widened operands and result up to this size are made at once

R_32F, R_64F, R_16F, R_8I, C_32F, C_64F, R_32I, R_16BF = 0, 1, 2, 3, 4, 5, 10, 14
STORAGE = {R_32F: np.float32, R_64F: np.float64, R_16F: np.float16, R_8I: np.int8, C_32F: np.complex64,
           C_64F: np.complex128, R_32I: np.int32, R_16BF: np.uint16}


def widen(block: np.ndarray, code: int, work) -> np.ndarray:
    """A block of stored elements of type `code` as `work` (halves.py widens 16-bit floats)."""
    if code in (R_16F, R_16BF):
        return halves.widen(block, code == R_16BF).astype(work, copy=False)
    return block.astype(work)


def store(dest: np.ndarray, values: np.ndarray, code: int) -> None:
    """Write `values` into a view of stored type `code`: 16-bit floats rounded to nearest even
    (halves.py), 32-bit integers wrapped, other types as numpy casts them."""
    if code in (R_16F, R_16BF):
        halves.narrow(dest, values, code == R_16BF)
    elif code == R_32I:
        dest[...] = values.astype(np.int64).astype(np.uint32).view(np.int32)
    else:
        np.copyto(dest, values, casting="unsafe")


def work_types(a_code: int, d_code: int):
    """(work, accumulate): 8-bit integers multiply in f64 (exact sums), others in f32 or wider;
    results bound for int32 are finished in int64."""
    if a_code in (R_64F, C_64F):
        work = np.complex128 if a_code == C_64F else np.float64
    elif a_code == C_32F:
        work = np.complex64
    else:
        work = np.float64 if a_code == R_8I else np.float32
    return work, (np.int64 if d_code == R_32I else work)


def _block_shape(rows: int, cols: int, k: int, itemsize: int) -> tuple:
    """(rows, columns, shared) of a block. Widening an element costs about as much as 512 of
    the BLAS product's multiply-adds, and blocks widen each element of A once per block column
    of D (of B once per block row), so a product whose widened operands and result fit
    WHOLE_BYTES is one block, each element widened once; larger ones go in BLOCKs to bound the
    memory they take (measurements: benchmarks/NOTES.md)."""
    if (rows * k + k * cols + rows * cols) * itemsize <= WHOLE_BYTES:
        return max(rows, 1), max(cols, 1), max(k, 1)
    return BLOCK, BLOCK, BLOCK


def product(a, a_code, b, c, c_code, d, d_code, alpha, beta, finish=None) -> None:
    """d = finish(alpha a @ b + beta c) on views: a (m x k), b (k x n), c and d (m x n) of stored
    types a_code (b's too), c_code, d_code; `finish(block, rows, cols)` edits a block of the
    scaled result in place (in D's orientation), given the slices of D it covers."""
    work, accumulate = work_types(a_code, d_code)
    k = a.shape[1]
    transposed = d.strides[0] < d.strides[1]            # column-major destination
    if transposed:
        a, b, c, d = b.T, a.T, c.T, d.T
    rows, cols = d.shape
    alpha = np.asarray(alpha).astype(accumulate)
    beta = np.asarray(beta).astype(accumulate)
    bi, bj, bk = _block_shape(rows, cols, k, np.dtype(work).itemsize)
    for i0 in range(0, rows, bi):
        i1 = min(rows, i0 + bi)
        for j0 in range(0, cols, bj):
            j1 = min(cols, j0 + bj)
            acc = None
            for k0 in range(0, k, bk):
                k1 = min(k, k0 + bk)
                part = widen(a[i0:i1, k0:k1], a_code, work) @ widen(b[k0:k1, j0:j1], a_code, work)
                acc = part if acc is None else np.add(acc, part, out=acc)
            out = np.zeros((i1 - i0, j1 - j0), accumulate) if acc is None else acc.astype(accumulate, copy=False)
            if alpha != 1:
                out = np.multiply(out, alpha, out=out)
            if beta != 0:
                out = np.add(out, beta * widen(c[i0:i1, j0:j1], c_code, accumulate), out=out)
            if finish is not None:
                if transposed:
                    finish(out.T, slice(j0, j1), slice(i0, i1))
                else:
                    finish(out, slice(i0, i1), slice(j0, j1))
            store(d[i0:i1, j0:j1], out, d_code)
