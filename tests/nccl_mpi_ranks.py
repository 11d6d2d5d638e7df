"""One rank of tests/test_nccl_mpi.py, started by mpirun: anycuda's NCCL over MPI, called as its
C entry points are. Every rank makes every rank's inputs from the shared seed (rank r's from
seed + r), so each checks its own results against numpy. Prints "rank R ok" at the end, with
the number of small operations libnccl's C front answered itself and of large ones its C thread
ran.
Usage: mpirun -np N python nccl_mpi_ranks.py SEED [library]: with `library`, every call goes
through anycuda's libnccl.so.2 (its C front first), loaded as CuPy loads it."""
import ctypes
import gc
import os
import socket
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mpi_process                                       # noqa: E402 -- armed before MPI starts
from mpi4py import MPI                                   # noqa: E402 -- started here, as a program would

import anycuda as ac                                     # noqa: E402
from anycuda.driver import api                           # noqa: E402
from anycuda.libraries.nccl import functions, signatures      # noqa: E402
from anycuda.libraries.nccl.communicator import get      # noqa: E402
from anycuda.libraries.nccl.status import NcclError, Result     # noqa: E402
from anycuda.runtime.errors import CudaError, CUresult   # noqa: E402
from library_calls import caller, peek, stream_handle   # noqa: E402
import nccl_reference as ref                             # noqa: E402

mpi_process.abort_every_process_on_error(MPI)


def library_caller():
    """call(name, *args) through libnccl.so.2's C entry point; a failed status raised as the
    table's functions raise it."""
    import subprocess
    folder = subprocess.run([sys.executable, "-m", "anycuda.cli", "shim-path"], capture_output=True, text=True,
                            check=True).stdout.strip()
    library = ctypes.CDLL(os.path.join(folder, "libnccl.so.2"))
    class UniqueId(ctypes.Structure):       # passed by value, as C passes it
        _fields_ = [("internal", ctypes.c_char * 128)]
    types = {"h": ctypes.c_void_p, "p": ctypes.c_void_p, "z": ctypes.c_size_t, "e": ctypes.c_int, "i": ctypes.c_int,
             "I": UniqueId}

    def call(name, *args):
        fn = getattr(library, name)
        fn.argtypes = [types[k] for k in signatures.FUNCTIONS[name]]
        args = [UniqueId.from_buffer_copy(a) if isinstance(a, bytes) else a for a in args]
        status = fn(*args)
        if status:
            raise NcclError(Result(status), f"{name} answered {status}")
    return call


call = library_caller() if sys.argv[2:] == ["library"] else caller(functions.table())
world = MPI.COMM_WORLD
rank, n = world.Get_rank(), world.Get_size()
seed = int(sys.argv[1])
_kept = []


def buf(dtype, count, values=None):
    mem = ac.Memory(max(1, count * np.dtype(ref.STORAGE[dtype]).itemsize))
    _kept.append(mem)
    view = np.frombuffer((ctypes.c_char * (count * np.dtype(ref.STORAGE[dtype]).itemsize)).from_address(mem.ptr),
                         ref.STORAGE[dtype])
    view.view(np.uint8)[:] = 0xA5
    if values is not None:
        view[:] = values
    return mem.ptr, view


def inputs(dtype, count, salt=0):
    """Every rank's inputs, the same on every rank."""
    return [ref.inputs(np.random.default_rng([seed, salt, r]), dtype, count) for r in range(n)]


raw = (ctypes.c_char * 128)()
if rank == 0:
    call("ncclGetUniqueId", ctypes.addressof(raw))
uid = world.bcast(bytes(raw) if rank == 0 else None, root=0)
out = ctypes.c_uint64()
call("ncclCommInitRank", ctypes.addressof(out), n, uid, rank)
comm = out.value
stream = stream_handle(ac.Stream())


def sync():
    api.wait_for_stream(stream)


