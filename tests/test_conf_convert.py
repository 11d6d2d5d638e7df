"""Conversions: float->int with every rounding mode, saturation and NaN as a GPU converts it; int->float
with directed rounding (exact rationals as reference); f64->f32 narrowing; integer casts."""
from fractions import Fraction

import numpy as np

import anycuda as ac
from conformance import load_cuda, poison, random_bits, round_directed


def _nan_as_int(source, lo, hi):
    """What an H200 writes for NaN: 0 from f32 into 32 bits; else the destination's sign bit
    alone (0x80000000 from f64 into 32 bits, 0x8000000000000000 into 64 bits)."""
    bits = 64 if hi >= 2 ** 32 else 32
    if bits == 32 and np.dtype(source) != np.float64:
        return 0
    return lo if lo < 0 else 2 ** (bits - 1)


def _f2i(x, mode, lo, hi):
    """PTX's float -> int: round in `mode`, saturate to [lo, hi], NaN as _nan_as_int (Python ints)."""
    rnd = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}[mode]
    out = []
    nan = _nan_as_int(np.asarray(x).dtype, lo, hi)
    for v in np.asarray(x, dtype=np.float64):
        if np.isnan(v):
            out.append(nan)
        elif np.isinf(v):
            out.append(hi if v > 0 else lo)
        else:
            out.append(min(max(int(rnd(v)), lo), hi))
    return np.array(out, dtype=object)


