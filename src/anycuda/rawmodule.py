"""`RawModule` and `RawKernel`: CUDA C++ or PTX in, callable kernels out (CuPy's API).

    mod = anycuda.RawModule(code=source)        # or RawModule(ptx=text)
    k = mod.get_function("saxpy")
    k((blocks,), (threads,), (x, y, numpy.float32(2), numpy.int32(n)), shared_mem=0, stream=None)

Arguments are marshalled by the parameter types the PTX declares:

* a device array (or anything with `__cuda_array_interface__`) or a `MemoryPointer` passes
  its address to a 64-bit parameter;
* a numpy scalar passes its bytes, and their number must equal the parameter's size
  (np.float64 for a `.f32` parameter is a TypeError, not garbage);
* a Python int, float or bool is converted to the declared type (ints must fit it; for
  `.u`/`.b` types negative values wrap as in C);
* `bytes`, a numpy structured scalar or `np.void` fills a `.b8 name[N]` struct parameter
  (sizes must agree);
* a numpy array is refused: it lives in host memory (use `anycuda.asarray`).

The launch itself goes onto the stream (default: the legacy default stream) and returns at
once; the stream's worker runs the whole grid, and a fault in it is reported by the next
synchronising call (a `.get()`, `synchronize()`).
"""
from __future__ import annotations

import re
import struct

import numpy as np

from . import cudac
from .array import Memory, MemoryPointer, ndarray
from .runtime.errors import CudaError, CUresult
from .runtime.names import demangled_names
from .runtime.device import multiprocessor_count, work_device
from .runtime.stream import api_stream

_FLOAT_FORMATS = {2: "<e", 4: "<f", 8: "<d"}


def _load_program(ptx_text: str, source_name: str):
    """The compiled program for a PTX module."""
    from .runtime.program import load_program
    return load_program(ptx_text, source_name)


# ---------------------------------------------------------------- launch configuration

def normalize_dims(dims, what: str = "grid") -> tuple:
    """An int or a 1-3 tuple of positive ints as a 3-tuple; anything else is
    CudaError(CUDA_ERROR_INVALID_VALUE)."""
    if type(dims) is tuple and 0 < len(dims) <= 3 and all(type(d) is int and d > 0 for d in dims):
        return dims + (1,) * (3 - len(dims))          # the common case, checked at the cost of a launch
    bad = CUresult.CUDA_ERROR_INVALID_VALUE
    if isinstance(dims, (bool, np.bool_)):
        raise CudaError(bad, f"{what} must be an int or a tuple of ints, got {dims!r}")
    if isinstance(dims, (int, np.integer)):
        dims = (dims,)
    if not isinstance(dims, (tuple, list)):
        raise CudaError(bad, f"{what} must be an int or a tuple of 1 to 3 ints, got {dims!r}")
    out = []
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise CudaError(bad, f"{what} must hold ints, got {dims!r}")
        out.append(int(d))
    if not 1 <= len(out) <= 3:
        raise CudaError(bad, f"{what} must have 1 to 3 dimensions, got {tuple(dims)}")
    if any(d < 1 for d in out):
        raise CudaError(bad, f"{what} dimensions must be positive, got {tuple(dims)}")
    return tuple(out) + (1,) * (3 - len(out))


def check_shared_mem(shared_mem) -> int:
    """The dynamic shared memory argument as an int (the kernel checks it against its limit)."""
    if type(shared_mem) is int and shared_mem >= 0:      # the common case, at the cost of a launch
        return shared_mem
    if isinstance(shared_mem, (bool, np.bool_)) or not isinstance(shared_mem, (int, np.integer)) or shared_mem < 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"shared_mem must be a non-negative int, got {shared_mem!r}")
    return int(shared_mem)


# ---------------------------------------------------------------- argument marshalling

