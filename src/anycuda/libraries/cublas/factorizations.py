"""cuBLAS's batched factorizations on LAPACK (scipy.linalg.lapack, the LAPACK of scipy's
OpenBLAS): getrfBatched (LU with partial pivoting, in place), getrsBatched (solve with those
factors), getriBatched (inverse from them), matinvBatched (inverse of small matrices),
geqrfBatched (QR, Householder reflectors as LAPACK stores them) and gelsBatched (least squares
for full-rank overdetermined systems, A not transposed: what cuBLAS supports).

cuBLAS's conventions kept: pivots are 1-based, `n` per matrix, in the pivot array one matrix
after another; `info` is per matrix for the LU factorisations (k > 0: U(k, k) is exactly zero);
getrsBatched, geqrfBatched and gelsBatched report argument errors in a single host integer
(-i: argument i is wrong, the handle being argument 1; 0 when all are right), and gelsBatched
reports each matrix's rank deficiency in the optional device array devInfoArray (k > 0:
R(k, k) is exactly zero). A NULL pivot array asks for LU without pivoting, which LAPACK has no
routine for: answered NOT_SUPPORTED.
"""
from __future__ import annotations

import numpy as np

from . import matrices as mx
from ..memory import array
from .calls import DTYPES, queue
from .status import CublasError, Status, require

_ROUTINES = {}


def _lapack(letter: str, name: str):
    key = letter + name
    if key not in _ROUTINES:
        from scipy.linalg import lapack
        _ROUTINES[key] = getattr(lapack, key)
    return _ROUTINES[key]


def _check(n: int, lda: int, count: int) -> None:
    require(n >= 0, f"n = {n}")
    require(lda >= max(1, n), f"lda = {lda} below max(1, {n})")
    require(count >= 0, f"batchSize = {count}")


def _pivoted(pivots: int) -> None:
    """A NULL pivot array asks for LU without pivoting."""
    if not pivots:
        raise CublasError(Status.NOT_SUPPORTED, "LU without pivoting (a NULL pivot array)")


def _host_info(info: int, rules) -> None:
    """The host `info` of getrs/geqrf/gelsBatched: -i for the first argument i whose rule
    fails (rules: (holds, position)), 0 when all hold; a failed rule is INVALID_VALUE."""
    require(info != 0, "the info pointer is NULL")
    bad = next((position for ok, position in rules if not ok), 0)
    array(info, 1, np.int32)[0] = -bad
    require(bad == 0, f"argument {bad} is out of range")


def make_getrf(letter: str):
    dtype = DTYPES[letter]

    def call(hid, n, Aarray, lda, pivots, info, count):
        _check(n, lda, count)
        _pivoted(pivots)
        if n == 0 or count == 0:
            return

        def work():
            getrf = _lapack(letter, "getrf")
            piv_all = array(pivots, n * count, np.int32).reshape(count, n)
            info_all = array(info, count, np.int32)
            for i, address in enumerate(mx.pointers(Aarray, count)):
                a = mx.view(address, n, n, lda, dtype)
                lu, piv, status = getrf(np.asfortranarray(a))
                a[...] = lu
                piv_all[i] = piv + 1
                info_all[i] = status
        queue(hid, work)
    return call


def make_getri(letter: str):
    dtype = DTYPES[letter]

    def call(hid, n, Aarray, lda, pivots, Carray, ldc, info, count):
        _check(n, lda, count)
        require(ldc >= max(1, n), f"ldc = {ldc} below max(1, {n})")
        _pivoted(pivots)
        if n == 0 or count == 0:
            return

        def work():
            getri = _lapack(letter, "getri")
            piv_all = array(pivots, n * count, np.int32).reshape(count, n)
            info_all = array(info, count, np.int32)
            for i, (a_address, c_address) in enumerate(zip(mx.pointers(Aarray, count), mx.pointers(Carray, count))):
                lu = np.asfortranarray(mx.view(a_address, n, n, lda, dtype))
                inverse, status = getri(lu, piv_all[i] - 1)
                mx.view(c_address, n, n, ldc, dtype)[...] = inverse
                info_all[i] = status
        queue(hid, work)
    return call


