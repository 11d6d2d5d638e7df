"""anycuda's NCCL with several devices in one process (the in-process transport): every
collective, data type and reduction against numpy on fresh random inputs into poisoned
buffers, in-place and out-of-place, groups, stream order, communicator creation and errors.
Functions are called as their C entry points are (arguments as integers)."""
import ctypes
import os
import threading
import time

import numpy as np
import pytest

import anycuda as ac
from anycuda.driver import api
from anycuda.runtime import device
from anycuda.libraries.nccl import functions
from anycuda.libraries.nccl.status import NcclError, Result
from library_calls import caller, peek, stream_handle
import nccl_reference as ref

call = caller(functions.table())
VALUED = functions.VALUED
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
POISON = 0xA5
_kept = []


class Buf:
    """Device memory of `count` elements of an NCCL type plus a poisoned tail that must stay."""
    TAIL = 16

    def __init__(self, dtype, count, values=None):
        self.dtype, self.count = dtype, count
        self.np = np.dtype(ref.STORAGE[dtype])
        self.mem = ac.Memory((count + self.TAIL) * self.np.itemsize)
        _kept.append(self.mem)
        self.ptr = self.mem.ptr
        self.raw()[:] = POISON
        if values is not None:
            self.view()[:len(values)] = values

    def raw(self):
        n = (self.count + self.TAIL) * self.np.itemsize
        return np.frombuffer((ctypes.c_char * n).from_address(self.ptr), np.uint8)

    def view(self):
        return self.raw()[:self.count * self.np.itemsize].view(self.np)

    def at(self, offset):
        return self.ptr + offset * self.np.itemsize

    def values(self):
        assert (self.raw()[self.count * self.np.itemsize:] == POISON).all(), "written past the end"
        return self.view().copy()


class Ranks:
    """ncclCommInitAll over n devices, one stream each."""

    def __init__(self, n):
        self.n = n
        out = (ctypes.c_uint64 * n)()
        call("ncclCommInitAll", ctypes.addressof(out), n, 0)
        self.comms = list(out)
        self.streams = [stream_handle(ac.Stream()) for _ in range(n)]

    def each(self, name, args_of_rank):
        call("ncclGroupStart")
        for r in range(self.n):
            call(name, *args_of_rank(r), self.comms[r], self.streams[r])
        call("ncclGroupEnd")

    def sync(self):
        for s in self.streams:
            api.wait_for_stream(s)

    def close(self):
        for c in self.comms:
            call("ncclCommDestroy", c)


@pytest.fixture(autouse=True)
def four_devices(monkeypatch):
    """Ranks of one process take a device each (ncclCommInitAll refuses devices that do not
    exist): four, read afresh (device_count is read once per process)."""
    monkeypatch.setenv("ANYCUDA_DEVICES", "4")
    device.device_count.cache_clear()
    yield
    device.device_count.cache_clear()


@pytest.fixture(params=[2, 3, 4])
def ranks(request):
    r = Ranks(request.param)
    yield r
    r.close()


def _same(got, want, dtype):
    if np.dtype(ref.STORAGE[dtype]).kind == "f" and dtype not in ref.NARROW:
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == 7 else 1e-13, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", range(12), ids=lambda d: ref.NAMES[d])
@pytest.mark.parametrize("op", OPS)
def test_all_reduce_every_type_and_op(dtype, op, rng):
    r = Ranks(3)
    count = 41
    sends = [Buf(dtype, count, ref.inputs(rng, dtype, count)) for _ in range(r.n)]
    recvs = [Buf(dtype, count) for _ in range(r.n)]
    r.each("ncclAllReduce", lambda i: (sends[i].ptr, recvs[i].ptr, count, dtype, OPS[op]))
    r.sync()
    want = ref.reduce([s.view() for s in sends], dtype, op)
    for b in recvs:
        _same(b.values(), want, dtype)
    r.close()


