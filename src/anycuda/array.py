"""Device arrays with CuPy's conventions: `asarray`, `empty`, `zeros`, `.get()`, `.data.ptr`.

On the CPU target device memory is host memory, but arrays keep a GPU's discipline: data
moves in and out with `asarray`/`.set()` and `.get()` (a copy, ordered after the work queued
before it; the call returns when it is done, as `cudaMemcpy` does, while kernels and
device-to-device copies only queue their work), and a numpy array never passes for a device array. Arrays are C-contiguous.
Their memory is freed when the last array (or MemoryPointer) using it is collected.
"""
from __future__ import annotations

import ctypes
import operator

import numpy as np

from .runtime import memory
from .runtime.errors import CudaError, CUresult
from .runtime.stream import api_stream, release_after_queued_work


class Memory:
    """Device memory owned by Python objects (CuPy's `cupy.cuda.Memory`): allocated on
    creation, freed when collected (or by `free()`) once the work queued before that has
    finished, which may still use it (a GPU's cudaFree waits for the device)."""

    def __init__(self, size: int):
        self.allocation = memory.allocate(int(size))
        self.ptr = self.allocation.ptr
        self.size = self.allocation.size
        self.device_id = 0

    def free(self) -> None:
        allocation = self.allocation
        release_after_queued_work(lambda: memory.release(allocation))

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass

    def __int__(self):
        return self.ptr

    def __repr__(self):
        return f"<anycuda Memory 0x{self.ptr:x} size={self.size}>"


class MemoryPointer:
    """A device address and what owns its memory (CuPy's `cupy.cuda.MemoryPointer`).
    `mem` is a `Memory` or a `runtime.memory.Allocation` (module variables, driver memory)."""

    def __init__(self, mem, offset: int = 0, size: int = None):
        self.mem = mem
        self.offset = int(offset)
        self.ptr = int(mem.ptr) + self.offset
        self.size = int(mem.size) - self.offset if size is None else int(size)
        self.device_id = 0

    @property
    def allocation(self):
        return getattr(self.mem, "allocation", self.mem)

    def __int__(self):
        return self.ptr

    def __index__(self):
        return self.ptr

    def __add__(self, offset: int) -> "MemoryPointer":
        offset = operator.index(offset)
        return MemoryPointer(self.mem, self.offset + offset, self.size - offset)

    def __sub__(self, offset: int) -> "MemoryPointer":
        return self + (-operator.index(offset))

    def __eq__(self, other):
        return isinstance(other, MemoryPointer) and other.ptr == self.ptr

    def __hash__(self):
        return hash(self.ptr)

    def __repr__(self):
        return f"<MemoryPointer 0x{self.ptr:x} size={self.size}>"

    # copies (host memory: a numpy array or an address; sizes in bytes)
    def _host_address(self, host, size):
        if isinstance(host, np.ndarray):
            if not host.flags.c_contiguous:
                raise ValueError("host array must be C-contiguous")
            return host.ctypes.data, host.nbytes if size is None else int(size)
        if size is None:
            raise ValueError("give the size in bytes when the host side is an address")
        return int(getattr(host, "value", host)), int(size)

    def _check(self, size):
        if size < 0 or size > self.size:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE,
                            f"{size} bytes do not fit in the {self.size} bytes at 0x{self.ptr:x}")

    def copy_from_host(self, host, size: int = None) -> None:
        addr, size = self._host_address(np.ascontiguousarray(host) if isinstance(host, np.ndarray) else host, size)
        self._check(size)
        api_stream().call(memory.memcpy, self.ptr, addr, size)

    def copy_to_host(self, host, size: int = None) -> None:
        addr, size = self._host_address(host, size)
        self._check(size)
        api_stream().call(memory.memcpy, addr, self.ptr, size)

    def copy_from_device(self, src: "MemoryPointer", size: int) -> None:
        self._check(size)
        api_stream().enqueue(memory.memcpy, self.ptr, int(src), size, any_thread=True)

    def memset(self, value: int, size: int) -> None:
        self._check(size)
        api_stream().enqueue(memory.memset, self.ptr, value, size, any_thread=True)


def _shape_tuple(shape) -> tuple:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"a shape must be an int or a tuple of ints, not {shape!r}") from None
    if any(s < 0 for s in shape):
        raise ValueError(f"negative dimensions are not allowed: {shape}")
    return shape


