"""Float arithmetic: IEEE operations exact to the bit (numpy and exact rationals as
references), directed rounding, special values, the math library within a few ulp."""
from fractions import Fraction

import numpy as np

import anycuda as ac
from conformance import load_cuda, poison, round_directed

SPECIAL32 = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.17549435e-38, 3.4028235e38,
                      -3.4028235e38, 1.0, -1.0, 0.5, 2.5, -2.5, 3.5], np.float32)


def _inputs32(rng, n):
    vals = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    return vals


def _same(got, want):
    """Bitwise equal, except that any NaN matches any NaN."""
    got, want = np.asarray(got), np.asarray(want)
    nan = np.isnan(got) & np.isnan(want)
    eq = (got == want) & (np.signbit(got) == np.signbit(want)) | nan
    return bool(np.all(eq))


def test_f32_ieee_operations_bit_exact(rng):
    n = 4096
    a, b, c = (_inputs32(rng, n) for _ in range(3))
    k = len(SPECIAL32)
    a[:k * k] = np.repeat(SPECIAL32, k)[:k * k]
    b[:k * k] = np.tile(SPECIAL32, k)[:k * k]
    out = poison((n, 16), np.float32)
    load_cuda("arith_float").get_function("f32_exact")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
    g = out.get()
    with np.errstate(all="ignore"):
        x, y, z = a, b, c
        fma = (x.astype(np.float64) * y.astype(np.float64) + z.astype(np.float64)).astype(np.float32)
        refs = {0: x + y, 1: x - y, 2: x * y, 3: x / y, 5: np.sqrt(np.abs(x)), 6: np.float32(1) / y,
                9: np.abs(x), 10: -x, 11: np.copysign(x, y), 12: np.floor(x), 13: np.ceil(x), 14: np.trunc(x),
                15: np.rint(x)}
        for j, want in refs.items():
            assert _same(g[:, j], want), f"column {j}"
        # fma: computed exactly through float64 is exact except on rare double-rounding ties
        assert _close_ulp(g[:, 4], fma, 1)
        # min/max return the other operand when one is NaN; -0 orders below +0
        mn, mx = g[:, 7], g[:, 8]
        assert np.all((mn == np.fmin(x, y)) | (np.isnan(mn) & np.isnan(np.fmin(x, y))))
        assert np.all((mx == np.fmax(x, y)) | (np.isnan(mx) & np.isnan(np.fmax(x, y))))
        zeros = (x == 0) & (y == 0) & (np.signbit(x) != np.signbit(y))
        assert np.all(np.signbit(mn[zeros])) and not np.any(np.signbit(mx[zeros]))


def _close_ulp(got, want, ulps):
    got, want = np.asarray(got), np.asarray(want)
    both_nan = np.isnan(got) & np.isnan(want)
    same = (got == want) | both_nan
    gi = got.view(np.int32).astype(np.int64)
    wi = want.view(np.int32).astype(np.int64)
    near = np.abs(gi - wi) <= ulps
    return bool(np.all(same | near))


def test_f64_ieee_operations(rng):
    n = 2048
    a = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    b = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    c = rng.standard_normal(n)
    a[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324]
    out = poison((n, 10), np.float64)
    load_cuda("arith_float").get_function("f64_exact")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
    g = out.get()
    with np.errstate(all="ignore"):
        for j, want in {0: a + b, 1: a * b, 2: a / b, 4: np.sqrt(np.abs(a)), 5: 1.0 / b, 8: np.floor(a), 9: a - b}.items():
            assert _same(g[:, j], want), f"column {j}"
        for i in range(6, n, 97):
            exact = Fraction(a[i]) * Fraction(b[i]) + Fraction(c[i])
            assert g[i, 3] == float(exact)


def test_f32_directed_rounding_is_exact(rng):
    n = 512
    a = (rng.standard_normal(n) * 3).astype(np.float32)
    b = (rng.standard_normal(n) * 3).astype(np.float32)
    c = (rng.standard_normal(n) * 3).astype(np.float32)
    out = poison((n, 12), np.float32)
    load_cuda("arith_float").get_function("f32_directed")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
    g = out.get()
    for i in range(n):
        x, y, z = Fraction(float(a[i])), Fraction(float(b[i])), Fraction(float(c[i]))
        exacts = [x + y, x * y, x * y + z, x / y]
        for op, exact in enumerate(exacts):
            for m, mode in enumerate(("rz", "rd", "ru")):
                want = round_directed(exact, mode, np.float32)
                assert g[i, 3 * op + m] == want, f"row {i} op {op} {mode}: {g[i, 3 * op + m]!r} != {want!r}"


def test_f32_math_library_within_ulps(rng):
    n = 4096
    a = rng.uniform(-20, 20, n).astype(np.float32)
    out = poison((n, 14), np.float32)
    load_cuda("arith_float").get_function("f32_math")((n // 128,), (128,), (ac.asarray(a), out, np.int32(n)))
    g = out.get().astype(np.float64)
    x = a.astype(np.float64)
    import math
    erf = np.vectorize(math.erf)
    refs = [np.sin(x), np.cos(x), np.exp(x * 0.1), np.log(np.abs(x) + np.float32(1e-3)), np.exp2(x * 0.1),
            np.log2(np.abs(x) + np.float32(1e-3)), np.abs(x) ** 1.5, np.tanh(x * 0.1), erf(x * 0.1),
            np.arctan2(x, 1.5), np.sin(x), np.exp(x * 0.1), 1 / np.sqrt(np.abs(x) + 1), x / 3]
    for j, want in enumerate(refs):
        tol = 2e-6 * np.maximum(1.0, np.abs(want))
        if j in (10, 11, 13):     # the fast intrinsics: PTX's stated bounds
            tol = 2e-6 * np.maximum(1.0, np.abs(want)) + 2 ** -20
        assert np.all(np.abs(g[:, j] - want) <= tol), f"column {j}: worst {np.max(np.abs(g[:, j] - want))}"


def test_rn_operations_are_not_contracted(rng):
    n = 1024
    a = (1 + rng.random(n) * 2 ** -10).astype(np.float32)
    b = (1 + rng.random(n) * 2 ** -10).astype(np.float32)
    c = -(a.astype(np.float64) * b).astype(np.float32)
    out = poison((n, 2), np.float32)
    load_cuda("arith_float").get_function("contraction")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
    g = out.get()
    separate = (a * b) + c
    fused = (a.astype(np.float64) * b + c).astype(np.float32)
    assert np.array_equal(g[:, 0], separate)
    assert np.all((g[:, 1] == separate) | (g[:, 1] == fused))
    assert (separate != fused).any()      # the test can tell the two apart


def test_classification():
    vals = np.array([0.0, -0.0, 1.0, -2.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3.4e38], np.float32)
    n = len(vals)
    out = poison((n, 8), np.int32)
    load_cuda("arith_float").get_function("classify")((1,), (32,), (ac.asarray(vals), out, np.int32(n)))
    g = out.get()
    tiny = np.float32(1.17549435e-38)
    a = np.abs(vals)
    with np.errstate(invalid="ignore"):
        want = np.stack([np.isfinite(vals), np.isinf(vals), np.isnan(vals), np.isfinite(vals) & (a >= tiny),
                         (a > 0) & (a < tiny), np.isnan(vals), np.isinf(vals), np.signbit(vals)], axis=1)
    assert np.array_equal(g, want.astype(np.int32))
