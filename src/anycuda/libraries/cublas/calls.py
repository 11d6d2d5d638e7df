"""How a cuBLAS call runs: queued on its handle's stream like a kernel, with its scalars read
where the handle's pointer mode says they live.

Pointer mode HOST: alpha/beta are read when the call is made (the program may reuse that memory
as soon as the call returns), and a call that returns a result (dot, nrm2, iamax...) waits for
its work and writes the result before returning, as cuBLAS does. Pointer mode DEVICE: scalars
are read, and results written, when the stream reaches the work; the call returns at once.
Device and host memory share one address space here, so both are plain reads of an address.
"""
from __future__ import annotations

import threading

import numpy as np

from ...driver import api
from ..memory import array, write_scalar
from . import handle as handles
from .status import CublasError, Status

DTYPES = {"s": np.dtype(np.float32), "d": np.dtype(np.float64), "c": np.dtype(np.complex64),
          "z": np.dtype(np.complex128), "h": np.dtype(np.float16), "i": np.dtype(np.int32)}


def read_scalar(address: int, dtype) -> np.ndarray:
    """The value at `address` as a 0-d array of `dtype` (a copy: the memory may change)."""
    dtype = np.dtype(dtype)
    if not address:
        raise CublasError(Status.INVALID_VALUE, "a scalar pointer is NULL")
    return array(address, 1, dtype).copy().reshape(())


def read_array(address: int, count: int, dtype) -> np.ndarray:
    """`count` values at `address` (a copy), e.g. rotm's five parameters."""
    if not address:
        raise CublasError(Status.INVALID_VALUE, "a scalar pointer is NULL")
    return array(address, count, dtype).copy()


def queue_reading(hid: int, work, read) -> None:
    """Queue `work(*read())` on the handle's stream: `read` (of the call's host-or-device
    scalars) runs now in host pointer mode, when the work runs in device mode."""
    h = handles.get(hid)
    if h.pointer_mode == handles.POINTER_MODE_HOST:
        api.submit(h.stream, work, *read())
    else:
        api.submit(h.stream, lambda: work(*read()))


def queue(hid: int, work, scalars=(), dtype=None) -> None:
    """Queue `work(*values)` on the handle's stream, `values` being the scalars at the
    addresses `scalars` (read now in host pointer mode, when the work runs in device mode).
    `dtype` is the scalars' type, or a list of one type per scalar."""
    addresses = list(scalars)
    dtypes = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype] * len(addresses)
    if handles.get(hid).pointer_mode == handles.POINTER_MODE_DEVICE and any(not a for a in addresses):
        raise CublasError(Status.INVALID_VALUE, "a scalar pointer is NULL")
    queue_reading(hid, work, lambda: [read_scalar(a, t) for a, t in zip(addresses, dtypes)])


def on_scalars(hid: int, work, addresses) -> None:
    """A call that reads and writes nothing but scalars (rotg, rotmg): in host pointer mode it
    runs now (no device work can be pending on host variables, and the program reads them
    next); in device mode it is queued and reads them when the stream reaches it."""
    h = handles.get(hid)
    if any(not a for a in addresses):
        raise CublasError(Status.INVALID_VALUE, "a scalar pointer is NULL")
    if h.pointer_mode == handles.POINTER_MODE_HOST:
        work()
    else:
        api.submit(h.stream, work)


def queue_with_result(hid: int, compute, result: int, result_dtype, scalars=(), dtype=None) -> None:
    """Queue a call whose result `compute(*scalars)` is written to `result`: in host pointer
    mode the call waits for it (the host reads it next), in device mode it does not."""
    h = handles.get(hid)
    if not result:
        raise CublasError(Status.INVALID_VALUE, "the result pointer is NULL")

    def work(*values):
        write_scalar(result, compute(*values), result_dtype)

    if h.pointer_mode == handles.POINTER_MODE_DEVICE:
        queue(hid, work, scalars, dtype)
        return
    if api.cuStreamIsCapturing(h.stream):
        raise CublasError(Status.NOT_SUPPORTED, "a result in host memory cannot be captured into a graph")
    done = threading.Event()
    failure = []

    def waited(*values):
        try:
            work(*values)
        except BaseException as e:      # noqa: BLE001 -- reported to the caller below
            failure.append(e)
            raise
        finally:
            done.set()

    values = [read_scalar(a, dtype) for a in scalars]
    api.submit(h.stream, waited, *values, on_skip=done.set)
    done.wait()
    if failure:
        raise CublasError(Status.EXECUTION_FAILED, str(failure[0]))
