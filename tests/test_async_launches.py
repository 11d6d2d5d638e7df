"""Launches return at once on every stream, the default stream included, as on a GPU:
kernels, copies and host functions run in stream order on anycuda's workers while the host
goes on, and synchronising calls wait and report what the work did.

The kernels here wait for a flag in page-locked host memory (cuMemAllocHost: mapped, as all
memory is on the CPU) that the host sets only after the launch call has returned: a launch
that blocked would leave the kernel polling until its bound, and it would then record that
it gave up (seen = -1) instead of the flag. Nothing is asserted on timings.

Host threads at once: 8 threads, each with a stream of its own or with its per-thread default
stream, launch, copy and synchronise; every result must equal the serial one and no atomic
update may be lost. The CI run is short; ANYCUDA_STRESS_SECONDS=600 makes each of those
tests a campaign of that many seconds (rounds repeated until the time is up).
"""
import ctypes
import os
import threading
import time

import numpy as np
import pytest

import anycuda as ac
from anycuda.driver import api
from anycuda.runtime.errors import CudaError, CUresult

BOUND = 1 << 33          # polls before a kernel gives up waiting (tens of seconds)
NOT_READY = CUresult.CUDA_ERROR_NOT_READY

SOURCE = r"""
extern "C" __global__ void wait_for_flag(volatile int *flag, int *seen, long long bound) {
  long long i = 0;
  while (*flag == 0 && i < bound) ++i;
  *seen = *flag == 0 ? -1 : *flag;
}

extern "C" __global__ void axpy(const int *x, int *y, int a, int n, unsigned long long *total) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = a * x[i] + y[i];
    atomicAdd(total, 1ull);
  }
}

extern "C" __global__ void empty() {}

extern "C" __global__ void store_far(int *p) { p[(size_t)1 << 40] = 1; }
"""


@pytest.fixture(scope="module")
def module():
    return ac.RawModule(code=SOURCE)


class HostFlag:
    """An int in page-locked host memory that kernels poll."""

    def __init__(self):
        self.ptr = api.cuMemAllocHost(4)
        self.cell = ctypes.c_int.from_address(self.ptr)
        self.cell.value = 0

    def set(self, value: int = 1):
        self.cell.value = value

    def free(self):
        api.cuMemFreeHost(self.ptr)


@pytest.fixture
def flag(context):
    f = HostFlag()
    yield f
    f.set()              # whatever the test did, no kernel is left waiting
    api.cuCtxSynchronize()
    f.free()


def _not_ready(call, *args) -> bool:
    try:
        call(*args)
    except CudaError as e:
        if e.code == NOT_READY:
            return True
        raise
    return False


# ---------------------------------------------------------------- the Python API

STREAMS = {
    "default": lambda: None,
    "created": lambda: ac.Stream(),
    "non-blocking": lambda: ac.Stream(non_blocking=True),
    "per-thread": lambda: ac.Stream.ptds,
}


@pytest.mark.parametrize("kind", STREAMS)
def test_python_launch_returns_while_the_kernel_waits_for_the_host(module, flag, kind):
    stream = STREAMS[kind]()
    queue = stream or ac.default_stream
    seen = ac.zeros(1, np.int32)
    module.get_function("wait_for_flag")((1,), (1,), (flag.ptr, seen, np.int64(BOUND)), stream=stream)
    event = queue.record()
    assert not queue.query() and not event.query()      # the kernel is running: it waits for the flag
    flag.set(7)
    event.synchronize()
    assert queue.query() and event.query()
    assert seen.get(stream=stream)[0] == 7


def test_a_blocking_copy_waits_for_the_kernel(module, flag):
    seen = ac.zeros(1, np.int32)
    module.get_function("wait_for_flag")((1,), (1,), (flag.ptr, seen, np.int64(BOUND)))
    setter = threading.Timer(0.05, flag.set, (5,))
    setter.start()
    try:
        assert seen.get()[0] == 5        # a copy that did not wait would read 0
    finally:
        setter.join()


