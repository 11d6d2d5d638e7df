"""Every cuBLAS function anycuda implements: its C name, the kinds of its C parameters, and
the Python function that answers it (taking the C arguments in order, addresses as integers).

Parameter kinds (the shim turns them into C types): h handle, p pointer, e enumeration (C int),
i int (int64_t in the `_64` variants), L int64_t (strides), z size_t, and by value f float,
d double, C cuComplex, Z cuDoubleComplex, c char. Routines come in families spelled once with
their type letters; a family's `_64` variant (64-bit sizes) is the same function, told by a
keyword when it also reads or writes 64-bit integers through pointers (_WIDE). The legacy
routines of cublas.h return their results, so they are in VALUED, each made from its v2
function (legacy.py). Functions in neither table are exported too, answering
CUBLAS_STATUS_NOT_SUPPORTED (shim/libraries.py).
"""
from __future__ import annotations

import functools

import numpy as np

from . import factorizations, gemm_ex, gemv_batched, grouped, handle as handles, legacy, level1_ex, level3
from . import passthrough, rank_k, rotations, xt
from . import signatures
from . import level12 as l12
from ...driver import api
from ..memory import array, write_scalar
from .status import require, status_name, status_text

VERSION = 130100          # cuBLAS 13.1 (major * 10000 + minor * 100 + patch), what headers of 13.x expect
CUDART_VERSION = 13000


def _out(address: int, value, dtype=np.int32) -> None:
    require(address != 0, "an output pointer is NULL")
    write_scalar(address, value, dtype)


def _create(out):
    require(out != 0, "the handle pointer is NULL")
    write_scalar(out, handles.create(), np.uint64)


