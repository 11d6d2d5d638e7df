"""cuBLAS's plane rotations beyond real rot (level12.py): rotg (construct a Givens rotation),
rotm (apply a modified Givens rotation) and rotmg (construct one), on the CPU BLAS's own
routines, and complex rot with a complex sine (Crot, Zrot), which CBLAS lacks, on numpy.

rotg and rotmg touch nothing but scalars, which live where the handle's pointer mode says:
in host mode they run when called (calls.on_scalars), in device mode when the stream reaches
them. rotm's five parameters (flag, h11, h21, h12, h22) follow the pointer mode like any
scalar. BLAS's conventions are kept: real rotg overwrites a with r and b with z (complex rotg
leaves b alone), rotmg writes only the entries of `param` its flag uses.
"""
from __future__ import annotations

import numpy as np

from .. import blas
from . import matrices as mx
from ..memory import array, write_scalar
from .calls import DTYPES, on_scalars, queue, queue_reading, read_array, read_scalar
from .status import require

_REAL = {"s": "s", "d": "d", "c": "s", "z": "d"}


def make_rotg(letter: str):
    """Srotg, Drotg, Crotg, Zrotg: (a, b) -> c, s with [c s; -conj(s) c] [a; b] = [r; 0]."""
    fn = blas.function(letter + "rotg", "pppp", letter)
    dtype, real = DTYPES[letter], DTYPES[_REAL[letter]]

    def call(hid, a, b, c, s):
        def work():
            va, vb = read_scalar(a, dtype), read_scalar(b, dtype)
            vc, vs = read_scalar(c, real), read_scalar(s, dtype)
            fn(va.ctypes.data, vb.ctypes.data, vc.ctypes.data, vs.ctypes.data)
            write_scalar(a, va, dtype)
            if letter in "sd":
                write_scalar(b, vb, dtype)
            write_scalar(c, vc, real)
            write_scalar(s, vs, dtype)
        on_scalars(hid, work, (a, b, c, s))
    return call


def make_rotm(letter: str):
    """Srotm, Drotm: x, y = H (x, y) for the H that param's flag describes."""
    fn = blas.function(letter + "rotm", "ipipip", letter)
    dtype = DTYPES[letter]

    def call(hid, n, x, incx, y, incy, param):
        if n <= 0:
            return
        require(param != 0, "param is NULL")      # in device pointer mode too: checked at the call
        queue_reading(hid, lambda p: fn(n, x, incx, y, incy, p.ctypes.data), lambda: [read_array(param, 5, dtype)])
    return call


def make_rotmg(letter: str):
    """Srotmg, Drotmg: the H that zeroes the second component of (sqrt(d1) x1, sqrt(d2) y1)."""
    fn = blas.function(letter + "rotmg", "pppXp", letter)
    dtype = DTYPES[letter]

    def call(hid, d1, d2, x1, y1, param):
        def work():
            values = [read_scalar(p, dtype) for p in (d1, d2, x1)]
            h = read_array(param, 5, dtype)          # entries the flag leaves unused stay as they were
            fn(*(v.ctypes.data for v in values), float(read_scalar(y1, dtype)), h.ctypes.data)
            for address, value in zip((d1, d2, x1), values):
                write_scalar(address, value, dtype)
            array(param, 5, dtype)[...] = h
        on_scalars(hid, work, (d1, d2, x1, y1, param))
    return call


def make_complex_rot(letter: str):
    """Crot, Zrot (real c, complex s), which CBLAS lacks: x, y = c x + s y, c y - conj(s) x on
    numpy views of the two vectors."""
    dtype, real = DTYPES[letter], DTYPES[_REAL[letter]]

    def call(hid, n, x, incx, y, incy, c, s):
        if n <= 0:
            return
        require(incx != 0 and incy != 0, "incx and incy must not be 0")

        def work(cv, sv):
            xv, yv = mx.vector(x, n, incx, dtype), mx.vector(y, n, incy, dtype)
            rotated_x = cv * xv + sv * yv
            yv[...] = cv * yv - np.conj(sv) * xv
            xv[...] = rotated_x
        queue(hid, work, (c, s), [real, dtype])
    return call