def test_python_fault_is_reported_by_the_next_synchronising_call(module):
    out = ac.zeros(4, np.int32)
    module.get_function("store_far")((1,), (1,), (out,))      # returns at once
    with pytest.raises(CudaError) as e:
        ac.synchronize()
    assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS and "store_far" in str(e.value)
    module.get_function("axpy")((1,), (4,), (ac.asarray(np.ones(4, np.int32)), out, 3, 4, ac.zeros(1, np.uint64)))
    assert out.get().tolist() == [3, 3, 3, 3]      # reported once: later work runs


# ---------------------------------------------------------------- the driver API

def _driver_spin(module, flag, stream):
    """Launch wait_for_flag through the driver API on `stream`; the device int it writes."""
    mod = api.cuModuleLoadData(module.ptx.encode())
    fn = api.cuModuleGetFunction(mod, "wait_for_flag")
    seen = api.cuMemAlloc(4)
    params = np.array([flag.ptr, seen, BOUND], np.uint64).tobytes()
    api.cuLaunchKernel(fn, (1, 1, 1), (1, 1, 1), 0, stream, params)
    return mod, seen


def _read_int(device_ptr) -> int:
    out = ctypes.c_int(-2)
    api.cuMemcpy(ctypes.addressof(out), device_ptr, 4)
    return out.value


@pytest.mark.parametrize("which", ["null", "legacy", "per-thread", "created", "non-blocking"])
def test_driver_launch_returns_and_queries_answer_not_ready(module, flag, which):
    stream = {"null": 0, "legacy": api.CU_STREAM_LEGACY, "per-thread": api.CU_STREAM_PER_THREAD}.get(which)
    if stream is None:
        stream = api.cuStreamCreate(int(which == "non-blocking"))
    mod, seen = _driver_spin(module, flag, stream)
    event = api.cuEventCreate(0)
    api.cuEventRecord(event, stream)
    assert _not_ready(api.cuStreamQuery, stream) and _not_ready(api.cuEventQuery, event)
    flag.set(3)
    api.cuEventSynchronize(event)
    assert not _not_ready(api.cuStreamQuery, stream)
    assert _read_int(seen) == 3
    api.cuEventDestroy(event)
    api.cuMemFree(seen)
    api.cuModuleUnload(mod)
    if which in ("created", "non-blocking"):
        api.cuStreamDestroy(stream)


def test_the_legacy_stream_waits_for_the_per_thread_stream(module, flag):
    mod, seen = _driver_spin(module, flag, api.CU_STREAM_PER_THREAD)
    target = api.cuMemAlloc(4)
    api.cuMemsetAsync(target, 9, 1, 4, 0)                    # legacy: after the per-thread kernel
    independent = api.cuStreamCreate(1)                      # CU_STREAM_NON_BLOCKING: not held back
    api.cuMemsetAsync(target, 4, 1, 4, independent)
    api.cuStreamSynchronize(independent)
    assert _not_ready(api.cuStreamQuery, 0) and _not_ready(api.cuStreamQuery, api.CU_STREAM_PER_THREAD)
    flag.set()
    api.cuStreamSynchronize(0)
    assert _read_int(target) == 9 and _read_int(seen) == 1
    api.cuStreamDestroy(independent)
    api.cuMemFree(target)
    api.cuMemFree(seen)
    api.cuModuleUnload(mod)


def test_per_thread_streams_of_two_threads_are_independent(module, flag):
    mod, seen = _driver_spin(module, flag, api.CU_STREAM_PER_THREAD)
    other = []

    def second_thread():
        api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
        p = api.cuMemAlloc(4)
        api.cuMemsetAsync(p, 11, 1, 4, api.CU_STREAM_PER_THREAD)
        api.cuStreamSynchronize(api.CU_STREAM_PER_THREAD)     # its own stream: not held by the first's
        other.append(_read_value_without_waiting(p))
    t = threading.Thread(target=second_thread)
    t.start()
    t.join(60)
    assert other == [11] and _not_ready(api.cuStreamQuery, api.CU_STREAM_PER_THREAD)
    flag.set()
    api.cuStreamSynchronize(api.CU_STREAM_PER_THREAD)
    assert _read_int(seen) == 1
    api.cuMemFree(seen)
    api.cuModuleUnload(mod)


def _read_value_without_waiting(device_ptr) -> int:
    """A device int read through the one address space (a blocking copy on the legacy stream
    would wait for every blocking stream)."""
    return ctypes.c_int.from_address(device_ptr).value


