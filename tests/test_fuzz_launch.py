"""Fuzzed launches through the driver API: grid and block dimensions of 0, huge and over the
device's limits, shared-memory sizes, parameter buffers of the wrong size, NULL and bad
pointers, bad streams. A launch either runs (and then computes the right sum) or fails with a
CudaError and a message; never another exception, a hang or a crash.

`fuzz_shared_window`: a kernel that stages its values in dynamic shared memory at a fuzzed
stride, launched with more, exactly enough or less of it than it indexes (a window of 0
bytes, one word short, ...): with enough, the right values; with less, the right values or a
CudaError, never a damaged process (compiler/cpu/workermemory.py).
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
from hypothesis import assume, given, strategies as st

import fuzz_harness as fh

VECTOR_ADD = Path(__file__).resolve().parent.parent / "src" / "anycuda" / "examples" / "vector_add.ptx"
# usual values repeated, so that most launches get far enough to run. Not 2**31 - 1: the
# largest valid grid.x is two billion blocks, seconds to a minute of real work per launch here
# (not a hang; 2**31 just past it is refused)
DIMENSIONS = [1] * 6 + [2, 3, 4, 32] * 3 + [0, 1024, 1025, 65535, 65536, 2**31, 2**32 - 1, 2**32, 2**64, -1]
SHARED = [0] * 6 + [1, 48 * 1024, 48 * 1024 + 1, 228 * 1024, 2**31, 2**32, -1]
N = 64


def _loaded(image: bytes, name: str) -> tuple:
    """(module, function) of kernel `name` in `image`, through the driver API on the primary
    context."""
    from anycuda.driver import api
    api.cuInit(0)
    api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
    module = api.cuModuleLoadData(image)
    return module, api.cuModuleGetFunction(module, name)


class Kernel:
    """vector_add (c[i] = a[i] + b[i] for i < n) loaded once, with its buffers."""

    def __init__(self):
        from anycuda.driver import api
        self.module, self.func = _loaded(VECTOR_ADD.read_bytes(), "vector_add")
        self.a, self.b, self.c = (api.cuMemAlloc(4 * N) for _ in range(3))
        self.stream = api.cuStreamCreate(0)
        self.dead_stream = api.cuStreamCreate(0)
        api.cuStreamDestroy(self.dead_stream)


_kernel = []


def kernel() -> Kernel:
    if not _kernel:
        _kernel.append(Kernel())
    return _kernel[0]


def _pointer(k, which):
    return {"a": k.a, "b": k.b, "c": k.c, "null": 0, "past": k.c + 2**40, "odd": k.a + 1}[which]


POINTERS = ["a", "b", "c", "null", "past", "odd"]


def launch_case(d) -> dict:
    """A launch's grid, block, shared memory, parameters and stream (`d`: fuzz_harness.Draws)."""
    return {
        "grid": tuple(d.pick(DIMENSIONS) for _ in range(3)),
        "block": tuple(d.pick(DIMENSIONS) for _ in range(3)),
        "shared": d.pick(SHARED),
        "pointers": ("a", "b", "c") if d.number(0, 1) else tuple(d.pick(POINTERS) for _ in range(3)),
        "n": d.pick([0, 1, 7, N, N, 2**31 - 1]),
        "size_change": d.pick([0] * 6 + [-1, -4, -28, 4, 1000]),
        "stream": d.pick(["default"] * 3 + ["own"] * 3 + ["destroyed", "bogus"]),
    }


launches = st.composite(lambda draw: launch_case(fh.HypothesisDraws(draw)))()


def launch_and_check(k, case):
    from anycuda.driver import api
    from anycuda.runtime.errors import CudaError
    x, y = np.arange(N, dtype=np.int32), np.arange(N, dtype=np.int32) * 3
    api.cuMemcpy(k.a, x.ctypes.data, 4 * N)
    api.cuMemcpy(k.b, y.ctypes.data, 4 * N)
    api.cuMemsetD8(k.c, 0xCD, 4 * N)
    params = struct.pack("<QQQI", *(_pointer(k, p) for p in case["pointers"]), case["n"])
    change = case["size_change"]
    params = params[:len(params) + change] if change < 0 else params + bytes(change)
    stream = {"default": 0, "own": k.stream, "destroyed": k.dead_stream, "bogus": 0xDEAD0}[case["stream"]]
    try:
        api.cuLaunchKernel(k.func, case["grid"], case["block"], case["shared"], stream, params)
        api.cuCtxSynchronize()
    except CudaError as e:
        if e.code in api.STICKY:             # a fault: reset, and the next input loads afresh
            api.cuDevicePrimaryCtxReset(0)
            _kernel.clear()
        raise
    check_sum(k, case)


