"""curandCreatePoissonDistribution's object, laid out as NVIDIA's curand_discrete.h declares it,
in device memory: kernels compiled with curand_kernel.h read it themselves (curand_discrete,
curand_poisson with a distribution), so the handle is the address of the structure, not a number.

    curandDiscreteDistribution_st  self_host_ptr, M2, host_M2, stddev, mean, method, host_gen
    curandDistributionM2Shift_st   histogram, host_histogram, shift, length, host_gen
    curandHistogramM2_st           V, host_V, K, host_K, host_gen
    V: double[length], K: unsigned int[length]

One address space: every host pointer is its device twin. Below distributions.GAUSS_FROM the
method is the square-histogram table (CURAND_M2, distributions.square_histogram, the table
NVIDIA's library builds); from there on CURAND_DISCRETE_GAUSS with mean lambda and deviation
sqrt(lambda) and no table, as NVIDIA's library does.
"""
from __future__ import annotations

import ctypes
import math
import threading

from . import distributions
from ..memory import array
from ...runtime import memory

CURAND_M2, CURAND_DISCRETE_GAUSS = 5, 7


class _Histogram(ctypes.Structure):
    _fields_ = [("V", ctypes.c_void_p), ("host_V", ctypes.c_void_p), ("K", ctypes.c_void_p),
                ("host_K", ctypes.c_void_p), ("host_gen", ctypes.c_uint)]


class _Shift(ctypes.Structure):
    _fields_ = [("histogram", ctypes.c_void_p), ("host_histogram", ctypes.c_void_p), ("shift", ctypes.c_uint),
                ("length", ctypes.c_uint), ("host_gen", ctypes.c_uint)]


class _Distribution(ctypes.Structure):
    _fields_ = [("self_host_ptr", ctypes.c_void_p), ("M2", ctypes.c_void_p), ("host_M2", ctypes.c_void_p),
                ("stddev", ctypes.c_double), ("mean", ctypes.c_double), ("method", ctypes.c_int),
                ("host_gen", ctypes.c_uint)]


_live = {}                      # address -> allocation
_lock = threading.Lock()


def _align(n: int) -> int:
    return (n + 15) // 16 * 16


def create(lam: float) -> int:
    """A Poisson(lam) distribution object in device memory; its address."""
    table = distributions.square_histogram(float(lam)) if lam < distributions.GAUSS_FROM else None
    length = 0 if table is None else len(table[1])
    at_shift = _align(ctypes.sizeof(_Distribution))
    at_histogram = at_shift + _align(ctypes.sizeof(_Shift))
    at_v = at_histogram + _align(ctypes.sizeof(_Histogram))
    at_k = at_v + _align(8 * length)
    block = memory.allocate(at_k + _align(4 * length))
    base = block.ptr
    d = _Distribution.from_address(base)
    d.self_host_ptr = base
    if table is None:
        d.M2 = d.host_M2 = None
        d.method, d.mean, d.stddev = CURAND_DISCRETE_GAUSS, float(lam), math.sqrt(lam)
    else:
        shift, limit, alias = table
        h = _Histogram.from_address(base + at_histogram)
        h.V = h.host_V = base + at_v
        h.K = h.host_K = base + at_k
        array(base + at_v, length, "float64")[:] = limit
        array(base + at_k, length, "uint32")[:] = alias
        s = _Shift.from_address(base + at_shift)
        s.histogram = s.host_histogram = base + at_histogram
        s.shift, s.length = shift, length
        d.M2 = d.host_M2 = base + at_shift
        d.method, d.mean, d.stddev = CURAND_M2, 0.0, 0.0
    with _lock:
        _live[base] = block
    return base


def destroy(address: int) -> bool:
    """Free a distribution object; False when `address` is not one."""
    with _lock:
        block = _live.pop(address, None)
    if block is None:
        return False
    memory.free(block.ptr)
    return True
