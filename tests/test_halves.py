"""anycuda.libraries.halves: 16-bit floats widened to float32 and narrowed from it, by the
compiled loops and by numpy's fallback alike, against references from the formats' definitions:
every half and bfloat16 bit pattern widened, float32 values narrowed with round-to-nearest-even
worked out on the discarded bits (ties, subnormals, overflow, NaN), in any memory layout."""
import numpy as np
import pytest

from anycuda.libraries import halves

ALL_BITS = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


@pytest.fixture(params=["compiled", "numpy"])
def path(request, monkeypatch):
    if request.param == "compiled":
        assert halves.available(), halves._compiled.get("error")
    else:
        monkeypatch.setattr(halves, "_functions", lambda: None)
    return request.param


def _half_value(bits):
    """IEEE binary16 from its fields: sign, 5 exponent bits (bias 15), 10 fraction bits."""
    bits = bits.astype(np.int64)
    sign = np.where(bits >> 15, -1.0, 1.0)
    exponent, fraction = (bits >> 10) & 0x1F, bits & 0x3FF
    normal = (1 + fraction / 1024) * 2.0 ** (exponent - 15)
    subnormal = fraction / 1024 * 2.0 ** -14
    special = np.where(fraction == 0, np.inf, np.nan)
    return sign * np.where(exponent == 0x1F, special, np.where(exponent == 0, subnormal, normal))


def _round_bf16(f):
    """bfloat16 bits of float32 values: the top 16 bits, plus one when the discarded 16 are more
    than half, or exactly half and the kept ones odd; NaN as 0x7FC0."""
    bits = f.view(np.uint32).astype(np.uint64)
    kept, dropped = bits >> 16, bits & 0xFFFF
    up = (dropped > 0x8000) | ((dropped == 0x8000) & (kept & 1 == 1))
    return np.where(np.isnan(f), 0x7FC0, kept + up).astype(np.uint16)


def _interesting_floats(rng):
    """Random float32 values over the whole range, and the cases rounding gets wrong first."""
    random = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    normal = rng.standard_normal(20000).astype(np.float32) * np.float32(1000)
    ties = ((rng.integers(0, 1 << 15, 500).astype(np.uint32) << 16) | 0x8000).view(np.float32)   # bf16 ties
    half_ties = ((rng.integers(0x38800000 >> 13, 0x47000000 >> 13, 500).astype(np.uint32) << 13)
                 | 0x1000).view(np.float32)                                                    # f16 ties
    edges = np.array([0.0, -0.0, 65504.0, 65519.99, 65520.0, 1e9, -1e9, 6e-8, 3e-8, 2.9e-8, 1e-40, np.inf, -np.inf,
                      np.nan, 3.3895314e38], np.float32)
    return np.concatenate([random, normal, ties, half_ties, edges])


def test_every_half_widens_to_its_value(path):
    got = halves.widen(ALL_BITS.view(np.float16), bfloat16=False)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.astype(np.float64), _half_value(ALL_BITS))


def test_every_bfloat16_widens_to_its_value(path):
    got = halves.widen(ALL_BITS, bfloat16=True)
    # a bfloat16 is a float32 whose low 16 fraction bits are zero
    want = ALL_BITS.astype(np.uint32) * np.uint32(65536)
    np.testing.assert_array_equal(got.view(np.uint32), want)


def test_narrowing_to_half_rounds_to_nearest_even(path, rng):
    f = _interesting_floats(rng)
    out = np.full(f.shape, 0x7E01, np.uint16).view(np.float16)
    halves.narrow(out, f, bfloat16=False)
    value = _half_value(out.view(np.uint16))
    finite = np.isfinite(f)
    # the nearest half (ties to the even one): no other half is closer, and a tie has an even
    # last bit; past the largest half (and its rounding range) an infinity
    exact = f.astype(np.float64)
    overflow = np.abs(exact) >= 65520.0
    assert np.all(np.isinf(value[finite & overflow])) and np.all(np.sign(value[finite & overflow])
                                                                  == np.sign(exact[finite & overflow]))
    ok = finite & ~overflow
    bits = out.view(np.uint16)[ok]
    neighbours = _half_value(np.stack([bits - 1, bits + 1]).astype(np.uint16) & 0xFFFF)
    err = np.abs(value[ok] - exact[ok])
    for other in neighbours:
        other_err = np.abs(other - exact[ok])
        closer = np.nan_to_num(other_err, nan=np.inf) < err
        tie = other_err == err
        assert not closer.any()
        assert np.all((bits[tie] & 1) == 0) or np.all(value[ok][tie] == 0)
    assert np.all(np.isnan(value[np.isnan(f)])) and np.all(value[np.isinf(f)] == f[np.isinf(f)])


def test_narrowing_to_bfloat16_rounds_to_nearest_even(path, rng):
    f = _interesting_floats(rng)
    out = np.full(f.shape, 0xDEAD, np.uint16)
    halves.narrow(out, f, bfloat16=True)
    np.testing.assert_array_equal(out, _round_bf16(f))


@pytest.mark.parametrize("bfloat16", [False, True])
def test_layouts_convert_alike(path, rng, bfloat16):
    """Transposed, padded (a block of a matrix with a larger leading dimension) and contiguous."""
    matrix = rng.standard_normal((70, 90)).astype(np.float32)
    stored = np.empty((70, 90), np.uint16 if bfloat16 else np.float16)
    halves.narrow(stored, matrix, bfloat16)
    for view in (stored.T, stored[5:40, 7:61], stored.T[3:50, 2:30], stored[::2, ::3]):
        got = halves.widen(view, bfloat16)
        np.testing.assert_array_equal(got, halves.widen(np.ascontiguousarray(view), bfloat16))
        back = np.zeros_like(view) + (np.uint16(0xDEAD) if bfloat16 else np.float16(7))
        target = np.zeros((view.shape[1], view.shape[0]), view.dtype).T      # a column-major destination
        for dest in (back, target):
            halves.narrow(dest, got, bfloat16)
            np.testing.assert_array_equal(dest.view(np.uint16), np.ascontiguousarray(view).view(np.uint16))
