"""Integer and bit-field instructions with PTX semantics, as straight-line LLVM IR."""
from llvmlite import ir

from ..irutil import intrinsic

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)


def _c(t, v):
    """v in type t, an integer or a vector of them (every element v)."""
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [_c(t.element, v)] * t.count)
    return ir.Constant(t, v & ((1 << t.width) - 1))


def _bits(t) -> int:
    """The width of an integer type or of a vector's elements."""
    return (t.element if isinstance(t, ir.VectorType) else t).width


def _like(t, elem):
    """`elem`, or a vector of it as long as t where t is a vector."""
    return ir.VectorType(elem, t.count) if isinstance(t, ir.VectorType) else elem


def _resize(b, v, t, signed=False):
    if _bits(v.type) == _bits(t):
        return v
    if _bits(v.type) > _bits(t):
        return b.trunc(v, t)
    return b.sext(v, t) if signed else b.zext(v, t)


def shift_kind(opcode, t):
    """shift()'s `op` for PTX's `shl` or `shr` of type t."""
    return "shl" if opcode == "shl" else ("shr_s" if t.startswith("s") else "shr_u")


def shift(b, a, n, op):
    """shl/shr: amounts >= width give 0 (or the sign for shr.s), never LLVM poison. Integers,
    or vectors of them with a vector of amounts (warp code's lanes)."""
    w, i32s = _bits(a.type), _like(a.type, I32)
    n32 = _resize(b, n, i32s)
    big = b.icmp_unsigned(">=", n32, _c(i32s, w))
    amt = _resize(b, b.select(big, _c(i32s, 0), n32), a.type)
    if op == "shl":
        return b.select(big, _c(a.type, 0), b.shl(a, amt))
    if op == "shr_u":
        return b.select(big, _c(a.type, 0), b.lshr(a, amt))
    return b.ashr(a, b.select(big, _c(a.type, w - 1), amt))


def mul_wide(b, a, c, signed):
    w = ir.IntType(a.type.width * 2)
    return b.mul(_resize(b, a, w, signed), _resize(b, c, w, signed))


def mul_hi(b, a, c, signed):
    wide = mul_wide(b, a, c, signed)
    return b.trunc(b.lshr(wide, _c(wide.type, a.type.width)), a.type)


def mul24(b, a, c, signed, hi):
    """mul24: the 48-bit product of the low 24 bits; .hi gives bits 16..47."""
    ext = (lambda v: b.ashr(b.shl(v, _c(I32, 8)), _c(I32, 8))) if signed else (lambda v: b.and_(v, _c(I32, 0xFFFFFF)))
    p = mul_wide(b, ext(a), ext(c), signed)
    if hi:
        return b.trunc(b.lshr(p, _c(I64, 16)), I32)
    return b.trunc(p, I32)


def mad24(b, a, c, d, signed, hi):
    return b.add(mul24(b, a, c, signed, hi), d)


def packed_min_max(b, vals, op, signed, relu):
    """min/max{.relu}.{u16x2,s16x2} of b32 values (two or three): each 16-bit half on its
    own; .relu (signed only) makes a negative result 0."""
    i16 = ir.IntType(16)
    order = b.icmp_signed if signed else b.icmp_unsigned
    halves = []
    for shift in (0, 16):
        parts = [b.trunc(b.lshr(v, _c(I32, shift)) if shift else v, i16) for v in vals]
        r = parts[0]
        for p in parts[1:]:
            r = b.select(order("<" if op == "min" else ">", r, p), r, p)
        if relu:
            r = b.select(b.icmp_signed("<", r, _c(i16, 0)), _c(i16, 0), r)
        halves.append(b.zext(r, I32))
    return b.or_(halves[0], b.shl(halves[1], _c(I32, 16)))


def sad(b, a, c, d, signed):
    cmp = b.icmp_signed if signed else b.icmp_unsigned
    diff = b.select(cmp(">", a, c), b.sub(a, c), b.sub(c, a))
    return b.add(d, diff)


