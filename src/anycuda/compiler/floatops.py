"""Float instructions, conversions and 16-bit float formats with PTX semantics."""
from llvmlite import ir

from .irutil import intrinsic

I1, I8, I16, I32, I64, I128 = (ir.IntType(n) for n in (1, 8, 16, 32, 64, 128))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
_FLOAT_BITS = {"half": 16, "float": 32, "double": 64}


def _c(t, v):
    if isinstance(t, ir.IntType):
        return ir.Constant(t, v & ((1 << t.width) - 1))
    return ir.Constant(t, v)


def _suffix(t):
    return {"half": "f16", "float": "f32", "double": "f64"}[str(t)]


def _bits(t):
    return _FLOAT_BITS[str(t)]


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
    tiny = {"half": 2.0 ** -14, "float": 2.0 ** -126, "double": 2.0 ** -1022}[str(x.type)]
    small = b.fcmp_ordered("<", fabs(b, x), _c(x.type, tiny))
    zero = intrinsic(b, f"llvm.copysign.{_suffix(x.type)}", x.type, [_c(x.type, 0.0), x])
    return b.select(small, zero, x)


def nudge(b, x, up):
    """The next representable value above (up=True) or below x."""
    it = ir.IntType(_bits(x.type))
    bits = b.bitcast(x, it)
    is_zero = b.fcmp_ordered("==", x, _c(x.type, 0.0))
    positive = b.icmp_signed(">=", bits, _c(it, 0))
    toward_mag = b.icmp_unsigned("==", b.zext(positive, I8), _c(I8, 1 if up else 0))
    moved = b.select(toward_mag, b.add(bits, _c(it, 1)), b.sub(bits, _c(it, 1)))
    sign = 1 << (it.width - 1)
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
    pos_err = b.icmp_signed(">", err_sign, _c(I32, 0))
    neg_err = b.icmp_signed("<", err_sign, _c(I32, 0))
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
    return b.select(gt, _c(I32, 1), b.select(lt, _c(I32, -1), _c(I32, 0)))


def _sign_of_diff(b, exact, approx):
    """The sign of exact - approx."""
    return _compare_sign(b, exact, approx)


def _round_f64_to(b, x64, dst, rnd):
    """Round an f64 value to f32/f16 in direction rnd (exact residual in f64)."""
    r = b.fptrunc(x64, dst)
    if rnd in (None, "rn"):
        return r
    back = b.fpext(r, F64)
    return _directed(b, r, _sign_of_diff(b, x64, back), rnd)


def _f64_arith(b, op, w):
    """add/sub/mul/fma in double precision (exact for operands of 24 bits or fewer, except fma)."""
    if op == "fma":
        return intrinsic(b, "llvm.fma.f64", F64, w)
    return {"add": b.fadd, "sub": b.fsub, "mul": b.fmul}[op](w[0], w[1])


def arith_rnd(b, op, vals, rnd):
    """add/sub/mul/fma of f32 or f64 with directed rounding (.rz/.rm/.rp)."""
    t = vals[0].type
    if t == F32:
        return _round_f64_to(b, _f64_arith(b, op, [b.fpext(v, F64) for v in vals]), F32, rnd)
    a, c = vals[0], vals[1]
    if op in ("add", "sub"):
        if op == "sub":
            c = b.fneg(c)
        s = b.fadd(a, c)
        bb = b.fsub(s, a)
        err = b.fadd(b.fsub(a, b.fsub(s, bb)), b.fsub(c, bb))
    elif op == "mul":
        s = b.fmul(a, c)
        err = intrinsic(b, "llvm.fma.f64", F64, [a, c, b.fneg(s)])
    else:
        s = intrinsic(b, "llvm.fma.f64", F64, vals)
        # residual of a*b+c - s: (a*b - p) + (p + c - s) with p = fl(a*b), error-free parts
        p = b.fmul(a, c)
        e1 = intrinsic(b, "llvm.fma.f64", F64, [a, c, b.fneg(p)])
        t2 = b.fadd(p, vals[2])
        bb = b.fsub(t2, p)
        e2 = b.fadd(b.fsub(p, b.fsub(t2, bb)), b.fsub(vals[2], bb))
        err = b.fadd(b.fadd(b.fsub(t2, s), e2), e1)
    return _directed(b, s, _compare_sign(b, err, _c(F64, 0.0)), rnd)


def div(b, a, c, mode):
    q = b.fdiv(a, c)
    if mode in ("approx", "full", "rn", None):
        return q
    fma = f"llvm.fma.{_suffix(a.type)}"
    r = intrinsic(b, fma, a.type, [b.fneg(q), c, a])     # exact remainder a - q*c
    rs = _compare_sign(b, r, _c(a.type, 0.0))
    sign = b.select(b.fcmp_ordered("<", c, _c(a.type, 0.0)), b.neg(rs), rs)
    return _directed(b, q, sign, mode)


