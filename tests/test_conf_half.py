"""__half and __nv_bfloat16: arithmetic rounded once (exact rationals / numpy float16 as
references), comparisons with NaN, packed pairs, directed conversions."""
from fractions import Fraction

import numpy as np
import pytest

import anycuda as ac
from conformance import load_cuda, poison, random_bits, round_directed

# sm_75 emulates bfloat16 through float; sm_80 adds bf16 fma/min/max/neg/abs and f32->bf16
# cvt; sm_90 adds bf16 add/sub/mul. The same kernels run under each.
ARCHS = [("-arch=sm_75",), ("-arch=sm_80",), ("-arch=sm_90",)]
arch = pytest.mark.parametrize("options", ARCHS, ids=lambda o: o[0][6:])
BF16_MARK = 0x7FBF        # what the kernels store for bf16 fma below sm_80


def _h(bits):
    return np.asarray(bits, np.uint16).view(np.float16)


def _same16(got_bits, want):
    got = _h(got_bits)
    want = np.asarray(want, np.float16)
    return bool(np.all((got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))))


@arch
def test_half_arithmetic(rng, options):
    n = 2048
    a, b, c = ((rng.standard_normal(n) * 4).astype(np.float16) for _ in range(3))
    specials = np.array([0, -0.0, np.inf, -np.inf, np.nan, 6e-8, 65504, -1], np.float16)
    a[:64] = np.repeat(specials, 8)
    b[:64] = np.tile(specials, 8)
    out = poison((n, 12), np.uint16)
    load_cuda("half", options).get_function("half_ops")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
    g = out.get()
    x, y, z = (v.astype(np.float64) for v in (a, b, c))
    with np.errstate(all="ignore"):
        assert _same16(g[:, 0], (x + y).astype(np.float16))
        assert _same16(g[:, 1], (x - y).astype(np.float16))
        assert _same16(g[:, 2], (x * y).astype(np.float16))
        assert _same16(g[:, 3], (x * y + z).astype(np.float16))
        assert _same16(g[:, 4], -a)
        # min/max: the non-NaN operand wins; -0 orders below +0 (numpy does not order zeros)
        mn, mx = _h(g[:, 5]), _h(g[:, 6])
        for got, want in ((mn, np.fmin(a, b)), (mx, np.fmax(a, b))):
            assert np.all((got == want) | (np.isnan(got) & np.isnan(want)))
        zeros = (a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b))
        assert zeros.any() and np.all(np.signbit(mn[zeros])) and not np.any(np.signbit(mx[zeros]))
        flags = (a == b).astype(int) | ((a < b).astype(int) << 1) | ((a >= b).astype(int) << 2) | (np.isnan(a).astype(int) << 3)
        assert np.array_equal(g[:, 7], flags)
        assert _same16(g[:, 8], (x * z + x).astype(np.float16))
        assert _same16(g[:, 9], (y * x + y).astype(np.float16))
        assert _same16(g[:, 10], (x * z).astype(np.float16))
        assert _same16(g[:, 11], (y * x).astype(np.float16))


@arch
def test_float_to_half_rounding_modes(rng, options):
    n = 1024
    f = (rng.standard_normal(n) * np.exp2(rng.integers(-26, 17, n))).astype(np.float32)
    f[:6] = [np.nan, np.inf, -np.inf, 1e6, -1e6, 0.0]
    h = poison((n, 4), np.uint16)
    back = poison(n, np.float32)
    load_cuda("half", options).get_function("half_convert")((n // 128,), (128,), (ac.asarray(f), h, back, np.int32(n)))
    g = h.get()
    with np.errstate(over="ignore"):
        assert _same16(g[:, 0], f.astype(np.float16))
        assert np.array_equal(back.get()[3:], f.astype(np.float16).astype(np.float32)[3:])
    for i in range(3, n):
        exact = Fraction(float(f[i]))
        for j, mode in enumerate(("rz", "rd", "ru"), start=1):
            assert _same16(g[i, j], round_directed(exact, mode, np.float16)), f"row {i} {mode}"


def _bf16_rn(v) -> int:
    """bf16 bits nearest to v, a float or an exact Fraction (ties to even; past the largest
    finite value by half an ulp or more: infinity)."""
    if isinstance(v, Fraction):
        return (0x8000 if v < 0 else 0) | _bf16_rn_magnitude(abs(v))
    if np.isnan(v):
        return 0x7FC0
    sign = 0x8000 if np.signbit(v) else 0
    if np.isinf(v):
        return sign | 0x7F80
    return sign | _bf16_rn_magnitude(abs(Fraction(v)))


def _bf16_rn_magnitude(m: Fraction) -> int:
    if m == 0:
        return 0
    lo = int(np.float32(round_directed(m, "rz", np.float32)).view(np.uint32)) >> 16
    val = lambda bits: Fraction(2) ** 128 if bits == 0x7F80 else Fraction(float(np.uint32(bits << 16).view(np.float32)))
    hi = lo + 1
    dl, dh = m - val(lo), val(hi) - m
    return lo if dl < dh or (dl == dh and lo % 2 == 0) else hi


@arch
def test_bfloat16_arithmetic(rng, options):
    n = 1024
    a = (rng.standard_normal(n) * 8).astype(np.float32)
    b = (rng.standard_normal(n) * 8).astype(np.float32)
    out = poison((n, 7), np.uint16)
    back = poison(n, np.float32)
    load_cuda("half", options).get_function("bf16_ops")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), out, back, np.int32(n)))
    g = out.get()
    tof = lambda bits: float(np.uint32(int(bits) << 16).view(np.float32))
    for i in range(n):
        xb, yb = _bf16_rn(float(a[i])), _bf16_rn(float(b[i]))
        x, y = tof(xb), tof(yb)
        fx, fy = Fraction(x), Fraction(y)
        want = [xb, _bf16_rn(fx + fy), _bf16_rn(fx * fy), _bf16_rn(fx * fy + fx),
                _bf16_rn(fx * fx), _bf16_rn(fy * fy),
                int(np.float32(a[i]).view(np.uint32)) >> 16]
        if options == ("-arch=sm_75",):
            want[3] = BF16_MARK
        assert [int(v) for v in g[i]] == want, f"row {i}"
        assert back.get()[i] == np.float32(x)


