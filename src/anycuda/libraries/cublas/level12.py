"""cuBLAS levels 1 and 2 for S, D, C and Z on CBLAS: axpy, scal, copy, swap, rot, dot
(dotu/dotc), nrm2, asum, iamax/iamin; gemv, ger (geru/gerc), symv, trmv, trsv.

A routine's letter names its vector type; the mixed ones (Csscal: complex vector, real scale;
Scnrm2: complex vector, real result) are spelled with two letters, as cuBLAS names them, and
described by `scale` / `result` types below. Results follow the handle's pointer mode
(calls.queue_with_result); iamax/iamin answer 1-based, as cuBLAS does (0 for n <= 0 or incx <= 0).
"""
from __future__ import annotations

import numpy as np

from .. import blas
from . import matrices as mx
from .calls import DTYPES, queue, queue_with_result
from .level3 import scalar
from .status import require

_REAL = {"s": "s", "d": "d", "c": "s", "z": "d"}


def make_axpy(letter: str):
    axpy = blas.routine(letter, "axpy")

    def call(hid, n, alpha, x, incx, y, incy):
        if n <= 0:
            return
        queue(hid, lambda a: axpy(n, scalar(a, letter), x, incx, y, incy), (alpha,), DTYPES[letter])
    return call


def make_scal(letters: str):
    """Sscal, Cscal, and Csscal/Zdscal (a complex vector scaled by a real)."""
    vec, scale = letters[0], letters[-1]
    fn = blas.function(letters + "scal", "iXpi" if vec == scale else "irpi", vec)

    def call(hid, n, alpha, x, incx):
        if n <= 0 or incx <= 0:
            return
        queue(hid, lambda a: fn(n, scalar(a, scale), x, incx), (alpha,), DTYPES[scale])
    return call


def make_copy_or_swap(family: str):
    def make(letter: str):
        fn = blas.routine(letter, family)

        def call(hid, n, x, incx, y, incy):
            if n <= 0:
                return
            queue(hid, lambda: fn(n, x, incx, y, incy))
        return call
    return make


def make_rot(letters: str):
    """Srot/Drot, and Csrot/Zdrot (complex vectors, real c and s)."""
    vec = letters[0]
    real = _REAL[vec]
    fn = blas.function(letters + "rot", "ipipirr", vec)

    def call(hid, n, x, incx, y, incy, c, s):
        if n <= 0:
            return
        queue(hid, lambda cv, sv: fn(n, x, incx, y, incy, float(cv), float(sv)), (c, s), DTYPES[real])
    return call


def make_dot(name: str):
    """Sdot, Ddot, Cdotu, Cdotc, Zdotu, Zdotc."""
    letter, conj = name[0], name[4:]           # "cdotc" -> "c", "c"
    dtype = DTYPES[letter]
    if letter in "sd":
        fn = blas.function(letter + "dot", "ipipi", letter, blas.real_type(letter))
    else:
        fn = blas.function(letter + "dot" + conj + "_sub", "ipipip", letter)

    def call(hid, n, x, incx, y, incy, result):
        def compute():
            if n <= 0:
                return 0
            if letter in "sd":
                return fn(n, x, incx, y, incy)
            out = np.zeros((), dtype)
            fn(n, x, incx, y, incy, out.ctypes.data)
            return out
        queue_with_result(hid, compute, result, dtype)
    return call


def make_norm(family: str):
    """nrm2 and asum: Snrm2, Scnrm2, Sasum, Scasum... (a real result)."""
    def make(letters: str):
        real = _REAL[letters[-1]]
        fn = blas.function(letters + family, "ipi", real, blas.real_type(real))

        def call(hid, n, x, incx, result):
            queue_with_result(hid, lambda: fn(n, x, incx) if n > 0 and incx > 0 else 0, result, DTYPES[real])
        return call
    return make


