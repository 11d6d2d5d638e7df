"""cuFFT's results (cufftResult) and the error that carries one to the C caller."""
from __future__ import annotations

import enum

from ..errors import LibraryError, requirer


class Result(enum.IntEnum):
    SUCCESS = 0x0
    INVALID_PLAN = 0x1
    ALLOC_FAILED = 0x2
    INVALID_TYPE = 0x3
    INVALID_VALUE = 0x4
    INTERNAL_ERROR = 0x5
    EXEC_FAILED = 0x6
    SETUP_FAILED = 0x7
    INVALID_SIZE = 0x8
    UNALIGNED_DATA = 0x9
    INVALID_DEVICE = 0xB
    NO_WORKSPACE = 0xD
    NOT_IMPLEMENTED = 0xE
    NOT_SUPPORTED = 0x10
    MISSING_DEPENDENCY = 0x11
    NVRTC_FAILURE = 0x12
    NVJITLINK_FAILURE = 0x13
    NVSHMEM_FAILURE = 0x14


class CufftError(LibraryError):
    prefix, codes = "CUFFT_", Result


Error = CufftError
ANSWERS = {"success": Result.SUCCESS, "quiet": Result.INVALID_VALUE, "unsupported": Result.NOT_SUPPORTED,
           "failed": Result.EXEC_FAILED, "internal": Result.INTERNAL_ERROR}


require = requirer(CufftError)
