"""cuBLAS's grouped batched gemms (cublasSgemmGroupedBatched, cublasDgemmGroupedBatched,
cublasGemmGroupedBatchedEx): `group_count` groups, group i holding group_size[i] products that
share its operations, sizes, leading dimensions and alpha[i], beta[i]; the pointer arrays list
every product's matrices, group after group.

The per-group arrays (operations, sizes, leading dimensions, group sizes) are host arrays of
int (int64_t in the `_64` variants), read and checked when the call is made; alpha and beta
follow the handle's pointer mode; the pointer arrays are read when the stream reaches the work.
Same-type S and D products run on CBLAS's gemm, the Ex types (16F, 16BF, 32F, 64F) block by
block (blocks.product)."""
from __future__ import annotations

import numpy as np

from .. import blas
from . import gemm_ex, matrices as mx
from .calls import DTYPES, queue_reading, read_array
from .level3 import _check_gemm, scalar
from .status import CublasError, Status, require

# cudaDataType of A and B -> the C types and compute types a grouped GemmEx accepts (cuBLAS lists
# no complex, 8-bit or 16F-compute grouped product)
_EX_TYPES = {gemm_ex.R_32F: {gemm_ex.R_32F}, gemm_ex.R_64F: {gemm_ex.R_64F},
             gemm_ex.R_16F: {gemm_ex.R_16F, gemm_ex.R_32F}, gemm_ex.R_16BF: {gemm_ex.R_16BF, gemm_ex.R_32F}}
_EX_COMPUTE = {gemm_ex.COMPUTE_32F, gemm_ex.COMPUTE_64F}


def _host_ints(address: int, count: int, wide: bool, what: str) -> list:
    require(address != 0 or count == 0, f"the {what} array is NULL")
    return [int(v) for v in mx.vector(address, count, 1, np.int64 if wide else np.int32)] if count else []


def _plan(transa, transb, m, n, k, lda, ldb, ldc, group_count, group_size, wide):
    """Every group's (transa, transb, m, n, k, lda, ldb, ldc, size), checked."""
    require(group_count >= 0, f"group_count = {group_count}")
    arrays = [_host_ints(a, group_count, wide, what) for a, what in
              ((m, "m"), (n, "n"), (k, "k"), (lda, "lda"), (ldb, "ldb"), (ldc, "ldc"), (group_size, "group_size"))]
    ops = [_host_ints(a, group_count, False, what) for a, what in ((transa, "transa"), (transb, "transb"))]
    groups = list(zip(*ops, *arrays))
    for ta, tb, gm, gn, gk, glda, gldb, gldc, size in groups:
        mx.op(ta, "s"), mx.op(tb, "s")
        _check_gemm(ta, tb, gm, gn, gk, glda, gldb, gldc)
        require(size >= 0, f"group_size = {size}")
    return groups


def _products(groups, Aarray, Barray, Carray):
    """(group index, group, A, B, C) of every product, the pointer arrays read now."""
    total = sum(g[-1] for g in groups)
    pointers = [mx.pointers(a, total) if total else [] for a in (Aarray, Barray, Carray)]
    at = 0
    for index, group in enumerate(groups):
        for _ in range(group[-1]):
            yield index, group, pointers[0][at], pointers[1][at], pointers[2][at]
            at += 1


def make_grouped(letter: str, wide: bool = False):
    """cublasSgemmGroupedBatched and cublasDgemmGroupedBatched."""
    gemm = blas.routine(letter, "gemm")
    dtype = DTYPES[letter]

    def call(hid, transa, transb, m, n, k, alpha, Aarray, lda, Barray, ldb, beta, Carray, ldc, group_count,
             group_size):
        groups = _plan(transa, transb, m, n, k, lda, ldb, ldc, group_count, group_size, wide)
        if not any(g[3] and g[4] and g[-1] for g in groups):
            return

        def work(alphas, betas):
            for i, (ta, tb, gm, gn, gk, glda, gldb, gldc, _), A, B, C in _products(groups, Aarray, Barray, Carray):
                if gm and gn:
                    gemm(blas.COL_MAJOR, mx.op(ta, letter), mx.op(tb, letter), gm, gn, gk,
                         scalar(alphas[i], letter), A, glda, B, gldb, scalar(betas[i], letter), C, gldc)
        queue_reading(hid, work, lambda: [read_array(alpha, len(groups), dtype), read_array(beta, len(groups), dtype)])
    return call


def gemm_grouped_batched_ex(hid, transa, transb, m, n, k, alpha, Aarray, Atype, lda, Barray, Btype, ldb, beta,
                            Carray, Ctype, ldc, group_count, group_size, compute, wide=False):
    if Atype != Btype or Ctype not in _EX_TYPES.get(Atype, ()) or gemm_ex._COMPUTE.get(compute) not in _EX_COMPUTE:
        raise CublasError(Status.NOT_SUPPORTED, f"GemmGroupedBatchedEx with A type {Atype}, B type {Btype}, "
                                                f"C type {Ctype}, compute type {compute}")
    scale = gemm_ex.signature(Atype, Btype, Ctype, compute)
    groups = _plan(transa, transb, m, n, k, lda, ldb, ldc, group_count, group_size, wide)
    if not any(g[3] and g[4] and g[-1] for g in groups):
        return
    scale_dtype = gemm_ex.SCALE_DTYPES[scale]

    def work(alphas, betas):
        for i, (ta, tb, gm, gn, gk, glda, gldb, gldc, _), A, B, C in _products(groups, Aarray, Barray, Carray):
            if gm and gn:
                gemm_ex._blocked_product(ta, tb, gm, gn, gk, alphas[i], A, Atype, glda, B, gldb, betas[i], C, Ctype,
                                         gldc)
    queue_reading(hid, work, lambda: [read_array(alpha, len(groups), scale_dtype),
                                      read_array(beta, len(groups), scale_dtype)])
