"""Quick code first, optimised code from a background process.

LLVM's optimiser and code generator take 0.1-4 s for a kernel with barriers or warp
collectives; unoptimised code with fast instruction selection takes 5-20x less and runs
5-30x slower. A kernel met for the first time (not in the on-disk cache) is therefore
linked as quick code at once, and its optimised code is made by a compile server, a Python
process of its own (so that it runs beside the program on another core and cannot hold up
its LLVM calls: llvmlite serialises those with one lock). When the optimised object
arrives it goes into the cache, each instance of the kernel linked from the quick code links
it too, and their launches switch over: new launches run the optimised code, and a launch in flight
hands its remaining blocks over (each quick worker, before it takes more blocks, looks at
its launch record's handoff slot, abi.LAUNCH_FIELDS), so that a long first launch does not
run slowly to its end; so does a block program for the launch's block shape. The server takes
a job once it is ready (its imports take ~0.4 s), and a block program's job goes before the
optimised code waiting: a block program usually compiles in a fraction of that time and runs
faster, so a short program has it while it runs.

ANYCUDA_JIT chooses: `tiered` (the default), `optimised` (compile optimised code before the
first launch, as a driver JIT does), `quick` (never optimise: for short test runs on
small data, and to test the quick code).

The program's exit is its own: it is not held up by an unfinished compile, and nothing of the
server reaches the program's output or exit status. The server ends with the program (the
kernel kills it when the program is gone, and it leaves quietly on a closed pipe); what it
prints goes to a file of its own, read into the error of a compile it failed; no server is
started once the program exits; a write to a server that died answers an error, not the
SIGPIPE that would end a C program (which embeds Python without its signal handlers). Its
reply is linked under jit's link lock, and written to the cache atomically (cache.store);
the exit first closes arrivals (_Server.close: it waits for one being linked, later ones are
dropped), and later jit's link lock (jit.stop_linking).

What the exit leaves unfinished is not lost: a short program ends before its optimised code
arrives, and each run would compile it again and never run it. A job that says where its
object goes in the cache (Keep) is handed at a normal exit to a finisher (finish_after_exit):
a process of its own, in a session of its own, holding none of the program's files, that
compiles what was left at low priority and stores it, so that the next run of the program
finds it there. One finisher works on a cache at a time (a lock; another leaves at once),
skips what is cached meanwhile and gives up after FINISH_SECONDS. ANYCUDA_FINISH_AT_EXIT=0
leaves the work undone, as before.

Both objects of a kernel link against the one object that holds its module's variables
(compiler/pipeline.py), so a module with `.global` or `.const` variables tiers too.
"""
from __future__ import annotations

import atexit
import ctypes
import dataclasses
import functools
import inspect
import os
import pickle
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import weakref
from typing import Callable

from . import cache
from .jit import compile_to_object

TIERED, OPTIMISED, QUICK = "tiered", "optimised", "quick"
MODES = (TIERED, OPTIMISED, QUICK)


def mode() -> str:
    m = os.environ.get("ANYCUDA_JIT", TIERED).strip().lower() or TIERED
    if m not in MODES:
        raise ValueError(f"ANYCUDA_JIT={m!r}: expected one of {', '.join(MODES)}")
    return m


@dataclasses.dataclass(frozen=True)
class Keep:
    """Where a job's object goes in the compile cache: under `key`, the object itself (`entry`
    None) or `entry` (a dataclass) with the object as its `object_code`. What the job's
    subscriber stores when the object arrives, and what a finisher stores for a job the
    program's exit left unfinished."""
    key: str
    entry: object = None

    def value(self, object_code: bytes):
        return object_code if self.entry is None else dataclasses.replace(self.entry, object_code=object_code)


