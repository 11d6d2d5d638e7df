"""Float instructions, conversions and 16-bit float formats with PTX semantics."""
import math

from llvmlite import ir

from ..irutil import intrinsic

I1, I8, I16, I32, I64, I128 = (ir.IntType(n) for n in (1, 8, 16, 32, 64, 128))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
HALF_NAN = 0x7FFF      # the NaN an NVIDIA GPU writes for f16 and bf16 results
_FLOAT_BITS = {"half": 16, "float": 32, "double": 64}


def _c(t, v):
    """Constant v of type t: a scalar, or every lane of a vector type."""
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, _c(t.element, v))
    if isinstance(t, ir.IntType):
        return ir.Constant(t, v & ((1 << t.width) - 1))
    return ir.Constant(t, v)


# The directed roundings (arith_rnd and what it calls) take scalars or vectors alike, so that
# warp regions and block programs lower `fma.rm.f32` (nvcc's expf) as the step function does:
# a type they name is given the shape of the value it goes with (_like).
def _like(t, x):
    """Scalar type t in value x's shape: a vector of as many lanes where x is a vector."""
    return ir.VectorType(t, x.type.count) if isinstance(x.type, ir.VectorType) else t


def _suffix(t):
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_suffix(t.element)}"
    return {"half": "f16", "float": "f32", "double": "f64"}[str(t)]


def _bits(t):
    return _FLOAT_BITS[str(t.element if isinstance(t, ir.VectorType) else t)]


def _ftype(name):
    return {"f16": F16, "f32": F32, "f64": F64}[name]


def _width(t):
    if t in ("f16x2", "bf16x2"):
        return 32
    if t == "bf16":
        return 16
    return int(t.lstrip("bfusx"))


def fabs(b, x):
    return intrinsic(b, f"llvm.fabs.{_suffix(x.type)}", x.type, [x])


def is_nan(b, x):
    return b.fcmp_unordered("uno", x, x)


def saturate(b, x):
    """Clamp to [0, 1]; NaN gives 0."""
    zero, one = _c(x.type, 0.0), _c(x.type, 1.0)
    v = b.select(b.fcmp_ordered(">", x, zero), x, zero)   # NaN -> 0
    return b.select(b.fcmp_ordered("<", v, one), v, one)


def flush_denormal(b, x):
    tiny = {16: 2.0 ** -14, 32: 2.0 ** -126, 64: 2.0 ** -1022}[_bits(x.type)]
    small = b.fcmp_ordered("<", fabs(b, x), _c(x.type, tiny))
    zero = intrinsic(b, f"llvm.copysign.{_suffix(x.type)}", x.type, [_c(x.type, 0.0), x])
    return b.select(small, zero, x)


def nudge(b, x, up):
    """The next representable value above (up=True) or below x."""
    it = _like(ir.IntType(_bits(x.type)), x)
    bits = b.bitcast(x, it)
    is_zero = b.fcmp_ordered("==", x, _c(x.type, 0.0))
    positive = b.icmp_signed(">=", bits, _c(it, 0))
    toward_mag = positive if up else b.not_(positive)
    moved = b.select(toward_mag, b.add(bits, _c(it, 1)), b.sub(bits, _c(it, 1)))
    sign = 1 << (_bits(x.type) - 1)
    smallest = _c(it, 1 if up else sign | 1)
    res = b.select(is_zero, smallest, moved)
    # NaN stays; an infinity only moves toward zero (to the largest finite value)
    special = b.fcmp_unordered("uno", x, x)
    inf = b.fcmp_ordered("==", fabs(b, x), _c(x.type, float("inf")))
    outward = b.and_(inf, toward_mag)
    return b.select(b.or_(special, outward), x, b.bitcast(res, x.type))


def _directed(b, r, err_sign, rnd):
    """Given the round-to-nearest result r and the sign of (exact - r) as -1/0/+1 (i32),
    the result rounded toward zero (rz), -inf (rm) or +inf (rp)."""
    if rnd in (None, "rn", "rni"):
        return r
    pos_err = b.icmp_signed(">", err_sign, _c(err_sign.type, 0))
    neg_err = b.icmp_signed("<", err_sign, _c(err_sign.type, 0))
    if rnd == "rm":
        return b.select(neg_err, nudge(b, r, False), r)
    if rnd == "rp":
        return b.select(pos_err, nudge(b, r, True), r)
    # rz: step toward zero when r overshot the exact value in magnitude
    r_pos = b.fcmp_ordered(">", r, _c(r.type, 0.0))
    r_neg = b.fcmp_ordered("<", r, _c(r.type, 0.0))
    down = b.and_(r_pos, neg_err)
    up = b.and_(r_neg, pos_err)
    return b.select(down, nudge(b, r, False), b.select(up, nudge(b, r, True), r))


def _compare_sign(b, x, y):
    """-1, 0, +1 (i32) as x is below, equal to or above y."""
    gt = b.fcmp_ordered(">", x, y)
    lt = b.fcmp_ordered("<", x, y)
    i32 = _like(I32, x)
    return b.select(gt, _c(i32, 1), b.select(lt, _c(i32, -1), _c(i32, 0)))


def _sign_of_diff(b, exact, approx):
    """The sign of exact - approx."""
    return _compare_sign(b, exact, approx)


def _round_f64_to(b, x64, dst, rnd):
    """Round an f64 value (or vector) to f32/f16 in direction rnd (exact residual in f64)."""
    r = b.fptrunc(x64, _like(dst, x64))
    if rnd in (None, "rn"):
        return r
    back = b.fpext(r, x64.type)
    return _directed(b, r, _sign_of_diff(b, x64, back), rnd)


