"""Block barriers: loops with data-dependent trip counts, early exits (exited threads do not
hold a barrier up), __syncthreads_count/and/or, divergent work between barriers."""
import numpy as np
import pytest

import anycuda as ac
from conformance import load_cuda, poison


@pytest.mark.parametrize("block", [1, 31, 32, 33, 100, 256, 1024])
def test_barriers_in_a_loop(rng, block):
    grid, iters = 3, int(rng.integers(1, 6))
    x = rng.integers(-1000, 1000, grid * block).astype(np.int32)
    out = poison(grid * block, np.int32)
    load_cuda("sync").get_function("loop_barriers")((grid,), (block,), (ac.asarray(x), out, np.int32(iters)),
                                                      shared_mem=4 * block)
    v = x.reshape(grid, block).astype(np.int64)
    for k in range(iters):
        nxt = np.roll(v, -1, axis=1)
        if k & 1:
            nxt = nxt + np.roll(v, 1, axis=1)
        v = nxt
    assert np.array_equal(out.get(), v.astype(np.int32).ravel())


@pytest.mark.parametrize("active", [1, 5, 64, 100, 255])
def test_early_exit_then_barrier(rng, active):
    grid, block = 4, 256
    x = rng.standard_normal(grid * block).astype(np.float32)
    out = poison(grid, np.float32)
    load_cuda("sync").get_function("early_exit_reduce")((grid,), (block,), (ac.asarray(x), out, np.int32(active)))
    want = x.reshape(grid, block)[:, :active].astype(np.float64).sum(axis=1)
    assert np.allclose(out.get(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("block", [(64, 1, 1), (8, 4, 3), (33, 1, 1), (1024, 1, 1)])
def test_syncthreads_count_and_or(rng, block):
    grid = 5
    n = block[0] * block[1] * block[2]
    flags = (rng.random((grid, n)) < rng.random((grid, 1))).astype(np.int32)
    flags[0] = 1
    flags[1] = 0
    out = poison((grid, n, 3), np.int32)
    load_cuda("sync").get_function("sync_reductions")((grid,), block, (ac.asarray(flags), out))
    g = out.get()
    assert np.array_equal(g[:, :, 0], np.repeat(flags.sum(1, keepdims=True), n, 1))
    assert np.array_equal(g[:, :, 1] != 0, np.repeat(flags.all(1, keepdims=True), n, 1))
    assert np.array_equal(g[:, :, 2] != 0, np.repeat(flags.any(1, keepdims=True), n, 1))


def test_divergent_loops_between_barriers():
    grid, block, rounds = 6, 96, 7
    out = poison((grid, rounds), np.int32)
    load_cuda("sync").get_function("divergent_between_barriers")((grid,), (block,), (out, np.int32(rounds)))
    t = np.arange(block)
    want = np.cumsum([sum(j for tt in t for j in range((tt * 7 + r) % 13)) for r in range(rounds)])
    assert np.array_equal(out.get(), np.tile(want, (grid, 1)))
