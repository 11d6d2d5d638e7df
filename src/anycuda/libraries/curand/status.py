"""cuRAND's status codes (curandStatus_t, numbered as NVIDIA's curand.h numbers them) and the
error that carries one back to the C caller.

Every argument rule of the host API raises `CurandError(status)` before anything is queued,
so a refused call changes neither the generator nor the destination memory.
"""
from __future__ import annotations

import enum

from ..errors import LibraryError, requirer


class Status(enum.IntEnum):
    SUCCESS = 0
    VERSION_MISMATCH = 100
    NOT_INITIALIZED = 101
    ALLOCATION_FAILED = 102
    TYPE_ERROR = 103
    OUT_OF_RANGE = 104
    LENGTH_NOT_MULTIPLE = 105
    DOUBLE_PRECISION_REQUIRED = 106
    LAUNCH_FAILURE = 201
    PREEXISTING_FAILURE = 202
    INITIALIZATION_FAILED = 203
    ARCH_MISMATCH = 204
    INTERNAL_ERROR = 999


class CurandError(LibraryError):
    prefix, codes = "CURAND_STATUS_", Status


Error = CurandError          # the name the shim's marshalling looks for in every library

# what the shim answers for outcomes every library has (shim/entry_libraries.py); cuRAND has no
# "not supported" status, so an unsupported request is a type error, as cuRAND answers a
# generator that cannot do what is asked
ANSWERS = {"success": Status.SUCCESS, "quiet": Status.OUT_OF_RANGE, "unsupported": Status.TYPE_ERROR,
           "failed": Status.LAUNCH_FAILURE, "internal": Status.INTERNAL_ERROR}


require = requirer(CurandError)     # require(condition, status, message): one of cuRAND's argument rules


def status_name(status: int) -> str:
    try:
        return "CURAND_STATUS_" + Status(status).name
    except ValueError:
        return "CURAND_STATUS_UNKNOWN"