def _f64_arith(b, op, w):
    """add/sub/mul/fma in double precision (exact for operands of 24 bits or fewer, except fma)."""
    if op == "fma":
        return _fma(b, *w)
    return {"add": b.fadd, "sub": b.fsub, "mul": b.fmul}[op](w[0], w[1])


def _fma(b, x, y, z):
    return intrinsic(b, f"llvm.fma.{_suffix(x.type)}", x.type, [x, y, z])


def _two_sum(b, x, y):
    """s = fl(x + y) and the exact error x + y - s (Knuth's TwoSum; exact barring overflow)."""
    s = b.fadd(x, y)
    bb = b.fsub(s, x)
    err = b.fadd(b.fsub(x, b.fsub(s, bb)), b.fsub(y, bb))
    return s, err


def _is_finite(b, x):
    return b.fcmp_ordered("<", fabs(b, x), _c(x.type, float("inf")))


def _overflow_sign(b, r, err_sign, finite):
    """When r overflowed to infinity from finite operands the exact value lies below it in
    magnitude: the residual's sign is then opposite to r's."""
    ovf = b.and_(b.not_(_is_finite(b, r)), finite)
    ovf = b.and_(ovf, b.fcmp_ordered("ord", r, r))
    toward = b.select(b.fcmp_ordered(">", r, _c(r.type, 0.0)), _c(err_sign.type, -1), _c(err_sign.type, 1))
    return b.select(ovf, toward, err_sign)


def _all_finite(b, vals):
    f = _is_finite(b, vals[0])
    for v in vals[1:]:
        f = b.and_(f, _is_finite(b, v))
    return f


def _rm_exact_zero(b, r, sign, x, y):
    """Round-down mode: an exact zero sum of x and y is -0 unless both are +0."""
    it = _like(ir.IntType(_bits(r.type)), r)
    zero = b.and_(b.fcmp_ordered("==", r, _c(r.type, 0.0)), b.icmp_signed("==", sign, _c(sign.type, 0)))
    both_pos = b.and_(b.icmp_signed(">=", b.bitcast(x, it), _c(it, 0)), b.icmp_signed(">=", b.bitcast(y, it), _c(it, 0)))
    return b.select(b.and_(zero, b.not_(both_pos)), _c(r.type, -0.0), r)


def _round_pair_f64_to_f32(b, s, e, rnd):
    """The f32 nearest to (rnd) the exact value s + e held as an f64 pair (|e| <= ulp(s)/2)."""
    r = b.fptrunc(s, _like(F32, s))
    if rnd in (None, "rn"):
        return r
    d = b.fsub(s, b.fpext(r, s.type))              # exact: r is within one f32 ulp of s
    sign = _compare_sign(b, b.fadd(d, e), _c(s.type, 0.0))
    sign = _overflow_sign(b, r, sign, _is_finite(b, s))
    return _directed(b, r, sign, rnd)


def _mul_residual_f64(b, a, c, s):
    """(a*c - s) * fa * fc and the powers of two fa, fc (their product may exceed the f64
    range, so they stay apart), for f64: tiny operands are scaled by 2**600
    (exactly) before the error-free product, so the residual does not underflow. Its sign
    is always right; its value is exact unless s is subnormal."""
    f64 = s.type
    small = b.fcmp_ordered("<", fabs(b, s), _c(f64, 2.0 ** -600))
    sa = b.and_(small, b.fcmp_ordered("<", fabs(b, a), _c(f64, 2.0 ** -400)))
    sc = b.and_(small, b.fcmp_ordered("<", fabs(b, c), _c(f64, 2.0 ** -400)))
    big = _c(f64, 2.0 ** 600)
    one = _c(f64, 1.0)
    fa, fc = b.select(sa, big, one), b.select(sc, big, one)
    a2, c2 = b.fmul(a, fa), b.fmul(c, fc)
    s2 = b.fmul(b.fmul(s, fa), fc)
    return _fma(b, a2, c2, b.fneg(s2)), fa, fc


def _mul_residual_sign_f64(b, a, c, s):
    return _compare_sign(b, _mul_residual_f64(b, a, c, s)[0], _c(s.type, 0.0))


def _fma_residual_f64(b, a, c, d, s, p):
    """A value with the sign of a*c + d - s (s = fl(a*c + d), p = fl(a*c) finite), as
    (a*c - p) + (p + d - t2) + (t2 - s) from error-free transformations."""
    e1 = _fma(b, a, c, b.fneg(p))
    t2, e2 = _two_sum(b, p, d)
    x = b.fadd(b.fsub(t2, s), e2)
    err = b.fadd(x, e1)
    # Below about 2**-969 the product's error e1 may underflow (round to zero or to the
    # wrong magnitude). It is then taken from the scaled product and x is scaled alike;
    # an x far above any such error decides alone (and would overflow when scaled).
    res, fa, fc = _mul_residual_f64(b, a, c, p)
    scaled = b.select(b.fcmp_ordered(">=", fabs(b, x), _c(x.type, 2.0 ** -800)), x,
                      b.fadd(b.fmul(b.fmul(x, fa), fc), res))
    return b.select(b.fcmp_ordered("<", fabs(b, p), _c(p.type, 2.0 ** -900)), scaled, err)


