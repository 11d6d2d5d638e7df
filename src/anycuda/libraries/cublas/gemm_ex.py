"""cublasGemmEx and its batched forms, cublasSgemmEx, cublasHgemm: matrix products on types
CBLAS lacks (16F, 16BF, 8I) and every compute type cuBLAS names.

Same-type products on f32/f64/c64/c128 are level3's (CBLAS, batches as one stacked product). The others run in cache-sized
blocks of C: each block of the operands is widened to the work precision (f32, f64 for 8-bit
integers, whose sums must be exact) and multiplied by numpy's BLAS, and the block of C is
narrowed back once. No whole-matrix copy is made. Products accumulate in f32 or wider, also
for COMPUTE_16F (a GPU accumulates in half there; anycuda's answer is the more accurate one).
"""
from __future__ import annotations

import numpy as np

from . import blocks, matrices as mx
from .calls import queue
from .level3 import _check_gemm, make_gemm, make_gemm_batched, make_gemm_strided_batched
from .status import CublasError, Status, require

# cudaDataType values (library_types.h) and how their elements are stored
R_32F, R_64F, R_16F, R_8I, C_32F, C_64F, R_32I, R_16BF = (blocks.R_32F, blocks.R_64F, blocks.R_16F, blocks.R_8I,
                                                          blocks.C_32F, blocks.C_64F, blocks.R_32I, blocks.R_16BF)
_STORAGE = blocks.STORAGE
_NATIVE = {R_32F: "s", R_64F: "d", C_32F: "c", C_64F: "z"}

# cublasComputeType_t, with the cudaDataType compute types of cuBLAS 10 accepted as their heirs
COMPUTE_16F, COMPUTE_32F, COMPUTE_64F, COMPUTE_32I = 64, 68, 70, 72
_COMPUTE = {64: COMPUTE_16F, 65: COMPUTE_16F, 68: COMPUTE_32F, 69: COMPUTE_32F, 74: COMPUTE_32F, 75: COMPUTE_32F,
            77: COMPUTE_32F, 78: COMPUTE_32F, 70: COMPUTE_64F, 71: COMPUTE_64F, 79: COMPUTE_64F, 72: COMPUTE_32I,
            73: COMPUTE_32I, R_32F: COMPUTE_32F, R_64F: COMPUTE_64F, R_16F: COMPUTE_16F, R_32I: COMPUTE_32I}

# (compute, A/B type, C type) -> the scale type (alpha and beta), as cuBLAS's table lists them
_COMBINATIONS = {
    (COMPUTE_16F, R_16F, R_16F): R_16F,
    (COMPUTE_32I, R_8I, R_32I): R_32I,
    (COMPUTE_32F, R_16BF, R_16BF): R_32F, (COMPUTE_32F, R_16F, R_16F): R_32F, (COMPUTE_32F, R_8I, R_32F): R_32F,
    (COMPUTE_32F, R_16BF, R_32F): R_32F, (COMPUTE_32F, R_16F, R_32F): R_32F, (COMPUTE_32F, R_32F, R_32F): R_32F,
    (COMPUTE_32F, C_32F, C_32F): C_32F,
    (COMPUTE_64F, R_64F, R_64F): R_64F, (COMPUTE_64F, C_64F, C_64F): C_64F,
}
SCALE_DTYPES = {R_16F: np.float16, R_32F: np.float32, R_64F: np.float64, R_32I: np.int32, C_32F: np.complex64,
                 C_64F: np.complex128}

def signature(Atype: int, Btype: int, Ctype: int, compute: int) -> int:
    """The scale type of a supported combination; NOT_SUPPORTED otherwise."""
    key = (_COMPUTE.get(compute), Atype, Ctype)
    if Atype != Btype or key not in _COMBINATIONS:
        raise CublasError(Status.NOT_SUPPORTED, f"GemmEx with A type {Atype}, B type {Btype}, C type {Ctype}, "
                                                f"compute type {compute}")
    return _COMBINATIONS[key]


def _blocked_product(transa, transb, m, n, k, alpha, A, Atype, lda, B, ldb, beta, C, Ctype, ldc):
    """C = alpha op(A) op(B) + beta C for types CBLAS lacks (blocks.product)."""
    a = mx.operand(A, transa, m, k, lda, _STORAGE[Atype])
    b = mx.operand(B, transb, k, n, ldb, _STORAGE[Atype])
    c = mx.view(C, m, n, ldc, _STORAGE[Ctype])
    blocks.product(a, Atype, b, c, Ctype, c, Ctype, alpha, beta)


