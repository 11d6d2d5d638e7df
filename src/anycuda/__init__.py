"""anycuda: CUDA programs without an NVIDIA GPU.

The Python API follows CuPy's conventions::

    import anycuda as ac, numpy as np
    mod = ac.RawModule(code=cuda_source)            # or ac.RawModule(ptx=ptx_text)
    saxpy = mod.get_function("saxpy")
    x = ac.asarray(np.arange(n, dtype=np.float32)); y = ac.zeros(n, np.float32)
    saxpy((n // 256 + 1,), (256,), (x, y, np.float32(2), np.int32(n)))
    print(y.get())
"""
from __future__ import annotations

__version__ = "0.1.0"

from .array import (Memory, MemoryPointer, array, asarray, asnumpy, empty, empty_like, full, full_like, ndarray,
                    ones, ones_like, zeros, zeros_like)
from .cudac import CompileError
from .ptx.errors import PtxError
from .rawmodule import RawKernel, RawModule
from .runtime.device import Device
from .runtime.errors import CudaError, CUresult
from .runtime.stream import Event, get_elapsed_time
from .runtime.stream import Stream, default_stream


def compile(source: str, options=(), name: str = "kernel.cu", backend: str = None) -> str:
    """PTX for CUDA C++ `source`, from NVRTC or nvcc (cached on disk); raises CompileError
    with the compiler's log."""
    from .cudac import compile_to_ptx
    return compile_to_ptx(source, options, name, backend=backend)


compile_to_ptx = compile


def synchronize() -> None:
    """Wait for all work on all streams; raises the first error a stream kept. Device
    printf output appears here."""
    from .runtime.stream import synchronize_all
    synchronize_all()


def get_device_count() -> int:
    """How many devices the CPU is split into (ANYCUDA_DEVICES, default 1)."""
    from .runtime.device import device_count
    return device_count()


__all__ = ["CompileError", "CudaError", "CUresult", "Device", "Event", "Memory", "MemoryPointer", "PtxError",
           "RawKernel", "RawModule", "Stream", "array", "asarray", "asnumpy", "compile", "compile_to_ptx",
           "default_stream", "empty", "empty_like", "full", "full_like", "get_device_count", "get_elapsed_time",
           "ndarray", "ones", "ones_like", "synchronize", "zeros", "zeros_like", "__version__"]
