"""cuBLAS's level-1 Ex routines: axpy, dot, dotc, nrm2, asum, scal, rot, rotg, rotm, rotmg,
iamax, iamin, copy and swap on data of any cudaDataType cuBLAS lists for them, computed in the
execution type the call names.

Each routine's supported combinations are data (`COMBINATIONS`, as cuBLAS's documentation
lists them); any other combination is CUBLAS_STATUS_NOT_SUPPORTED. Vectors are numpy views of
their stored elements (16-bit floats widened, bfloat16 from its bits), computed in the
execution type and stored back once, rounded to the stored type. Scalars and results follow
the handle's pointer mode, as the typed routines' do (calls.py); rotg and rotmg run on
widened copies of their scalars through the CPU BLAS's own routine of the execution type.
"""
from __future__ import annotations

import numpy as np

from .. import blas
from . import matrices as mx
from .blocks import C_32F, C_64F, R_16BF, R_16F, R_32F, R_64F, STORAGE, store, widen
from .calls import on_scalars, queue, queue_reading, queue_with_result, read_scalar
from .status import CublasError, Status

_EXECUTION = {R_32F: np.float32, R_64F: np.float64, C_32F: np.complex64, C_64F: np.complex128}
_LETTER = {R_32F: "s", R_64F: "d", C_32F: "c", C_64F: "z"}
_REAL_OF = {R_32F: R_32F, R_64F: R_64F, C_32F: R_32F, C_64F: R_64F, R_16F: R_16F, R_16BF: R_16BF}
_HALVES = ((R_16F, R_16F, R_32F), (R_16BF, R_16BF, R_32F))
_SAME = ((R_32F, R_32F, R_32F), (R_64F, R_64F, R_64F), (C_32F, C_32F, C_32F), (C_64F, C_64F, C_64F))
_REAL_SAME = ((R_32F, R_32F, R_32F), (R_64F, R_64F, R_64F))
_COMPLEX_REAL = ((C_32F, R_32F, R_32F), (C_64F, R_64F, R_64F))

# routine -> the (first type, second type, execution type) triples it accepts. First and second
# are: axpy and scal (alpha, x), dot (x and y, result), nrm2 and asum (x, result), rot (x and y,
# c and s), rotg (a and b, c and s), rotm (x and y, param), rotmg (d1, d2, x1, y1 and param).
COMBINATIONS = {
    "axpy": {(R_32F, R_16F, R_32F), (R_32F, R_16BF, R_32F), *_SAME},
    "scal": {(R_32F, R_16F, R_32F), (R_32F, R_16BF, R_32F), *_SAME, (R_32F, C_32F, C_32F), (R_64F, C_64F, C_64F)},
    "dot": {*_HALVES, *_SAME},
    "dotc": {*_HALVES, *_SAME},
    "nrm2": {*_HALVES, *_REAL_SAME, *_COMPLEX_REAL},
    "asum": {*_HALVES, *_REAL_SAME, *_COMPLEX_REAL},
    "rot": {*_HALVES, *_SAME, (C_32F, R_32F, C_32F), (C_64F, R_64F, C_64F)},
    "rotg": {*_HALVES, *_REAL_SAME, (C_32F, R_32F, C_32F), (C_64F, R_64F, C_64F)},
    "rotm": {*_HALVES, *_REAL_SAME},
    "rotmg": {(R_16F, R_16F, R_32F), (R_16BF, R_16BF, R_32F), (R_32F, R_32F, R_32F), (R_64F, R_64F, R_64F)},
}
INDEX_TYPES = {R_32F, R_64F, C_32F, C_64F}                          # iamax, iamin
COPY_TYPES = {R_16F, R_16BF, R_32F, R_64F, C_32F, C_64F}           # copy, swap: any stored type, x's = y's


def _supported(routine: str, first: int, second: int, execution: int) -> np.dtype:
    if (first, second, execution) not in COMBINATIONS[routine]:
        raise CublasError(Status.NOT_SUPPORTED, f"{routine}Ex with types {first}, {second}, execution {execution}")
    return np.dtype(_EXECUTION[execution])


def _same(routine: str, x_type: int, y_type: int) -> None:
    if x_type != y_type:
        raise CublasError(Status.NOT_SUPPORTED, f"{routine}Ex with x type {x_type} and y type {y_type}")


def _vector(address: int, n: int, inc: int, code: int) -> np.ndarray:
    """The n stored elements of type `code` (inc 0: the first one n times, read-only)."""
    if inc == 0:
        return np.broadcast_to(mx.vector(address, 1, 1, STORAGE[code]), (n,))
    return mx.vector(address, n, inc, STORAGE[code])


def _value(stored: np.ndarray, code: int, work) -> np.ndarray:
    return widen(np.asarray(stored), code, work)


