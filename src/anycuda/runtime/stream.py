"""Streams: ordered queues of work (launches, copies, memsets, host functions, event
records), and the events recorded in them.

Every stream runs its work in order on a Python thread of its own (started on first use),
the legacy default stream included, so a launch returns at once and the host goes on while
kernels run (a launch releases the GIL), as on a GPU. Synchronous operations (`call`: a
blocking copy or memset) queue their work and wait for it; on the default stream, when
nothing is pending that they would wait for, the caller runs the work itself (holding its
ticket, so work queued meanwhile still comes after it).

The default stream is CUDA's *legacy* null stream: its work starts only when the work
queued earlier on every blocking stream of the same device has finished, and work queued
later on a blocking stream starts only when the default stream's earlier work has finished.
Each device has its own, as each CUDA context has: `default_stream` stands for the one of the
queueing thread's device (runtime/device.work_device), so threads driving different devices
through their default streams do not wait for each other (NCCL ranks of one process, one
thread per device, block their streams until every rank has arrived). Streams created with
`non_blocking=True` take no part in that. Each piece of work carries tickets, taken when it is queued, that say what it
waits for; one condition variable guards all counters, so the rules hold when several host
threads queue at once. A ticket only ever names work queued before it, so no set of waits
can be circular. The per-thread default stream (`per_thread_stream`, `Stream.ptds`) is a
blocking stream of each host thread's own.

Work that a stream's own worker queues on the default stream (an API call from a host
function, which CUDA forbids) runs inline, ordered by the stream running it: waiting for
the default stream there could wait for the very work that is running.

A host thread that waits for a stream (`synchronize`, `call`, `synchronize_all`, an event's
`synchronize`) runs, in order, the work the stream's worker has not taken yet, instead of
waking the worker to run it and being woken by it after: a small kernel launched and
synchronised cost two thread hand-overs that way, more than the kernel (reduce_atomic: ~40 us
a launch and synchronise, its 4M-element kernel ~100 us). Work queued and not waited for still
starts on the worker at once. Only device work (launches, copies, memsets, library calls and
event records, queued with `any_thread=True`) runs so; host functions and Python callables
queued with `enqueue` run on the stream's own thread, as CUDA runs host functions on a thread
of its own.

Errors: an exception raised by work is kept; the stream skips its later work until the
error has been reported, which the next `synchronize()` or `call()` of that stream, an
event synchronisation that the error skipped, or `synchronize_all()`
(`anycuda.synchronize()`) does by raising that same exception.

Events are points in a stream's work, with host timestamps for elapsed-time queries:
`Event.record(stream)` queues a marker; when the stream reaches it, the marker takes the time
(`time.perf_counter`) and completes. `synchronize()` and `query()` refer to the most recent
record, as in CUDA; an event never recorded counts as complete. A marker that its stream
skips (after an unreported error) completes without a time.

A stream holds at most MAX_PENDING pieces of work; queueing more waits, as a GPU's full
launch queue makes a launch wait. At exit, work still queued is finished first (`drain`).
"""
from __future__ import annotations

import atexit
import collections
import ctypes
import queue
import threading
import time

from . import environment
from .device import register_synchroniser, work_device
from .errors import CudaError, CUresult

sync_hooks = []     # called after every synchronisation (device printf output is flushed there)

# Work a stream may hold before queueing more waits, as a GPU's launch queue fills: a program
# launching in a loop without synchronising keeps its memory flat (each item holds its
# arguments). The host waits until half of it is done, so it does not wake per item.
MAX_PENDING = 1024

_cv = threading.Condition()          # guards every stream's tickets and kept error
_states = set()                      # _StreamState of created streams given work, until their worker leaves
_local = threading.local()           # .state: the stream whose worker this thread is

# Pieces of work queued on any stream and not finished, errors kept and not yet reported, and
# stream captures under way (`hold`): where this reads zero, nothing queued could come before
# new work and nothing is being recorded, so C code may do a library's small work on the
# caller's thread at once (libraries/nccl/front.c reads it by address, without the lock; every
# write holds _cv).
busy = ctypes.c_long(0)