def _bf16_directed(v: float, mode: str) -> int:
    """bf16 bits of v rounded toward zero / down / up: round to float32 in that direction
    first (directed roundings compose), then cut the low 16 bits in the same direction."""
    if np.isnan(v):
        return 0x7FC0
    if v == 0:
        return 0x8000 if np.signbit(v) else 0
    f = round_directed(Fraction(v), mode, np.float32) if np.isfinite(v) else np.float32(v)
    bits = int(np.float32(f).view(np.uint32))
    hi, rest = bits >> 16, bits & 0xFFFF
    neg = bits >> 31
    away = rest and ((mode == "ru" and not neg) or (mode == "rd" and neg))
    return hi + 1 if away else hi


@arch
def test_every_half_and_bfloat16_widens_exactly(options):
    h, b = poison(65536, np.float32), poison(65536, np.float32)
    load_cuda("half", options).get_function("widen_all")((256,), (256,), (h, b))
    bits = np.arange(65536, dtype=np.uint32)
    want_h = bits.astype(np.uint16).view(np.float16).astype(np.float32)
    want_b = (bits << 16).view(np.float32)
    for got, want in ((h.get(), want_h), (b.get(), want_b)):
        ok = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        assert ok.all(), f"bit patterns {np.nonzero(~ok)[0][:8]}"


def _zmax(p, q):
    """max with the non-NaN operand winning and +0 above -0."""
    m = np.fmax(p, q)
    return np.where((p == 0) & (q == 0), np.where(np.signbit(p) & np.signbit(q), p, np.abs(p)), m)


def _zmin(p, q):
    m = np.fmin(p, q)
    return np.where((p == 0) & (q == 0), np.where(np.signbit(p) | np.signbit(q), -np.abs(p), p), m)


