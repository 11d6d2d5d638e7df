"""cuBLAS's status codes (cublasStatus_t) and the error that carries one to the C caller."""
from __future__ import annotations

import enum

from ..errors import LibraryError


class Status(enum.IntEnum):
    SUCCESS = 0
    NOT_INITIALIZED = 1
    ALLOC_FAILED = 3
    INVALID_VALUE = 7
    ARCH_MISMATCH = 8
    MAPPING_ERROR = 11
    EXECUTION_FAILED = 13
    INTERNAL_ERROR = 14
    NOT_SUPPORTED = 15
    LICENSE_ERROR = 16


class CublasError(LibraryError):
    prefix, codes = "CUBLAS_STATUS_", Status


Error = CublasError          # the name the shim's marshalling looks for in every library

# what the shim answers for outcomes every library has (shim/entry_libraries.py)
ANSWERS = {"success": Status.SUCCESS, "quiet": Status.INVALID_VALUE, "unsupported": Status.NOT_SUPPORTED,
           "failed": Status.EXECUTION_FAILED, "internal": Status.INTERNAL_ERROR}


def invalid(message: str) -> CublasError:
    return CublasError(Status.INVALID_VALUE, message)


def require(condition: bool, message: str) -> None:
    """cuBLAS's argument rules: a broken one is CUBLAS_STATUS_INVALID_VALUE, nothing done."""
    if not condition:
        raise invalid(message)


def status_name(status: int) -> str:
    try:
        return "CUBLAS_STATUS_" + Status(status).name
    except ValueError:
        return "CUBLAS_STATUS_UNKNOWN"


_TEXTS = {
    Status.SUCCESS: "success",
    Status.NOT_INITIALIZED: "the library was not initialized",
    Status.ALLOC_FAILED: "the resource allocation failed",
    Status.INVALID_VALUE: "an invalid numeric value was used as an argument",
    Status.ARCH_MISMATCH: "an absent device architectural feature is required",
    Status.MAPPING_ERROR: "an access to GPU memory space failed",
    Status.EXECUTION_FAILED: "the GPU program failed to execute",
    Status.INTERNAL_ERROR: "an internal operation failed",
    Status.NOT_SUPPORTED: "the functionality requested is not supported",
    Status.LICENSE_ERROR: "error detected trying to check the license",
}


def status_text(status: int) -> str:
    try:
        return _TEXTS[Status(status)]
    except ValueError:
        return "unknown error"
