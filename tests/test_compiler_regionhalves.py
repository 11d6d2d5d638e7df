"""Half-precision forms in warp regions (compiler/vector/warpruns.py, regionops.py): add, sub,
mul, fma, min, max, neg and abs of f16, their packed f16x2 pairs and bf16's fma, setp.f16
and cvt between f16 and f32. Each kernel is a grid-stride loop, so its threads run as an
entry region (a warp's lanes as one vector); the region must be made (before, a half
instruction kept the warp in the rounds: a grid-stride saxpy in __half ran 10-20x slower
than in float). Every result is checked bit for bit against exact rational arithmetic
rounded once to nearest-even, and NaN results against the GPU's 0x7FFF. Outputs are
poisoned first."""
from fractions import Fraction
import math

import numpy as np
import pytest

import anycuda as ac
from conformance import made_regions, poison

SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define LOOP for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)

extern "C" __global__ void halves(const __half* a, const __half* b, const __half* c, __half* out, int* less, int n) {
    LOOP {
        __half x = a[i], y = b[i], z = c[i];
        __half* o = out + (size_t)i * 9;
        o[0] = __hadd(x, y); o[1] = __hsub(x, y); o[2] = __hmul(x, y); o[3] = __hfma(x, y, z);
        o[4] = __hmin(x, y); o[5] = __hmax(x, y); o[6] = __hneg(x); o[7] = __habs(z);
        o[8] = __float2half(__half2float(x) * __half2float(y) * 0.1f);
        less[i] = __hlt(x, y);
    }
}

extern "C" __global__ void pairs(const __half2* a, const __half2* b, const __half2* c, __half2* out, int n) {
    LOOP {
        __half2 x = a[i], y = b[i], z = c[i];
        out[3 * i] = __hadd2(x, y); out[3 * i + 1] = __hmul2(x, y); out[3 * i + 2] = __hfma2(x, y, z);
    }
}