@arch
def test_half_more(rng, options):
    n = 2048
    a, b, c = ((rng.standard_normal(n) * 4).astype(np.float16) for _ in range(3))
    specials = np.array([0, -0.0, np.inf, -np.inf, np.nan, 6e-8, 65504, -1, 0.5, 1.0, 3.0, -2.0], np.float16)
    k = len(specials)
    a[:k * k], b[:k * k] = np.repeat(specials, k), np.tile(specials, k)
    a[k * k:k * k + 64] = rng.integers(0, 2 ** 16, 64).astype(np.uint16).view(np.float16)    # any bits
    ints = rng.integers(-2 ** 31, 2 ** 31, (n, 2), dtype=np.int64).astype(np.int32)
    ints[: n // 2] = rng.integers(-70000, 70000, (n // 2, 2))
    out = poison((n, 26), np.uint16)
    ia = ac.asarray(ints)
    load_cuda("half", options).get_function("half_more")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c),
                                                                             out, ia, np.int32(n)))
    g, gi = out.get(), ia.get()
    x, y, z = (v.astype(np.float64) for v in (a, b, c))
    f16 = lambda v: np.asarray(v).astype(np.float16)
    with np.errstate(all="ignore"):
        cols = {0: f16(x / y), 2: f16(x + y), 3: f16(y + z), 4: f16(x - y), 5: f16(y - z), 6: -a,
                8: f16(np.where(np.isnan(x + y), 0, np.clip(x + y, 0, 1))),
                9: f16(np.where(np.isnan(x * y + z), 0, np.clip(x * y + z, 0, 1))),
                10: b, 11: c, 17: f16(a.astype(np.float32) * np.float32(3)), 18: f16(b.astype(np.float32) / np.float32(3)),
                19: _zmax(a, b), 20: _zmin(b, c),
                24: f16(b.astype(np.float32) + c.astype(np.float32)), 25: f16(x / 7.0)}
        for j, want in cols.items():
            gj = g[:, j]
            want = np.asarray(want, np.float16)
            if j in (8, 9):       # saturation clamps to [0, 1]; the sign of a zero result is not specified
                gj, want = np.where(gj == 0x8000, 0, gj), np.where(want == 0, np.float16(0), want)
            bad = np.nonzero(~((gj == want.view(np.uint16)) | (np.isnan(_h(gj)) & np.isnan(want))))[0]
            assert not len(bad), f"column {j}: rows {bad[:4]}: a={a[bad[:4]]}, b={b[bad[:4]]}, c={c[bad[:4]]}: got {_h(g[bad[:4], j])}, want {np.asarray(want)[bad[:4]]}"
        # abs clears the sign bit; a NaN comes out as the GPU's NaN, 0x7FFF (as an H200 gives)
        absolute = lambda h: np.where(np.isnan(h), 0x7FFF, h.view(np.uint16) & 0x7FFF)
        assert np.array_equal(g[:, 1], absolute(a)) and np.array_equal(g[:, 7], absolute(c))
        nan = np.isnan(x) | np.isnan(y)
        flags = ((x != y) & ~nan).astype(int) | ((x <= y).astype(int) << 1) | ((x > y).astype(int) << 2) | \
            (((x == y) | nan).astype(int) << 3) | (((x < y) | nan).astype(int) << 4) | (((x >= y) | nan).astype(int) << 5) | \
            (np.isinf(x).astype(int) << 6)
        assert np.array_equal(g[:, 12], flags)
    for i in range(n):
        v, s = int(ints[i, 0]), int(ints[i, 1])
        want = [round_directed(Fraction(v), "rn", np.float16), round_directed(Fraction(v), "rz", np.float16),
                np.float16((s + 32768) % 65536 - 32768) if abs((s + 32768) % 65536 - 32768) <= 2048 else
                round_directed(Fraction((s + 32768) % 65536 - 32768), "rn", np.float16),
                round_directed(Fraction(s % 65536), "rd", np.float16)]
        got = [_h(g[i, j]) for j in (13, 14, 15, 16)]
        assert got == want, f"row {i}: int {v} / short {s}: {got} != {want}"
        xv = float(a[i])
        def h2i(mode):
            if np.isnan(xv):
                return 0
            r = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}[mode](xv)
            return int(min(max(r, -2 ** 31), 2 ** 31 - 1))
        assert int(gi[i, 0]) == h2i("rn"), f"row {i}: __half2int_rn({xv})"
        packed = (h2i("rz") & 0xFFFF) | ((h2i("rd") & 0xFF) << 16) | ((h2i("ru") & 0xFF) << 24)
        assert int(gi[i, 1]) % 2 ** 32 == packed, f"row {i}: __half2int_rz/rd/ru({xv})"
    # paired comparisons (set.<cmp>.u32.f16x2 / set.<cmp>.f16x2.f16x2): each lane on its own
    both = lambda m1, m2: (m1 & m2).astype(int)
    want = both(x == y, y == z) | (both(x < y, y < z) << 1)
    bad = np.nonzero(g[:, 21] != want)[0]
    assert not len(bad), f"__hbeq2/__hblt2 rows {bad[:4]}: lanes ({a[bad[:4]]}, {b[bad[:4]]}) vs ({b[bad[:4]]}, {c[bad[:4]]}): got {g[bad[:4], 21]}, want {want[bad[:4]]}"
    with np.errstate(invalid="ignore"):
        assert np.array_equal(_h(g[:, 22]), (x <= y).astype(np.float16)) and np.array_equal(_h(g[:, 23]), (y <= z).astype(np.float16)), "__hle2"


