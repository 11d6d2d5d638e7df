"""Special registers: 3-D indices, lane/warp ids and lane masks, shared-memory sizes,
clocks; large grids."""
import numpy as np
import pytest

import anycuda as ac
from conformance import load_cuda, poison


def test_three_dimensional_indices():
    grid, block = (3, 4, 5), (4, 3, 2)
    nb, nt = np.prod(grid), np.prod(block)
    out = poison((nb * nt, 12), np.uint32)
    load_cuda("special_regs").get_function("indices")(grid, block, (out,))
    g = out.get().reshape(grid[2], grid[1], grid[0], block[2], block[1], block[0], 12)
    bz, by, bx, tz, ty, tx = np.meshgrid(*(np.arange(d) for d in (grid[2], grid[1], grid[0], block[2], block[1], block[0])),
                                         indexing="ij")
    for k, want in enumerate((tx, ty, tz, bx, by, bz)):
        assert np.array_equal(g[..., k], want)
    for k, want in enumerate(block + grid):
        assert (g[..., 6 + k] == want).all()


def test_lanes_warps_masks_and_clocks():
    block, grid, dyn = 96, 2, 256
    n = block * grid
    out, clocks = poison((n, 10), np.uint32), poison((n, 4), np.uint64)
    load_cuda("special_regs").get_function("misc")((grid,), (block,), (out, clocks), shared_mem=dyn)
    g = out.get().astype(np.int64)
    t = np.arange(n) % block
    lane = t % 32
    bit = 1 << lane
    assert np.array_equal(g[:, 0], lane) and np.array_equal(g[:, 1], t // 32)
    assert (g[:, 2] >= 1).all()
    assert np.array_equal(g[:, 3], bit - 1) and np.array_equal(g[:, 4], 2 * bit - 1)
    assert np.array_equal(g[:, 5], bit) and np.array_equal(g[:, 6], (~(bit - 1)) & 0xFFFFFFFF)
    assert np.array_equal(g[:, 7], (~(2 * bit - 1)) & 0xFFFFFFFF)
    assert (g[:, 8] == dyn).all() and (g[:, 9] >= dyn).all()
    c = clocks.get()
    assert (c[:, 1] > c[:, 0]).all()          # clock64 moves forward within a thread
    assert (c[:, 3] >= c[:, 2]).all() and (c[:, 2] > 1_600_000_000 * 10 ** 9).all()   # ns since the epoch


def test_large_one_dimensional_grid():
    out = ac.zeros(1, np.int32)
    last = 2 ** 20 - 1
    load_cuda("special_regs").get_function("tiny")((last + 1,), (1,), (out, np.uint32(last)))
    assert out.get()[0] == 1 + last + 1


@pytest.mark.slow
def test_maximum_grid_x():
    out = ac.zeros(1, np.int32)
    last = 2 ** 31 - 2
    load_cuda("special_regs").get_function("tiny")((last + 1,), (1,), (out, np.uint32(last)))
    assert int(out.get()[0]) % 2 ** 32 == 1 + last + 1      # the int counter wraps past 2^31


def test_special_registers_in_a_partial_warp_3d_block():
    grid, block, dyn = (2, 3, 2), (5, 3, 4), 200
    nb, nt = int(np.prod(grid)), int(np.prod(block))
    out, wide = poison((nb * nt, 20), np.uint32), poison((nb * nt, 4), np.uint64)
    load_cuda("special_regs").get_function("registers_3d")(grid, block, (out, wide), shared_mem=dyn)
    g = out.get().astype(np.int64).reshape(grid[2], grid[1], grid[0], block[2], block[1], block[0], 20)
    bz, by, bx, tz, ty, tx = np.meshgrid(*(np.arange(d) for d in (grid[2], grid[1], grid[0], block[2], block[1], block[0])),
                                         indexing="ij")
    for k, want in enumerate((tx, ty, tz)):
        assert np.array_equal(g[..., k], want), f"%tid.{'xyz'[k]}"
    for k, want in enumerate(block):
        assert (g[..., 3 + k] == want).all(), f"%ntid.{'xyz'[k]}"
    for k, want in enumerate((bx, by, bz)):
        assert np.array_equal(g[..., 6 + k], want), f"%ctaid.{'xyz'[k]}"
    for k, want in enumerate(grid):
        assert (g[..., 9 + k] == want).all(), f"%nctaid.{'xyz'[k]}"
    linear = tx + block[0] * (ty + block[1] * tz)
    assert np.array_equal(g[..., 12], linear % 32), "%laneid follows the linear thread index"
    assert np.array_equal(g[..., 17], (1 << (linear % 32)) - 1), "%lanemask_lt"
    assert (g[..., 13] < g[..., 14]).all() and (g[..., 14] >= -(-nt // 32)).all(), "%warpid < %nwarpid"
    assert (g[..., 15] < g[..., 16]).all(), "%smid < %nsmid"
    assert (g[..., 19] == dyn).all() and (g[..., 18] >= dyn + 1000).all(), "%dynamic_smem_size / %total_smem_size"
    w = wide.get()
    assert (w[:, 0] == w[0, 0]).all(), "%gridid is the same for the whole launch"
    assert (w[:, 2] >= w[:, 1]).all(), "%clock64 does not go backwards"
