"""Communicators: a rank's view of a set of ranks joined by a unique id, with the transport
its collectives use (local.LocalGroup for ranks of this process, mpi.MpiGroup for processes
started by an MPI launcher), and the PreMulSum operations created on it.

A unique id is 128 bytes: a magic, the transport the ranks will use, a random key, the MPI
world rank of the process that made it, its pid and host name. ncclGetUniqueId chooses MPI
when this process was started by an MPI launcher (ANYCUDA_NCCL_TRANSPORT=local|mpi decides
otherwise); ncclCommInitAll's ranks are always this process's."""
from __future__ import annotations

import ctypes
import os
import secrets
import socket
import struct
import threading

from . import front, hybrid, local, mpi
from ..memory import write_scalar
from ..registry import Registry
from ...runtime.device import device_count
from .status import NcclError, Result, require

MAGIC = b"anycudaN"
_LAYOUT = struct.Struct("<8sII16siI64s")
LOCAL, MPI = 0, 1
ID_BYTES = 128
SPLIT_NOCOLOR = -1

communicators = Registry(0xCC000000, 16, lambda h: NcclError(Result.InvalidArgument, f"0x{h:x} is no communicator"))


class Communicator:
    def __init__(self, rank: int, nranks: int, device: int, transport, key: bytes):
        self.rank, self.nranks, self.device = rank, nranks, device
        self.transport = transport
        self.key = key
        self.created = {}                  # ncclRedOp_t -> reduction.PreMulSum
        self.next_op = 5                   # reduction.NUM_OPS: the first created operation's number
        self.async_error = Result.Success
        self.finalized = False
        self.lock = threading.Lock()
        self.splits = 0                    # ncclCommSplit calls so far (the k-th of every rank meet)

    def fail(self, error: NcclError) -> None:
        """Keep an error found while running queued work, for ncclCommGetAsyncError."""
        self.async_error = error.status


def get(handle: int) -> Communicator:
    require(handle != 0, Result.InvalidArgument, "the communicator is NULL")
    return communicators.get(handle)


def _transport_of_new_id() -> int:
    chosen = os.environ.get("ANYCUDA_NCCL_TRANSPORT", "").lower()
    if chosen in ("local", "mpi"):
        return MPI if chosen == "mpi" else LOCAL
    return MPI if mpi.launched() else LOCAL


def new_id() -> bytes:
    transport = _transport_of_new_id()
    root = mpi.world_rank() if transport == MPI else -1
    body = _LAYOUT.pack(MAGIC, 1, transport, secrets.token_bytes(16), root, os.getpid(),
                        socket.gethostname().encode()[:64])
    return body.ljust(ID_BYTES, b"\0")


def parse_id(raw: bytes) -> tuple:
    """(transport, key, id root's world rank, pid, host) of a unique id."""
    magic, version, transport, key, root, pid, host = _LAYOUT.unpack(raw[:_LAYOUT.size])
    require(magic == MAGIC and version == 1, Result.InvalidArgument,
            "not a unique id made by anycuda's ncclGetUniqueId")
    return transport, key, root, pid, host.rstrip(b"\0").decode(errors="replace")


def current_device() -> int:
    from ...driver import api
    try:
        return api.cuCtxGetDevice()
    except Exception:                  # noqa: BLE001 -- no context yet: device 0, as cudart's default
        return 0


def _add(comm: Communicator) -> int:
    handle = communicators.add(comm)
    if isinstance(comm.transport, mpi.MpiGroup):
        front.register(handle, comm, mpi.mpi())
    return handle


def init_rank(nranks: int, raw: bytes, rank: int, device: int = None) -> int:
    """ncclCommInitRank: join the id's communicator as `rank` (blocks until all ranks have)."""
    require(nranks >= 1, Result.InvalidArgument, f"nranks {nranks}")
    require(0 <= rank < nranks, Result.InvalidArgument, f"rank {rank} of {nranks}")
    transport, key, root, pid, host = parse_id(raw)
    device = current_device() if device is None else device
    if transport == LOCAL:
        require(pid == os.getpid() and host == socket.gethostname(), Result.SystemError,
                f"this unique id was made by process {pid} on {host} without an MPI launcher: ranks in several "
                "processes must be started by mpirun (or mpiexec) with mpi4py installed")
        group = local.Rendezvous.join(key, nranks, rank)
    else:
        table = mpi.exchange(key, root, nranks, rank)
        if len(set(table)) == nranks:                       # a rank per process
            group = mpi.MpiGroup(mpi.communicator(key, table))
        else:                                               # several ranks in some processes
            group = hybrid.join(key, table, rank)
    return _add(Communicator(rank, nranks, device, group, key))