def int_div(b, a, c, signed):
    """Division that never traps (no LLVM UB): x / 0 gives every bit set, signed and
    unsigned alike, and INT_MIN / -1 gives INT_MIN (the quotient wraps).

    Division by zero is undefined in PTX; NVIDIA GPUs give all ones for both quotient and
    remainder (the code ptxas emits ends with a fix-up for a zero divisor). Source: the
    answer by an NVIDIA engineer (njuffa) to Stack Overflow question 12960005, "Undefined
    division in CUDA kernel". Integers or vectors of them (block programs' lanes)."""
    t = a.type
    bits = _bits(t)
    zero = b.icmp_unsigned("==", c, _c(t, 0))
    safe = b.select(zero, _c(t, 1), c)
    if signed:
        ovf = b.and_(b.icmp_signed("==", a, _c(t, 1 << (bits - 1))), b.icmp_signed("==", safe, _c(t, -1)))
        safe = b.select(ovf, _c(t, 1), safe)       # INT_MIN / 1 = INT_MIN, the wrapped quotient
        q = b.sdiv(a, safe)
    else:
        q = b.udiv(a, safe)
    return b.select(zero, _c(t, -1), q)


def _splat(b, v, t):
    """Scalar v as type t: itself, or in every element of the vector type t."""
    if not isinstance(t, ir.VectorType):
        return v
    one = b.insert_element(ir.Constant(ir.VectorType(v.type, 1), None), v, _c(I32, 0))
    return b.shuffle_vector(one, ir.Constant(one.type, None), ir.Constant(ir.VectorType(I32, t.count), [0] * t.count))


def uniform_quotient(b, a, d, signed, reciprocal_of=None):
    """`a / d` for 32-bit lanes `a` (a vector, or one integer) and a divisor `d` that is the
    same for all of them, given as one i32, with int_div's answers (x / 0 all ones, INT_MIN /
    -1 INT_MIN); signed: truncated toward zero.

    CPUs divide vectors lane by lane: `i / n` by a kernel parameter took 17x the time of
    `i * n`, and a block program's (nvcc's trip count of a grid-stride loop it unrolls by four
    divides by gridDim.x * blockDim.x) was 32 scalar divisions a warp. Instead each lane's
    quotient is the top word of a * M, M = ceil(2^64 / d) (`reciprocal_of(b, d)`, by
    default `reciprocal`, which a caller may remember): exact for every
    32-bit a and d >= 2 (Lemire, Kaser and Kurz, "Faster remainder by direct computation",
    2019: the error a * (M d - 2^64) stays below 2^64 because both factors are below 2^32).
    M would need 65 bits for d = 1, where the quotient is `a` itself. The product takes two
    32 x 32-bit multiplications a lane (M's words), which vectorise. Signed: the magnitudes
    divided so, the sign put back (INT_MIN's magnitude, 2^31, is a u32)."""
    t = a.type
    zero = b.icmp_unsigned("==", d, _c(I32, 0))
    if signed:
        minus_a, minus_d = b.icmp_signed("<", a, _c(t, 0)), b.icmp_signed("<", d, _c(I32, 0))
        q = _magnitude_quotient(b, b.select(minus_a, b.neg(a), a), b.select(minus_d, b.neg(d), d), reciprocal_of)
        q = b.select(b.xor(minus_a, _splat(b, minus_d, minus_a.type)), b.neg(q), q)
    else:
        q = _magnitude_quotient(b, a, d, reciprocal_of)
    return b.select(zero, _c(t, -1), q)


def reciprocal(b, d):
    """i64 M = ceil(2^64 / d) of a u32 d >= 2 (any value for d < 2), without a division
    instruction: LLVM does not speculate an integer division by a variable, so one made
    behind a thread's `if (i < n)` stayed in the loop over the threads where that loop was
    not vectorised (embedding_flat's `i / C` and `bt % T`: two 64-bit divisions a thread),
    where these instructions, all free to run early, leave it with the divisor. A double's
    quotient m0 = 2^64 / d is M + e with |e| < 2^11; m0 * d mod 2^64, read signed, is then
    (M d - 2^64) + e d, whose first term lies in [0, d): e is that over d, rounded down,
    which a double gives exactly (|r| < 2^44, and r / d is an integer or at least 2^-32
    from one, far beyond the quotient's error). tests/test_compiler_bitops.py checks it on
    the powers of two and their neighbours and on random divisors of every size."""
    safe = b.select(b.icmp_unsigned("<", d, _c(I32, 2)), _c(I32, 2), d)
    divisor = b.uitofp(safe, ir.DoubleType())
    m0 = b.fptoui(b.fdiv(ir.Constant(ir.DoubleType(), 2.0 ** 64), divisor), I64)
    r = b.sitofp(b.mul(m0, b.zext(safe, I64)), ir.DoubleType())
    e = b.fptosi(intrinsic(b, "llvm.floor.f64", ir.DoubleType(), [b.fdiv(r, divisor)]), I64)
    return b.sub(m0, e)