def make_index(family: str):
    """Isamax, Icamin...: the 1-based index of the first element of largest (smallest) |re|+|im|."""
    def make(letter: str, result_dtype=np.int32):
        fn = blas.function("i" + letter + family, "ipi", letter, blas.ctypes.c_size_t)

        def call(hid, n, x, incx, result):
            queue_with_result(hid, lambda: fn(n, x, incx) + 1 if n > 0 and incx > 0 else 0, result, result_dtype)
        return call
    return make


def make_gemv(letter: str):
    gemv = blas.routine(letter, "gemv")

    def call(hid, trans, m, n, alpha, A, lda, x, incx, beta, y, incy):
        t = mx.op(trans, letter)
        mx.sizes(m=m, n=n)
        mx.leading(lda, m, "lda")
        require(incx != 0 and incy != 0, "incx and incy must not be 0")
        if m == 0 or n == 0:
            return
        queue(hid, lambda a, b: gemv(blas.COL_MAJOR, t, m, n, scalar(a, letter), A, lda, x, incx,
                                     scalar(b, letter), y, incy), (alpha, beta), DTYPES[letter])
    return call


def make_ger(name: str):
    """Sger, Dger, Cgeru, Cgerc, Zgeru, Zgerc."""
    letter = name[0]
    ger = blas.function(name, "eiiXpipipi", letter)

    def call(hid, m, n, alpha, x, incx, y, incy, A, lda):
        mx.sizes(m=m, n=n)
        mx.leading(lda, m, "lda")
        require(incx != 0 and incy != 0, "incx and incy must not be 0")
        if m == 0 or n == 0:
            return
        queue(hid, lambda a: ger(blas.COL_MAJOR, m, n, scalar(a, letter), x, incx, y, incy, A, lda),
              (alpha,), DTYPES[letter])
    return call


def _symmetric(A, uplo, n, lda, dtype):
    """The full symmetric matrix whose `uplo` triangle is stored at A."""
    stored = mx.view(A, n, n, lda, dtype)
    half = np.triu(stored) if uplo == blas.UPPER else np.tril(stored)
    return half + (np.triu(stored, 1) if uplo == blas.UPPER else np.tril(stored, -1)).T


def make_symv(letter: str):
    """Ssymv/Dsymv on CBLAS; CBLAS has no complex symmetric (not Hermitian) product, so Csymv
    and Zsymv are numpy's product of the matrix the stored triangle describes."""
    symv = blas.routine(letter, "symv") if letter in "sd" else None
    dtype = DTYPES[letter]

    def call(hid, uplo, n, alpha, A, lda, x, incx, beta, y, incy):
        u = mx.fill(uplo)
        mx.sizes(n=n)
        mx.leading(lda, n, "lda")
        require(incx != 0 and incy != 0, "incx and incy must not be 0")
        if n == 0:
            return

        def work(a, b):
            if symv is not None:
                return symv(blas.COL_MAJOR, u, n, scalar(a, letter), A, lda, x, incx, scalar(b, letter), y, incy)
            yv = mx.vector(y, n, incy, dtype)
            product = a * (_symmetric(A, u, n, lda, dtype) @ mx.vector(x, n, incx, dtype))
            yv[...] = product + (b * yv if b != 0 else 0)
        queue(hid, work, (alpha, beta), dtype)
    return call


def make_triangular_vector(family: str):
    """trmv and trsv: x = op(A) x, x = op(A)^-1 b."""
    def make(letter: str):
        fn = blas.routine(letter, family)

        def call(hid, uplo, trans, diag, n, A, lda, x, incx):
            u, t, d = mx.fill(uplo), mx.op(trans, letter), mx.diag(diag)
            mx.sizes(n=n)
            mx.leading(lda, n, "lda")
            require(incx != 0, "incx must not be 0")
            if n == 0:
                return
            queue(hid, lambda: fn(blas.COL_MAJOR, u, t, d, n, A, lda, x, incx))
        return call
    return make
