"""The order a launch hands its blocks out in (runtime/program.py block_order): which kernels
may have their blocks run last first (memory.any_block_order), which launches alternate,
and the order one worker then runs the blocks in, read from the blocks' own cycle counters."""
import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.analysis import memory
from anycuda.cudac import compile_to_ptx
from anycuda.ptx.parser import parse
from anycuda.runtime import program
from conformance import poison

SOURCE = r"""
extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
// when each block started, and a buffer it does not touch (what makes a launch large)
extern "C" __global__ void stamp(long long* t, const char* pad) {
    if (threadIdx.x == 0) t[blockIdx.x] = clock64();
}
// the same, and a count of the blocks that ran: an atomic
extern "C" __global__ void stamp_counted(long long* t, const char* pad, unsigned* count) {
    if (threadIdx.x == 0) { t[blockIdx.x] = clock64(); atomicAdd(count, 1u); }
}
// a block that waits for the block before it: a volatile load, a fence
extern "C" __global__ void chained(volatile int* flags, float* out) {
    if (threadIdx.x == 0) {
        if (blockIdx.x > 0) while (flags[blockIdx.x - 1] == 0) {}
        out[blockIdx.x] = blockIdx.x;
        __threadfence();
        flags[blockIdx.x] = 1;
    }
}
extern "C" __global__ void says(float* out) {
    out[blockIdx.x] = 1.0f;
    if (threadIdx.x == 0 && blockIdx.x == 0) printf("block %d\n", blockIdx.x);
}
"""


@pytest.fixture(scope="module")
def kernels():
    return {f.name: f for f in parse(compile_to_ptx(SOURCE), "order.ptx").functions}


@pytest.fixture(scope="module")
def mod():
    return ac.RawModule(code=SOURCE)


@pytest.mark.parametrize("name, free", [("add", True), ("stamp", True), ("stamp_counted", False),
                                        ("chained", False), ("says", False)])
def test_which_kernels_may_run_blocks_in_any_order(kernels, name, free):
    """Atomics, volatile loads and fences let a block see another's progress; printf shows
    which block ran first. Only kernels without any of them may run blocks last first."""
    assert memory.any_block_order(kernels[name].body) is free


def test_order_by_footprint(monkeypatch):
    """Launches that touch more than the last-level cache alternate; smaller ones keep the
    index order; the variable forces either order."""
    monkeypatch.delenv("ANYCUDA_BLOCK_ORDER", raising=False)
    cache = program.last_level_cache_bytes()
    assert program.block_order(cache + 1) == program.ALTERNATE
    assert program.block_order(cache) == program.FORWARD
    monkeypatch.setenv("ANYCUDA_BLOCK_ORDER", "forward")
    assert program.block_order(cache + 1) == program.FORWARD
    monkeypatch.setenv("ANYCUDA_BLOCK_ORDER", "backward")
    assert program.block_order(0) == program.BACKWARD


NBLOCKS = 64
CHUNK = NBLOCKS // 16          # what one worker takes from the counter at a time (program.py _record)
FORWARD_RUN = list(range(NBLOCKS))
# chunks from the last, the blocks of each in index order
BACKWARD_RUN = [b for start in range(NBLOCKS - CHUNK, -1, -CHUNK) for b in range(start, start + CHUNK)]


def run_order(mod, name, pad, *more):
    """The blocks of one launch of `name` in the order they started."""
    t = poison(NBLOCKS, np.int64)
    mod.get_function(name)((NBLOCKS,), (32,), (t, pad) + more)
    return list(np.argsort(t.get(), kind="stable"))


@pytest.mark.usefixtures("one_worker")
def test_large_launches_alternate(monkeypatch, mod):
    """With a 64 KB cache, a launch pointing at a 1 MB buffer runs its blocks forwards and
    backwards in turn, whichever way the launch before it went; one pointing at 64 bytes runs
    forwards each time, and so does one of a kernel with an atomic, whatever its size."""
    monkeypatch.delenv("ANYCUDA_BLOCK_ORDER", raising=False)
    monkeypatch.setattr(program, "last_level_cache_bytes", lambda: 1 << 16)
    big, small = ac.zeros(1 << 20, np.uint8), ac.zeros(64, np.uint8)
    orders = [run_order(mod, "stamp", big) for _ in range(4)]
    assert all(o in (FORWARD_RUN, BACKWARD_RUN) for o in orders), orders
    assert [o == BACKWARD_RUN for o in orders] in ([True, False] * 2, [False, True] * 2)
    assert run_order(mod, "stamp", small) == FORWARD_RUN
    count = ac.zeros(1, np.uint32)
    for _ in range(2):
        assert run_order(mod, "stamp_counted", big, count) == FORWARD_RUN
    assert count.get()[0] == 2 * NBLOCKS


@pytest.mark.usefixtures("one_worker")
def test_backward_runs_every_block_once(monkeypatch, rng):
    """ANYCUDA_BLOCK_ORDER=backward: a grid that is no multiple of the chunk still runs each
    block once, the partial chunk (the lowest blocks) last."""
    monkeypatch.setenv("ANYCUDA_BLOCK_ORDER", "backward")
    m = ac.RawModule(code=SOURCE)      # (a launch's choice is kept per kernel and buffers)
    n = 1000 * 64 + 17
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = poison(n, np.float32)
    m.get_function("add")((n // 64 + 1,), (64,), (ac.asarray(a), ac.asarray(b), c, np.int32(n)))
    np.testing.assert_array_equal(c.get(), a + b)
    t = poison(70, np.int64)
    m.get_function("stamp")((70,), (32,), (t, ac.zeros(8, np.uint8)))
    chunk = 70 // 16
    windows = [(max(0, 70 - k - chunk), 70 - k) for k in range(0, 70, chunk)]
    assert list(np.argsort(t.get(), kind="stable")) == [b for lo, hi in windows for b in range(lo, hi)]
