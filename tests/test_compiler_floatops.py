"""Each float helper of anycuda.compiler.ops.floatops, JIT-compiled on its own and compared with
an independent reference: numpy, exact rational arithmetic (fractions.Fraction) rounded by
a plain-Python model of IEEE rounding, and bit patterns built with numpy views."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import llvmlite.ir as ir

from anycuda.compiler.ops import floatops
from llvm_harness import Kernels

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
SEED = 7
RNDS = ["rn", "rz", "rm", "rp"]

# (precision bits, minimum normal exponent, maximum exponent)
FMT = {"f64": (53, -1022, 1023), "f32": (24, -126, 127), "f16": (11, -14, 15), "bf16": (8, -126, 127)}


def round_frac(q, fmt, mode):
    """The exact rational q rounded to format fmt in mode rn/rz/rm/rp, as a Python float
    (signed zero for a zero result of negative q)."""
    p, emin, emax = FMT[fmt]
    neg = q < 0
    a = -q if neg else q
    if a == 0:
        return -0.0 if neg else 0.0
    e = max(a.numerator.bit_length() - a.denominator.bit_length(), emin)
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, emin)
    ulp = Fraction(2) ** (e - p + 1)
    m = a / ulp
    fl = m.numerator // m.denominator
    rest = m - fl
    up = {"rz": False, "rm": neg and rest > 0, "rp": (not neg) and rest > 0,
          "rn": rest > Fraction(1, 2) or (rest == Fraction(1, 2) and fl % 2 == 1)}[mode]
    v = (fl + up) * ulp
    big = (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
    if v > big:
        to_inf = {"rn": True, "rz": False, "rm": neg, "rp": not neg}[mode]
        v = math.inf if to_inf else big
    out = float(v)
    return -out if neg else out


def same_bits(got, want):
    """Equal bit patterns, any NaN matching any NaN."""
    got, want = np.asarray(got), np.asarray(want)
    return (got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")) | (np.isnan(got) & np.isnan(want))


def assert_same(got, want, label, *inputs):
    ok = same_bits(got, want)
    if not ok.all():
        i = int(np.nonzero(~ok)[0][0])
        args = ", ".join(repr(x[i]) for x in inputs)
        raise AssertionError(f"{label}({args}) = {got[i]!r}, want {want[i]!r} ({(~ok).sum()} differ)")


def random_floats(rng, n, dtype):
    """A mix of random bit patterns, ordinary values, integers and special values."""
    dtype = np.dtype(dtype)
    ut = np.dtype(f"u{dtype.itemsize}")
    v = rng.integers(0, np.iinfo(ut).max, n, dtype=ut, endpoint=True).view(dtype).copy()
    i, j, k = n // 3, 2 * n // 3, 5 * n // 6
    v[i:j] = (rng.standard_normal(j - i) * 10.0 ** rng.integers(-3, 4, j - i)).astype(dtype)
    v[j:k] = rng.integers(-100, 100, k - j).astype(dtype) / 4
    fi = np.finfo(dtype)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, fi.max, -fi.max, fi.tiny, -fi.tiny,
                   fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny / 2, 3.0, -2.5], dtype)
    v[-len(sp):] = sp
    return v


def bf16_to_f32(bits):
    return (np.asarray(bits, np.uint32) << 16).view(np.float32)


def f32_to_bf16_ref(x, mode="rn"):
    """Independent reference: exact rounding of the f32 value to bf16 bits; NaN -> quiet NaN."""
    out = []
    for v in np.asarray(x, np.float32):
        bits = int(np.float32(v).view(np.uint32))
        if np.isnan(v):
            out.append((bits >> 16) | 0x40)
        elif np.isinf(v):
            out.append(bits >> 16)
        else:
            r = round_frac(Fraction(float(v)), "bf16", mode)
            if r == 0:
                out.append(0x8000 if np.signbit(v) else 0)
            else:
                out.append(int(np.float32(r).view(np.uint32)) >> 16)
    return np.array(out, np.uint16)


@pytest.fixture
def rng():
    return np.random.default_rng(SEED)


@pytest.fixture(scope="module")
def K():
    k = Kernels("floatops")
    for t, name in ((F32, "f32"), (F64, "f64")):
        for rnd in RNDS:
            for op in ("add", "sub", "mul"):
                k.add(f"{op}_{rnd}_{name}", [t, t], t, lambda b, x, y, op=op, r=rnd: floatops.fadd_rnd(b, op, x, y, r))
            k.add(f"fma_{rnd}_{name}", [t, t, t], t, lambda b, x, y, z, r=rnd: floatops.ffma_rnd(b, x, y, z, r))
            k.add(f"div_{rnd}_{name}", [t, t], t, lambda b, x, y, r=rnd: floatops.div(b, x, y, r))
            k.add(f"sqrt_{rnd}_{name}", [t], t, lambda b, x, r=rnd: floatops.sqrt(b, x, r))
            k.add(f"rcp_{rnd}_{name}", [t], t, lambda b, x, r=rnd: floatops.rcp(b, x, r))
        for nan in (False, True):
            k.add(f"min_{nan}_{name}", [t, t], t, lambda b, x, y, n=nan: floatops.fmin(b, x, y, n, False))
            k.add(f"max_{nan}_{name}", [t, t], t, lambda b, x, y, n=nan: floatops.fmax(b, x, y, n, False))
        for kind in ("finite", "infinite", "number", "notanumber", "normal", "subnormal"):
            k.add(f"testp_{kind}_{name}", [t], I1, lambda b, x, kd=kind: floatops.testp(b, x, kd))
        k.add(f"copysign_{name}", [t, t], t, floatops.copysign)
        k.add(f"sat_{name}", [t], t, floatops.saturate)
    k.add("min_ftz_f32", [F32, F32], F32, lambda b, x, y: floatops.fmin(b, x, y, False, True))
    k.add("div_approx_f32", [F32, F32], F32, lambda b, x, y: floatops.div(b, x, y, "approx"))
    k.add("div_full_f32", [F32, F32], F32, lambda b, x, y: floatops.div(b, x, y, "full"))
    for fn in ("rsqrt", "sin_approx", "cos_approx", "ex2_approx", "lg2_approx", "tanh_approx"):
        k.add(f"{fn}_f32", [F32], F32, lambda b, x, f=fn: getattr(floatops, f)(b, x))
        k.add(f"{fn}_ftz_f32", [F32], F32, lambda b, x, f=fn: getattr(floatops, f)(b, x, ftz=True))
    k.add("rsqrt_f64", [F64], F64, lambda b, x: floatops.rsqrt(b, x))
    # conversions
    ints = ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"]
    fts = {"f16": F16, "f32": F32, "f64": F64, "bf16": I16}
    for src in ("f16", "f32", "f64", "bf16"):
        for dst in ints:
            for rnd in ("rni", "rzi", "rmi", "rpi"):
                k.add(f"cvt_{dst}_{src}_{rnd}", [fts[src]], floatops.llvm_type(dst),
                      lambda b, v, d=dst, s=src, r=rnd: floatops.cvt(b, v, d, s, r, False, False))
        for dst in ("f16", "f32", "f64", "bf16"):
            for rnd in RNDS:
                k.add(f"cvt_{dst}_{src}_{rnd}", [fts[src]], fts[dst],
                      lambda b, v, d=dst, s=src, r=rnd: floatops.cvt(b, v, d, s, r, False, False))
            if dst == src:
                for rnd in ("rni", "rzi", "rmi", "rpi"):
                    k.add(f"cvt_{dst}_{src}_{rnd}", [fts[src]], fts[dst],
                          lambda b, v, d=dst, s=src, r=rnd: floatops.cvt(b, v, d, s, r, False, False))
    for src in ints:
        for dst in ("f16", "f32", "f64", "bf16"):
            for rnd in RNDS:
                k.add(f"cvt_{dst}_{src}_{rnd}", [floatops.llvm_type(src)], fts[dst],
                      lambda b, v, d=dst, s=src, r=rnd: floatops.cvt(b, v, d, s, r, False, False))
        for dst in ints:
            for sat in (False, True):
                k.add(f"cvt_{dst}_{src}_{sat}", [floatops.llvm_type(src)], floatops.llvm_type(dst),
                      lambda b, v, d=dst, s=src, st=sat: floatops.cvt(b, v, d, s, None, st, False))
    k.add("cvt_sat_f32_f32", [F32], F32, lambda b, v: floatops.cvt(b, v, "f32", "f32", None, True, False))
    k.add("cvt_ftz_f32_f32", [F32], F32, lambda b, v: floatops.cvt(b, v, "f32", "f32", None, False, True))
    k.add("cvt_ftz_f32_f64", [F64], F32, lambda b, v: floatops.cvt(b, v, "f32", "f64", "rn", False, True))
    # half precision
    for kind in ("f16", "bf16"):
        for op in ("add", "sub", "mul", "min", "max", "min_nan", "max_nan"):
            k.add(f"h2_{op}_{kind}", [I32, I32], I32, lambda b, x, y, o=op, kd=kind: floatops.halfx2_binop(b, o, x, y, kd))
        k.add(f"h2_fma_{kind}", [I32, I32, I32], I32,
              lambda b, x, y, z, kd=kind: floatops.halfx2_binop(b, "fma", x, y, kd, z))
        k.add(f"h2_fma_relu_{kind}", [I32, I32, I32], I32,
              lambda b, x, y, z, kd=kind: floatops.halfx2_binop(b, "fma", x, y, kd, z, relu=True))
        for op in ("neg", "abs"):
            k.add(f"h2_{op}_{kind}", [I32], I32, lambda b, x, o=op, kd=kind: floatops.halfx2_binop(b, o, x, None, kd))
        k.add(f"cvt2_{kind}", [F32, F32], I32, lambda b, x, y, kd=kind: floatops.cvt_f16x2_f32(b, x, y, kd))
        k.add(f"cvt2_relu_{kind}", [F32, F32], I32,
              lambda b, x, y, kd=kind: floatops.cvt_f16x2_f32(b, x, y, kd, relu=True))
    k.add("unpack_lo", [I32], F16, lambda b, v: floatops.unpack2(b, v, "f16")[0])
    k.add("unpack_hi", [I32], I16, lambda b, v: floatops.unpack2(b, v)[1])
    k.add("pack", [F16, I16], I32, floatops.pack2)
    return k.build()


# ------------------------------------------------------------------ exactly rounded arithmetic

def _exact_cases(rng, dtype, n):
    a, b, c = (random_floats(rng, n, dtype) for _ in range(3))
    # cancellation, wide exponent gaps and products near the ends of the range
    a[:50] = b[:50] * -1
    b[50:100] = (a[50:100] * np.asarray(2.0 ** -40, dtype)).astype(dtype)
    # products far below the smallest subnormal, added to ordinary values
    fi = np.finfo(dtype)
    a[100:150] = fi.smallest_subnormal * rng.integers(1, 1000, 50)
    b[100:150] = np.asarray(fi.tiny, dtype) * rng.standard_normal(50).astype(dtype)
    c[120:150] = rng.standard_normal(30).astype(dtype)
    # products one or two bits too wide (x * 1.5, x * 0.75), so a*b - fl(a*b) is nonzero while
    # fl(a*b) + c may be exact
    a[150:300] = (rng.standard_normal(150) * 1e3).astype(dtype)
    b[150:300] = rng.choice(np.array([1.5, -1.5, 0.75, -2.5, 3.0], dtype), 150)
    c[150:300] = rng.standard_normal(150).astype(dtype)
    for i in range(150, 225):      # c cancels the fraction of a*b: an exact fma, inexact product
        p = Fraction(float(a[i])) * Fraction(float(b[i]))
        c[i] = dtype(float(math.floor(p) - p))
    # tiny products whose rounding error underflows, plus a tiny or zero addend
    a[300:350] = fi.smallest_subnormal * rng.integers(1, 1 << 20, 50) * np.asarray(2.0, dtype) ** rng.integers(0, 40, 50)
    b[300:350] = rng.standard_normal(50).astype(dtype) * np.asarray(2.0, dtype) ** -rng.integers(0, 30, 50)
    c[300:325] = fi.smallest_subnormal * rng.integers(-1 << 20, 1 << 20, 25)
    c[325:350] = 0
    # products beyond the largest finite value brought back into range by c
    a[350:400] = (fi.max * rng.uniform(0.5, 1, 50)).astype(dtype)
    b[350:400] = rng.choice(np.array([1.5, 2.0, -1.5, 1.25], dtype), 50)
    c[350:400] = (-np.sign(b[350:400]) * fi.max * rng.uniform(0.3, 1, 50)).astype(dtype)
    return a, b, c


@pytest.mark.parametrize("name,dtype", [("f32", np.float32), ("f64", np.float64)])
@pytest.mark.parametrize("rnd", RNDS)
def test_arith_exact_rounding(K, rng, name, dtype, rnd):
    n = 1200
    a, b, c = _exact_cases(rng, dtype, n)
    results = {op: K(f"{op}_{rnd}_{name}", a, b) for op in ("add", "sub", "mul", "div")}
    results["fma"] = K(f"fma_{rnd}_{name}", a, b, c)
    with np.errstate(all="ignore"):
        ieee = {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b,
                "fma": (a.astype(np.longdouble) * b + c).astype(dtype)}
    for op, got in results.items():
        want = np.empty(n, dtype)
        for i in range(n):
            x, y, z = float(a[i]), float(b[i]), float(c[i])
            used = (x, y, z) if op == "fma" else (x, y)
            if not all(map(math.isfinite, used)) or (op == "div" and y == 0):
                want[i] = ieee[op][i]            # specials: as IEEE (same in every mode)
                continue
            X, Y = Fraction(x), Fraction(y)
            Z = Fraction(z) if op == "fma" else None
            q = {"add": lambda: X + Y, "sub": lambda: X - Y, "mul": lambda: X * Y, "div": lambda: X / Y,
                 "fma": lambda: X * Y + Z}[op]()
            r = round_frac(q, name, rnd)
            if q == 0:      # exact zero: sign by IEEE rules
                if op == "mul" or op == "div":
                    r = math.copysign(0.0, x) * math.copysign(1.0, y)
                else:
                    s1 = math.copysign(1, x) if op != "fma" else math.copysign(1, x) * math.copysign(1, y)
                    s2 = math.copysign(1, z if op == "fma" else (y if op == "add" else -y))
                    r = (-0.0 if s1 < 0 else 0.0) if s1 == s2 else (-0.0 if rnd == "rm" else 0.0)
            want[i] = r
        assert_same(got, want, f"{op}.{rnd}.{name}", a, b, c)


@pytest.mark.parametrize("name,dtype", [("f32", np.float32), ("f64", np.float64)])
@pytest.mark.parametrize("rnd", RNDS)
def test_sqrt_rcp_exact_rounding(K, rng, name, dtype, rnd):
    x = np.abs(random_floats(rng, 1500, dtype))
    x[-40:-20] = -x[-40:-20]
    got_s, got_r = K(f"sqrt_{rnd}_{name}", x), K(f"rcp_{rnd}_{name}", x)
    ws, wr = np.empty_like(x), np.empty_like(x)
    p = FMT[name][0]
    for i, v in enumerate(map(float, x)):
        with np.errstate(all="ignore"):
            ws[i], wr[i] = np.sqrt(x[i]), dtype(1) / x[i]
        if math.isfinite(v) and v > 0:
            # sqrt: scale to an integer and take the integer square root with sticky bit
            q = Fraction(v)
            k = 2 * (p + 1100)
            m = q * Fraction(4) ** k if k >= 0 else q
            num = m.numerator * 4 ** 0 // m.denominator
            r = math.isqrt(num)
            exact = r * r == num and m.denominator == 1
            root = Fraction(r, 2 ** k) + (0 if exact else Fraction(1, 2 ** (k + 2)))
            ws[i] = round_frac(root, name, rnd)
        if math.isfinite(v) and v != 0:
            wr[i] = round_frac(1 / Fraction(v), name, rnd)
    assert_same(got_s, ws, f"sqrt.{rnd}.{name}", x)
    assert_same(got_r, wr, f"rcp.{rnd}.{name}", x)


# ------------------------------------------------------------------ min/max, testp, copysign

@pytest.mark.parametrize("name,dtype", [("f32", np.float32), ("f64", np.float64)])
def test_min_max(K, rng, name, dtype):
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0], dtype)
    a = np.concatenate([np.repeat(sp, len(sp)), random_floats(rng, 500, dtype)])
    b = np.concatenate([np.tile(sp, len(sp)), random_floats(rng, 500, dtype)])
    for op, pick in (("min", np.fmin), ("max", np.fmax)):
        for nan in (False, True):
            got = K(f"{op}_{nan}_{name}", a, b)
            want = pick(a, b)
            if nan:
                want = np.where(np.isnan(a) | np.isnan(b), np.nan, want).astype(dtype)
            # -0 orders below +0
            zz = (a == 0) & (b == 0)
            neg = np.signbit(a) | np.signbit(b) if op == "min" else np.signbit(a) & np.signbit(b)
            want = np.where(zz, np.where(neg, dtype(-0.0), dtype(0.0)), want).astype(dtype)
            assert_same(got, want, f"{op}.{nan}", a, b)
            if name == "f32":       # NaN results are the canonical NaN
                nans = np.isnan(got)
                assert (got[nans].view(np.uint32) == 0x7FFFFFFF).all()
    got = K("min_ftz_f32", np.float32([1e-40, -1e-40, 1e-40]), np.float32([0.0, 0.0, -0.0]))
    assert got.view(np.uint32).tolist() == [0, 0x80000000, 0x80000000]


@pytest.mark.parametrize("name,dtype", [("f32", np.float32), ("f64", np.float64)])
def test_testp_copysign_saturate(K, rng, name, dtype):
    x = random_floats(rng, 600, dtype)
    tiny = np.finfo(dtype).tiny
    ax = np.abs(x)
    with np.errstate(invalid="ignore"):
        want = {"finite": np.isfinite(x), "infinite": np.isinf(x), "number": ~np.isnan(x),
                "notanumber": np.isnan(x),
                # PTX ISA: positive and negative zero are considered normal numbers
                "normal": np.isfinite(x) & ((ax >= tiny) | (ax == 0)),
                "subnormal": (ax > 0) & (ax < tiny)}
    for kind, w in want.items():
        assert (K(f"testp_{kind}_{name}", x) == w).all(), kind
    y = random_floats(rng, 600, dtype)
    assert_same(K(f"copysign_{name}", x, y), np.copysign(y, x), "copysign", x, y)
    with np.errstate(invalid="ignore"):
        sat = np.where(np.isnan(x), 0, np.clip(x, 0, 1)).astype(dtype)
    sat = np.where(sat == 0, dtype(0.0), sat).astype(dtype)   # -0 and NaN give +0
    assert_same(K(f"sat_{name}", x), sat, "saturate", x)


# ------------------------------------------------------------------ approximate functions

def test_approx_special_values(K):
    nan, inf = np.nan, np.inf
    x = np.float32([0.0, -0.0, inf, -inf, nan, 4.0, -4.0, 1e-40, -1e-40])
    specials = {
        "rsqrt": [inf, -inf, 0.0, nan, nan, 0.5, nan, None, nan],
        "sin_approx": [0.0, -0.0, nan, nan, nan, None, None, None, None],
        "cos_approx": [1.0, 1.0, nan, nan, nan, None, None, 1.0, 1.0],
        "ex2_approx": [1.0, 1.0, inf, 0.0, nan, 16.0, 0.0625, 1.0, 1.0],
        "lg2_approx": [-inf, -inf, inf, nan, nan, 2.0, nan, None, nan],
        "tanh_approx": [0.0, -0.0, 1.0, -1.0, nan, None, None, None, None],
    }
    ftz_specials = {"rsqrt": {7: inf, 8: -inf}, "lg2_approx": {7: -inf, 8: -inf}, "sin_approx": {7: 0.0, 8: -0.0},
                    "tanh_approx": {7: 0.0, 8: -0.0}}
    for fn, want in specials.items():
        got = K(f"{fn}_f32", x)
        for i, w in enumerate(want):
            if w is not None:
                assert same_bits(got[i:i + 1], np.float32([w]))[0], (fn, x[i], got[i], w)
        got = K(f"{fn}_ftz_f32", x)
        for i, w in ftz_specials.get(fn, {}).items():
            assert same_bits(got[i:i + 1], np.float32([w]))[0], (fn, "ftz", x[i], got[i], w)
    # accuracy on ordinary values (PTX's approximations are allowed to be this good)
    v = np.linspace(-10, 10, 2001, dtype=np.float32)
    assert np.allclose(K("sin_approx_f32", v), np.sin(v.astype(np.float64)), atol=1e-6)
    assert np.allclose(K("tanh_approx_f32", v), np.tanh(v.astype(np.float64)), atol=1e-6)
    assert np.allclose(K("ex2_approx_f32", v), np.exp2(v.astype(np.float64)), rtol=1e-6)
    pos = np.abs(v) + np.float32(0.01)
    assert np.allclose(K("lg2_approx_f32", pos), np.log2(pos.astype(np.float64)), atol=1e-6)
    assert np.allclose(K("rsqrt_f64", pos.astype(np.float64)), 1 / np.sqrt(pos.astype(np.float64)), rtol=1e-15)


def test_div_approx_and_full(K, rng):
    a = random_floats(rng, 800, np.float32)
    b = random_floats(rng, 800, np.float32)
    with np.errstate(all="ignore"):
        q = a / b
        got = K("div_full_f32", a, b)
        assert_same(got, q, "div.full", a, b)
        got = K("div_approx_f32", a, b)
        huge = np.abs(b) > 2.0 ** 126
        # |b| > 2**126: the reciprocal underflows, a * 0 remains (NaN for infinite a)
        want = np.where(huge, a * np.copysign(np.float32(0), b), q).astype(np.float32)
    assert_same(got, want, "div.approx", a, b)


# ------------------------------------------------------------------ conversions

INT_RANGE = {t: ((-(1 << (int(t[1:]) - 1)), (1 << (int(t[1:]) - 1)) - 1) if t[0] == "s" else (0, (1 << int(t[1:])) - 1))
             for t in ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"]}


def _float_inputs(rng, src, n=600):
    if src == "bf16":
        x = random_floats(rng, n, np.float32)
        return (x.view(np.uint32) >> 16).astype(np.uint16), None
    dt = {"f16": np.float16, "f32": np.float32, "f64": np.float64}[src]
    x = random_floats(rng, n, dt)
    x[:40] = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 127.5, 128.0, -128.5, 255.5, 256.0, 65535.5, 65536.0,
                       -32768.5, 2.0 ** 31, -2.0 ** 31, 2.0 ** 32, 2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 4294967295.5,
                       1e30, -1e30, 0.49999997, -0.49999997, 3.5, -3.5, 1e-30, -1e-30, 7.0, 8.5, 9.5,
                       -9.5, 100.25, 100.75, -100.25, -100.75, 0.0, -0.0, 1.0], np.float64).astype(dt)
    return x, x


def _as_fraction(src, raw):
    if src == "bf16":
        return [float(v) for v in bf16_to_f32(raw)]
    return [float(v) for v in raw]


@pytest.mark.parametrize("src", ["f16", "f32", "f64", "bf16"])
def test_cvt_float_to_int(K, rng, src):
    raw, _ = _float_inputs(rng, src)
    vals = _as_fraction(src, raw)
    for dst in INT_RANGE:
        lo, hi = INT_RANGE[dst]
        w = int(dst[1:])
        for rnd in ("rni", "rzi", "rmi", "rpi"):
            got = K(f"cvt_{dst}_{src}_{rnd}", raw).astype(np.uint64)
            want = []
            # NaN as an H200 converts it (tests/golden/convert.npz): 0 from f32 and narrower into
            # 32 bits or fewer, else the destination's sign bit alone
            nan = 1 << (w - 1) if w == 64 or (w == 32 and src == "f64") else 0
            for v in vals:
                if math.isnan(v):
                    r = nan
                elif math.isinf(v):
                    r = hi if v > 0 else lo
                else:
                    q = Fraction(v)
                    fl = math.floor(q)
                    r = {"rzi": math.trunc(q), "rmi": fl, "rpi": math.ceil(q),
                         "rni": fl + (1 if q - fl > Fraction(1, 2) or (q - fl == Fraction(1, 2) and fl % 2) else 0)}[rnd]
                    r = min(max(r, lo), hi)
                want.append(r & ((1 << w) - 1))
            want = np.array(want, np.uint64)
            bad = np.nonzero(got != want)[0]
            assert not len(bad), f"cvt.{rnd}.{dst}.{src}({vals[bad[0]]!r}) = {got[bad[0]]:#x}, want {want[bad[0]]:#x}"


def _float_result(dst, got):
    if dst == "bf16":
        return bf16_to_f32(got)
    if dst == "f16":
        return got.view(np.float16)
    return got


def _ref_float(q_or_special, dst, rnd):
    v = q_or_special
    if isinstance(v, float):       # NaN / Inf / signed zero pass through
        return v
    return round_frac(v, dst, rnd)


@pytest.mark.parametrize("src", ["f16", "f32", "f64", "bf16"])
def test_cvt_float_to_float(K, rng, src):
    raw, _ = _float_inputs(rng, src)
    vals = _as_fraction(src, raw)
    for dst in ("f16", "f32", "f64", "bf16"):
        for rnd in RNDS:
            got = _float_result(dst, K(f"cvt_{dst}_{src}_{rnd}", raw)).astype(np.float64)
            want = np.array([v if not math.isfinite(v) or v == 0 else round_frac(Fraction(v), dst, rnd)
                             for v in vals])
            assert_same(got, want, f"cvt.{rnd}.{dst}.{src}", np.array(vals))
    for rnd in ("rni", "rzi", "rmi", "rpi"):
        got = _float_result(src, K(f"cvt_{src}_{src}_{rnd}", raw)).astype(np.float64)
        f = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rnd]
        assert_same(got, f(np.array(vals)), f"cvt.{rnd}.{src}.{src}", np.array(vals))


@pytest.mark.parametrize("src", ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"])
def test_cvt_int_to_float_and_int(K, rng, src):
    lo, hi = INT_RANGE[src]
    w = int(src[1:])
    vals = [int(v) for v in rng.integers(lo, hi, 500, endpoint=True, dtype=np.int64 if src[0] == "s" or w < 64 else np.uint64)]
    vals += [lo, hi, 0, 1, -1 if lo else 2, hi - 1, (1 << (w - 2)) + 1, (1 << (w - 1)) - 3]
    vals += [((1 << 24) + 1) & ((1 << w) - 1), ((1 << 53) + 1) & ((1 << w) - 1), 0x7FFFFFFFFFFFFDFF & ((1 << w) - 1)]
    vals = [min(max(v if lo <= v <= hi else v - (1 << w), lo), hi) for v in vals]
    raw = np.array([v & ((1 << w) - 1) for v in vals], np.uint64).astype(f"u{max(1, w // 8)}")
    for dst in ("f16", "f32", "f64", "bf16"):
        for rnd in RNDS:
            got = _float_result(dst, K(f"cvt_{dst}_{src}_{rnd}", raw)).astype(np.float64)
            want = np.array([round_frac(Fraction(v), dst, rnd) if v else 0.0 for v in vals])
            assert_same(got, want, f"cvt.{rnd}.{dst}.{src}", np.array(vals, object))
    for dst in INT_RANGE:
        dlo, dhi = INT_RANGE[dst]
        dw = int(dst[1:])
        for sat in (False, True):
            got = K(f"cvt_{dst}_{src}_{sat}", raw).astype(np.uint64)
            want = np.array([(min(max(v, dlo), dhi) if sat else v) & ((1 << dw) - 1) for v in vals], np.uint64)
            bad = np.nonzero(got != want)[0]
            assert not len(bad), f"cvt{'.sat' * sat}.{dst}.{src}({vals[bad[0]]}) = {got[bad[0]]:#x}, want {want[bad[0]]:#x}"


def test_cvt_sat_and_ftz(K, rng):
    x = random_floats(rng, 500, np.float32)
    with np.errstate(invalid="ignore"):
        sat = np.where(np.isnan(x), 0, np.clip(x, 0, 1)).astype(np.float32)
    assert_same(K("cvt_sat_f32_f32", x), np.where(sat == 0, np.float32(0), sat).astype(np.float32), "cvt.sat", x)
    sub = (np.abs(x) < np.finfo(np.float32).tiny) & (x != 0)
    want = np.where(sub, np.copysign(np.float32(0), x), x).astype(np.float32)
    assert_same(K("cvt_ftz_f32_f32", x), want, "cvt.ftz", x)
    d = np.array([1e-39, -1e-39, 1e-45, 1.0, 1e-300, -1e-300], np.float64)
    got = K("cvt_ftz_f32_f64", d)
    assert got.view(np.uint32).tolist() == [0, 0x80000000, 0, 0x3F800000, 0, 0x80000000]


# ------------------------------------------------------------------ f16 / bf16 and packed pairs

def _halves(rng, kind, n):
    if kind == "f16":
        v = random_floats(rng, 2 * n, np.float16)
        return v.view(np.uint16).reshape(n, 2)
    v = random_floats(rng, 2 * n, np.float32)
    return (v.view(np.uint32) >> 16).astype(np.uint16).reshape(n, 2)


def _pack(h):
    return (h[:, 0].astype(np.uint32) | (h[:, 1].astype(np.uint32) << 16))


def _unpack(v):
    return np.stack([(v & 0xFFFF).astype(np.uint16), (v >> 16).astype(np.uint16)], axis=1)


def _to_f64(kind, bits):
    if kind == "f16":
        return bits.view(np.float16).astype(np.float64)
    return bf16_to_f32(bits).astype(np.float64)


def _round_half(kind, q, x_nan):
    if x_nan:
        return None
    if isinstance(q, float):
        return q
    return round_frac(q, kind, "rn")


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_half_pairs(K, rng, kind):
    n = 700
    A, B, C = (_halves(rng, kind, n) for _ in range(3))
    a, b, c = _pack(A), _pack(B), _pack(C)
    fa, fb, fc = (_to_f64(kind, X) for X in (A, B, C))
    ops = {"add": lambda x, y, z: x + y, "sub": lambda x, y, z: x - y, "mul": lambda x, y, z: x * y,
           "fma": lambda x, y, z: x * y + z, "fma_relu": lambda x, y, z: x * y + z}
    for op, f in ops.items():
        got = _to_f64(kind, _unpack(K(f"h2_{op}_{kind}", a, b, c) if op.startswith("fma") else K(f"h2_{op}_{kind}", a, b)))
        want = np.empty((n, 2))
        for i in range(n):
            for j in range(2):
                x, y, z = fa[i, j], fb[i, j], fc[i, j]
                with np.errstate(all="ignore"):
                    ieee = f(x, y, z)
                if not all(map(math.isfinite, (x, y, z) if op.startswith("fma") else (x, y))) or not math.isfinite(ieee):
                    r = ieee                                    # inf/NaN cases
                else:
                    q = f(Fraction(x), Fraction(y), Fraction(z) if math.isfinite(z) else 0)
                    r = round_frac(q, kind, "rn") if q != 0 else ieee
                if op == "fma_relu" and r < 0:     # .relu: negative results (and -inf) become +0
                    r = 0.0
                want[i, j] = r
        assert_same(got.ravel(), want.ravel(), f"{op}.{kind}x2", fa.ravel(), fb.ravel())
    for op, pick in (("min", np.fmin), ("max", np.fmax)):
        got = _to_f64(kind, _unpack(K(f"h2_{op}_{kind}", a, b)))
        want = pick(fa, fb)
        zz = (fa == 0) & (fb == 0)
        neg = (np.signbit(fa) | np.signbit(fb)) if op == "min" else (np.signbit(fa) & np.signbit(fb))
        want = np.where(zz, np.where(neg, -0.0, 0.0), want)
        assert_same(got.ravel(), want.ravel(), f"{op}.{kind}x2", fa.ravel(), fb.ravel())
        got = _to_f64(kind, _unpack(K(f"h2_{op}_nan_{kind}", a, b)))
        want = np.where(np.isnan(fa) | np.isnan(fb), np.nan, want)
        assert_same(got.ravel(), want.ravel(), f"{op}.NaN.{kind}x2", fa.ravel(), fb.ravel())
    # neg and abs flip or clear the sign; a NaN half comes out as 0x7FFF, as on an H200
    nan = np.isnan(fa)
    for op, bits in (("neg", A ^ 0x8000), ("abs", A & 0x7FFF)):
        want = _pack(np.where(nan, 0x7FFF, bits).astype(A.dtype))
        assert (K(f"h2_{op}_{kind}", a) == want).all(), op


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_cvt_pair_from_f32(K, rng, kind):
    x, y = random_floats(rng, 800, np.float32), random_floats(rng, 800, np.float32)
    got = _unpack(K(f"cvt2_{kind}", x, y))
    if kind == "f16":
        lo, hi = y.astype(np.float16).view(np.uint16), x.astype(np.float16).view(np.uint16)
    else:
        lo, hi = f32_to_bf16_ref(y), f32_to_bf16_ref(x)
    # a NaN comes out as the GPU's 0x7FFF
    ok_lo = got[:, 0] == np.where(np.isnan(y), 0x7FFF, lo)
    ok_hi = got[:, 1] == np.where(np.isnan(x), 0x7FFF, hi)
    assert ok_lo.all() and ok_hi.all(), "first source goes to the upper half, each rounded to nearest"
    got = _unpack(K(f"cvt2_relu_{kind}", np.float32([-1.0, np.nan, 2.0]), np.float32([3.0, -0.0, -5.0])))
    one = {"f16": 0x3C00, "bf16": 0x3F80}[kind]
    assert got[0, 1] == 0 and got[1, 1] == 0x7FFF and got[2, 0] == 0 and got[1, 0] == 0
    assert got[2, 1] == (0x4000 if kind == "f16" else 0x4000)
    assert one


def test_bf16_rounding_from_f32(K, rng):
    x = random_floats(rng, 3000, np.float32)
    ties = (rng.integers(0, 2 ** 16, 200).astype(np.uint32) << 16) | 0x8000
    x[:200] = ties.view(np.float32)
    for rnd in RNDS:
        got = K(f"cvt_bf16_f32_{rnd}", x)
        want = f32_to_bf16_ref(x, rnd)
        nan = np.isnan(x)
        assert (got[~nan] == want[~nan]).all(), rnd
        assert np.isnan(bf16_to_f32(got[nan])).all()


def test_unpack_pack():
    k = Kernels("pack")
    k.add("lo", [I32], F16, lambda b, v: floatops.unpack2(b, v, "f16")[0])
    k.add("hi", [I32], I16, lambda b, v: floatops.unpack2(b, v)[1])
    k.add("pack", [F16, I16], I32, floatops.pack2)
    k.build()
    v = np.array([0x3C00C000, 0x12345678], np.uint32)
    assert k("lo", v).tolist() == [0xC000, 0x5678]
    assert k("hi", v).tolist() == [0x3C00, 0x1234]
    assert k("pack", np.array([0xC000, 1], np.uint16), np.array([0x3C00, 2], np.uint16)).tolist() == [0x3C00C000, 0x20001]


def test_llvm_type():
    lt = floatops.llvm_type
    assert lt("f16") == F16 and lt("f32") == F32 and lt("f64") == F64 and lt("pred") == I1
    assert lt("bf16") == I16 and lt("f16x2") == I32 and lt("bf16x2") == I32 and lt("e4m3") == I8
    assert lt("u8") == I8 and lt("s64") == I64 and lt("b32") == I32


def test_ex2_approx_f32_is_within_two_ulps_everywhere(K, rng):
    """ex2.approx.f32 is inline f32 arithmetic (floatops._ex2_f32, so that loops around it
    vectorise): against 2**x computed in double and rounded once, it is within two ulps over
    the whole range where the result is neither 0 nor infinite, subnormal results included,
    and within PTX's promised relative error of 2**-22 where the result is normal."""
    x = np.concatenate([rng.uniform(-150, 128, 20000), rng.uniform(-1, 1, 5000), rng.uniform(-149, -127, 2000),
                        [127.99999, 128.0, -149.0, -149.5, -150.0, -151.0, 0.5, -0.5, 1e-8, -1e-8]]).astype(np.float32)
    got = K("ex2_approx_f32", x)
    with np.errstate(over="ignore"):
        exact = np.exp2(x.astype(np.float64))
        want = exact.astype(np.float32)
    ulps = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
    assert ulps.max() <= 2, (x[np.argmax(ulps)], got[np.argmax(ulps)], want[np.argmax(ulps)])
    normal = (exact >= np.finfo(np.float32).tiny) & (exact <= np.finfo(np.float32).max)
    assert (np.abs(got[normal] / exact[normal] - 1) <= 2.0 ** -22).all()
    assert (ulps == 0).mean() > 0.9