def arith_rnd(b, op, vals, rnd):
    """add/sub/mul/fma of f32 or f64 rounded to nearest-even (rn) or directed (.rz/.rm/.rp),
    exactly: the round-to-nearest result is moved one step when the sign of the exact
    residual, found with error-free transformations, says it is on the wrong side."""
    t = vals[0].type
    a, c = vals[0], vals[1]
    if op == "sub":
        op, c = "add", b.fneg(c)
    if rnd in (None, "rn"):
        if op == "fma":
            return _fma(b, a, c, vals[2])
        return b.fadd(a, c) if op == "add" else b.fmul(a, c)
    finite = _all_finite(b, [a, c] + ([vals[2]] if op == "fma" else []))
    if op == "add":
        s, err = _two_sum(b, a, c)
        sign = _overflow_sign(b, s, _compare_sign(b, err, _c(t, 0.0)), finite)
        r = _directed(b, s, sign, rnd)
        return _rm_exact_zero(b, r, sign, a, c) if rnd == "rm" else r
    if t == F32:
        f64 = _like(F64, a)
        a64, c64 = b.fpext(a, f64), b.fpext(c, f64)
        p = b.fmul(a64, c64)                        # exact: 24 x 24 bits
        if op == "mul":
            return _round_pair_f64_to_f32(b, p, _c(f64, 0.0), rnd)
        s, e = _two_sum(b, p, b.fpext(vals[2], f64))
        r = _round_pair_f64_to_f32(b, s, e, rnd)
        if rnd == "rm":
            sign = _compare_sign(b, b.fadd(b.fsub(s, b.fpext(r, f64)), e), _c(f64, 0.0))
            r = _rm_exact_zero(b, r, sign, b.fptrunc(p, t), vals[2])
        return r
    if op == "mul":
        s = b.fmul(a, c)
        sign = _overflow_sign(b, s, _mul_residual_sign_f64(b, a, c, s), finite)
        return _directed(b, s, sign, rnd)
    d = vals[2]
    s = _fma(b, a, c, d)
    p = b.fmul(a, c)
    err = _fma_residual_f64(b, a, c, d, s, p)
    # A product beyond the f64 range can still give a finite sum: the residual is then
    # found at 2**-64 scale (exact for the larger factor, for d and for s, all of which are
    # far from underflow; a d below 2**-900 can only break a tie, so it stays unscaled).
    down = _c(t, 2.0 ** -64)
    a_big = b.fcmp_ordered(">=", fabs(b, a), fabs(b, c))
    a2 = b.select(a_big, b.fmul(a, down), a)
    c2 = b.select(a_big, c, b.fmul(c, down))
    d2 = b.select(b.fcmp_ordered("<", fabs(b, d), _c(t, 2.0 ** -900)), d, b.fmul(d, down))
    s2 = b.fmul(s, down)
    err2 = _fma_residual_f64(b, a2, c2, d2, s2, b.fmul(a2, c2))
    err = b.select(_is_finite(b, p), err, err2)
    sign = _overflow_sign(b, s, _compare_sign(b, err, _c(t, 0.0)), finite)
    r = _directed(b, s, sign, rnd)
    if rnd == "rm":
        r = _rm_exact_zero(b, r, sign, p, d)
    return r


def fadd_rnd(b, op, a, c, rnd):
    """add/sub/mul (op) of two f32 or f64 values with PTX rounding rnd ('rn', 'rz', 'rm', 'rp')."""
    return arith_rnd(b, op, [a, c], rnd)


def ffma_rnd(b, a, c, d, rnd):
    """fma.rnd of f32 or f64: a*c + d rounded once."""
    return arith_rnd(b, "fma", [a, c, d], rnd)


def div(b, a, c, mode, ftz=False):
    """div.approx / div.full / div.rn / .rz / .rm / .rp for f32, and div.rnd for f64.

    div.approx.f32 is a * (1/c): for 2**126 < |c| the reciprocal underflows, so the
    result is 0 (NaN for an infinite a), as the PTX ISA describes. The rounded-to-nearest
    and approximate forms take a warp's vectors too (warp regions)."""
    t = a.type
    f32 = (t.element if isinstance(t, ir.VectorType) else t) == F32
    if ftz and f32:
        a, c = flush_denormal(b, a), flush_denormal(b, c)
    q = b.fdiv(a, c)
    if mode == "approx" and f32:
        huge = b.fcmp_ordered(">", fabs(b, c), _c(t, 2.0 ** 126))
        zero = intrinsic(b, f"llvm.copysign.{_suffix(t)}", t, [_c(t, 0.0), c])
        q = b.select(huge, b.fmul(a, zero), q)
    if mode in ("rz", "rm", "rp"):
        finite = b.and_(_all_finite(b, [a, c]), b.fcmp_ordered("!=", c, _c(t, 0.0)))
        if t == F32:
            # the residual a - q*c, exact in double
            res = _fma(b, b.fneg(b.fpext(q, F64)), b.fpext(c, F64), b.fpext(a, F64))
            rs = _compare_sign(b, res, _c(F64, 0.0))
        else:
            # scale a tiny dividend (and the quotient) by 2**200 so the residual cannot underflow
            tiny = b.fcmp_ordered("<", fabs(b, a), _c(F64, 2.0 ** -900))
            k = b.select(tiny, _c(F64, 2.0 ** 200), _c(F64, 1.0))
            res = _fma(b, b.fneg(b.fmul(q, k)), c, b.fmul(a, k))
            rs = _compare_sign(b, res, _c(F64, 0.0))
        sign = b.select(b.fcmp_ordered("<", c, _c(t, 0.0)), b.neg(rs), rs)
        sign = _overflow_sign(b, q, sign, finite)
        q = _directed(b, q, sign, mode)
    if ftz and f32:
        q = flush_denormal(b, q)
    return q


