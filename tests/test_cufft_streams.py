"""cuFFT executions are stream work: queued on the plan's stream (cufftSetStream) in CUDA's
order, reading their input when the stream reaches them, never when the call is made."""
import ctypes
import threading

import numpy as np
import pytest

from anycuda.driver import api
from anycuda.libraries.cufft import functions
from library_calls import caller, device, peek, read

call = caller(functions.table())
C2C, R2C = 0x29, 0x2A
FORWARD, INVERSE = -1, 1
WAIT = 5.0


@pytest.fixture
def streams():
    """new() -> a driver stream handle in the current context; gate(handle) -> an Event the
    stream waits on until it is set."""
    api.cuInit(0)
    api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
    made, gates = [], []

    def new(flags=0):
        made.append(api.cuStreamCreate(flags))
        return made[-1]

    def gate(handle):
        gates.append(threading.Event())
        api.submit(handle, gates[-1].wait, WAIT)
        return gates[-1]
    yield new, gate
    for g in gates:
        g.set()
    for s in made:
        api.cuStreamSynchronize(s)
        api.cuStreamDestroy(s)


def plan1d(n, kind=C2C, batch=1):
    out = np.zeros(1, np.int32)
    call("cufftPlan1d", out.ctypes.data, n, kind, batch)
    return int(out[0])


def signal(rng, n):
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)


def test_execution_waits_for_earlier_work_and_reads_its_input_then(rng, streams):
    new, gate = streams
    s = new()
    x, later = signal(rng, 128), signal(rng, 128)
    h = plan1d(128)
    call("cufftSetStream", h, s)
    g = gate(s)
    src, dst = device(x), device(np.full(128, np.nan, np.complex64))
    call("cufftExecC2C", h, src, dst, FORWARD)
    assert np.all(np.isnan(peek(dst, 128, np.complex64)))        # the call did not run it
    # the program changes the input before the stream reaches the transform: a GPU would see it
    ctypes.memmove(src, later.ctypes.data, later.nbytes)
    g.set()
    api.cuStreamSynchronize(s)
    np.testing.assert_allclose(read(dst, 128, np.complex64), np.fft.fft(later), rtol=1e-4, atol=1e-3)


def test_forward_then_inverse_in_order_multiplies_by_n(rng, streams):
    new, gate = streams
    s = new()
    x = signal(rng, 300)
    h = plan1d(300)
    call("cufftSetStream", h, s)
    g = gate(s)
    data = device(x)
    for _ in range(3):                                           # (n^3) x after three round trips
        call("cufftExecC2C", h, data, data, FORWARD)
        call("cufftExecC2C", h, data, data, INVERSE)
    assert np.array_equal(peek(data, 300, np.complex64), x)
    g.set()
    api.cuStreamSynchronize(s)
    np.testing.assert_allclose(read(data, 300, np.complex64), x * 300.0 ** 3, rtol=1e-3, atol=1e-3 * 300.0 ** 3)


def test_set_stream_moves_later_executions_only(rng, streams):
    new, gate = streams
    s1, s2 = new(1), new(1)                                      # non-blocking: independent of stream 0
    x = signal(rng, 64)
    h = plan1d(64)
    call("cufftSetStream", h, s1)
    g1 = gate(s1)
    a, b = device(np.full(64, np.nan, np.complex64)), device(np.full(64, np.nan, np.complex64))
    src = device(x)
    call("cufftExecC2C", h, src, a, FORWARD)                     # held behind s1's gate
    call("cufftSetStream", h, s2)
    call("cufftExecC2C", h, src, b, FORWARD)                     # s2 is free
    api.cuStreamSynchronize(s2)
    np.testing.assert_allclose(read(b, 64, np.complex64), np.fft.fft(x), rtol=1e-4, atol=1e-3)
    assert np.all(np.isnan(read(a, 64, np.complex64)))
    g1.set()
    api.cuStreamSynchronize(s1)
    np.testing.assert_allclose(read(a, 64, np.complex64), np.fft.fft(x), rtol=1e-4, atol=1e-3)


def test_legacy_default_stream_orders_against_blocking_streams(rng, streams):
    """A plan left on stream 0 (the legacy default stream) queues its transform there, where
    it runs after the earlier work of every blocking stream."""
    new, gate = streams
    s = new()
    x = signal(rng, 32)
    h = plan1d(32)
    g = gate(s)
    src, dst = device(x), device(np.full(32, np.nan, np.complex64))
    call("cufftExecC2C", h, src, dst, FORWARD)
    assert np.all(np.isnan(peek(dst, 32, np.complex64))), "ran before the blocking stream's earlier work"
    g.set()
    np.testing.assert_allclose(read(dst, 32, np.complex64), np.fft.fft(x), rtol=1e-4, atol=1e-3)


def test_destroying_a_plan_leaves_its_queued_executions_to_finish(rng, streams):
    new, gate = streams
    s = new()
    x = rng.standard_normal((4, 50)).astype(np.float32)
    h = plan1d(50, R2C, batch=4)
    call("cufftSetStream", h, s)
    g = gate(s)
    dst = device(np.full(4 * 26, np.nan, np.complex64))
    call("cufftExecR2C", h, device(x), dst)
    call("cufftDestroy", h)
    g.set()
    api.cuStreamSynchronize(s)
    np.testing.assert_allclose(read(dst, 4 * 26, np.complex64).reshape(4, 26), np.fft.rfft(x), rtol=1e-4, atol=1e-3)