def hold(delta: int) -> None:
    """Count something besides queued work that new work must not pass (a capture: +1, -1)."""
    _hand_over_outside()
    with _cv:
        busy.value += delta


# Work queued outside the streams' workers: large collectives on a C thread of libnccl's
# (libraries/nccl/large.c), queued only while `busy` reads zero. `foreign` counts what is
# queued there and not yet handed to a stream (the C writes it); before the runtime queues,
# waits for or asks about any work, `outside.hand_over()` makes that work a piece of work of its
# stream (which waits for it), so every rule of stream order then holds for it as for the rest.
foreign = ctypes.c_long(0)


class Outside:
    """What the library doing work outside the streams gives the runtime (`set_outside`)."""

    def hand_over(self) -> None:
        """Queue, on the stream it belongs to, a piece of work that waits for the work not yet
        handed over (called where `foreign` reads nonzero; no lock held)."""
        raise NotImplementedError

    def issued(self) -> int:
        """The ticket of the last piece of outside work queued."""
        raise NotImplementedError

    def done(self) -> int:
        """The ticket of the last piece finished (tickets finish in order)."""
        raise NotImplementedError

    def wait_here(self, state, device) -> bool:
        """Where the work not yet handed over belongs to the stream whose state is `state` (or,
        `state` None, to any stream of `device`, or of any device where that is None too), wait
        for it in this thread without handing it over (handing it over to wait would wake the
        stream's worker to wait, and this thread after it); whether it did."""
        raise NotImplementedError


_outside = [None]


def set_outside(outside: Outside) -> None:
    _outside[0] = outside


def _hand_over_outside() -> None:
    if foreign.value and _outside[0] is not None:
        _outside[0].hand_over()


def _wait_for_outside(state=None, device=None) -> None:
    """For a synchronisation (of the stream whose state is `state`, or of `device`'s or every
    stream): the outside work not yet handed over, waited for here where it is that stream's,
    else handed over. Where `foreign` reads nonzero, nothing was queued on any stream after that
    work (queueing hands it over), so the streams have nothing of theirs to wait for after it."""
    if foreign.value and _outside[0] is not None and not _outside[0].wait_here(state, device):
        _outside[0].hand_over()


class _OutsideTicket:
    """The outside work as release_after_queued_work's table holds a stream's state."""

    def __init__(self, outside: Outside):
        self.outside = outside

    @property
    def completed(self) -> int:
        return self.outside.done()


class _StreamState:
    """What a stream's worker thread needs; outlives the Stream object until its work is done."""

    def __init__(self, non_blocking: bool, device: int = 0):
        self.non_blocking = non_blocking
        self.device = device     # a device's synchronisation waits for its own streams only
        self.issued = 0          # tickets handed out (one per enqueued item)
        self.completed = 0       # items finished (run, failed or skipped)
        self._error = None       # kept until reported (`error`)
        self.pending = collections.deque()   # (fn, args, on_skip, deps) not yet taken (under _cv)
        self.running = False     # a piece of work has been taken and not finished (under _cv)
        self.queue = queue.SimpleQueue()     # a token for the worker per piece queued; None: leave
        self.thread = None
        self.inline = 0          # ticket of blocking work running in its caller's thread, or 0

    @property
    def error(self):
        return self._error

    @error.setter
    def error(self, e) -> None:
        """Caller holds _cv (a kept error counts in `busy` until it is reported)."""
        busy.value += (e is not None) - (self._error is not None)
        self._error = e

    def idle(self) -> bool:
        return self.completed == self.issued

    def take_error(self):
        """The kept error, now reported (None if there is none). Caller holds _cv."""
        err, self.error = self.error, None
        return err


