"""A time limit for launches: ANYCUDA_LAUNCH_TIMEOUT=seconds.

A kernel that never ends (a loop whose test never changes, a spin on a flag in global
memory that nothing sets) hangs a GPU without a display watchdog, and so it hung anycuda:
a CI job waited for its own time limit and said nothing. With ANYCUDA_LAUNCH_TIMEOUT set,
a launch that runs longer fails with CUDA_ERROR_LAUNCH_TIMEOUT, as a kernel on a GPU with a
display watchdog does (and the device reports CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT); the
error is sticky, as there: the context is reset (cudaDeviceReset) before it is used again.
Unset (the default), launches run as long as they take, as on a compute GPU; one that has run
for ANYCUDA_LAUNCH_NOTICE seconds (default 60; 0: never) is named on stderr once, with how to
stop such launches, since a program that seems to hang says nothing on a GPU either.

How a running kernel is stopped: each worker of a watched launch writes its pthread_t into
the launch record's `watch_threads` table while it runs blocks (compiler/cpu/faults.py). Once
the limit has passed, the watchdog's thread sets the launch's error and sends each worker
runtime/faults.STOP_SIGNAL with the launch record as the signal's value; the handler jumps
back into the worker as after a memory fault, and the worker takes no more blocks. A worker
in a printf or assert hook or in malloc ignores the signal (a jump out of those would leave
Python's or libc's locks held), so the signal goes again every RESEND_SECONDS until the
launch has ended.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from contextlib import contextmanager

from ..compiler import abi
from . import environment
from .faults import STOP_SIGNAL

RESEND_SECONDS = 0.02
NOTICE_SECONDS = 60.0
_warned = set()
_lock = threading.Lock()


def env_seconds(name: str) -> tuple:
    """(setting `name`'s text, stripped; its value as a float, or None where it is none): each
    caller decides what is a number of seconds for it."""
    text = os.environ.get(name, "").strip()
    try:
        return text, float(text)
    except ValueError:
        return text, None


def launch_timeout() -> float:
    """ANYCUDA_LAUNCH_TIMEOUT in seconds; 0 where unset (no limit). A value that is not a
    positive number is named on stderr once and ignored."""
    if environment.raw(b"ANYCUDA_LAUNCH_TIMEOUT") is None:      # (every launch asks)
        return 0.0
    text, seconds = env_seconds("ANYCUDA_LAUNCH_TIMEOUT")
    if not text:
        return 0.0
    if seconds is None or not seconds > 0 or seconds == float("inf"):
        if text not in _warned:
            _warned.add(text)
            print(f"anycuda: ANYCUDA_LAUNCH_TIMEOUT={text!r} is not a positive number of seconds; "
                  "launches have no time limit", file=sys.stderr)
        return 0.0
    return seconds


class _Running:
    """The launches running now without a limit, {thread: (since, (kernel, grid, block))}, and
    a thread that looks at them every few seconds once the first has run: a launch past the
    notice time is named on stderr, once. A launch pays two dictionary updates."""

    def __init__(self):
        self.now = {}
        self.told = set()
        self._thread = None

    def enter(self, launch: tuple) -> None:
        self.now[threading.get_ident()] = (time.monotonic(), launch)
        if self._thread is None:
            with _lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._look, name="anycuda-launch-notice", daemon=True)
                    self._thread.start()

    def leave(self) -> None:
        self.now.pop(threading.get_ident(), None)

    def _look(self):
        while True:
            notice = env_seconds("ANYCUDA_LAUNCH_NOTICE")[1]
            notice = NOTICE_SECONDS if notice is None else notice
            time.sleep(min(max(notice / 4, 0.05), 5.0) if notice > 0 else 5.0)
            if notice <= 0:
                continue
            now = time.monotonic()
            for since, (kernel, grid, block) in list(self.now.values()):
                if now - since >= notice and (since, kernel) not in self.told:
                    self.told.add((since, kernel))
                    print(f"anycuda: kernel {kernel} (grid {grid}, block {block}) has run for {now - since:.1f} s; "
                          "if it never ends (a loop whose test never changes, a spin on a flag nothing sets), "
                          "ANYCUDA_LAUNCH_TIMEOUT=seconds stops such launches with cudaErrorLaunchTimeout",
                          file=sys.stderr, flush=True)


running = _Running()


class _Watched:
    __slots__ = ("due", "launch", "threads")

    def __init__(self, due, launch, threads):
        self.due, self.launch, self.threads = due, launch, threads


class _Watchdog:
    """One thread for the process, started with the first watched launch, waiting for the
    nearest time limit."""

    def __init__(self):
        self._cond = threading.Condition()
        self._watched = {}
        self._thread = None
        libc = ctypes.CDLL(None, use_errno=True)
        self._sigqueue = libc.pthread_sigqueue
        self._sigqueue.argtypes = (ctypes.c_ulong, ctypes.c_int, ctypes.c_void_p)

    @contextmanager
    def watching(self, launch, seconds: float):
        """The launch record `launch` (a runtime.program.Launch) watched while the block runs."""
        threads = (ctypes.c_uint64 * max(launch.num_workers, launch.all_workers, 1))()
        launch.watch_threads = ctypes.addressof(threads)
        entry = _Watched(time.monotonic() + seconds, launch, threads)
        with self._cond:
            self._watched[id(entry)] = entry
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="anycuda-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()
        try:
            yield
        finally:
            with self._cond:
                del self._watched[id(entry)]

    def _run(self):
        with self._cond:
            while True:
                now = time.monotonic()
                due = [e for e in self._watched.values() if e.due <= now]
                for entry in due:
                    self._stop(entry)
                    entry.due = now + RESEND_SECONDS
                if not due:
                    nearest = min((e.due for e in self._watched.values()), default=None)
                    self._cond.wait(None if nearest is None else nearest - now)

    def _stop(self, entry):
        """The launch's error says it timed out (unless a fault came first), and each of its
        workers running blocks gets the stop signal."""
        launch = entry.launch
        if launch.error == 0:
            launch.error = abi.LAUNCH_ERR_TIMEOUT
        for thread in entry.threads:
            if thread:
                self._sigqueue(thread, int(STOP_SIGNAL), ctypes.addressof(launch))


_watchdog = []


def watching(launch, seconds: float):
    """A context in which launch record `launch` runs with a time limit of `seconds`."""
    if not _watchdog:
        with _lock:
            if not _watchdog:
                _watchdog.append(_Watchdog())
    return _watchdog[0].watching(launch, seconds)