def _view(ptr: int, nbytes: int, dtype, shape) -> np.ndarray:
    """A numpy view of `nbytes` at `ptr` (valid while the memory lives)."""
    if nbytes == 0:
        return np.empty(shape, dtype)
    raw = np.frombuffer((ctypes.c_uint8 * nbytes).from_address(ptr), dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


class ndarray:
    """A C-contiguous array in device memory (the part of `cupy.ndarray` kernels need)."""

    def __init__(self, shape, dtype=float, memptr: MemoryPointer = None):
        self._shape = _shape_tuple(shape)
        self._dtype = np.dtype(dtype)
        if self._dtype.hasobject:
            raise TypeError(f"dtype {self._dtype} holds Python objects; device arrays cannot")
        nbytes = self.size * self._dtype.itemsize
        if memptr is None:
            memptr = MemoryPointer(Memory(nbytes))
        elif memptr.size < nbytes:
            raise ValueError(f"{memptr.size} bytes at 0x{memptr.ptr:x} cannot hold {nbytes}")
        self.data = memptr

    # ------------------------------------------------------------ attributes (CuPy's names)
    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)

    @property
    def size(self) -> int:
        n = 1
        for s in self._shape:
            n *= s
        return n

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self._dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def strides(self) -> tuple:
        if self.size == 0:
            return np.empty(self._shape, self._dtype).strides     # numpy's (and CuPy's) convention
        strides, step = [], self._dtype.itemsize
        for s in reversed(self._shape):
            strides.append(step)
            step *= max(s, 1)
        return tuple(reversed(strides))

    @property
    def device(self):
        from .runtime.device import Device
        return Device(0)

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self._shape, "typestr": self._dtype.str, "descr": self._dtype.descr,
                "data": (self.data.ptr, False), "strides": None, "version": 3}

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of unsized object")
        return self._shape[0]

    def _host(self) -> np.ndarray:
        return _view(self.data.ptr, self.nbytes, self._dtype, self._shape)

    # ------------------------------------------------------------ moving data
    def get(self, stream=None, out: np.ndarray = None) -> np.ndarray:
        """A numpy copy of the array, taken after the work queued before it (on `stream`, or
        on the default stream, which waits for the blocking streams' earlier work)."""
        if out is None:
            out = np.empty(self._shape, self._dtype)
        elif out.shape != self._shape or out.dtype != self._dtype or not out.flags.c_contiguous \
                or not out.flags.writeable:
            raise ValueError(f"out must be a writeable C-contiguous {self._dtype} array of shape {self._shape}")
        (stream or api_stream()).call(memory.copy_to_host_array, out, self.data.ptr)
        return out

    def set(self, arr, stream=None) -> None:
        """Copy host data in (after the work queued before it on `stream`)."""
        arr = np.asarray(arr)
        if arr.shape != self._shape:
            raise ValueError(f"shape mismatch: cannot set an array of shape {arr.shape} into {self._shape}")
        host = np.asarray(arr, dtype=self._dtype, order="C")
        if stream is None:       # as cudaMemcpy from pageable memory: the caller may reuse `arr` at once
            api_stream().call(memory.copy_from_host_array, self.data.ptr, host)
        else:
            stream.enqueue(_copy_keeping, self.data.ptr, host.ctypes.data, host.nbytes, host, self, any_thread=True)

    def fill(self, value) -> None:
        """Set every element to `value`."""
        def fill():
            if self.size:
                self._host().fill(value)
        api_stream().enqueue(fill, any_thread=True)

    def copy(self) -> "ndarray":
        out = ndarray(self._shape, self._dtype)
        api_stream().enqueue(_copy_keeping, out.data.ptr, self.data.ptr, self.nbytes, self, out, any_thread=True)
        return out

    def astype(self, dtype, copy: bool = True) -> "ndarray":
        dtype = np.dtype(dtype)
        if dtype == self._dtype and not copy:
            return self
        return asarray(self.get().astype(dtype))

    def reshape(self, *shape) -> "ndarray":
        """A view with another shape (one dimension may be -1)."""
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        shape = tuple(operator.index(s) for s in shape)
        if shape.count(-1) > 1:
            raise ValueError("only one dimension can be -1")
        if -1 in shape:
            known = 1
            for s in shape:
                if s != -1:
                    known *= s
            if known == 0 or self.size % known:
                raise ValueError(f"cannot reshape an array of size {self.size} into {shape}")
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        new = _shape_tuple(shape)
        n = 1
        for s in new:
            n *= s
        if n != self.size:
            raise ValueError(f"cannot reshape an array of size {self.size} into {new}")
        return ndarray(new, self._dtype, self.data)

    def ravel(self) -> "ndarray":
        return self.reshape(-1) if self.size else ndarray((0,), self._dtype, self.data)

    def view(self, dtype) -> "ndarray":
        dtype = np.dtype(dtype)
        if not self._shape:
            if dtype.itemsize != self.itemsize:
                raise ValueError("a 0-d view must keep the item size")
            return ndarray((), dtype, self.data)
        last = self._shape[-1] * self.itemsize
        if last % dtype.itemsize:
            raise ValueError(f"the last axis ({last} bytes) is not a multiple of {dtype.itemsize}")
        return ndarray(self._shape[:-1] + (last // dtype.itemsize,), dtype, self.data)

    def __repr__(self):
        return f"anycuda.ndarray(shape={self._shape}, dtype={self._dtype}, ptr=0x{self.data.ptr:x})"

    def __array__(self, dtype=None, copy=None):
        raise TypeError("implicit conversion of an anycuda.ndarray to a numpy array is not allowed; "
                        "use .get() to copy it to the host")

    def __bool__(self):
        raise TypeError("the truth value of a device array is ambiguous; use .get()")


def _copy_keeping(dst, src, nbytes, *keep):
    """memcpy; `keep` holds the objects that own the memory until the copy ran."""
    memory.memcpy(dst, src, nbytes)


# ---------------------------------------------------------------- creation (CuPy's signatures)

def empty(shape, dtype=float, order: str = "C") -> ndarray:
    _check_order(order)
    return ndarray(shape, dtype)


def zeros(shape, dtype=float, order: str = "C") -> ndarray:
    _check_order(order)
    return ndarray(shape, dtype)       # fresh allocations are zero-filled


def ones(shape, dtype=float, order: str = "C") -> ndarray:
    return full(shape, 1, dtype, order)


def full(shape, fill_value, dtype=None, order: str = "C") -> ndarray:
    _check_order(order)
    if dtype is None:
        dtype = np.asarray(fill_value).dtype
    a = ndarray(shape, dtype)
    if a.size:
        a._host().fill(fill_value)
    return a


def empty_like(a, dtype=None, shape=None) -> ndarray:
    return ndarray(a.shape if shape is None else shape, a.dtype if dtype is None else dtype)


def zeros_like(a, dtype=None, shape=None) -> ndarray:
    return empty_like(a, dtype, shape)


def ones_like(a, dtype=None, shape=None) -> ndarray:
    return full(a.shape if shape is None else shape, 1, a.dtype if dtype is None else dtype)


def full_like(a, fill_value, dtype=None, shape=None) -> ndarray:
    return full(a.shape if shape is None else shape, fill_value, a.dtype if dtype is None else dtype)


def asarray(obj, dtype=None) -> ndarray:
    """A device array holding `obj` (a numpy array or anything numpy accepts). A device
    array of the right dtype comes back as it is, as in CuPy."""
    if isinstance(obj, ndarray):
        if dtype is None or np.dtype(dtype) == obj.dtype:
            return obj
        return obj.astype(dtype)
    host = np.asarray(obj, dtype=dtype, order="C")
    if host.dtype.hasobject:
        raise TypeError(f"cannot put {type(obj).__name__} of Python objects on the device")
    out = ndarray(host.shape, host.dtype)
    memory.copy_from_host_array(out.data.ptr, host)     # fresh memory: no ordering needed
    return out


def array(obj, dtype=None, copy: bool = True) -> ndarray:
    """Like `asarray`, but a device array is copied unless copy=False."""
    if isinstance(obj, ndarray) and copy and (dtype is None or np.dtype(dtype) == obj.dtype):
        return obj.copy()
    return asarray(obj, dtype)


def asnumpy(a, stream=None) -> np.ndarray:
    """A host copy of a device array (numpy input is returned as a numpy array)."""
    return a.get(stream) if isinstance(a, ndarray) else np.asarray(a)


def _check_order(order):
    if order not in ("C", None):
        raise ValueError("anycuda arrays are C-contiguous (order='C')")