def _property(kind, out):
    require(kind in (0, 1, 2), f"library property {kind}")
    _out(out, (VERSION // 10000, VERSION // 100 % 100, VERSION % 100)[kind])


def _vector_rules(n, size, src, incx, dst, incy):
    require(n >= 0 and size > 0 and incx > 0 and incy > 0, "n, elemSize, incx or incy out of range")


def _copy_strided(n, size, src, incx, dst, incy):
    """cublasSetVector/GetVector: n elements of `size` bytes, `incx`/`incy` elements apart."""
    if n == 0:
        return
    s = array(src, (n - 1) * incx * size + size, np.uint8).reshape(-1)
    d = array(dst, (n - 1) * incy * size + size, np.uint8).reshape(-1)
    for b in range(size):
        d[b::incy * size][:n] = s[b::incx * size][:n]


def _matrix_rules(rows, cols, size, src, lda, dst, ldb):
    require(rows >= 0 and cols >= 0 and size > 0 and lda >= max(1, rows) and ldb >= max(1, rows),
            "rows, cols, elemSize, lda or ldb out of range")


def _copy_matrix(rows, cols, size, src, lda, dst, ldb):
    for j in range(cols):
        array(dst + j * ldb * size, rows * size, np.uint8)[...] = array(src + j * lda * size, rows * size, np.uint8)


def _blocking(copy, rules):
    """Set/GetVector and Set/GetMatrix: arguments checked at the call, the copy run on the legacy
    default stream as cudaMemcpy runs, so it comes after the work of blocking streams (a routine
    queued on the handle's stream has finished when its result is read back)."""
    def call(*args):
        rules(*args)
        api.submit(None, copy, *args)      # None: blocking, as cudaMemcpy
    return call


def _queued(copy, rules):
    """The *Async copies: arguments checked at the call, the copy queued on the stream given as
    the last argument."""
    def call(*args):
        *args, stream = args
        rules(*args)
        api.submit(stream, copy, *args)
    return call


_logger = [0]            # the callback cublasSetLoggerCallback names (anycuda logs nothing through it)


def _get_stream(hid, out):
    _out(out, handles.get(hid).stream, np.uint64)


def _handle_field(name, dtype=np.int32):
    return lambda hid, out: _out(out, getattr(handles.get(hid), name), dtype)


_ADMIN = {
    "cublasCreate_v2": _create,
    "cublasDestroy_v2": handles.destroy,
    "cublasGetVersion_v2": lambda hid, out: (handles.get(hid), _out(out, VERSION)),
    "cublasGetProperty": _property,
    "cublasSetStream_v2": handles.set_stream,
    "cublasGetStream_v2": _get_stream,
    "cublasSetPointerMode_v2": handles.set_pointer_mode,
    "cublasGetPointerMode_v2": _handle_field("pointer_mode"),
    "cublasSetMathMode": handles.set_math_mode,
    "cublasGetMathMode": _handle_field("math_mode"),
    "cublasSetAtomicsMode": handles.set_atomics_mode,
    "cublasGetAtomicsMode": _handle_field("atomics_mode"),
    "cublasSetSmCountTarget": handles.set_sm_count_target,
    "cublasGetSmCountTarget": _handle_field("sm_count_target"),
    "cublasSetWorkspace_v2": handles.set_workspace,
    "cublasSetEmulationStrategy": handles.set_emulation_strategy,
    "cublasGetEmulationStrategy": _handle_field("emulation_strategy"),
    "cublasSetEmulationSpecialValuesSupport": handles.set_emulation_special_values,
    "cublasGetEmulationSpecialValuesSupport": _handle_field("emulation_special_values"),
    "cublasSetFixedPointEmulationMantissaControl": handles.set_mantissa_control,
    "cublasGetFixedPointEmulationMantissaControl": _handle_field("mantissa_control"),
    "cublasSetFixedPointEmulationMaxMantissaBitCount": handles.set_max_mantissa_bits,
    "cublasGetFixedPointEmulationMaxMantissaBitCount": _handle_field("max_mantissa_bits"),
    "cublasSetFixedPointEmulationMantissaBitOffset": handles.set_mantissa_bit_offset,
    "cublasGetFixedPointEmulationMantissaBitOffset": _handle_field("mantissa_bit_offset"),
    "cublasLoggerConfigure": lambda *args: None,
    "cublasSetEnvironmentMode": lambda: None,
    "cublasSetLoggerCallback": lambda callback: _logger.__setitem__(0, callback),
    "cublasGetLoggerCallback": lambda out: _out(out, _logger[0], np.uint64),
    "cublasSetVector": _blocking(_copy_strided, _vector_rules),
    "cublasGetVector": _blocking(_copy_strided, _vector_rules),
    "cublasSetMatrix": _blocking(_copy_matrix, _matrix_rules),
    "cublasGetMatrix": _blocking(_copy_matrix, _matrix_rules),
    "cublasSetVectorAsync": _queued(_copy_strided, _vector_rules),
    "cublasGetVectorAsync": _queued(_copy_strided, _vector_rules),
    "cublasSetMatrixAsync": _queued(_copy_matrix, _matrix_rules),
    "cublasGetMatrixAsync": _queued(_copy_matrix, _matrix_rules),
    "cublasInit": legacy.init,
    "cublasShutdown": legacy.shutdown,
    "cublasGetVersion": lambda out: _out(out, VERSION),
    "cublasAlloc": legacy.alloc,
    "cublasFree": legacy.free,
    "cublasSetKernelStream": legacy.set_kernel_stream,
    **xt.ADMIN,
}
# the copies' `_64` forms: the same copies with 64-bit sizes and increments
_ADMIN.update({name + "_64": _ADMIN[name] for name in signatures.WIDE_COPIES})

# the answers of the functions whose result is not a status (signatures.VALUED)
VALUED = {
    "cublasGetStatusName": status_name,
    "cublasGetStatusString": status_text,
    "cublasGetCudartVersion": lambda: CUDART_VERSION,
    "cublasGetError": legacy.get_error,
    "cublasXerbla": legacy.xerbla,
}

# a function whose result is not a status has no way to say it failed: the legacy routines keep
# the status for cublasGetError (the shim calls this with it, and returns zero)
valued_failed = legacy.failed

# family (signatures.FAMILIES) -> maker of its member for a type letter
_MAKERS = {
    "axpy": l12.make_axpy, "scal": l12.make_scal, "copy": l12.make_copy_or_swap("copy"),
    "swap": l12.make_copy_or_swap("swap"), "rot": l12.make_rot, "dot": l12.make_dot,
    "nrm2": l12.make_norm("nrm2"), "asum": l12.make_norm("asum"), "amax": l12.make_index("amax"),
    "amin": l12.make_index("amin"), "gemv": l12.make_gemv, "ger": l12.make_ger, "symv": l12.make_symv,
    "trmv": l12.make_triangular_vector("trmv"), "trsv": l12.make_triangular_vector("trsv"),
    "rotg": rotations.make_rotg, "rotm": rotations.make_rotm, "rotmg": rotations.make_rotmg,
    "complexRot": rotations.make_complex_rot,
    **level3.FAMILIES,
    **gemv_batched.FAMILIES,
    **factorizations.FAMILIES,
    **{family: passthrough.make(family) for family in passthrough.ROUTINES},
    **rank_k.FAMILIES,
    "gemmGroupedBatched": grouped.make_grouped,
    **{"xt" + routine: functools.partial(xt.routine, routine) for routine in xt.ROUTINES},
}

_SINGLES = {
    "cublasGemmEx": gemm_ex.gemm_ex,
    "cublasGemmBatchedEx": gemm_ex.gemm_batched_ex,
    "cublasGemmStridedBatchedEx": gemm_ex.gemm_strided_batched_ex,
    "cublasSgemmEx": gemm_ex.sgemm_ex,
    "cublasCgemmEx": gemm_ex.cgemm_ex,
    "cublasCgemm3mEx": gemm_ex.cgemm_ex,
    "cublasCsyrkEx": rank_k.syrk_ex,
    "cublasCsyrk3mEx": rank_k.syrk_ex,
    "cublasCherkEx": rank_k.herk_ex,
    "cublasCherk3mEx": rank_k.herk_ex,
    "cublasHgemm": gemm_ex.hgemm,
    "cublasHgemmBatched": gemm_ex.hgemm_batched,
    "cublasHgemmStridedBatched": gemm_ex.hgemm_strided_batched,
    **level1_ex.ROUTINES,
    "cublasGemmGroupedBatchedEx": grouped.gemm_grouped_batched_ex,
}

# functions whose `_64` variant reads or writes 64-bit integers through pointers (an index
# result, arrays of sizes), told so by a keyword
_WIDE = {"amax": "result_dtype", "amin": "result_dtype", "gemmGroupedBatched": "wide", "cublasIamaxEx": "wide",
         "cublasIaminEx": "wide", "cublasGemmGroupedBatchedEx": "wide"}
_WIDE_VALUE = {"result_dtype": np.int64, "wide": True}


class _Lazy:
    """A family member made at its first call (making one looks its CBLAS function up)."""

    def __init__(self, maker, letters):
        self.maker, self.letters, self.fn = maker, letters, None

    def __call__(self, *args):
        if self.fn is None:
            self.fn = self.maker(self.letters)
        return self.fn(*args)


def _legacy(status_table: dict) -> dict:
    """C name -> function of each legacy routine, answered by its v2 routine in `status_table`."""
    out = {}
    for name, roles, result, letter in signatures.legacy_members():
        v2 = status_table[name + "_v2"][1]
        out[name] = legacy.make(name, roles, result, letter, v2)
    return out


def table() -> dict:
    """C name -> (kinds, function) of every function the drop-in libcublas answers with a status."""
    out = {name: (signatures.ADMIN[name], fn) for name, fn in _ADMIN.items()}
    for name, kinds, family, letter in signatures.members():
        wide = {_WIDE[family]: _WIDE_VALUE[_WIDE[family]]} if family in _WIDE and name.endswith("_64") else {}
        if family in _SINGLES:
            out[name] = (kinds, functools.partial(_SINGLES[family], **wide) if wide else _SINGLES[family])
            continue
        lower = letter[0].lower() + letter[1:]
        maker = functools.partial(_MAKERS[family], **wide) if wide else _MAKERS[family]
        out[name] = (kinds, _Lazy(maker, lower))
    return out


VALUED.update(_legacy(table()))