def test_driver_fault_is_sticky_until_the_primary_context_is_reset(module, context):
    mod = api.cuModuleLoadData(module.ptx.encode())
    p = api.cuMemAlloc(16)
    api.cuLaunchKernel(api.cuModuleGetFunction(mod, "store_far"), (1, 1, 1), (1, 1, 1), 0, 0,
                       np.array([p], np.uint64).tobytes())           # returns at once
    with pytest.raises(CudaError) as e:
        api.cuCtxSynchronize()
    assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    with pytest.raises(CudaError) as again:
        api.cuMemAlloc(16)
    assert again.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    # named (cuCtxSynchronize_v2, as CUDA 13's runtime calls it), the context is as unusable
    for _ in range(2):
        with pytest.raises(CudaError) as named:
            api.cuCtxSynchronize(api.cuCtxGetCurrent())
        assert named.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    api.cuDevicePrimaryCtxReset(0)
    api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
    x = np.arange(64, dtype=np.int32)
    dx, dy, total = api.cuMemAlloc(256), api.cuMemAlloc(256), api.cuMemAlloc(8)
    api.cuMemcpy(dx, x.ctypes.data, 256)
    api.cuMemsetD32(dy, 1, 64)
    api.cuMemsetD32(total, 0, 2)
    mod = api.cuModuleLoadData(module.ptx.encode())
    params = np.array([dx, dy], np.uint64).tobytes() + np.array([2, 64], np.int32).tobytes() \
        + np.array([total], np.uint64).tobytes()
    api.cuLaunchKernel(api.cuModuleGetFunction(mod, "axpy"), (1, 1, 1), (64, 1, 1), 0, 0, params)
    got = np.zeros(64, np.int32)
    api.cuMemcpy(got.ctypes.data, dy, 256)
    assert (got == 2 * x + 1).all()
    for q in (dx, dy, total):
        api.cuMemFree(q)
    api.cuModuleUnload(mod)


# ---------------------------------------------------------------- host threads at once

STRESS_SECONDS = float(os.environ.get("ANYCUDA_STRESS_SECONDS", "0") or 0)
THREADS = 8