def same(got, want, dtype):
    if np.dtype(ref.STORAGE[dtype]).kind == "f" and dtype not in ref.NARROW:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    elif dtype in ref.NARROW:      # summed in another order: one rounding step apart (fp8 e4m3 12.5%, e5m2 25%)
        a, b = ref.widen(got, dtype), ref.widen(want, dtype)
        np.testing.assert_allclose(a, b, rtol={10: 0.125, 11: 0.25}.get(dtype, 0.01), atol=0.07)
    else:
        np.testing.assert_array_equal(got, want)


# 1. every type with every operation (all-reduce), and a PreMulSum
for i, (dtype, op) in enumerate((d, o) for d in range(12) for o in ("sum", "prod", "max", "min", "avg")):
    c = 57
    data = inputs(dtype, c, i)
    s, _ = buf(dtype, c, data[rank])
    r, got = buf(dtype, c)
    call("ncclAllReduce", s, r, c, dtype, {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}[op], comm, stream)
    sync()
    same(got, ref.reduce(data, dtype, op), dtype)

for dtype in (7, 9):
    c = 21
    data = inputs(dtype, c, 99)
    factor = ref.narrow(np.array([1.5], np.float32), dtype)
    pre = ctypes.c_int()
    call("ncclRedOpCreatePreMulSum", ctypes.addressof(pre), factor.ctypes.data, dtype, 1, comm)
    s, _ = buf(dtype, c, data[rank])
    r, got = buf(dtype, c)
    call("ncclAllReduce", s, r, c, dtype, pre.value, comm, stream)
    sync()
    same(got, ref.reduce(data, dtype, "premulsum", ref.widen(factor, dtype)[0]), dtype)
    call("ncclRedOpDestroy", pre.value, comm)

# 2. every collective once (float32 and int64), large all-reduce in pieces, in place
c, root = 33, n - 1
f = inputs(7, n * c, 100)
mine = [d[:c] for d in f]
s, _ = buf(7, c, mine[rank])
r, got = buf(7, c)
call("ncclBroadcast", s, r, c, 7, root, comm, stream); sync()
np.testing.assert_array_equal(got, mine[root])
r, got = buf(7, c)
call("ncclReduce", s, r, c, 7, 2, root, comm, stream); sync()
if rank == root:
    np.testing.assert_array_equal(got, np.maximum.reduce(mine))
else:
    assert (got.view(np.uint32) == 0xA5A5A5A5).all()
r, got = buf(7, n * c)
call("ncclAllGather", s, r, c, 7, comm, stream); sync()
np.testing.assert_array_equal(got, np.concatenate(mine))
whole, _ = buf(7, n * c, f[rank])
r, got = buf(7, c)
call("ncclReduceScatter", whole, r, c, 7, 0, comm, stream); sync()
np.testing.assert_allclose(got, sum(f)[rank * c:(rank + 1) * c], rtol=1e-5, atol=1e-5)
r, got = buf(7, n * c)
call("ncclAlltoAll", whole, r, c, 7, comm, stream); sync()
np.testing.assert_array_equal(got, np.concatenate([f[j][rank * c:(rank + 1) * c] for j in range(n)]))
r, got = buf(7, n * c)
call("ncclGather", s, r, c, 7, root, comm, stream); sync()
if rank == root:
    np.testing.assert_array_equal(got, np.concatenate(mine))