def _wait_for(deps) -> None:
    """Block until every (state, ticket) in `deps` has completed that ticket. Caller holds _cv."""
    while any(state.completed < ticket for state, ticket in deps):
        _cv.wait()


# Releases waiting for work queued before them: (the (state, ticket) pairs, release)
_after_work = []


def release_after_queued_work(release) -> None:
    """Call `release()` once every piece of work queued so far, on any stream, has finished (at
    once when none is pending): what a freed allocation needs, since that work may still read
    or write it (cudaFree waits for the device). Takes no lock, as a collected owner's finaliser
    may call it wherever the collector runs; CPython copies the tables below atomically, and a
    worker that finished the last ticket before the entry was added is caught by the check
    after adding it."""
    pending = [(st, st.issued) for st in list(_states) + default_stream.states() if st.completed < st.issued]
    outside = _outside[0]
    if outside is not None and outside.done() < outside.issued():
        # (not handed over here: a finaliser may not queue work; the work that takes it over,
        # or the next piece of any stream's work to finish, releases this)
        pending.append((_OutsideTicket(outside), outside.issued()))
    if not pending:
        release()
        return
    entry = (pending, release)
    _after_work.append(entry)
    if all(st.completed >= ticket for st, ticket in pending):
        _take_release(entry)


def _take_release(entry) -> None:
    """Run an entry's release unless another thread took it first."""
    try:
        _after_work.remove(entry)
    except ValueError:
        return
    entry[1]()


def _ready_releases() -> list:
    """The entries whose work has all finished. Caller holds _cv."""
    return [e for e in list(_after_work) if all(st.completed >= ticket for st, ticket in e[0])]


class HostFunction:
    """A host function for a stream (cuLaunchHostFunc, a stream callback, a graph's host node),
    as the driver hands it on (driver/streams.submit): queued without `any_thread`, unlike the
    rest of the driver's work, so that only the stream's own thread runs it."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)


def _worker(state: _StreamState) -> None:
    _local.state = state
    while True:
        if state.queue.get() is None:
            with _cv:
                _states.discard(state)
            return
        with _cv:
            while state.running:         # (a waiting host thread runs the work before)
                _cv.wait()
            taken = _take(state) if state.pending else None
            if taken is not None and taken[3]:
                _wait_for(taken[3])
        if taken is not None:            # (else a waiting host thread ran it)
            _run_taken(state, taken)
            taken = None                 # (a finished piece of work keeps nothing alive)


def _take(state: _StreamState):
    """The stream's next piece of work, now running. Caller holds _cv; the stream runs none."""
    state.running = True
    return state.pending.popleft()


def _take_for_waiter(state: _StreamState):
    """For a host thread waiting for the stream: its next piece of work, now running, where no
    worker runs one, it is not a host function and what it waits for on other streams has
    finished; else None. Caller holds _cv."""
    if state.running or not state.pending or getattr(_local, "state", None) is not None:
        return None
    _, _, _, deps, any_thread = state.pending[0]
    if not any_thread or any(st.completed < ticket for st, ticket in deps):
        return None
    return _take(state)


def _run_taken(state: _StreamState, taken) -> None:
    """Run (or skip, after an unreported error) a piece of work taken from the stream, as its
    worker (work it queues on the default stream runs inline, as the module says); then
    count it finished and wake the waiters. Caller does not hold _cv."""
    fn, args, on_skip, _, _ = taken
    del taken
    with _cv:
        skip = state.error is not None
    before = getattr(_local, "state", None)
    _local.state = state
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
        _local.state = before
        del fn, args, on_skip         # (a finished piece of work keeps nothing alive)
        with _cv:
            state.running = False
            state.completed += 1
            busy.value -= 1
            # before waking the waiters, so a synchronised program sees the memory freed
            # (a release takes the memory table's lock; nothing holding that waits for _cv)
            for entry in _ready_releases() if _after_work else ():
                _take_release(entry)
            _cv.notify_all()


