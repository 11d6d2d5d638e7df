"""__half and __nv_bfloat16: arithmetic rounded once (exact rationals / numpy float16 as
references), comparisons with NaN, packed pairs, directed conversions."""
from fractions import Fraction

import numpy as np

import anycuda as ac
from conformance import load_cuda, poison, round_directed


def _h(bits):
    return np.asarray(bits, np.uint16).view(np.float16)


def _same16(got_bits, want):
    got = _h(got_bits)
    want = np.asarray(want, np.float16)
    return bool(np.all((got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))))


def test_half_arithmetic(rng):
    n = 2048
    a, b, c = ((rng.standard_normal(n) * 4).astype(np.float16) for _ in range(3))
    specials = np.array([0, -0.0, np.inf, -np.inf, np.nan, 6e-8, 65504, -1], np.float16)
    a[:64] = np.repeat(specials, 8)
    b[:64] = np.tile(specials, 8)
    out = poison((n, 12), np.uint16)
    load_cuda("half").get_function("half_ops")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
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


def test_float_to_half_rounding_modes(rng):
    n = 1024
    f = (rng.standard_normal(n) * np.exp2(rng.integers(-26, 17, n))).astype(np.float32)
    f[:6] = [np.nan, np.inf, -np.inf, 1e6, -1e6, 0.0]
    h = poison((n, 4), np.uint16)
    back = poison(n, np.float32)
    load_cuda("half").get_function("half_convert")((n // 128,), (128,), (ac.asarray(f), h, back, np.int32(n)))
    g = h.get()
    with np.errstate(over="ignore"):
        assert _same16(g[:, 0], f.astype(np.float16))
        assert np.array_equal(back.get()[3:], f.astype(np.float16).astype(np.float32)[3:])
    for i in range(3, n):
        exact = Fraction(float(f[i]))
        for j, mode in enumerate(("rz", "rd", "ru"), start=1):
            assert _same16(g[i, j], round_directed(exact, mode, np.float16)), f"row {i} {mode}"


def _bf16_rn(v: float) -> int:
    """bf16 bits nearest to v (ties to even), from exact rationals."""
    if np.isnan(v):
        return 0x7FC0
    f = Fraction(v)
    lo32 = round_directed(f, "rz", np.float32)
    lo = int(np.float32(lo32).view(np.uint32)) >> 16
    val = lambda bits: Fraction(float(np.uint32(bits << 16).view(np.float32))) if (bits & 0x7F80) != 0x7F80 else None
    hi = lo + 1
    dl, vh = abs(f - val(lo)), val(hi)
    if vh is None:
        return lo if dl == 0 or (f - val(lo)) * 2 < Fraction(2) ** -1000 else hi
    dh = abs(vh - f)
    return lo if dl < dh or (dl == dh and lo % 2 == 0) else hi


def test_bfloat16_arithmetic(rng):
    n = 1024
    a = (rng.standard_normal(n) * 8).astype(np.float32)
    b = (rng.standard_normal(n) * 8).astype(np.float32)
    out = poison((n, 7), np.uint16)
    back = poison(n, np.float32)
    load_cuda("half").get_function("bf16_ops")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), out, back, np.int32(n)))
    g = out.get()
    tof = lambda bits: float(np.uint32(int(bits) << 16).view(np.float32))
    for i in range(n):
        xb, yb = _bf16_rn(float(a[i])), _bf16_rn(float(b[i]))
        x, y = tof(xb), tof(yb)
        fx, fy = Fraction(x), Fraction(y)
        want = [xb, _bf16_rn(float(fx + fy)), _bf16_rn(float(fx * fy)), _bf16_rn(float(fx * fy + fx)),
                _bf16_rn(float(fx * fx)), _bf16_rn(float(fy * fy)),
                int(np.float32(a[i]).view(np.uint32)) >> 16]
        assert [int(v) for v in g[i]] == want, f"row {i}"
        assert back.get()[i] == np.float32(x)
