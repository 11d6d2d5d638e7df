"""cuBLAS routines whose arguments map one to one onto CBLAS's (after its column-major order):
Hermitian and banded and packed products, rank updates. Each is described by the roles of its
arguments after the handle; one function checks them, reads the scalars where the pointer mode
says and queues the CBLAS call.

Roles: u fill mode, t operation, d diagonal type, s side; n a size (at least 0), l a leading
dimension (at least 1), i an increment (not 0); a a scalar of the routine's type, r a real one
(Hermitian routines' real alpha or beta); p a device pointer. Empty sizes are CBLAS's to
handle (a rank-k update with k = 0 still scales C by beta).
"""
from __future__ import annotations

import numpy as np

from .. import blas
from . import matrices as mx
from .calls import DTYPES, queue
from .level3 import scalar
from .signatures import PASSTHROUGH
from .status import require

_REAL = {"s": "s", "d": "d", "c": "s", "z": "d"}
_CBLAS_KIND = {"u": "e", "t": "e", "d": "e", "s": "e", "n": "i", "l": "i", "i": "i", "a": "X", "r": "r", "p": "p"}
_ENUMS = {"u": lambda v, letter: mx.fill(v), "t": mx.op, "d": lambda v, letter: mx.diag(v),
          "s": lambda v, letter: mx.side(v)}

ROUTINES = PASSTHROUGH          # family -> (roles, type letters), as cuBLAS's headers order the arguments


def make(family: str):
    roles, _ = ROUTINES[family]

    def for_letter(letter: str):
        fn = blas.function(letter + family, "e" + "".join(_CBLAS_KIND[r] for r in roles), letter)
        dtypes = [DTYPES[letter] if r == "a" else DTYPES[_REAL[letter]] for r in roles if r in "ar"]

        def call(hid, *args):
            converted = []
            for role, value in zip(roles, args):
                if role in _ENUMS:
                    value = _ENUMS[role](value, letter)
                elif role == "n":
                    require(value >= 0, f"a size of {value}")
                elif role == "l":
                    require(value >= 1, f"a leading dimension of {value}")
                elif role == "i":
                    require(value != 0, "an increment of 0")
                converted.append(value)
            scalars = [v for r, v in zip(roles, args) if r in "ar"]

            def work(*values):
                it = iter(values)
                final = [_cblas_scalar(next(it), r, letter) if r in "ar" else v for r, v in zip(roles, converted)]
                fn(blas.COL_MAJOR, *final)
            queue(hid, work, scalars, dtypes)
        return call
    return for_letter


def _cblas_scalar(value: np.ndarray, role: str, letter: str):
    return float(value) if role == "r" else scalar(value, letter)