def _stored(value, code: int) -> np.ndarray:
    """A value as the bits of type `code` (a 0-d array to write)."""
    out = np.empty(1, STORAGE[code])
    store(out, np.atleast_1d(np.asarray(value)), code)
    return out.reshape(())


def axpy_ex(hid, n, alpha, alpha_type, x, x_type, incx, y, y_type, incy, execution):
    _same("Axpy", x_type, y_type)
    work_type = _supported("axpy", alpha_type, x_type, execution)
    if n <= 0:
        return

    def work(a):
        yv = _vector(y, n, incy, y_type)
        store(yv, _value(yv, y_type, work_type) + _value(a, alpha_type, work_type) * _value(
            _vector(x, n, incx, x_type), x_type, work_type), y_type)
    queue(hid, work, (alpha,), STORAGE[alpha_type])


def scal_ex(hid, n, alpha, alpha_type, x, x_type, incx, execution):
    work_type = _supported("scal", alpha_type, x_type, execution)
    if n <= 0 or incx <= 0:
        return

    def work(a):
        xv = _vector(x, n, incx, x_type)
        store(xv, _value(xv, x_type, work_type) * _value(a, alpha_type, work_type), x_type)
    queue(hid, work, (alpha,), STORAGE[alpha_type])


def make_dot_ex(conjugate: bool):
    def dot_ex(hid, n, x, x_type, incx, y, y_type, incy, result, result_type, execution):
        _same("Dot", x_type, y_type)
        work_type = _supported("dotc" if conjugate else "dot", x_type, result_type, execution)

        def compute():
            if n <= 0:
                return _stored(0, result_type)
            xv = _value(_vector(x, n, incx, x_type), x_type, work_type)
            yv = _value(_vector(y, n, incy, y_type), y_type, work_type)
            return _stored(np.sum((xv.conj() if conjugate else xv) * yv, dtype=work_type), result_type)
        queue_with_result(hid, compute, result, STORAGE[result_type])
    return dot_ex


def make_norm_ex(family: str):
    """nrm2 (the Euclidean norm) or asum (the sum of |re| + |im|)."""
    def norm_ex(hid, n, x, x_type, incx, result, result_type, execution):
        work_type = _supported(family, x_type, result_type, execution)
        if x_type in (C_32F, C_64F):            # a complex vector's real norm: its elements stay complex
            work_type = np.result_type(work_type, np.complex64)

        def compute():
            if n <= 0 or incx <= 0:
                return _stored(0, result_type)
            xv = _value(_vector(x, n, incx, x_type), x_type, work_type)
            if family == "nrm2":
                return _stored(np.linalg.norm(xv), result_type)
            return _stored(np.sum(np.abs(xv.real) + np.abs(xv.imag), dtype=xv.real.dtype), result_type)
        queue_with_result(hid, compute, result, STORAGE[result_type])
    return norm_ex


def make_index_ex(family: str):
    """iamax/iamin: the 1-based index of the first element of largest (smallest) |re| + |im|."""
    def index_ex(hid, n, x, x_type, incx, result, wide=False):
        if x_type not in INDEX_TYPES:
            raise CublasError(Status.NOT_SUPPORTED, f"I{family}Ex with x type {x_type}")

        def compute():
            if n <= 0 or incx <= 0:
                return 0
            xv = _vector(x, n, incx, x_type)
            size = np.abs(xv.real) + np.abs(xv.imag)
            return int(np.argmax(size) if family == "amax" else np.argmin(size)) + 1
        queue_with_result(hid, compute, result, np.int64 if wide else np.int32)
    return index_ex


def make_copy_or_swap_ex(swap: bool):
    def copy_ex(hid, n, x, x_type, incx, y, y_type, incy):
        _same("Swap" if swap else "Copy", x_type, y_type)
        if x_type not in COPY_TYPES:
            raise CublasError(Status.NOT_SUPPORTED, f"{'Swap' if swap else 'Copy'}Ex with type {x_type}")
        if n <= 0:
            return

        def work():
            xv, yv = _vector(x, n, incx, x_type), _vector(y, n, incy, y_type)
            if swap:
                kept = xv.copy()
                xv[...] = yv
                yv[...] = kept
            else:
                yv[...] = xv
        queue(hid, work)
    return copy_ex


def rot_ex(hid, n, x, x_type, incx, y, y_type, incy, c, s, cs_type, execution):
    """x, y = c x + s y, c y - conj(s) x (c is read as the real part of cs_type)."""
    _same("Rot", x_type, y_type)
    work_type = _supported("rot", x_type, cs_type, execution)
    if n <= 0:
        return
    real_type = STORAGE[_REAL_OF[cs_type]]

    def work(cv, sv):
        cw = _value(cv, _REAL_OF[cs_type], work_type.type(0).real.dtype)
        sw = _value(sv, cs_type, work_type)
        xv, yv = _vector(x, n, incx, x_type), _vector(y, n, incy, y_type)
        xw, yw = _value(xv, x_type, work_type), _value(yv, y_type, work_type)
        store(xv, cw * xw + sw * yw, x_type)
        store(yv, cw * yw - np.conj(sw) * xw, y_type)
    queue(hid, work, (c, s), [real_type, STORAGE[cs_type]])


