"""Device arrays with CuPy's conventions: `asarray`, `empty`, `zeros`, `.get()`, `.data.ptr`.

On the CPU target device memory is host memory, so an array is a numpy view of its
allocation; `.get()` still returns a copy, after synchronising, as it does on a GPU.
"""
from __future__ import annotations

import ctypes

import numpy as np

from .runtime import memory
from .runtime.stream import default_stream


class MemoryPointer:
    """A device address and the allocation that owns it (CuPy's `MemoryPointer`)."""

    def __init__(self, allocation, offset: int = 0, size: int = None):
        self.allocation = allocation
        self.ptr = allocation.ptr + offset
        self.size = allocation.size - offset if size is None else size

    def __int__(self):
        return self.ptr

    def __repr__(self):
        return f"<MemoryPointer 0x{self.ptr:x} size={self.size}>"

    def copy_from_host(self, host: np.ndarray) -> None:
        src = np.ascontiguousarray(host)
        if src.nbytes > self.size:
            raise ValueError(f"{src.nbytes} bytes do not fit in {self.size}")
        memory.memcpy(self.ptr, src.ctypes.data, src.nbytes)

    def copy_to_host(self, host: np.ndarray) -> None:
        if not host.flags.c_contiguous or host.nbytes > self.size:
            raise ValueError("destination must be C-contiguous and no larger than the allocation")
        memory.memcpy(host.ctypes.data, self.ptr, host.nbytes)


class ndarray:
    """A C-contiguous array in device memory."""

    def __init__(self, shape, dtype=np.float32, memptr: MemoryPointer = None):
        self.shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if any(s < 0 for s in self.shape):
            raise ValueError(f"negative dimensions are not allowed: {self.shape}")
        self.dtype = np.dtype(dtype)
        nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        if memptr is None:
            memptr = MemoryPointer(memory.allocate(nbytes))
        self.data = memptr
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * max(nbytes, 1)).from_address(memptr.ptr))
        self._host = raw[:nbytes].view(self.dtype).reshape(self.shape)

    # CuPy-compatible attributes
    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def strides(self) -> tuple:
        return self._host.strides

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def get(self, stream=None) -> np.ndarray:
        """A numpy copy of the array, once the work queued before it has finished."""
        (stream or default_stream).synchronize()
        return self._host.copy()

    def set(self, arr, stream=None) -> None:
        arr = np.asarray(arr)
        if arr.shape != self.shape:
            raise ValueError(f"shape mismatch: {arr.shape} into {self.shape}")
        (stream or default_stream).synchronize()
        self._host[...] = arr.astype(self.dtype, copy=False)

    def fill(self, value) -> None:
        default_stream.synchronize()
        self._host.fill(value)

    def copy(self) -> "ndarray":
        out = ndarray(self.shape, self.dtype)
        default_stream.synchronize()
        memory.memcpy(out.data.ptr, self.data.ptr, self.nbytes)
        return out

    def __repr__(self):
        return f"anycuda.ndarray(shape={self.shape}, dtype={self.dtype}, ptr=0x{self.data.ptr:x})"

    def __array__(self, dtype=None, copy=None):
        raise TypeError("implicit conversion to a numpy array is not allowed; use .get()")


def empty(shape, dtype=np.float32) -> ndarray:
    return ndarray(shape, dtype)


def zeros(shape, dtype=np.float32) -> ndarray:
    return ndarray(shape, dtype)       # fresh mappings are zero-filled


def ones(shape, dtype=np.float32) -> ndarray:
    return full(shape, 1, dtype)


def full(shape, value, dtype=np.float32) -> ndarray:
    a = ndarray(shape, dtype)
    a._host.fill(value)
    return a


def empty_like(a, dtype=None) -> ndarray:
    return ndarray(a.shape, dtype or a.dtype)


def zeros_like(a, dtype=None) -> ndarray:
    return ndarray(a.shape, dtype or a.dtype)


def asarray(obj, dtype=None) -> ndarray:
    """A device copy of `obj` (a numpy array or anything numpy accepts); a device array
    of the right dtype is returned as it is."""
    if isinstance(obj, ndarray) and (dtype is None or np.dtype(dtype) == obj.dtype):
        return obj
    if isinstance(obj, ndarray):
        obj = obj.get()
    host = np.ascontiguousarray(np.asarray(obj, dtype=dtype))
    out = ndarray(host.shape, host.dtype)
    memory.memcpy(out.data.ptr, host.ctypes.data, host.nbytes)
    return out