def _sqrt_rnd(b, x, mode):
    t = x.type
    s = _suffix(t)
    if t == F32:
        v = intrinsic(b, "llvm.sqrt.f32", F32, [x])
        if mode not in ("rz", "rm", "rp"):
            return v
        v64 = b.fpext(v, F64)
        r = _fma(b, b.fneg(v64), v64, b.fpext(x, F64))      # x - v*v, exact in double
        return _directed(b, v, _compare_sign(b, r, _c(F64, 0.0)), mode)
    if mode not in ("rz", "rm", "rp"):
        return intrinsic(b, f"llvm.sqrt.{s}", t, [x])
    # a tiny x is scaled by 2**200 (its root by 2**100) so that the residual stays exact
    tiny = b.fcmp_ordered("<", fabs(b, x), _c(t, 2.0 ** -900))
    xs = b.select(tiny, b.fmul(x, _c(t, 2.0 ** 200)), x)
    v = intrinsic(b, f"llvm.sqrt.{s}", t, [xs])
    r = _fma(b, b.fneg(v), v, xs)
    v = _directed(b, v, _compare_sign(b, r, _c(t, 0.0)), mode)
    return b.select(tiny, b.fmul(v, _c(t, 2.0 ** -100)), v)


def unary(b, opcode, x, mode, ftz):
    """rcp, sqrt, rsqrt, sin, cos, ex2, lg2, tanh of f32 (and f64 where PTX has them).
    mode: 'approx' or a rounding ('rn', 'rz', 'rm', 'rp'). The approximations are computed
    more accurately than PTX promises; special values follow IEEE 754, which is what the
    PTX ISA's tables give (rsqrt(+0) = +Inf, lg2(0) = -Inf, ex2(-Inf) = +0, ...)."""
    t = x.type
    s = _suffix(t)
    f32 = (t.element if isinstance(t, ir.VectorType) else t) == F32
    if ftz and f32:
        x = flush_denormal(b, x)
    one = _c(t, 1.0)
    if opcode == "rcp":
        v = div(b, one, x, mode if mode in ("rz", "rm", "rp") else "rn")
    elif opcode == "sqrt":
        v = _sqrt_rnd(b, x, mode)
    elif opcode == "rsqrt":
        v = b.fdiv(one, intrinsic(b, f"llvm.sqrt.{s}", t, [x]))
    elif opcode in ("sin", "cos"):
        v = intrinsic(b, f"llvm.{opcode}.{s}", t, [x])
    elif opcode == "ex2":
        v = _ex2_f32(b, x) if f32 else intrinsic(b, f"llvm.exp2.{s}", t, [x])
    elif opcode == "lg2":
        v = intrinsic(b, f"llvm.log2.{s}", t, [x])
    elif opcode == "tanh":
        v = _tanh_f32(b, x) if f32 else intrinsic(b, f"llvm.tanh.{s}", t, [x])
    else:
        raise ValueError(opcode)
    if ftz and f32:
        v = flush_denormal(b, v)
    return v


# ln(2)**k / k! for k = 0..7: the Taylor series of 2**f for |f| <= 1/2, truncated below a
# relative 6e-9 (a tenth of an f32 ulp)
_EX2_TAYLOR = [math.log(2.0) ** k / math.factorial(k) for k in range(8)]


def _ex2_f32(b, x):
    """2**x for f32 as straight-line f32 arithmetic rather than a libm call, so that a loop
    over threads around it vectorises at full width (softmax's expf is ex2.approx.ftz.f32):
    2**x = 2**n * 2**f with n = rint(x), |f| <= 1/2, the polynomial by fused multiply-adds,
    the scaling in two exact-or-final steps so that a subnormal result rounds once. Within
    two ulps of 2**x (PTX promises 2**-22 relative). Outside [-160, 130] the result is 0 or
    +Inf either way."""
    f32, i32 = x.type, _like(I32, x)         # (a vector in warp regions and block programs)
    d = b.select(b.fcmp_ordered(">", x, _c(f32, 130.0)), _c(f32, 130.0), x)
    d = b.select(b.fcmp_ordered("<", d, _c(f32, -160.0)), _c(f32, -160.0), d)
    n = intrinsic(b, f"llvm.rint.{_suffix(f32)}", f32, [d])
    f = b.fsub(d, n)
    p = _c(f32, _EX2_TAYLOR[-1])
    for coeff in reversed(_EX2_TAYLOR[:-1]):
        p = _fma(b, p, f, _c(f32, coeff))
    k = b.fptosi(n, i32)
    half = b.ashr(k, _c(i32, 1))
    scale = lambda e: b.bitcast(b.shl(b.add(e, _c(i32, 127)), _c(i32, 23)), f32)
    r = b.fmul(b.fmul(p, scale(half)), scale(b.sub(k, half)))
    return b.select(is_nan(b, x), x, r)


# tanh's Taylor series, x + x^3 * (c3 + x^2 * (c5 + ...)): below |x| = 1/2 the first term left
# out is under 3e-7 of x
_TANH_TAYLOR = (-1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925)
_TANH_SERIES_BELOW = 0.5


def _tanh_f32(b, x):
    """tanh of f32 as straight-line f32 arithmetic, as _ex2_f32 for the same reason: -use_fast_math
    makes tanhf one tanh.approx.f32 (llm.c's GELU), which as LLVM's tanh was a libm call per lane
    (a grid-stride GELU 428 ms against 17 built without fast math). Of |x|: below 1/2 the
    Taylor series, above it 1 - 2 / (e^2|x| + 1) (1 for an infinite x, NaN for NaN); then x's
    sign (-0 for -0): within 1e-6 of tanh (PTX promises 2^-10.99 relative)."""
    f32 = x.type
    a = fabs(b, x)
    a2 = b.fmul(a, a)
    poly = _c(f32, _TANH_TAYLOR[-1])
    for coeff in reversed(_TANH_TAYLOR[:-1]):
        poly = _fma(b, poly, a2, _c(f32, coeff))
    series = _fma(b, b.fmul(a, a2), poly, a)
    e = _ex2_f32(b, b.fmul(a, _c(f32, 2.0 / math.log(2.0))))
    far = b.fsub(_c(f32, 1.0), b.fdiv(_c(f32, 2.0), b.fadd(e, _c(f32, 1.0))))
    magnitude = b.select(b.fcmp_ordered("<", a, _c(f32, _TANH_SERIES_BELOW)), series, far)
    return intrinsic(b, f"llvm.copysign.{_suffix(f32)}", f32, [magnitude, x])