class OptimisedCode:
    """The optimised object of one module, on its way: `subscribe(fn)` calls fn(object
    bytes) once it is there (at once if it is), or fn(None) if the compile failed. `keep`:
    where its object goes in the cache, for a finisher should the program end first."""

    def __init__(self, source, name: str, first: bool = False, keep: Keep = None):
        self._source, self._name = source, name      # LLVM IR text, or a Recipe that makes it
        self.keep = keep
        self.queued = False              # given to the compile server (queue)
        self._lock = threading.Lock()
        self._subscribers = []
        self._finished = False
        self.done = threading.Event()     # set once the subscribers have been called
        self.object_code = None
        self.error = None
        self.first = first               # queued before the jobs that are not (_Server.submit)

    def queue(self) -> None:
        """Give the job to the compile server, once (a job made `later` waits for this)."""
        with self._lock:
            if self.queued or self._finished:
                return
            self.queued = True
        _server().submit(self)

    def subscribe(self, fn) -> None:
        """A bound method is held weakly: a kernel whose module was unloaded before its
        optimised code came is let go with its quick code, not kept by the queue (a fuzz
        campaign loading and unloading modules faster than the server optimised them kept
        every one: three more memory mappings per kernel, without end)."""
        with self._lock:
            if not self._finished:
                self._subscribers.append(weakref.WeakMethod(fn) if inspect.ismethod(fn) else (lambda fn=fn: fn))
                return
        fn(self.object_code)

    def _finish(self, object_code, error=None) -> None:
        with self._lock:
            self.object_code, self.error = object_code, error
            self._source = None
            self._finished = True
            subscribers, self._subscribers = self._subscribers, []
        for ref in subscribers:
            fn = ref()
            if fn is None:            # (its kernel is gone)
                continue
            try:
                fn(object_code)
            except Exception as e:    # noqa: BLE001 - a failed switch keeps the quick code
                self.error = f"switching to optimised code failed: {e}"
        self.done.set()


ARRIVAL_WAIT_AT_EXIT = 10.0        # seconds the exit waits for an arrival being linked


@dataclasses.dataclass(frozen=True)
class Recipe:
    """LLVM IR the compile server makes itself, as `make(*args)`: the program's quick code
    can then come from a leaner lowering than the optimised code's, and the full lowering
    costs the program nothing. `make` is a module-level function (sent by its name, as
    pickle sends functions) and `args` plain data; `make` may answer None (nothing to
    compile: the job's object is then empty, b"")."""
    make: Callable[..., str]
    args: tuple


def can_optimise_in_background() -> bool:
    """Whether a compile server can be started (a Python interpreter found to run it)."""
    return _interpreter() is not None


def optimise_in_background(source, name: str, first: bool = False, keep: Keep = None,
                           later: bool = False) -> OptimisedCode | None:
    """Queue the module (LLVM IR text, or a Recipe for it) for the compile server; None
    where no Python interpreter can be found to run one (the caller then compiles
    optimised code itself). A job `first` goes before the others waiting (after those queued
    `first` before it); `keep`: where its object goes in the cache (OptimisedCode). A job
    `later` is made but not queued until its `queue()`: the optimised code of a kernel whose
    launches block programs may take all, compiled only once a launch needs it (a job never
    queued is not the finisher's either: nothing asked for it)."""
    if not can_optimise_in_background():
        return None
    job = OptimisedCode(source, name, first, keep)
    if not later:
        job.queue()
    return job


def _message(source) -> tuple:
    """(kind, payload) of a job's source for the server: IR text, or a pickled Recipe."""
    if isinstance(source, Recipe):
        return b"recipe", pickle.dumps((source.make, source.args), protocol=pickle.HIGHEST_PROTOCOL)
    return b"ir", source.encode()


def _source_text(kind: bytes, payload: bytes) -> str:
    """In the server: the LLVM IR of a job (a Recipe is carried out here; one that makes
    None has nothing to compile, and the job's object is empty)."""
    if kind == b"recipe":
        make, args = pickle.loads(payload)      # from the program that started this server
        return make(*args)
    return payload.decode()


# ---------------------------------------------------------------- the compile server

@functools.lru_cache(maxsize=1)
def _interpreter() -> str | None:
    """This Python's interpreter; in a process that embeds Python (libcuda.so.1 in a C
    program) sys.executable is that program, so look beside the installation."""
    candidates = [sys.executable] if os.path.basename(sys.executable or "").startswith("python") else []
    v = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates += [os.path.join(p, "bin", v) for p in (sys.exec_prefix, sys.base_exec_prefix)]
    return next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


