"""Every NCCL function anycuda implements: C name -> (kinds, the Python that answers it, taking
the C arguments in order: addresses and handles as integers, the unique id as its bytes).
Kinds are in signatures.py. Argument rules are checked before anything is queued."""
from __future__ import annotations

import ctypes

import numpy as np

from . import communicator as comms, front, group, reduction, signatures, types
from .communicator import get, write_handle
from .operations import Operation
from .status import NcclError, Result, error_string, last_error, require
from ..memory import array, write_scalar

VERSION = 23203              # NCCL_VERSION_CODE of the 2.32.3 headers: major * 10000 + minor * 100 + patch


def _write_int(address: int, value: int) -> None:
    require(address != 0, Result.InvalidArgument, "an output pointer is NULL")
    write_scalar(address, value, ctypes.c_int)


def _get_unique_id(out: int) -> None:
    require(out != 0, Result.InvalidArgument, "the unique id pointer is NULL")
    array(out, comms.ID_BYTES, np.uint8)[:] = np.frombuffer(comms.new_id(), np.uint8)


def _init_rank(out: int, nranks: int, raw: bytes, rank: int, config: int = 0) -> None:
    require(out != 0, Result.InvalidArgument, "the communicator pointer is NULL")
    device = comms.current_device()       # the device current now, even when the group's end makes it
    task = lambda: write_handle(out, comms.init_rank(nranks, raw, rank, device))    # noqa: E731
    if not group.defer(task):
        task()


def _init_all(out: int, ndev: int, devlist: int) -> None:
    require(out != 0, Result.InvalidArgument, "the communicator array is NULL")
    require(ndev >= 1, Result.InvalidArgument, f"ndev {ndev}")
    devices = [int(d) for d in array(devlist, ndev, np.int32)] if devlist else list(range(ndev))
    handles = comms.init_all(ndev, devices)
    array(out, ndev, np.uint64)[:] = handles


def _split(handle: int, color: int, key: int, out: int, config: int) -> None:
    require(out != 0, Result.InvalidArgument, "the new communicator pointer is NULL")
    get(handle)
    task = lambda: write_handle(out, comms.split(handle, color, key))   # noqa: E731
    if not group.defer(task):
        task()


def _finalize(handle: int) -> None:
    comm = get(handle)
    comm.finalized = True
    shared = getattr(comm.transport, "shared", None)
    if shared is not None:           # the C front leaves its calls to the Python, which refuses them
        shared.enabled = 0


def _async_error(handle: int, out: int) -> None:
    comm = get(handle)
    front.report_errors()            # (a failure of libnccl's C thread, large.c, not yet seen)
    _write_int(out, int(comm.async_error))


def _mem_alloc(out: int, size: int) -> None:
    from ...driver import api
    require(out != 0, Result.InvalidArgument, "the pointer is NULL")
    write_scalar(out, api.cuMemAlloc(max(size, 1)), ctypes.c_uint64)


def _mem_free(address: int) -> None:
    from ...driver import api
    if address:
        api.cuMemFree(address)


def _register(handle: int, buff: int, size: int, out: int) -> None:
    get(handle)
    require(out != 0, Result.InvalidArgument, "the handle pointer is NULL")
    write_scalar(out, buff, ctypes.c_uint64)      # memory needs no registering here: the handle is the address


def _create_pre_mul_sum(out: int, scalar: int, dtype: int, residence: int, handle: int) -> None:
    comm = get(handle)
    _check_type(dtype)
    require(out != 0 and scalar != 0, Result.InvalidArgument, "a pointer is NULL")
    require(residence in (0, 1), Result.InvalidArgument, f"scalar residence {residence}")
    if residence == 1:           # ncclScalarHostImmediate: read now
        raw = array(scalar, 1, types.storage(dtype)).tobytes()
        pre = reduction.PreMulSum(dtype, factor=types.scalar(dtype, raw))
    else:                        # ncclScalarDevice: read when each collective runs
        pre = reduction.PreMulSum(dtype, address=scalar)
    with comm.lock:
        number, comm.next_op = comm.next_op, comm.next_op + 1
        comm.created[number] = pre
    write_scalar(out, number, ctypes.c_int)


def _destroy_op(op: int, handle: int) -> None:
    comm = get(handle)
    require(op in comm.created, Result.InvalidArgument,
            f"reduction operation {op} was not created on this communicator")
    del comm.created[op]


# ---- the collectives: argument rules, then an Operation queued (or kept by the group) ---------
_TYPES = frozenset(int(t) for t in types.DataType)


def _check_type(dtype: int) -> None:
    require(dtype in _TYPES, Result.InvalidArgument, f"data type {dtype}")