def _param_desc(p) -> str:
    count = getattr(p, "count", 1) or 1
    return f".{p.ptx_type} {p.name}" + (f"[{count}]" if count > 1 else "") + f" ({p.size} bytes)"


def _is_aggregate(p) -> bool:
    count = getattr(p, "count", 1) or 1
    return count > 1 or p.size > 8 or (p.ptx_type == "b8" and p.size > 1)


def _pack_number(p, value) -> bytes:
    t, size = p.ptx_type, p.size
    if _is_aggregate(p):
        raise TypeError(f"parameter {_param_desc(p)} is an aggregate: pass bytes or a numpy structured scalar, "
                        f"not {type(value).__name__}")
    if isinstance(value, bool):
        value = int(value)
    if t.startswith("f") or t == "bf16":
        if t == "bf16":
            bits = np.array(float(value), np.float32).view(np.uint32)
            rounded = (int(bits) + 0x7FFF + ((int(bits) >> 16) & 1)) >> 16
            return (rounded & 0xFFFF).to_bytes(2, "little")
        if size not in _FLOAT_FORMATS:
            raise TypeError(f"cannot pass a number to parameter {_param_desc(p)}")
        try:
            return struct.pack(_FLOAT_FORMATS[size], float(value))
        except OverflowError:
            raise TypeError(f"{value!r} does not fit parameter {_param_desc(p)}") from None
    if isinstance(value, float):
        raise TypeError(f"parameter {_param_desc(p)} is an integer: pass an int or a numpy scalar, not {value!r}")
    v = int(value)
    bits = 8 * size
    lo = -(1 << (bits - 1))
    hi = (1 << (bits - 1)) - 1 if t.startswith("s") else (1 << bits) - 1
    if not lo <= v <= hi:
        raise TypeError(f"{v} does not fit parameter {_param_desc(p)}")
    return (v & ((1 << bits) - 1)).to_bytes(size, "little")


def _pointer(p, address: int) -> bytes:
    if not _takes_pointer(p):
        raise TypeError(f"parameter {_param_desc(p)} cannot take a pointer (a device address needs a 64-bit integer parameter)")
    return int(address).to_bytes(8, "little")


def encode_arg(p, a) -> bytes:
    """The bytes of argument `a` for parameter `p` (a ParamInfo). The common kinds (device
    arrays, numpy scalars, Python numbers) are tested first: each launch pays for the tests."""
    if isinstance(a, ndarray):
        return _pointer(p, a.data.ptr)
    if isinstance(a, np.generic):
        return _sized(p, memoryview(a).tobytes(), a)     # cheaper than a.tobytes()
    if isinstance(a, (bool, int, float)):
        return _pack_number(p, a)
    if isinstance(a, (MemoryPointer, Memory)):
        return _pointer(p, a.ptr)
    if isinstance(a, np.ndarray):
        raise TypeError(f"parameter {_param_desc(p)}: a numpy array lives in host memory and cannot be "
                        "passed to a kernel; copy it to the device with anycuda.asarray(array) "
                        "(or pass a numpy scalar such as np.float32(x) for a scalar parameter)")
    if getattr(type(a), "__cuda_array_interface__", None) is not None:
        return _pointer(p, a.__cuda_array_interface__["data"][0])
    if isinstance(a, (bytes, bytearray, memoryview)):
        return _sized(p, bytes(a), a)
    raise TypeError(f"cannot pass {type(a).__name__} as parameter {_param_desc(p)}: pass device arrays, "
                    "numpy scalars, Python numbers or bytes")


def _sized(p, raw: bytes, a) -> bytes:
    """`raw`, the bytes of argument `a`, when they are as many as parameter `p` takes."""
    if len(raw) == p.size:
        return raw
    scalar = isinstance(a, np.generic)
    what = f"a {a.dtype} ({len(raw)} bytes)" if scalar else f"{len(raw)} bytes"
    raise TypeError(f"parameter {_param_desc(p)} takes {p.size} bytes but {what} was passed"
                    + ("; pass a numpy scalar of the parameter's type, e.g. np.float32(x)"
                       if scalar and not _is_aggregate(p) else ""))