def rcp(b, x, mode="rn", ftz=False):
    return unary(b, "rcp", x, mode, ftz)


def sqrt(b, x, mode="rn", ftz=False):
    return unary(b, "sqrt", x, mode, ftz)


def rsqrt(b, x, ftz=False):
    return unary(b, "rsqrt", x, "approx", ftz)


def sin_approx(b, x, ftz=False):
    return unary(b, "sin", x, "approx", ftz)


def cos_approx(b, x, ftz=False):
    return unary(b, "cos", x, "approx", ftz)


def ex2_approx(b, x, ftz=False):
    return unary(b, "ex2", x, "approx", ftz)


def lg2_approx(b, x, ftz=False):
    return unary(b, "lg2", x, "approx", ftz)


def tanh_approx(b, x, ftz=False):
    return unary(b, "tanh", x, "approx", ftz)


_CANONICAL_NAN = {"half": HALF_NAN, "float": 0x7FFFFFFF}


def _canonical_nan(b, v):
    """PTX min/max give the canonical NaN (all payload bits set) for f32 and f16; f64 keeps
    LLVM's quiet NaN."""
    bits = _CANONICAL_NAN.get(str(v.type))
    if bits is None:
        return v
    it = ir.IntType(_bits(v.type))
    return b.select(is_nan(b, v), b.bitcast(_c(it, bits), v.type), v)


def _minmax(b, name, a, c, nan, ftz):
    if ftz and a.type == F32:
        a, c = flush_denormal(b, a), flush_denormal(b, c)
    # minimumnum/maximumnum: a NaN operand gives the other; minimum/maximum propagate NaN;
    # both order -0 below +0
    fn = f"llvm.{name}" if nan else f"llvm.{name}num"
    return _canonical_nan(b, intrinsic(b, f"{fn}.{_suffix(a.type)}", a.type, [a, c]))


def fmin(b, a, c, nan, ftz):
    return _minmax(b, "minimum", a, c, nan, ftz)


def fmax(b, a, c, nan, ftz):
    return _minmax(b, "maximum", a, c, nan, ftz)


def copysign(b, a, c):
    """PTX copysign d, a, b: the magnitude of b with the sign of a."""
    return intrinsic(b, f"llvm.copysign.{_suffix(c.type)}", c.type, [c, a])


def testp(b, x, kind):
    t = x.type
    ax = fabs(b, x)
    inf = _c(t, float("inf"))
    tiny = {"half": 2.0 ** -14, "float": 2.0 ** -126, "double": 2.0 ** -1022}[str(t)]
    if kind == "finite":
        return b.fcmp_ordered("<", ax, inf)
    if kind == "infinite":
        return b.fcmp_ordered("==", ax, inf)
    if kind == "number":
        return b.fcmp_ordered("ord", x, x)
    if kind == "notanumber":
        return b.fcmp_unordered("uno", x, x)
    if kind == "normal":
        # Zero counts as normal here, unlike IEEE 754 and C's isnormal. Evidence: the PTX
        # ISA's testp section (9.7.3.1), after ".normal: True if the input is a normal
        # number (not NaN, not infinity)", says "As a special case, positive and negative
        # zero are considered normal numbers."; independent PTX simulators follow it;
        # LLVM's NVPTX backend never emits testp.normal for isnormal (it selects testp
        # only for |x| == inf), so no compiler relies on the C meaning; a published SASS
        # listing of testp.normal.f32 on Blackwell (ISETP.GE + ISETP.EQ + SEL) has an
        # equality test besides the range test, as a zero special case would (weak
        # evidence). Not yet measured on a GPU by this project.
        normal = b.and_(b.fcmp_ordered("<", ax, inf), b.fcmp_ordered(">=", ax, _c(t, tiny)))
        return b.or_(normal, b.fcmp_ordered("==", ax, _c(t, 0.0)))
    if kind == "subnormal":
        return b.and_(b.fcmp_ordered(">", ax, _c(t, 0.0)), b.fcmp_ordered("<", ax, _c(t, tiny)))
    raise ValueError(kind)


# ---------------------------------------------------------------- bf16 and packed pairs

# The half-precision functions below take scalars or vectors (the warp regions' lanes) alike.

def _is_half(v):
    """Whether v is an f16 value or a vector of them."""
    t = v.type
    return (t.element if isinstance(t, ir.VectorType) else t) == F16


def bf16_to_f32(b, bits):
    i32 = _like(I32, bits)
    return b.bitcast(b.shl(b.zext(bits, i32), _c(i32, 16)), _like(F32, bits))


def f32_to_bf16(b, x, rnd="rn"):
    i32, i16 = _like(I32, x), _like(I16, x)
    bits = b.bitcast(x, i32)
    nan = is_nan(b, x)
    if rnd in (None, "rn"):
        lsb = b.and_(b.lshr(bits, _c(i32, 16)), _c(i32, 1))
        rounded = b.add(bits, b.add(_c(i32, 0x7FFF), lsb))
        res = b.trunc(b.lshr(rounded, _c(i32, 16)), i16)
    else:
        trunc = b.trunc(b.lshr(bits, _c(i32, 16)), i16)
        rest = b.icmp_unsigned("!=", b.and_(bits, _c(i32, 0xFFFF)), _c(i32, 0))
        neg = b.icmp_signed("<", bits, _c(i32, 0))
        if rnd == "rz":
            res = trunc
        else:
            away = b.and_(rest, neg if rnd == "rm" else b.not_(neg))
            res = b.select(away, b.add(trunc, _c(i16, 1)), trunc)
            # the step can reach infinity correctly since bf16 shares f32's exponent
    return b.select(nan, _c(i16, HALF_NAN), res)


