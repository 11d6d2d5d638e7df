"""Events: points in a stream's work, with host timestamps for elapsed-time queries."""
from __future__ import annotations

import threading
import time

from .errors import CudaError, CUresult
from .stream import default_stream


class Event:
    def __init__(self, timing: bool = True):
        self.timing = timing
        self._done = threading.Event()
        self._done.set()
        self._time = None

    def record(self, stream=None) -> None:
        self._done.clear()
        (stream or default_stream).enqueue(self._mark)

    def _mark(self):
        self._time = time.perf_counter()
        self._done.set()

    def query(self) -> bool:
        return self._done.is_set()

    def synchronize(self) -> None:
        self._done.wait()


def get_elapsed_time(start: Event, end: Event) -> float:
    """Milliseconds between two recorded events."""
    start.synchronize()
    end.synchronize()
    if start._time is None or end._time is None:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE, "both events must have been recorded")
    return (end._time - start._time) * 1000.0