def param_layout(params, param_size: int = None) -> tuple:
    """(buffer size, parameters, (parameter, start, end, whether it takes a pointer) of each)
    as marshal_args lays them out, each parameter's alignment checked: a kernel's layout is
    worked out once, not at every launch."""
    params = tuple(params)
    for p in params:
        align = getattr(p, "align", 1) or 1
        if p.offset % align:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE,
                            f"parameter {p.name} at offset {p.offset} breaks its alignment {align}")
    end = max((p.offset + p.size for p in params), default=0)
    spans = tuple((p, p.offset, p.offset + p.size, _takes_pointer(p)) for p in params)
    return max(end, param_size or 0), params, spans


def _takes_pointer(p) -> bool:
    return p.size == 8 and not _is_aggregate(p) and not p.ptx_type.startswith("f")


def marshal_args(params, args, param_size: int = None, layout: tuple = None) -> bytes:
    """The parameter buffer for `args`, laid out as the kernel's PTX declares: each argument
    at its parameter's offset (aligned by the compiler), padding zeroed. `layout` is
    param_layout's answer for these parameters, when the caller keeps it."""
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple or list of kernel arguments, not {type(args).__name__}")
    size, params, spans = layout or param_layout(params, param_size)
    if len(args) != len(params):
        names = ", ".join(p.name for p in params) or "none"
        raise TypeError(f"the kernel takes {len(params)} argument(s) ({names}), {len(args)} given")
    buf = bytearray(size)
    for (p, lo, hi, pointer), a in zip(spans, args):
        if pointer and type(a) is ndarray:      # the common case first: every launch pays the tests
            buf[lo:hi] = a.data.ptr.to_bytes(8, "little")
        else:
            buf[lo:hi] = encode_arg(p, a)
    return bytes(buf)


# ---------------------------------------------------------------- kernels and modules

def _run_launch(image, grid, block, params, shared_mem, workers, keep, cooperative, record):
    """Stream work: run the grid on the launching device's share of the workers. `keep`
    holds the arguments (and so their memory) until then."""
    image.launch(grid, block, params, shared_mem, workers, cooperative, record=record)


class RawKernel:
    """A kernel of a RawModule; call it as `kernel(grid, block, args, shared_mem=0, stream=None)`."""

    def __init__(self, module: "RawModule", image):
        self.module = module
        self._image = image
        self.name = image.name
        self._layout = None      # param_layout's answer, on the first launch

    @property
    def kernel(self):
        return self._image

    @property
    def params(self):
        return self._image.params

    @property
    def param_size(self) -> int:
        return getattr(self._image, "param_size", None) or max((p.offset + p.size for p in self.params), default=0)

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        return getattr(self._image, "max_dynamic_shared_size", 48 * 1024)

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value: int):
        from .runtime.device import properties
        limit = properties().shared_memory_per_block_optin - getattr(self._image, "static_shared", 0)
        if value < 0 or value > limit:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE,
                            f"kernel {self.name} may use at most {limit} bytes of dynamic shared memory")
        self._image.max_dynamic_shared_size = int(value)

    def __call__(self, grid, block, args, shared_mem: int = 0, stream=None):
        grid = normalize_dims(grid, "grid")
        block = normalize_dims(block, "block")
        shared_mem = check_shared_mem(shared_mem)
        device = work_device()
        workers = multiprocessor_count(device)
        record = self._image.prepare(grid, block, shared_mem, workers)
        cooperative = self.module.enable_cooperative_groups
        if cooperative:
            from .driver.api import check_cooperative_grid
            check_cooperative_grid(self._image, grid, block, shared_mem, device)
        if self._layout is None:
            self._layout = param_layout(self._image.params, getattr(self._image, "param_size", None))
        params = marshal_args(None, args, layout=self._layout)
        (stream or api_stream()).enqueue(_run_launch, self._image, grid, block, params, shared_mem, workers,
                                           tuple(args), cooperative, record, any_thread=True)

    def __repr__(self):
        return f"<RawKernel {self.name}>"