def _wait_running_theirs(done, states) -> None:
    """Wait until done(), running meanwhile, in each stream's order, the work of `states()`
    that their workers have not taken (_take_for_waiter). Caller holds _cv, and holds it again
    on return."""
    while not done():
        taken = None
        for st in states():
            taken = _take_for_waiter(st)
            if taken is not None:
                break
        if taken is None:
            _cv.wait()
            continue
        _cv.release()
        try:
            _run_taken(st, taken)
        finally:
            taken = None
            _cv.acquire()


_drain_registered = []


def _start_worker(state: _StreamState) -> None:
    """Start `state`'s worker (outside _cv: a new thread may collect garbage before it runs,
    and a collected Stream's finaliser must never wait for a lock this thread holds)."""
    if not _drain_registered:
        # registered with the first worker, so after the compiler's exit handlers: those run
        # in reverse order, and the work drained may still need the compiler
        _drain_registered.append(True)
        atexit.register(drain)
    state.thread.start()


class _Queue:
    """What created streams and the legacy default stream share: queueing, waiting, events."""

    _state: _StreamState

    def _dependencies(self) -> tuple:
        """The (state, ticket) pairs new work waits for besides this stream's own earlier work.
        Caller holds _cv."""
        raise NotImplementedError

    def _joins(self, state: _StreamState) -> None:
        """Called under _cv when the stream gets its worker."""

    def enqueue(self, fn, *args, on_skip=None, any_thread=False) -> int:
        """Run `fn(*args)` after the work queued before it (and what _dependencies names);
        returns its ticket at once. `on_skip()` runs instead when the stream skips the work
        because of an unreported error. `any_thread`: device work, which a host thread that
        waits for the stream may run itself (see the module's docstring); else the stream's
        own thread runs it."""
        if foreign.value:
            _hand_over_outside()
        st = self._state
        with _cv:
            if st.issued - st.completed >= MAX_PENDING and getattr(_local, "state", None) is None:
                while st.issued - st.completed >= MAX_PENDING // 2:
                    _cv.wait()
            deps = self._dependencies()
            if st.inline:        # after the blocking work its caller is running (_DefaultStream.call)
                deps += ((st, st.inline),)
            st.issued += 1
            busy.value += 1
            ticket = st.issued
            first = st.thread is None
            if first:
                st.thread = threading.Thread(target=_worker, args=(st,), name="anycuda-stream", daemon=True)
                self._joins(st)
            st.pending.append((fn, args, on_skip, deps, any_thread))
        st.queue.put(True)
        if first:
            _start_worker(st)
        return ticket

    def call(self, fn, *args) -> None:
        """Synchronous work (a blocking copy or memset): `fn(*args)` in stream order, returning
        when it has run; raises the error the stream kept, this work's or earlier work's
        (which made the stream skip this work)."""
        self._wait(self.enqueue(fn, *args, any_thread=True))

    def _wait(self, ticket: int = None) -> None:
        """Wait until the work up to `ticket` (all queued work: None) has finished; raise the
        error the stream kept, if any (once)."""
        st = self._state
        if getattr(_local, "state", None) is st:
            raise CudaError(CUresult.CUDA_ERROR_NOT_PERMITTED,
                            "a stream's own work (a host function) cannot wait for that stream")
        if ticket is None:
            _wait_for_outside(st)
        else:
            _hand_over_outside()
        with _cv:
            _wait_running_theirs(lambda: st.completed >= (st.issued if ticket is None else ticket), lambda: (st,))
            err = st.take_error()
        _run_hooks()
        if err is not None:
            raise err

    def synchronize(self) -> None:
        """Wait for the queued work; raise the error it kept, if any (once)."""
        self._wait()

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
        _hand_over_outside()
        with _cv:
            return self._state.idle()

    @property
    def done(self) -> bool:
        return self.query()


