"""Streams: ordered queues of work (launches, copies, host functions).

A created stream runs its work in order on a thread of its own, so the host goes on while
kernels run. The default stream follows CUDA's legacy semantics: its work waits for the
work already queued on every other stream, and work queued after it on any stream waits for
it. anycuda gets that by running default-stream work in the calling thread once all other
streams have drained. An error raised by queued work is kept and raised by the next
synchronize of that stream (and by `synchronize_all`); the stream's later work is skipped
until then, as a GPU skips work after a fault.
"""
from __future__ import annotations

import queue
import threading
import weakref

_streams = weakref.WeakSet()
sync_hooks = []     # called after every synchronisation (device printf output is flushed there)
_streams_lock = threading.Lock()


class Stream:
    """An ordered work queue executed by its own thread."""

    def __init__(self, priority: int = 0, non_blocking: bool = False):
        self.priority = priority
        self.non_blocking = non_blocking
        self._queue = queue.Queue()
        self._pending = 0
        self._cond = threading.Condition()
        self._error = None
        self._thread = None
        with _streams_lock:
            _streams.add(self)

    def _ensure_thread(self):
        if self._thread is None:
            self._thread = threading.Thread(target=_run, args=(weakref.ref(self), self._queue, self._cond),
                                            name="anycuda-stream", daemon=True)
            self._thread.start()

    def enqueue(self, fn, *args) -> None:
        with self._cond:
            self._pending += 1
        self._ensure_thread()
        self._queue.put((fn, args))

    def query(self) -> bool:
        """True when all queued work has finished."""
        with self._cond:
            return self._pending == 0

    def synchronize(self) -> None:
        with self._cond:
            while self._pending:
                self._cond.wait()
            err, self._error = self._error, None
        _run_hooks()
        if err is not None:
            raise err

    def __del__(self):
        try:
            self._queue.put(None)
        except Exception:
            pass


def _run(ref, q, cond):
    while True:
        item = q.get()
        if item is None:
            return
        fn, args = item
        stream = ref()
        if stream is None:
            return
        try:
            if stream._error is None:
                fn(*args)
        except BaseException as e:  # kept for the next synchronize
            stream._error = e
        finally:
            with cond:
                stream._pending -= 1
                cond.notify_all()
            del stream


class _DefaultStream:
    """The legacy default stream: runs work in the caller's thread after draining the others."""

    priority = 0
    non_blocking = False

    def enqueue(self, fn, *args) -> None:
        wait_for_created_streams(raise_errors=False)
        fn(*args)

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        synchronize_all()


default_stream = _DefaultStream()


def _live_streams():
    with _streams_lock:
        return list(_streams)


def wait_for_created_streams(raise_errors: bool = True) -> None:
    for s in _live_streams():
        if s.non_blocking:
            continue
        with s._cond:
            while s._pending:
                s._cond.wait()
        if raise_errors and s._error is not None:
            err, s._error = s._error, None
            raise err


def _run_hooks():
    for hook in sync_hooks:
        hook()


def synchronize_all() -> None:
    """Wait for every stream; raise the first error any of them kept."""
    _run_hooks()
    first = None
    for s in _live_streams():
        try:
            s.synchronize()
        except BaseException as e:
            first = first or e
    if first is not None:
        raise first