def _thread_rounds(module, stream_of, seed: int, rounds: int, deadline: float, failures: list):
    """One host thread's work: arrays in, three launches, results out, on its stream; each
    round checked against numpy. Returns the number of updates its kernels counted."""
    rng = np.random.default_rng(seed)
    axpy = module.get_function("axpy")
    total = ac.zeros(1, np.uint64)
    expected_total = 0
    r = 0
    while r < rounds or time.monotonic() < deadline:
        stream = stream_of()
        n = int(rng.integers(1, 3000))
        x = rng.integers(-1000, 1000, n, dtype=np.int32)
        y = rng.integers(-1000, 1000, n, dtype=np.int32)
        dx, dy = ac.empty(n, np.int32), ac.empty(n, np.int32)
        dx.set(x, stream=stream)
        dy.set(y, stream=stream)
        want = y.copy()
        for a in rng.integers(-50, 50, 3, dtype=np.int32):
            axpy(((n + 127) // 128,), (128,), (dx, dy, int(a), n, total), stream=stream)
            want = a * x + want
            expected_total += n
        got = dy.get(stream=stream)
        if not (got == want).all():
            failures.append(f"thread {seed}: round {r} wrong at {int(np.argmax(got != want))}")
            return
        r += 1
    ac.synchronize()
    counted = int(total.get()[0])
    if counted != expected_total:
        failures.append(f"thread {seed}: {counted} updates counted, {expected_total} made (lost updates)")


@pytest.mark.parametrize("kind", ["own stream", "per-thread default stream"])
def test_eight_host_threads_get_the_serial_results(module, kind):
    stream_of = (lambda: ac.Stream()) if kind == "own stream" else (lambda: ac.Stream.ptds)
    failures = []
    deadline = time.monotonic() + STRESS_SECONDS
    seeds = np.random.SeedSequence().generate_state(THREADS)
    threads = [threading.Thread(target=_thread_rounds, args=(module, stream_of, int(s), 4, deadline, failures))
               for s in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300 + STRESS_SECONDS)
    assert not any(t.is_alive() for t in threads), "a host thread is stuck (deadlock)"
    assert not failures, failures


# ---------------------------------------------------------------- resources stay flat

def _rss() -> int:
    """Resident bytes of this process."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_many_launches_keep_memory_flat(module):
    empty = module.get_function("empty")
    for _ in range(10_000):          # warm: compiled, records and queues at their size
        empty((1,), (1,), ())
    ac.synchronize()
    before = _rss()
    for _ in range(90_000):          # 100,000 in all, never waited for but by the full queue
        empty((1,), (1,), ())
    ac.synchronize()
    grown = _rss() - before
    assert grown < 16 << 20, f"100,000 launches grew the process by {grown >> 20} MiB"


def test_many_allocations_keep_memory_flat(context):
    def cycles(n):
        for _ in range(n):
            p = api.cuMemAlloc(1 << 18)
            api.cuMemsetD8(p, 1, 1 << 18)        # touched: its pages are really taken
            api.cuMemFree(p)
            a = ac.empty(1 << 16, np.float32)
            a.fill(1.0)
            del a
    cycles(1_000)
    before = _rss()
    cycles(9_000)                    # 10,000 cycles in all, of each kind
    grown = _rss() - before
    assert grown < 16 << 20, f"10,000 alloc/free cycles grew the process by {grown >> 20} MiB"


def test_unloading_a_module_frees_its_code(module, context):
    import gc
    import weakref
    mod = api.cuModuleLoadData(module.ptx.encode())
    fn = api.cuModuleGetFunction(mod, "axpy")
    program = weakref.ref(api._get(mod, api.Module).program)
    code = weakref.ref(api._get(fn, api.Function).image._jit)        # its linked machine code
    p = api.cuMemAlloc(16)
    total = api.cuMemAlloc(8)
    params = np.array([p, p], np.uint64).tobytes() + np.array([1, 4], np.int32).tobytes() \
        + np.array([total], np.uint64).tobytes()
    api.cuLaunchKernel(fn, (1, 1, 1), (4, 1, 1), 0, 0, params)
    api.cuModuleUnload(mod)          # waits for the launch, then lets go
    with pytest.raises(CudaError):
        api.cuLaunchKernel(fn, (1, 1, 1), (4, 1, 1), 0, 0, params)      # its functions went with it
    gc.collect()
    assert program() is None and code() is None
    api.cuMemFree(p)
    api.cuMemFree(total)


def test_work_queued_at_exit_finishes_and_its_printf_appears(tmp_path):
    import subprocess
    import sys
    script = tmp_path / "exit_early.py"
    script.write_text(
        "import anycuda as ac\n"
        "k = ac.RawModule(code='extern \"C\" __global__ void hi(int v) { printf(\"value %d\\\\n\", v); }')"
        ".get_function('hi')\n"
        "for v in range(3):\n"
        "    k((1,), (1,), (v,))\n"
        "print('host done', flush=True)\n")      # exits without synchronising
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-3:] == ["value 0", "value 1", "value 2"], r.stdout


def test_busy_counts_queued_work_kept_errors_and_captures(context):
    """runtime/stream.busy, which libnccl's C front reads to know that nothing could come
    before a collective it answers at once: work queued and unfinished, errors kept until
    reported, and stream captures under way each count; finished, reported and ended, they
    count no more."""
    from anycuda.runtime import stream as streams
    ac.synchronize()
    base = streams.busy.value
    gate = threading.Event()
    s = ac.Stream()
    s.enqueue(gate.wait)
    s.enqueue(lambda: None)
    assert streams.busy.value == base + 2
    gate.set()
    s.synchronize()
    assert streams.busy.value == base

    def fail():
        raise RuntimeError("kept until reported")
    s.enqueue(fail)
    while not s.query():
        time.sleep(0.001)
    assert streams.busy.value == base + 1           # finished, its error kept
    with pytest.raises(RuntimeError):
        s.synchronize()
    assert streams.busy.value == base

    handle = api.cuStreamCreate(0)
    api.cuStreamBeginCapture(handle)
    assert streams.busy.value == base + 1
    api.cuGraphDestroy(api.cuStreamEndCapture(handle))
    assert streams.busy.value == base
    api.cuStreamDestroy(handle)
