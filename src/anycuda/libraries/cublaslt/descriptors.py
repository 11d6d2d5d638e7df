"""cuBLASLt's descriptors: matmul operations, matrix layouts, preferences and matrix
transforms, each a set of typed attributes a program sets and reads by number.

A descriptor is named by an address: one cuBLASLt allocates (`cublasLt*Create`, here a small
block of anycuda memory) or one the program allocated and had cuBLASLt initialise
(`cublasLt*Init`, the header's inline functions calling `*Init_internal`). Either way anycuda
keeps the attributes in Python, keyed by that address. Setting an attribute with the wrong
size, or one the descriptor does not have, is CUBLAS_STATUS_INVALID_VALUE, as in cuBLASLt.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from ...runtime import memory
from ..cublas.status import CublasError, Status, require

I32, U32, I64, U64, I8, F32 = (np.dtype(t) for t in (np.int32, np.uint32, np.int64, np.uint64, np.int8, np.float32))

# attribute number -> (name, type, default); the names are cuBLASLt's without their prefix
MATMUL_ATTRIBUTES = {
    0: ("compute_type", I32, 0), 1: ("scale_type", I32, 0), 2: ("pointer_mode", I32, 0), 3: ("transa", I32, 0),
    4: ("transb", I32, 0), 5: ("transc", I32, 0), 6: ("fill_mode", I32, 2), 7: ("epilogue", U32, 1),
    8: ("bias_pointer", U64, 0), 10: ("bias_batch_stride", I64, 0), 11: ("aux_pointer", U64, 0),
    12: ("aux_ld", I64, 0), 13: ("aux_batch_stride", I64, 0), 14: ("alpha_vector_batch_stride", I64, 0),
    15: ("sm_count_target", I32, 0), 17: ("a_scale_pointer", U64, 0), 18: ("b_scale_pointer", U64, 0),
    19: ("c_scale_pointer", U64, 0), 20: ("d_scale_pointer", U64, 0), 21: ("amax_d_pointer", U64, 0),
    22: ("aux_data_type", I32, -1), 23: ("aux_scale_pointer", U64, 0), 24: ("aux_amax_pointer", U64, 0),
    25: ("fast_accum", I8, 0), 26: ("bias_data_type", I32, -1), 31: ("a_scale_mode", I32, 0),
    32: ("b_scale_mode", I32, 0), 33: ("c_scale_mode", I32, 0), 34: ("d_scale_mode", I32, 0),
    35: ("aux_scale_mode", I32, 0), 36: ("d_out_scale_pointer", U64, 0), 37: ("d_out_scale_mode", I32, 0),
    38: ("emulation_descriptor", U64, 0), 39: ("alpha_batch_stride", I64, 0), 40: ("beta_batch_stride", I64, 0),
    41: ("batch_invariance_flags", U32, 0),
}
LAYOUT_ATTRIBUTES = {
    0: ("type", U32, 0), 1: ("order", I32, 0), 2: ("rows", U64, 0), 3: ("cols", U64, 0), 4: ("ld", I64, 0),
    5: ("batch_count", I32, 1), 6: ("strided_batch_offset", I64, 0), 7: ("plane_offset", I64, 0),
    8: ("batch_mode", U32, 0),
}
PREFERENCE_ATTRIBUTES = {
    0: ("search_mode", U32, 0), 1: ("max_workspace_bytes", U64, 0), 3: ("reduction_scheme_mask", U32, 0xFF),
    5: ("min_alignment_a_bytes", U32, 256), 6: ("min_alignment_b_bytes", U32, 256),
    7: ("min_alignment_c_bytes", U32, 256), 8: ("min_alignment_d_bytes", U32, 256),
    9: ("max_waves_count", F32, 0), 12: ("impl_mask", U64, 0xFFFFFFFFFFFFFFFF),
}
TRANSFORM_ATTRIBUTES = {0: ("scale_type", I32, 0), 1: ("pointer_mode", I32, 0), 2: ("transa", I32, 0),
                        3: ("transb", I32, 0)}

ORDER_COL, ORDER_ROW = 0, 1


class Descriptor:
    """Attributes by number (`table`), readable by name (`desc.epilogue`)."""

    table: dict = {}
    kind = "descriptor"

    def __init__(self, **initial):
        self.values = {name: default for name, _, default in self.table.values()}
        self.values.update(initial)

    def __getattr__(self, name):
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def set(self, attribute: int, address: int, size: int) -> None:
        name, dtype = self._attribute(attribute)
        require(size == dtype.itemsize, f"attribute {attribute} of a {self.kind} takes {dtype.itemsize} bytes, "
                                        f"not {size}")
        require(address != 0, "the attribute's buffer is NULL")
        self.values[name] = np.frombuffer((ctypes.c_char * size).from_address(address), dtype)[0].item()

    def get(self, attribute: int, address: int, size: int, written: int) -> None:
        """cuBLASLt's Get*Attribute: with size 0 only the size is reported (through `written`)."""
        name, dtype = self._attribute(attribute)
        if written:
            ctypes.c_size_t.from_address(written).value = dtype.itemsize
        if size == 0 and written:
            return
        require(size >= dtype.itemsize and address != 0, f"a buffer of {size} bytes for attribute {attribute}")
        raw = (ctypes.c_char * dtype.itemsize).from_address(address)
        np.frombuffer(raw, dtype)[0] = self.values[name]

    def _attribute(self, attribute: int):
        entry = self.table.get(attribute)
        require(entry is not None, f"a {self.kind} has no attribute {attribute}")
        return entry[0], entry[1]


class MatmulDesc(Descriptor):
    table, kind = MATMUL_ATTRIBUTES, "matmul descriptor"


class MatrixLayout(Descriptor):
    table, kind = LAYOUT_ATTRIBUTES, "matrix layout"


class Preference(Descriptor):
    table, kind = PREFERENCE_ATTRIBUTES, "matmul preference"


class TransformDesc(Descriptor):
    table, kind = TRANSFORM_ATTRIBUTES, "matrix transform descriptor"


_live = {}                   # address -> Descriptor
_owned = {}                  # address -> anycuda allocation of a descriptor cuBLASLt created
_lock = threading.Lock()
OPAQUE_BYTES = 256           # as large as NVIDIA's largest opaque descriptor (uint64_t data[32])


def create(out: int, descriptor: Descriptor) -> None:
    require(out != 0, "the descriptor pointer is NULL")
    block = memory.allocate(OPAQUE_BYTES)
    with _lock:
        _live[block.ptr] = descriptor
        _owned[block.ptr] = block
    ctypes.c_uint64.from_address(out).value = block.ptr


def initialise(address: int, size: int, descriptor: Descriptor) -> None:
    """A descriptor in the program's own memory (cublasLt*Init)."""
    require(address != 0, "the descriptor is NULL")
    with _lock:
        _live[address] = descriptor


def destroy(address: int) -> None:
    with _lock:
        _live.pop(address, None)
        block = _owned.pop(address, None)
    if block is not None:
        memory.release(block)


def get(address: int, kind: type) -> Descriptor:
    d = _live.get(address)
    if not isinstance(d, kind):
        raise CublasError(Status.INVALID_VALUE if address else Status.NOT_INITIALIZED,
                          f"0x{address:x} is not a {kind.kind}")
    return d
