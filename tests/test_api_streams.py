"""Streams and events: order, the legacy default stream, errors kept until reported, timing."""
import contextlib
import gc
import sys
import threading
import time

import numpy as np
import pytest

import anycuda as ac
from anycuda.runtime import device
from anycuda.runtime.stream import default_stream, per_thread_stream

WAIT = 5.0      # seconds a test waits before calling something stuck


def run_in_thread(fn):
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def test_work_runs_in_order_on_its_own_thread():
    s = ac.Stream()
    order, threads = [], set()
    for i in range(200):
        s.enqueue(lambda i=i: (order.append(i), threads.add(threading.get_ident())))
    s.synchronize()
    assert order == list(range(200))
    assert threads and threading.get_ident() not in threads


@contextlib.contextmanager
def started_stream_holding_the_gil():
    """A stream whose worker has started, while this thread keeps the GIL from queueing work to
    waiting for it (a switch interval of a second): the worker, woken, cannot take the work
    before the wait does."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        s = ac.Stream()
        s.enqueue(lambda: None)
        s.synchronize()
        yield s
    finally:
        sys.setswitchinterval(interval)


def test_a_waiting_thread_runs_device_work_the_worker_has_not_taken():
    # device work (`any_thread`: launches, copies) queued and waited for at once runs on the
    # waiting thread; host functions only ever run on the stream's thread
    device_work, device_work_all, host_function = [], [], []
    with started_stream_holding_the_gil() as s:
        for _ in range(50):
            s.enqueue(lambda: device_work.append(threading.get_ident()), any_thread=True)
            s.synchronize()
            s.enqueue(lambda: device_work_all.append(threading.get_ident()), any_thread=True)
            ac.synchronize()                     # (every stream's: synchronize_all)
            s.enqueue(lambda: host_function.append(threading.get_ident()))
            s.synchronize()
    me = threading.get_ident()
    assert me in device_work and me in device_work_all
    assert len(host_function) == 50 and me not in host_function


def test_an_event_synchronize_runs_the_work_before_the_record():
    ran = []
    with started_stream_holding_the_gil() as s:
        for i in range(50):
            s.enqueue(lambda: ran.append(threading.get_ident()), any_thread=True)
            ev = s.record()
            ev.synchronize()
            assert ev.query() and len(ran) == i + 1
    assert threading.get_ident() in ran


def test_work_taken_by_waiting_threads_and_the_worker_keeps_its_order():
    s = ac.Stream()
    order = []
    for i in range(600):
        s.enqueue(order.append, i, any_thread=i % 3 != 0)
        if i % 50 == 49:
            s.synchronize()
            assert order == list(range(i + 1))
    ac.synchronize()
    assert order == list(range(600))


def test_device_work_run_by_a_waiting_thread_keeps_errors_and_skips():
    s = ac.Stream()
    ran, skipped = [], []

    def fail():
        raise ValueError("kernel fault")
    s.enqueue(fail, any_thread=True)
    s.enqueue(ran.append, 1, any_thread=True, on_skip=lambda: skipped.append(1))
    with pytest.raises(ValueError, match="kernel fault"):
        s.synchronize()
    assert ran == [] and skipped == [1]
    s.enqueue(ran.append, 2, any_thread=True)
    s.synchronize()
    assert ran == [2]


def test_a_waiting_thread_does_not_run_work_before_what_it_waits_for():
    # the default stream's work waits for a blocking stream's earlier work (here held by a
    # gate on that stream's own thread): a thread synchronising the default stream must not
    # run it first
    blocking = ac.Stream()
    gate, order = threading.Event(), []
    blocking.enqueue(lambda: (gate.wait(WAIT), order.append("blocking")))
    default_stream.enqueue(order.append, "default", any_thread=True)
    timer = threading.Timer(0.1, gate.set)
    timer.start()
    default_stream.synchronize()
    timer.join()
    assert order == ["blocking", "default"]


def test_enqueue_does_not_block_the_host():
    s = ac.Stream()
    gate = threading.Event()
    s.enqueue(gate.wait, WAIT)
    assert not s.query() and not s.done
    gate.set()
    s.synchronize()
    assert s.query()


def test_streams_run_independently():
    s1, s2 = ac.Stream(), ac.Stream()
    gate, order = threading.Event(), []
    s1.enqueue(gate.wait, WAIT)
    s1.enqueue(order.append, "s1")
    s2.enqueue(order.append, "s2")
    s2.synchronize()
    assert order == ["s2"]
    gate.set()
    s1.synchronize()
    assert order == ["s2", "s1"]


def test_default_stream_waits_for_earlier_work_of_blocking_streams():
    s = ac.Stream()
    gate, order = threading.Event(), []
    s.enqueue(gate.wait, WAIT)
    s.enqueue(order.append, "s")
    t = run_in_thread(lambda: default_stream.enqueue(order.append, "default"))
    time.sleep(0.1)
    assert order == []                       # the default stream's work is held back
    gate.set()
    t.join(WAIT)
    default_stream.synchronize()
    assert order == ["s", "default"]


def held_work(started, gate, order, name):
    """Work that says it started, then waits for `gate` and appends `name` to `order`."""
    def work():
        started.set()
        gate.wait(WAIT)
        order.append(name)
    return work


def test_later_work_on_blocking_streams_waits_for_the_default_stream():
    s = ac.Stream()
    gate, started, order = threading.Event(), threading.Event(), []
    t = run_in_thread(lambda: default_stream.enqueue(held_work(started, gate, order, "default")))
    assert started.wait(WAIT)
    s.enqueue(order.append, "s")             # queued while the default stream's work runs
    time.sleep(0.1)
    assert order == []
    gate.set()
    s.synchronize()
    t.join(WAIT)
    assert order == ["default", "s"]


def test_each_device_has_its_own_default_stream(monkeypatch, request):
    """As each CUDA context has its own legacy stream: device 1's default-stream work runs
    while device 0's is held, a blocking stream of device 1 waits only for device 1's, and a
    synchronisation of device 1 does not wait for device 0."""
    monkeypatch.setenv("ANYCUDA_DEVICES", "2")
    device.device_count.cache_clear()                   # (read once per process)
    request.addfinalizer(device.device_count.cache_clear)
    gate, started, order = threading.Event(), threading.Event(), []
    default_stream.enqueue(held_work(started, gate, order, "device 0"))
    assert started.wait(WAIT)
    with ac.Device(1):
        default_stream.enqueue(order.append, "device 1")
        s = ac.Stream()
        s.enqueue(order.append, "stream of device 1")
        s.synchronize()
        ac.Device(1).synchronize()
        assert order == ["device 1", "stream of device 1"]
    assert not default_stream.query()        # device 0's is still held
    gate.set()
    default_stream.synchronize()
    assert order[-1] == "device 0"


def test_non_blocking_streams_do_not_synchronise_with_the_default_stream():
    s = ac.Stream(non_blocking=True)
    gate, order = threading.Event(), []
    s.enqueue(gate.wait, WAIT)
    s.enqueue(order.append, "s")
    default_stream.enqueue(order.append, "default")     # does not wait for s
    default_stream.synchronize()
    assert order == ["default"]
    gate.set()
    s.synchronize()
    assert order == ["default", "s"]


def test_error_is_kept_until_synchronize_and_later_work_is_skipped():
    s = ac.Stream()
    order = []
    err = ac.CudaError(ac.CUresult.CUDA_ERROR_LAUNCH_FAILED, "boom")

    def fail():
        raise err

    s.enqueue(fail)
    s.enqueue(order.append, "skipped")
    with pytest.raises(ac.CudaError) as e:
        s.synchronize()
    assert e.value is err and order == []
    s.synchronize()                              # reported once
    s.enqueue(order.append, "after")
    s.synchronize()
    assert order == ["after"]


def test_synchronize_all_reports_a_kept_error():
    s = ac.Stream()
    err = ac.CudaError(ac.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, "bad address")
    s.enqueue(lambda: (_ for _ in ()).throw(err))
    with pytest.raises(ac.CudaError) as e:
        ac.synchronize()
    assert e.value is err
    s.synchronize()                              # already reported
    ac.synchronize()


def test_default_stream_errors_are_kept_until_a_synchronising_call():
    err = ac.CudaError(ac.CUresult.CUDA_ERROR_ASSERT, "assert")
    order = []

    def fail():
        raise err
    default_stream.enqueue(fail)             # returns at once, as a launch does
    default_stream.enqueue(order.append, "skipped")
    with pytest.raises(ac.CudaError) as e:
        default_stream.call(order.append, "skipped too")     # a blocking copy reports it
    assert e.value is err and order == []
    default_stream.synchronize()             # reported once
    default_stream.enqueue(fail)
    with pytest.raises(ac.CudaError) as e:
        ac.synchronize()
    assert e.value is err
    default_stream.call(order.append, "after")
    assert order == ["after"]


def test_dropped_stream_finishes_its_work():
    s = ac.Stream()
    gate, order = threading.Event(), []
    s.enqueue(gate.wait, WAIT)
    s.enqueue(order.append, "done")
    del s
    gc.collect()
    gate.set()
    ac.synchronize()
    assert order == ["done"]


def test_a_stream_finaliser_takes_no_lock():
    # The collector runs finalisers wherever it happens to run: in a thread that is being
    # started by one holding the streams' lock, for one. Such a finaliser must not wait.
    from anycuda.runtime import stream as stream_module
    s = ac.Stream()
    s.enqueue(lambda: None)
    s.synchronize()
    finished = threading.Event()
    with stream_module._cv:
        t = run_in_thread(lambda: (s.__del__(), finished.set()))
        assert finished.wait(WAIT), "Stream.__del__ waited for the streams' lock"
    t.join(WAIT)


def test_a_streams_thread_starts_outside_the_lock(monkeypatch):
    # Thread.start waits until the new thread runs, and a new thread may first collect
    # garbage (running finalisers): starting it while holding the streams' lock can deadlock.
    from anycuda.runtime import stream as stream_module
    held = []

    class WatchedThread(threading.Thread):
        def start(self):
            held.append(stream_module._cv._is_owned())
            super().start()

    monkeypatch.setattr(stream_module.threading, "Thread", WatchedThread)
    s = ac.Stream()
    got = []
    s.enqueue(got.append, 1)
    s.synchronize()
    assert got == [1] and held == [False]


def test_host_functions_and_stream_null():
    s = ac.Stream()
    got = []
    s.launch_host_func(got.append, 42)
    s.synchronize()
    assert got == [42]
    assert ac.Stream.null is ac.default_stream


def test_events_measure_elapsed_time():
    s = ac.Stream()
    start, end = ac.Event(), ac.Event()
    start.record(s)
    s.enqueue(time.sleep, 0.05)
    end.record(s)
    end.synchronize()
    assert end.query() and end.done
    ms = ac.get_elapsed_time(start, end)
    assert 40 <= ms < 5000
    a, b = ac.Event(), ac.Event()
    a.record()
    b.record()
    assert ac.get_elapsed_time(a, b) >= 0


def test_event_query_follows_the_last_record():
    s = ac.Stream()
    e = ac.Event()
    assert e.query()                         # never recorded: complete
    gate = threading.Event()
    s.enqueue(gate.wait, WAIT)
    e.record(s)
    assert not e.query()
    gate.set()
    e.synchronize()
    assert e.query()


def test_unrecorded_events_cannot_be_timed():
    with pytest.raises(ac.CudaError):
        ac.get_elapsed_time(ac.Event(), ac.Event())
    e = ac.Event(disable_timing=True)
    e.record()
    with pytest.raises(ac.CudaError):
        ac.get_elapsed_time(e, e)


def test_event_on_a_failed_stream_does_not_hang():
    s = ac.Stream()
    s.enqueue(lambda: 1 / 0)
    e = s.record()
    with pytest.raises(ZeroDivisionError):   # skipped, complete, and reporting the error
        e.synchronize()
    e.synchronize()                          # reported once
    with pytest.raises(ac.CudaError):
        ac.get_elapsed_time(e, e)
    s.synchronize()


def test_stream_waits_for_an_event_of_another_stream():
    s1, s2 = ac.Stream(non_blocking=True), ac.Stream(non_blocking=True)
    gate, order = threading.Event(), []
    s1.enqueue(gate.wait, WAIT)
    s1.enqueue(order.append, "s1")
    e = s1.record()
    s2.wait_event(e)
    s2.enqueue(order.append, "s2")
    time.sleep(0.1)
    assert order == []
    gate.set()
    s2.synchronize()
    assert order == ["s1", "s2"]


def test_get_waits_for_stream_work_and_reports_its_errors():
    s = ac.Stream()
    d = ac.zeros(4, np.int32)
    gate = threading.Event()
    s.enqueue(gate.wait, WAIT)
    s.enqueue(d.fill, 5)
    run_in_thread(lambda: (time.sleep(0.05), gate.set()))
    assert d.get().tolist() == [5] * 4       # the default stream waits for s's earlier work
    s.enqueue(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        d.get(stream=s)


def test_a_full_stream_makes_the_host_wait():
    # as a GPU's launch queue: a stream holds at most MAX_PENDING pieces of work
    from anycuda.runtime import stream as stream_module
    s = ac.Stream()
    gate, done = threading.Event(), []
    s.enqueue(gate.wait, WAIT)
    t = run_in_thread(lambda: [s.enqueue(done.append, i) for i in range(stream_module.MAX_PENDING + 100)])
    deadline = time.monotonic() + WAIT
    while s._state.issued < stream_module.MAX_PENDING and time.monotonic() < deadline:
        time.sleep(0.01)
    t.join(0.2)
    assert t.is_alive() and s._state.issued == stream_module.MAX_PENDING     # held back, nothing lost
    gate.set()
    t.join(WAIT)
    s.synchronize()
    assert done == list(range(stream_module.MAX_PENDING + 100))


def test_work_queued_while_a_blocking_call_runs_waits_for_it():
    # an idle default stream lets a blocking call run in its caller; what another thread
    # queues meanwhile still comes after it
    default_stream.synchronize()
    started, gate, order = threading.Event(), threading.Event(), []
    t = run_in_thread(lambda: default_stream.call(held_work(started, gate, order, "blocking")))
    assert started.wait(WAIT)
    default_stream.enqueue(order.append, "queued later")
    s = ac.Stream()
    s.enqueue(order.append, "blocking stream, later")     # waits for the default stream's work
    time.sleep(0.1)
    assert order == [] and not default_stream.query()
    gate.set()
    t.join(WAIT)
    default_stream.synchronize()
    s.synchronize()
    assert order[0] == "blocking" and sorted(order[1:]) == ["blocking stream, later", "queued later"]


@pytest.mark.parametrize("per_thread", [False, True])
def test_the_python_api_on_per_thread_default_streams(monkeypatch, rng, per_thread):
    """ANYCUDA_PER_THREAD_DEFAULT_STREAM=1: the Python API's work without a stream goes to the
    calling thread's own default stream, so one thread's held work does not hold another's
    copies (on the legacy default stream it does: that waits for every blocking stream)."""
    monkeypatch.setenv("ANYCUDA_PER_THREAD_DEFAULT_STREAM", "1" if per_thread else "0")
    gate, started = threading.Event(), threading.Event()
    holder = run_in_thread(lambda: per_thread_stream().enqueue(held_work(started, gate, [], "held")))
    assert started.wait(WAIT)
    x = rng.standard_normal(1000).astype(np.float32)
    got = []
    copier = run_in_thread(lambda: got.append(ac.asarray(x).get()))
    copier.join(1.0)
    assert copier.is_alive() != per_thread       # blocked behind the held stream on the legacy one
    gate.set()
    copier.join(WAIT)
    holder.join(WAIT)
    assert len(got) == 1 and (got[0] == x).all()
    ac.synchronize()


SCALE_PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry scale(.param .u64 pa, .param .f32 pk, .param .u32 pn)
{
  .reg .pred %p<2>; .reg .b32 %r<6>; .reg .f32 %f<4>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [pa]; ld.param.f32 %f1, [pk]; ld.param.u32 %r1, [pn];
  mov.u32 %r2, %tid.x; mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x;
  mad.lo.s32 %r2, %r3, %r4, %r2;
  setp.ge.u32 %p1, %r2, %r1;
  @%p1 bra DONE;
  mul.wide.u32 %rd2, %r2, 4; add.s64 %rd3, %rd1, %rd2;
  ld.global.f32 %f2, [%rd3];
  fma.rn.f32 %f3, %f2, %f1, 0f3F800000;
  st.global.f32 [%rd3], %f3;
DONE:
  ret;
}
"""


def test_eight_threads_on_per_thread_default_streams_get_the_serial_results(monkeypatch, rng):
    monkeypatch.setenv("ANYCUDA_PER_THREAD_DEFAULT_STREAM", "1")
    scale = ac.RawModule(ptx=SCALE_PTX, name="scale.ptx").get_function("scale")      # a[i] = a[i] * k + 1
    inputs = [rng.standard_normal(5000).astype(np.float32) for _ in range(8)]
    results = [None] * 8

    def work(t):
        a = ac.asarray(inputs[t])
        for k in range(1, 11):
            scale(((a.size + 255) // 256,), (256,), (a, np.float32(k), np.uint32(a.size)))
        results[t] = a.get()
    threads = [run_in_thread(lambda t=t: work(t)) for t in range(8)]
    for t in threads:
        t.join(60)
    for t in range(8):
        want = inputs[t].copy()
        for k in range(1, 11):
            want = (want.astype(np.float64) * k + 1.0).astype(np.float32)     # fma: one rounding
        np.testing.assert_allclose(results[t], want, rtol=1e-5)