def _magnitude_quotient(b, a, d, reciprocal_of=None):
    """u32 lanes `a` / the u32 `d` (any value for d = 0: the caller answers that)."""
    t = a.type
    m = (reciprocal_of or reciprocal)(b, d)
    wide = _like(t, I64)
    low_word, high_word = (_splat(b, b.and_(w, _c(I64, 0xFFFFFFFF)), wide) for w in (m, b.lshr(m, _c(I64, 32))))
    n = b.zext(a, wide)
    low = b.mul(n, low_word)
    q = b.trunc(b.lshr(b.add(b.mul(n, high_word), b.lshr(low, _c(wide, 32))), _c(wide, 32)), t)
    return b.select(b.icmp_unsigned("<=", d, _c(I32, 1)), a, q)


def uniform_remainder(b, a, d, signed, reciprocal_of=None):
    """`a % d` as uniform_quotient divides, with int_rem's answers (x % 0 all ones, the sign
    the dividend's, x % -1 zero)."""
    q = uniform_quotient(b, a, d, signed, reciprocal_of)
    r = b.sub(a, b.mul(q, _splat(b, d, a.type)))
    return b.select(b.icmp_unsigned("==", d, _c(I32, 0)), _c(a.type, -1), r)


def int_rem(b, a, c, signed):
    """Remainder that never traps: x % 0 gives every bit set (see int_div), INT_MIN % -1
    gives 0; otherwise the sign follows the dividend (C semantics)."""
    t = a.type
    zero = b.icmp_unsigned("==", c, _c(t, 0))
    safe = b.select(zero, _c(t, 1), c)
    if signed:
        ovf = b.icmp_signed("==", safe, _c(t, -1))   # x % -1 is 0 for every x, INT_MIN included
        safe = b.select(ovf, _c(t, 1), safe)
        r = b.srem(a, safe)
    else:
        r = b.urem(a, safe)
    return b.select(zero, _c(t, -1), r)


def _suffix(t) -> str:
    """The suffix naming an overloaded intrinsic of integer type t or a vector of them."""
    return f"v{t.count}i{t.element.width}" if isinstance(t, ir.VectorType) else f"i{t.width}"


# popc, clz and brev of a value or of a warp's vector of them (warp regions)
def popc(b, a):
    return _resize(b, intrinsic(b, f"llvm.ctpop.{_suffix(a.type)}", a.type, [a]), _like(a.type, I32))


def clz(b, a):
    return _resize(b, intrinsic(b, f"llvm.ctlz.{_suffix(a.type)}", a.type, [a, _c(I1, 0)]), _like(a.type, I32))


def brev(b, a):
    return intrinsic(b, f"llvm.bitreverse.{_suffix(a.type)}", a.type, [a])


def bfind(b, a, signed, shiftamt):
    """Position of the most significant non-sign bit; 0xFFFFFFFF when there is none."""
    w = a.type.width
    v = a
    if signed:
        v = b.select(b.icmp_signed("<", a, _c(a.type, 0)), b.not_(a), a)
    lz = clz(b, v)
    none = b.icmp_unsigned("==", v, _c(a.type, 0))
    pos = b.sub(_c(I32, w - 1), lz)
    if shiftamt:
        pos = lz
    return b.select(none, _c(I32, 0xFFFFFFFF), pos)


def _field(b, pos, ln, t):
    """A bit field's position and length in instructions on type t (an integer or vector):
    (pos, len) of their low 8 bits (i32s), the same at most t's width in twice its width, and
    that wide type (so that shifting by the whole width is no LLVM poison)."""
    w, i32 = _bits(t), _like(t, I32)
    wide = _like(t, ir.IntType(2 * w))
    p = b.and_(pos, _c(i32, 0xFF))
    l = b.and_(ln, _c(i32, 0xFF))
    pw = _resize(b, b.select(b.icmp_unsigned(">", p, _c(i32, w)), _c(i32, w), p), wide)
    lw = _resize(b, b.select(b.icmp_unsigned(">", l, _c(i32, w)), _c(i32, w), l), wide)
    return p, l, pw, lw, wide


