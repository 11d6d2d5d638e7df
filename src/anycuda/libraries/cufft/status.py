"""cuFFT's results (cufftResult) and the error that carries one to the C caller."""
from __future__ import annotations

import enum


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


class CufftError(Exception):
    def __init__(self, result: Result, message: str = ""):
        super().__init__(f"CUFFT_{Result(result).name}: {message}" if message else f"CUFFT_{Result(result).name}")
        self.status = Result(result)
        self.message = message


Error = CufftError
ANSWERS = {"success": Result.SUCCESS, "quiet": Result.INVALID_VALUE, "unsupported": Result.NOT_SUPPORTED,
           "failed": Result.EXEC_FAILED, "internal": Result.INTERNAL_ERROR}


def require(condition: bool, result: Result, message: str) -> None:
    if not condition:
        raise CufftError(result, message)
