"""Streams: ordered queues of work (launches, copies, host functions, event records), and
the events recorded in them.

A created `Stream` runs its work in order on a Python thread of its own (started on first
use), so the host goes on while kernels run; a launch itself releases the GIL.

The default stream is CUDA's *legacy* null stream: its work starts only when the work
queued earlier on every blocking stream of the same device has finished, and work queued
later on a blocking stream starts only when the default stream's earlier work has finished
(one default stream serves every device). Streams created with `non_blocking=True` take no
part in that. anycuda runs default-stream work in the
calling thread (so a copy on it is complete when the call returns, as `cuMemcpy` is), and
every piece of work carries tickets that say what it waits for; one condition variable
guards all counters, so the rules hold when several host threads enqueue at once.

Errors: an exception raised by work on a created stream is kept; the stream skips its later
work until the error has been reported, which the next `synchronize()` of that stream, or
`synchronize_all()` (`anycuda.synchronize()`), does by raising that same exception. Work on
the default stream runs in the caller, so its errors reach the caller directly.

Events are points in a stream's work, with host timestamps for elapsed-time queries:
`Event.record(stream)` queues a marker; when the stream reaches it, the marker takes the time
(`time.perf_counter`) and completes. `synchronize()` and `query()` refer to the most recent
record, as in CUDA; an event never recorded counts as complete. A marker that its stream
skips (after an unreported error) completes without a time.
"""
from __future__ import annotations

import queue
import threading
import time

from .device import register_synchroniser, work_device
from .errors import CudaError, CUresult

sync_hooks = []     # called after every synchronisation (device printf output is flushed there)

_cv = threading.Condition()          # guards every stream's tickets and kept error
_states = set()                      # _StreamState of streams given work, until their worker leaves
_local = threading.local()           # .state: the stream whose worker this thread is


class _StreamState:
    """What a stream's worker thread needs; outlives the Stream object until its work is done."""

    def __init__(self, non_blocking: bool, device: int = 0):
        self.non_blocking = non_blocking
        self.device = device     # a device's synchronisation waits for its own streams only
        self.issued = 0          # tickets handed out (one per enqueued item)
        self.completed = 0       # items finished (run, failed or skipped)
        self.error = None        # kept until reported
        self.queue = queue.SimpleQueue()
        self.thread = None

    def idle(self) -> bool:
        return self.completed == self.issued


def _wait_for(deps) -> None:
    """Block until every (state, ticket) in `deps` has completed that ticket. Caller holds _cv."""
    while any(state.completed < ticket for state, ticket in deps):
        _cv.wait()


def _worker(state: _StreamState) -> None:
    _local.state = state
    while True:
        item = state.queue.get()
        if item is None:
            with _cv:
                _states.discard(state)
            return
        fn, args, on_skip, deps = item
        with _cv:
            _wait_for(deps)
            skip = state.error is not None
        try:
            if skip:
                if on_skip is not None:
                    on_skip()
            else:
                fn(*args)
        except BaseException as e:       # kept for the next synchronize
            with _cv:
                if state.error is None:
                    state.error = e
        finally:
            del fn, args, item
            with _cv:
                state.completed += 1
                _cv.notify_all()