@pytest.mark.parametrize("dtype", [6, 7, 9, 10, 2])
def test_pre_mul_sum_with_host_and_device_factors(dtype, rng):
    r = Ranks(2)
    count = 33
    factor = (ref.narrow(np.array([0.75], np.float32), dtype) if dtype in ref.NARROW
              else np.array([3], ref.STORAGE[dtype]))
    host = np.array(factor, ref.STORAGE[dtype])
    dev = Buf(dtype, 1, host)
    ops = []
    for i, c in enumerate(r.comms):
        out = ctypes.c_int()
        where, residence = (host.ctypes.data, 1) if i == 0 else (dev.ptr, 0)
        call("ncclRedOpCreatePreMulSum", ctypes.addressof(out), where, dtype, residence, c)
        ops.append(out.value)
    assert ops[0] >= 5
    sends = [Buf(dtype, count, ref.inputs(rng, dtype, count)) for _ in range(2)]
    recvs = [Buf(dtype, count) for _ in range(2)]
    r.each("ncclAllReduce", lambda i: (sends[i].ptr, recvs[i].ptr, count, dtype, ops[i]))
    r.sync()
    want = ref.reduce([s.view() for s in sends], dtype, "premulsum", ref.widen(host, dtype)[0])
    for b in recvs:
        _same(b.values(), want, dtype)
    for i, c in enumerate(r.comms):
        call("ncclRedOpDestroy", ops[i], c)
    with pytest.raises(NcclError) as e:
        call("ncclRedOpDestroy", ops[0], r.comms[0])
    assert e.value.status == Result.InvalidArgument
    r.close()


@pytest.mark.parametrize("in_place", [False, True], ids=["out_of_place", "in_place"])
def test_every_collective(ranks, in_place, rng):
    n, c, f = ranks.n, 29, 7
    data = [rng.standard_normal(n * c).astype(np.float32) for _ in range(n)]
    root = n - 1

    def run(name, send_count, recv_count, extra=lambda i: (), send_at=lambda i: 0, recv_at=lambda i: 0):
        recvs = [Buf(f, recv_count, data[i][:recv_count] if in_place else None) for i in range(n)]
        if in_place:
            sends = [(recvs[i], send_at(i)) for i in range(n)]
            for i in range(n):
                recvs[i].view()[send_at(i):send_at(i) + send_count] = data[i][:send_count]
        else:
            sends = [(Buf(f, send_count, data[i][:send_count]), 0) for i in range(n)]
        at = recv_at if in_place else (lambda i: 0)
        ranks.each(name, lambda i: (sends[i][0].at(sends[i][1]), recvs[i].at(at(i)), *extra(i)))
        ranks.sync()
        return [b.values() for b in recvs]

    mine = [d[:c] for d in data]
    got = run("ncclAllReduce", c, c, lambda i: (c, f, 0))
    for g in got:
        np.testing.assert_allclose(g, sum(mine), rtol=1e-6, atol=1e-6)
    got = run("ncclBroadcast", c, c, lambda i: (c, f, root))
    for g in got:
        np.testing.assert_array_equal(g, mine[root])
    got = run("ncclReduce", c, c, lambda i: (c, f, 3, root))          # min
    np.testing.assert_array_equal(got[root], np.minimum.reduce(mine))
    got = run("ncclAllGather", c, n * c, lambda i: (c, f), send_at=lambda i: i * c)
    for g in got:
        np.testing.assert_array_equal(g, np.concatenate(mine))
    got = run("ncclReduceScatter", n * c, n * c if in_place else c, lambda i: (c, f, 2), recv_at=lambda i: i * c)
    whole = np.maximum.reduce([d[:n * c] for d in data])
    for i, g in enumerate(got):
        np.testing.assert_array_equal(g[:c] if not in_place else g[i * c:(i + 1) * c], whole[i * c:(i + 1) * c])
    if not in_place:
        got = run("ncclAlltoAll", n * c, n * c, lambda i: (c, f))
        for i, g in enumerate(got):
            np.testing.assert_array_equal(g, np.concatenate([data[j][i * c:(i + 1) * c] for j in range(n)]))
        got = run("ncclGather", c, n * c, lambda i: (c, f, root))
        np.testing.assert_array_equal(got[root], np.concatenate(mine))
        got = run("ncclScatter", n * c, c, lambda i: (c, f, root))
        for i, g in enumerate(got):
            np.testing.assert_array_equal(g, data[root][i * c:(i + 1) * c])