def init_all(ndev: int, devices: list) -> list:
    """ncclCommInitAll: one communicator per device of this process, ranks in list order."""
    require(ndev >= 1, Result.InvalidArgument, f"ndev {ndev}")
    require(len(set(devices)) == len(devices), Result.InvalidUsage, f"devices {devices} repeat")
    count = device_count()
    for d in devices:
        require(0 <= d < count, Result.InvalidArgument,
                f"device {d} does not exist ({count} device{'s' * (count != 1)}; ANYCUDA_DEVICES sets how many)")
    group, key = local.LocalGroup(ndev), secrets.token_bytes(16)
    return [_add(Communicator(r, ndev, devices[r], group, key)) for r in range(ndev)]


class _SplitMeeting:
    """The ranks of an in-process communicator calling ncclCommSplit for the k-th time."""
    lock = threading.Condition()
    meetings = {}


def split(handle: int, color: int, key: int) -> int:
    """ncclCommSplit: the new communicator of the ranks giving the same color, ordered by
    (key, old rank); 0 (NULL) for NCCL_SPLIT_NOCOLOR. Every rank must call it."""
    comm = get(handle)
    require(color >= 0 or color == SPLIT_NOCOLOR, Result.InvalidArgument, f"color {color}")
    transport = comm.transport
    if isinstance(transport, mpi.MpiGroup):
        new = mpi.split(transport.comm, color, key)
        if new is None:
            return 0
        return _add(Communicator(new.Get_rank(), new.Get_size(), comm.device, mpi.MpiGroup(new), comm.key))
    # this process's ranks meet; the first to see them all makes the groups (through MPI for a
    # hybrid communicator: outside the lock) while the others wait
    number, comm.splits = comm.splits, comm.splits + 1
    m = _SplitMeeting
    with m.lock:
        entry = m.meetings.setdefault((comm.key, number), {"asked": {}, "made": None})
        entry["asked"][comm.rank] = (color, key)
        m.lock.notify_all()
        while len(entry["asked"]) < len(transport.members):
            m.lock.wait()
        makes = entry["made"] is None
        if makes:
            entry["made"] = "making"
    if makes:
        try:
            made = (transport.split_groups(entry["asked"], comm.key, number)
                    if isinstance(transport, hybrid.HybridGroup) else _split_groups(entry["asked"]))
        except BaseException as e:     # noqa: BLE001 -- every rank of the meeting hears it
            made = e
        with m.lock:
            entry["made"] = made
            m.lock.notify_all()
    with m.lock:
        while entry["made"] == "making":
            m.lock.wait()
        made = entry["made"]
        if all(r in entry.setdefault("taken", set()) or r == comm.rank for r in entry["asked"]):
            m.meetings.pop((comm.key, number), None)
        entry["taken"].add(comm.rank)
    if isinstance(made, BaseException):
        raise made
    if color == SPLIT_NOCOLOR:
        return 0
    ranks, group, new_key = made[color]
    return _add(Communicator(ranks.index(comm.rank), len(ranks), comm.device, group, new_key))


def _split_groups(asked: dict) -> dict:
    """color -> (old ranks in new rank order, their LocalGroup, their key)."""
    colors = {}
    for rank, (color, key) in asked.items():
        if color != SPLIT_NOCOLOR:
            colors.setdefault(color, []).append((key, rank))
    return {color: ([r for _, r in sorted(members)], local.LocalGroup(len(members)), secrets.token_bytes(16))
            for color, members in colors.items()}


def destroy(handle: int) -> None:
    get(handle)
    front.unregister(handle)
    communicators.remove(handle)


def abort(handle: int) -> None:
    """ncclCommAbort: the communicator goes; in-process peers waiting for this rank stop waiting
    (their operations finish with ncclRemoteError). An MPI operation under way is MPI's to end."""
    comm = get(handle)
    if isinstance(comm.transport, local.LocalGroup):
        comm.transport.abort(f"rank {comm.rank} aborted the communicator")
    front.unregister(handle)
    communicators.remove(handle)


def write_handle(address: int, handle: int) -> None:
    require(address != 0, Result.InvalidArgument, "the communicator pointer is NULL")
    write_scalar(address, handle, ctypes.c_uint64)