def check_sum(k, case):
    """After a launch that succeeded with the right buffers, the threads that ran wrote a + b."""
    from anycuda.driver import api
    if case["pointers"] != ("a", "b", "c") or case["size_change"] < 0:
        return
    out = np.empty(N, dtype=np.int32)
    api.cuMemcpy(out.ctypes.data, k.c, 4 * N)
    # i = blockIdx.x * blockDim.x + threadIdx.x: the y and z dimensions repeat the same i
    if min(case["grid"][0] * case["block"][0], case["n"]) > N:
        return      # threads wrote past c, into whatever lies there: a and b too, after a reset
                    # has put them there (the plain driver's input 348 of seed 717930335)
    ran = min(case["grid"][0] * case["block"][0], case["n"], N)
    assert (out[:ran] == np.arange(ran) * 4).all(), f"wrong sum: {out[:ran]}"
    assert (out[ran:].view(np.uint32) == 0xCDCDCDCD).all(), "a thread wrote past n"


MAX_THREADS = 2**26          # a valid launch of more threads is seconds of real work here


def _valid_and_long(case) -> bool:
    """A launch the device takes (every dimension within its limits) that runs more than
    MAX_THREADS threads: real work (grid (4, 3, 65535) of (4, 32, 4) is 400 million threads,
    ~11 s here, more under load, where the 20 s limit per input would call it a hang), and no
    more of a test than a smaller one."""
    (gx, gy, gz), (bx, by, bz) = case["grid"], case["block"]
    valid = (0 < gx < 2**31 and 0 < gy <= 65535 and 0 < gz <= 65535 and 0 < bx <= 1024 and 0 < by <= 1024
             and 0 < bz <= 64 and bx * by * bz <= 1024)
    return valid and gx * gy * gz * bx * by * bz > MAX_THREADS


def check_launch(case) -> None:
    from anycuda.runtime.errors import CudaError
    k = kernel()
    fh.allowed_outcome(lambda: launch_and_check(k, case), (CudaError,), case)


@fh.fuzz_settings(default=150)
@given(launches)
def fuzz_launch(case):
    assume(not _valid_and_long(case))
    check_launch(case)


def replay_launch(seed: int, index: int) -> None:
    """Input `index` of `seed` of the plain driver (a launch too long to be a test is skipped)."""
    case = launch_case(fh.plain_draws(seed, index))
    if not _valid_and_long(case):
        check_launch(case)


def fuzz_launch_plain():
    fh.plain_run("test_fuzz_launch.replay_launch({seed}, {index})", replay_launch, default=150)


def test_fuzz_launch():
    fh.run_in_child("test_fuzz_launch", "fuzz_launch")


def test_fuzz_launch_plain():
    fh.run_in_child("test_fuzz_launch", "fuzz_launch_plain")


