"""cuBLAS's rank updates CBLAS lacks: syrkx and herkx (a rank-k update from two different
matrices, C = alpha op(A) op(B)^T + beta C, or ^H for herkx), and complex symmetric (not
Hermitian) syr and syr2; and cublasCsyrkEx/CherkEx (and their 3m forms, the same results here),
whose A may also be complex 8-bit integers, widened to complex64 when the work runs. Each updates
only the `uplo` triangle of C (or A), on numpy views of the column-major data; the other triangle
is not touched. A zero beta leaves C unread (it may hold NaN), as in BLAS; herkx, like herk,
makes the diagonal of C real."""
from __future__ import annotations

import numpy as np

from .. import blas
from . import matrices as mx
from .calls import DTYPES, queue
from .status import CublasError, Status, require

_REAL = {"s": "s", "d": "d", "c": "s", "z": "d"}


def _triangle(n: int, lower: bool):
    return np.tril_indices(n) if lower else np.triu_indices(n)


def update_triangle(C, n, ldc, dtype, lower, product, beta, hermitian=False) -> None:
    """C's `lower`/upper triangle = product's + beta C's (C unread when beta is 0)."""
    c = mx.view(C, n, n, ldc, dtype)
    rows, cols = _triangle(n, lower)
    new = product[rows, cols]
    if beta != 0:
        new = new + beta * c[rows, cols]
    c[rows, cols] = new
    if hermitian:
        diagonal = np.arange(n)
        c[diagonal, diagonal] = c[diagonal, diagonal].real


def _rank_k_operations(letter: str, hermitian: bool):
    """The operations a syrkx/herkx accepts: N and T for syrkx (C too for real types, meaning
    T), N and C for herkx."""
    if hermitian:
        return (mx.OP_N, mx.OP_C)
    return (mx.OP_N, mx.OP_T, mx.OP_C) if letter in "sd" else (mx.OP_N, mx.OP_T)


def make_rank_kx(hermitian: bool):
    """syrkx (S, D, C, Z) or herkx (C, Z: alpha complex, beta real)."""
    def make(letter: str):
        dtype = DTYPES[letter]
        beta_dtype = DTYPES[_REAL[letter]] if hermitian else dtype
        transposed = mx.OP_C if hermitian else mx.OP_T

        def call(hid, uplo, trans, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
            lower = mx.fill(uplo) == blas.LOWER
            require(trans in _rank_k_operations(letter, hermitian), f"operation {trans}")
            mx.check_rank_2k(trans, n, k, lda, ldb, ldc)
            if n == 0:
                return
            op = mx.OP_N if trans == mx.OP_N else transposed

            def work(a, b):
                if k == 0:
                    product = np.zeros((n, n), dtype)
                else:
                    left = mx.operand(A, op, n, k, lda, dtype)
                    right = mx.operand(B, op, n, k, ldb, dtype)
                    product = a * (left @ (right.conj().T if hermitian else right.T))
                update_triangle(C, n, ldc, dtype, lower, product, b, hermitian)
            queue(hid, work, (alpha, beta), [dtype, beta_dtype])
        return call
    return make


def make_complex_syr(two: bool):
    """Csyr, Zsyr (A += alpha x x^T) and Csyr2, Zsyr2 (A += alpha (x y^T + y x^T)): CBLAS has
    only the Hermitian forms."""
    def make(letter: str):
        dtype = DTYPES[letter]

        def call(hid, uplo, n, alpha, x, incx, *rest):
            y, incy, A, lda = rest if two else (x, incx) + rest
            lower = mx.fill(uplo) == blas.LOWER
            mx.sizes(n=n)
            require(incx != 0 and incy != 0, "incx and incy must not be 0")
            mx.leading(lda, n, "lda")
            if n == 0:
                return

            def work(a):
                xv, yv = mx.vector(x, n, incx, dtype), mx.vector(y, n, incy, dtype)
                product = np.outer(xv, yv)
                if two:
                    product = product + product.T
                update_triangle(A, n, lda, dtype, lower, a * product, 1)
            queue(hid, work, (alpha,), dtype)
        return call
    return make


# cudaDataType codes of the Ex rank-k updates' operands: A complex float or complex 8-bit
# integers (two int8 each), C complex float (cuBLAS's table for CsyrkEx and CherkEx)
C_32F, C_8I = 4, 7
_STORED = {C_32F: np.dtype(np.complex64), C_8I: np.dtype([("re", np.int8), ("im", np.int8)])}


def _widened(stored: np.ndarray) -> np.ndarray:
    if stored.dtype.names:
        return stored["re"].astype(np.float32) + np.complex64(1j) * stored["im"].astype(np.float32)
    return stored.astype(np.complex64)


def make_rank_k_ex(hermitian: bool):
    """CsyrkEx (alpha, beta complex; N or T) or CherkEx (alpha, beta real; N or C)."""
    operations = (mx.OP_N, mx.OP_C) if hermitian else (mx.OP_N, mx.OP_T)

    def call(hid, uplo, trans, n, k, alpha, A, Atype, lda, beta, C, Ctype, ldc):
        if Atype not in _STORED or Ctype != C_32F:
            raise CublasError(Status.NOT_SUPPORTED, f"{'herk' if hermitian else 'syrk'}Ex with A type {Atype}, "
                                                    f"C type {Ctype}")
        lower = mx.fill(uplo) == blas.LOWER
        require(trans in operations, f"operation {trans}")
        mx.sizes(n=n, k=k)
        mx.leading(lda, mx.stored_rows(trans, n, k), "lda")
        mx.leading(ldc, n, "ldc")
        if n == 0:
            return

        def work(a, b):
            rows, cols = (n, k) if trans == mx.OP_N else (k, n)
            stored = _widened(mx.view(A, rows, cols, lda, _STORED[Atype]))
            left = stored if trans == mx.OP_N else (stored.conj().T if trans == mx.OP_C else stored.T)
            product = a * (left @ (left.conj().T if hermitian else left.T))
            update_triangle(C, n, ldc, np.complex64, lower, product, b, hermitian)
        queue(hid, work, (alpha, beta), np.float32 if hermitian else np.complex64)
    return call


syrk_ex, herk_ex = make_rank_k_ex(False), make_rank_k_ex(True)


FAMILIES = {"syrkx": make_rank_kx(False), "herkx": make_rank_kx(True), "complexSyr": make_complex_syr(False),
            "complexSyr2": make_complex_syr(True)}
