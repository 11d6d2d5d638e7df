"""cuRAND's statuses (curandStatus_t) and the error that carries one to the C caller. cuRAND has
no "not supported" status: a generator type anycuda does not implement is a TYPE_ERROR, and
anycuda names it on stderr."""
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


Error = CurandError
ANSWERS = {"success": Status.SUCCESS, "quiet": Status.OUT_OF_RANGE, "unsupported": Status.TYPE_ERROR,
           "failed": Status.LAUNCH_FAILURE, "internal": Status.INTERNAL_ERROR}


require = requirer(CurandError)