r, got = buf(7, c)
call("ncclScatter", whole, r, c, 7, root, comm, stream); sync()
np.testing.assert_array_equal(got, f[root][rank * c:(rank + 1) * c])
big = 3_000_000                                          # 24 MB of doubles: several pieces
b, got = buf(4, big, np.arange(big, dtype=np.int64) * (rank + 1))
call("ncclAllReduce", b, b, big, 4, 0, comm, stream); sync()          # in place
assert np.array_equal(got, np.arange(big, dtype=np.int64) * (n * (n + 1) // 2))
ip, got = buf(7, n * c)
got[rank * c:(rank + 1) * c] = mine[rank]
call("ncclAllGather", ip + rank * c * 4, ip, c, 7, comm, stream); sync()      # in place
np.testing.assert_array_equal(got, np.concatenate(mine))

# 3. a group: a ring of sends and receives, issued in opposite orders on even and odd ranks
vals = inputs(4, 200, 7)
s, _ = buf(4, 200, vals[rank])
r, got = buf(4, 200)
pair = [("ncclSend", s, (rank + 1) % n), ("ncclRecv", r, (rank - 1) % n)]
call("ncclGroupStart")
for name, ptr, peer in (pair if rank % 2 else pair[::-1]):
    call(name, ptr, 200, 4, peer, comm, stream)
call("ncclGroupEnd")
sync()
np.testing.assert_array_equal(got, vals[(rank - 1) % n])

# 4. stream order: the collective waits for a copy queued before it, and not the host
gate = threading.Event()
api._get(stream, api.StreamHandle).stream.enqueue(gate.wait)
host = np.full(16, rank + 1.0, np.float32)
s, _ = buf(7, 16)
r, got = buf(7, 16)
api.cuMemcpyAsync(s, host.ctypes.data, host.nbytes, stream)
call("ncclAllReduce", s, r, 16, 7, 0, comm, stream)
assert (peek(r, 16, np.uint32) == 0xA5A5A5A5).all()
host[:] = -100                  # the copy has not run yet: it reads these, and the all-reduce its result
gate.set()
sync()
assert np.allclose(got, -100 * n), got

DEAD_STREAM = Result.UnhandledCudaError     # libnccl's answer when a CUDA call failed
# 5. errors: synchronous argument rules (a destroyed stream's handle too: libnccl's C front
# answers only on streams it knows are live, so it reaches the Python's check)
dead = api.cuStreamCreate(0)
api.cuStreamDestroy(dead)
for args, status in [(("ncclAllReduce", s, r, 16, 7, 0, comm, stream), None),
                     (("ncclBroadcast", s, r, 16, 7, n, comm, stream), Result.InvalidArgument),
                     (("ncclAllReduce", s, r, 16, 13, 0, comm, stream), Result.InvalidArgument),
                     (("ncclAllReduce", s, r, 16, 7, 0, comm, dead), DEAD_STREAM)]:
    try:
        call(*args)
        assert status is None
    except NcclError as e:
        assert e.status == status, e
    except CudaError as e:          # the table's functions raise the driver's error as it is
        assert status == DEAD_STREAM and e.code == CUresult.CUDA_ERROR_INVALID_HANDLE, e
sync()

# 6. asynchrony: a small all-reduce returns before its peers have called theirs (rank 0 calls
# only once rank 1's has returned, and 0.1 s later: a call that waited for its peers would never
# return; the stream's worker then waits past its first 50 ms of testing without pausing)
s, _ = buf(7, 5, np.full(5, rank + 1.0, np.float32))
r, got = buf(7, 5)
if rank == 0 and n > 1:
    world.recv(source=1, tag=99)
    time.sleep(0.1)
call("ncclAllReduce", s, r, 5, 7, 0, comm, stream)
if rank == 1:
    world.send("returned", dest=0, tag=99)
sync()
assert (got == n * (n + 1) / 2).all(), got

# 7. a capture: a small all-reduce recorded into a graph (not run then, though the stream is
# idle), each launch of the graph an all-reduce of what the buffer holds then
s, host_view = buf(7, 6, np.full(6, rank + 1.0, np.float32))
r, got = buf(7, 6)
api.cuStreamBeginCapture(stream)
call("ncclAllReduce", s, r, 6, 7, 0, comm, stream)
graph = api.cuStreamEndCapture(stream)
assert (peek(r, 6, np.uint32) == 0xA5A5A5A5).all(), "recorded, not run"
runs = api.cuGraphInstantiate(graph)
for launch in range(2):
    host_view[:] = (rank + 1.0) * (launch + 1)
    api.cuGraphLaunch(runs, stream)
    sync()
    assert (got == n * (n + 1) / 2 * (launch + 1)).all(), (launch, got)
api.cuGraphExecDestroy(runs)
api.cuGraphDestroy(graph)

# 9. large collectives back to back, each reading what the one before wrote (through
# libnccl.so.2 these go to its C thread, large.c, while nothing else is queued), then a small
# one, an event, a copy to the host and a context synchronisation, all in stream order
big_c = 150_000                           # floats per rank: more than small.py's 512 KB a call moves
vals = inputs(7, n * big_c, 9)
s, _ = buf(7, n * big_c, vals[rank])
total, got_total = buf(7, n * big_c)
call("ncclAllReduce", s, total, n * big_c, 7, 0, comm, stream)                       # sum of every rank's
gathered, got_gathered = buf(7, n * big_c)
call("ncclAllGather", total + rank * big_c * 4, gathered, big_c, 7, comm, stream)      # = the sum again
part, got_part = buf(7, big_c)
call("ncclReduceScatter", gathered, part, big_c, 7, 0, comm, stream)                 # n x the sum's block
call("ncclBroadcast", total, total, n * big_c, 7, n - 1, comm, stream)                 # in place
top, got_top = buf(7, big_c)
call("ncclReduce", gathered, top, big_c, 7, 2, n - 1, comm, stream)                    # max: the sum's first block
call("ncclAllReduce", part, part, 16, 7, 0, comm, stream)                              # small, after the large
done_event = api.cuEventCreate(0)
api.cuEventRecord(done_event, stream)
host = np.zeros(big_c, np.float32)
api.cuMemcpyAsync(host.ctypes.data, part, host.nbytes, stream)
api.cuEventSynchronize(done_event)
api.cuCtxSynchronize()
api.cuStreamQuery(stream)                               # (raises CUDA_ERROR_NOT_READY while work is pending)
want = np.sum(vals, axis=0, dtype=np.float64).astype(np.float32)
same(got_total, want, 7)
same(got_gathered, want, 7)
block = want[rank * big_c:(rank + 1) * big_c] * n
block[:16] = sum(want[j * big_c:j * big_c + 16] * n for j in range(n))     # the small all-reduce's
same(host, block, 7)
if rank == n - 1:
    same(got_top, want[:big_c], 7)
api.cuEventDestroy(done_event)
# a large all-reduce returns before its peers call theirs, and its stream is busy until they do
if rank == 0 and n > 1:
    world.recv(source=1, tag=98)
call("ncclAllReduce", s, total, n * big_c, 7, 0, comm, stream)
if rank == 1:
    try:
        api.cuStreamQuery(stream)
        raise AssertionError("the stream is idle while its all-reduce waits for rank 0")
    except CudaError as e:
        assert e.code == CUresult.CUDA_ERROR_NOT_READY, e
    world.send("returned", dest=0, tag=98)
sync()
same(got_total, want, 7)

# 8. a split: even and odd ranks
new = ctypes.c_uint64()
call("ncclCommSplit", comm, rank % 2, rank, ctypes.addressof(new), 0)
cnt = ctypes.c_int()
call("ncclCommCount", new.value, ctypes.addressof(cnt))
assert cnt.value == len(range(rank % 2, n, 2))
s, _ = buf(2, 4, np.full(4, rank, np.int32))
r, got = buf(2, 4)
call("ncclAllReduce", s, r, 4, 2, 0, new.value, stream); sync()
assert (got == sum(range(rank % 2, n, 2))).all()
split_mpi = get(new.value).transport.comm
call("ncclCommDestroy", new.value)
gc.collect()
assert split_mpi == MPI.COMM_NULL, "a destroyed communicator's MPI communicator is freed"
shared = get(comm).transport.shared
answered, threaded = shared.answered, shared.threaded
call("ncclCommDestroy", comm)
print(f"rank {rank} ok on {socket.gethostname()} {os.readlink('/proc/self/ns/net')} front answered {answered} "
      f"threaded {threaded}", flush=True)