def _plan(transa, transb, m, n, k, lda, ldb, ldc, Atype, Btype, Ctype, compute):
    mx.op(transa, "c"), mx.op(transb, "c")
    scale = signature(Atype, Btype, Ctype, compute)
    _check_gemm(transa, transb, m, n, k, lda, ldb, ldc)
    native = _NATIVE.get(Atype) if Atype == Ctype and _NATIVE.get(Atype) == _NATIVE.get(scale) else None
    return scale, native


def _itemsize(code: int) -> int:
    return np.dtype(_STORAGE[code]).itemsize


def gemm_ex(hid, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, compute, algo):
    scale, native = _plan(transa, transb, m, n, k, lda, ldb, ldc, Atype, Btype, Ctype, compute)
    if native:
        return make_gemm(native)(hid, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
    if m == 0 or n == 0:
        return
    queue(hid, lambda a, b: _blocked_product(transa, transb, m, n, k, a, A, Atype, lda, B, ldb, b, C, Ctype, ldc),
          (alpha, beta), SCALE_DTYPES[scale])


def gemm_batched_ex(hid, transa, transb, m, n, k, alpha, Aarray, Atype, lda, Barray, Btype, ldb, beta, Carray, Ctype,
                    ldc, count, compute, algo):
    scale, native = _plan(transa, transb, m, n, k, lda, ldb, ldc, Atype, Btype, Ctype, compute)
    if native:
        return make_gemm_batched(native)(hid, transa, transb, m, n, k, alpha, Aarray, lda, Barray, ldb, beta,
                                         Carray, ldc, count)
    require(count >= 0, f"batchCount = {count}")
    if m == 0 or n == 0 or count == 0:
        return

    def work(a, b):
        for pa, pb, pc in zip(mx.pointers(Aarray, count), mx.pointers(Barray, count), mx.pointers(Carray, count)):
            _blocked_product(transa, transb, m, n, k, a, pa, Atype, lda, pb, ldb, b, pc, Ctype, ldc)
    queue(hid, work, (alpha, beta), SCALE_DTYPES[scale])


def gemm_strided_batched_ex(hid, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB,
                            beta, C, Ctype, ldc, strideC, count, compute, algo):
    scale, native = _plan(transa, transb, m, n, k, lda, ldb, ldc, Atype, Btype, Ctype, compute)
    if native:
        return make_gemm_strided_batched(native)(hid, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb,
                                                 strideB, beta, C, ldc, strideC, count)
    require(count >= 0, f"batchCount = {count}")
    if m == 0 or n == 0 or count == 0:
        return
    sa, sc = _itemsize(Atype), _itemsize(Ctype)

    def work(a, b):
        for i in range(count):
            _blocked_product(transa, transb, m, n, k, a, A + i * strideA * sa, Atype, lda, B + i * strideB * sa,
                             ldb, b, C + i * strideC * sc, Ctype, ldc)
    queue(hid, work, (alpha, beta), SCALE_DTYPES[scale])


def sgemm_ex(hid, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc):
    """cublasSgemmEx: any supported input type, float scalars and f32 compute."""
    return gemm_ex(hid, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                   COMPUTE_32F, -1)


def hgemm(hid, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
    return gemm_ex(hid, transa, transb, m, n, k, alpha, A, R_16F, lda, B, R_16F, ldb, beta, C, R_16F, ldc,
                   COMPUTE_16F, -1)


def hgemm_strided_batched(hid, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
                          strideC, count):
    return gemm_strided_batched_ex(hid, transa, transb, m, n, k, alpha, A, R_16F, lda, strideA, B, R_16F, ldb,
                                   strideB, beta, C, R_16F, ldc, strideC, count, COMPUTE_16F, -1)


def hgemm_batched(hid, transa, transb, m, n, k, alpha, Aarray, lda, Barray, ldb, beta, Carray, ldc, count):
    return gemm_batched_ex(hid, transa, transb, m, n, k, alpha, Aarray, R_16F, lda, Barray, R_16F, ldb, beta,
                           Carray, R_16F, ldc, count, COMPUTE_16F, -1)


def cgemm_ex(hid, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc):
    """cublasCgemmEx and cublasCgemm3mEx (the 3M algorithm is a GPU's way to the same product):
    complex scalars and COMPUTE_32F."""
    return gemm_ex(hid, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                   COMPUTE_32F, -1)
