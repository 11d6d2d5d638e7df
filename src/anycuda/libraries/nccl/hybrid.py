"""Communicators whose ranks are spread over processes with several ranks in some of them (two
processes of an MPI launch, each driving two devices): the ranks of one process meet in memory,
as the in-process transport's do (local.LocalGroup), and the last of them to come does the
process's part of the collective through MPI, with one MPI rank per process:

  AllReduce, Reduce, ReduceScatter  this process's contributions folded, then MPI's Allreduce
                                    or Reduce of the partial results (ReduceScatter: an
                                    all-reduce of the whole vector, each rank keeping its block)
  Broadcast, Scatter                the root's buffer broadcast from its process
  AllGather, AlltoAll, Gather       every process's ranks' buffers gathered (Allgatherv), each
                                    rank taking what NCCL gives it

ncclCommSplit: the process's ranks meet, every process's colors and keys are gathered, and each
new communicator gets the transport its ranks' places need (in memory, a rank per process, or
this one again).

A send to or a receive from a rank of another process is MPI's point-to-point message, tagged
with the pair of ranks, finished by a thread of its own (posting never blocks, as the group's
work needs). Averages and PreMulSum: each contribution scaled first, as everywhere
(reduction.as_built_in)."""
from __future__ import annotations

import hashlib
import threading
import weakref

import numpy as np

from . import local, mpi, operations, reduction, types
from .status import NcclError, Result

MAX_RANKS = 64                   # a transfer's tag names its pair of ranks
_TRANSFER_TAG = 0x6000


