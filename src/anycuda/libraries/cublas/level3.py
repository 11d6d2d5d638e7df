"""cuBLAS level 3 for S, D, C and Z: gemm (single, batched over pointer arrays, strided
batched), symm, syrk, syr2k, trmm, trsm on CBLAS, and geam, dgmm (which CBLAS lacks) on numpy
views. Each `make_<routine>(letter)` returns the function behind `cublas<L><routine>`, taking
the C arguments in the C order (addresses as integers); it checks cuBLAS's argument rules
first, then queues the computation on the handle's stream."""
from __future__ import annotations

import numpy as np

from .. import blas
from . import matrices as mx
from .calls import DTYPES, queue
from .status import require


def scalar(value: np.ndarray, letter: str):
    """A scalar as CBLAS takes it: a real by value, a complex by address (of `value`, which the
    caller keeps alive across the call)."""
    return value.ctypes.data if letter in "cz" else float(value)


def _check_gemm(transa, transb, m, n, k, lda, ldb, ldc):
    mx.sizes(m=m, n=n, k=k)
    mx.leading(lda, mx.stored_rows(transa, m, k), "lda")
    mx.leading(ldb, mx.stored_rows(transb, k, n), "ldb")
    mx.leading(ldc, m, "ldc")


def make_gemm(letter: str):
    gemm = blas.routine(letter, "gemm")

    def call(hid, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
        ta, tb = mx.op(transa, letter), mx.op(transb, letter)
        _check_gemm(transa, transb, m, n, k, lda, ldb, ldc)
        if m == 0 or n == 0:
            return

        def work(a, b):
            gemm(blas.COL_MAJOR, ta, tb, m, n, k, scalar(a, letter), A, lda, B, ldb, scalar(b, letter), C, ldc)
        queue(hid, work, (alpha, beta), DTYPES[letter])
    return call


def make_gemm_batched(letter: str):
    gemm = blas.routine(letter, "gemm")

    def call(hid, transa, transb, m, n, k, alpha, Aarray, lda, Barray, ldb, beta, Carray, ldc, count):
        ta, tb = mx.op(transa, letter), mx.op(transb, letter)
        _check_gemm(transa, transb, m, n, k, lda, ldb, ldc)
        require(count >= 0, f"batchCount = {count}")
        if m == 0 or n == 0 or count == 0:
            return

        def work(a, b):
            sa, sb = scalar(a, letter), scalar(b, letter)
            for pa, pb, pc in zip(mx.pointers(Aarray, count), mx.pointers(Barray, count), mx.pointers(Carray, count)):
                gemm(blas.COL_MAJOR, ta, tb, m, n, k, sa, pa, lda, pb, ldb, sb, pc, ldc)
        queue(hid, work, (alpha, beta), DTYPES[letter])
    return call


def make_gemm_strided_batched(letter: str):
    """One stacked numpy product over the whole batch (its BLAS calls loop in C, not here):
    C_i^T = op(B_i)^T op(A_i)^T on views of the strided data."""
    dtype = DTYPES[letter]

    def call(hid, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, count):
        mx.op(transa, letter), mx.op(transb, letter)
        _check_gemm(transa, transb, m, n, k, lda, ldb, ldc)
        require(count >= 0, f"batchCount = {count}")
        if m == 0 or n == 0 or count == 0:
            return

        def work(a, b):
            ct = mx.stacked_transposes(C, mx.OP_N, m, n, ldc, strideC, count, dtype)
            if k == 0:
                product = np.zeros(ct.shape, dtype)
            else:
                at = mx.stacked_transposes(A, transa, m, k, lda, strideA, count, dtype)
                bt = mx.stacked_transposes(B, transb, k, n, ldb, strideB, count, dtype)
                if a == 1 and b == 0:
                    np.matmul(bt, at, out=ct)
                    return
                product = np.matmul(bt, at)
            if a != 1:
                product *= a
            if b != 0:
                product += b * ct
            ct[...] = product
        queue(hid, work, (alpha, beta), dtype)
    return call


def make_symm(letter: str):
    symm = blas.routine(letter, "symm")

    def call(hid, side, uplo, m, n, alpha, A, lda, B, ldb, beta, C, ldc):
        s, u = mx.side(side), mx.fill(uplo)
        mx.sizes(m=m, n=n)
        mx.leading(lda, m if s == blas.LEFT else n, "lda")
        mx.leading(ldb, m, "ldb")
        mx.leading(ldc, m, "ldc")
        if m == 0 or n == 0:
            return
        queue(hid, lambda a, b: symm(blas.COL_MAJOR, s, u, m, n, scalar(a, letter), A, lda, B, ldb,
                                     scalar(b, letter), C, ldc), (alpha, beta), DTYPES[letter])
    return call


def make_syrk(letter: str):
    syrk = blas.routine(letter, "syrk")

    def call(hid, uplo, trans, n, k, alpha, A, lda, beta, C, ldc):
        u, t = mx.fill(uplo), mx.op(trans, "s")      # syrk takes N or T, whatever the type
        require(trans in (mx.OP_N, mx.OP_T) or letter in "sd", f"operation {trans} for a complex syrk")
        mx.sizes(n=n, k=k)
        mx.leading(lda, mx.stored_rows(trans, n, k), "lda")
        mx.leading(ldc, n, "ldc")
        if n == 0:
            return
        queue(hid, lambda a, b: syrk(blas.COL_MAJOR, u, t, n, k, scalar(a, letter), A, lda,
                                     scalar(b, letter), C, ldc), (alpha, beta), DTYPES[letter])
    return call


def make_syr2k(letter: str):
    syr2k = blas.routine(letter, "syr2k")

    def call(hid, uplo, trans, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
        u, t = mx.fill(uplo), mx.op(trans, "s")
        require(trans in (mx.OP_N, mx.OP_T) or letter in "sd", f"operation {trans} for a complex syr2k")
        mx.check_rank_2k(trans, n, k, lda, ldb, ldc)
        if n == 0:
            return
        queue(hid, lambda a, b: syr2k(blas.COL_MAJOR, u, t, n, k, scalar(a, letter), A, lda, B, ldb,
                                      scalar(b, letter), C, ldc), (alpha, beta), DTYPES[letter])
    return call


def _check_triangular(side, m, n, lda, ldb):
    mx.sizes(m=m, n=n)
    mx.leading(lda, m if side == blas.LEFT else n, "lda")
    mx.leading(ldb, m, "ldb")


def make_trsm(letter: str):
    trsm = blas.routine(letter, "trsm")

    def call(hid, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb):
        s, u, t, d = mx.side(side), mx.fill(uplo), mx.op(trans, letter), mx.diag(diag)
        _check_triangular(s, m, n, lda, ldb)
        if m == 0 or n == 0:
            return
        queue(hid, lambda a: trsm(blas.COL_MAJOR, s, u, t, d, m, n, scalar(a, letter), A, lda, B, ldb),
              (alpha,), DTYPES[letter])
    return call


def make_trsm_batched(letter: str):
    """trsm over arrays of pointers, one CBLAS solve per matrix pair."""
    trsm = blas.routine(letter, "trsm")

    def call(hid, side, uplo, trans, diag, m, n, alpha, Aarray, lda, Barray, ldb, count):
        s, u, t, d = mx.side(side), mx.fill(uplo), mx.op(trans, letter), mx.diag(diag)
        _check_triangular(s, m, n, lda, ldb)
        require(count >= 0, f"batchCount = {count}")
        if m == 0 or n == 0 or count == 0:
            return

        def work(a):
            sa = scalar(a, letter)
            for pa, pb in zip(mx.pointers(Aarray, count), mx.pointers(Barray, count)):
                trsm(blas.COL_MAJOR, s, u, t, d, m, n, sa, pa, lda, pb, ldb)
        queue(hid, work, (alpha,), DTYPES[letter])
    return call


def _packed_indices(n: int, lower: bool):
    """(rows, cols) of a triangle in packed column-major order."""
    rows = [i for j in range(n) for i in (range(j, n) if lower else range(j + 1))]
    cols = [j for j in range(n) for _ in (range(j, n) if lower else range(j + 1))]
    return np.array(rows, np.intp), np.array(cols, np.intp)


def make_packing(to_packed: bool):
    """trttp (a triangle of a full matrix into packed storage) or tpttr (packed storage into a
    triangle of a full matrix, the other triangle left as it was)."""
    def make(letter: str):
        dtype = DTYPES[letter]

        def call(hid, uplo, n, first, second, third):
            # trttp(A, lda, AP) and tpttr(AP, A, lda): the same three, ordered differently
            A, lda, AP = (first, second, third) if to_packed else (second, third, first)
            lower = mx.fill(uplo) == blas.LOWER
            mx.sizes(n=n)
            mx.leading(lda, n, "lda")
            if n == 0:
                return

            def work():
                rows, cols = _packed_indices(n, lower)
                full, packed = mx.view(A, n, n, lda, dtype), mx.vector(AP, rows.size, 1, dtype)
                if to_packed:
                    packed[...] = full[rows, cols]
                else:
                    full[rows, cols] = packed
            queue(hid, work)
        return call
    return make


def make_trmm(letter: str):
    """cuBLAS's trmm writes C = alpha op(A) B out of place (CBLAS's works in place on B): B is
    copied into C first, unless they are the same matrix."""
    trmm = blas.routine(letter, "trmm")
    dtype = DTYPES[letter]

    def call(hid, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb, C, ldc):
        s, u, t, d = mx.side(side), mx.fill(uplo), mx.op(trans, letter), mx.diag(diag)
        _check_triangular(s, m, n, lda, ldb)
        mx.leading(ldc, m, "ldc")
        if m == 0 or n == 0:
            return

        def work(a):
            if B != C or ldb != ldc:
                mx.view(C, m, n, ldc, dtype)[...] = mx.view(B, m, n, ldb, dtype)
            trmm(blas.COL_MAJOR, s, u, t, d, m, n, scalar(a, letter), A, lda, C, ldc)
        queue(hid, work, (alpha,), dtype)
    return call


def make_geam(letter: str):
    dtype = DTYPES[letter]

    def call(hid, transa, transb, m, n, alpha, A, lda, beta, B, ldb, C, ldc):
        mx.op(transa, letter), mx.op(transb, letter)
        mx.sizes(m=m, n=n)
        mx.leading(lda, mx.stored_rows(transa, m, n), "lda")
        mx.leading(ldb, mx.stored_rows(transb, m, n), "ldb")
        mx.leading(ldc, m, "ldc")
        if m == 0 or n == 0:
            return

        def work(a, b):
            # a zero scale leaves its matrix unread (it may hold NaN or be NULL), as in BLAS
            out = np.zeros((m, n), dtype)
            if a != 0:
                out += a * mx.operand(A, transa, m, n, lda, dtype)
            if b != 0:
                out += b * mx.operand(B, transb, m, n, ldb, dtype)
            mx.view(C, m, n, ldc, dtype)[...] = out
        if not beta and alpha:
            # a NULL beta is a zero beta (B unread): NVIDIA's own cuSOLVER (12.4, gesvd) transposes
            # with geam(alpha, A, beta=NULL, B=A), so NVIDIA's cuBLAS must take it so (not in its
            # documentation; inferred from that use)
            queue(hid, lambda a: work(a, 0), (alpha,), dtype)
            return
        queue(hid, work, (alpha, beta), dtype)
    return call


def make_dgmm(letter: str):
    dtype = DTYPES[letter]

    def call(hid, mode, m, n, A, lda, x, incx, C, ldc):
        s = mx.side(mode)
        mx.sizes(m=m, n=n)
        mx.leading(lda, m, "lda")
        mx.leading(ldc, m, "ldc")
        if m == 0 or n == 0:
            return

        def work():
            d = mx.vector(x, m if s == blas.LEFT else n, incx, dtype) if incx else None
            if d is None:       # incx 0: every element is x[0]
                d = np.full(m if s == blas.LEFT else n, mx.vector(x, 1, 1, dtype)[0])
            a = mx.view(A, m, n, lda, dtype)
            mx.view(C, m, n, ldc, dtype)[...] = a * (d[:, None] if s == blas.LEFT else d[None, :])
        queue(hid, work)
    return call


FAMILIES = {"gemm": make_gemm, "gemmBatched": make_gemm_batched, "gemmStridedBatched": make_gemm_strided_batched,
            "symm": make_symm, "syrk": make_syrk, "syr2k": make_syr2k, "trsm": make_trsm, "trmm": make_trmm,
            "geam": make_geam, "dgmm": make_dgmm, "trsmBatched": make_trsm_batched, "trttp": make_packing(True),
            "tpttr": make_packing(False)}