class _Server:
    """One child process compiling queued modules one at a time (a second core's worth of
    work beside the program); restarted when it dies."""

    def __init__(self):
        self._queue = []
        self._cv = threading.Condition()
        self._proc = None
        self._output = None           # the server's stdout and stderr: a file of its own
        self._closed = False          # the program is exiting
        # Objects are linked on this thread as they arrive (their jobs' subscribers), which the
        # program's exit does not stop: close() waits for one being delivered and has the
        # later ones dropped, so that no link meets LLVM's teardown (jit.EXIT_WATCH_RENEWALS)
        self._arrivals = threading.Lock()
        self._delivering = True
        self._current = None          # the job the server has
        self._thread = threading.Thread(target=self._run, name="anycuda-optimiser", daemon=True)
        self._thread.start()

    def submit(self, job: OptimisedCode) -> None:
        with self._cv:
            at = next((i for i, j in enumerate(self._queue) if not j.first), None) if job.first else None
            self._queue.insert(len(self._queue) if at is None else at, job)
            self._cv.notify()

    def close(self) -> None:
        """At the program's exit: link no more arrivals, start no server, and end the one
        running (a compile left unfinished is not waited for: a finisher takes the jobs left
        that say where their objects go, finish_after_exit)."""
        with self._cv:
            left = [(j._name, j._source, j.keep) for j in (self._current, *self._queue)
                    if j is not None and j.keep is not None and j._source is not None]
        held = self._arrivals.acquire(timeout=ARRIVAL_WAIT_AT_EXIT)
        self._delivering = False
        if held:
            self._arrivals.release()
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._stop()
        finish_after_exit(left)

    def _run(self):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})    # (this thread's writes only)
        while True:
            with self._cv:
                while not self._queue and not self._closed:
                    self._cv.wait()
                if self._closed:
                    return
            try:
                # the job is taken once the server is ready (~0.4 s of imports for the first):
                # by then the block programs of the first launches have been queued before it
                self._started()
                failed = None
            except Exception as e:    # noqa: BLE001 - reported to the job taken next
                failed = e
            with self._cv:
                if self._closed:
                    return
                job = self._current = self._queue.pop(0)
            try:
                if failed is not None:
                    raise failed
                status, payload = self._compile(job._source, job._name)
            except Exception as e:    # noqa: BLE001 - the server died or garbled a reply: start another
                if self._closed:      # (stopped at the program's exit: nothing failed, no warning)
                    job._finish(None)
                    return
                said = self._server_output()
                self._stop()
                status, payload = b"error", f"the compile server failed: {e}{said}".encode()
            if status == b"ok":
                self._deliver(job, payload)
            else:                     # the quick code stays
                self._deliver(job, None, f"optimising {job._name} failed: {payload.decode(errors='replace')}")
            with self._cv:
                self._current = None

    def _deliver(self, job: OptimisedCode, object_code, error=None) -> None:
        """Finish the job, its subscribers linking the object; after close(), finish it empty
        and without an error (the program is exiting: nothing failed)."""
        with self._arrivals:
            if self._delivering:
                job._finish(object_code, error)
            else:
                job._finish(None)

    def _started(self) -> None:
        """Start the server if it is not running, and wait until it says it is ready."""
        if self._proc is not None and self._proc.poll() is None:
            return
        with self._cv:
            if self._closed:
                raise RuntimeError("the program is exiting")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        if self._output is not None:
            self._output.close()
        self._output = tempfile.TemporaryFile()
        self._proc = subprocess.Popen([_interpreter(), "-c",
                                       f"from anycuda.compiler.build.tiers import serve; serve({os.getpid()})"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._output, env=env)
        if _read_message(self._proc.stdout, 1) != [READY]:
            raise RuntimeError("the compile server did not start")

    def _compile(self, source, name: str) -> tuple:
        """(b"ok", object) or (b"error", why) from the server, started if it is not running."""
        self._started()
        _write_message(self._proc.stdin, name.encode("utf-8", "surrogateescape"), *_message(source))
        self._proc.stdin.flush()
        return tuple(_read_message(self._proc.stdout))

    def _server_output(self) -> str:
        """The end of what the server printed (a crash's message), for the error of a compile."""
        try:
            self._output.seek(0)
            text = self._output.read().decode(errors="replace").strip()
        except (AttributeError, OSError, ValueError):
            return ""
        return f"; it said: {text[-2000:]}" if text else ""

    def _stop(self):
        p, self._proc = self._proc, None
        if p is not None:
            if p.poll() is None:
                p.kill()
            for pipe in (p.stdin, p.stdout):
                try:
                    pipe.close()
                except OSError:       # unwritten bytes for a server that has gone
                    pass


# ---------------------------------------------------------------- the finisher

FINISH_SECONDS = 300       # a finisher's time: what it has not compiled by then stays undone


def finish_after_exit(left: list) -> None:
    """At the program's exit: a finisher for the jobs `left` ([(name, source, Keep)]), the
    compile cache's entries the program ended before; nothing where there are none, where no
    cache is written (ANYCUDA_CACHE=0) or ANYCUDA_FINISH_AT_EXIT=0. The finisher starts a
    session of its own with none of the program's files (close_fds; its output goes nowhere), so
    that nothing waiting for the program's pipes or its process group waits for it; the jobs
    reach it through a file without a name. A failure to start it is no failure of
    the program's: the work stays undone."""
    if not left or os.environ.get("ANYCUDA_FINISH_AT_EXIT", "1").strip() == "0" or cache.cache_dir() is None:
        return
    try:
        with tempfile.TemporaryFile() as jobs:
            pickle.dump([(name, *_message(source), keep) for name, source, keep in left], jobs,
                        protocol=pickle.HIGHEST_PROTOCOL)
            jobs.seek(0)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            finisher = subprocess.Popen([_interpreter(), "-c", "from anycuda.compiler.build.tiers import finish; finish()"],
                                        stdin=jobs, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        env=env, start_new_session=True)
    except (OSError, pickle.PicklingError, AttributeError, TypeError, ValueError):
        return
    # it outlives the program by design: no warning that it still runs when the object goes
    finisher.returncode = 0


def finish() -> None:
    """The finisher's work (the jobs on stdin, finish_after_exit): each job's object compiled
    and stored in the cache, unless it is there already (a later run, or another finisher,
    made it meanwhile); at low priority, for at most FINISH_SECONDS, and not at all while
    another finisher has the cache's lock."""
    import fcntl
    signal.alarm(FINISH_SECONDS)         # (its default action ends the process)
    try:
        os.nice(10)
    except OSError:
        pass
    jobs = pickle.load(sys.stdin.buffer)
    d = cache.cache_dir()
    if d is None:
        return
    cache.private_folder(d)
    with open(os.open(d / ".finishing", os.O_RDWR | os.O_CREAT, 0o600), "wb") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return                        # another finisher is at work: the next run of the program asks again
        for name, kind, payload, keep in jobs:
            if _stored(keep.key):
                continue
            try:
                text = _source_text(kind, payload)
                object_code = b"" if text is None else compile_to_object(text, name)
            except Exception:             # noqa: BLE001 - left to the next run, which reports it
                continue
            cache.store(keep.key, keep.value(object_code))


def _stored(key: str) -> bool:
    """Whether the cache holds the object under `key`: an entry whose object is left for
    later (a kernel's info, pipeline.compile_kernel's `object_later`) does not count."""
    hit = cache.load(key)
    return hit is not None and not getattr(hit, "object_later", False)


_the_server = []
_server_lock = threading.Lock()


def close_at_exit() -> None:
    """The program is exiting (the C exit handler of the driver library, shim/build.py, which
    runs before Python's own): close the server if one was started."""
    if _the_server:
        _the_server[0].close()


def _server() -> _Server:
    with _server_lock:
        if not _the_server:
            _the_server.append(_Server())
            atexit.register(_the_server[0].close)
        return _the_server[0]


def _write_message(stream, *parts: bytes) -> None:
    for p in parts:
        stream.write(struct.pack("<Q", len(p)))
        stream.write(p)


def _read_exactly(stream, n: int) -> bytes:
    data = stream.read(n)
    if data is None or len(data) != n:
        raise RuntimeError("the compile server stopped")
    return data


def _read_message(stream, count: int = 2) -> list:
    return [_read_exactly(stream, struct.unpack("<Q", _read_exactly(stream, 8))[0]) for _ in range(count)]


PR_SET_PDEATHSIG = 1
READY = b"ready"            # the server's first message: its imports are done


def _end_with(program: int) -> None:
    """Have Linux kill this process when the program that started it ends (PR_SET_PDEATHSIG:
    when the thread that started it does, the optimiser's, which lasts as long as the
    program), and leave now if that has happened already."""
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):   # not Linux: the server leaves when it finds the pipes closed
        pass
    if program is not None and os.getppid() != program:
        os._exit(0)


def serve(program: int = None) -> None:
    """The compile server's loop (in the child of process `program`): (name, kind, LLVM IR
    or a Recipe for it) in, (status, object) out."""
    _end_with(program)
    stdin = sys.stdin.buffer
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)       # what anything else prints must not reach the replies
    try:
        _write_message(stdout, READY)
        stdout.flush()
    except OSError:
        os._exit(0)
    while True:
        try:
            name, kind, payload = _read_message(stdin, 3)
        except RuntimeError:
            return      # the program closed the pipe
        try:
            text = _source_text(kind, payload)
            reply = (b"ok", b"" if text is None else compile_to_object(text, name.decode("utf-8", "surrogateescape")))
        except Exception as e:   # noqa: BLE001 - reported to the program, which keeps its quick code
            reply = (b"error", f"{type(e).__name__}: {e}".encode())
        try:
            _write_message(stdout, *reply)
            stdout.flush()
        except OSError:          # the program has gone: nothing to answer, nothing to say
            os._exit(0)