def unary(b, opcode, x, mode, ftz):
    t = x.type
    s = _suffix(t)
    if ftz and t == F32:
        x = flush_denormal(b, x)
    one = _c(t, 1.0)
    if opcode == "rcp":
        v = div(b, one, x, mode if mode not in ("approx",) else "rn")
    elif opcode == "sqrt":
        v = intrinsic(b, f"llvm.sqrt.{s}", t, [x])
        if mode in ("rz", "rm", "rp"):
            r = intrinsic(b, f"llvm.fma.{s}", t, [b.fneg(v), v, x])
            v = _directed(b, v, _compare_sign(b, r, _c(t, 0.0)), mode)
    elif opcode == "rsqrt":
        v = b.fdiv(one, intrinsic(b, f"llvm.sqrt.{s}", t, [x]))
    elif opcode in ("sin", "cos"):
        v = intrinsic(b, f"llvm.{opcode}.{s}", t, [x])
    elif opcode == "ex2":
        v = intrinsic(b, f"llvm.exp2.{s}", t, [x])
    elif opcode == "lg2":
        v = intrinsic(b, f"llvm.log2.{s}", t, [x])
    elif opcode == "tanh":
        v = intrinsic(b, f"llvm.tanh.{s}", t, [x])
    else:
        raise ValueError(opcode)
    if ftz and t == F32:
        v = flush_denormal(b, v)
    return v


def fmin(b, a, c, nan, ftz):
    name = "llvm.minimum" if nan else "llvm.minimumnum"
    return intrinsic(b, f"{name}.{_suffix(a.type)}", a.type, [a, c])


def fmax(b, a, c, nan, ftz):
    name = "llvm.maximum" if nan else "llvm.maximumnum"
    return intrinsic(b, f"{name}.{_suffix(a.type)}", a.type, [a, c])


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
        return b.and_(b.fcmp_ordered("<", ax, inf), b.fcmp_ordered(">=", ax, _c(t, tiny)))
    if kind == "subnormal":
        return b.and_(b.fcmp_ordered(">", ax, _c(t, 0.0)), b.fcmp_ordered("<", ax, _c(t, tiny)))
    raise ValueError(kind)


# ---------------------------------------------------------------- bf16 and packed pairs

def bf16_to_f32(b, bits):
    return b.bitcast(b.shl(b.zext(bits, I32), _c(I32, 16)), F32)


def f32_to_bf16(b, x, rnd="rn"):
    bits = b.bitcast(x, I32)
    nan = is_nan(b, x)
    if rnd in (None, "rn"):
        lsb = b.and_(b.lshr(bits, _c(I32, 16)), _c(I32, 1))
        rounded = b.add(bits, b.add(_c(I32, 0x7FFF), lsb))
        res = b.trunc(b.lshr(rounded, _c(I32, 16)), I16)
    else:
        trunc = b.trunc(b.lshr(bits, _c(I32, 16)), I16)
        rest = b.icmp_unsigned("!=", b.and_(bits, _c(I32, 0xFFFF)), _c(I32, 0))
        neg = b.icmp_signed("<", bits, _c(I32, 0))
        if rnd == "rz":
            res = trunc
        else:
            away = b.and_(rest, neg if rnd == "rm" else b.not_(neg))
            res = b.select(away, b.add(trunc, _c(I16, 1)), trunc)
            # the step can reach infinity correctly since bf16 shares f32's exponent
    return b.select(nan, b.or_(b.trunc(b.lshr(bits, _c(I32, 16)), I16), _c(I16, 0x40)), res)


def _to_f32(b, v, t):
    if t == "bf16":
        return bf16_to_f32(b, v)
    return b.fpext(v, F32) if v.type == F16 else v


def f64_to_f32_odd(b, x64):
    """f64 -> f32 rounding to odd: truncate, then set the last bit if anything was lost. A
    second rounding of this result (to bf16) is then as exact as a single one would be."""
    r = b.fptrunc(x64, F32)
    back = b.fpext(r, F64)
    rz = _directed(b, r, _sign_of_diff(b, x64, back), "rz")
    inexact = b.fcmp_ordered("!=", b.fpext(rz, F64), x64)
    finite = b.fcmp_ordered("<", fabs(b, rz), _c(F32, float("inf")))
    odd = b.bitcast(b.or_(b.bitcast(rz, I32), _c(I32, 1)), F32)
    return b.select(b.and_(inexact, finite), odd, rz)


def _from_f64(b, x64, t, rnd="rn"):
    if t == "bf16":
        x32 = f64_to_f32_odd(b, x64) if rnd in (None, "rn") else b.fptrunc(x64, F32)
        return f32_to_bf16(b, x32, rnd)
    return _round_f64_to(b, x64, F16, rnd)