def test_float_to_int_rounding_and_saturation(rng):
    n = 1024
    a = (rng.standard_normal(n) * np.exp2(rng.integers(0, 70, n))).astype(np.float32)
    a[:10] = [np.nan, np.inf, -np.inf, 2.5, -2.5, 3.5, -0.5, 4294967296.0, -2147483904.0, 1e30]
    out = poison((n, 20), np.int64)
    load_cuda("convert").get_function("from_f32")((n // 128,), (128,), (ac.asarray(a), out, np.int32(n)))
    g = out.get()
    I32, U32, I64, U64 = (-2 ** 31, 2 ** 31 - 1), (0, 2 ** 32 - 1), (-2 ** 63, 2 ** 63 - 1), (0, 2 ** 64 - 1)
    checks = {0: ("rn", I32), 1: ("rz", I32), 2: ("rd", I32), 3: ("ru", I32), 4: ("rn", U32), 5: ("rz", U32),
              6: ("rn", I64), 7: ("rz", I64), 8: ("rd", U64), 9: ("rz", I32), 10: ("rz", U32), 17: ("rz", I64),
              18: ("rz", U64)}
    for j, (mode, (lo, hi)) in checks.items():
        want = _f2i(a, mode, lo, hi)
        got = g[:, j].astype(object)
        if hi >= 2 ** 32:     # 64-bit results come back through int64
            got = np.array([int(v) % 2 ** 64 if hi == U64[1] else int(v) for v in g[:, j]], dtype=object)
        elif lo == 0:
            got = np.array([int(v) % 2 ** 32 for v in g[:, j]], dtype=object)
        assert list(got) == list(want), f"column {j} ({mode})"
    i32 = _f2i(a, "rz", *I32).astype(np.int64)
    assert np.array_equal(g[:, 11], ((i32 + 128) % 256) - 128)
    assert np.array_equal(g[:, 12], ((i32 + 32768) % 65536) - 32768)
    assert np.array_equal(g[:, 13] & 0xFFFFFFFF, a.view(np.uint32).astype(np.int64))
    with np.errstate(invalid="ignore"):
        sat = np.clip(np.nan_to_num(a, nan=0.0), 0, 1).astype(np.float32)
    assert np.array_equal(g[:, 14] & 0xFFFFFFFF, sat.view(np.uint32).astype(np.int64))
    assert np.array_equal(g[:, 15] & 0xFFFFFFFF, a.view(np.uint32).astype(np.int64) & 0xFFFFFFFF | 0) or \
        np.all(np.isnan(a) | (g[:, 15] & 0xFFFFFFFF == a.view(np.uint32)))
    assert np.array_equal(g[:, 16][~np.isnan(a)], a.astype(np.float64).view(np.int64)[~np.isnan(a)])
    with np.errstate(over="ignore"):
        assert np.array_equal(g[:, 19], a.astype(np.float16).view(np.uint16).astype(np.int64)) or \
            np.all(np.isnan(a) | (g[:, 19] == a.astype(np.float16).view(np.uint16)))


def test_int_to_float_directed_rounding(rng):
    n = 512
    v = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    v[:64] = rng.integers(-2 ** 31, 2 ** 31, 64)
    v[:4] = [0, -1, 2 ** 24 + 1, -(2 ** 24) - 3]
    f = poison((n, 12), np.float32)
    d = poison((n, 2), np.float64)
    load_cuda("convert").get_function("to_float")((n // 128,), (128,), (ac.asarray(v), f, d, np.int32(n)))
    gf, gd = f.get(), d.get()
    for i in range(n):
        x = int(v[i])
        x32 = (x + 2 ** 31) % 2 ** 32 - 2 ** 31
        u32, u64 = x % 2 ** 32, x % 2 ** 64
        s16 = (x32 + 2 ** 15) % 2 ** 16 - 2 ** 15
        want = [(x32, "rn"), (x32, "rz"), (x32, "rd"), (x32, "ru"), (u32, "rn"), (u32, "rz"), (x, "rn"),
                (x, "rz"), (x, "rd"), (u64, "ru"), (u64, "rn"), (s16, "rn")]
        for j, (val, mode) in enumerate(want):
            assert gf[i, j] == round_directed(Fraction(val), mode, np.float32), f"row {i} column {j}"
        assert gd[i, 0] == float(x)
        assert gd[i, 1] == round_directed(Fraction(u64), "rz", np.float64)


def test_f64_to_f32_and_int(rng):
    n = 512
    a = rng.standard_normal(n) * 10.0 ** rng.integers(-40, 40, n)
    a[:5] = [np.nan, np.inf, -np.inf, 1e300, -1e-300]
    out = poison((n, 4), np.float32)
    ints = poison((n, 3), np.int32)
    load_cuda("convert").get_function("f64_narrow")((n // 128,), (128,), (ac.asarray(a), out, ints, np.int32(n)))
    g, gi = out.get(), ints.get()
    for i in range(5, n):
        exact = Fraction(float(a[i]))
        for j, mode in enumerate(("rn", "rz", "rd", "ru")):
            want = round_directed(exact, mode, np.float32)
            assert g[i, j] == want, f"row {i} {mode}: {g[i, j]!r} != {want!r}"
    assert np.isnan(g[0]).all() and np.all(g[1] == np.inf) and np.all(g[2] == -np.inf)
    with np.errstate(invalid="ignore"):
        assert list(gi[:, 0]) == list(_f2i(a, "rn", -2 ** 31, 2 ** 31 - 1))
        assert list(gi[:, 1]) == list(_f2i(a, "rz", -2 ** 31, 2 ** 31 - 1))
        assert [int(v) % 2 ** 32 for v in gi[:, 2]] == list(_f2i(a, "rd", 0, 2 ** 32 - 1))


def test_integer_casts(rng):
    n = 256
    v = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    out = poison((n, 6), np.int64)
    load_cuda("convert").get_function("int_casts")((n // 128,), (128,), (ac.asarray(v), out, np.int32(n)))
    g = out.get()
    want = np.stack([v.astype(np.int8), v.astype(np.uint8), v.astype(np.int16), v.astype(np.uint16),
                     v.astype(np.int32), v.astype(np.uint32)], axis=1).astype(np.int64)
    assert np.array_equal(g, want)


def _u(v, bits):
    return int(v) % 2 ** bits


def test_every_float_to_int_intrinsic(rng):
    n = 1024
    a = (rng.standard_normal(n) * np.exp2(rng.integers(0, 70, n))).astype(np.float32)
    d = rng.standard_normal(n) * np.exp2(rng.integers(0, 70, n))
    specials = [np.nan, np.inf, -np.inf, 2.5, -2.5, 0.5, -0.5, -0.0, 4294967295.5, 4294967296.0, 2.0 ** 63,
                -2.0 ** 63, 2.0 ** 64, -1.0, 1.5, 255.0]
    a[:len(specials)] = specials
    d[:len(specials)] = specials
    d[len(specials):len(specials) + 4] = [2147483647.5, -2147483648.5, 9007199254740993.0, 18446744073709549568.0]
    out = poison((n, 24), np.int64)
    load_cuda("convert").get_function("f2i_all")((n // 128,), (128,), (ac.asarray(a), ac.asarray(d), out, np.int32(n)))
    g = out.get()
    I32, U32, I64, U64 = (-2 ** 31, 2 ** 31 - 1), (0, 2 ** 32 - 1), (-2 ** 63, 2 ** 63 - 1), (0, 2 ** 64 - 1)
    cols = {0: (a, "rd", U32), 1: (a, "ru", U32), 2: (a, "rd", I64), 3: (a, "ru", I64), 4: (a, "rn", U64),
            5: (a, "rz", U64), 6: (a, "ru", U64), 7: (d, "rd", I32), 8: (d, "ru", I32), 9: (d, "rn", U32),
            10: (d, "rz", U32), 11: (d, "ru", U32), 12: (d, "rn", I64), 13: (d, "rz", I64), 14: (d, "rd", I64),
            15: (d, "ru", I64), 16: (d, "rn", U64), 17: (d, "rz", U64), 18: (d, "rd", U64), 19: (d, "ru", U64),
            22: (d, "rz", I64), 23: (d, "rz", U64)}
    for j, (src, mode, (lo, hi)) in cols.items():
        with np.errstate(invalid="ignore"):
            want = _f2i(src, mode, lo, hi)
        bits = 64 if hi >= 2 ** 32 else 32
        got = [_u(v, bits) if lo == 0 else (int(v) if bits == 64 else (int(v) + 2 ** 31) % 2 ** 32 - 2 ** 31) for v in g[:, j]]
        bad = [i for i in range(n) if got[i] != want[i]]
        assert not bad, f"column {j} ({mode}, range {lo}..{hi}): rows {bad[:4]}: input {[src[i] for i in bad[:4]]}, got {[got[i] for i in bad[:4]]}, want {[want[i] for i in bad[:4]]}"
    fin = np.isfinite(d) & (np.abs(d) < 32768)
    assert np.array_equal(g[fin, 20], np.trunc(d[fin]).astype(np.int64))          # in-range C casts only
    fin = np.isfinite(a) & (a > -1) & (a < 256)
    assert np.array_equal(g[fin, 21], np.trunc(a[fin]).astype(np.int64))


def test_every_int_to_float_intrinsic(rng):
    n = 512
    v = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    v[:128] = rng.integers(-2 ** 31, 2 ** 31, 128)
    v[:8] = [0, -1, 2 ** 24 + 1, -(2 ** 24) - 3, 2 ** 53 + 1, -(2 ** 63), 2 ** 63 - 1, 0x7FF0000000000000]
    f, d = poison((n, 20), np.float32), poison((n, 10), np.float64)
    load_cuda("convert").get_function("i2f_all")((n // 128,), (128,), (ac.asarray(v), f, d, np.int32(n)))
    gf, gd = f.get(), d.get()
    M = 0xFFFFFFFF
    for i in range(n):
        x = int(v[i])
        x32 = (x + 2 ** 31) % 2 ** 32 - 2 ** 31
        u32, u64 = x % 2 ** 32, x % 2 ** 64
        lo8, s8, u16, s16 = x % 256, (x + 128) % 256 - 128, x % 65536, (x + 32768) % 65536 - 32768
        hi_word = (x >> 32) & M
        hi_int = (hi_word + 2 ** 31) % 2 ** 32 - 2 ** 31
        lo_int = (u32 + 2 ** 31) % 2 ** 32 - 2 ** 31
        rd = lambda val, mode, t=np.float32: round_directed(Fraction(val), mode, t)
        hilo_bits = (u32 << 32) | hi_word
        want_f = [rd(x32, "rn"), rd(u32, "rn"), rd(u32, "rd"), rd(u32, "ru"), rd(x, "rn"), rd(x, "ru"), rd(u64, "rn"),
                  rd(u64, "rz"), rd(u64, "rd"), np.float32(lo8), np.float32(s8), np.float32(u16),
                  np.uint32(u32).view(np.float32), np.uint32(u32 ^ 0x80000000).view(np.float32),
                  rd(x32, "rn"), np.float32(s16), rd(x >> 20, "rn"),
                  np.float32(1.0 if hilo_bits & ~(1 << 63) == 0 else 0.0), rd(hi_int, "rn"), rd(lo_int, "rn")]
        for j, w in enumerate(want_f):
            assert gf[i, j] == w or (np.isnan(gf[i, j]) and np.isnan(w)), f"row {i} (v={x}) float column {j}: {gf[i, j]!r} != {w!r}"
        want_d = [float(x32), float(u32), rd(x, "rn", np.float64), rd(x, "rz", np.float64), rd(x, "rd", np.float64),
                  rd(x, "ru", np.float64), rd(u64, "rn", np.float64), rd(u64, "rd", np.float64), rd(u64, "ru", np.float64)]
        for j, w in enumerate(want_d):
            assert gd[i, j] == w, f"row {i} (v={x}) double column {j}: {gd[i, j]!r} != {w!r}"
        assert gd[i, 9:10].view(np.int64)[0] == x


def test_float_double_widening_narrowing_and_saturate(rng):
    n = 2048
    a = random_bits(rng, n, np.float32)
    d = random_bits(rng, n, np.float64)
    d[n // 2:] = rng.standard_normal(n - n // 2) * np.exp2(rng.integers(-160, 140, n - n // 2))
    a[:6] = [np.nan, -0.0, 0.5, 1.5, -1e-45, 1.0]
    d[:6] = [np.nan, -0.0, 3.4028235677973366e38, 3.4028235677973362e38, 1e-46, 7e-46]
    wide, narrow = poison((n, 2), np.float64), poison((n, 3), np.float32)
    load_cuda("convert").get_function("f2f")((n // 128,), (128,), (ac.asarray(a), ac.asarray(d), wide, narrow, np.int32(n)))
    w, nw = wide.get(), narrow.get()
    same = lambda g, want: np.all(((g == want) & (np.signbit(g) == np.signbit(want))) | (np.isnan(g) & np.isnan(want)))
    with np.errstate(invalid="ignore", over="ignore"):
        assert same(w[:, 0], a.astype(np.float64))
        sat = np.where(np.isnan(a), 0, np.clip(a, 0, 1)).astype(np.float32)
        assert np.all((w[:, 1] == sat) & ~np.signbit(w[:, 1]) | (w[:, 1] == 0))
        assert same(nw[:, 0], d.astype(np.float32))
        satd = np.where(np.isnan(d), 0, np.clip(d.astype(np.float32), 0, 1)).astype(np.float32)
        assert np.all(nw[:, 1] == satd)
        assert np.all(nw[:, 2] == sat)