def test_bcast_in_place_and_reduce_leaves_other_ranks_alone(rng):
    r = Ranks(3)
    c = 17
    bufs = [Buf(8, c, rng.standard_normal(c)) for _ in range(3)]
    want = bufs[1].view().copy()
    r.each("ncclBcast", lambda i: (bufs[i].ptr, c, 8, 1))
    r.sync()
    for b in bufs:
        np.testing.assert_array_equal(b.values(), want)
    sends = [Buf(2, c, rng.integers(-50, 50, c, dtype=np.int32)) for _ in range(3)]
    recvs = [Buf(2, c) for _ in range(3)]
    r.each("ncclReduce", lambda i: (sends[i].ptr, recvs[i].ptr, c, 2, 0, 0))
    r.sync()
    np.testing.assert_array_equal(recvs[0].values(), sum(s.view() for s in sends))
    assert (recvs[1].raw() == POISON).all() and (recvs[2].raw() == POISON).all()
    r.close()


def test_grouped_send_recv_ring_in_any_order(rng):
    """Every rank sends to the next and receives from the previous, the two in a different order
    on even and odd ranks: the group makes it one operation, so nothing waits for anything else."""
    r = Ranks(4)
    c = 100
    sends = [Buf(4, c, rng.integers(0, 1 << 40, c)) for _ in range(4)]
    recvs = [Buf(4, c) for _ in range(4)]
    call("ncclGroupStart")
    for i in range(4):
        nxt, prev = (i + 1) % 4, (i - 1) % 4
        pair = [("ncclSend", sends[i].ptr, nxt), ("ncclRecv", recvs[i].ptr, prev)]
        for name, ptr, peer in (pair if i % 2 else pair[::-1]):
            call(name, ptr, c, 4, peer, r.comms[i], r.streams[i])
    call("ncclGroupEnd")
    r.sync()
    for i in range(4):
        np.testing.assert_array_equal(recvs[i].values(), sends[(i - 1) % 4].view())
    r.close()


def test_ranks_sharing_one_stream_in_a_group(rng):
    r = Ranks(3)
    shared = r.streams[0]
    sends = [Buf(7, 10, rng.standard_normal(10).astype(np.float32)) for _ in range(3)]
    recvs = [Buf(7, 10) for _ in range(3)]
    call("ncclGroupStart")
    for i in range(3):
        call("ncclAllReduce", sends[i].ptr, recvs[i].ptr, 10, 7, 2, r.comms[i], shared)
    call("ncclGroupEnd")
    api.wait_for_stream(shared)
    for b in recvs:
        np.testing.assert_array_equal(b.values(), np.maximum.reduce([s.view() for s in sends]))
    r.close()


def test_collective_waits_for_earlier_work_on_its_stream_and_not_the_host(rng):
    r = Ranks(2)
    gate = threading.Event()
    stream0 = api._get(r.streams[0], api.StreamHandle).stream
    stream0.enqueue(gate.wait)                           # rank 0's stream is busy until the gate opens
    sends = [Buf(7, 8, rng.standard_normal(8).astype(np.float32)) for _ in range(2)]
    recvs = [Buf(7, 8) for _ in range(2)]
    r.each("ncclAllReduce", lambda i: (sends[i].ptr, recvs[i].ptr, 8, 7, 0))    # returns at once
    assert (peek(recvs[1].ptr, 8, np.uint32) == 0xA5A5A5A5).all()               # rank 1 waits for rank 0
    gate.set()
    r.sync()
    for b in recvs:
        np.testing.assert_allclose(b.values(), sends[0].view() + sends[1].view(), rtol=1e-6)
    r.close()


