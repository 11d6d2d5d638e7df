"""The MPI transport: ranks that are processes started by an MPI launcher (mpirun, mpiexec)
move data through the MPI library, by mpi4py, each stream's work in its own worker thread.
Where MPI may be called from any thread (MPI_THREAD_MULTIPLE: what anycuda asks for when it
starts MPI itself, and what `anycuda run` asks the program's MPI_Init for) collectives are MPI's blocking calls, its tuned algorithms; where it may not,
every call is non-blocking and polled under one lock, so one stream's transfer waiting for a
peer never keeps another stream's from progressing. Large all-reduces and broadcasts go in
chunks (pipelined, IN_FLIGHT at a time, in the polled form).

A communicator's processes find each other by its unique id, which names the MPI world rank
of the process that made it (`id_root`): every member tells that process its NCCL rank, it
answers every member with the world ranks in NCCL rank order, and the members make their own
MPI communicator of just them (MPI_Comm_create_group: only members take part). The id's
maker must be a member. Ranks on one machine exchange through the MPI library's own shared
memory transport.

MPI libraries started with MPI_Init (not MPI_Init_thread(MPI_THREAD_MULTIPLE)) may not be
called from two threads at once: then anycuda's calls hold one lock (the program's own MPI
calls on other threads are its business)."""
from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
import weakref

import numpy as np

from . import reduction, small, types
from .status import NcclError, Result

# the variables launchers set in the processes they start (Open MPI, PMIx, MPICH/Hydra, Slurm's PMI)
LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS")
CHUNK_BYTES = 16 << 20            # an all-reduce or broadcast larger than this goes in pieces (NOTES: up to
                                  # 16 MB MPI's own call is as fast as pieces, from 32 MB pieces are 2x faster)
IN_FLIGHT = 2                     # pieces in flight at once
SPIN_SECONDS = 0.05               # a wait tests without pausing this long first
_TAG_BASE = 0x5A00                # tags of the joining messages, below MPI's guaranteed 32767

_lock = threading.RLock()
_serialise = [None]               # whether calls must hold _lock (known once MPI is started)


def launched() -> bool:
    """Whether this process was started by an MPI launcher."""
    return any(v in os.environ for v in LAUNCHER_VARIABLES)


_started = []                     # mpi4py's MPI once started (asked for on every call)


def mpi():
    """mpi4py's MPI, started (anycuda starts it with MPI_THREAD_MULTIPLE if the program has not)."""
    if _started:
        return _started[0]
    if not launched():
        raise NcclError(Result.SystemError, "ranks in several processes exchange data through MPI: start the "
                        "processes with mpirun or mpiexec (this one was not started by an MPI launcher)")
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise NcclError(Result.SystemError, "ranks in several processes exchange data through MPI: install "
                        f"mpi4py (pip install mpi4py) and start the processes with mpirun ({e})") from None
    if not MPI.Is_initialized():
        MPI.Init_thread(MPI.THREAD_MULTIPLE)
    if _serialise[0] is None:
        _serialise[0] = MPI.Query_thread() < MPI.THREAD_MULTIPLE
    _started.append(MPI)
    return MPI


def serialised() -> bool:
    """Whether anycuda's MPI calls must take turns (MPI not started with MPI_THREAD_MULTIPLE)."""
    return bool(_serialise[0])


@contextlib.contextmanager
def _held():
    if _serialise[0]:
        with _lock:
            yield
    else:
        yield


def call(fn, *args):
    with _held():
        return fn(*args)


def wait(requests) -> None:
    """Poll requests to completion, never holding the lock while waiting. MPI progresses a
    non-blocking collective only inside its calls, so the first SPIN_SECONDS test without
    pausing (as MPI's own blocking calls do); a longer wait then pauses between tests."""
    MPI = mpi()
    started = time.perf_counter()
    pause = 0.0
    while True:
        with _held():
            if MPI.Request.Testall(requests):
                return
        if time.perf_counter() - started > SPIN_SECONDS:
            time.sleep(pause)
            pause = min(pause + 1e-5, 1e-3)


