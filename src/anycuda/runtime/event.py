"""Events: points in a stream's work, with host timestamps for elapsed-time queries.

`record(stream)` queues a marker; when the stream reaches it, the marker takes the time
(`time.perf_counter`) and completes. `synchronize()` and `query()` refer to the most recent
record, as in CUDA; an event never recorded counts as complete. A marker that its stream
skips (after an unreported error) completes without a time.
"""
from __future__ import annotations

import threading
import time

from .errors import CudaError, CUresult
from .stream import default_stream


class _Mark:
    __slots__ = ("done", "time")

    def __init__(self):
        self.done = threading.Event()
        self.time = None

    def hit(self):
        self.time = time.perf_counter()
        self.done.set()

    def skipped(self):
        self.done.set()


class Event:
    """CuPy's `cupy.cuda.Event`: `record`, `synchronize`, `query`/`done`, timing."""

    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False):
        self.block = block
        self.disable_timing = disable_timing
        self._mark = None

    def record(self, stream=None) -> None:
        mark = _Mark()
        self._mark = mark
        (stream or default_stream).enqueue(mark.hit, on_skip=mark.skipped)

    def _wait_in(self, stream) -> None:
        mark = self._mark
        if mark is not None:
            stream.enqueue(mark.done.wait)

    def query(self) -> bool:
        mark = self._mark
        return mark is None or mark.done.is_set()

    @property
    def done(self) -> bool:
        return self.query()

    def synchronize(self) -> None:
        mark = self._mark
        if mark is not None:
            mark.done.wait()

    def __repr__(self):
        return f"<anycuda Event {'pending' if not self.query() else 'complete'}>"


def get_elapsed_time(start: Event, end: Event) -> float:
    """Milliseconds between two recorded events (waits for both, like CuPy's
    `cupy.cuda.get_elapsed_time`)."""
    for e in (start, end):
        if e.disable_timing:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE, "an event created with disable_timing=True")
        if e._mark is None:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE, "both events must have been recorded")
    start.synchronize()
    end.synchronize()
    t0, t1 = start._mark.time, end._mark.time
    if t0 is None or t1 is None:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE,
                        "an event's stream skipped its record after an error")
    return (t1 - t0) * 1000.0
