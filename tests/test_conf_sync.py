"""Block barriers: loops with data-dependent trip counts, uniform branches, several barriers per
iteration, early exits (exited threads do not hold a barrier up), __syncthreads_count/and/or,
divergent work between barriers, barriers inside a called function, 2-D/3-D blocks, named
barriers (bar.sync id, count: optional), clock()/clock64() per thread."""
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


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("block", [32, 33, 256])
def test_barriers_in_uniform_branches(rng, mode, block):
    grid = 5
    x = rng.integers(-10 ** 6, 10 ** 6, (grid, block)).astype(np.int32)
    out = poison(grid * block, np.int32)
    load_cuda("sync").get_function("uniform_branch_barriers")((grid,), (block,), (ac.asarray(x), out, np.int32(mode)),
                                                                 shared_mem=4 * block)
    want = np.empty_like(x)
    for b in range(grid):
        v = x[b][::-1] if (b + mode) % 2 == 0 else np.roll(x[b], -3)
        want[b] = v + v[0] if mode > 1 else v
    assert np.array_equal(out.get().reshape(grid, block), want)


@pytest.mark.parametrize("block", [1, 31, 64, 100, 256])
def test_four_barriers_per_iteration(rng, block):
    grid, iters = 7, int(rng.integers(2, 9))
    x = rng.integers(-1000, 1000, (grid, block)).astype(np.int32)
    out = poison(grid * block, np.int32)
    load_cuda("sync").get_function("multi_barrier_loop")((grid,), (block,), (ac.asarray(x), out, np.int32(iters)))
    v = x.astype(np.int64)
    for k in range(iters):
        a = v
        b = 2 * a[:, ::-1] + k
        c = np.roll(b, -3, axis=1) - a
        v = ((c ^ b) + 2 ** 31) % 2 ** 32 - 2 ** 31     # int32 wrap-around, as the kernel computes
    assert np.array_equal(out.get().reshape(grid, block), v)


@pytest.mark.parametrize("block", [2, 37, 128, 512])
def test_data_dependent_barrier_loop(rng, block):
    """A do-until loop whose exit is decided by a shared flag every iteration."""
    grid = 6
    x = rng.integers(0, 10 ** 6, (grid, block)).astype(np.int32)
    out, rounds = poison(grid * block, np.int32), poison(grid, np.int32)
    load_cuda("sync").get_function("converge_loop")((grid,), (block,), (ac.asarray(x), out, rounds))
    want_rounds = []
    for b in range(grid):
        v, r = x[b].copy(), 0
        while True:
            nxt = np.minimum(v, np.roll(v, 1))
            if np.array_equal(nxt, v):
                break
            v, r = nxt, r + 1
        want_rounds.append(r)
    assert np.array_equal(out.get().reshape(grid, block), np.repeat(x.min(1, keepdims=True), block, 1))
    assert list(rounds.get()) == want_rounds


@pytest.mark.parametrize("block,keep", [(256, 128), (256, 1), (100, 37), (1024, 1000), (64, 63)])
def test_threads_exit_between_barriers(rng, block, keep):
    grid = 4
    x = rng.integers(-1000, 1000, (grid, block)).astype(np.int32)
    out = poison((grid, block), np.int32)
    untouched = out.get()
    load_cuda("sync").get_function("exit_between_barriers")((grid,), (block,), (ac.asarray(x), out, np.int32(keep)))
    got = out.get()
    sums = x[:, ::-1][:, :keep].sum(1)
    assert np.array_equal(got[:, :keep], sums[:, None] + np.arange(keep))
    assert np.array_equal(got[:, keep:], untouched[:, keep:])     # exited threads wrote nothing


@pytest.mark.parametrize("grid,block", [((2, 3, 2), (4, 4, 4)), ((1, 1, 3), (8, 4, 2)), ((3, 2, 1), (3, 5, 7)),
                                        ((2, 1, 1), (1, 1, 64)), ((1, 2, 2), (32, 32, 1))])
