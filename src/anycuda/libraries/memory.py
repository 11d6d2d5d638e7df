"""Device memory as the libraries read and write it: a device pointer is a host address here
(one address space), so an argument's elements are a numpy view of that address."""
from __future__ import annotations

import ctypes

import numpy as np


def array(address: int, count: int, dtype) -> np.ndarray:
    """`count` elements of `dtype` at a device address, as a writable numpy view."""
    dtype = np.dtype(dtype)
    if count <= 0:
        return np.empty(0, dtype)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(address)
    return np.frombuffer(raw, dtype=dtype)


def write_scalar(address: int, value, dtype) -> None:
    array(address, 1, dtype)[0] = value
