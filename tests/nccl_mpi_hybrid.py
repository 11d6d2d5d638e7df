"""One process of tests/test_nccl_mpi.py's communicator with several ranks per process, started by
mpirun: each process drives LOCAL devices, a host thread and a stream each, and its ranks are
interleaved with the other processes' (rank = local index x processes + process), as a program
giving each process several GPUs would number them. Every collective and a ring of sends and
receives across processes, checked against numpy (every process makes every rank's inputs
from the shared seed); ncclCommSplit into a process's ranks, a rank per process and a smaller
communicator of the same kind, keys reversing the order. Prints "process P ok" at the end.
Usage: mpirun -np N python nccl_mpi_hybrid.py SEED [LOCAL]"""
import ctypes
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mpi_process                                       # noqa: E402 -- armed before MPI starts
from mpi4py import MPI                                   # noqa: E402 -- started here, as a program would

import anycuda as ac                                     # noqa: E402
from anycuda.driver import api                           # noqa: E402
from anycuda.libraries.nccl import functions, mpi        # noqa: E402
from anycuda.libraries.nccl.communicator import get      # noqa: E402
from library_calls import caller, stream_handle          # noqa: E402
import nccl_reference as ref                             # noqa: E402

mpi_process.abort_every_process_on_error(MPI)

call = caller(functions.table())
world = MPI.COMM_WORLD
process, processes = world.Get_rank(), world.Get_size()
seed = int(sys.argv[1])
LOCAL = int(sys.argv[2]) if len(sys.argv) > 2 else 2
n = LOCAL * processes
_kept = []


def buf(dtype, count, values=None):
    size = count * np.dtype(ref.STORAGE[dtype]).itemsize
    mem = ac.Memory(max(1, size))
    _kept.append(mem)
    view = np.frombuffer((ctypes.c_char * size).from_address(mem.ptr), ref.STORAGE[dtype])
    view.view(np.uint8)[:] = 0xA5
    if values is not None:
        view[:] = values
    return mem.ptr, view


def inputs(dtype, count, salt):
    return [ref.inputs(np.random.default_rng([seed, salt, r]), dtype, count) for r in range(n)]


raw = (ctypes.c_char * 128)()
if process == 0:
    call("ncclGetUniqueId", ctypes.addressof(raw))
uid = world.bcast(bytes(raw), root=0)
ranks = [t * processes + process for t in range(LOCAL)]
comms, streams, failures = {}, {}, []