def _expression_key(text: str) -> str:
    return re.sub(r"\s+", "", text)


class RawModule:
    """A module of kernels from CUDA C++ (`code=`, compiled with NVRTC or nvcc), PTX text
    (`ptx=`) or a PTX file (`path=`). With `enable_cooperative_groups=True` (CuPy's flag) its
    kernels are launched as cuLaunchCooperativeKernel does: every block runs at once, so that
    `cooperative_groups::this_grid().sync()` works, and a grid larger than the device holds at
    once is CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE."""

    def __init__(self, code: str = None, ptx: str = None, options=(), name_expressions=None,
                 name: str = None, path: str = None, backend: str = None, jitify: bool = False,
                 enable_cooperative_groups: bool = False):
        given = [x is not None for x in (code, ptx, path)]
        if sum(given) != 1:
            raise ValueError("give exactly one of code= (CUDA C++), ptx= (PTX text) or path= (a .ptx file)")
        self.options = tuple(options)
        self.enable_cooperative_groups = bool(enable_cooperative_groups)
        self.name_expressions = tuple(name_expressions or ())
        self._lowered = {}
        if code is not None:
            self.code = code
            source_name = name or "kernel.cu"
            ptx, self._lowered = cudac.compile_with_names(code, self.options, source_name,
                                                          self.name_expressions, backend=backend)
        else:
            self.code = None
            if path is not None:
                with open(path, encoding="utf-8") as fh:
                    ptx = fh.read()
                source_name = name or str(path)
            else:
                source_name = name or "module.ptx"
        self.ptx = ptx
        self._program = _load_program(ptx, source_name)
        self._kernels = {}

    def kernel_names(self):
        return list(self._program.kernel_names())

    def _resolve(self, name: str) -> str:
        """The PTX name for `name`: itself, the lowered name of a name expression, or a
        mangled kernel whose demangled name is `name`."""
        names = self.kernel_names()
        if name in names:
            return name
        if name in self._lowered:
            return self._lowered[name]
        want = _expression_key(name)
        for expr, lowered in self._lowered.items():
            if _expression_key(expr) == want:
                return lowered
        mangled = [n for n in names if n.startswith("_Z")]
        for m, text in demangled_names(mangled).items():
            full = _expression_key(text)
            head = full.split("(", 1)[0]
            # a function template's demangled name starts with its return type ("void")
            if want in (full, head) or (head.startswith("void") and head[4:] == want):
                return m
        return name

    def get_function(self, name: str) -> RawKernel:
        if name not in self._kernels:
            ptx_name = self._resolve(name)
            try:
                image = self._program.kernel(ptx_name)
            except KeyError:
                known = ", ".join(self.kernel_names()) or "none"
                raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND,
                                f"no kernel named {name!r} in the module (kernels: {known})") from None
            self._kernels[name] = RawKernel(self, image)
        return self._kernels[name]

    def get_global(self, name: str) -> MemoryPointer:
        """The device memory of a `__device__` or `__constant__` variable."""
        try:
            addr, nbytes = self._program.global_address(self._lowered.get(name, name))
        except KeyError:
            raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"no global variable named {name!r} in the module") from None
        from .runtime.memory import Allocation
        return MemoryPointer(_ModuleMemory(Allocation(addr, nbytes, self._program, "module")))

    def __repr__(self):
        return f"<RawModule kernels={self.kernel_names()}>"


class _ModuleMemory:
    """A module variable's memory: lives as long as the module's program (held here)."""

    def __init__(self, allocation):
        self.allocation = allocation
        self.ptr = allocation.ptr
        self.size = allocation.size