def bfe(b, a, pos, ln, signed):
    """Bit-field extract per the PTX ISA pseudo-code (pos and len use their low 8 bits). On
    integers or vectors of them (a block program's lanes; pos and len i32 alike)."""
    t = a.type
    w, i32 = _bits(t), _like(t, I32)
    p, l, pw, lw, wide = _field(b, pos, ln, t)
    aw = _resize(b, a, wide, signed)
    shifted = b.lshr(aw, pw)
    mask = b.sub(b.shl(_c(wide, 1), lw), _c(wide, 1))
    field = b.and_(shifted, mask)
    if signed:
        # sign bit: the field's msb, or the value's msb when the field runs past the top
        msb_pos = b.add(p, b.sub(l, _c(i32, 1)))
        msb_pos = b.select(b.icmp_unsigned(">", msb_pos, _c(i32, w - 1)), _c(i32, w - 1), msb_pos)
        sbit = b.trunc(b.lshr(a, _resize(b, msb_pos, t)), _like(t, I1))
        sbit = b.and_(sbit, b.icmp_unsigned("!=", l, _c(i32, 0)))
        fill = b.not_(mask)
        field = b.select(sbit, b.or_(field, fill), field)
    res = b.trunc(field, t)
    return b.select(b.icmp_unsigned("==", l, _c(i32, 0)), _c(t, 0), res)


def bfi(b, a, base, pos, ln):
    """Bit-field insert of a into base (pos and len their low 8 bits, at most the width); on
    integers or vectors of them, as bfe."""
    t = base.type
    _, _, pw, lw, wide = _field(b, pos, ln, t)
    mask = b.shl(b.sub(b.shl(_c(wide, 1), lw), _c(wide, 1)), pw)
    ins = b.and_(b.shl(_resize(b, a, wide), pw), mask)
    res = b.or_(b.and_(_resize(b, base, wide), b.not_(mask)), ins)
    return b.trunc(res, t)


def prmt(b, a, c, d, mode=None):
    """Byte permute; the default mode takes each result byte from selector nibble k, with
    bit 3 of the nibble replicating the chosen byte's sign."""
    tmp = b.or_(b.zext(a, I64), b.shl(b.zext(c, I64), _c(I64, 32)))

    def byte(idx):
        return b.trunc(b.lshr(tmp, b.mul(b.zext(idx, I64), _c(I64, 8))), I8)

    def sext_byte(v):
        return b.select(b.icmp_signed("<", v, _c(I8, 0)), _c(I8, 0xFF), _c(I8, 0))

    sel = [None] * 4
    if mode is None:
        for k in range(4):
            nib = b.and_(b.lshr(d, _c(I32, 4 * k)), _c(I32, 0xF))
            v = byte(b.and_(nib, _c(I32, 7)))
            rep = b.icmp_unsigned("!=", b.and_(nib, _c(I32, 8)), _c(I32, 0))
            sel[k] = b.select(rep, sext_byte(v), v)
    else:
        s = b.and_(d, _c(I32, 3))
        consts = {
            "f4e": lambda k: b.and_(b.add(s, _c(I32, k)), _c(I32, 7)),
            "b4e": lambda k: b.and_(b.sub(b.add(s, _c(I32, 8)), _c(I32, k)), _c(I32, 7)),
        }
        if mode in consts:
            for k in range(4):
                sel[k] = byte(consts[mode](k))
        elif mode == "rc8":
            for k in range(4):
                sel[k] = byte(s)
        elif mode == "rc16":
            lo = b.and_(s, _c(I32, 1))
            for k in range(4):
                sel[k] = byte(b.add(b.mul(lo, _c(I32, 2)), _c(I32, k % 2)))
        elif mode in ("ecl", "ecr"):
            for k in range(4):
                # edge clamp left: byte max(k, s); edge clamp right: byte min(k, s)
                if mode == "ecl":
                    idx = b.select(b.icmp_unsigned(">", s, _c(I32, k)), s, _c(I32, k))
                else:
                    idx = b.select(b.icmp_unsigned("<", s, _c(I32, k)), s, _c(I32, k))
                sel[k] = byte(idx)
    out = _c(I32, 0)
    for k in range(4):
        out = b.or_(out, b.shl(b.zext(sel[k], I32), _c(I32, 8 * k)))
    return out


