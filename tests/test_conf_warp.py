"""Warp collectives against models of CUDA's definitions: shuffles with every width and
their segment rules, votes, matches, reductions, activemask in divergent and partial warps,
partial member masks, cooperative-groups tiles."""
import numpy as np
import pytest

import anycuda as ac
from conformance import load_cuda, poison


def _shfl_model(v, lanes, width):
    n = len(v)
    out = np.zeros((n, 4), np.int64)
    for t in range(n):
        warp, lane = t // 32 * 32, t % 32
        start = lane & ~(width - 1)
        l = int(lanes[t])
        d = l % 32
        src = start + l % width
        out[t, 0] = v[warp + src]
        out[t, 1] = v[warp + lane - d] if lane - d >= start else v[t]
        out[t, 2] = v[warp + lane + d] if lane + d < start + width else v[t]
        x = lane ^ d
        out[t, 3] = v[warp + x] if x < start + width else v[t]
    return out


@pytest.mark.parametrize("width", [32, 16, 8, 4, 2])
def test_shuffles_with_width(rng, width):
    n = 128
    v = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    lanes = rng.integers(0, 64, n).astype(np.uint32)
    out = poison((n, 4), np.int32)
    load_cuda("warp").get_function("shuffles")((2,), (64,), (ac.asarray(v), ac.asarray(lanes), out, np.int32(width)))
    assert np.array_equal(out.get(), _shfl_model(v, lanes, width).astype(np.int32))


def test_64_bit_shuffles(rng):
    n = 64
    x = rng.standard_normal(n)
    out, out64 = poison(n, np.float64), poison(n, np.int64)
    load_cuda("warp").get_function("shuffle_wide")((1,), (64,), (ac.asarray(x), out, out64))
    t = np.arange(n)
    assert np.array_equal(out.get(), x[(t // 32) * 32 + ((t % 32) ^ 5)])
    v = (x * 1e6).astype(np.int64)
    src = np.where(t % 32 + 3 < 32, t + 3, t)
    assert np.array_equal(out64.get(), v[src])


def _mask(bits):
    return sum(1 << i for i, b in enumerate(bits) if b)


@pytest.mark.parametrize("block", [64, 48])
def test_votes_and_activemask(rng, block):
    n = block
    pred = (rng.random(n) < 0.5).astype(np.int32)
    pred[:32] = 1 if block == 64 else pred[:32]
    out = poison((n, 6), np.uint32)
    load_cuda("warp").get_function("votes")((1,), (block,), (ac.asarray(pred), out))
    g = out.get()
    for w in range(0, n, 32):
        lanes = range(w, min(w + 32, n))
        p = [pred[t] for t in lanes]
        active = _mask([1] * len(p))
        odd = _mask([(t - w) % 2 for t in lanes])
        for t in lanes:
            assert list(g[t]) == [_mask(p), int(all(p)), int(any(p)), int(all(p) or not any(p)), active,
                                  odd if t % 2 else 0], f"thread {t}"


def test_match_any_and_all(rng):
    n = 64
    key = rng.integers(0, 4, n).astype(np.int32) * 1000 + rng.integers(0, 3, n).astype(np.int32)
    key[32:] = 2000 + np.arange(32) % 2          # second warp: match_all on key/1000 holds
    out = poison((n, 2), np.uint32)
    load_cuda("warp").get_function("matches")((1,), (n,), (ac.asarray(key), out))
    g = out.get()
    for t in range(n):
        w = t // 32 * 32
        assert g[t, 0] == _mask([key[u] == key[t] for u in range(w, w + 32)])
        same = len({key[u] // 1000 for u in range(w, w + 32)}) == 1
        assert g[t, 1] == (0xFFFFFFFF if same else 0xDEADBEEF)


def test_warp_reductions(rng):
    n = 64
    v = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    out = poison((n, 6), np.uint32)
    load_cuda("warp").get_function("reductions")((1,), (n,), (ac.asarray(v), out))
    g = out.get()
    for w in (0, 32):
        seg = v[w:w + 32]
        ints = seg.view(np.int32)
        want = [int(seg.astype(np.uint64).sum()) % 2 ** 32, int(seg.min()), int(ints.max()) % 2 ** 32,
                int(np.bitwise_and.reduce(seg)), int(np.bitwise_or.reduce(seg)), int(np.bitwise_xor.reduce(seg))]
        for t in range(w, w + 32):
            assert [int(x) for x in g[t]] == want


def test_partial_member_masks(rng):
    n = 96
    v = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poison(n, np.int32)
    load_cuda("warp").get_function("partial_masks")((1,), (n,), (ac.asarray(v), out))
    t = np.arange(n)
    lane, base = t % 32, t // 32 * 32
    want = np.where(lane < 16, v[base + 3], np.where(lane < 31, v[np.minimum(t + 1, n - 1)], v))
    assert np.array_equal(out.get(), want)


def test_cooperative_group_tiles(rng):
    n = 128
    v = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poison((n, 2), np.int32)
    load_cuda("warp").get_function("tiles")((2,), (64,), (ac.asarray(v), out))
    g = out.get()
    t = np.arange(n)
    start = t // 8 * 8
    assert np.array_equal(g[:, 0], v.reshape(-1, 8).sum(1).repeat(8))
    assert np.array_equal(g[:, 1], np.where(t + 2 < start + 8, v[np.minimum(t + 2, n - 1)], v))


@pytest.mark.parametrize("block", [32, 96, 256, 1024])
def test_block_sum_with_shuffles(rng, block):
    n = 100_000
    x = rng.standard_normal(n).astype(np.float32)
    grid = (n + block - 1) // block
    out = poison(grid, np.float32)
    load_cuda("warp").get_function("block_sum")((grid,), (block,), (ac.asarray(x), out, np.int32(n)))
    want = np.add.reduceat(np.pad(x, (0, grid * block - n)).astype(np.float64), np.arange(0, grid * block, block))
    assert np.allclose(out.get(), want, rtol=1e-4, atol=1e-4)
