"""One rank's part of a collective or a point-to-point transfer (`Operation`), and what a
collective computes from every rank's part when all are in one address space (the in-process
transport, and the check that the parts agree)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from . import reduction, types
from ..memory import array
from .status import NcclError, Result

COLLECTIVES = ("AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AlltoAll", "Gather", "Scatter")
POINT_TO_POINT = ("Send", "Recv")


@dataclass(eq=False)
class Operation:
    kind: str                # one of COLLECTIVES or POINT_TO_POINT
    comm: object             # communicator.Communicator
    send: int                # device addresses (0 when the rank has none)
    recv: int
    count: int               # elements per rank, as each function's count parameter means it
    dtype: int
    op: int = 0
    root: int = 0            # the root of a rooted collective, the peer of Send/Recv
    stream: int = 0
    seq: int = -1            # its number among the communicator's small operations (small.py), or -1
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException = None

    @property
    def rank(self) -> int:
        return self.comm.rank

    def view(self, address: int, count: int, offset: int = 0) -> np.ndarray:
        dt = types.storage(self.dtype)
        return array(address + offset * dt.itemsize, count, dt)

    def finish(self, error: BaseException = None) -> None:
        self.error = error
        self.done.set()

    def signature(self) -> tuple:
        """What every rank of a collective must agree on."""
        rooted = self.kind in ("Broadcast", "Reduce", "Gather", "Scatter")
        return self.kind, self.count, self.dtype, self.op, self.root if rooted else 0


def agree(parts: list) -> None:
    first = parts[0].signature()
    for p in parts[1:]:
        if p.signature() != first:
            raise NcclError(Result.InvalidUsage, f"ranks called different collectives at the same point: "
                            f"rank 0 {first}, rank {p.rank} {p.signature()}")


def _reduced(parts: list, count: int) -> np.ndarray:
    first = parts[0]
    widened = [types.widen(p.dtype, p.view(p.send, count)) for p in parts]
    return reduction.reduce(widened, first.op, first.dtype, first.comm.created, len(parts))


def _write(p: Operation, values, count: int, offset: int = 0) -> None:
    types.narrow(p.dtype, p.view(p.recv, count, offset), values)


def _all_reduce(parts, n, c):
    result = _reduced(parts, c)
    for p in parts:
        _write(p, result, c)


def _reduce(parts, n, c):
    result = _reduced(parts, c)
    root = parts[parts[0].root]
    _write(root, result, c)


def _broadcast(parts, n, c):
    root = parts[parts[0].root]
    data = root.view(root.send, c).copy()
    for p in parts:
        p.view(p.recv, c)[:] = data


def _all_gather(parts, n, c):
    joined = np.concatenate([p.view(p.send, c) for p in parts])
    for p in parts:
        p.view(p.recv, n * c)[:] = joined


def _reduce_scatter(parts, n, c):
    result = _reduced(parts, n * c)
    for p in parts:
        _write(p, result[p.rank * c:(p.rank + 1) * c], c)


def _all_to_all(parts, n, c):
    sent = [p.view(p.send, n * c).copy() for p in parts]
    for p in parts:
        p.view(p.recv, n * c)[:] = np.concatenate([s[p.rank * c:(p.rank + 1) * c] for s in sent])


def _gather(parts, n, c):
    root = parts[parts[0].root]
    root.view(root.recv, n * c)[:] = np.concatenate([p.view(p.send, c) for p in parts])


def _scatter(parts, n, c):
    root = parts[parts[0].root]
    data = root.view(root.send, n * c).copy()
    for p in parts:
        p.view(p.recv, c)[:] = data[p.rank * c:(p.rank + 1) * c]


_SEMANTICS = {"AllReduce": _all_reduce, "Broadcast": _broadcast, "Reduce": _reduce, "AllGather": _all_gather,
              "ReduceScatter": _reduce_scatter, "AlltoAll": _all_to_all, "Gather": _gather, "Scatter": _scatter}


def run_collective(parts: list) -> None:
    """Every rank's part of one collective (rank order), in one address space: the results
    written, every part finished (with the error, if the parts disagree or a step fails)."""
    try:
        agree(parts)
        if parts[0].count:
            _SEMANTICS[parts[0].kind](parts, len(parts), parts[0].count)
        error = None
    except BaseException as e:          # noqa: BLE001 -- every rank waiting on it must hear it
        error = e
    for p in parts:
        p.finish(error)


def run_transfer(send: Operation, recv: Operation) -> None:
    """A matched ncclSend and ncclRecv in one address space."""
    error = None
    try:
        size_s = send.count * types.storage(send.dtype).itemsize
        size_r = recv.count * types.storage(recv.dtype).itemsize
        if size_s != size_r:
            raise NcclError(Result.InvalidUsage, f"rank {send.rank} sends {size_s} bytes, rank {recv.rank} "
                            f"receives {size_r}")
        if size_s:
            array(recv.recv, size_r, np.uint8)[:] = array(send.send, size_s, np.uint8)
    except BaseException as e:          # noqa: BLE001
        error = e
    send.finish(error)
    recv.finish(error)
