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

from .array import MemoryPointer, asarray, empty, empty_like, full, ndarray, ones, zeros, zeros_like
from .cudac import CompileError, compile_to_ptx as compile
from .ptx.errors import PtxError
from .rawmodule import RawKernel, RawModule
from .runtime.errors import CudaError, CUresult
from .runtime.event import Event, get_elapsed_time
from .runtime.stream import Stream, default_stream


def synchronize() -> None:
    """Wait for all work on all streams; device printf output appears here."""
    from .runtime.stream import synchronize_all
    synchronize_all()


__all__ = ["CompileError", "CudaError", "CUresult", "Event", "MemoryPointer", "PtxError", "RawKernel",
           "RawModule", "Stream", "asarray", "compile", "default_stream", "empty", "empty_like", "full",
           "get_elapsed_time", "ndarray", "ones", "synchronize", "zeros", "zeros_like", "__version__"]
