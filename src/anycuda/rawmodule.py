"""`RawModule` and `RawKernel`: CUDA C++ or PTX in, callable kernels out (CuPy's API).

    mod = anycuda.RawModule(code=source)        # or RawModule(ptx=text)
    k = mod.get_function("saxpy")
    k((blocks,), (threads,), (x, y, numpy.float32(2), numpy.int32(n)), shared_mem=0, stream=None)

Arguments are marshalled by the parameter types the PTX declares: a device array passes its
pointer, a numpy scalar its bytes (its size must match), a Python number is converted to
the declared type, and `bytes` or a numpy structured scalar fill a struct parameter.
"""
from __future__ import annotations

import struct

import numpy as np

from . import cudac
from .array import MemoryPointer, ndarray
from .runtime.errors import CudaError, CUresult
from .runtime.program import load_program
from .runtime.stream import default_stream

_INT_FORMATS = {1: "b", 2: "h", 4: "i", 8: "q"}
_UINT_FORMATS = {1: "B", 2: "H", 4: "I", 8: "Q"}


def normalize_dims(dims, what: str) -> tuple:
    """An int or a 1-3 tuple of positive ints as a 3-tuple."""
    if isinstance(dims, (int, np.integer)):
        dims = (int(dims),)
    try:
        dims = tuple(int(d) for d in dims)
    except TypeError:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"{what} must be an int or a tuple of ints, got {dims!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE,
                        f"{what} must have 1 to 3 positive dimensions, got {dims}")
    return dims + (1,) * (3 - len(dims))


def _pack_scalar(param, value) -> bytes:
    t, size = param.ptx_type, param.size
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if t.startswith("f") and size in (2, 4, 8):
        return struct.pack("<" + {2: "e", 4: "f", 8: "d"}[size], float(value))
    if isinstance(value, float):
        raise TypeError(f"parameter {param.name} is .{t}: pass an integer, not {value!r}")
    v = int(value)
    if t.startswith("s"):
        lo, hi = -(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1
    else:
        lo, hi = -(1 << (8 * size - 1)), (1 << (8 * size)) - 1     # .u/.b accept C's wrap-around
    if not lo <= v <= hi:
        raise TypeError(f"{v} does not fit parameter {param.name} (.{t}, {size} bytes)")
    return (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


def marshal_args(params, args) -> bytes:
    """The parameter buffer for `args`, laid out as the kernel's PTX declares."""
    args = tuple(args)
    if len(args) != len(params):
        raise TypeError(f"the kernel takes {len(params)} arguments, {len(args)} given")
    buf = bytearray(max((p.offset + p.size for p in params), default=0))
    for p, a in zip(params, args):
        buf[p.offset:p.offset + p.size] = _encode(p, a)
    return bytes(buf)


def _encode(p, a) -> bytes:
    if isinstance(a, ndarray):
        a = a.data
    if isinstance(a, MemoryPointer):
        if p.size != 8:
            raise TypeError(f"parameter {p.name} is {p.size} bytes; a pointer needs 8")
        return a.ptr.to_bytes(8, "little")
    if isinstance(a, np.ndarray):
        raise TypeError(f"parameter {p.name}: a numpy array lives in host memory; "
                        "pass anycuda.asarray(array) instead")
    if isinstance(a, (bytes, bytearray, memoryview)):
        raw = bytes(a)
    elif isinstance(a, np.void) or (isinstance(a, np.generic) and a.dtype.names):
        raw = a.tobytes()
    elif isinstance(a, np.generic):
        raw = a.tobytes()
        if len(raw) != p.size:
            raise TypeError(f"parameter {p.name} is .{p.ptx_type} ({p.size} bytes) but a "
                            f"{a.dtype} ({len(raw)} bytes) was passed")
        return raw
    elif isinstance(a, (int, float, bool)):
        if p.count > 1 or p.size > 8:
            raise TypeError(f"parameter {p.name} is a {p.size}-byte aggregate; pass bytes or a structured scalar")
        return _pack_scalar(p, a)
    else:
        raise TypeError(f"cannot pass {type(a).__name__} as parameter {p.name}")
    if len(raw) != p.size:
        raise TypeError(f"parameter {p.name} takes {p.size} bytes, {len(raw)} given")
    return raw


class RawKernel:
    def __init__(self, module: "RawModule", image):
        self.module = module
        self._image = image
        self.name = image.name

    @property
    def params(self):
        return self._image.params

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        return self._image.max_dynamic_shared_size

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value: int):
        from .runtime.program import MAX_SHARED_PER_BLOCK_OPTIN
        if value < 0 or value + self._image.static_shared > MAX_SHARED_PER_BLOCK_OPTIN:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE,
                            f"at most {MAX_SHARED_PER_BLOCK_OPTIN - self._image.static_shared} bytes")
        self._image.max_dynamic_shared_size = int(value)

    def __call__(self, grid, block, args, shared_mem: int = 0, stream=None):
        grid = normalize_dims(grid, "grid")
        block = normalize_dims(block, "block")
        params = marshal_args(self._image.params, args)
        self._image.check_config(grid, block, int(shared_mem))
        (stream or default_stream).enqueue(self._image.launch, grid, block, params, int(shared_mem))

    def __repr__(self):
        return f"<RawKernel {self.name}>"


class RawModule:
    def __init__(self, code: str = None, ptx: str = None, options=(), name_expressions=None,
                 name: str = None):
        if (code is None) == (ptx is None):
            raise ValueError("give exactly one of code= (CUDA C++) or ptx= (PTX text)")
        if code is not None:
            ptx = cudac.compile_to_ptx(code, options=options, name=name or "kernel.cu")
        self.ptx = ptx
        self._program = load_program(ptx, name or ("module.ptx" if code is None else (name or "kernel.cu")))
        self._kernels = {}

    def get_function(self, name: str) -> RawKernel:
        if name not in self._kernels:
            try:
                image = self._program.kernel(name)
            except KeyError:
                known = ", ".join(self._program.kernel_names()) or "none"
                raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND,
                                f"no kernel named {name!r} in the module (kernels: {known})") from None
            self._kernels[name] = RawKernel(self, image)
        return self._kernels[name]

    def get_global(self, name: str) -> MemoryPointer:
        try:
            addr, nbytes = self._program.global_address(name)
        except KeyError:
            raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"no global variable named {name!r}") from None
        from .runtime.memory import Allocation
        return MemoryPointer(Allocation(addr, nbytes, self._program, "module"))

    @property
    def kernel_names(self):
        return self._program.kernel_names()