def each_rank(work):
    """work(rank, local index) in a host thread per rank, on that rank's device."""
    def run(rank, t):
        try:
            api.cuInit(0)
            api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(t))
            with ac.Device(t):
                work(rank, t)
        except BaseException as e:       # noqa: BLE001 -- reported by the main thread
            failures.append((rank, e))
    threads = [threading.Thread(target=run, args=(r, t), name=f"rank thread {t}") for t, r in enumerate(ranks)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if failures:
        raise RuntimeError(f"process {process}: {failures}")


def init(rank, t):
    out = ctypes.c_uint64()
    call("ncclCommInitRank", ctypes.addressof(out), n, uid, rank)
    comms[rank] = out.value
    assert type(get(out.value).transport).__name__ == "HybridGroup"
    streams[rank] = stream_handle(ac.Stream(device=t))


def slow_joiner(call_mpi):
    """mpi.call, but the id maker's second local rank pauses after posting its joining message,
    so that the first, collecting every rank's, finishes before it looks (a loaded machine's
    timing, which once left it collecting messages that never came)."""
    def slowed(fn, *args):
        got = call_mpi(fn, *args)
        if getattr(fn, "__name__", "") == "Isend" and process == 0 and threading.current_thread().name == "rank thread 1":
            time.sleep(0.5)
        return got
    return slowed


plain_call, mpi.call = mpi.call, slow_joiner(mpi.call)
each_rank(init)
mpi.call = plain_call


def collective(name, make, check, *extra):
    """Every local rank calls `name` on buffers `make(rank)` gives; check(rank, output view)."""
    def work(rank, t):
        args, out = make(rank)
        call(name, *args, *extra, comms[rank], streams[rank])
        api.wait_for_stream(streams[rank])
        check(rank, out)
    each_rank(work)


c, root = 37, n - 1
f = inputs(7, n * c, 1)
ints = inputs(4, c, 2)
half = inputs(6, c, 3)


def one(dtype, values, count):
    def make(rank):
        s, _ = buf(dtype, count, values[rank][:count])
        r, out = buf(dtype, count)
        return (s, r, count, dtype), out
    return make


for op_name, op in (("sum", 0), ("max", 2), ("avg", 4)):
    collective("ncclAllReduce", one(7, f, c),
               lambda rank, out, op_name=op_name: np.testing.assert_allclose(
                   out, ref.reduce([x[:c] for x in f], 7, op_name), rtol=1e-5, atol=1e-5), op)
collective("ncclAllReduce", one(4, ints, c), lambda rank, out: np.testing.assert_array_equal(
    out, ref.reduce(ints, 4, "prod")), 1)
collective("ncclAllReduce", one(6, half, c), lambda rank, out: np.testing.assert_allclose(
    out.astype(np.float32), ref.reduce(half, 6, "sum").astype(np.float32), rtol=2e-3, atol=2e-3), 0)


collective("ncclBroadcast", one(7, f, c), lambda rank, out: np.testing.assert_array_equal(out, f[root][:c]), root)
collective("ncclReduce", one(7, f, c), lambda rank, out: rank != root or np.testing.assert_allclose(
    out, ref.reduce([x[:c] for x in f], 7, "min")), 3, root)


def gathered(rank):
    s, _ = buf(7, c, f[rank][:c])
    r, out = buf(7, n * c)
    return (s, r, c, 7), out


collective("ncclAllGather", gathered, lambda rank, out: np.testing.assert_array_equal(
    out, np.concatenate([x[:c] for x in f])))
collective("ncclGather", gathered, lambda rank, out: rank != root or np.testing.assert_array_equal(
    out, np.concatenate([x[:c] for x in f])), root)


def whole(rank):
    s, _ = buf(7, n * c, f[rank])
    r, out = buf(7, n * c)
    return (s, r, c, 7), out


collective("ncclReduceScatter", whole,
           lambda rank, out: np.testing.assert_allclose(out[:c], sum(f)[rank * c:(rank + 1) * c], rtol=1e-5,
                                                        atol=1e-5), 0)
collective("ncclAlltoAll", whole, lambda rank, out: np.testing.assert_array_equal(
    out, np.concatenate([f[j][rank * c:(rank + 1) * c] for j in range(n)])))


def scattered(rank):
    s, _ = buf(7, n * c, f[rank])
    r, out = buf(7, c)
    return (s, r, c, 7), out


collective("ncclScatter", scattered, lambda rank, out: np.testing.assert_array_equal(
    out, f[root][rank * c:(rank + 1) * c]), root)


def ring(rank, t):
    """rank sends to rank + 1 and receives from rank - 1 in one group (across processes)."""
    s, _ = buf(4, c, ints[rank])
    r, out = buf(4, c)
    call("ncclGroupStart")
    call("ncclSend", s, c, 4, (rank + 1) % n, comms[rank], streams[rank])
    call("ncclRecv", r, c, 4, (rank - 1) % n, comms[rank], streams[rank])
    call("ncclGroupEnd")
    api.wait_for_stream(streams[rank])
    np.testing.assert_array_equal(out, ints[(rank - 1) % n])


each_rank(ring)


SPLITS = {                   # name: color of each rank (-1: NCCL_SPLIT_NOCOLOR), and the new transport
    "a process's ranks": (lambda rank: rank % processes, "LocalGroup"),
    "a rank per process": (lambda rank: rank // processes, "MpiGroup"),
    "all but the last": (lambda rank: -1 if rank == n - 1 else 0, "HybridGroup" if LOCAL > 1 else "MpiGroup"),
}


def split(rank, t):
    """Each split (keys reversing the order): new ranks, sizes, transports and an all-reduce."""
    for name, (color_of, kind) in SPLITS.items():
        new = ctypes.c_uint64()
        call("ncclCommSplit", comms[rank], color_of(rank), -rank, ctypes.addressof(new), 0)
        if color_of(rank) < 0:
            assert new.value == 0, name
            continue
        members = sorted((r for r in range(n) if color_of(r) == color_of(rank)), reverse=True)
        got, count = ctypes.c_int(), ctypes.c_int()
        call("ncclCommUserRank", new.value, ctypes.addressof(got))
        call("ncclCommCount", new.value, ctypes.addressof(count))
        assert (got.value, count.value) == (members.index(rank), len(members)), (name, got.value, count.value)
        assert type(get(new.value).transport).__name__ == kind, (name, type(get(new.value).transport))
        s, _ = buf(2, 3, np.full(3, rank + 1, np.int32))
        r, out = buf(2, 3)
        call("ncclAllReduce", s, r, 3, 2, 0, new.value, streams[rank])
        api.wait_for_stream(streams[rank])
        assert (out == sum(m + 1 for m in members)).all(), (name, out)
        call("ncclCommDestroy", new.value)


each_rank(split)
each_rank(lambda rank, t: call("ncclCommDestroy", comms[rank]))
print(f"process {process} ok, ranks {ranks} of {n}", flush=True)
