"""What the tests of anycuda's CUDA libraries share: calling a library function as its C entry
point does (arguments as integers), device memory holding given values, host scalars, reads."""
import ctypes

import numpy as np

import anycuda as ac

_kept = []          # memory the tests hand to library calls stays alive for the session


def caller(table):
    """call(name, *args): the function behind C name `name` in a library's table."""
    return lambda name, *args: table[name][1](*args)


def device(values) -> int:
    """Device memory holding `values` (a copy)."""
    values = np.ascontiguousarray(values)
    mem = ac.Memory(max(values.nbytes, 1))
    ctypes.memmove(mem.ptr, values.ctypes.data, values.nbytes)
    _kept.append(mem)
    return mem.ptr


def read(ptr, count, dtype):
    """`count` values at a device address, copied out as cudaMemcpy does: after the work queued
    before on the legacy default stream (and so on every blocking stream)."""
    out = np.empty(count, dtype)
    ac.default_stream.call(ctypes.memmove, out.ctypes.data, ptr, out.nbytes)
    return out


def peek(ptr, count, dtype):
    """`count` values at a device address as they are now, waiting for nothing (one address
    space): how a test sees that queued work has not run yet."""
    return np.frombuffer((ctypes.c_char * (count * np.dtype(dtype).itemsize)).from_address(ptr), dtype).copy()


def scalar(value, dtype) -> int:
    """The address of a host scalar holding `value`."""
    holder = np.array([value], dtype)
    _kept.append(holder)
    return holder.ctypes.data


def stream_handle(stream) -> int:
    """A driver stream handle (what cudaStreamCreate hands a program) for an anycuda Stream, so
    a test can hold the stream's work back with a gate of its own."""
    from anycuda.driver import api
    api.cuInit(0)
    if not getattr(api._current, "ctx", None):
        api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
    handle = api.cuStreamCreate(0)
    api._get(handle, api.StreamHandle).stream = stream
    return handle
