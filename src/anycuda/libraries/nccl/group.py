"""ncclGroupStart/End and the queueing of operations on their CUDA streams.

Outside a group an operation is queued at once; inside one (per host thread, nested groups
counting as one) operations wait for the outermost ncclGroupEnd, which queues them per stream:
one piece of work per stream posts all of that stream's operations, then waits for them all,
so the group completes as one and ranks whose work shares a stream cannot block each other.
Communicator creation inside a group (ncclCommInitRank for several devices from one thread,
ncclCommSplit) runs at ncclGroupEnd, each in its own thread, since each waits for the others.

A failure found while the work runs (ranks disagreeing, MPI failing) is kept as the
communicator's asynchronous error (ncclCommGetAsyncError) and said once on stderr; the CUDA
stream goes on, as a GPU's would after a failed NCCL kernel."""
from __future__ import annotations

import contextlib
import sys
import threading

from . import local
from ...driver import api
from ...runtime.device import Device
from .status import NcclError, Result, note

_local = threading.local()        # .depth, .operations, .deferred


def _state():
    if not hasattr(_local, "depth"):
        _local.depth, _local.operations, _local.deferred = 0, [], []
    return _local


def start() -> None:
    _state().depth += 1


def end() -> None:
    st = _state()
    if st.depth == 0:
        raise NcclError(Result.InvalidUsage, "ncclGroupEnd without ncclGroupStart")
    st.depth -= 1
    if st.depth:
        return
    operations, deferred = st.operations, st.deferred
    st.operations, st.deferred = [], []
    _run_deferred(deferred)
    _queue(operations)


def in_group() -> bool:
    return _state().depth > 0


def add(op) -> None:
    """An operation called now: queued, or kept for the group's end."""
    if in_group():
        _state().operations.append(op)
    else:
        _queue([op])


def defer(task) -> bool:
    """Keep a communicator-creating `task()` for the group's end; False outside a group."""
    if not in_group():
        return False
    _state().deferred.append(task)
    return True


def _run_deferred(tasks) -> None:
    errors = []

    def run(task):
        try:
            task()
        except BaseException as e:      # noqa: BLE001 -- answered by ncclGroupEnd
            errors.append(e)
    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


# 0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD: handles whose stream depends on the current device
_DEFAULT_STREAMS = (0, 1, 2)


def _queue(operations) -> None:
    """Each stream's operations as one piece of work on it. A default-stream handle means
    that stream of the communicator's device, as NCCL runs each rank's work in its device's
    context whatever device the caller has current (CuPy's ncclCommInitAll program passes
    stream 0 for every device; queued on the current device's stream, rank 1's all-reduce
    result was overwritten by a fill still pending on device 1)."""
    by_stream = {}
    for op in operations:
        by_stream.setdefault((op.stream, op.comm.device if op.stream in _DEFAULT_STREAMS else None), []).append(op)
    for (stream, _), ops in by_stream.items():
        submit(ops[0].comm, stream, _work, ops)


def submit(comm, stream: int, fn, *args, on_skip=None) -> None:
    """`fn(*args)` queued on `stream` for communicator `comm` (a default stream: its device's)."""
    if stream not in _DEFAULT_STREAMS:
        api.submit(stream, fn, *args, on_skip=on_skip)
        return
    with _current_device(comm.device):
        api.submit(stream, fn, *args, on_skip=on_skip)


@contextlib.contextmanager
def _current_device(device: int):
    """`device` current for the calling thread: its primary context, and the Python API's choice."""
    api.cuCtxPushCurrent(api.cuDevicePrimaryCtxRetain(device))
    try:
        with Device(device):
            yield
    finally:
        api.cuCtxPopCurrent()


_said = set()


def fail(comm, kind: str, error: BaseException) -> None:
    """A failure found while an operation ran: the communicator's asynchronous error, said once."""
    nccl = error if isinstance(error, NcclError) else NcclError(Result.InternalError,
                                                                f"{type(error).__name__}: {error}")
    comm.fail(nccl)
    note(str(nccl))
    if str(nccl) not in _said:
        _said.add(str(nccl))
        sys.stderr.write(f"anycuda: nccl{kind}: {nccl}\n")


HINT_SECONDS = 10.0        # a rank waiting this long for its peers says what may hold them


def _wait_for_peers(op) -> None:
    if op.done.wait(HINT_SECONDS):
        return
    hint = (f"anycuda: nccl{op.kind} of rank {op.rank} has waited {HINT_SECONDS:g} s for the other ranks of its "
            "communicator. Ranks of one process whose work shares a stream (one device's default stream "
            "too) wait for each other forever: give each rank a stream of its own, or call the ranks' "
            "collectives in one ncclGroupStart/End; a rank that failed before its call leaves the others "
            "waiting too\n")
    if hint not in _said:
        _said.add(hint)
        sys.stderr.write(hint)
    op.done.wait()


def _work(ops) -> None:
    """One stream's operations of a group: in-process ones posted (never blocking), MPI ones
    run per communicator, then every posted one waited for."""
    posted, remote = [], {}
    for op in ops:             # a graph replays the same operations: each run starts unfinished
        op.done.clear()
        op.error = None
    for op in ops:
        if isinstance(op.comm.transport, local.LocalGroup):
            op.comm.transport.post(op)
            posted.append(op)
        else:
            remote.setdefault(op.comm, []).append(op)
    for comm, theirs in remote.items():
        try:
            comm.transport.run(theirs)
        except BaseException as e:      # noqa: BLE001
            fail(comm, theirs[0].kind, e)
    for op in posted:
        _wait_for_peers(op)
        if op.error is not None:
            fail(op.comm, op.kind, op.error)