def unpack2(b, v, elem):
    lo = b.trunc(v, I16)
    hi = b.trunc(b.lshr(v, _c(I32, 16)), I16)
    if elem == "f16":
        return b.bitcast(lo, F16), b.bitcast(hi, F16)
    return lo, hi


def pack2(b, lo, hi):
    lo = b.bitcast(lo, I16) if lo.type == F16 else lo
    hi = b.bitcast(hi, I16) if hi.type == F16 else hi
    return b.or_(b.zext(lo, I32), b.shl(b.zext(hi, I32), _c(I32, 16)))


def _scalar_half(b, op, vals, t, rnd, sat, relu):
    f = [b.fpext(_to_f32(b, v, t), F64) for v in vals]
    if op in ("add", "sub", "mul", "fma"):
        x = _f64_arith(b, op, f)
    elif op in ("min", "max", "min_nan", "max_nan"):
        fn = fmin if op.startswith("min") else fmax
        x = fn(b, f[0], f[1], op.endswith("nan"), False)
    elif op == "neg":
        x = b.fneg(f[0])
    elif op == "abs":
        x = fabs(b, f[0])
    else:
        x = b.fpext(unary(b, op, b.fptrunc(f[0], F32), "approx", False), F64)
    if sat:
        x = saturate(b, x)
    if relu:
        x = b.select(b.fcmp_ordered("<", x, _c(F64, 0.0)), _c(F64, 0.0), x)
    return _from_f64(b, x, t, rnd or "rn")


def half_arith(b, op, vals, t, rnd, ftz, sat, relu):
    """Arithmetic on f16, bf16 and their packed pairs, computed in f64 and rounded once."""
    if t in ("f16", "bf16"):
        if op in ("neg", "abs"):
            it = b.bitcast(vals[0], I16) if vals[0].type == F16 else vals[0]
            r = b.xor(it, _c(I16, 0x8000)) if op == "neg" else b.and_(it, _c(I16, 0x7FFF))
            return b.bitcast(r, F16) if t == "f16" else r
        return _scalar_half(b, op, vals, t, rnd, sat, relu)
    elem = t[:-2]
    parts = [unpack2(b, v, elem) for v in vals]
    lo = half_arith(b, op, [p[0] for p in parts], elem, rnd, ftz, sat, relu)
    hi = half_arith(b, op, [p[1] for p in parts], elem, rnd, ftz, sat, relu)
    return pack2(b, lo, hi)


def cvt_pack2(b, hi, lo, dst, rnd, relu, satfinite):
    elem = dst[:-2]
    def one(x):
        x64 = b.fpext(x, F64) if x.type == F32 else x
        if relu:
            x64 = b.select(b.fcmp_ordered("<", x64, _c(F64, 0.0)), _c(F64, 0.0), x64)
        return _from_f64(b, x64, elem, rnd or "rn")
    return pack2(b, one(lo), one(hi))


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
        if sat:
            r = saturate(b, r) if dst != "bf16" else f32_to_bf16(b, saturate(b, bf16_to_f32(b, r)))
        if ftz and dst == "f32":
            r = flush_denormal(b, r)
        return r
    if src_float:
        return _float_to_int(b, v, dst, src, rnd)
    if dst_float:
        return _int_to_float(b, v, dst, src, rnd)
    return _int_to_int(b, v, dst, src, sat)


def _float_to_float(b, v, dst, src, rnd):
    if src == "bf16":
        v, src = bf16_to_f32(b, v), "f32"
    if dst == "bf16":
        x = b.fpext(v, F64) if v.type != F64 else v
        return f32_to_bf16(b, b.fptrunc(x, F32) if x.type == F64 else x, rnd)
    st, dt = _ftype(src), _ftype(dst)
    if rnd in ("rni", "rzi", "rmi", "rpi"):
        name = {"rni": "llvm.rint", "rzi": "llvm.trunc", "rmi": "llvm.floor", "rpi": "llvm.ceil"}[rnd]
        v = intrinsic(b, f"{name}.{_suffix(st)}", st, [v])
        rnd = None
    if _bits(st) == _bits(dt):
        return v
    if _bits(st) < _bits(dt):
        return b.fpext(v, dt)
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
    return intrinsic(b, f"llvm.{conv}.sat.i{it.width}.{_suffix(t)}", it, [r])


def _int_to_float(b, v, dst, src, rnd):
    signed = src.startswith("s")
    if dst == "bf16":
        f = b.sitofp(v, F64) if signed else b.uitofp(v, F64)
        return f32_to_bf16(b, b.fptrunc(f, F32), rnd)
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
