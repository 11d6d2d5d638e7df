"""Integer arithmetic against numpy on fresh random inputs, outputs poisoned first."""
import numpy as np

import anycuda as ac
from conformance import load_cuda, poison

I32_MIN = -(2 ** 31)


def _i32(v):
    return np.asarray(v, dtype=np.int64).astype(np.int32)


def _c_div(x, y):
    """C's truncating division and remainder."""
    q = np.where(y != 0, np.abs(x) // np.where(y == 0, 1, np.abs(y)), 0) * np.sign(x) * np.sign(y)
    r = x - q * y
    return np.where(y != 0, q, 0), np.where(y != 0, r, 0)


def test_int32_operations(rng):
    n = 3000
    a = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    b = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    b[::7] = rng.integers(-50, 50, len(b[::7]))
    a[::11] = I32_MIN
    sh = rng.integers(0, 64, n, dtype=np.uint32)
    out = poison((n, 24), np.int32)
    k = load_cuda("arith_int").get_function("int32_ops")
    k(((n + 127) // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(sh), out, np.int32(n)))
    got = out.get()
    x, y = a.astype(np.int64), b.astype(np.int64)
    ux, uy = x & 0xFFFFFFFF, y & 0xFFFFFFFF
    q, r = _c_div(x, y)
    safe = np.where(uy == 0, 1, uy)
    s = sh & 31
    ref = [x + y, x - y, x * y, (x * y) >> 32, (ux * uy) >> 32,
           np.where((x == I32_MIN) & (y == -1), I32_MIN, q), np.where(y == -1, 0, r),
           np.where(uy != 0, ux // safe, 0), np.where(uy != 0, ux % safe, 0),
           np.abs(x), np.minimum(x, y), np.maximum(x, y), np.minimum(ux, uy), np.maximum(ux, uy), -x,
           x & y, x | y, x ^ y, ~x, x << s, x >> s, ux >> s,
           (((x << 40) >> 40) * ((y << 40) >> 40)), x * 7 + y]
    for j, want in enumerate(ref):
        assert np.array_equal(got[:, j], _i32(want)), f"column {j}"


def test_int64_operations(rng):
    n = 2000
    a = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    b = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    b[::5] = rng.integers(-1000, 1000, len(b[::5]))
    out = poison((n, 12), np.int64)
    k = load_cuda("arith_int").get_function("int64_ops")
    k(((n + 127) // 128,), (128,), (ac.asarray(a), ac.asarray(b), out, np.int32(n)))
    got = out.get()
    M = 2 ** 64
    for i in range(0, n, 37):
        x, y = int(a[i]), int(b[i])
        ux, uy = x % M, y % M
        q = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1) if y else 0
        r = x - q * y if y else 0
        want = [x + y, x - y, x * y, q, r, ux // uy if uy else 0, ux % uy if uy else 0,
                (x * y) >> 64, (ux * uy) >> 64, min(x, y), max(ux, uy), x >> (uy & 63)]
        for j, w in enumerate(want):
            w %= M
            assert int(got[i, j]) % M == w, f"row {i} column {j}: {got[i, j]} != {w}"


def test_wide_products_and_carry_chains(rng):
    n = 1024
    a = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    a[:8] = 0xFFFFFFFF   # force carries through all four words
    b[:4] = 1
    wide = poison((n, 2), np.uint64)
    sums = poison(n, np.uint32)
    load_cuda("arith_int").get_function("wide_and_carry")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), wide, sums, np.int32(n)))
    w = wide.get()
    assert np.array_equal(w[:, 0], a.astype(np.uint64) * b.astype(np.uint64))
    signed = a.view(np.int32).astype(np.int64) * b.view(np.int32).astype(np.int64)
    assert np.array_equal(w[:, 1], signed.astype(np.uint64))
    got = sums.get()
    for g in range(0, n, 4):
        x = sum(int(a[g + k]) << (32 * k) for k in range(4))
        y = sum(int(b[g + k]) << (32 * k) for k in range(4))
        s = (x + y) % 2 ** 128
        assert [int(v) for v in got[g:g + 4]] == [(s >> (32 * k)) & 0xFFFFFFFF for k in range(4)]


def test_shift_and_saturation_edges(rng):
    n = 512
    a = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    s = np.concatenate([np.array([0, 1, 31, 32, 33, 63, 64, 255, 256, 2 ** 31, 2 ** 32 - 1], np.uint32),
                        rng.integers(0, 2 ** 32, n - 11, dtype=np.uint64).astype(np.uint32)])
    out = poison((n, 4), np.int32)
    load_cuda("arith_int").get_function("edges")((n // 128,), (128,), (ac.asarray(a), ac.asarray(s), out, np.int32(n)))
    got = out.get().astype(np.int64)
    x = a.astype(np.int64)
    k = s.astype(np.int64)
    big = k >= 32
    kk = np.minimum(k, 31)
    assert np.array_equal(got[:, 0], np.where(big, 0, _i32(x << kk)))
    assert np.array_equal(got[:, 1], np.where(big, np.where(x < 0, -1, 0), x >> kk))
    assert np.array_equal(got[:, 2] & 0xFFFFFFFF, np.where(big, 0, (x & 0xFFFFFFFF) >> kk))
    assert np.array_equal(got[:, 3], np.clip(2 * x, -2 ** 31, 2 ** 31 - 1))


def test_division_by_zero_and_overflow_do_not_crash():
    a = np.array([7, -7, 0, I32_MIN, I32_MIN, 5], np.int32)
    b = np.array([0, 0, 0, -1, 1, 2], np.int32)
    out = poison((6, 2), np.int32)
    load_cuda("arith_int").get_function("div_corner")((1,), (32,), (ac.asarray(a), ac.asarray(b), out, np.int32(6)))
    got = out.get()
    assert got[3, 0] == I32_MIN and got[3, 1] == 0          # INT_MIN / -1 wraps, remainder 0
    assert got[4, 0] == I32_MIN and got[5, 0] == 2 and got[5, 1] == 1
