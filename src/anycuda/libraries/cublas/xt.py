"""cublasXt, cuBLAS's host-memory multi-GPU API: level-3 routines on matrices anywhere in the
process (host or device memory: one address space here), synchronous, on an Xt handle that
names the devices to spread the work over.

Each Xt routine is its v2 routine (the same arguments, sizes as size_t) run on the Xt handle's
own cuBLAS handle on the legacy default stream, then waited for: the call returns with C
written, as cublasXt's do. spmm (a symmetric matrix in packed storage times a general one),
which the v2 API lacks, unpacks the triangle and multiplies on numpy. The tiling settings (block
dimension, pinning, CPU routines and ratios) are kept and reported back; the CPU's BLAS is
what answers every routine anyway, so they change nothing else.
"""
from __future__ import annotations

import numpy as np

from ...driver import api
from ..memory import write_scalar
from ..registry import Registry
from .. import blas
from . import handle as handles, legacy, level3, matrices as mx, passthrough, rank_k
from .calls import DTYPES, queue
from .status import CublasError, Status, require

PINNING_DISABLED, PINNING_ENABLED = 0, 1
_BLAS_OPS = range(10)               # cublasXtBlasOp_t: GEMM ... SPMM
_OP_TYPES = range(4)                # cublasXtOpType_t: FLOAT, DOUBLE, COMPLEX, DOUBLECOMPLEX


class XtHandle:
    def __init__(self):
        self.blas = handles.create()      # the cuBLAS handle the routines run on
        self.devices = []                 # chosen by cublasXtDeviceSelect
        self.block_dim = 2048
        self.pinning = PINNING_DISABLED
        self.cpu_routines = {}            # (blas op, op type) -> functor address
        self.cpu_ratios = {}              # (blas op, op type) -> ratio


_handles = Registry(0x5B1A7000, 16, lambda hid: CublasError(Status.NOT_INITIALIZED,
                                                             f"0x{hid:x} is not a live cublasXt handle"))


def create(out: int) -> None:
    require(out != 0, "the handle pointer is NULL")
    write_scalar(out, _handles.add(XtHandle()), np.uint64)


def destroy(hid: int) -> None:
    handles.destroy(_handles.get(hid).blas)
    _handles.remove(hid)


def _device_count() -> int:
    api.cuInit(0)
    return api.cuDeviceGetCount()


def _device_list(count: int, address: int) -> list:
    require(count >= 1 and address != 0, f"{count} devices")
    devices = [int(d) for d in mx.vector(address, count, 1, np.int32)]
    require(all(0 <= d < _device_count() for d in devices), f"devices {devices}")
    return devices


def device_select(hid: int, count: int, address: int) -> None:
    _handles.get(hid).devices = _device_list(count, address)


def get_num_boards(count: int, address: int, out: int) -> None:
    require(out != 0, "the board count pointer is NULL")
    write_scalar(out, len(set(_device_list(count, address))), np.int32)


def max_boards(out: int) -> None:
    require(out != 0, "the board count pointer is NULL")
    write_scalar(out, _device_count(), np.int32)


def set_block_dim(hid: int, dim: int) -> None:
    require(dim > 0, f"block dimension {dim}")
    _handles.get(hid).block_dim = dim


def get_block_dim(hid: int, out: int) -> None:
    require(out != 0, "the block dimension pointer is NULL")
    write_scalar(out, _handles.get(hid).block_dim, np.int32)


def set_pinning(hid: int, mode: int) -> None:
    require(mode in (PINNING_DISABLED, PINNING_ENABLED), f"pinning mode {mode}")
    _handles.get(hid).pinning = mode


def get_pinning(hid: int, out: int) -> None:
    require(out != 0, "the mode pointer is NULL")
    write_scalar(out, _handles.get(hid).pinning, np.int32)


def _cpu_key(op: int, kind: int) -> tuple:
    require(op in _BLAS_OPS and kind in _OP_TYPES, f"BLAS op {op}, type {kind}")
    return op, kind


def set_cpu_routine(hid: int, op: int, kind: int, functor: int) -> None:
    _handles.get(hid).cpu_routines[_cpu_key(op, kind)] = functor


def set_cpu_ratio(hid: int, op: int, kind: int, ratio: float) -> None:
    require(0 <= ratio <= 1, f"CPU ratio {ratio}")
    _handles.get(hid).cpu_ratios[_cpu_key(op, kind)] = ratio


def _synchronous(v2):
    """An Xt routine: its v2 routine on the Xt handle's cuBLAS handle, waited for."""
    def call(hid, *args):
        blas_handle = _handles.get(hid).blas
        legacy.runtime_context()
        v2(blas_handle, *args)
        api.cuStreamSynchronize(handles.get(blas_handle).stream)
    return call


def make_spmm(letter: str):
    """C = alpha A B + beta C (side left) or alpha B A + beta C (right), A symmetric with its
    `uplo` triangle packed column by column at AP."""
    dtype = DTYPES[letter]

    def call(hid, side, uplo, m, n, alpha, AP, B, ldb, beta, C, ldc):
        left = mx.side(side) == blas.LEFT
        lower = mx.fill(uplo) == blas.LOWER
        mx.sizes(m=m, n=n)
        mx.leading(ldb, m, "ldb")
        mx.leading(ldc, m, "ldc")
        if m == 0 or n == 0:
            return
        order = m if left else n

        def work(a, b):
            rows, cols = level3._packed_indices(order, lower)
            full = np.zeros((order, order), dtype)
            full[rows, cols] = mx.vector(AP, rows.size, 1, dtype)
            full[cols, rows] = full[rows, cols]
            bv = mx.view(B, m, n, ldb, dtype)
            product = a * (full @ bv if left else bv @ full)
            c = mx.view(C, m, n, ldc, dtype)
            c[...] = product + (b * c if b != 0 else 0)
        queue(hid, work, (alpha, beta), dtype)
    return call


# Xt routine -> (maker of its v2 routine for a type letter, type letters)
_SDCZ, _CZ = "SDCZ", "CZ"
ROUTINES = {
    "gemm": (level3.make_gemm, _SDCZ), "symm": (level3.make_symm, _SDCZ), "syrk": (level3.make_syrk, _SDCZ),
    "syr2k": (level3.make_syr2k, _SDCZ), "syrkx": (rank_k.make_rank_kx(False), _SDCZ),
    "trsm": (level3.make_trsm, _SDCZ), "trmm": (level3.make_trmm, _SDCZ), "spmm": (make_spmm, _SDCZ),
    "herk": (passthrough.make("herk"), _CZ), "her2k": (passthrough.make("her2k"), _CZ),
    "hemm": (passthrough.make("hemm"), _CZ), "herkx": (rank_k.make_rank_kx(True), _CZ),
}


def routine(family: str, letter: str):
    maker, _ = ROUTINES[family]
    return _synchronous(maker(letter.lower()))


ADMIN = {
    "cublasXtCreate": create, "cublasXtDestroy": destroy, "cublasXtDeviceSelect": device_select,
    "cublasXtGetNumBoards": get_num_boards, "cublasXtMaxBoards": max_boards,
    "cublasXtSetBlockDim": set_block_dim, "cublasXtGetBlockDim": get_block_dim,
    "cublasXtSetPinningMemMode": set_pinning, "cublasXtGetPinningMemMode": get_pinning,
    "cublasXtSetCpuRoutine": set_cpu_routine, "cublasXtSetCpuRatio": set_cpu_ratio,
}