extern "C" __global__ void brains(const __nv_bfloat16* a, const __nv_bfloat16* b, const __nv_bfloat16* c,
                                  __nv_bfloat16* out, int n) {
    LOOP {
        __nv_bfloat16 x = a[i], y = b[i], z = c[i];
        out[3 * i] = __hadd(x, y); out[3 * i + 1] = __hmul(x, y); out[3 * i + 2] = __hfma(x, y, z);
    }
}
"""

F16 = (11, -14)         # significant bits, least normal exponent
BF16 = (8, -126)
GPU_NAN = 0x7FFF


def rounded(x: Fraction, fmt) -> float:
    """x rounded once to the nearest value of format fmt (ties to even); no overflow here."""
    if x == 0:
        return 0.0
    bits, emin = fmt
    e = max(math.floor(math.log2(abs(x))), emin)
    while abs(x) >= Fraction(2) ** (e + 1):          # log2 of a Fraction may be off by one
        e += 1
    while e > emin and abs(x) < Fraction(2) ** e:
        e -= 1
    ulp = Fraction(2) ** (e - bits + 1)
    q = x / ulp
    n = math.floor(q)
    if q - n > Fraction(1, 2) or (q - n == Fraction(1, 2) and n % 2):
        n += 1
    return math.copysign(float(n * ulp), x)      # a result rounded to zero keeps x's sign


def f16_bits(v: float) -> int:
    return int(np.array(v, np.float16).view(np.uint16))


def bf16_bits(v: float) -> int:
    return int(np.array(v, np.float32).view(np.uint32)) >> 16     # exact: v has 8 bits


def bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _halves(rng, n):
    """f16 operands of many magnitudes (products and fma stay in range), signed zeros, ties."""
    v = rng.standard_normal((3, n)) * np.exp2(rng.integers(-12, 7, (3, n)))
    a, b, c = v.astype(np.float16)
    a[:8], b[:8] = [0.0, -0.0, 1.0, 2049 / 2048, 3.0, -1.5, 65504, 1e-4], [-0.0, -0.0, -1.0, 2047 / 2048, 3.0, 0.0, 0.5, 1e-4]
    return a, b, c


@pytest.fixture(scope="module")
def module():
    return ac.RawModule(code=SOURCE)


def test_the_half_forms_run_as_regions():
    made, _ = made_regions(SOURCE)
    assert {"halves", "pairs", "brains"} <= set(made), f"regions made only for {sorted(made)}"


def _exact(*vals):
    return [Fraction(float(v)) for v in vals]


def _f16_forms(x, y, z):
    """The nine results of `halves` for one thread, as f16 bit patterns."""
    fx, fy, fz = _exact(x, y, z)
    prod = np.float32(np.float32(x) * np.float32(y)) * np.float32(0.1)     # the kernel's f32 steps
    want = [rounded(fx + fy, F16), rounded(fx - fy, F16), rounded(fx * fy, F16), rounded(fx * fy + fz, F16),
            min(float(x), float(y)), max(float(x), float(y)), -float(x), abs(float(z)),
            float(np.float32(prod).astype(np.float16))]
    bits = [f16_bits(w) for w in want]
    if fx + fy == 0:                          # an exact zero sum: -0 only from two -0s
        bits[0] = 0x8000 if (np.signbit(x) and np.signbit(y)) else 0
    if fx - fy == 0:
        bits[1] = 0x8000 if (np.signbit(x) and not np.signbit(y)) else 0
    if fx * fy == 0:
        bits[2] = 0x8000 if np.signbit(x) != np.signbit(y) else 0
    if fx * fy + fz == 0:
        neg_product = np.signbit(x) != np.signbit(y)
        bits[3] = 0x8000 if (neg_product and np.signbit(z)) else 0
    if float(x) == float(y) == 0:             # min/max order -0 below +0
        bits[4] = 0x8000 if (np.signbit(x) or np.signbit(y)) else 0
        bits[5] = 0 if not (np.signbit(x) and np.signbit(y)) else 0x8000
    return bits


@pytest.mark.parametrize("block, grid", [(128, 2), (64, 3)])
def test_f16_forms_in_a_region(rng, module, block, grid):
    n = 700
    a, b, c = _halves(rng, n)
    a[8], b[9] = np.nan, np.nan
    out, less = poison(n * 9, np.float16), poison(n, np.int32)
    module.get_function("halves")((grid,), (block,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, less, np.int32(n)))
    got = out.get().view(np.uint16).reshape(n, 9)
    nan_rows = {8, 9}
    wrong = [(i, a[i], b[i], c[i], [hex(v) for v in got[i]]) for i in range(n)
             if i not in nan_rows and list(got[i]) != _f16_forms(a[i], b[i], c[i])]
    assert not wrong, f"{len(wrong)} threads wrong, first: {wrong[:3]}"
    for i in nan_rows:                        # arithmetic on a NaN writes the GPU's NaN
        assert all(v == GPU_NAN for v in got[i, [0, 1, 2, 3]]), [hex(v) for v in got[i]]
    np.testing.assert_array_equal(less.get(), (a < b).astype(np.int32))


def test_packed_f16x2_forms_in_a_region(rng, module):
    n = 500
    a, b, c = (np.concatenate(h) for h in zip(_halves(rng, n), _halves(rng, n)))   # 2n halves: n pairs
    out = poison(n * 6, np.float16)
    module.get_function("pairs")((3,), (64,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
    got = out.get().view(np.uint16).reshape(n, 3, 2)
    for i in range(n):
        for half in range(2):
            x, y, z = (v[2 * i + half] for v in (a, b, c))
            forms = _f16_forms(x, y, z)
            assert [got[i, k, half] for k in range(3)] == [forms[0], forms[2], forms[3]], (i, half, x, y, z)


def test_bf16_forms_in_a_region(rng, module):
    n = 600
    v = rng.standard_normal((3, n)) * np.exp2(rng.integers(-20, 20, (3, n)))
    a, b, c = ((np.asarray(w, np.float32).view(np.uint32) >> 16).astype(np.uint16) for w in v)   # truncated to bf16
    out = poison(n * 3, np.uint16)
    module.get_function("brains")((2,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
    got = out.get().reshape(n, 3)
    x, y, z = (bf16_value(w) for w in (a, b, c))
    for i in range(n):
        fx, fy, fz = _exact(x[i], y[i], z[i])
        want = [bf16_bits(rounded(fx + fy, BF16)), bf16_bits(rounded(fx * fy, BF16)), bf16_bits(rounded(fx * fy + fz, BF16))]
        assert list(got[i]) == want, (i, x[i], y[i], z[i], [hex(g) for g in got[i]], [hex(w) for w in want])