class Stream(_Queue):
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

    def _dependencies(self) -> tuple:
        if self.non_blocking:
            return ()
        legacy = default_stream.state_of(self.device)
        return ((legacy, legacy.issued),) if legacy.issued > legacy.completed else ()

    def _joins(self, state: _StreamState) -> None:
        _states.add(state)

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


class _DefaultStream(_Queue):
    """The legacy default streams, one per device: work goes to the queueing thread's
    device's, and starts once the earlier work of every blocking stream of that device has
    finished."""

    priority = 0
    non_blocking = False

    def __init__(self):
        self._by_device = {}          # device -> _StreamState, made at first use

    @property
    def _state(self) -> _StreamState:
        return self.state_of(work_device())

    def state_of(self, device: int) -> _StreamState:
        """The legacy default stream of `device` (what waits for it must see it before its
        first work, so it is made on asking; setdefault keeps one when threads race)."""
        st = self._by_device.get(device)
        return st if st is not None else self._by_device.setdefault(device, _StreamState(False, device))

    def states(self) -> list:
        return list(self._by_device.values())

    def _dependencies(self) -> tuple:
        if not _states:      # a program without created streams skips this (launch overhead)
            return ()
        device = work_device()
        return tuple((s, s.issued) for s in _states
                     if not s.non_blocking and s.device == device and s.issued > s.completed)

    def enqueue(self, fn, *args, on_skip=None, any_thread=False) -> int:
        if getattr(_local, "state", None) is not None:
            _hand_over_outside()
            fn(*args)            # from a stream's own work: inline (see the module's docstring)
            return 0
        return super().enqueue(fn, *args, on_skip=on_skip, any_thread=any_thread)

    def call(self, fn, *args) -> None:
        """As _Queue.call; when nothing is pending that the work would wait for (this stream
        idle, no error kept, no blocking stream of the device busy), the caller runs it itself,
        holding its ticket: a small blocking copy then costs no hand-over to the worker and
        back, and work queued meanwhile waits for it (enqueue's `inline` dependency)."""
        _hand_over_outside()
        if getattr(_local, "state", None) is not None:
            fn(*args)
            return
        st = self._state
        with _cv:
            quick = st.idle() and st.error is None and not st.inline and not self._dependencies()
            if quick:
                st.issued += 1
                busy.value += 1
                st.inline = st.issued
        if not quick:
            super().call(fn, *args)
            return
        try:
            fn(*args)
        finally:
            with _cv:
                st.inline = 0
                st.completed += 1
                busy.value -= 1
                _cv.notify_all()
        _run_hooks()

    def __repr__(self):
        return "<anycuda default (legacy null) stream>"


default_stream = _DefaultStream()
Stream.null = default_stream

_per_thread = threading.local()      # .streams: device -> this host thread's default stream


def per_thread_stream(device: int = None) -> Stream:
    """The calling host thread's per-thread default stream on `device` (default: the
    thread's work device): a blocking stream of its own, made at first use."""
    if device is None:
        device = work_device()
    streams = _per_thread.__dict__.setdefault("streams", {})
    s = streams.get(device)
    if s is None:
        s = streams[device] = Stream(device=device)
    return s


def api_stream():
    """Where the Python API's work goes when it is given no stream: the legacy default stream,
    or with ANYCUDA_PER_THREAD_DEFAULT_STREAM=1 the calling host thread's per-thread default
    stream (what nvcc's `--default-stream per-thread` makes of a program's stream 0), so that
    host threads' arrays, copies and launches do not wait for each other's."""
    if environment.is_set(b"ANYCUDA_PER_THREAD_DEFAULT_STREAM"):
        return per_thread_stream()
    return default_stream


class _PerThreadDefaultStream:
    """`Stream.ptds` (CuPy's name): stands for the per-thread default stream of whichever
    host thread uses it."""

    priority = 0
    non_blocking = False

    def __getattr__(self, name):
        return getattr(per_thread_stream(), name)

    def __repr__(self):
        return "<anycuda per-thread default stream>"


Stream.ptds = _PerThreadDefaultStream()


