"""Word on stderr while compiling keeps a program waiting.

A first launch of a large kernel can wait on LLVM for many seconds, and a program that
prints nothing meanwhile looks hung. Once a wait for compiled code (a kernel, a block
program, a module's variables) has lasted `DELAY` seconds, anycuda says so on stderr: on a
terminal one line that it keeps rewriting (what is being compiled, how many of the code
objects waited for are done, the tier, the time), otherwise one line when the wait has lasted
`DELAY` and one when it ends. Waits of several threads count together. ANYCUDA_QUIET=1 says
nothing. Nothing is ever written to stdout, which belongs to the program.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager

DELAY = 2.0          # seconds of waiting before anything is said
REFRESH = 0.5        # seconds between rewrites of the terminal line


def quiet() -> bool:
    return os.environ.get("ANYCUDA_QUIET", "").strip() not in ("", "0")


class _Reporter:
    """Counts the waits under way; one watcher thread (started at the first wait, then kept)
    speaks when a stretch of waiting passes DELAY, so that a wait costs no thread of its own."""

    def __init__(self):
        self._cv = threading.Condition()
        self._active = {}          # token -> (what, tier)
        self._needed = self._done = 0
        self._started = None       # when the stretch of waiting under way began
        self._shown = False
        self._epoch = 0            # one per stretch of waiting
        self._tty = False
        self._watcher = None

    def begin(self, what: str, tier: str) -> object:
        token = object()
        with self._cv:
            self._active[token] = (what, tier)
            self._needed += 1
            if self._started is None:
                self._started = time.monotonic()
                self._epoch += 1
                self._cv.notify_all()
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="anycuda-progress", daemon=True)
                self._watcher.start()
        return token

    def end(self, token) -> None:
        with self._cv:
            self._active.pop(token, None)
            self._done += 1
            if self._active:
                return
            if self._shown:
                elapsed = time.monotonic() - self._started
                count = f"{self._done} code object{'s' if self._done != 1 else ''}"
                self._write(f"anycuda: compiled {count} in {elapsed:.1f} s", final=True)
            self._needed = self._done = 0
            self._started, self._shown = None, False
            self._epoch += 1
            self._cv.notify_all()

    def _watch(self) -> None:
        with self._cv:
            while True:
                while self._started is None:
                    self._cv.wait()
                epoch, deadline = self._epoch, self._started + DELAY
                while self._epoch == epoch and time.monotonic() < deadline:
                    self._cv.wait(deadline - time.monotonic())
                if self._epoch != epoch:
                    continue
                self._shown = True
                self._tty = _stderr_is_terminal()
                self._write(self._status(), final=False)
                while self._epoch == epoch:
                    self._cv.wait(REFRESH)
                    if self._epoch == epoch and self._tty:
                        self._write(self._status(), final=False)

    def _status(self) -> str:
        what, tier = next(iter(self._active.values()))
        elapsed = time.monotonic() - self._started
        return (f"anycuda: compiling {what} ({tier}), {self._done} of {self._needed} done, "
                f"{elapsed:.0f} s (ANYCUDA_QUIET=1 silences this)")

    def _write(self, line: str, final: bool) -> None:
        try:
            if self._tty:
                sys.stderr.write("\r" + line + "\x1b[K" + ("\n" if final else ""))
            else:
                sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass          # no stderr to speak to: the program goes on all the same


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


_reporter = _Reporter()


@contextmanager
def waiting_for(what: str, tier: str):
    """Around a wait for compiled code: `what` names it ("kernel k of m.ptx"), `tier` its kind
    ("quick code", "optimised code")."""
    if quiet():
        yield
        return
    token = _reporter.begin(what, tier)
    try:
        yield
    finally:
        _reporter.end(token)
