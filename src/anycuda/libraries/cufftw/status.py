"""cuFFTW's failures: FFTW's interface has no status (a plan that cannot be made is NULL, an
execution that fails does nothing), so these only tell the shim, which says them on stderr."""
from __future__ import annotations

import enum

from ..errors import LibraryError, requirer


class Failure(enum.IntEnum):
    SUCCESS = 0
    INVALID = 1            # arguments FFTW would refuse (a NULL plan, quietly, as FFTW answers)
    UNSUPPORTED = 2
    FAILED = 3
    INTERNAL = 4


class CufftwError(LibraryError):
    prefix, codes = "CUFFTW_", Failure


Error = CufftwError
ANSWERS = {"success": Failure.SUCCESS, "quiet": Failure.INVALID, "unsupported": Failure.UNSUPPORTED,
           "failed": Failure.FAILED, "internal": Failure.INTERNAL}

require = requirer(CufftwError)