class HybridGroup(local.LocalGroup):
    def __init__(self, comm, table: list, processes: list):
        me = mpi.mpi().COMM_WORLD.Get_rank()
        super().__init__(len(table), members=[r for r, w in enumerate(table) if w == me])
        self.comm = comm                                   # one MPI rank per process, in `processes` order
        self.owner = [processes.index(w) for w in table]   # NCCL rank -> its process's MPI rank
        self.ranks_of = [[r for r, w in enumerate(table) if w == p] for p in processes]
        self.table = table
        weakref.finalize(self, mpi.free, comm).atexit = False       # as MpiGroup's

    # ---- collectives: run by the last of this process's ranks to come
    def run_collective(self, parts: list) -> None:
        mine = [parts[r] for r in self.members]
        try:
            operations.agree(mine)
            if mine[0].count:
                getattr(self, "_" + mine[0].kind)(mine, mine[0].count)
            error = None
        except BaseException as e:          # noqa: BLE001 -- every local rank waiting on it must hear it
            error = e
        for p in mine:
            p.finish(error)

    def _partial(self, mine, count: int):
        """(this process's contributions folded, MPI's operation for the partials, what the total needs after)."""
        n = self.nranks
        prepared = [reduction.as_built_in(p.op, p.dtype, types.widen(p.dtype, p.view(p.send, count)).copy(), n,
                                          p.comm.created) for p in mine]
        built_in, after = prepared[0][1], prepared[0][2]
        partial = reduction.folded(reduction.FOLDS[built_in], [values for values, _, _ in prepared])
        return partial, getattr(mpi.mpi(), mpi.MPI_OPS[built_in]), after

    def _total(self, mine, count: int, root: int = None):
        partial, op, after = self._partial(mine, count)
        total = np.empty_like(partial)
        if root is None:
            mpi.collective(self.comm, "Allreduce", partial, total, op)
        else:
            mpi.collective(self.comm, "Reduce", partial, total, op, self.owner[root])
        return after(total) if after is not None else total

    def _AllReduce(self, mine, c):
        total = self._total(mine, c)
        for p in mine:
            types.narrow(p.dtype, p.view(p.recv, c), total)

    def _Reduce(self, mine, c):
        root = mine[0].root
        total = self._total(mine, c, root)
        for p in mine:
            if p.rank == root:
                types.narrow(p.dtype, p.view(p.recv, c), total)

    def _ReduceScatter(self, mine, c):
        total = self._total(mine, self.nranks * c)
        for p in mine:
            types.narrow(p.dtype, p.view(p.recv, c), total[p.rank * c:(p.rank + 1) * c])

    def _broadcast(self, mine, root: int, count: int) -> np.ndarray:
        """The root's first `count` elements of its send buffer, as bytes, in every process."""
        size = types.storage(mine[0].dtype).itemsize
        holder = next((p for p in mine if p.rank == root), None)
        data = (holder.view(holder.send, count).view(np.uint8).copy() if holder is not None
                else np.empty(count * size, np.uint8))
        mpi.collective(self.comm, "Bcast", data, self.owner[root])
        return data

    def _Broadcast(self, mine, c):
        data = self._broadcast(mine, mine[0].root, c)
        for p in mine:
            p.view(p.recv, c).view(np.uint8)[:] = data

    def _Scatter(self, mine, c):
        data = self._broadcast(mine, mine[0].root, self.nranks * c)
        block = len(data) // self.nranks
        for p in mine:
            p.view(p.recv, c).view(np.uint8)[:] = data[p.rank * block:(p.rank + 1) * block]

    def _gathered(self, mine, count: int) -> list:
        """Every rank's first `count` elements of its send buffer, as bytes, by rank."""
        size = count * types.storage(mine[0].dtype).itemsize
        send = np.concatenate([p.view(p.send, count).view(np.uint8) for p in mine])
        counts = [len(ranks) * size for ranks in self.ranks_of]
        into = np.empty(sum(counts), np.uint8)
        mpi.collective(self.comm, "Allgatherv", send, [into, counts])
        by_rank, at = [None] * self.nranks, 0
        for ranks in self.ranks_of:
            for r in ranks:
                by_rank[r], at = into[at:at + size], at + size
        return by_rank

    def _AllGather(self, mine, c):
        whole = np.concatenate(self._gathered(mine, c))
        for p in mine:
            p.view(p.recv, self.nranks * c).view(np.uint8)[:] = whole

    def _Gather(self, mine, c):
        whole = np.concatenate(self._gathered(mine, c))
        for p in mine:
            if p.rank == p.root:
                p.view(p.recv, self.nranks * c).view(np.uint8)[:] = whole

    def _AlltoAll(self, mine, c):
        sent = self._gathered(mine, self.nranks * c)
        block = len(sent[0]) // self.nranks
        for p in mine:
            p.view(p.recv, self.nranks * c).view(np.uint8)[:] = np.concatenate(
                [s[p.rank * block:(p.rank + 1) * block] for s in sent])

    # ---- ncclCommSplit
    def split_groups(self, asked: dict, key: bytes, number: int) -> dict:
        """color -> (old ranks in new rank order, their transport, their key) for the colors of
        this process's ranks, from `asked` (this process's ranks: (color, key)): every
        process's answers gathered, then each new communicator made with the transport its
        ranks' places need (MPI communicators in ascending color order on every process, so
        that no two processes wait for each other's)."""
        mine = np.array([[r, *asked[r]] for r in sorted(asked)], np.int64)
        counts = [len(ranks) * mine.itemsize * 3 for ranks in self.ranks_of]
        into = np.empty(sum(counts) // mine.itemsize, np.int64)
        mpi.collective(self.comm, "Allgatherv", mine.ravel().view(np.uint8), [into.view(np.uint8), counts])
        everyone = {int(r): (int(c), int(k)) for r, c, k in into.reshape(-1, 3)}
        me = mpi.mpi().COMM_WORLD.Get_rank()
        made = {}
        for color in sorted({c for c, _ in asked.values() if c >= 0}):
            ranks = [r for _, r in sorted((k, r) for r, (c, k) in everyone.items() if c == color)]
            table = [self.table[r] for r in ranks]
            new_key = hashlib.sha256(key + number.to_bytes(8, "little") + color.to_bytes(8, "little")).digest()[:16]
            if all(w == me for w in table):
                transport = local.LocalGroup(len(ranks))
            elif len(set(table)) == len(table):
                transport = mpi.MpiGroup(mpi.communicator(new_key, table))
            else:
                processes = list(dict.fromkeys(table))
                transport = HybridGroup(mpi.communicator(new_key, processes), table, processes)
            made[color] = ranks, transport, new_key
        return made

    # ---- sends and receives: in memory between this process's ranks, else MPI's
    def _post_transfer(self, op) -> None:
        if op.root in self.members:
            super()._post_transfer(op)
            return
        source, dest = (op.rank, op.root) if op.kind == "Send" else (op.root, op.rank)
        buffer = op.view(op.send if op.kind == "Send" else op.recv, op.count).view(np.uint8)
        tag = _TRANSFER_TAG + source * MAX_RANKS + dest
        start = self.comm.Isend if op.kind == "Send" else self.comm.Irecv
        request = mpi.call(start, buffer, self.owner[op.root], tag)

        def finish():
            try:
                mpi.wait([request])
                op.finish()
            except BaseException as e:      # noqa: BLE001 -- the waiting rank hears it
                op.finish(NcclError(Result.RemoteError, f"{op.kind} through MPI: {e}"))
        threading.Thread(target=finish, name="anycuda-nccl-transfer", daemon=True).start()


class _Meeting:
    """This process's ranks of one unique id joining: the last to come makes the group."""
    lock = threading.Condition()
    joining = {}                     # key -> {"come": set of ranks, "group": HybridGroup or an exception}


def join(key: bytes, table: list, rank: int) -> HybridGroup:
    """The transport of NCCL rank `rank` of a communicator whose world ranks are `table` (every
    process with ranks in it calls this once for each of them)."""
    if len(table) > MAX_RANKS:
        raise NcclError(Result.InvalidUsage, f"{len(table)} ranks with several in one process: anycuda joins at most "
                        f"{MAX_RANKS} such ranks")
    me = mpi.mpi().COMM_WORLD.Get_rank()
    mine = {r for r, w in enumerate(table) if w == me}
    with _Meeting.lock:
        entry = _Meeting.joining.setdefault(key, {"come": set(), "group": None})
        entry["come"].add(rank)
        last = entry["come"] == mine
    if last:                         # one MPI communicator per process: made once, here
        processes = list(dict.fromkeys(table))
        try:
            made = HybridGroup(mpi.communicator(key, processes), table, processes)
        except BaseException as e:   # noqa: BLE001 -- every local rank hears it
            made = e
        with _Meeting.lock:
            entry["group"] = made
            del _Meeting.joining[key]
            _Meeting.lock.notify_all()
    else:
        with _Meeting.lock:
            while entry["group"] is None:
                _Meeting.lock.wait()
    if isinstance(entry["group"], BaseException):
        raise entry["group"]
    return entry["group"]