def collective(comm, name: str, *args) -> None:
    """MPI collective `name` (mpi4py's name of the blocking call): the blocking call itself when
    MPI may be called from any thread (MPI's own tuned algorithms), else its non-blocking form
    polled (a blocking call would hold the lock until every peer came)."""
    if _serialise[0]:
        wait([call(getattr(comm, "I" + name[0].lower() + name[1:]), *args)])
    else:
        getattr(comm, name)(*args)


def world_rank() -> int:
    return mpi().COMM_WORLD.Get_rank()


def _tag(key: bytes) -> int:
    return _TAG_BASE + int.from_bytes(hashlib.sha256(key).digest()[:2], "little") % 0x1000


_rounds = {}                      # unique id key -> its joining round in the id maker's process (_Round)
_rounds_lock = threading.Lock()


class _Round:
    """One joining by a unique id in the id maker's process: the first of its ranks to come
    collects; the others pass. The round ends once every local rank has passed its check: a
    rank that posted its message but was slow to reach the check, after the collector had
    already finished, took the round for a new one and waited for messages that never came."""

    def __init__(self):
        self.passed = 0           # this process's ranks that came and did not collect
        self.others = None        # how many there are, once the collector knows

    def ended(self) -> bool:
        return self.others is not None and self.passed >= self.others


def exchange(key: bytes, id_root: int, nranks: int, rank: int) -> list:
    """The MPI world rank of every NCCL rank joining by unique id `key` (one entry per NCCL rank;
    a process holding several ranks appears several times). Every member tells the id's maker
    its rank; one thread of the maker's process collects them and answers every member."""
    MPI = mpi()
    world, me, tag = MPI.COMM_WORLD, MPI.COMM_WORLD.Get_rank(), _tag(key)
    if not 0 <= id_root < world.Get_size():
        raise NcclError(Result.InvalidArgument, f"the unique id names MPI rank {id_root} of {world.Get_size()}")
    mine = np.array([rank, nranks, me], np.int64)
    requests = [call(world.Isend, mine, id_root, tag)]
    if me == id_root:
        requests += _collect_or_pass(world, key, tag, nranks, me)
    table = np.empty(nranks, np.int64)
    requests.append(call(world.Irecv, table, id_root, tag + 1))
    wait(requests)
    return [int(w) for w in table]


def _collect_or_pass(world, key: bytes, tag: int, nranks: int, me: int) -> list:
    """In the id maker's process: the collector's requests, or none for the ranks that pass."""
    with _rounds_lock:
        joining = _rounds.get(key)
        if joining is not None:
            joining.passed += 1
            if joining.ended():
                del _rounds[key]
            return []
        joining = _rounds[key] = _Round()
    others = 0
    try:
        requests, table = _collect(world, tag, nranks)
        others = sum(1 for w in table if w == me) - 1
        return requests
    finally:
        with _rounds_lock:
            joining.others = others
            if joining.ended():
                del _rounds[key]


def _collect(world, tag: int, nranks: int) -> tuple:
    """The id maker's part: every member's joining message, then the table sent to each (the
    sends' requests, and the table)."""
    table = np.full(nranks, -1, np.int64)
    for _ in range(nranks):
        got = np.empty(3, np.int64)
        wait([call(world.Irecv, got, mpi().ANY_SOURCE, tag)])
        if got[1] != nranks or not 0 <= got[0] < nranks or table[got[0]] >= 0:
            raise NcclError(Result.InvalidUsage, f"MPI rank {got[2]} joins as rank {got[0]} of {got[1]}")
        table[got[0]] = got[2]
    return [call(world.Isend, table, int(w), tag + 1) for w in table], table


def communicator(key: bytes, processes: list):
    """An MPI communicator of the world ranks `processes`, in that order (every one of them calls
    this once: MPI_Comm_create_group)."""
    world = mpi().COMM_WORLD
    with _held():
        group = world.Get_group().Incl(processes)
        comm = world.Create_group(group, _tag(key))
        group.Free()
    return comm