def _queue(kind: str, handle: int, send: int, recv: int, count: int, dtype: int, op: int = 0, root: int = 0,
           stream: int = 0, sends: bool = True, receives: bool = True) -> None:
    comm = get(handle)
    require(not comm.finalized, Result.InvalidUsage, "the communicator is finalized")
    _check_type(dtype)
    require(count >= 0, Result.InvalidArgument, f"count {count}")
    require(0 <= root < comm.nranks, Result.InvalidArgument, f"{'peer' if kind in ('Send', 'Recv') else 'root'} "
            f"{root} of {comm.nranks} ranks")
    if kind in ("AllReduce", "Reduce", "ReduceScatter"):
        reduction.check(op, dtype, comm.created)
    if count:
        require(send != 0 or not sends, Result.InvalidArgument, "the send buffer is NULL")
        require(recv != 0 or not receives, Result.InvalidArgument, "the receive buffer is NULL")
    number = getattr(comm.transport, "number", None)      # processes' communicators number small operations
    seq = number(kind, count, dtype) if number else -1
    group.add(Operation(kind, comm, send, recv, count, dtype, op, root, stream, seq))


def _all_reduce(send, recv, count, dtype, op, handle, stream):
    _queue("AllReduce", handle, send, recv, count, dtype, op, stream=stream)


def _broadcast(send, recv, count, dtype, root, handle, stream):
    rank = get(handle).rank
    _queue("Broadcast", handle, send, recv, count, dtype, root=root, stream=stream, sends=rank == root)


def _bcast(buff, count, dtype, root, handle, stream):
    _broadcast(buff, buff, count, dtype, root, handle, stream)


def _reduce(send, recv, count, dtype, op, root, handle, stream):
    rank = get(handle).rank
    _queue("Reduce", handle, send, recv, count, dtype, op, root, stream, receives=rank == root)


def _all_gather(send, recv, count, dtype, handle, stream):
    _queue("AllGather", handle, send, recv, count, dtype, stream=stream)


def _reduce_scatter(send, recv, count, dtype, op, handle, stream):
    _queue("ReduceScatter", handle, send, recv, count, dtype, op, stream=stream)


def _all_to_all(send, recv, count, dtype, handle, stream):
    _queue("AlltoAll", handle, send, recv, count, dtype, stream=stream)


def _gather(send, recv, count, dtype, root, handle, stream):
    rank = get(handle).rank
    _queue("Gather", handle, send, recv, count, dtype, root=root, stream=stream, receives=rank == root)


def _scatter(send, recv, count, dtype, root, handle, stream):
    rank = get(handle).rank
    _queue("Scatter", handle, send, recv, count, dtype, root=root, stream=stream, sends=rank == root)


def _send(send, count, dtype, peer, handle, stream):
    _queue("Send", handle, send, 0, count, dtype, root=peer, stream=stream, receives=False)


def _recv(recv, count, dtype, peer, handle, stream):
    _queue("Recv", handle, 0, recv, count, dtype, root=peer, stream=stream, sends=False)


_FUNCTIONS = {
    "ncclGetVersion": lambda out: _write_int(out, VERSION),
    "ncclGetUniqueId": _get_unique_id,
    "ncclCommInitRank": _init_rank,
    "ncclCommInitRankConfig": _init_rank,
    "ncclCommInitAll": _init_all,
    "ncclCommSplit": _split,
    "ncclCommFinalize": _finalize,
    "ncclCommDestroy": comms.destroy,
    "ncclCommAbort": comms.abort,
    "ncclCommCount": lambda h, out: _write_int(out, get(h).nranks),
    "ncclCommCuDevice": lambda h, out: _write_int(out, get(h).device),
    "ncclCommUserRank": lambda h, out: _write_int(out, get(h).rank),
    "ncclCommGetAsyncError": _async_error,
    "ncclMemAlloc": _mem_alloc,
    "ncclMemFree": _mem_free,
    "ncclCommRegister": _register,
    "ncclCommDeregister": lambda h, handle: get(h) and None,
    "ncclRedOpCreatePreMulSum": _create_pre_mul_sum,
    "ncclRedOpDestroy": _destroy_op,
    "ncclAllReduce": _all_reduce,
    "ncclBroadcast": _broadcast,
    "ncclBcast": _bcast,
    "ncclReduce": _reduce,
    "ncclAllGather": _all_gather,
    "ncclReduceScatter": _reduce_scatter,
    "ncclAlltoAll": _all_to_all,
    "ncclGather": _gather,
    "ncclScatter": _scatter,
    "ncclSend": _send,
    "ncclRecv": _recv,
    "ncclGroupStart": group.start,
    "ncclGroupEnd": group.end,
}

# the functions whose result is not a status (signatures.VALUED)
VALUED = {
    "ncclGetErrorString": error_string,
    "ncclGetLastError": lambda handle: last_error(),
}


def table() -> dict:
    """C name -> (kinds, function) of every function the drop-in libnccl answers."""
    assert _FUNCTIONS.keys() == signatures.FUNCTIONS.keys()
    return {name: (signatures.FUNCTIONS[name], fn) for name, fn in _FUNCTIONS.items()}


__all__ = ["table", "VERSION", "NcclError"]
