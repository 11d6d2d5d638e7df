"""Device memory as the libraries read and write it: a device pointer is a host address here
(one address space), so an argument's elements are a numpy view of that address.

Under initcheck (runtime/shadow.py) every range a library views counts as written, inputs
included: the views do not say which the call writes, so a library's reads are not checked."""
from __future__ import annotations

import ctypes

import numpy as np

from ..runtime import memory


def array(address: int, count: int, dtype) -> np.ndarray:
    """`count` elements of `dtype` at a device address, as a writable numpy view."""
    dtype = np.dtype(dtype)
    if count <= 0:
        return np.empty(0, dtype)
    memory.written(address, count * dtype.itemsize)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(address)
    return np.frombuffer(raw, dtype=dtype)


def write_scalar(address: int, value, dtype) -> None:
    array(address, 1, dtype)[0] = value
