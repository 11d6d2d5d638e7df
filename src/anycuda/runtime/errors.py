"""CUDA error codes as Python exceptions: the one status type every layer raises."""
from __future__ import annotations

import enum


class CUresult(enum.IntEnum):
    """The subset of CUDA's `CUresult` values that anycuda produces (numbers as in cuda.h)."""
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NOT_INITIALIZED = 3
    CUDA_ERROR_DEINITIALIZED = 4
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_INVALID_DEVICE = 101
    CUDA_ERROR_INVALID_IMAGE = 200
    CUDA_ERROR_INVALID_CONTEXT = 201
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209
    CUDA_ERROR_UNSUPPORTED_LIMIT = 215
    CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217
    CUDA_ERROR_INVALID_PTX = 218
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222
    CUDA_ERROR_INVALID_SOURCE = 300
    CUDA_ERROR_FILE_NOT_FOUND = 301
    CUDA_ERROR_INVALID_HANDLE = 400
    CUDA_ERROR_ILLEGAL_STATE = 401
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_NOT_READY = 600
    CUDA_ERROR_ILLEGAL_ADDRESS = 700
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701
    CUDA_ERROR_LAUNCH_TIMEOUT = 702
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
    CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709
    CUDA_ERROR_ASSERT = 710
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713
    CUDA_ERROR_ILLEGAL_INSTRUCTION = 715
    CUDA_ERROR_MISALIGNED_ADDRESS = 716
    CUDA_ERROR_LAUNCH_FAILED = 719
    CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720
    CUDA_ERROR_NOT_PERMITTED = 800
    CUDA_ERROR_NOT_SUPPORTED = 801
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900
    CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906
    CUDA_ERROR_UNKNOWN = 999


class CudaError(RuntimeError):
    """A CUDA status other than success. `code` is a CUresult; `str()` names it."""

    def __init__(self, code: CUresult, message: str = ""):
        self.code = CUresult(code)
        self.message = message
        text = self.code.name + (f": {message}" if message else "")
        super().__init__(text)

    @property
    def name(self) -> str:
        return self.code.name


class LaunchConfigurationError(CudaError):
    """A launch whose grid, block or shared memory is past the device's or the kernel's limits:
    CUDA_ERROR_INVALID_VALUE, for the driver API's callers and the CUDA runtime's alike (on an
    H200 with driver 580 and CUDA 13.0's runtime, `kernel<<<1, 2048>>>` is cudaErrorInvalidValue)."""

    def __init__(self, message: str):
        super().__init__(CUresult.CUDA_ERROR_INVALID_VALUE, message)
