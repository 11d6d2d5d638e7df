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


def _wrap(v, bits=32):
    """Python ints (or int64 arrays of small values) wrapped to signed `bits`."""
    return (v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


def _rand32(rng, n):
    v = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    v[:8] = [I32_MIN, 2 ** 31 - 1, -1, 0, 1, I32_MIN + 1, 0x7FFFFF, -0x800000]
    return v


def test_division_by_zero_and_overflow_64_do_not_crash(rng):
    I64_MIN = np.iinfo(np.int64).min
    a = np.array([7, -7, 0, I64_MIN, I64_MIN, 9, 2 ** 40 + 3], np.int64)
    b = np.array([0, 0, 0, -1, 1, -4, 2 ** 20], np.int64)
    out = poison((7, 4), np.int64)
    load_cuda("arith_int").get_function("div_corner64")((1,), (32,), (ac.asarray(a), ac.asarray(b), out, np.int32(7)))
    got = out.get()
    assert got[3, 0] == I64_MIN and got[3, 1] == 0 and got[4, 0] == I64_MIN
    assert list(got[5]) == [-2, 1, 0, 9] and got[6, 0] == 2 ** 20 and got[6, 1] == 3


def test_multiply_add_family(rng):
    n = 2048
    a, b, c = _rand32(rng, n), _rand32(rng, n)[::-1].copy(), _rand32(rng, n)
    b[8:16] = [-1, I32_MIN, 2 ** 31 - 1, 1, -1, 0, I32_MIN, 5]
    out, wide = poison((n, 22), np.int32), poison((n, 3), np.int64)
    load_cuda("arith_int").get_function("mad_family")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c),
                                                                         out, wide, np.int32(n)))
    g, w = out.get(), wide.get()
    for i in range(n):
        x, y, z = int(a[i]), int(b[i]), int(c[i])
        ux, uy, uz = x % 2 ** 32, y % 2 ** 32, z % 2 ** 32
        sx, sy = _wrap(x, 24), _wrap(y, 24)
        zx, zy = ux & 0xFFFFFF, uy & 0xFFFFFF
        hi = (x * y) >> 32
        want = [x * y + z, hi + z, ((ux * uy) >> 32) + uz, min(max(hi + z, -2 ** 31), 2 ** 31 - 1),
                sx * sy, (sx * sy) >> 16, (zx * zy) >> 16, sx * sy + z, zx * zy,
                abs(x - y) + uz, abs(ux - uy) + uz,
                min(max(x + y, -2 ** 31), 2 ** 31 - 1), min(max(x - y, -2 ** 31), 2 ** 31 - 1),
                abs(x), -x, min(ux, uy), max(x, y), hi,
                (x + y) >> 1, (x + y + 1) >> 1, (ux + uy) >> 1, (ux + uy + 1) >> 1]
        got = [int(v) for v in g[i]]
        want = [_wrap(v) for v in want]
        assert got == want, f"row {i} (a={x}, b={y}, c={z}): " + ", ".join(
            f"col {j}: {gv} != {wv}" for j, (gv, wv) in enumerate(zip(got, want)) if gv != wv)
        wide_want = [_wrap(x * y + z * 65536, 64), _wrap(ux * uy + (uz << 31), 64), x * y]
        assert [int(v) for v in w[i]] == wide_want, f"row {i} wide"


