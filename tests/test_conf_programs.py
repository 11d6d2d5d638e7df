"""Whole programs: tiled SGEMM, block scan, bitonic sort, transpose, n-body, layernorm and
softmax as in LLM training code, a two-pass reduction, a Blelloch scan, a grid-stride loop;
3-D grids and gridDim.x up to 2**31 - 1. numpy is the reference."""
import numpy as np
import pytest

import anycuda as ac
from conformance import load_cuda, poison


def _k(name):
    return load_cuda("programs").get_function(name)


@pytest.mark.parametrize("M,N,K", [(100, 70, 50), (64, 64, 64), (1, 33, 17)])
def test_tiled_sgemm(rng, M, N, K):
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = poison((M, N), np.float32)
    _k("sgemm_tiled")(((N + 15) // 16, (M + 15) // 16), (16, 16),
                      (ac.asarray(A), ac.asarray(B), C, np.int32(M), np.int32(N), np.int32(K)))
    assert np.allclose(C.get(), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


def test_prefix_scan(rng):
    n, block = 100_000, 256
    x = rng.integers(-100, 100, n).astype(np.int32)
    grid = (n + block - 1) // block
    out, sums = poison(n, np.int32), poison(grid, np.int32)
    _k("scan_blocks")((grid,), (block,), (ac.asarray(x), out, sums, np.int32(n)), shared_mem=4 * block)
    offsets = ac.asarray(np.cumsum(sums.get()).astype(np.int32))
    _k("add_block_offsets")((grid,), (block,), (out, offsets, np.int32(n)))
    assert np.array_equal(out.get(), np.cumsum(x).astype(np.int32))


@pytest.mark.parametrize("n", [1024, 64])
def test_bitonic_sort(rng, n):
    blocks = 4
    keys = rng.standard_normal(blocks * n).astype(np.float32)
    d = ac.asarray(keys)
    _k("bitonic_block")((blocks,), (n,), (d,), shared_mem=4 * n)
    assert np.array_equal(d.get(), np.sort(keys.reshape(blocks, n), axis=1).ravel())


@pytest.mark.parametrize("rows,cols", [(333, 517), (32, 32), (1, 100)])
def test_transpose(rng, rows, cols):
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = poison((cols, rows), np.float32)
    _k("transpose")(((cols + 31) // 32, (rows + 31) // 32), (32, 8), (ac.asarray(x), out, np.int32(rows), np.int32(cols)))
    assert np.array_equal(out.get(), x.T)


def test_nbody_step(rng):
    n, block = 1000, 128
    pos = rng.standard_normal((n, 4)).astype(np.float32)
    pos[:, 3] = rng.random(n).astype(np.float32)
    acc = poison((n, 3), np.float32)
    soft2 = 0.01
    _k("nbody_accel")(((n + block - 1) // block,), (block,), (ac.asarray(pos), acc, np.int32(n), np.float32(soft2)),
                      shared_mem=16 * block)
    p = pos.astype(np.float64)
    d = p[None, :, :3] - p[:, None, :3]
    inv = 1 / np.sqrt((d ** 2).sum(-1) + soft2)
    want = (d * (p[None, :, 3] * inv ** 3)[..., None]).sum(1)
    assert np.allclose(acc.get(), want, rtol=1e-3, atol=1e-3)


def test_layernorm_forward(rng):
    N, C = 300, 768
    x = rng.standard_normal((N, C)).astype(np.float32) * 3 + 1
    w, bias = rng.standard_normal(C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
    out, mean, rstd = poison((N, C), np.float32), poison(N, np.float32), poison(N, np.float32)
    block = 128
    _k("layernorm_forward")(((N * 32 + block - 1) // block,), (block,),
                            (out, mean, rstd, ac.asarray(x), ac.asarray(w), ac.asarray(bias), np.int32(N), np.int32(C)))
    xd = x.astype(np.float64)
    m = xd.mean(1)
    s = 1 / np.sqrt(xd.var(1) + 1e-5)
    assert np.allclose(mean.get(), m, rtol=1e-5, atol=1e-5)
    assert np.allclose(rstd.get(), s, rtol=1e-4)
    assert np.allclose(out.get(), (xd - m[:, None]) * s[:, None] * w + bias, rtol=1e-4, atol=1e-4)


def test_softmax_forward(rng):
    N, C = 200, 1001
    x = (rng.standard_normal((N, C)) * 5).astype(np.float32)
    out = poison((N, C), np.float32)
    _k("softmax_forward")((N,), (256,), (out, ac.asarray(x), np.int32(C)))
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    assert np.allclose(out.get(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_grid_stride_loop(rng):
    n = 1_000_003
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    dy = ac.asarray(y)
    _k("grid_stride_axpby")((40,), (256,), (ac.asarray(x), dy, 2.5, -0.5, np.int64(n)))
    # nvcc may contract a*x + b*y into an fma: allow a last-bit difference, nothing more
    assert np.allclose(dy.get(), 2.5 * x + -0.5 * y, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("block", [128, 256, 1024])
def test_two_pass_reduction(rng, block):
    n = 1 << 20
    x = rng.standard_normal(n).astype(np.float32)
    grid = 120
    partial, total = poison(grid, np.float32), poison(1, np.float32)
    k = _k("reduce_sum")
    k((grid,), (block,), (ac.asarray(x), partial, np.int32(n)))
    k((1,), (block,), (partial, total, np.int32(grid)))
    stride = grid * block
    xd = np.pad(x, (0, (-n) % stride)).astype(np.float64).reshape(-1, grid, block)
    assert np.allclose(partial.get(), xd.sum(axis=(0, 2)), rtol=1e-4, atol=1e-3)
    assert np.isclose(total.get()[0], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("n", [1, 1000, 200_001])
def test_blelloch_scan_two_levels(rng, n):
    block = 256
    per = 2 * block
    x = rng.integers(0, 1000, n).astype(np.uint32)
    grid = (n + per - 1) // per
    out, sums = poison(n, np.uint32), poison(grid, np.uint32)
    scan = _k("blelloch_scan")
    scan((grid,), (block,), (ac.asarray(x), out, sums, np.int32(n)), shared_mem=4 * per)
    assert grid <= per                      # the block sums fit one block of the same kernel
    scanned = poison(grid, np.uint32)
    scan((1,), (block,), (sums, scanned, np.uint64(0), np.int32(grid)), shared_mem=4 * per)
    _k("add_scanned_sums")(((n + 255) // 256,), (256,), (out, scanned, np.int32(n), np.int32(per)))
    want = np.concatenate([[0], np.cumsum(x.astype(np.uint64))[:-1]]).astype(np.uint32)
    assert np.array_equal(out.get(), want)


@pytest.mark.parametrize("n", [4096, 1024])
def test_bitonic_sort_with_global_passes(rng, n):
    block = 256                              # so strides of 256 and more go through global memory
    keys = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    keys[:10] = keys[10]                     # duplicates
    d = ac.asarray(keys)
    step, shared = _k("bitonic_global_step"), _k("bitonic_shared_steps")
    k = 2
    while k <= n:
        j = k // 2
        while j >= block:
            step((n // block,), (block,), (d, np.int32(k), np.int32(j)))
            j //= 2
        shared((n // block,), (block,), (d, np.int32(k), np.int32(j)), shared_mem=4 * block)
        k *= 2
    assert np.array_equal(d.get(), np.sort(keys))


@pytest.mark.parametrize("grid,block", [((3, 4, 5), (2, 3, 4)), ((1, 1, 7), (1, 1, 64)), ((65, 2, 1), (32, 1, 1)),
                                        ((2, 3, 2), (8, 8, 16)), ((1, 300, 1), (7, 1, 1))])
def test_3d_grids_and_blocks(grid, block):
    nb, nt = int(np.prod(grid)), int(np.prod(block))
    out = poison((nb, nt, 4), np.int32)
    _k("grid_ids")(grid, block, (out,))
    g = out.get()
    assert np.array_equal(g[:, :, 0], np.repeat(np.arange(nb)[:, None], nt, 1))
    assert np.array_equal(g[:, :, 1], np.repeat(np.arange(nt)[None, :], nb, 0))
    assert (g[:, :, 2] == (grid[0] << 20 | grid[1] << 10 | grid[2])).all()
    assert (g[:, :, 3] == (block[0] << 20 | block[1] << 10 | block[2])).all()


def test_large_1d_grid():
    grid, block = 2 ** 20, 4
    out = poison(grid * block, np.uint32)
    _k("tiny")((grid,), (block,), (out,))
    i = np.arange(grid * block, dtype=np.uint64)
    assert np.array_equal(out.get(), (i * 2654435761 % 2 ** 32).astype(np.uint32))


@pytest.mark.parametrize("grid", [2 ** 31 - 1, 2 ** 16 + 1])
def test_largest_grid_x(grid):
    """gridDim.x may be 2**31 - 1: every block runs (block 0 and the last one write)."""
    out = poison(3, np.uint32)
    _k("far_blocks")((grid,), (1,), (out,))
    assert [int(x) for x in out.get()] == [0, grid - 1, grid]


@pytest.mark.parametrize("N,C", [(300, 257), (64, 50257 // 16), (5, 1)])
def test_softmax_online_one_warp_per_row(rng, N, C):
    x = (rng.standard_normal((N, C)) * 4).astype(np.float32)
    out = poison((N, C), np.float32)
    block = 128
    _k("softmax_online_warp")(((N * 32 + block - 1) // block,), (block,), (out, ac.asarray(x), np.int32(N), np.int32(C)))
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    assert np.allclose(out.get(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