def _to_f32(b, v, t):
    if t == "bf16":
        return bf16_to_f32(b, v)
    return b.fpext(v, _like(F32, v)) if _is_half(v) else v


def f64_to_f32_odd(b, x64):
    """f64 -> f32 rounding to odd: truncate, then set the last bit if anything was lost. A
    second rounding of this result (to bf16) is then as exact as a single one would be."""
    f32, i32 = _like(F32, x64), _like(I32, x64)
    r = b.fptrunc(x64, f32)
    back = b.fpext(r, x64.type)
    rz = _directed(b, r, _sign_of_diff(b, x64, back), "rz")
    inexact = b.fcmp_ordered("!=", b.fpext(rz, x64.type), x64)
    finite = b.fcmp_ordered("<", fabs(b, rz), _c(f32, float("inf")))
    odd = b.bitcast(b.or_(b.bitcast(rz, i32), _c(i32, 1)), f32)
    return b.select(b.and_(inexact, finite), odd, rz)


def _from_f64(b, x64, t, rnd="rn"):
    if t == "bf16":
        # rounding to odd first keeps every later rounding (nearest or directed) exact
        return f32_to_bf16(b, f64_to_f32_odd(b, x64), rnd)
    if t == "f32":
        return _round_f64_to(b, x64, F32, rnd)
    return canonical_half_nan(b, _round_f64_to(b, x64, F16, rnd))


def canonical_half_nan(b, h):
    """An f16 result that is NaN as the GPU writes it: 0x7FFF, whatever the operands' NaNs
    were (an H200 gives that for every f16 and bf16 operation and conversion that makes
    one)."""
    return b.select(is_nan(b, h), b.bitcast(_c(_like(I16, h), HALF_NAN), h.type), h)


def unpack2(b, v, elem="b16"):
    """The two 16-bit halves (element 0 = low half) of a packed i32: as `half` for
    elem='f16', else as i16 bits (bf16)."""
    i16 = _like(I16, v)
    lo = b.trunc(v, i16)
    hi = b.trunc(b.lshr(v, _c(v.type, 16)), i16)
    if elem == "f16":
        return b.bitcast(lo, _like(F16, v)), b.bitcast(hi, _like(F16, v))
    return lo, hi


def pack2(b, lo, hi):
    lo = b.bitcast(lo, _like(I16, lo)) if _is_half(lo) else lo
    hi = b.bitcast(hi, _like(I16, hi)) if _is_half(hi) else hi
    i32 = _like(I32, lo)
    return b.or_(b.zext(lo, i32), b.shl(b.zext(hi, i32), _c(i32, 16)))


def _pair_to_odd(b, s, e):
    """The exact value s + e (an f64 TwoSum pair) rounded to odd in f64."""
    i64 = _like(I64, s)
    bits = b.bitcast(s, i64)
    even = b.icmp_unsigned("==", b.and_(bits, _c(i64, 1)), _c(i64, 0))
    inexact = b.fcmp_ordered("!=", e, _c(e.type, 0.0))
    # s and e with the same sign: step away from zero, else toward it
    same = b.icmp_signed(">=", b.xor(bits, b.bitcast(e, i64)), _c(i64, 0))
    moved = b.select(same, b.add(bits, _c(i64, 1)), b.sub(bits, _c(i64, 1)))
    ok = b.and_(b.and_(even, inexact), _is_finite(b, s))
    return b.bitcast(b.select(ok, moved, bits), s.type)


def _scalar_half(b, op, vals, t, rnd, sat, relu):
    f = [b.fpext(_to_f32(b, v, t), _like(F64, v)) for v in vals]
    if op == "fma" and t == "bf16":
        # a*b is exact in double but a*b + c may not be (bf16 spans f32's exponents): the
        # exact pair rounded to odd keeps the final rounding the only one; .sat and .relu
        # commute with that monotone, sign-keeping step
        s, e = _two_sum(b, b.fmul(f[0], f[1]), f[2])
        x = _pair_to_odd(b, s, e)
    elif op in ("add", "sub", "mul", "fma"):
        x = _f64_arith(b, op, f)
    elif op in ("min", "max", "min_nan", "max_nan"):
        fn = fmin if op.startswith("min") else fmax
        x = fn(b, f[0], f[1], op.endswith("nan"), False)
    elif op == "neg":
        x = b.fneg(f[0])
    elif op == "abs":
        x = fabs(b, f[0])
    else:
        x = b.fpext(unary(b, op, b.fptrunc(f[0], _like(F32, f[0])), "approx", False), f[0].type)
    if sat:
        x = saturate(b, x)
    if relu:
        x = b.select(b.fcmp_ordered("<", x, _c(x.type, 0.0)), _c(x.type, 0.0), x)
    return _from_f64(b, x, t, rnd or "rn")


def half_arith(b, op, vals, t, rnd, ftz, sat, relu):
    """Arithmetic on f16, bf16 and their packed pairs, computed in f64 and rounded once."""
    if t in ("f16", "bf16"):
        if op in ("neg", "abs"):
            i16 = _like(I16, vals[0])
            it = b.bitcast(vals[0], i16) if _is_half(vals[0]) else vals[0]
            r = b.xor(it, _c(i16, 0x8000)) if op == "neg" else b.and_(it, _c(i16, 0x7FFF))
            # a NaN comes out as the GPU's NaN (an H200 writes 0x7FFF for neg and abs too)
            inf = 0x7C00 if t == "f16" else 0x7F80
            nan = b.icmp_unsigned(">", b.and_(it, _c(i16, 0x7FFF)), _c(i16, inf))
            r = b.select(nan, _c(i16, HALF_NAN), r)
            return b.bitcast(r, _like(F16, r)) if t == "f16" else r
        return _scalar_half(b, op, vals, t, rnd, sat, relu)
    elem = t[:-2]
    parts = [unpack2(b, v, elem) for v in vals]
    lo = half_arith(b, op, [p[0] for p in parts], elem, rnd, ftz, sat, relu)
    hi = half_arith(b, op, [p[1] for p in parts], elem, rnd, ftz, sat, relu)
    return pack2(b, lo, hi)