def test_8_and_16_bit_arithmetic(rng):
    n = 2048
    a = rng.integers(-2 ** 15, 2 ** 15, n).astype(np.int16)
    b = rng.integers(-2 ** 15, 2 ** 15, n).astype(np.int16)
    b[::9] = rng.integers(-3, 3, len(b[::9]))
    a[:4], b[:4] = [-32768, -32768, -128, 127], [-1, 255, -1, 0]     # 16- and 8-bit MIN / -1
    s = rng.integers(0, 40, n).astype(np.uint32)
    out = poison((n, 20), np.int32)
    load_cuda("arith_int").get_function("small_ints")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(s),
                                                                         out, np.int32(n)))
    g = out.get()

    def cdiv(p, q):
        qq = abs(p) // abs(q) * (1 if (p >= 0) == (q >= 0) else -1)
        return qq, p - qq * q

    for i in range(n):
        x, y, k = int(a[i]), int(b[i]), int(s[i])
        ux, uy = x % 2 ** 16, y % 2 ** 16
        cx, cy, bx, by = _wrap(x, 8), _wrap(y, 8), x % 256, y % 256
        d16 = cdiv(x, y) if y else (0, 0)
        d8 = cdiv(cx, cy) if cy else (0, 0)
        want = [_wrap(x + y, 16), _wrap(x * y, 16), (ux * uy) % 2 ** 16, _wrap(d16[0], 16), _wrap(d16[1], 16),
                _wrap(cx * cy, 8), (bx + by * 3) % 256, _wrap(d8[0], 8), (bx % by) if by else 0,
                _wrap(x + y, 16), (ux - uy) % 2 ** 16, _wrap(x * y, 16), (x * y) >> 16, (ux * uy) >> 16,
                x * y, _wrap(ux * uy),
                (ux << k) % 2 ** 16 if k < 16 else 0,
                x >> min(k, 15), ux >> k if k < 16 else 0, min(x, y)]
        got = [int(v) for v in g[i]]
        assert got == want, f"row {i} (a={x}, b={y}, k={k}): " + ", ".join(
            f"col {j}: {gv} != {wv}" for j, (gv, wv) in enumerate(zip(got, want)) if gv != wv)


def test_int64_more(rng):
    n = 1024
    a = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    b = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    c = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    a[:3] = [np.iinfo(np.int64).min, -1, 0]
    s = np.concatenate([np.array([0, 1, 63, 64, 65, 127, 128, 2 ** 31, 2 ** 32 - 1], np.uint32),
                        rng.integers(0, 130, n - 9).astype(np.uint32)])
    out = poison((n, 14), np.int64)
    load_cuda("arith_int").get_function("int64_more")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c),
                                                                         ac.asarray(s), out, np.int32(n)))
    g = out.get()
    M = 2 ** 64
    for i in range(n):
        x, y, z, k = int(a[i]), int(b[i]), int(c[i]), int(s[i])
        ux, uy = x % M, y % M
        want = [x * y + z, x & ~y, x | (y ^ z), ux >> (k & 63), x << (k & 63), max(x, y), min(ux, uy),
                abs(x), -x, (ux << k) if k < 64 else 0, x >> min(k, 63), ux >> k if k < 64 else 0,
                x * y + z, ((ux * uy) >> 64) + z]
        got = [int(v) for v in g[i]]
        want = [_wrap(v, 64) for v in want]
        assert got == want, f"row {i} (a={x}, b={y}, c={z}, k={k}): " + ", ".join(
            f"col {j}: {gv} != {wv}" for j, (gv, wv) in enumerate(zip(got, want)) if gv != wv)


def test_multiword_carry_and_borrow_chains(rng):
    n = 1024
    a = rng.integers(0, 2 ** 64, n, dtype=np.uint64)
    b = rng.integers(0, 2 ** 64, n, dtype=np.uint64)
    a[:4] = [2 ** 64 - 1, 2 ** 64 - 1, 0, 2 ** 63]
    b[:4] = [2 ** 64 - 1, 1, 0, 2 ** 63]
    prod, diff, sums = poison((n, 4), np.uint32), poison((n, 5), np.uint32), poison((n, 3), np.uint64)
    load_cuda("arith_int").get_function("carry_chains")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), prod, diff,
                                                                           sums, np.int32(n)))
    p, d, s = prod.get(), diff.get(), sums.get()
    words = lambda v, k: [(v >> (32 * j)) & 0xFFFFFFFF for j in range(k)]
    for i in range(n):
        x, y = int(a[i]), int(b[i])
        assert [int(v) for v in p[i]] == words(x * y, 4), f"row {i}: product of {x:#x} and {y:#x}"
        m, sub = y | (x << 64), x | (y << 64)
        assert [int(v) for v in d[i]] == words((m - sub) % 2 ** 128, 4) + [0xFFFFFFFF if m < sub else 0], f"row {i}"
        total = (x + y) * (2 ** 64 + 1)
        assert [int(v) for v in s[i]] == [total % 2 ** 64, (total >> 64) % 2 ** 64, total >> 128], f"row {i}"
