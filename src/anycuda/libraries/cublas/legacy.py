"""cuBLAS's legacy API (cublas.h): one library-wide context instead of handles, scalars passed
by value, operations and modes as characters, results returned, and errors kept for
cublasGetError instead of returned.

Each legacy routine is answered by its v2 routine on the legacy context's handle, made by
cublasInit (its stream set by cublasSetKernelStream, its pointer mode always host): by-value
scalars are put in host memory for the call (read when the call is made, as host mode does),
characters become the v2 enumerations ('N'/'T'/'C', 'U'/'L', 'L'/'R', 'N'/'U', either case; any
other character is refused as the v2 routine refuses an unknown enumeration), and a result comes
back through a host variable. A routine that fails returns zero and leaves its status for
cublasGetError, which answers the last one kept, once. A routine called before cublasInit
fails with CUBLAS_STATUS_NOT_INITIALIZED, as the legacy library's routines did.
"""
from __future__ import annotations

import ctypes
import sys
import threading

import numpy as np

from ...driver import api
from ...runtime.errors import CudaError
from ..memory import write_scalar
from . import handle as handles
from .calls import DTYPES
from .status import CublasError, Status, require

# the v2 enumeration each character names, by the role of the argument (signatures.LEGACY)
_CHARACTERS = {"t": {"N": 0, "T": 1, "C": 2}, "u": {"L": 0, "U": 1}, "s": {"L": 0, "R": 1}, "d": {"N": 0, "U": 1}}
_UNNAMED = -1           # a character no rule names: an enumeration the v2 routine refuses
_REAL = {"S": "s", "D": "d", "C": "s", "Z": "d"}

# v2 routines whose arguments are not the legacy ones plus the handle: trmm writes a separate C
# in v2 (cuBLAS's out-of-place trmm), in place in the legacy API, so B and ldb are given twice
_REWRITES = {"trmm": lambda args: args + args[-2:]}


class _Context:
    def __init__(self):
        self.handle = None                  # the cuBLAS handle legacy routines run on
        self.error = Status.SUCCESS         # the last failure's status, for cublasGetError
        self.lock = threading.Lock()


_context = _Context()


def _handle() -> int:
    hid = _context.handle
    if hid is None:
        raise CublasError(Status.NOT_INITIALIZED, "cublasInit has not been called")
    return hid


def init() -> None:
    with _context.lock:
        if _context.handle is None:
            _context.handle = handles.create()


def shutdown() -> None:
    with _context.lock:
        handles.destroy(_handle())
        _context.handle = None


def get_error() -> int:
    """The status of the last legacy routine that failed since the last call, then SUCCESS."""
    with _context.lock:
        error, _context.error = _context.error, Status.SUCCESS
    return int(error)


def failed(name: str, status: int) -> None:
    """Keep the status of a failed legacy routine for cublasGetError."""
    with _context.lock:
        _context.error = Status(status)


def xerbla(name: int, position: int) -> None:
    """cublasXerbla, the legacy API's report of a wrong argument: says it on stderr."""
    routine = ctypes.string_at(name).decode(errors="replace") if name else "?"
    sys.stderr.write(f" ** On entry to {routine} parameter number {position} had an illegal value\n")


def set_kernel_stream(stream: int) -> None:
    handles.set_stream(_handle(), stream)


def runtime_context() -> None:
    """cublasAlloc allocates as cudaMalloc does: a thread without a current context gets the
    primary context of device 0."""
    api.cuInit(0)
    if not api.cuCtxGetCurrent():
        api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))


def alloc(n: int, size: int, out: int) -> None:
    _handle()
    require(n > 0 and size > 0, f"{n} elements of {size} bytes")
    require(out != 0, "the device pointer's address is NULL")
    try:
        runtime_context()
        address = api.cuMemAlloc(n * size)
    except CudaError as e:
        raise CublasError(Status.ALLOC_FAILED, str(e)) from None
    write_scalar(out, address, np.uint64)


def free(address: int) -> None:
    _handle()
    if not address:
        return
    try:
        api.cuMemFree(address)
    except CudaError as e:
        raise CublasError(Status.INTERNAL_ERROR, str(e)) from None


def make(name: str, roles: str, result: str, letter: str, v2):
    """The legacy routine `name` whose arguments have `roles` and whose result is `result`
    (signatures.LEGACY), answered by `v2`, its v2 routine's function."""
    scalar_dtypes = {"a": DTYPES[letter.lower()], "r": DTYPES[_REAL[letter]]}
    result_dtype = {"T": DTYPES[letter.lower()], "R": DTYPES[_REAL[letter]], "I": np.dtype(np.int32)}.get(result)
    rewrite = _REWRITES.get(name[len("cublasX"):], lambda args: args)

    def call(*args):
        converted, held = [_handle()], []
        for role, value in zip(roles, args):
            if role in _CHARACTERS:
                value = _CHARACTERS[role].get(chr(value).upper(), _UNNAMED)
            elif role in scalar_dtypes:
                held.append(np.array([value], scalar_dtypes[role]))
                value = held[-1].ctypes.data
            converted.append(value)
        converted = rewrite(converted)
        if result_dtype is None:
            v2(*converted)
            return None
        out = np.zeros(1, result_dtype)
        v2(*converted, out.ctypes.data)
        return out[0].item()
    call.__name__ = name
    return call