def cvt_pack2(b, hi, lo, dst, rnd, relu, satfinite):
    """cvt.rnd{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, hi, lo: hi (PTX's first source)
    lands in the upper half; each half as cvt_half makes it."""
    elem = dst[:-2]
    return pack2(b, cvt_half(b, lo, elem, rnd, relu, satfinite), cvt_half(b, hi, elem, rnd, relu, satfinite))


def cvt_half(b, x, elem, rnd, relu, satfinite):
    """cvt.rnd{.relu}{.satfinite}.{f16,bf16}.f32 of x: .relu clamps negatives to +0 and gives
    the canonical NaN for NaN; .satfinite clamps to the largest finite value (NaN stays NaN)."""
    big = 65504.0 if elem == "f16" else float.fromhex("0x1.fep127")
    x64 = b.fpext(x, F64) if x.type == F32 else x
    nan = is_nan(b, x64)
    if relu:    # negatives and -0 become +0
        x64 = b.select(b.fcmp_ordered("<=", x64, _c(F64, 0.0)), _c(F64, 0.0), x64)
    if satfinite:
        x64 = b.select(b.fcmp_ordered(">", x64, _c(F64, big)), _c(F64, big), x64)
        x64 = b.select(b.fcmp_ordered("<", x64, _c(F64, -big)), _c(F64, -big), x64)
    r = _from_f64(b, x64, elem, rnd or "rn")
    if relu:
        bits = b.bitcast(r, I16) if elem == "f16" else r
        bits = b.select(nan, _c(I16, HALF_NAN), bits)
        r = b.bitcast(bits, F16) if elem == "f16" else bits
    return r


# ---------------------------------------------------------------- cvt

def _int_range(t):
    w = _width(t)
    if t.startswith("s"):
        return -(1 << (w - 1)), (1 << (w - 1)) - 1
    return 0, (1 << w) - 1


def cvt(b, v, dst, src, rnd, sat, ftz):
    src_float = src in ("f16", "f32", "f64", "bf16")
    dst_float = dst in ("f16", "f32", "f64", "bf16")
    if src_float and ftz and src == "f32":
        v = flush_denormal(b, v)
    if src_float and dst_float:
        r = _float_to_float(b, v, dst, src, rnd)
        if ftz and src == "f32" and dst == "f64":      # the GPU's f32 NaN, widened
            r = b.select(is_nan(b, v), b.bitcast(_c(I64, 0x7FFFFFFFE0000000), F64), r)
        if sat:
            r = _saturate_to(b, r, dst)
        if ftz and dst == "f32":
            r = flush_denormal(b, r)
        return r
    if src_float:
        return _float_to_int(b, v, dst, src, rnd)
    if dst_float:
        r = _int_to_float(b, v, dst, src, rnd)
        return _saturate_to(b, r, dst) if sat else r
    return _int_to_int(b, v, dst, src, sat)


def _saturate_to(b, r, dst):
    """r, a value of float type `dst`, clamped to [0, 1] (.sat)."""
    return saturate(b, r) if dst != "bf16" else f32_to_bf16(b, saturate(b, bf16_to_f32(b, r)))


def _float_to_float(b, v, dst, src, rnd):
    if src == "bf16":
        v, src = bf16_to_f32(b, v), "f32"
    if dst == "bf16":
        if rnd in ("rni", "rzi", "rmi", "rpi"):
            v = _float_to_float(b, v, src, src, rnd)
            rnd = None
        if v.type == F64:
            return _from_f64(b, v, "bf16", rnd or "rn")
        return f32_to_bf16(b, b.fpext(v, F32) if v.type == F16 else v, rnd or "rn")
    st, dt = _ftype(src), _ftype(dst)
    if rnd in ("rni", "rzi", "rmi", "rpi"):
        name = {"rni": "llvm.rint", "rzi": "llvm.trunc", "rmi": "llvm.floor", "rpi": "llvm.ceil"}[rnd]
        v = intrinsic(b, f"{name}.{_suffix(st)}", st, [v])
        rnd = None
    if _bits(st) == _bits(dt):
        return v
    if _bits(st) < _bits(dt):
        return b.fpext(v, dt)
    r = _narrowed(b, v, st, dt, rnd)
    return canonical_half_nan(b, r) if dt == F16 else r


def _narrowed(b, v, st, dt, rnd):
    if rnd in (None, "rn"):
        return b.fptrunc(v, dt)
    x64 = b.fpext(v, F64) if st != F64 else v
    if dt == F16 and st == F64:
        r = b.fptrunc(v, F16)
        return _directed(b, r, _sign_of_diff(b, v, b.fpext(r, F64)), rnd)
    return _round_f64_to(b, x64, dt, rnd)


def _float_to_int(b, v, dst, src, rnd):
    if src == "bf16":
        v = bf16_to_f32(b, v)
    elif src == "f16":
        v = b.fpext(v, F32)
    t = v.type
    name = {"rni": "llvm.rint", "rn": "llvm.rint", "rzi": "llvm.trunc", "rz": "llvm.trunc",
            "rmi": "llvm.floor", "rm": "llvm.floor", "rpi": "llvm.ceil", "rp": "llvm.ceil",
            None: "llvm.trunc"}[rnd]
    r = intrinsic(b, f"{name}.{_suffix(t)}", t, [v])
    it = ir.IntType(_width(dst))
    conv = "fptosi" if dst.startswith("s") else "fptoui"
    res = intrinsic(b, f"llvm.{conv}.sat.i{it.width}.{_suffix(t)}", it, [r])
    nan = nan_as_int(t, it)
    return res if nan == 0 else b.select(is_nan(b, v), _c(it, nan), res)