def _run_hooks() -> None:
    for hook in list(sync_hooks):
        hook()


def _device_states(device):
    """The states of the streams that a synchronisation of `device` (every device: None)
    waits for: its created streams and its legacy default stream. Caller holds _cv."""
    mine = [st for st in _states if device is None or st.device == device]
    return mine + (default_stream.states() if device is None else [default_stream.state_of(device)])


def _wait_idle(device, run_theirs: bool = False) -> list:
    """Wait until the streams of `device` are idle; their states. `run_theirs`: meanwhile run
    the device work their workers have not taken (an explicit synchronisation; an implicit one
    only waits). Caller holds _cv (and has waited for the outside work or handed it over:
    _wait_for_outside)."""
    _wait_running_theirs(lambda: all(st.idle() for st in _device_states(device)),
                         lambda: _device_states(device) if run_theirs else ())
    return _device_states(device)


def synchronize_all(device: int = None) -> None:
    """Wait for the work of every stream (of `device` only, when given: a device's
    synchronisation does not wait for the others'); raise the first kept error (the others
    stay kept for their streams' synchronize or the next synchronize_all)."""
    _wait_for_outside(device=device)
    first = None
    with _cv:
        for st in _wait_idle(device, run_theirs=True):
            if st.error is not None:
                first = st.take_error()
                break
    _run_hooks()
    if first is not None:
        raise first


def wait_idle(device: int = None) -> None:
    """Wait for the work of `device`'s streams (as synchronize_all) without reporting their
    errors, which stay kept: what an implicit synchronisation (a free, a module unload) does.
    From a stream's own work it waits for nothing (that could wait for itself)."""
    if getattr(_local, "state", None) is not None:
        return
    _wait_for_outside(device=device)
    with _cv:
        _wait_idle(device)
    _run_hooks()


def discard_errors(device: int = None) -> None:
    """Wait for `device`'s streams and forget the errors they kept (a device reset)."""
    _hand_over_outside()
    with _cv:
        for st in _wait_idle(device):
            st.error = None


def drain() -> None:
    """Finish all queued work before the process ends (its errors are not reported)."""
    try:
        wait_idle()
    except BaseException:        # noqa: BLE001 -- nothing can be reported at exit
        pass


# ---------------------------------------------------------------- events

class _Mark:
    __slots__ = ("done", "time", "state", "skipped")

    def __init__(self, state):
        self.done = threading.Event()
        self.time = None
        self.state = state           # the stream's, whose kept error a skipped mark reports
        self.skipped = False

    def hit(self):
        self.time = time.perf_counter()
        self.done.set()

    def skip(self):
        self.skipped = True
        self.done.set()


class Event:
    """CuPy's `cupy.cuda.Event`: `record`, `synchronize`, `query`/`done`, timing."""

    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False):
        self.block = block
        self.disable_timing = disable_timing
        self._mark = None

    def record(self, stream=None) -> None:
        stream = stream or default_stream
        mark = _Mark(stream._state)
        self._mark = mark
        stream.enqueue(mark.hit, on_skip=mark.skip, any_thread=True)

    def _wait_in(self, stream) -> None:
        mark = self._mark
        if mark is not None:
            stream.enqueue(mark.done.wait, any_thread=True)

    def query(self) -> bool:
        mark = self._mark
        return mark is None or mark.done.is_set()

    @property
    def done(self) -> bool:
        return self.query()

    def synchronize(self) -> None:
        """Wait for the most recent record; when its stream skipped it after an error, raise
        that error if it has not been reported yet."""
        mark = self._mark
        if mark is None:
            return
        if not mark.done.is_set() and getattr(_local, "state", None) is None:
            with _cv:            # (the work before the record, run here where no worker took it)
                _wait_running_theirs(mark.done.is_set, lambda: (mark.state,))
        mark.done.wait()
        if mark.skipped:
            with _cv:
                err = mark.state.take_error()
            if err is not None:
                raise err

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