@arch
def test_float_to_half_on_bit_patterns(rng, options):
    n = 2048
    f = random_bits(rng, n, np.float32)
    f[: n // 2] = (rng.standard_normal(n // 2) * np.exp2(rng.integers(-30, 20, n // 2))).astype(np.float32)
    f[:6] = [65520.0, 65519.996, -65520.0, 2.0 ** -25, -(2.0 ** -25) * 1.5, 2.0 ** -24 * 1.5]
    h = poison((n, 4), np.uint16)
    back = poison(n, np.float32)
    load_cuda("half", options).get_function("half_convert")((n // 128,), (128,), (ac.asarray(f), h, back, np.int32(n)))
    g = h.get()
    for i in range(n):
        if not np.isfinite(f[i]):
            want = [np.float16(f[i])] * 4
        else:
            exact = Fraction(float(f[i]))
            want = [round_directed(exact, m, np.float16) for m in ("rn", "rz", "rd", "ru")]
            want = [np.copysign(w, f[i]) if w == 0 else w for w in want]
        for j in range(4):
            assert _same16(g[i, j], want[j]), f"row {i}: {f[i]!r} mode {j}: {_h(g[i, j])!r} != {want[j]!r}"


@arch
def test_bfloat16_more(rng, options):
    n = 1024
    a, b, c = ((rng.standard_normal(n) * 8).astype(np.float32) for _ in range(3))
    a[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 3.4e38, -1e-40, 1.00390625]
    b[:8] = [1.0, np.nan, 2.0, -0.0, 0.0, 3.4e38, 1e-40, -1.00390625]
    a[8:200] = random_bits(rng, 192, np.float32)
    ints = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    out = poison((n, 16), np.uint16)
    ia = ac.asarray(ints)
    load_cuda("half", options).get_function("bf16_more")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c),
                                                                             out, ia, np.int32(n)))
    g, gi = out.get(), ia.get()
    tof = lambda bits: float(np.uint32(int(bits) << 16).view(np.float32))
    rn = lambda v: (_bf16_rn(v) if v != 0 else (0x8000 if np.signbit(v) else 0)) if not np.isinf(v) else (0x7F80 if v > 0 else 0xFF80)

    def exact_rn(ex):
        if ex == 0:
            return "zero"           # exact zero: either sign (zero signs are checked in the float tests)
        return _bf16_rn(ex)             # straight from the exact value: no double rounding

    for i in range(n):
        xb, yb, zb = rn(float(a[i])), rn(float(b[i])), rn(float(c[i]))
        x, y, z = tof(xb), tof(yb), tof(zb)
        got = [int(v) for v in g[i]]
        want = [_bf16_directed(float(a[i]), "rd"), _bf16_directed(float(a[i]), "ru")] + [None] * 14
        if all(np.isfinite(v) for v in (x, y, z)):
            X, Y, Z = Fraction(x), Fraction(y), Fraction(z)
            want[2:7] = [exact_rn(X + Z), exact_rn(Y + X), exact_rn(X * Z + X), exact_rn(Y * X + Y), exact_rn(X - Z)]
            want[11], want[12] = exact_rn(X - Y), exact_rn(X * Y + Z)
            want[8] = xb if (x < y or (x == y and xb >> 15)) else yb
            want[9] = xb if (x > y or (x == y and not xb >> 15)) else yb
        if options == ("-arch=sm_75",):
            want[4] = want[5] = want[12] = BF16_MARK
        want[7] = xb ^ 0x8000
        nan = np.isnan(x) or np.isnan(y)
        want[10] = int(x == y) | (int(x < y) << 1) | (int(x >= y) << 2) | (int(np.isnan(x)) << 3)
        want[13] = _bf16_rn(Fraction(int(ints[i])))
        want[14] = yb & 0x7FFF
        want[15] = _bf16_directed(float(b[i]), "rz")
        for j, w in enumerate(want):
            if w is None:
                continue
            if w == "zero":
                assert got[j] in (0, 0x8000), f"row {i} column {j}: {got[j]:#06x} is not zero"
                continue
            if (w & 0x7F80) == 0x7F80 and (w & 0x7F):          # any NaN for NaN
                assert (got[j] & 0x7F80) == 0x7F80 and (got[j] & 0x7F), f"row {i} column {j}: {got[j]:#06x} is not NaN"
            else:
                assert got[j] == w, f"row {i} (a={a[i]!r}, b={b[i]!r}, c={c[i]!r}) column {j}: {got[j]:#06x} != {w:#06x}"
        if not nan or not np.isnan(y):
            want_int = 0 if np.isnan(y) else int(min(max(np.trunc(y), -2 ** 31), 2 ** 31 - 1))
            assert int(gi[i]) == want_int, f"row {i}: __bfloat162int_rz({y})"


@arch
def test_architecture_option_reaches_the_compiler(options):
    ptx = load_cuda("half", options).ptx
    sm = options[0].split("sm_")[1]
    assert f".target sm_{sm}" in ptx
    assert ("fma.rn.bf16" in ptx) == (sm != "75")       # native bf16 only from sm_80 on
