"""Warp collectives against models of CUDA's definitions: shuffles with every width and
their segment rules, votes, matches, reductions, activemask in divergent and partial warps,
partial member masks (also disjoint masks at one instruction), 32- and 64-bit element types,
cooperative-groups tiles of 16, 8 and 4, __syncwarp."""
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
    """__reduce_*_sync (redux.sync) exists from sm_80 on: this module is built for sm_80."""
    n = 64
    v = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    v[32:40] = rng.integers(0, 16, 8)                  # small values near large ones
    out = poison((n, 8), np.uint32)
    load_cuda("warp", ("-arch=sm_80",)).get_function("reductions")((1,), (n,), (ac.asarray(v), out))
    g = out.get()
    for w in (0, 32):
        seg = v[w:w + 32]
        ints = seg.view(np.int32)
        want = [int(seg.astype(np.uint64).sum()) % 2 ** 32, int(seg.min()), int(ints.max()) % 2 ** 32,
                int(np.bitwise_and.reduce(seg)), int(np.bitwise_or.reduce(seg)), int(np.bitwise_xor.reduce(seg)),
                int(ints.min()) % 2 ** 32, int(seg.max())]
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


def _shfl_model_typed(v, lanes, width):
    """CUDA's four shuffles for any element type; `lanes` are signed source lanes for
    __shfl_sync (taken modulo the width) and give deltas `lane & 31` for the others."""
    n = len(v)
    out = np.empty((n, 4), v.dtype)
    for t in range(n):
        warp, lane = t // 32 * 32, t % 32
        start = lane & ~(width - 1)
        l = int(lanes[t])
        d = l & 31
        out[t, 0] = v[warp + start + (l & (width - 1))]
        out[t, 1] = v[warp + lane - d] if lane - d >= start else v[t]
        out[t, 2] = v[warp + lane + d] if lane + d < start + width else v[t]
        x = lane ^ d
        out[t, 3] = v[warp + x] if x < start + width else v[t]
    return out


@pytest.mark.parametrize("width", [32, 16, 8, 4, 2])
@pytest.mark.parametrize("kind", ["f32", "f64", "i64", "u32"])
def test_typed_shuffles_with_width(rng, kind, width):
    n = 96
    if kind == "f32":
        v = rng.standard_normal(n).astype(np.float32)
        v[5] = np.float32(-0.0)
    elif kind == "f64":
        v = rng.standard_normal(n) * 1e300
        v[7] = 5e-324                                   # a subnormal survives the two halves
    elif kind == "i64":
        v = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    else:
        v = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    lanes = rng.integers(-64, 64, n).astype(np.int32)
    lanes[:8] = [0, 1, 31, 32, -1, width - 1, width, 2 * width + 1]
    out = poison((n, 4), v.dtype)
    load_cuda("warp").get_function(f"shuffles_{kind}")((3,), (32,), (ac.asarray(v), ac.asarray(lanes), out, np.int32(width)))
    want = _shfl_model_typed(v, lanes, width)
    assert np.array_equal(out.get().view(f"u{v.itemsize}"), want.view(f"u{v.itemsize}"))   # bit-exact


@pytest.mark.parametrize("block", [1, 7, 33, 40, 63, 100])
def test_collectives_in_a_partial_last_warp(rng, block):
    grid = 2
    v = rng.integers(-1000, 1000, grid * block).astype(np.int32)
    v[rng.integers(0, grid * block)] = 12345
    out = poison((grid * block, 5), np.uint32)
    load_cuda("warp").get_function("partial_warp")((grid,), (block,), (ac.asarray(v), out))
    g = out.get()
    for b in range(grid):
        for w in range(0, block, 32):
            lanes = range(w, min(w + 32, block))
            seg = v[b * block + w: b * block + lanes[-1] + 1]
            want = [_mask([1] * len(seg)), int(seg.sum()) % 2 ** 32, _mask(seg > 0), 1, int((seg == 12345).any())]
            for t in lanes:
                assert [int(x) for x in g[b * block + t]] == want, f"block {b} thread {t}"


def test_votes_in_nested_divergent_branches(rng):
    n = 64
    v = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poison((n, 4), np.uint32)
    load_cuda("warp").get_function("divergent_votes")((1,), (n,), (ac.asarray(v), out))
    g = out.get()
    dead = 0xDEADBEEF
    m3 = _mask([l % 3 == 0 for l in range(32)])
    low = _mask([l % 3 != 0 and l < 16 for l in range(32)])
    low4 = _mask([l % 3 != 0 and l < 16 and l & 4 for l in range(32)])
    for t in range(n):
        w, lane = t // 32 * 32, t % 32
        if lane % 3 == 0:
            want = [_mask([l % 3 == 0 and v[w + l] & 1 for l in range(32)]), m3,
                    int(v[w + (lane + 3) % 33]) % 2 ** 32, dead]
        elif lane < 16:
            any4 = int(any(v[w + l] > 0 for l in range(32) if low4 >> l & 1))
            want = [low, low4, any4, dead] if lane & 4 else [low, dead, dead, dead]
        else:
            want = [dead, dead, dead, int(v[w + 16]) % 2 ** 32]
        assert [int(x) for x in g[t]] == want, f"thread {t}"