def test_stream_zero_is_each_ranks_own_devices_default_stream(rng):
    """ncclCommInitAll's ranks called with stream 0 from one thread (CuPy's way): each rank's
    part goes on its own device's legacy default stream, whatever device is current, so it
    waits for the work queued there before (it ran on the current device's stream, and a fill
    still pending on device 1 overwrote rank 1's result)."""
    r = Ranks(3)
    gate = threading.Event()
    with ac.Device(1):
        api.submit(0, gate.wait)                        # device 1's default stream is busy
    sends = [Buf(7, 8, rng.standard_normal(8).astype(np.float32)) for _ in range(3)]
    recvs = [Buf(7, 8) for _ in range(3)]
    with ac.Device(0):
        call("ncclGroupStart")
        for i in range(3):
            call("ncclAllReduce", sends[i].ptr, recvs[i].ptr, 8, 7, 0, r.comms[i], 0)
        call("ncclGroupEnd")
    try:
        time.sleep(0.2)
        for b in recvs:                                  # every rank waits for rank 1's part
            assert (peek(b.ptr, 8, np.uint32) == 0xA5A5A5A5).all()
    finally:
        gate.set()
    for d in range(3):
        ac.Device(d).synchronize()
    for b in recvs:
        np.testing.assert_allclose(b.values(), sum(s.view() for s in sends), rtol=1e-6)
    r.close()


def _unique_id():
    raw = (ctypes.c_char * 128)()
    call("ncclGetUniqueId", ctypes.addressof(raw))
    return bytes(raw)