def make_getrs(letter: str):
    dtype = DTYPES[letter]

    def call(hid, trans, n, nrhs, Aarray, lda, pivots, Barray, ldb, info, count):
        _host_info(info, [(trans in (0, 1, 2), 2), (n >= 0, 3), (nrhs >= 0, 4), (lda >= max(1, n), 6),
                          (ldb >= max(1, n), 9), (count >= 0, 11)])
        if n == 0 or nrhs == 0 or count == 0:
            return

        def work():
            getrs = _lapack(letter, "getrs")
            piv_all = array(pivots, n * count, np.int32).reshape(count, n)
            for i, (a_address, b_address) in enumerate(zip(mx.pointers(Aarray, count), mx.pointers(Barray, count))):
                lu = np.asfortranarray(mx.view(a_address, n, n, lda, dtype))
                b = mx.view(b_address, n, nrhs, ldb, dtype)
                x, _ = getrs(lu, piv_all[i] - 1, np.asfortranarray(b), trans=trans)
                b[...] = x
        queue(hid, work)
    return call


def make_matinv(letter: str):
    dtype = DTYPES[letter]

    def call(hid, n, Aarray, lda, Ainv, lda_inv, info, count):
        _check(n, lda, count)
        require(n <= 32, f"n = {n}: matinvBatched takes matrices of at most 32 rows")
        require(lda_inv >= max(1, n), f"lda_inv = {lda_inv} below max(1, {n})")
        if n == 0 or count == 0:
            return

        def work():
            getrf, getri = _lapack(letter, "getrf"), _lapack(letter, "getri")
            info_all = array(info, count, np.int32)
            for i, (a_address, c_address) in enumerate(zip(mx.pointers(Aarray, count), mx.pointers(Ainv, count))):
                lu, piv, status = getrf(np.asfortranarray(mx.view(a_address, n, n, lda, dtype)))
                info_all[i] = status
                if status == 0:
                    inverse, _ = getri(lu, piv)
                    mx.view(c_address, n, n, lda_inv, dtype)[...] = inverse
        queue(hid, work)
    return call


def make_geqrf(letter: str):
    dtype = DTYPES[letter]

    def call(hid, m, n, Aarray, lda, TauArray, info, count):
        _host_info(info, [(m >= 0, 2), (n >= 0, 3), (lda >= max(1, m), 5), (count >= 0, 8)])
        if m == 0 or n == 0 or count == 0:
            return

        def work():
            geqrf = _lapack(letter, "geqrf")
            for a_address, tau_address in zip(mx.pointers(Aarray, count), mx.pointers(TauArray, count)):
                a = mx.view(a_address, m, n, lda, dtype)
                qr, tau, _, _ = geqrf(np.asfortranarray(a))
                a[...] = qr
                array(tau_address, tau.size, dtype)[...] = tau
        queue(hid, work)
    return call


def make_gels(letter: str):
    dtype = DTYPES[letter]

    def call(hid, trans, m, n, nrhs, Aarray, lda, Carray, ldc, info, dev_info, count):
        _host_info(info, [(trans in (0, 1, 2), 2), (m >= 0, 3), (n >= 0, 4), (nrhs >= 0, 5),
                          (lda >= max(1, m), 7), (ldc >= max(1, m), 9), (count >= 0, 12)])
        if trans != mx.OP_N or m < n:
            raise CublasError(Status.NOT_SUPPORTED, "gelsBatched solves only untransposed systems with m >= n")
        if count == 0:
            return

        def work():
            gels = _lapack(letter, "gels")
            ranks = array(dev_info, count, np.int32) if dev_info else np.zeros(count, np.int32)
            for i, (a_address, c_address) in enumerate(zip(mx.pointers(Aarray, count), mx.pointers(Carray, count))):
                ranks[i] = 0
                if n == 0 or nrhs == 0:
                    continue
                a, c = mx.view(a_address, m, n, lda, dtype), mx.view(c_address, m, nrhs, ldc, dtype)
                qr, x, status = gels(np.asfortranarray(a), np.asfortranarray(c))
                a[...] = qr
                c[...] = x
                ranks[i] = status
        queue(hid, work)
    return call


FAMILIES = {"getrfBatched": make_getrf, "getriBatched": make_getri, "getrsBatched": make_getrs,
            "matinvBatched": make_matinv, "geqrfBatched": make_geqrf, "gelsBatched": make_gels}
