"""The in-process transport: ranks that are devices of one process (ncclCommInitAll, or
ncclCommInitRank from several host threads) share memory, so the last rank to reach a
collective computes it for all (operations.run_collective) and the others only wait.

Posting never blocks (`post`); waiting is separate (`Operation.done`), so one stream's work
may post the parts of several ranks before waiting for any (a group over ranks whose work
shares a stream cannot deadlock). The k-th collective of every rank meet; a send and a receive
meet in order per (sender, receiver) pair."""
from __future__ import annotations

import collections
import threading

from . import operations


class LocalGroup:
    """What the ranks of one in-process communicator share."""

    def __init__(self, nranks: int, members=None):
        self.nranks = nranks
        self.members = range(nranks) if members is None else members    # the ranks that post here
        self._lock = threading.Lock()
        self._next = [0] * nranks                     # each rank's next collective number
        self._meetings = {}                           # collective number -> parts by rank
        self._sends = collections.defaultdict(collections.deque)     # (src, dst) -> posted sends
        self._recvs = collections.defaultdict(collections.deque)

    aborted = None           # the error every posted and later operation finishes with, once aborted

    def abort(self, why: str) -> None:
        """ncclCommAbort of one rank: what waits for a peer finishes with an error, now and later
        (a rank that will never come cannot leave the others waiting)."""
        from .status import NcclError, Result
        error = NcclError(Result.RemoteError, why)
        with self._lock:
            self.aborted = error
            waiting = [p for parts in self._meetings.values() for p in parts if p is not None]
            waiting += [p for q in (*self._sends.values(), *self._recvs.values()) for p in q]
            self._meetings.clear()
            self._sends.clear()
            self._recvs.clear()
        for op in waiting:
            op.finish(error)

    def post(self, op: operations.Operation) -> None:
        if self.aborted is not None:
            op.finish(self.aborted)
            return
        if op.kind in operations.POINT_TO_POINT:
            self._post_transfer(op)
        else:
            self._post_collective(op)

    def _post_collective(self, op) -> None:
        with self._lock:
            number = self._next[op.rank]
            self._next[op.rank] += 1
            parts = self._meetings.setdefault(number, [None] * self.nranks)
            parts[op.rank] = op
            complete = all(parts[r] is not None for r in self.members)
            if complete:
                del self._meetings[number]
        if complete:
            self.run_collective(parts)

    def run_collective(self, parts: list) -> None:
        """Every member's part has come (the last one's thread runs this)."""
        operations.run_collective(parts)

    def _post_transfer(self, op) -> None:
        pair = (op.rank, op.root) if op.kind == "Send" else (op.root, op.rank)
        with self._lock:
            mine, theirs = (self._sends, self._recvs) if op.kind == "Send" else (self._recvs, self._sends)
            if theirs[pair]:
                other = theirs[pair].popleft()
            else:
                mine[pair].append(op)
                return
        send, recv = (op, other) if op.kind == "Send" else (other, op)
        operations.run_transfer(send, recv)


class Rendezvous:
    """Ranks of one process joining a communicator by its unique id (ncclCommInitRank from
    several threads): each waits until all `nranks` have come, then all share one LocalGroup."""

    _lock = threading.Condition()
    _joining = {}            # id key -> (nranks, set of ranks come, LocalGroup)

    @classmethod
    def join(cls, key: bytes, nranks: int, rank: int) -> LocalGroup:
        from .status import NcclError, Result
        with cls._lock:
            entry = cls._joining.setdefault(key, (nranks, set(), LocalGroup(nranks)))
            want, come, group = entry
            if want != nranks:
                raise NcclError(Result.InvalidArgument, f"rank {rank} says {nranks} ranks, an earlier one {want}")
            if rank in come:
                raise NcclError(Result.InvalidArgument, f"rank {rank} joined this unique id twice")
            come.add(rank)
            cls._lock.notify_all()
            while len(come) < nranks:
                cls._lock.wait()
            if cls._joining.get(key) is entry:
                del cls._joining[key]
            return group