class Stream:
    """An ordered work queue executed by a thread of its own (CuPy's `cupy.cuda.Stream`)."""

    def __init__(self, non_blocking: bool = False, priority: int = 0, null: bool = False, device: int = None):
        if null:
            raise ValueError("use anycuda.default_stream (Stream.null) for the null stream")
        self.priority = priority
        self.non_blocking = bool(non_blocking)
        if device is None:
            device = work_device()
        self.device = device
        self._state = _StreamState(self.non_blocking, device)    # joins _states with its first work

    def enqueue(self, fn, *args, on_skip=None) -> None:
        """Run `fn(*args)` after the work queued before it (and, for a blocking stream, after
        the default stream's earlier work). `on_skip()` runs instead when the stream skips the
        work because of an unreported error."""
        st = self._state
        with _cv:
            deps = () if st.non_blocking else ((default_stream._state, default_stream._state.issued),)
            st.issued += 1
            first = st.thread is None
            if first:
                st.thread = threading.Thread(target=_worker, args=(st,), name="anycuda-stream", daemon=True)
                _states.add(st)
        st.queue.put((fn, args, on_skip, deps))
        if first:
            # started outside _cv: a new thread may collect garbage before it runs, and a
            # collected Stream's finaliser must never wait for a lock this thread holds
            st.thread.start()

    def launch_host_func(self, fn, arg=None) -> None:
        """Call `fn(arg)` from the stream once its earlier work is done."""
        self.enqueue(fn, arg)

    def wait_event(self, event) -> None:
        """Make later work on this stream wait for the event's most recent record."""
        event._wait_in(self)

    def record(self, event=None):
        """Record an event on this stream (a new one if none is given) and return it."""
        event = event or Event()
        event.record(self)
        return event

    def query(self) -> bool:
        """True when all queued work has finished."""
        with _cv:
            return self._state.idle()

    def synchronize(self) -> None:
        """Wait for the queued work; raise the error it kept, if any (once)."""
        st = self._state
        with _cv:
            while not st.idle():
                _cv.wait()
            err, st.error = st.error, None
        _run_hooks()
        if err is not None:
            raise err

    @property
    def done(self) -> bool:
        return self.query()

    def __del__(self):
        # The worker finishes what is queued, then leaves; a stream that never had work has
        # no worker and is in no table. A finaliser runs wherever the collector happens to
        # run, even in a thread that holds _cv or waits for one that does, so it takes no
        # lock: SimpleQueue.put is safe there.
        state = getattr(self, "_state", None)
        if state is not None and state.thread is not None:
            state.queue.put(None)

    def __repr__(self):
        kind = "non-blocking " if self.non_blocking else ""
        return f"<anycuda {kind}Stream at 0x{id(self):x}>"


class _DefaultStream:
    """The legacy default stream: runs work in the caller's thread, in order, once the
    earlier work of every blocking stream of the caller's device has finished."""

    priority = 0
    non_blocking = False

    def __init__(self):
        self._state = _StreamState(False)
        self._exec = threading.RLock()      # one piece of default-stream work at a time

    def enqueue(self, fn, *args, on_skip=None) -> None:
        if getattr(_local, "state", None) is not None:
            # Work that a created stream runs (a host function) uses the default stream: CUDA
            # forbids API calls there; anycuda runs it inline, ordered by the stream running
            # it. Taking a ticket could wait for default-stream work that waits for this stream.
            fn(*args)
            return
        st = self._state
        with self._exec:
            with _cv:
                st.issued += 1
                if _states:      # a program without created streams skips this (launch overhead)
                    # the legacy stream of each device waits for that device's blocking streams
                    device = work_device()
                    try:
                        _wait_for([(s, s.issued) for s in _states if not s.non_blocking and s.device == device])
                    except BaseException:
                        st.completed += 1
                        _cv.notify_all()
                        raise
            try:
                fn(*args)
            finally:
                with _cv:
                    st.completed += 1
                    _cv.notify_all()

    def launch_host_func(self, fn, arg=None) -> None:
        self.enqueue(fn, arg)

    def wait_event(self, event) -> None:
        event._wait_in(self)

    def record(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def query(self) -> bool:
        with _cv:
            return self._state.idle()

    def synchronize(self) -> None:
        """Wait for the default stream's work (including work other host threads are running
        on it). Errors of created streams are reported by their own synchronize or by
        `synchronize_all`."""
        with _cv:
            while not self._state.idle():
                _cv.wait()
        _run_hooks()

    @property
    def done(self) -> bool:
        return self.query()

    def __repr__(self):
        return "<anycuda default (legacy null) stream>"


default_stream = _DefaultStream()
Stream.null = default_stream


def wait_for_created_streams(raise_errors: bool = True) -> None:
    """Wait until every blocking created stream is idle (optionally raising a kept error)."""
    with _cv:
        for st in list(_states):
            if st.non_blocking:
                continue
            while not st.idle():
                _cv.wait()
            if raise_errors and st.error is not None:
                err, st.error = st.error, None
                raise err


def _run_hooks() -> None:
    for hook in list(sync_hooks):
        hook()


def synchronize_all(device: int = None) -> None:
    """Wait for the work of every stream (of `device` only, when given: a device's
    synchronisation does not wait for the others'; the legacy default stream, shared by all
    devices here, is always waited for); raise the first kept error (the others stay kept
    for their streams' synchronize or the next synchronize_all)."""
    first = None
    mine = lambda st: device is None or st.device == device
    with _cv:
        while True:
            busy = [st for st in [*filter(mine, _states), default_stream._state] if not st.idle()]
            if not busy:
                break
            _cv.wait()
        for st in list(_states):
            if mine(st) and st.error is not None:
                first, st.error = st.error, None
                break
    _run_hooks()
    if first is not None:
        raise first


# ---------------------------------------------------------------- events

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


register_synchroniser(synchronize_all)
