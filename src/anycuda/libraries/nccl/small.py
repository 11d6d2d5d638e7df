"""Small collectives between processes: MPI point-to-point messages in algorithms of anycuda's
own, which the C front of libnccl (front.c) runs the same way, message for message,
so ranks where one answers a call in C and another in Python still meet.

Why not MPI's collectives for these: the C front starts an operation on the caller's thread and
must be able to stop waiting for its peers after some microseconds, leaving the rest to the
stream's worker, so the operation must be non-blocking; MPI's non-blocking all-reduce of 8 bytes
costs 2.3x its blocking one (0.63 against 0.27 us, Open MPI 5, two ranks), a pair of
point-to-point messages 0.17 us (NOTES "NCCL over MPI").

Every small operation of a communicator takes the next number of the communicator's count
(`Shared.seq`, which the C front counts too) at its call, in program order, which every rank
shares; its messages carry a tag made from it, so operations posted in another order (two
streams' workers) never take each other's messages. Algorithms, for n ranks and p the largest
power of two <= n:
  AllReduce      recursive doubling; ranks p.. first hand their values to rank r - p and get
                 the result back. Each step is op(lower rank's values, higher rank's), so
                 partners hold the same bits after it.
  Broadcast      the root sends to every rank.
  Reduce         every rank sends to the root, which folds the values in rank order.
  AllGather      every rank sends its block to every other.
  ReduceScatter  every rank sends its block j to rank j, which folds them in rank order.
Values travel in the compute type (types.compute: float32 for half, bfloat16 and fp8), an
average or PreMulSum scaled on each rank before it is sent, as NCCL scales them."""
from __future__ import annotations

import ctypes

import numpy as np

from . import reduction, types

SMALL_BYTES = 512 << 10       # an operation moving at most this much per rank is small (measured: NOTES)
KINDS = ("AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter")
TAG_BASE, TAG_SPAN = 0x1000, 0x4000     # tags 4096..20479: below MPI's guaranteed 32767, apart from Send/Recv's
MAX_RANKS = 64                # the C front's request table holds two per peer


class Shared(ctypes.Structure):
    """A communicator's state that the C front reads and counts in (front.c's
    anycuda_nccl_shared, field for field)."""
    _fields_ = [("handle", ctypes.c_uint64), ("mpi_comm", ctypes.c_void_p), ("rank", ctypes.c_int),
                ("nranks", ctypes.c_int), ("seq", ctypes.c_uint64), ("enabled", ctypes.c_int),
                ("answered", ctypes.c_uint64),      # small operations the C front finished itself
                ("device", ctypes.c_int), ("error", ctypes.c_int),   # the communicator's device, MPI's error in
                ("threaded", ctypes.c_uint64)]      # large.c's thread, and the large operations that thread ran

    def number(self, kind: str, count: int, dtype: int) -> int:
        """The next small-operation number for a call the Python answers (-1: not small)."""
        if not applies(kind, count, dtype, self.nranks):
            return -1
        seq, self.seq = self.seq, self.seq + 1
        return seq


def applies(kind: str, count: int, dtype: int, nranks: int) -> bool:
    """Whether an operation is small (the same answer on every rank: nothing local decides)."""
    if kind not in KINDS or nranks > MAX_RANKS or count <= 0:
        return False
    blocks = nranks if kind in ("AllGather", "ReduceScatter") else 1
    return count * blocks * types.storage(dtype).itemsize <= SMALL_BYTES


def tag(seq: int) -> int:
    return TAG_BASE + seq % TAG_SPAN


def largest_power_of_two(n: int) -> int:
    return 1 << (n.bit_length() - 1)


class _Messages:
    """One operation's messages: posted as the algorithm goes, waited for together."""

    def __init__(self, comm, seq: int, call, wait):
        self.comm, self.tag, self.call, self.wait_for = comm, tag(seq), call, wait
        self.pending = []

    def send(self, values: np.ndarray, peer: int) -> None:
        self.pending.append(self.call(self.comm.Isend, np.ascontiguousarray(values), peer, self.tag))

    def receive(self, like: np.ndarray, peer: int) -> np.ndarray:
        into = np.empty_like(like)
        self.pending.append(self.call(self.comm.Irecv, into, peer, self.tag))
        return into

    def wait(self) -> None:
        self.wait_for(self.pending)
        self.pending = []


def _all_reduce(m: _Messages, values, fold, rank: int, n: int) -> np.ndarray:
    p = largest_power_of_two(n)
    if rank >= p:                              # hand over, then get the result back
        m.send(values, rank - p)
        result = m.receive(values, rank - p)
        m.wait()
        return result
    if rank + p < n:
        theirs = m.receive(values, rank + p)
        m.wait()
        values = reduction.folded(fold, [values, theirs])
    mask = 1
    while mask < p:
        partner = rank ^ mask
        m.send(values, partner)
        theirs = m.receive(values, partner)
        m.wait()
        values = reduction.folded(fold, [values, theirs] if rank < partner else [theirs, values])
        mask <<= 1
    if rank + p < n:
        m.send(values, rank + p)
        m.wait()
    return values


def run(op, comm, call, wait) -> None:
    """One small operation `op` (operations.Operation with its seq) on MPI communicator `comm`;
    `call(fn, *args)` calls MPI, `wait(requests)` waits for requests (the transport's, mpi.py)."""
    m = _Messages(comm, op.seq, call, wait)
    rank, n, c = op.rank, comm.Get_size(), op.count
    if op.kind == "Broadcast":
        if rank == op.root:
            data = op.view(op.send, c).copy()
            for r in range(n):
                if r != rank:
                    m.send(data, r)
            m.wait()
            op.view(op.recv, c)[:] = data
        else:
            got = m.receive(op.view(op.recv, c), op.root)
            m.wait()
            op.view(op.recv, c)[:] = got
        return
    if op.kind == "AllGather":
        mine = op.view(op.send, c).copy()
        got = [mine if r == rank else m.receive(mine, r) for r in range(n)]
        for r in range(n):
            if r != rank:
                m.send(mine, r)
        m.wait()
        op.view(op.recv, n * c)[:] = np.concatenate(got)
        return
    total = n * c if op.kind == "ReduceScatter" else c
    mine = types.widen(op.dtype, op.view(op.send, total)).copy()
    values, built_in, after = reduction.as_built_in(op.op, op.dtype, mine, n, op.comm.created)
    fold = reduction.FOLDS[built_in]
    if op.kind == "AllReduce":
        result = _all_reduce(m, values, fold, rank, n)
    elif op.kind == "Reduce":
        if rank != op.root:
            m.send(values, op.root)
            m.wait()
            return
        blocks = [values if r == rank else m.receive(values, r) for r in range(n)]
        m.wait()
        result = reduction.folded(fold, blocks)
    else:                                      # ReduceScatter
        mine = values[rank * c:(rank + 1) * c]
        blocks = [mine if r == rank else m.receive(mine, r) for r in range(n)]
        for r in range(n):
            if r != rank:
                m.send(values[r * c:(r + 1) * c], r)
        m.wait()
        result = reduction.folded(fold, blocks)
    if after is not None:
        result = after(result)
    types.narrow(op.dtype, op.view(op.recv, c), result)
