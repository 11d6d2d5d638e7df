"""A time limit for launches (runtime/watchdog.py, ANYCUDA_LAUNCH_TIMEOUT): kernels that
never end — a loop whose test never changes, one through barriers, a spin on a flag in
global memory, a loop of device malloc/free and printf — fail with CUDA_ERROR_LAUNCH_TIMEOUT
soon after the limit instead of hanging, the process goes on, and the next launches compute
what numpy does. Through the driver API the error is sticky until the primary context is
reset, as CUDA's is.

The scenarios run in a process of their own under a time limit of the test's: a regression
is a hang, whose threads would keep the test run from ending."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from anycuda.driver import api
from anycuda.runtime import watchdog
from anycuda.runtime.errors import CUresult

LIMIT_S = 300
TIMEOUT_S = 0.5

SOURCE = r"""
extern "C" __global__ void endless(int n, int* out) {
    int s = 0;
    while (n > 0) { s += n; if (s == 12345678) out[0] = s; }
    out[threadIdx.x] = s;
}
extern "C" __global__ void endless_through_barriers(int n, int* out) {
    __shared__ int ring[256];
    int t = threadIdx.x, s = t;
    while (n > 0) {
        ring[t] = s;
        __syncthreads();
        s += ring[(t + 1) % blockDim.x];
        __syncthreads();
    }
    out[t] = s;
}
extern "C" __global__ void spin_on_global_flag(volatile int* flag, int* out) {
    while (*flag == 0) {}
    out[threadIdx.x] = 1;
}
extern "C" __global__ void endless_malloc_and_printf(int n, int* out) {
    long turns = 0;
    while (n > 0) {
        int* p = (int*)malloc(64);
        if (p) { p[0] = (int)turns; free(p); }
        if (threadIdx.x == 0 && blockIdx.x == 0 && turns % 100000 == 0) printf("turn %ld\n", turns);
        ++turns;
    }
    out[threadIdx.x] = (int)turns;
}
extern "C" __global__ void add(const int* a, const int* b, int* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""

SCENARIOS = r"""
import json, sys, time
import numpy as np
import anycuda as ac
from anycuda.runtime.errors import CudaError
m = ac.RawModule(code=sys.stdin.read(), name="timeouts.cu")
out = ac.asarray(np.zeros(256, np.int32))
flag = ac.asarray(np.zeros(1, np.int32))
rng = np.random.default_rng(int(sys.argv[1]))
results = {}

def check_add():
    n = 100_003
    a, b = (rng.integers(-10**6, 10**6, n).astype(np.int32) for _ in range(2))
    c = ac.asarray(np.full(n, -7, np.int32))
    m.get_function("add")(((n + 255) // 256,), (256,), (ac.asarray(a), ac.asarray(b), c, np.int32(n)))
    return bool((c.get() == a + b).all())

for name, args in (("endless", (np.int32(1), out)), ("endless_through_barriers", (np.int32(1), out)),
                   ("spin_on_global_flag", (flag, out)), ("endless_malloc_and_printf", (np.int32(1), out))):
    start = time.monotonic()
    try:
        m.get_function(name)((8,), (256,), args)
        ac.synchronize()
        results[name] = {"ended": True}
    except CudaError as e:
        results[name] = {"code": int(e.code), "error": str(e)}
    results[name]["seconds"] = time.monotonic() - start
    results[name]["then_add"] = check_add()
print(json.dumps(results))
"""


def _run(args, stdin=None, **settings):
    """`python args...` in a child process under LIMIT_S (a hang fails the test), its
    environment ours with `settings` (None: left out); the finished process, which exited 0."""
    env = {k: v for k, v in os.environ.items() if settings.get(k, "") is not None}
    env.update({k: v for k, v in settings.items() if v is not None})
    try:
        r = subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True, env=env,
                           timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child did not end within {LIMIT_S} s")
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _last_json(r):
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def outcomes(compile_cuda):
    compile_cuda(SOURCE, name="timeouts.cu")          # (a skip where no CUDA compiler is there)
    r = _run(["-c", SCENARIOS, "7"], SOURCE, ANYCUDA_LAUNCH_TIMEOUT=str(TIMEOUT_S))
    return _last_json(r), r.stdout


@pytest.mark.parametrize("kernel", ["endless", "endless_through_barriers", "spin_on_global_flag",
                                    "endless_malloc_and_printf"])
def test_an_endless_kernel_times_out(outcomes, kernel):
    got = outcomes[0][kernel]
    assert got.get("code") == CUresult.CUDA_ERROR_LAUNCH_TIMEOUT, got
    assert f"kernel {kernel}: the launch ran longer than ANYCUDA_LAUNCH_TIMEOUT=0.5 s" in got["error"]
    # (the stop itself takes milliseconds; the rest is compiling the kernel on a busy machine)
    assert TIMEOUT_S <= got["seconds"] < TIMEOUT_S + 60, got
    assert got["then_add"], f"a launch after {kernel}'s timeout computed a wrong sum"


def test_the_printing_kernel_printed_until_stopped(outcomes):
    assert "turn 0\n" in outcomes[1]


def test_the_device_says_whether_launches_have_a_limit(monkeypatch):
    monkeypatch.delenv("ANYCUDA_LAUNCH_TIMEOUT", raising=False)
    api.cuInit(0)
    assert api.cuDeviceGetAttribute(17, 0) == 0          # CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT
    monkeypatch.setenv("ANYCUDA_LAUNCH_TIMEOUT", "2.5")
    assert api.cuDeviceGetAttribute(17, 0) == 1 and watchdog.launch_timeout() == 2.5


@pytest.mark.parametrize("text", ["soon", "-1", "0", "inf", "nan"])
def test_a_limit_that_is_no_number_of_seconds_is_named_and_ignored(monkeypatch, capsys, text):
    monkeypatch.setenv("ANYCUDA_LAUNCH_TIMEOUT", text)
    watchdog._warned.discard(text)
    assert watchdog.launch_timeout() == 0.0
    assert f"ANYCUDA_LAUNCH_TIMEOUT={text!r} is not a positive number of seconds" in capsys.readouterr().err


STICKY = r"""
import json, sys
import numpy as np
from anycuda.driver import api
from anycuda.runtime.errors import CudaError
api.cuInit(0)
api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
mod = api.cuModuleLoadData(sys.stdin.read().encode())
api.cuLaunchKernel(api.cuModuleGetFunction(mod, "endless"), (4, 1, 1), (128, 1, 1), 0, 0,
                   np.array([1], np.int32).tobytes() + bytes(4) + np.array([api.cuMemAlloc(512)], np.uint64).tobytes())
codes = []
for call in (api.cuCtxSynchronize, lambda: api.cuMemAlloc(16)):
    try:
        call()
        codes.append(0)
    except CudaError as e:
        codes.append(int(e.code))
api.cuDevicePrimaryCtxReset(0)
api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
p = api.cuMemAlloc(16)
api.cuMemsetD32(p, 5, 4)
got = np.zeros(4, np.int32)
api.cuMemcpy(got.ctypes.data, p, 16)
print(json.dumps({"codes": codes, "after_reset": got.tolist()}))
"""


def test_a_timeout_is_sticky_until_the_primary_context_is_reset(compile_cuda):
    ptx = compile_cuda(SOURCE, name="timeouts.cu").ptx
    got = _last_json(_run(["-c", STICKY], ptx, ANYCUDA_LAUNCH_TIMEOUT=str(TIMEOUT_S)))
    assert got["codes"] == [CUresult.CUDA_ERROR_LAUNCH_TIMEOUT] * 2, got
    assert got["after_reset"] == [5] * 4


ADD = SOURCE[SOURCE.index('extern "C" __global__ void add'):]


def test_launches_within_the_limit_are_untouched(monkeypatch, rng):
    """A limit well above a launch's length changes nothing: the sum is numpy's."""
    import anycuda as ac
    monkeypatch.setenv("ANYCUDA_LAUNCH_TIMEOUT", "120")
    n = 4099
    a, b = (rng.integers(-1000, 1000, n).astype(np.int32) for _ in range(2))
    c = ac.asarray(np.full(n, -7, np.int32))
    ac.RawModule(code=ADD).get_function("add")(((n + 255) // 256,), (256,), (ac.asarray(a), ac.asarray(b), c, np.int32(n)))
    np.testing.assert_array_equal(c.get(), a + b)


def test_an_nvcc_program_under_anycuda_run(tmp_path_factory):
    """`anycuda run --launch-timeout`: the program's endless kernel fails with
    cudaErrorLaunchTimeout, sticky until cudaDeviceReset, after which a kernel runs."""
    from test_sanitizer import built
    exe = built(tmp_path_factory, "endless")
    r = _run(["-m", "anycuda.cli", "run", "--launch-timeout", "0.5", "--", str(exe)])
    assert r.stdout.splitlines() == ["kernelExecTimeout 1", "launched", "synchronize: cudaErrorLaunchTimeout",
                                     "then cudaMalloc: cudaErrorLaunchTimeout",
                                     "after cudaDeviceReset: cudaSuccess, 64 of 64 filled"], r.stdout


NOTICE = r"""
import ctypes, sys, threading, time
import numpy as np
import anycuda as ac
m = ac.RawModule(code=sys.stdin.read(), name="timeouts.cu")
flag, out = ac.asarray(np.zeros(1, np.int32)), ac.asarray(np.zeros(256, np.int32))
m.get_function("spin_on_global_flag")((1,), (32,), (flag, out))          # returns at once
time.sleep(float(sys.argv[1]))
ctypes.c_int.from_address(flag.data.ptr).value = 1                      # the host ends the spin
ac.synchronize()
print(out.get()[:32].sum())
"""


@pytest.mark.parametrize("notice, told", [("0.3", True), ("0", False)])
def test_a_long_launch_is_named_without_a_limit(compile_cuda, notice, told):
    """Without ANYCUDA_LAUNCH_TIMEOUT a launch runs on (here until the host sets the flag it
    spins on); one past ANYCUDA_LAUNCH_NOTICE seconds is named on stderr once (0: never)."""
    compile_cuda(SOURCE, name="timeouts.cu")
    r = _run(["-c", NOTICE, "2.0"], SOURCE, ANYCUDA_LAUNCH_TIMEOUT=None, ANYCUDA_LAUNCH_NOTICE=notice)
    assert r.stdout.split() == ["32"]
    named = r.stderr.count("anycuda: kernel spin_on_global_flag (grid (1, 1, 1), block (32, 1, 1)) has run for")
    assert named == (1 if told else 0), r.stderr
    if told:
        assert "ANYCUDA_LAUNCH_TIMEOUT=seconds stops such launches" in r.stderr


CHECKED = r"""
import json, sys
import numpy as np
import anycuda as ac
from anycuda.runtime.errors import CudaError
m = ac.RawModule(code=sys.stdin.read(), name="timeouts.cu")
out = ac.asarray(np.zeros(256, np.int32))
try:
    m.get_function("endless")((2,), (64,), (np.int32(1), out))
    ac.synchronize()
    print(json.dumps({"ended": True}))
except CudaError as e:
    print(json.dumps({"code": int(e.code)}))
"""


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_a_checked_launch_times_out_too(compile_cuda, tool):
    """Kernels compiled for the sanitizer (every access checked, the general path) stop alike."""
    compile_cuda(SOURCE, name="timeouts.cu")
    r = _run(["-c", CHECKED], SOURCE, ANYCUDA_LAUNCH_TIMEOUT=str(TIMEOUT_S), ANYCUDA_SANITIZE=tool)
    assert _last_json(r) == {"code": CUresult.CUDA_ERROR_LAUNCH_TIMEOUT}