def rotm_ex(hid, n, x, x_type, incx, y, y_type, incy, param, param_type, execution):
    """The modified Givens rotation param describes, through the CPU BLAS's rotm of the
    execution type on widened contiguous copies of x and y."""
    _same("Rotm", x_type, y_type)
    work_type = _supported("rotm", x_type, param_type, execution)
    if n <= 0:
        return
    letter = _LETTER[execution]
    fn = blas.function(letter + "rotm", "ipipip", letter)

    def work(p):
        xv, yv = _vector(x, n, incx, x_type), _vector(y, n, incy, y_type)
        xw = np.ascontiguousarray(_value(xv, x_type, work_type))
        yw = np.ascontiguousarray(_value(yv, y_type, work_type))
        h = np.ascontiguousarray(_value(p, param_type, work_type))
        fn(n, xw.ctypes.data, 1, yw.ctypes.data, 1, h.ctypes.data)
        store(xv, xw, x_type)
        store(yv, yw, y_type)
    queue_reading(hid, work, lambda: [mx.vector(param, 5, 1, STORAGE[param_type]).copy()])


def _scalar_copy(address: int, code: int, work) -> np.ndarray:
    return np.ascontiguousarray(_value(read_scalar(address, STORAGE[code]), code, work)).reshape(1)


def _write_back(address: int, value: np.ndarray, code: int) -> None:
    store(mx.vector(address, 1, 1, STORAGE[code]), value.reshape(1), code)


def rotg_ex(hid, a, b, ab_type, c, s, cs_type, execution):
    """rotg on copies of a, b, c and s in the execution type; a (and a real b) written back,
    as the typed rotg does. cs_type names c's type; s has a and b's."""
    work_type = _supported("rotg", ab_type, cs_type, execution)
    letter = _LETTER[execution]
    fn = blas.function(letter + "rotg", "pppp", letter)
    real_work = np.zeros((), work_type).real.dtype

    def work():
        va, vb = _scalar_copy(a, ab_type, work_type), _scalar_copy(b, ab_type, work_type)
        vc, vs = np.zeros(1, real_work), np.zeros(1, work_type)
        fn(va.ctypes.data, vb.ctypes.data, vc.ctypes.data, vs.ctypes.data)
        _write_back(a, va, ab_type)
        if letter in "sd":
            _write_back(b, vb, ab_type)
        _write_back(c, vc, cs_type)
        _write_back(s, vs, ab_type)
    on_scalars(hid, work, (a, b, c, s))


def rotmg_ex(hid, d1, d1_type, d2, d2_type, x1, x1_type, y1, y1_type, param, param_type, execution):
    """rotmg on copies in the execution type; every argument has the one type the
    combination names (param's entries its flag leaves unused stay as they were)."""
    types = {d1_type, d2_type, x1_type, y1_type}
    if len(types) != 1:
        raise CublasError(Status.NOT_SUPPORTED, f"RotmgEx with types {sorted(types)}")
    work_type = _supported("rotmg", d1_type, param_type, execution)
    letter = _LETTER[execution]
    fn = blas.function(letter + "rotmg", "pppXp", letter)

    def work():
        values = [_scalar_copy(p, d1_type, work_type) for p in (d1, d2, x1)]
        y = float(_scalar_copy(y1, y1_type, work_type)[0])
        h = np.ascontiguousarray(_value(mx.vector(param, 5, 1, STORAGE[param_type]), param_type, work_type))
        fn(*(v.ctypes.data for v in values), y, h.ctypes.data)
        for address, value in zip((d1, d2, x1), values):
            _write_back(address, value, d1_type)
        store(mx.vector(param, 5, 1, STORAGE[param_type]), h, param_type)
    on_scalars(hid, work, (d1, d2, x1, y1, param))


ROUTINES = {
    "cublasAxpyEx": axpy_ex, "cublasScalEx": scal_ex, "cublasDotEx": make_dot_ex(False),
    "cublasDotcEx": make_dot_ex(True), "cublasNrm2Ex": make_norm_ex("nrm2"), "cublasAsumEx": make_norm_ex("asum"),
    "cublasIamaxEx": make_index_ex("amax"), "cublasIaminEx": make_index_ex("amin"),
    "cublasCopyEx": make_copy_or_swap_ex(False), "cublasSwapEx": make_copy_or_swap_ex(True),
    "cublasRotEx": rot_ex, "cublasRotmEx": rotm_ex, "cublasRotgEx": rotg_ex, "cublasRotmgEx": rotmg_ex,
}
