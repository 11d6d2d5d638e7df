"""Programs built with `nvcc --default-stream per-thread`: NVIDIA's runtime (static or shared)
then calls the per-thread driver entry points (cuLaunchKernel_ptsz, cuMemcpyHtoD_v2_ptds...,
handed out by cuGetProcAddress under CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), where
stream 0 is the calling host thread's own stream. Eight host threads get the serial results
computed here; a kernel that waits for a flag set by another thread's later kernel finishes
only when the two default streams are independent, and the same program built without the
flag (the legacy default stream, shared) still answers, reporting "serialised" instead.
Also here: each thread's default stream captured into graphs, a driver-API program linking the
per-thread names, cuGetProcAddress's answers by flag, and resources that stay flat (100,000
launches, 10,000 allocations, 180 ended threads) in an unmodified program."""
import ctypes
import subprocess
import threading

import numpy as np
import pytest
from test_async_launches import _driver_spin, _not_ready, _read_int, flag, module   # noqa: F401 -- fixtures
from test_binaries import HERE, MODES, NVCC, _require, run

from anycuda.driver import api

pytestmark = pytest.mark.skipif(NVCC is None, reason="needs nvcc (the CUDA toolkit) on PATH")

PER_THREAD = MODES["ptds"]
BUILDS = {
    "legacy": [],
    "ptds": PER_THREAD,
    "ptds-shared": PER_THREAD + MODES["shared"],
    "ptds-macro": ["-DCUDA_API_PER_THREAD_DEFAULT_STREAM"],     # the macro --default-stream sets
}


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    """program(build) -> tests/programs/per_thread_default.cu built by nvcc that way (once)."""
    out = tmp_path_factory.mktemp("per_thread")
    built = {}

    def build(kind: str):
        _require("shared" if "shared" in kind else "static")
        if kind not in built:
            exe = out / f"per_thread_default-{kind}"
            r = subprocess.run([NVCC, *BUILDS[kind], "-o", str(exe), str(HERE / "programs" / "per_thread_default.cu")],
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr
            built[kind] = exe
        return built[kind]
    return build


def expected_checksum(t: int, seed: int, n: int, rounds: int) -> int:
    """What rounds_of() in the program computes, in numpy (uint32 arithmetic wraps as in C)."""
    i = np.arange(n, dtype=np.uint32)
    x = (np.uint32(seed) + np.uint32(7919 * t) + i) * np.uint32(2654435761)
    y = np.zeros(n, np.uint32)
    for r in range(rounds):
        x = x * np.uint32(2 * r + 1) + np.uint32(t) + i
        if r % 4 == 1:
            y = x.copy()
        if r % 4 == 3:
            x = x ^ y[::-1]
        if r % 5 == 4:
            x[r:r + 3] = 0xFFFFFFFF
    weights = (i % 13 + 1).astype(np.uint64)
    return int(((x ^ i).astype(np.uint64) * weights).sum())


@pytest.mark.parametrize("kind", list(BUILDS))
def test_eight_host_threads_on_their_default_streams_get_the_serial_results(program, kind):
    seed, threads, rounds = int(np.random.default_rng().integers(1, 2**31)), 8, 24
    r = run(program(kind), "rounds", seed, threads, rounds)
    want = [f"thread {t} {expected_checksum(t, seed, 1000 + 37 * t, rounds)}" for t in range(threads)]
    assert r.stdout.splitlines() == want


@pytest.mark.parametrize("kind, verdict", [("ptds", "independent"), ("ptds-shared", "independent"),
                                           ("ptds-macro", "independent"), ("legacy", "serialised")])
def test_default_streams_of_two_threads_are_independent_only_per_thread(program, kind, verdict):
    """A waits at most 3 s for B's flag; B's kernel is launched after A's launch returned."""
    r = run(program(kind), "independence", 3000)
    assert r.stdout.splitlines() == [f"{verdict} flag 1"]


def expected_captured(t: int, runs: int) -> int:
    """What captured_of() in the program computes: its graph's work run `runs` times, in numpy."""
    n = 500 + t
    i = np.arange(n, dtype=np.uint32)
    x = np.zeros(n, np.uint32)
    for _ in range(runs):
        x = x * np.uint32(3) + np.uint32(t) + i
        x[1] = 0
        x = x * np.uint32(5) + np.uint32(1) + i
    return int((x.astype(np.uint64) * (i.astype(np.uint64) + 1)).sum())


@pytest.mark.parametrize("kind", ["ptds", "legacy"])
def test_threads_capture_their_default_stream_into_graphs(program, kind):
    """Four threads each capture a graph on stream 0 and launch it three times; under the
    legacy default stream the capture is refused, as CUDA refuses it."""
    lines = run(program(kind), "capture", 4, 3).stdout.splitlines()
    if kind == "legacy":
        assert lines == [f"thread {t} cudaErrorStreamCaptureUnsupported" for t in range(4)]
    else:
        assert lines == [f"thread {t} {expected_captured(t, 3)}" for t in range(4)]


PROC_ADDRESS_PROGRAM = r'''
import ctypes
from anycuda.shim.declarations import PER_THREAD_NAMES
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
def address(name):
    return ctypes.cast(getattr(cuda, name), ctypes.c_void_p).value
def lookup(name, flags, version=13000):
    fp, status = ctypes.c_void_p(), ctypes.c_int(-1)
    assert cuda.cuGetProcAddress_v2(name.encode(), ctypes.byref(fp), version, ctypes.c_ulonglong(flags),
                                    ctypes.byref(status)) == 0 and status.value == 0, name
    return fp.value
exported = [(base, variant) for base, variant in PER_THREAD_NAMES.items() if hasattr(cuda, base)]
for base, variant in exported:
    assert hasattr(cuda, variant), variant          # every implemented function has its per-thread name
for asked, base in [("cuLaunchKernel", "cuLaunchKernel"), ("cuMemcpyHtoD", "cuMemcpyHtoD_v2"),
                    ("cuStreamSynchronize", "cuStreamSynchronize"), ("cuEventRecord", "cuEventRecord"),
                    ("cuMemsetD32", "cuMemsetD32_v2"), ("cuMemcpyAsync", "cuMemcpyAsync")]:
    assert lookup(asked, 0) == address(base), asked                      # CU_GET_PROC_ADDRESS_DEFAULT
    assert lookup(asked, 1) == address(base), asked                      # ..._LEGACY_STREAM
    assert lookup(asked, 2) == address(PER_THREAD_NAMES[base]), asked   # ..._PER_THREAD_DEFAULT_STREAM
assert lookup("cuMemAlloc", 2) == address("cuMemAlloc_v2")      # no stream: one function for both
print("lookups OK", len(exported))
'''


def test_get_proc_address_hands_out_the_per_thread_variants(tmp_path):
    from test_shim import _python_under_anycuda
    r = _python_under_anycuda(tmp_path, PROC_ADDRESS_PROGRAM, "lookups OK")
    assert int(r.stdout.split()[-1]) >= 40      # launches, copies, memsets, streams, events, graphs


DRIVER_KERNELS = r"""
extern "C" __global__ void wait_for_flag(volatile int *flag, int *outcome, unsigned long long timeout_ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    if (*flag) { *outcome = 1; return; }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < timeout_ns);
  *outcome = 2;
}
extern "C" __global__ void set_flag(volatile int *flag) { *flag = 1; }
extern "C" __global__ void scale(int *p, int factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= factor;
}
"""


@pytest.mark.parametrize("macro, verdict", [(True, "independent"), (False, "serialised")])
def test_driver_program_linking_the_per_thread_names(tmp_path, macro, verdict):
    """A C program on the driver API alone, built with -DCUDA_API_PER_THREAD_DEFAULT_STREAM, links
    cuLaunchKernel_ptsz and the others from libcuda.so.1 by name; without the macro, the plain names."""
    from conformance import load_cuda
    from test_shim import _build_and_run
    load_cuda("arith_int")                   # skips when there is no CUDA C++ compiler
    from anycuda.cudac import compile_to_ptx
    ptx = tmp_path / "kernels.ptx"
    ptx.write_text(compile_to_ptx(DRIVER_KERNELS))
    flags = ["-DCUDA_API_PER_THREAD_DEFAULT_STREAM"] if macro else []
    r = _build_and_run(tmp_path, "driver_per_thread", ptx, args=["3000"], cflags=flags + ["-pthread"])
    assert r.stdout.splitlines() == [f"{verdict} flag 1", "wrong 0"]
    symbols = subprocess.run(["nm", "-D", "--undefined-only", str(tmp_path / "driver_per_thread")],
                             capture_output=True, text=True).stdout
    assert ("cuLaunchKernel_ptsz" in symbols) == macro and ("cuMemcpyHtoD_v2_ptds" in symbols) == macro


def test_unmodified_program_keeps_memory_and_threads_flat(tmp_path):
    """100,000 launches and 10,000 cudaMalloc/cudaMemset/cudaFree cycles through libcuda.so.1 keep
    the resident set flat; 180 host threads that each used their default stream and ended leave
    no stream worker behind."""
    exe = tmp_path / "resources"
    r = subprocess.run([NVCC, *PER_THREAD, "-o", str(exe), str(HERE / "programs" / "resources.cu")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = run(exe).stdout.splitlines()
    grown = {line.split(" grew ")[0]: int(line.split(" grew ")[1].split()[0]) for line in lines if " grew " in line}
    assert grown["launches"] < 16 << 10 and grown["cycles"] < 16 << 10 and grown["threads"] < 16 << 10, lines
    assert int(lines[2].split(", ")[1].split()[0]) <= 2, lines          # threads left over
    assert lines[3] == f"sum {sum(range(20)) + sum(range(180))}"


def _in_thread(fn):
    """Run fn() on a new host thread with the primary context current; the thread (started)."""
    ctx = api.cuDevicePrimaryCtxRetain(0)

    def body():
        api.cuCtxSetCurrent(ctx)
        fn()
    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t


def test_per_thread_calls_mean_their_threads_stream_and_blocking_copies_wait_for_it_alone(module, flag):
    """Through the per-thread entry points' path (api.call_with_per_thread_default): stream 0 is
    the calling thread's stream, and a blocking copy waits for that stream only; the same copy
    on the legacy stream waits for every blocking stream, the other thread's included."""
    launched = []
    spinning = _in_thread(lambda: launched.append(api.call_with_per_thread_default(_driver_spin, module, flag, 0)))
    spinning.join(60)                                     # launched: the kernel waits for the flag
    src, dst = ctypes.c_int(42), ctypes.c_int(-1)
    per_thread = _in_thread(lambda: api.call_with_per_thread_default(
        api.cuMemcpy, ctypes.addressof(dst), ctypes.addressof(src), 4))
    per_thread.join(60)
    assert not per_thread.is_alive() and dst.value == 42  # not held by the spinning kernel
    assert api.call_with_per_thread_default(_not_ready, api.cuStreamQuery, 0) is False      # ours: empty
    src.value = 7
    legacy = _in_thread(lambda: api.cuMemcpy(ctypes.addressof(dst), ctypes.addressof(src), 4))
    legacy.join(0.5)
    assert legacy.is_alive() and dst.value == 42          # waits for the other thread's kernel
    flag.set()
    legacy.join(60)
    assert not legacy.is_alive() and dst.value == 7
    (mod, seen), = launched
    api.cuCtxSynchronize()
    assert _read_int(seen) == 1          # the kernel was still waiting when the flag came: never held up
    api.cuMemFree(seen)
    api.cuModuleUnload(mod)


def test_per_thread_stream_captures_and_joins_captures_by_events(context):
    """The per-thread default stream (by handle) can be captured, its capture belongs to its
    thread alone, and it joins another stream's capture by waiting for a captured event."""
    ptds = api.CU_STREAM_PER_THREAD
    p = api.cuMemAlloc(16)
    api.cuMemsetD8(p, 0, 16)
    api.cuStreamBeginCapture(ptds)
    other = []
    _in_thread(lambda: other.append(api.cuStreamIsCapturing(ptds))).join(60)
    assert api.cuStreamIsCapturing(ptds) == 1 and other == [0]
    api.cuMemsetAsync(p, 5, 1, 4, ptds)                        # captured, not run
    graph = api.cuStreamEndCapture(ptds)
    assert api.cuStreamIsCapturing(ptds) == 0 and ctypes.string_at(p, 4) == b"\0" * 4
    api.cuGraphLaunch(api.cuGraphInstantiate(graph), 0)
    api.cuCtxSynchronize()
    assert ctypes.c_int.from_address(p).value == 5

    s = api.cuStreamCreate(0)
    api.cuStreamBeginCapture(s)
    fork, join = api.cuEventCreate(0), api.cuEventCreate(0)
    api.cuEventRecord(fork, s)
    api.cuStreamWaitEvent(ptds, fork)                          # joins s's capture
    assert api.cuStreamIsCapturing(ptds) == 1
    api.cuMemsetAsync(p + 4, 9, 1, 4, ptds)
    api.cuEventRecord(join, ptds)
    api.cuStreamWaitEvent(s, join)
    graph = api.cuStreamEndCapture(s)
    assert api.cuStreamIsCapturing(ptds) == 0                  # left the capture with it
    assert ctypes.c_int.from_address(p + 4).value == 0
    api.cuGraphLaunch(api.cuGraphInstantiate(graph), s)
    api.cuStreamSynchronize(s)
    assert ctypes.c_int.from_address(p + 4).value == 9
    api.cuStreamDestroy(s)
    api.cuMemFree(p)