def split(comm, color: int, key: int):
    """MPI_Comm_split of a communicator's MPI communicator (None for NCCL_SPLIT_NOCOLOR)."""
    MPI = mpi()
    with _held():
        new = comm.Split(MPI.UNDEFINED if color < 0 else color, key)
    return None if new == MPI.COMM_NULL else new


def free(comm) -> None:
    MPI = mpi()
    if not MPI.Is_finalized():
        with _held():
            comm.Free()


def _overlap(op, sent: int, received: int) -> bool:
    """Whether the first `sent` elements of the send buffer meet the first `received` of the receive buffer."""
    size = types.storage(op.dtype).itemsize
    return op.send < op.recv + received * size and op.recv < op.send + sent * size


def _readable(op, count: int, received: int) -> np.ndarray:
    """The `count` elements MPI reads from the send buffer: the buffer itself, or a copy where it
    overlaps the `received` elements written to the receive buffer. (A copy made per call is
    new memory to MPI each time: a 2-8 MB all-gather took 3-4x as long from one.)"""
    view = op.view(op.send, count)
    return view.copy() if received and _overlap(op, count, received) else view


MPI_OPS = {reduction.RedOp.Sum: "SUM", reduction.RedOp.Prod: "PROD", reduction.RedOp.Max: "MAX",
            reduction.RedOp.Min: "MIN"}


