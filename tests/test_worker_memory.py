"""A worker's workspace (compiler/cpu/workermemory.py): the blocks' frames and shared-memory
windows in a mapping of the worker thread's own that ends at a guard. Shared memory indexed
past the block's window is an illegal address, never a damaged heap; a thread keeps its
mapping for later launches, makes a larger one when a launch needs it, and gives it back
when it ends."""
import ctypes
import threading
import time

import numpy as np
import pytest

import anycuda as ac
from anycuda.runtime.errors import CudaError, CUresult
from anycuda.compiler.cpu import workermemory
from anycuda.runtime.faults import worker_memory_hook
from conformance import TREE_REDUCTION

SOURCE = TREE_REDUCTION + r"""
// no barrier: a block's threads run one after the other, each writing its own word
extern "C" __global__ void stage(const float* in, float* out) {
    extern __shared__ float window[];
    unsigned int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    window[t] = in[i] * 2.0f;
    out[i] = window[t];
}
"""


@pytest.fixture(scope="module")
def mod():
    return ac.RawModule(code=SOURCE)


def _heap_still_works():
    junk = [np.zeros(n) for n in range(1, 300)] + [bytearray(64) for _ in range(2000)]
    return sum(len(j) for j in junk) > 0


def _tree(mod, rng, poison, threads, blocks, shared):
    x = rng.standard_normal(threads * blocks).astype(np.float32)
    out = poison(blocks, np.float32)
    mod.get_function("tree")((blocks,), (threads,), (ac.asarray(x), out), shared_mem=shared)
    ac.synchronize()
    return x.reshape(blocks, threads), out.get()


@pytest.mark.parametrize("kernel, threads", [("tree", 256), ("tree", 1024), ("stage", 512)])
def test_shared_memory_past_the_window_is_an_illegal_address(mod, rng, poison, kernel, threads):
    """Launched without the dynamic shared memory it indexes (a few KB past a window of 0
    bytes): the launch fails as on a GPU, the process and its heap go on, and the next
    launch with the right size is correct."""
    blocks = 6
    x = rng.standard_normal(threads * blocks).astype(np.float32)
    out = poison(threads * blocks, np.float32)
    with pytest.raises(CudaError) as e:
        mod.get_function(kernel)((blocks,), (threads,), (ac.asarray(x), out), shared_mem=0)
        ac.synchronize()
    assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    assert _heap_still_works()
    x, got = _tree(mod, rng, poison, 256, 5, 4 * 256)
    np.testing.assert_allclose(got, x.sum(axis=1, dtype=np.float64), rtol=1e-4, atol=1e-4)


def test_workspaces_of_growing_and_shrinking_launches(mod, rng, poison):
    """A thread's mapping serves smaller launches and is replaced for a larger one."""
    for threads, blocks in ((32, 3), (1024, 7), (64, 2), (1024, 40), (128, 1)):
        x, got = _tree(mod, rng, poison, threads, blocks, 4 * threads)
        np.testing.assert_allclose(got, x.sum(axis=1, dtype=np.float64), rtol=1e-4, atol=1e-4)


def _regions() -> list:
    """[(start, end, permissions)] of this process's mappings."""
    found = []
    with open("/proc/self/maps") as fh:
        for line in fh:
            span, perms = line.split()[:2]
            lo, hi = (int(v, 16) for v in span.split("-"))
            found.append((lo, hi, perms))
    return found


def _permissions_at(address) -> str | None:
    return next((perms for lo, hi, perms in _regions() if lo <= address < hi), None)


def _region_of(address):
    return next(((lo, hi, perms) for lo, hi, perms in _regions() if lo <= address < hi), None)


def test_a_workspace_ends_at_a_guard_and_goes_with_its_thread():
    """The native functions themselves, on a thread of their own: the workspace is 64-byte
    aligned and writable to its end, the next page is inaccessible, a larger request gets a
    new mapping, a worker's end gives back a mapping over KEPT bytes and keeps a smaller
    one, and the mapping is gone once the thread has ended."""
    get = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint64)(worker_memory_hook())
    seen = {}

    def worker():
        seen["end with none"] = get(0)           # a worker's end on a thread that holds nothing
        small = get(4096)
        ctypes.memset(small, 0x5A, 4096)
        seen["small"] = small
        seen["small again"] = get(1024)
        seen["guard"] = _permissions_at(small + 4096)
        seen["guard's end"] = _permissions_at(small + 4096 + (4 << 30) - 1)       # 4 GiB on
        large = get(3 << 20)
        ctypes.memset(large, 0x5A, 3 << 20)
        seen["large"], seen["large guard"] = large, _permissions_at(large + (3 << 20))
        seen["large region"] = _region_of(large)
        # a worker's end: a mapping of up to KEPT bytes stays, a larger one goes
        get(0)
        seen["large kept"] = _region_of(large) == seen["large region"] and get(1024) == large + (3 << 20) - 1024
        huge = get(workermemory.KEPT + 4096)
        seen["huge region"] = _region_of(huge)
        get(0)
        seen["huge after"] = _region_of(huge)
        seen["held at the end"] = _region_of(get(8192))
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["end with none"] is None
    assert seen["small"] % 64 == 0 and seen["large"] % 64 == 0
    assert seen["small again"] == seen["small"] + 4096 - 1024           # the same mapping, its end
    assert seen["guard"] == "---p" and seen["large guard"] == "---p" and seen["guard's end"] == "---p"
    assert seen["large kept"] and seen["huge after"] != seen["huge region"]
    # given back with the thread (its key's destructor runs after join() returns: the
    # thread's Python state is gone first)
    deadline = time.monotonic() + 5
    while seen["held at the end"] in _regions() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen["held at the end"] not in _regions()


@pytest.mark.parametrize("threads, stride", [(1024, 4096), (256, 1 << 16), (64, 1 << 20)])
def test_shared_offsets_megabytes_past_the_window(rng, threads, stride):
    """A window of 0 bytes indexed at thread * stride, megabytes past it (32-bit shared
    offsets reach 4 GiB, the guard's length): the launch fails and the process goes on,
    barrier or none."""
    from test_fuzz_launch import STAGE_PTX
    k = ac.RawModule(ptx=STAGE_PTX, name="stage.ptx").get_function("stage")
    x = rng.integers(0, 1000, threads).astype(np.int32)
    out = ac.zeros(threads, np.int32)
    for sync in (0, 1):
        with pytest.raises(CudaError) as e:
            k((1,), (threads,), (ac.asarray(x), out, np.uint32(threads), np.uint32(stride), np.uint32(sync)),
              shared_mem=0)
            ac.synchronize()
        assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
        assert _heap_still_works()