def test_barriers_in_3d_blocks_and_grids(rng, grid, block):
    nb, nt, iters = int(np.prod(grid)), int(np.prod(block)), 3
    x = rng.integers(-100, 100, (nb, nt)).astype(np.int32)
    out = poison(nb * nt, np.int32)
    load_cuda("sync").get_function("barriers_3d")(grid, block, (ac.asarray(x), out, np.int32(iters)), shared_mem=4 * nt)
    v = x.astype(np.int64)
    for _ in range(iters):
        v = np.roll(v, -1, axis=1) * 3 + np.roll(v, 1, axis=1)
    assert np.array_equal(out.get().reshape(nb, nt), v.astype(np.int32))


def _named_model(x, rounds, step, combine):
    """Each 64-thread group runs its own rounds, then the block combines the two groups."""
    v = x.astype(np.int64).reshape(-1, 2, 64)
    out = v.copy()
    for group, r_count in enumerate(rounds):
        g = v[:, group]
        for r in range(r_count):
            g = (step(g, r) + 2 ** 31) % 2 ** 32 - 2 ** 31
        out[:, group] = g
    other = out[:, ::-1]
    return ((combine(out, other) + 2 ** 31) % 2 ** 32 - 2 ** 31).reshape(-1)


def test_named_barriers_two_groups(rng):
    """Optional PTX feature: bar.sync with a barrier id and a thread count (inline asm).
    Warps 0-1 use barrier 1, warps 2-3 barrier 2, and the groups run different numbers of rounds."""
    grid, lo, hi = 3, 3, 6
    x = rng.integers(-1000, 1000, grid * 128).astype(np.int32)
    out = poison(grid * 128, np.int32)
    load_cuda("sync").get_function("named_barriers")((grid,), (128,), (ac.asarray(x), out, np.int32(lo), np.int32(hi)))
    want = _named_model(x, (lo, hi), lambda g, r: np.roll(g, -1, axis=1) + r, lambda v, o: v + 7 * o)
    assert np.array_equal(out.get(), want.astype(np.int32))


def test_named_barrier_id_in_a_register(rng):
    """Optional PTX feature: bar.sync with the barrier id in a register."""
    grid, lo, hi = 4, 5, 2
    x = rng.integers(-1000, 1000, grid * 128).astype(np.int32)
    out = poison(grid * 128, np.int32)
    load_cuda("sync").get_function("named_barriers_reg")((grid,), (128,), (ac.asarray(x), out, np.int32(lo), np.int32(hi)))
    want = _named_model(x, (lo, hi), lambda g, r: np.roll(g, 1, axis=1) * 2 - r, lambda v, o: v - o)
    assert np.array_equal(out.get(), want.astype(np.int32))


def test_clock_is_monotonic_per_thread():
    grid, block, iters = 4, 64, 20
    c64, c32 = poison((grid * block, iters), np.int64), poison((grid * block, iters), np.uint32)
    sink = poison(grid * block, np.float32)
    load_cuda("sync").get_function("clocks")((grid,), (block,), (c64, c32, sink, np.int32(iters)))
    a, b = c64.get(), c32.get().astype(np.int64)
    assert (np.diff(a, axis=1) >= 0).all()
    assert (a[:, -1] > a[:, 0]).all()
    # clock() is 32 bits and may wrap once in a run this short; it never steps backwards otherwise
    steps = np.diff(b, axis=1) % 2 ** 32
    assert (steps < 2 ** 31).all()
    assert np.isfinite(sink.get()).all()


@pytest.mark.parametrize("block", [32, 96, 1024])
def test_barriers_inside_a_called_function(rng, block):
    grid, rounds = 3, 3
    x = rng.standard_normal((grid, block)).astype(np.float32)
    out = poison(grid * block, np.float32)
    load_cuda("sync").get_function("reduce_in_function")((grid,), (block,), (ac.asarray(x), out, np.int32(rounds)))
    v = x.astype(np.float64)
    for _ in range(rounds):
        v = v * 0.5 + v.mean(1, keepdims=True)
    assert np.allclose(out.get().reshape(grid, block), v, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("block", [2, 33, 64, 255, 1024])
def test_odd_threads_exit_before_barriers(rng, block):
    grid = 5
    x = rng.integers(-1000, 1000, (grid, block)).astype(np.int32)
    out = poison(grid, np.int32)
    load_cuda("sync").get_function("odd_exit_reduce")((grid,), (block,), (ac.asarray(x), out))
    assert np.array_equal(out.get(), x[:, ::2].sum(1))