class MpiGroup:
    """One communicator's transport between processes."""

    def __init__(self, comm):
        self.comm = comm
        self.nranks = comm.Get_size()
        self.shared = small.Shared(mpi_comm=mpi()._handleof(comm), rank=comm.Get_rank(), nranks=self.nranks)
        # MPI's communicator is freed once nothing holds this transport: the NCCL communicator
        # destroyed and the work queued on it done (not at exit: MPI may be finalized by then)
        weakref.finalize(self, free, comm).atexit = False

    def number(self, kind: str, count: int, dtype: int) -> int:
        return self.shared.number(kind, count, dtype)

    # ---- reductions: widened, pre-scaled for averages and PreMulSum, reduced by MPI's SUM
    def _prepared(self, op, values: np.ndarray):
        """(values to hand MPI, MPI operation, what to do to the reduced values after)."""
        values, built_in, after = reduction.as_built_in(op.op, op.dtype, values, self.nranks, op.comm.created)
        return values, getattr(mpi(), MPI_OPS[built_in]), after

    def _direct(self, op) -> bool:
        """Whether MPI can reduce the stored elements themselves (no widening, no scaling)."""
        return op.dtype not in types.WIDENED and op.op in MPI_OPS

    def _all_reduce_in_place(self, op) -> None:
        """An all-reduce MPI does on the buffers themselves, in pieces (MPI_IN_PLACE when the
        program's send and receive buffers are one)."""
        MPI = mpi()
        mpi_op = getattr(MPI, MPI_OPS[op.op])
        recv = op.view(op.recv, op.count)
        if op.send == op.recv:
            self._pieces("Allreduce", lambda _a, b: (MPI.IN_PLACE, b, mpi_op), recv, recv)
        else:
            self._pieces("Allreduce", lambda a, b: (a, b, mpi_op), op.view(op.send, op.count), recv)

    def _reduce_into(self, op, count: int, root: int = None, scatter: bool = False) -> None:
        MPI, dt = mpi(), op.dtype
        if root is None and not scatter and self._direct(op):
            self._all_reduce_in_place(op)
            return
        total = count * self.nranks if scatter else count
        if self._direct(op) and not _overlap(op, total, count) and (root is None or op.rank == root):
            # MPI reduces the stored elements straight into the receive buffer
            mpi_op = getattr(MPI, MPI_OPS[op.op])
            send, recv = op.view(op.send, total), op.view(op.recv, count)
            if scatter:
                collective(self.comm, "Reduce_scatter_block", send, recv, mpi_op)
            else:
                collective(self.comm, "Reduce", send, recv, mpi_op, root)
            return
        values = types.widen(dt, op.view(op.send, total))
        values, mpi_op, after = self._prepared(op, values)
        result = np.empty(count, values.dtype)
        if scatter:
            collective(self.comm, "Reduce_scatter_block", values, result, mpi_op)
        elif root is None:
            self._pieces("Allreduce", lambda a, b: (a, b, mpi_op), values, result)
        else:
            collective(self.comm, "Reduce", values, result, mpi_op, root)
            if op.rank != root:
                return
        if after is not None:
            result = after(result)
        types.narrow(dt, op.view(op.recv, count), result)

    def _pieces(self, name: str, arguments, send: np.ndarray, recv: np.ndarray) -> None:
        """Collective `name` over pieces of CHUNK_BYTES, its arguments(send piece, recv piece):
        non-blocking, IN_FLIGHT at a time, where MPI calls are serialised; else one after another."""
        step = max(1, CHUNK_BYTES // max(1, send.itemsize))
        pieces = [(send[at:at + step], recv[at:at + step]) for at in range(0, len(send), step)]
        if not _serialise[0]:
            for a, b in pieces:
                getattr(self.comm, name)(*arguments(a, b))
            return
        start = getattr(self.comm, "I" + name[0].lower() + name[1:])
        pending = []
        for a, b in pieces:
            pending.append(call(start, *arguments(a, b)))
            if len(pending) >= IN_FLIGHT:
                wait(pending[:1])
                pending = pending[1:]
        wait(pending)

    # ---- the collectives
    def AllReduce(self, op):
        self._reduce_into(op, op.count)

    def Reduce(self, op):
        self._reduce_into(op, op.count, root=op.root)

    def ReduceScatter(self, op):
        self._reduce_into(op, op.count, scatter=True)

    def Broadcast(self, op):
        buf = op.view(op.recv, op.count)
        if op.rank == op.root and op.send != op.recv:
            buf[:] = op.view(op.send, op.count)
        raw = buf.view(np.uint8)
        self._pieces("Bcast", lambda a, _b: (a, op.root), raw, raw)

    def AllGather(self, op):
        n, c = self.nranks, op.count
        recv = op.view(op.recv, n * c).view(np.uint8)
        if op.send == op.recv + op.rank * c * types.storage(op.dtype).itemsize:
            collective(self.comm, "Allgather", mpi().IN_PLACE, recv)
        else:
            collective(self.comm, "Allgather", _readable(op, c, n * c).view(np.uint8), recv)

    def AlltoAll(self, op):
        n, c = self.nranks, op.count
        collective(self.comm, "Alltoall", _readable(op, n * c, n * c).view(np.uint8),
                   op.view(op.recv, n * c).view(np.uint8))

    def Gather(self, op):
        n, c = self.nranks, op.count
        root = op.rank == op.root
        into = op.view(op.recv, n * c).view(np.uint8) if root else None
        collective(self.comm, "Gather", _readable(op, c, n * c if root else 0).view(np.uint8), into, op.root)

    def Scatter(self, op):
        n, c = self.nranks, op.count
        sent = _readable(op, n * c, c).view(np.uint8) if op.rank == op.root else None
        collective(self.comm, "Scatter", sent, op.view(op.recv, c).view(np.uint8), op.root)

    # ---- a stream's operations of this communicator
    def run(self, ops: list) -> None:
        """Collectives in order (every rank issues them in the same order), then the group's
        sends and receives all at once (so their order among ranks cannot deadlock)."""
        transfers = []
        for op in ops:
            try:
                if op.kind == "Send":
                    transfers.append(call(self.comm.Isend, op.view(op.send, op.count).view(np.uint8), op.root, 0x77))
                elif op.kind == "Recv":
                    transfers.append(call(self.comm.Irecv, op.view(op.recv, op.count).view(np.uint8), op.root, 0x77))
                elif op.seq >= 0:
                    small.run(op, self.comm, call, wait)
                elif op.count:
                    getattr(self, op.kind)(op)
            except NcclError:
                raise
            except Exception as e:        # noqa: BLE001 -- MPI's failure: the communicator's asynchronous error
                raise NcclError(Result.RemoteError, f"{op.kind} through MPI: {e}") from e
        if transfers:
            wait(transfers)