def shf(b, a, c, d, left, clamp):
    """Funnel shift of the 64-bit value c:a by d (mod 32, or clamped to 32)."""
    n = b.and_(d, _c(I32, 31)) if not clamp else b.select(b.icmp_unsigned(">", d, _c(I32, 32)), _c(I32, 32), d)
    v = b.or_(b.zext(a, I64), b.shl(b.zext(c, I64), _c(I64, 32)))
    n64 = b.zext(n, I64)
    if left:
        return b.trunc(b.lshr(b.shl(v, n64), _c(I64, 32)), I32)
    return b.trunc(b.lshr(v, n64), I32)


# lop3: the smallest and/or/xor/not expression tree for each of the 256 truth tables of
# three inputs (a = 0xF0, b = 0xCC, c = 0xAA), found once by dynamic programming over
# expression sizes. An entry is ("leaf", name), ("not", x) or (op, x, y).
_LOP3_TABLE = None


def _lop3_table():
    global _LOP3_TABLE
    if _LOP3_TABLE is not None:
        return _LOP3_TABLE
    best = {0xF0: (0, ("leaf", 0)), 0xCC: (0, ("leaf", 1)), 0xAA: (0, ("leaf", 2)),
            0x00: (0, ("leaf", "zero")), 0xFF: (0, ("leaf", "ones"))}
    changed = True
    while changed:
        changed = False
        items = list(best.items())
        cand = []
        for t, (cost, _) in items:
            cand.append((~t & 0xFF, cost + 1, ("not", t)))
        for i, (t1, (c1, _)) in enumerate(items):
            for t2, (c2, _) in items[i + 1:]:
                cost = c1 + c2 + 1
                cand.append((t1 & t2, cost, ("and", t1, t2)))
                cand.append((t1 | t2, cost, ("or", t1, t2)))
                cand.append((t1 ^ t2, cost, ("xor", t1, t2)))
        for t, cost, expr in cand:
            if t not in best or cost < best[t][0]:
                best[t] = (cost, expr)
                changed = True
    _LOP3_TABLE = {t: e for t, (_, e) in best.items()}
    return _LOP3_TABLE


def lop3(b, a, c, d, lut):
    """Any 3-input logic function given by its 8-bit truth table (a=0xF0, b=0xCC, c=0xAA),
    emitted as the smallest and/or/xor/not expression (0 for an operand or a constant)."""
    table = _lop3_table()
    t = a.type
    inputs = (a, c, d)
    memo = {}

    def emit(tt):
        if tt in memo:
            return memo[tt]
        e = table[tt]
        if e[0] == "leaf":
            v = inputs[e[1]] if isinstance(e[1], int) else _c(t, 0 if e[1] == "zero" else -1)
        elif e[0] == "not":
            v = b.not_(emit(e[1]))
        else:
            x, y = emit(e[1]), emit(e[2])
            v = {"and": b.and_, "or": b.or_, "xor": b.xor}[e[0]](x, y)
        memo[tt] = v
        return v
    return emit(lut & 0xFF)


def bmsk(b, a, c, clamp):
    """A mask of c bits starting at bit a, per the PTX ISA pseudo-code: positions and widths
    wrap to 0..31; in .clamp mode a position or width of 32 or more saturates instead. On
    i32 values or vectors of them (a block program's lanes)."""
    t = a.type
    a1 = b.and_(a, _c(t, 31))
    b1 = b.and_(c, _c(t, 31))
    total = b.add(a1, b1)
    ones = _c(t, 0xFFFFFFFF)
    mask0 = b.shl(ones, a1)
    overflow = b.icmp_unsigned(">=", total, _c(t, 32))
    if clamp:
        pos_over = b.icmp_unsigned(">=", a, _c(t, 32))
        mask0 = b.select(pos_over, _c(t, 0), mask0)
        overflow = b.or_(overflow, b.or_(pos_over, b.icmp_unsigned(">=", c, _c(t, 32))))
    shifted = b.shl(ones, b.select(overflow, _c(t, 0), total))
    mask1 = b.select(overflow, _c(t, 0),
                     b.select(b.icmp_unsigned("==", b1, _c(t, 0)), ones, shifted))
    return b.and_(mask0, b.not_(mask1))


def dp4a(b, a, c, d, a_signed, b_signed):
    acc = d
    for k in range(4):
        ab = b.trunc(b.lshr(a, _c(I32, 8 * k)), I8)
        bb = b.trunc(b.lshr(c, _c(I32, 8 * k)), I8)
        av = b.sext(ab, I32) if a_signed else b.zext(ab, I32)
        bv = b.sext(bb, I32) if b_signed else b.zext(bb, I32)
        acc = b.add(acc, b.mul(av, bv))
    return acc


