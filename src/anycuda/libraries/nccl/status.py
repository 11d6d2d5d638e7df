"""NCCL's results (ncclResult_t, numbered as NVIDIA's nccl.h numbers them), the error that
carries one back to the C caller, and the text ncclGetLastError answers.

Every argument rule raises `NcclError(result, why)` before anything is queued; the text of the
latest one is kept for ncclGetLastError (NCCL keeps one text per process, not per thread)."""
from __future__ import annotations

import enum

from ..errors import LibraryError, requirer


class Result(enum.IntEnum):
    Success = 0
    UnhandledCudaError = 1
    SystemError = 2
    InternalError = 3
    InvalidArgument = 4
    InvalidUsage = 5
    RemoteError = 6
    InProgress = 7
    Timeout = 8


# what ncclGetErrorString answers (our words for each result's meaning)
TEXTS = {
    Result.Success: "no error",
    Result.UnhandledCudaError: "unhandled cuda error",
    Result.SystemError: "unhandled system error (a library or the launcher is missing, or a system call failed)",
    Result.InternalError: "internal error",
    Result.InvalidArgument: "invalid argument",
    Result.InvalidUsage: "invalid usage",
    Result.RemoteError: "remote process exited or there was a network error",
    Result.InProgress: "NCCL operation in progress",
    Result.Timeout: "timeout",
}

_last = [""]


class NcclError(LibraryError):
    prefix, codes = "nccl", Result

    def __init__(self, status, message: str = ""):
        super().__init__(status, message)
        _last[0] = str(self)


Error = NcclError          # the name the shim's marshalling looks for in every library

ANSWERS = {"success": Result.Success, "quiet": Result.InvalidArgument, "unsupported": Result.InvalidUsage,
           "failed": Result.UnhandledCudaError, "internal": Result.InternalError}

require = requirer(NcclError)      # require(condition, result, message): one of NCCL's argument rules


def error_string(result: int) -> str:
    try:
        return TEXTS[Result(result)]
    except ValueError:
        return "unknown result code"


def last_error() -> str:
    return _last[0]


def note(text: str) -> None:
    """Keep `text` as the last error (a failure found while running queued work)."""
    _last[0] = text