def nan_as_int(source, dest):
    """What an NVIDIA GPU writes for a NaN converted to an integer (read off an H200, the
    same for every rounding mode, signed or not): 0 from f32 (and f16, bf16) into 32 bits
    or fewer, else the destination's sign bit alone, 0x80000000 from f64 into 32 bits,
    0x8000000000000000 into 64 bits. A narrower destination from f64 keeps the low bits
    of 0x80000000: 0."""
    if dest.width == 64 or (source == F64 and dest.width == 32):
        return -(1 << (dest.width - 1))
    return 0


def _int_to_float(b, v, dst, src, rnd):
    signed = src.startswith("s")
    if dst == "bf16":
        f = b.sitofp(v, F64) if signed else b.uitofp(v, F64)
        if v.type.width > 52:
            # the exact integer minus its nearest double, to round that double to odd
            wide = b.sext(v, I128) if signed else b.zext(v, I128)
            back = intrinsic(b, "llvm.fptosi.sat.i128.f64", I128, [f])
            err = b.sitofp(b.sub(wide, back), F64)
            f = _pair_to_odd(b, f, err)
        return _from_f64(b, f, "bf16", rnd)
    dt = _ftype(dst)
    r = b.sitofp(v, dt) if signed else b.uitofp(v, dt)
    if rnd in (None, "rn"):
        return r
    # the exact integer minus the rounded value, compared in 128 bits
    wide = b.sext(v, I128) if signed else b.zext(v, I128)
    back = intrinsic(b, f"llvm.fptosi.sat.i128.{_suffix(dt)}", I128, [r])
    sign = b.select(b.icmp_signed(">", wide, back), _c(I32, 1),
                    b.select(b.icmp_signed("<", wide, back), _c(I32, -1), _c(I32, 0)))
    return _directed(b, r, sign, rnd)


def _int_to_int(b, v, dst, src, sat):
    dt = ir.IntType(_width(dst))
    signed = src.startswith("s")
    if sat:
        lo, hi = _int_range(dst)
        wide = ir.IntType(max(v.type.width, dt.width) + 1)
        x = b.sext(v, wide) if signed else b.zext(v, wide)
        x = b.select(b.icmp_signed("<", x, _c(wide, lo)), _c(wide, lo), x)
        x = b.select(b.icmp_signed(">", x, _c(wide, hi)), _c(wide, hi), x)
        return b.trunc(x, dt)
    if v.type.width == dt.width:
        return v
    if v.type.width > dt.width:
        return b.trunc(v, dt)
    return b.sext(v, dt) if signed else b.zext(v, dt)


# ---------------------------------------------------------------- types and packed helpers

def llvm_type(ptx_type: str) -> ir.Type:
    """The LLVM type holding a PTX value: f16 -> half, f32 -> float, f64 -> double, pred ->
    i1; bf16, the packed pairs, e4m3/e5m2 and integers -> an integer of their width."""
    if ptx_type == "pred":
        return I1
    if ptx_type in ("f16", "f32", "f64"):
        return _ftype(ptx_type)
    if ptx_type in ("e4m3", "e5m2"):
        return I8
    if ptx_type in ("e4m3x2", "e5m2x2"):
        return I16
    return ir.IntType(_width(ptx_type))


def halfx2_binop(b, op, a, c, kind, d=None, rnd="rn", ftz=False, sat=False, relu=False):
    """op ('add', 'sub', 'mul', 'fma', 'min', 'max', 'min_nan', 'max_nan', 'neg', 'abs') on
    both halves of packed f16x2 / bf16x2 values (kind 'f16' or 'bf16'), each rounded once."""
    vals = [a] if op in ("neg", "abs") else ([a, c, d] if op == "fma" else [a, c])
    return half_arith(b, op, vals, kind + "x2", rnd, ftz, sat, relu)


def cvt_f16x2_f32(b, a, c, kind="f16", rnd="rn", relu=False, satfinite=False):
    """cvt.rn{.relu}{.satfinite}.f16x2.f32 d, a, b (and bf16x2): a goes to the UPPER half,
    b to the lower half (PTX ISA)."""
    return cvt_pack2(b, a, c, kind + "x2", rnd, relu, satfinite)


def cvt_rna_tf32(b, x):
    """cvt.rna.tf32.f32: x rounded to tf32's 10 mantissa bits, to nearest with ties away
    from zero, as an f32 bit pattern whose low 13 bits are zero (i32). Adding half a unit
    of the 13 dropped bits to the magnitude and clearing them is that rounding, a carry
    into the exponent included (the largest values round to infinity); an infinity stays
    one, and a NaN becomes the canonical NaN 0x7FFFFFFF."""
    count = getattr(x.type, "count", None)            # (a warp's lanes: a vector of them)
    ty = ir.VectorType(I32, count) if count else I32
    bits = b.bitcast(x, ty)
    rounded = b.and_(b.add(bits, ir.Constant(ty, 0x1000)), ir.Constant(ty, ~0x1FFF & 0xFFFFFFFF))
    special = b.icmp_unsigned("==", b.and_(bits, ir.Constant(ty, 0x7F800000)), ir.Constant(ty, 0x7F800000))
    nan = b.icmp_unsigned("!=", b.and_(bits, ir.Constant(ty, 0x7FFFFF)), ir.Constant(ty, 0))
    return b.select(special, b.select(nan, ir.Constant(ty, 0x7FFFFFFF), bits), rounded)