def test_init_rank_from_threads_and_query(rng):
    n = 3
    uid = _unique_id()
    handles = [None] * n

    def join(rank):
        out = ctypes.c_uint64()
        call("ncclCommInitRank", ctypes.addressof(out), n, uid, rank)
        handles[rank] = out.value
    threads = [threading.Thread(target=join, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert all(handles)
    for rank, h in enumerate(handles):
        out = ctypes.c_int()
        call("ncclCommUserRank", h, ctypes.addressof(out))
        assert out.value == rank
        call("ncclCommCount", h, ctypes.addressof(out))
        assert out.value == n
    sends = [Buf(4, 5, rng.integers(-9, 9, 5)) for _ in range(n)]
    recvs = [Buf(4, 5) for _ in range(n)]
    streams = [stream_handle(ac.Stream()) for _ in range(n)]

    def reduce(rank):
        call("ncclAllReduce", sends[rank].ptr, recvs[rank].ptr, 5, 4, 1, handles[rank], streams[rank])
    threads = [threading.Thread(target=reduce, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for s in streams:
        api.wait_for_stream(s)
    for b in recvs:
        np.testing.assert_array_equal(b.values(), np.prod([s.view() for s in sends], axis=0))
    for h in handles:
        call("ncclCommDestroy", h)


def test_ranks_on_threads_using_their_devices_default_streams(rng, monkeypatch, request):
    """One host thread per device, each calling a collective on the legacy default stream
    (stream 0) outside a group: each device has its own, so no rank's collective waits
    behind another rank's, which would wait for it in turn."""
    monkeypatch.setenv("ANYCUDA_DEVICES", "3")
    device.device_count.cache_clear()                   # (read once per process)
    request.addfinalizer(device.device_count.cache_clear)
    r = Ranks(3)
    sends = [Buf(7, 64, rng.standard_normal(64).astype(np.float32)) for _ in range(3)]
    recvs = [Buf(7, 64) for _ in range(3)]
    failures = []

    def rank(i):
        try:
            with ac.Device(i):
                call("ncclAllReduce", sends[i].ptr, recvs[i].ptr, 64, 7, 0, r.comms[i], 0)
                api.wait_for_stream(0)
        except Exception as e:       # noqa: BLE001 - reported by the test below
            failures.append(e)
    threads = [threading.Thread(target=rank, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), f"ranks on the default streams deadlocked ({failures})"
    assert not failures
    for b in recvs:
        np.testing.assert_allclose(b.values(), sum(s.view() for s in sends), rtol=1e-6)
    r.close()


def test_split_by_parity_orders_by_key(rng):
    r = Ranks(4)
    new = [ctypes.c_uint64() for _ in range(4)]
    call("ncclGroupStart")
    for i, c in enumerate(r.comms):
        color = -1 if i == 3 else i % 2
        call("ncclCommSplit", c, color, -i, ctypes.addressof(new[i]), 0)
    call("ncclGroupEnd")
    assert new[3].value == 0
    out = ctypes.c_int()
    ranks_in_new = []
    for i in range(3):
        call("ncclCommUserRank", new[i].value, ctypes.addressof(out))
        ranks_in_new.append(out.value)
    assert ranks_in_new == [1, 0, 0]           # evens {0, 2}: key -2 first; odds {1}
    sends = [Buf(7, 6, rng.standard_normal(6).astype(np.float32)) for _ in (0, 2)]
    recvs = [Buf(7, 6) for _ in (0, 2)]
    call("ncclGroupStart")
    for j, i in enumerate((0, 2)):
        call("ncclAllReduce", sends[j].ptr, recvs[j].ptr, 6, 7, 0, new[i].value, r.streams[i])
    call("ncclGroupEnd")
    r.sync()
    for b in recvs:
        np.testing.assert_allclose(b.values(), sends[0].view() + sends[1].view(), rtol=1e-6)
    r.close()


def test_argument_errors_and_their_text():
    r = Ranks(2)
    b = Buf(7, 4)
    cases = [(("ncclAllReduce", b.ptr, b.ptr, 4, 12, 0, r.comms[0], 0), Result.InvalidArgument, "data type"),
             (("ncclAllReduce", b.ptr, b.ptr, 4, 7, 9, r.comms[0], 0), Result.InvalidArgument, "operation 9"),
             (("ncclBroadcast", b.ptr, b.ptr, 4, 7, 2, r.comms[0], 0), Result.InvalidArgument, "root 2"),
             (("ncclSend", 0, 4, 7, 1, r.comms[0], 0), Result.InvalidArgument, "send buffer is NULL"),
             (("ncclAllReduce", b.ptr, b.ptr, 4, 7, 0, 0x1234, 0), Result.InvalidArgument, "no communicator"),
             (("ncclGroupEnd",), Result.InvalidUsage, "without ncclGroupStart"),
             (("ncclCommInitAll", ctypes.addressof((ctypes.c_uint64 * 5)()), 5, 0), Result.InvalidArgument,
              "device 4 does not exist")]
    for args, status, text in cases:
        with pytest.raises(NcclError) as e:
            call(*args)
        assert e.value.status == status
        assert text in VALUED["ncclGetLastError"](0)
    assert VALUED["ncclGetErrorString"](4) == "invalid argument"
    out = ctypes.c_int()
    call("ncclGetVersion", ctypes.addressof(out))
    assert out.value == 23203
    r.close()


def test_disagreeing_ranks_give_an_async_error_not_a_hang():
    r = Ranks(2)
    a, b = Buf(7, 4, np.ones(4, np.float32)), Buf(7, 4)
    call("ncclGroupStart")
    call("ncclAllReduce", a.ptr, b.ptr, 4, 7, 0, r.comms[0], r.streams[0])
    call("ncclAllReduce", a.ptr, b.ptr, 3, 7, 0, r.comms[1], r.streams[1])
    call("ncclGroupEnd")
    r.sync()
    out = ctypes.c_int()
    call("ncclCommGetAsyncError", r.comms[0], ctypes.addressof(out))
    assert out.value == Result.InvalidUsage
    assert "different collectives" in VALUED["ncclGetLastError"](r.comms[0])
    r.close()


def test_a_local_id_from_another_process_names_mpi():
    raw = bytearray(_unique_id())
    raw[36:40] = (os.getpid() + 1).to_bytes(4, "little")      # as if another process had made it
    with pytest.raises(NcclError) as e:
        call("ncclCommInitRank", ctypes.addressof(ctypes.c_uint64()), 2, bytes(raw), 1)
    assert e.value.status == Result.SystemError and "mpirun" in str(e.value)


def test_ids_for_several_processes_name_what_they_need(monkeypatch):
    monkeypatch.setenv("ANYCUDA_NCCL_TRANSPORT", "mpi")
    for v in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS"):
        monkeypatch.delenv(v, raising=False)
    with pytest.raises(NcclError) as e:
        _unique_id()
    assert e.value.status == Result.SystemError and "mpirun" in str(e.value)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")                # launched, but mpi4py missing
    monkeypatch.setitem(__import__("sys").modules, "mpi4py", None)
    with pytest.raises(NcclError) as e:
        _unique_id()
    assert e.value.status == Result.SystemError and "pip install mpi4py" in str(e.value)


def test_ranks_of_an_mpi_launcher_on_one_machine_see_a_device_each(monkeypatch):
    from anycuda.runtime import device
    monkeypatch.delenv("ANYCUDA_DEVICES", raising=False)
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3")
    device.device_count.cache_clear()
    try:
        assert device.device_count() == 3
        monkeypatch.setenv("ANYCUDA_DEVICES", "2")                 # the variable still decides
        device.device_count.cache_clear()
        assert device.device_count() == 2
    finally:
        monkeypatch.undo()
        device.device_count.cache_clear()
    assert device.device_count() == int(os.environ.get("ANYCUDA_DEVICES", "1"))


def test_init_rank_for_every_device_from_one_thread_in_a_group(rng):
    """NCCL's one-thread pattern: ncclCommInitRank for each device inside a group (each would wait
    for the others outside one); the config form with a NULL config, memory from ncclMemAlloc."""
    uid = _unique_id()
    outs = [ctypes.c_uint64() for _ in range(3)]
    call("ncclGroupStart")
    for rank, out in enumerate(outs):
        name, extra = ("ncclCommInitRankConfig", (0,)) if rank == 1 else ("ncclCommInitRank", ())
        call(name, ctypes.addressof(out), 3, uid, rank, *extra)
    assert all(o.value == 0 for o in outs)                 # made at the group's end
    call("ncclGroupEnd")
    handles = [o.value for o in outs]
    assert all(handles) and len(set(handles)) == 3
    status = ctypes.c_int(-1)
    call("ncclCommGetAsyncError", handles[0], ctypes.addressof(status))
    assert status.value == Result.Success
    pointers = [ctypes.c_uint64() for _ in range(6)]
    for p in pointers:
        call("ncclMemAlloc", ctypes.addressof(p), 64 * 8)
    regs = ctypes.c_uint64()
    call("ncclCommRegister", handles[0], pointers[0].value, 512, ctypes.addressof(regs))
    call("ncclCommDeregister", handles[0], regs.value)
    values = [rng.standard_normal(64) for _ in range(3)]
    for i in range(3):
        ctypes.memmove(pointers[i].value, values[i].ctypes.data, 512)
    streams = [stream_handle(ac.Stream()) for _ in range(3)]
    call("ncclGroupStart")
    for i in range(3):
        call("ncclAllReduce", pointers[i].value, pointers[3 + i].value, 64, 8, 4, handles[i], streams[i])   # avg
    call("ncclGroupEnd")
    for s in streams:
        api.wait_for_stream(s)
    for i in range(3):
        got = np.frombuffer((ctypes.c_char * 512).from_address(pointers[3 + i].value), np.float64)
        np.testing.assert_allclose(got, sum(v * (1 / 3) for v in values), rtol=1e-13)
    for p in pointers:
        call("ncclMemFree", p.value)
    for h in handles:
        call("ncclCommFinalize", h)
        call("ncclCommDestroy", h)


def test_collectives_captured_in_graphs_replay(rng):
    """Each rank's stream captured into a graph of its own: every launch of the graphs runs the
    all-reduce again, on what the buffers hold then."""
    r = Ranks(2)
    sends = [Buf(7, 9, rng.standard_normal(9).astype(np.float32)) for _ in range(2)]
    recvs = [Buf(7, 9) for _ in range(2)]
    for s in r.streams:
        api.cuStreamBeginCapture(s, 0)
    r.each("ncclAllReduce", lambda i: (sends[i].ptr, recvs[i].ptr, 9, 7, 0))
    copy = Buf(7, 9)
    api.cuMemcpyAsync(copy.ptr, recvs[0].ptr, 36, r.streams[0])      # after the all-reduce on rank 0's stream
    execs = [api.cuGraphInstantiate(api.cuStreamEndCapture(s)) for s in r.streams]
    assert (recvs[0].raw() == POISON).all()                   # captured, not run
    for _ in range(3):
        for b in sends:
            b.view()[:] = rng.standard_normal(9).astype(np.float32)
        gate = threading.Event()
        api._get(r.streams[1], api.StreamHandle).stream.enqueue(gate.wait)     # rank 1 comes late
        for e, s in zip(execs, r.streams):
            api.cuGraphLaunch(e, s)
        threading.Timer(0.05, gate.set).start()
        r.sync()
        want = sends[0].view() + sends[1].view()
        for b in recvs + [copy]:
            np.testing.assert_allclose(b.values(), want, rtol=1e-6)
    r.close()


def test_abort_releases_peers_waiting_for_the_rank():
    r = Ranks(3)
    a, b = Buf(7, 4, np.ones(4, np.float32)), Buf(7, 4)
    call("ncclAllReduce", a.ptr, b.ptr, 4, 7, 0, r.comms[1], r.streams[1])      # rank 1 waits for 0 and 2
    call("ncclCommAbort", r.comms[0])
    api.wait_for_stream(r.streams[1])                                      # returns: not left waiting
    out = ctypes.c_int()
    call("ncclCommGetAsyncError", r.comms[1], ctypes.addressof(out))
    assert out.value == Result.RemoteError
    assert "aborted" in VALUED["ncclGetLastError"](0)
    call("ncclAllReduce", a.ptr, b.ptr, 4, 7, 0, r.comms[2], r.streams[2])      # later work: the same answer
    api.wait_for_stream(r.streams[2])
    call("ncclCommGetAsyncError", r.comms[2], ctypes.addressof(out))
    assert out.value == Result.RemoteError
    assert (b.raw() == POISON).all()
    for c in r.comms[1:]:
        call("ncclCommDestroy", c)


@pytest.mark.parametrize("kind, dtype, op", [("ncclReduceScatter", 9, "avg"), ("ncclReduce", 10, "prod"),
                                             ("ncclReduceScatter", 1, "max"), ("ncclReduce", 6, "sum"),
                                             ("ncclReduceScatter", 11, "sum"), ("ncclReduce", 3, "avg")])
def test_rooted_and_scattered_reductions_of_narrow_and_integer_types(kind, dtype, op, rng):
    r = Ranks(3)
    c, root = 19, 1
    scatter = kind == "ncclReduceScatter"
    total = 3 * c if scatter else c
    data = [ref.inputs(rng, dtype, total) for _ in range(3)]
    sends = [Buf(dtype, total, d) for d in data]
    recvs = [Buf(dtype, c) for _ in range(3)]
    extra = (lambda i: (c, dtype, OPS[op])) if scatter else (lambda i: (c, dtype, OPS[op], root))
    r.each(kind, lambda i: (sends[i].ptr, recvs[i].ptr, *extra(i)))
    r.sync()
    want = ref.reduce(data, dtype, op)
    for i in range(3):
        if scatter:
            _same(recvs[i].values(), want[i * c:(i + 1) * c], dtype)
        elif i == root:
            _same(recvs[i].values(), want, dtype)
        else:
            assert (recvs[i].raw() == POISON).all()
    r.close()


def test_a_rank_left_waiting_says_what_may_hold_its_peers(monkeypatch, capfd):
    from anycuda.libraries.nccl import group
    monkeypatch.setattr(group, "HINT_SECONDS", 0.05)
    r = Ranks(2)
    a, b = Buf(7, 4, np.ones(4, np.float32)), Buf(7, 4)
    call("ncclAllReduce", a.ptr, b.ptr, 4, 7, 0, r.comms[0], r.streams[0])
    threading.Event().wait(0.3)
    call("ncclAllReduce", a.ptr, b.ptr, 4, 7, 0, r.comms[1], r.streams[1])      # the peer comes at last
    r.sync()
    assert "has waited 0.05 s for the other ranks" in capfd.readouterr().err
    np.testing.assert_array_equal(b.values(), np.full(4, 2, np.float32))
    r.close()