@pytest.mark.parametrize("block", [64, 45])
def test_match_on_64_bit_keys(rng, block):
    key = rng.integers(0, 3, block).astype(np.int64) << 40 | rng.integers(0, 3, block).astype(np.int64) << 33
    key[32:] = (7 << 40) + rng.integers(0, 2, block - 32)     # second warp: match_all on key >> 40 holds
    key[3] = key[4] + (1 << 40) * 0                           # a pair differing in nothing
    out = poison((block, 2), np.uint32)
    load_cuda("warp").get_function("matches64")((1,), (block,), (ac.asarray(key), out))
    g = out.get()
    for t in range(block):
        w = t // 32 * 32
        lanes = range(w, min(w + 32, block))
        assert g[t, 0] == sum(1 << (u - w) for u in lanes if key[u] == key[t]), f"thread {t}"
        same = len({int(key[u]) >> 40 for u in lanes}) == 1
        assert g[t, 1] == (_mask([1] * len(lanes)) if same else 0xDEADBEEF), f"thread {t}"


@pytest.mark.parametrize("arch", ["sm_75", "sm_80"])
def test_cooperative_group_tiles_of_16(rng, arch):
    """cg::reduce is built from shuffles for sm_75 and from redux.sync with the tile's
    member mask for sm_80."""
    n, block = 192, 96
    v = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poison((n, 5), np.int32)
    load_cuda("warp", (f"-arch={arch}",)).get_function("tiles16")((2,), (block,), (ac.asarray(v), out))
    g = out.get()
    t = np.arange(n)
    tiles = v.reshape(-1, 16)
    r = t % 16
    assert np.array_equal(g[:, 0], tiles.sum(1).repeat(16))
    assert np.array_equal(g[:, 1], tiles.max(1).repeat(16))
    assert np.array_equal(g[:, 2], np.where(r >= 3, v[np.maximum(t - 3, 0)], v))
    assert np.array_equal(g[:, 3], (t % block) // 16 * 100 + r)
    assert np.array_equal(g[:, 4], tiles.sum(1).repeat(16))


def test_cooperative_group_tiles_of_4(rng):
    n = 64
    v = rng.standard_normal(n).astype(np.float32)
    out = poison((n, 2), np.float32)
    load_cuda("warp").get_function("tiles4")((2,), (32,), (ac.asarray(v), out))
    g = out.get()
    tiles = v.reshape(-1, 4)
    assert np.array_equal(g[:, 0], tiles.min(1).repeat(4))
    assert np.array_equal(g[:, 1], tiles[:, 3].repeat(4))


@pytest.mark.parametrize("block", [32, 96, 256])
def test_syncwarp_orders_shared_memory(rng, block):
    grid, rounds = 3, 4
    v = rng.integers(-1000, 1000, (grid, block)).astype(np.int32)
    out = poison(grid * block, np.int32)
    load_cuda("warp").get_function("syncwarp_exchange")((grid,), (block,), (ac.asarray(v), out, np.int32(rounds)))
    x = v.reshape(grid, -1, 32).astype(np.int64)
    for r in range(rounds):
        x = np.roll(x, -5, axis=2) - r
    assert np.array_equal(out.get(), x.ravel())


def test_collectives_with_disjoint_member_masks_at_one_instruction(rng):
    """Lanes 0-15 pass mask 0x0000ffff and lanes 16-31 mask 0xffff0000 to the same vote,
    match and reduce instructions (as cooperative-groups tiles do): two separate groups."""
    n = 64
    v = rng.integers(-1000, 1000, n).astype(np.int32)
    v[16:32] = np.abs(v[16:32]) | 0x100                 # second half: match_all on v & 0x100 holds
    v[48:64] = np.abs(v[48:64]) & ~0x100
    out = poison((n, 8), np.uint32)
    load_cuda("warp", ("-arch=sm_80",)).get_function("split_mask_collectives")((1,), (n,), (ac.asarray(v), out))
    g = out.get()
    for t in range(n):
        lo = t // 16 * 16
        half = range(lo, lo + 16)
        shift = lo % 32
        bits = lambda pred: sum(1 << (u % 32) for u in half if pred(u))
        same = len({int(v[u]) & 0x100 for u in half}) == 1
        want = [bits(lambda u: v[u] > 0), int(all(v[u] > -900 for u in half)), int(any(v[u] > 900 for u in half)),
                bits(lambda u: v[u] & 3 == v[t] & 3), (0xFFFF << shift) if same else 0, int(same),
                int(sum(int(v[u]) for u in half)) % 2 ** 32, int(max(v[u] for u in half)) % 2 ** 32]
        assert [int(x) for x in g[t]] == want, f"thread {t}"


def _lanes_model(n, shfl):
    """A model of one shuffle over a block of n threads: shfl(lane) -> (source lane, in range)
    per the PTX ISA; a source beyond the block (a partial last warp) reads 0 in anycuda."""
    def run(v):
        out, pred = np.zeros(n, np.int64), np.zeros(n, bool)
        for t in range(n):
            w, lane = t // 32 * 32, t % 32
            j, ok = shfl(lane, t)
            out[t] = v[w + j] if w + j < n else 0
            pred[t] = ok
        return out, pred
    return run


def _segment(width):
    return lambda lane: (lane & ~(width - 1), (lane & ~(width - 1)) + width)


def _shfl(mode, d, width=32):
    seg = _segment(width)

    def f(lane, t=None):
        lo, hi = seg(lane)
        dd = d(lane) if callable(d) else d
        if mode == "idx":
            return lo + dd % width, True
        j = {"up": lane - dd, "down": lane + dd, "bfly": lane ^ dd}[mode]
        ok = lo <= j < hi
        return (j if ok else lane), ok
    return f


def _shuffle_loops_model(v, rounds):
    n = len(v)
    i32 = lambda x: ((np.asarray(x, np.int64) + 2 ** 31) % 2 ** 32 - 2 ** 31)
    v = v.astype(np.int64)
    acc = np.zeros(n, np.int64)
    sh = lambda v, f: _lanes_model(n, f)(v)[0]
    for r in range(rounds):
        v = i32(v + sh(v, _shfl("bfly", 16)))
        v = i32(v ^ sh(v, _shfl("down", 3)))
        v = i32(v + sh(v, _shfl("up", 5)))
        v = i32(v * 3 + sh(v, _shfl("idx", 7)))
        v = i32(v + sh(v, _shfl("bfly", 2, 8)))
        v = i32(v - sh(v, _shfl("down", 1, 4)))
        v = i32(v + sh(v, _shfl("up", 2, 16)))
        v = i32(v ^ sh(v, _shfl("idx", 9, 16)))
        s, p = _lanes_model(n, _shfl("down", 6, 8))(v)       # c = 0x181f: segments of 8
        v = i32(v + s * 7 + p)
        bits = (v & (1 << (r % 4 + 20))) != 0
        for w in range(0, n, 32):
            lanes = slice(w, min(w + 32, n))
            b = sum(1 << i for i, x in enumerate(v[lanes] & 1) if x)
            uni = int(bits[lanes].all() or not bits[lanes].any())
            acc[lanes] = i32(acc[lanes] + bin(b).count("1") + 3 * int((v[lanes] > 0).all())
                             + 5 * int(((v[lanes] & 7) == 0).any()) + 11 * uni + (b & 0xff))
        v = i32(v + sh(v, _shfl("idx", lambda lane: lane + r, 8)))
    return v, acc


@pytest.mark.parametrize("block", [64, 256, 48, 96 + 8])
def test_shuffles_and_votes_in_a_uniform_loop(rng, block):
    """Full warps (64, 256): every shuffle and vote of the loop resolved for the whole block
    at once; partial last warps (48, 104): the same loop through the general rounds."""
    blocks, rounds = 3, 5
    n = blocks * block
    v = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    out = poison((n, 2), np.int32)
    load_cuda("warp").get_function("shuffle_loops")((blocks,), (block,), (ac.asarray(v), out, np.int32(rounds)))
    g = out.get()
    for k in range(blocks):
        part = slice(k * block, (k + 1) * block)
        want_v, want_acc = _shuffle_loops_model(v[part], rounds)
        assert np.array_equal(g[part, 0], want_v.astype(np.int32)), f"block {k}: values"
        assert np.array_equal(g[part, 1], want_acc.astype(np.int32)), f"block {k}: votes"


def test_shuffles_after_warps_leave_a_loop_unevenly(rng):
    block = 128
    v = rng.integers(-2 ** 31, 2 ** 31, block, dtype=np.int64).astype(np.int32)
    trips = np.array([3, 0, 5, 1], np.int32)
    out = poison(block, np.int32)
    load_cuda("warp").get_function("shuffle_uneven_loops")((1,), (block,), (ac.asarray(v), ac.asarray(trips), out))
    i32 = lambda x: ((np.asarray(x, np.int64) + 2 ** 31) % 2 ** 32 - 2 ** 31)
    sh = lambda v, f: _lanes_model(block, f)(v)[0]
    x = v.astype(np.int64)
    for w in range(4):
        lanes = slice(32 * w, 32 * w + 32)
        for _ in range(trips[w]):
            y = x.copy()
            y[lanes] = i32(x[lanes] + sh(x, _shfl("bfly", 1))[lanes])
            y[lanes] = i32(y[lanes] * 5 + sh(y, _shfl("down", 4))[lanes])
            x = y
    for _ in range(trips[0]):
        up = sh(x, _shfl("up", 3))
        ballot = np.zeros(block, np.int64)
        for w in range(0, block, 32):
            ballot[w:w + 32] = sum(1 << i for i, b in enumerate(x[w:w + 32] & 2) if b)
        x = i32(x ^ i32(up + i32(ballot)))
    assert np.array_equal(out.get(), x.astype(np.int32))