def dp2a(b, a, c, d, a_signed, b_signed, hi):
    I16 = ir.IntType(16)
    acc = d
    for k in range(2):
        ah = b.trunc(b.lshr(a, _c(I32, 16 * k)), I16)
        bb = b.trunc(b.lshr(c, _c(I32, 8 * (k + (2 if hi else 0)))), I8)
        av = b.sext(ah, I32) if a_signed else b.zext(ah, I32)
        bv = b.sext(bb, I32) if b_signed else b.zext(bb, I32)
        acc = b.add(acc, b.mul(av, bv))
    return acc


def szext(b, a, n, clamp, signed):
    """Sign- or zero-extend the low n bits of a 32-bit value, per the PTX ISA pseudo-code:
    n wraps to 0..31, except that in .clamp mode n >= 32 keeps all of a; n = 0 gives 0."""
    n1 = b.and_(n, _c(I32, 31))
    mask = b.shl(_c(I32, -1), n1)
    if clamp:
        mask = b.select(b.icmp_unsigned(">=", n, _c(I32, 32)), _c(I32, 0), mask)
    low = b.and_(a, b.not_(mask))
    if not signed:
        return low
    # the field's top bit, at (n1 - 1) & 31; a zero mask (clamp, n >= 32) has no sign to copy
    sign_pos = b.and_(b.sub(n1, _c(I32, 1)), _c(I32, 31))
    sign = b.trunc(b.lshr(a, sign_pos), I1)
    sign = b.and_(sign, b.icmp_unsigned("!=", n1, _c(I32, 0)))
    sign = b.and_(sign, b.icmp_unsigned("!=", mask, _c(I32, 0)))
    return b.or_(low, b.select(sign, mask, _c(I32, 0)))


def _select_set_bit(b, m, k):
    """Position of the k-th (0-based, from bit 0 up) set bit of the 32-bit m; k must be below
    popc(m). A binary search over halves by population count: five steps, no loop."""
    pos = _c(I32, 0)
    for step in (16, 8, 4, 2, 1):
        low = popc(b, b.and_(b.lshr(m, pos), _c(I32, (1 << step) - 1)))
        up = b.icmp_unsigned(">=", k, low)
        k = b.select(up, b.sub(k, low), k)
        pos = b.select(up, b.add(pos, _c(I32, step)), pos)
    return pos


def fns(b, mask, base, offset):
    """fns.b32: the |offset|-th set bit of mask counting up (offset > 0) or down (offset < 0)
    from bit `base` inclusive, or whether bit `base` itself is set (offset = 0); 0xFFFFFFFF
    when there is no such bit. A base above 31 is undefined in the ISA; here it finds nothing
    (the pseudo-code's scan would not start)."""
    none = _c(I32, 0xFFFFFFFF)
    in_range = b.icmp_unsigned("<", base, _c(I32, 32))
    sh = b.and_(base, _c(I32, 31))
    above = b.and_(mask, b.shl(_c(I32, -1), sh))             # bits base..31
    below = b.and_(mask, b.lshr(_c(I32, -1), b.sub(_c(I32, 31), sh)))   # bits 0..base
    neg = b.icmp_signed("<", offset, _c(I32, 0))
    n = b.select(neg, b.neg(offset), offset)
    m = b.select(neg, below, above)
    cnt = popc(b, m)
    found = b.and_(in_range, b.icmp_unsigned("<=", n, cnt))
    # counting up: the (n-1)-th set bit from the bottom; counting down: the n-th from the top
    k = b.select(neg, b.sub(cnt, n), b.sub(n, _c(I32, 1)))
    hit = _select_set_bit(b, m, k)
    bit_set = b.trunc(b.lshr(mask, sh), I1)
    at_base = b.select(b.and_(in_range, bit_set), base, none)
    r = b.select(b.icmp_unsigned("==", offset, _c(I32, 0)), at_base, b.select(found, hit, none))
    # An H200 gives 0 for offset INT_MIN, whatever the mask and base: ptxas's sequence
    # compares the bit count with -offset as a signed number, and -INT_MIN is negative.
    return b.select(b.icmp_unsigned("==", offset, _c(I32, 1 << 31)), _c(I32, 0), r)