# c[i] = 2 * a[i] through the dynamic shared window: thread t's word at t * stride bytes,
# stored, a barrier (or none), loaded back
STAGE_PTX = """.version 8.0
.target sm_80
.address_size 64
.extern .shared .align 4 .b8 window[];
.visible .entry stage(.param .u64 a, .param .u64 c, .param .u32 n, .param .u32 stride, .param .u32 sync)
{
  .reg .b32 %r<12>; .reg .b64 %rd<8>; .reg .pred %p<3>;
  ld.param.u64 %rd1, [a];
  ld.param.u64 %rd2, [c];
  ld.param.u32 %r1, [n];
  ld.param.u32 %r2, [stride];
  ld.param.u32 %r10, [sync];
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %ctaid.x;
  mad.lo.s32 %r6, %r5, %r4, %r3;
  mul.lo.u32 %r7, %r3, %r2;
  mov.u32 %r8, window;
  add.u32 %r8, %r8, %r7;
  setp.ge.u32 %p1, %r6, %r1;
  mov.u32 %r9, 0;
  mul.wide.u32 %rd3, %r6, 4;
  @%p1 bra STAGE;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r9, [%rd4];
STAGE:
  st.shared.u32 [%r8], %r9;
  setp.eq.u32 %p2, %r10, 0;
  @%p2 bra BACK;
  bar.sync 0;
BACK:
  ld.shared.u32 %r11, [%r8];
  @%p1 bra END;
  add.s64 %rd5, %rd2, %rd3;
  add.u32 %r11, %r11, %r11;
  st.global.u32 [%rd5], %r11;
END:
  ret;
}
"""

WINDOWS = {
    "threads": [1, 2, 32, 33, 64, 100, 256, 1024],
    "grid": [1, 2, 3],
    "stride": [4, 8, 64, 4096],
    # the window against what the kernel indexes: (bytes needed) + this, or a fixed size
    "window": ["enough", "enough", "more", "short", "none", "one", 48 * 1024, 48 * 1024 + 1, 2**31],
    "sync": [0, 1],
}
windows = st.composite(lambda draw: fh.HypothesisDraws(draw).pick_each(WINDOWS))()


class StageKernel:
    def __init__(self):
        from anycuda.driver import api
        self.module, self.func = _loaded(STAGE_PTX.encode(), "stage")
        self.a, self.c = (api.cuMemAlloc(4 * N) for _ in range(2))


_stage = []


def _window_bytes(case) -> tuple:
    """(bytes of dynamic shared memory to launch with, whether that covers what it indexes)."""
    needed = (case["threads"] - 1) * case["stride"] + 4
    w = case["window"]
    size = {"enough": needed, "more": needed + 64, "short": needed - 4, "none": 0, "one": 1}.get(w, w)
    return size, size >= needed


def stage_and_check(case):
    from anycuda.driver import api
    from anycuda.runtime.errors import CudaError
    if not _stage:
        _stage.append(StageKernel())
    k = _stage[0]
    x = np.arange(N, dtype=np.int32) * 7 + 1
    api.cuMemcpy(k.a, x.ctypes.data, 4 * N)
    api.cuMemsetD8(k.c, 0xCD, 4 * N)
    n = min(N, case["grid"] * case["threads"])
    size, enough = _window_bytes(case)
    params = struct.pack("<QQIII", k.a, k.c, n, case["stride"], case["sync"])
    try:
        api.cuLaunchKernel(k.func, (case["grid"], 1, 1), (case["threads"], 1, 1), size, 0, params)
        api.cuCtxSynchronize()
    except CudaError as e:
        if e.code in api.STICKY:
            api.cuDevicePrimaryCtxReset(0)
            _stage.clear()
        if enough and size <= 48 * 1024:
            raise AssertionError(f"a launch with the window it needs failed: {e}") from e
        raise
    if enough:
        out = np.empty(N, dtype=np.int32)
        api.cuMemcpy(out.ctypes.data, k.c, 4 * N)
        assert (out[:n] == 2 * x[:n]).all(), f"wrong values: {out[:n]}"


def check_shared_window(case) -> None:
    from anycuda.runtime.errors import CudaError
    fh.allowed_outcome(lambda: stage_and_check(case), (CudaError,), case)


@fh.fuzz_settings(default=100)
@given(windows)
def fuzz_shared_window(case):
    check_shared_window(case)


def replay_shared_window(seed: int, index: int) -> None:
    check_shared_window(fh.plain_draws(seed, index).pick_each(WINDOWS))


def fuzz_shared_window_plain():
    fh.plain_run("test_fuzz_launch.replay_shared_window({seed}, {index})", replay_shared_window, default=100)


def test_fuzz_shared_window():
    fh.run_in_child("test_fuzz_launch", "fuzz_shared_window")


def test_fuzz_shared_window_plain():
    fh.run_in_child("test_fuzz_launch", "fuzz_shared_window_plain")
