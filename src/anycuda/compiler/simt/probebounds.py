"""Bounds over a whole block of the known branches' predicates, before the probe runs thread by thread.

The probe (compiler/analysis/guards.py) computes each thread's known predicates in a loop over the
block's threads. For saxpy's `if (i < n)` or a stencil's border test that loop is a fifth to
a third of the kernel's time (benchmarks/NOTES.md): the kernel's own work per thread is as
small. Those predicates are comparisons of values affine in the thread index, so interval
arithmetic over the block's index ranges (tid.x in [0, ntid.x - 1], ...) shows once per
block that no thread takes them; the block then skips the loop. Where the bounds show
nothing (an operation they do not follow, a value that might wrap, a block at the grid's
edge) the probe runs as before: the bounds only ever skip work whose answer they proved.

Each integer register of the probe's closure gets bounds [lo, hi] (i64): every thread's
register holds v mod 2^w for some integer v in [lo, hi], and [lo, hi] lies within
[-2^(w-1), 2^w - 1], so that its signed and its unsigned reading can both be followed where
the range allows. A flag (i1) says whether that holds for the block: a result whose exact
bounds leave the range clears it. A predicate's bounds lie within [0, 1].
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..analysis import guards
from ..irutil import i64, load_field, load_invariant, load_invariant_field
from ..types import I1, I32, I64, PTR, llvm_type, type_mods, width

_INT_TYPES = frozenset(t + str(w) for t in "bsu" for w in (16, 32, 64))
_ORDER = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}


class _Unknown(Exception):
    """An operation the bounds do not follow: the probe runs."""


class _Bounds:
    def __init__(self, lo, hi, ok):
        self.lo, self.hi, self.ok = lo, hi, ok


def emit_bounds(f):
    """`i1 bounds(i8* L, i8* ctx, i32 more_x)` for the kernel lowered by `f` (ctx: a frame
    header with a block's index and shape): true when no thread takes any of the kernel's
    known branches in the blocks ctx's %ctaid.x .. %ctaid.x + more_x of its row of the grid
    (bounds over a box hold for every point in it: a run of blocks is one test, bands.py).
    None where the bounds cannot follow a known predicate's computation."""
    fn = ir.Function(f.fn.module, ir.FunctionType(I1, [PTR, PTR, I32]), name=f.fn.name + ".bounds")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    try:
        proven = _Evaluator(f, b, *fn.args).run()
    except _Unknown:
        f.fn.module.globals.pop(fn.name, None)
        return None
    b.ret(proven)
    return fn


class _Evaluator:
    def __init__(self, f, b, launch, ctx, more_x):
        self.f, self.b, self.launch, self.ctx, self.more_x = f, b, launch, ctx, more_x
        self.bounds = {}              # register -> _Bounds

    def run(self):
        body = self.f.pfn.body
        for pos in guards.probe_closure(self.f.known_branches):
            self.instruction(body[pos])
        b, proven = self.b, ir.Constant(I1, 1)
        for pos in self.f.known_branches:
            guard = body[pos].guard
            p = self.reg(guard.reg.name)
            # the branch is taken by no thread: its predicate is 0 everywhere (1 if negated)
            never = b.icmp_signed("==", p.lo, i64(1)) if guard.negated else b.icmp_signed("==", p.hi, i64(0))
            proven = b.and_(proven, b.and_(p.ok, never))
        return proven

    # ------------------------------------------------------------------ operands
    def reg(self, name):
        if name not in self.bounds:
            raise _Unknown(name)
        return self.bounds[name]

    def operand(self, op, t):
        b = self.b
        if isinstance(op, pir.Reg):
            return self.reg(op.name)
        if isinstance(op, pir.Imm) and not op.is_float:
            v = _wrap(op.value, t)
            if not _held(t)[0] <= v <= _held(t)[1]:
                raise _Unknown(f"immediate {op.value}")
            return _Bounds(i64(v), i64(v), ir.Constant(I1, 1))
        if isinstance(op, pir.SpecialReg) and op.component in ("x", "y", "z"):
            if op.name == "tid":
                n = self._field(f"ntid_{op.component}")
                return _Bounds(i64(0), b.sub(n, i64(1)), ir.Constant(I1, 1))
            if op.name in ("ntid", "ctaid", "nctaid"):
                v = self._field(f"{op.name}_{op.component}")
                last = b.add(v, b.zext(self.more_x, I64)) if op.name == "ctaid" and op.component == "x" else v
                return _Bounds(v, last, ir.Constant(I1, 1))
        raise _Unknown(str(op))

    def _field(self, name):
        return self.b.zext(load_field(self.b, self.ctx, abi.CTX[name], I32), I64)

    def write(self, op, bounds, t):
        if not isinstance(op, pir.Reg):
            raise _Unknown(str(op))
        if t != "pred":
            bounds = self.fits(bounds, t)
        self.bounds[op.name] = bounds

    def fits(self, x, t):
        """x, its flag cleared where its bounds leave what a .t register holds (and, for 64-bit
        registers, +-2^62: then no sum or product of bounds overflows an i64)."""
        return self._within(x, *_held(t))

    def read_as(self, x, t):
        """x's bounds as the signed or unsigned value of a .t register: the flag is cleared
        where the register's bit patterns would read otherwise than the bounds say."""
        w = width(t)
        return self._within(x, *((-(1 << (w - 1)), (1 << (w - 1)) - 1) if t.startswith("s") else (0, (1 << w) - 1)))

    def _within(self, x, lo, hi):
        """x, its flag cleared unless its bounds lie within [lo, hi]."""
        b = self.b
        ok = b.and_(b.icmp_signed(">=", x.lo, i64(lo)), b.icmp_signed("<=", x.hi, i64(hi)))
        return _Bounds(x.lo, x.hi, b.and_(x.ok, ok))

    # ------------------------------------------------------------------ instructions
    def instruction(self, st):
        if st.guard is not None:
            raise _Unknown("a guarded instruction")
        handler = getattr(self, "_" + st.opcode, None)
        if handler is None:
            raise _Unknown(st.opcode)
        handler(st)

    def _type(self, st):
        ts = type_mods(st.mods)
        if not ts:
            raise _Unknown(f"{st.opcode} without a type")
        return ts[-1]

    def _int_sources(self, st, t):
        if t not in _INT_TYPES:
            raise _Unknown(f"{st.opcode}.{t}")
        return [self.operand(op, t) for op in st.operands[1:]]

    def _mov(self, st):
        t = self._type(st)
        if t == "pred":
            return self.write(st.operands[0], self.operand(st.operands[1], t), t)
        x, = self._int_sources(st, t)
        self.write(st.operands[0], x, t)

    def _ld(self, st):
        f, b = self.f, self.b
        t = self._type(st)
        if t not in _INT_TYPES or not f.is_kernel_param(st.operands[1]):
            raise _Unknown("ld")
        off = f.kernel_param_offset(st.operands[1])
        params = b.inttoptr(load_invariant_field(b, self.launch, abi.LAUNCH["params"], I64), PTR)
        v = load_invariant(b, b.bitcast(b.gep(params, [i64(off)]), llvm_type(t).as_pointer()), align=1)
        v = b.sext(v, I64) if t.startswith("s") and width(t) < 64 else b.zext(v, I64) if width(t) < 64 else v
        ok = ir.Constant(I1, 1) if width(t) < 64 or t.startswith("s") else b.icmp_signed(">=", v, i64(0))
        self.write(st.operands[0], _Bounds(v, v, ok), t)

    def _cvt(self, st):
        ts = type_mods(st.mods)
        if len(ts) != 2 or not set(ts) <= _INT_TYPES or set(st.mods) & {"sat", "rn", "rz", "rm", "rp"}:
            raise _Unknown("cvt")
        dst, src = ts
        x = self.read_as(self.operand(st.operands[1], src), src)
        self.write(st.operands[0], x, dst)

    def _add(self, st):
        t = self._type(st)
        self.write(st.operands[0], self._sum(*self._int_sources(st, t)), t)

    def _sum(self, x, y):
        b = self.b
        return _Bounds(b.add(x.lo, y.lo), b.add(x.hi, y.hi), b.and_(x.ok, y.ok))

    def _sub(self, st):
        t = self._type(st)
        x, y = self._int_sources(st, t)
        b = self.b
        self.write(st.operands[0], _Bounds(b.sub(x.lo, y.hi), b.sub(x.hi, y.lo), b.and_(x.ok, y.ok)), t)

    def _product(self, x, y):
        """Bounds of x * y, from its four corners (operands held to +-2^31: no i64 overflow)."""
        b = self.b
        small = [b.and_(b.icmp_signed(">=", v, i64(-(1 << 31))), b.icmp_signed("<", v, i64(1 << 31)))
                 for v in (x.lo, x.hi, y.lo, y.hi)]
        ok = b.and_(x.ok, y.ok)
        for s in small:
            ok = b.and_(ok, s)
        corners = [b.mul(p, q) for p in (x.lo, x.hi) for q in (y.lo, y.hi)]
        lo, hi = corners[0], corners[0]
        for c in corners[1:]:
            lo = b.select(b.icmp_signed("<", c, lo), c, lo)
            hi = b.select(b.icmp_signed(">", c, hi), c, hi)
        return _Bounds(lo, hi, ok)

    def _multiplied(self, st):
        """(bounds of the product of st's first two sources, its register type, the other
        sources' bounds) of a mul or mad, .lo or .wide."""
        t = self._type(st)
        if "lo" not in st.mods and "wide" not in st.mods:
            raise _Unknown(f"{st.opcode}.hi")
        x, y, *rest = self._int_sources(st, t)
        out = t[0] + str(2 * width(t)) if "wide" in st.mods else t
        return self._product(self.read_as(x, t), self.read_as(y, t)), out, rest

    def _mul(self, st):
        p, out, _ = self._multiplied(st)
        self.write(st.operands[0], p, out)

    def _mad(self, st):
        p, out, (z,) = self._multiplied(st)
        self.write(st.operands[0], self._sum(p, z), out)

    def _shl(self, st):
        """x * 2^k: the bounds shifted, where they stay within +-2^62."""
        t = self._type(st)
        if not isinstance(st.operands[2], pir.Imm) or not 0 <= st.operands[2].value < min(width(t), 62):
            raise _Unknown("shl by a register")
        k = st.operands[2].value
        x = self.operand(st.operands[1], t)
        b = self.b
        ok = b.and_(b.icmp_signed(">=", x.lo, i64(-(1 << (62 - k)))), b.icmp_signed("<=", x.hi, i64(1 << (62 - k))))
        self.write(st.operands[0], _Bounds(b.shl(x.lo, i64(k)), b.shl(x.hi, i64(k)), b.and_(x.ok, ok)), t)

    def _setp(self, st):
        t = self._type(st)
        if len(st.operands) != 3 or not isinstance(st.operands[0], pir.Reg):
            raise _Unknown("setp with a boolean operation")
        cmp = next((m for m in st.mods if m in _ORDER or m in ("eq", "ne")), None)
        if cmp is None:
            raise _Unknown(f"setp {st.mods}")
        x, y = self._int_sources(st, t)
        signed = t.startswith("s") and cmp not in ("lo", "ls", "hi", "hs")
        as_type = ("s" if signed else "u") + str(width(t))
        x, y = self.read_as(x, as_type), self.read_as(y, as_type)
        b = self.b
        if cmp in ("eq", "ne"):
            always = b.and_(b.and_(b.icmp_signed("==", x.lo, x.hi), b.icmp_signed("==", y.lo, y.hi)),
                            b.icmp_signed("==", x.lo, y.lo))
            never = b.or_(b.icmp_signed("<", x.hi, y.lo), b.icmp_signed(">", x.lo, y.hi))
            if cmp == "ne":
                always, never = never, always
        else:
            op = _ORDER[cmp]
            # x op y for every pair of values the bounds allow, or for none
            least, most = {"<": (x.hi, y.lo), "<=": (x.hi, y.lo), ">": (x.lo, y.hi), ">=": (x.lo, y.hi)}[op]
            always = b.icmp_signed(op, least, most)
            worst = {"<": (x.lo, y.hi), "<=": (x.lo, y.hi), ">": (x.hi, y.lo), ">=": (x.hi, y.lo)}[op]
            never = b.not_(b.icmp_signed(op, *worst))
        self._predicate(st.operands[0], always, never, b.and_(x.ok, y.ok))

    def _predicate(self, dst, always, never, ok):
        b = self.b
        lo = b.zext(always, I64)
        hi = b.zext(b.not_(never), I64)
        self.write(dst, _Bounds(lo, hi, ok), "pred")

    def _bool(self, st, combine):
        t = self._type(st)
        x, y = (self.operand(op, t) for op in st.operands[1:3])
        b = self.b
        self.write(st.operands[0], _Bounds(combine(x.lo, y.lo), combine(x.hi, y.hi), b.and_(x.ok, y.ok)), t)

    def _bitwise(self, st):
        """(x, y, type) of an and/or on integers, both read as signed values of its width."""
        t = self._type(st)
        x, y = self._int_sources(st, t)
        signed = "s" + str(width(t))
        return self.read_as(x, signed), self.read_as(y, signed), t

    def _and(self, st):
        """On integers: where one operand is never negative, the result lies in [0, its
        greatest] (clearing bits only lowers a value that is not negative); else unknown."""
        if self._type(st) == "pred":
            return self._bool(st, self.b.and_)
        x, y, t = self._bitwise(st)
        b = self.b
        x_natural, y_natural = (b.icmp_signed(">=", v.lo, i64(0)) for v in (x, y))
        hi = b.select(b.and_(x_natural, y_natural), _least(b, x.hi, y.hi), b.select(x_natural, x.hi, y.hi))
        ok = b.and_(b.and_(x.ok, y.ok), b.or_(x_natural, y_natural))
        self.write(st.operands[0], _Bounds(i64(0), hi, ok), t)

    def _or(self, st):
        """On integers (nvcc tests `x < 0 || y < 0` as `(x | y) < 0`): setting bits only raises
        a value, so the result is at least the lesser operand (the greater where both are
        never negative); it is negative only where an operand may be, and otherwise at most
        the greatest operand with every bit below its top one set."""
        if self._type(st) == "pred":
            return self._bool(st, self.b.or_)
        x, y, t = self._bitwise(st)
        b = self.b
        natural = b.and_(b.icmp_signed(">=", x.lo, i64(0)), b.icmp_signed(">=", y.lo, i64(0)))
        lo = b.select(natural, _greatest(b, x.lo, y.lo), _least(b, x.lo, y.lo))
        top = _greatest(b, x.hi, y.hi)
        hi = b.select(b.icmp_signed("<", top, i64(0)), i64(-1), _ones_below_top(b, top))
        self.write(st.operands[0], _Bounds(lo, hi, b.and_(x.ok, y.ok)), t)

    def _min(self, st):
        self._extreme(st, _least)

    def _max(self, st):
        self._extreme(st, _greatest)

    def _extreme(self, st, pick):
        """min/max of integers as their type reads them: the bounds' own min or max."""
        t = self._type(st)
        if len(st.operands) != 3 or set(st.mods) - {t}:
            raise _Unknown(f"{st.opcode} {st.mods}")
        x, y = (self.read_as(v, t) for v in self._int_sources(st, t))
        b = self.b
        self.write(st.operands[0], _Bounds(pick(b, x.lo, y.lo), pick(b, x.hi, y.hi), b.and_(x.ok, y.ok)), t)

    def _not(self, st):
        t = self._type(st)
        if t != "pred":
            raise _Unknown(f"not.{t}")
        x = self.operand(st.operands[1], t)
        b = self.b
        self.write(st.operands[0], _Bounds(b.sub(i64(1), x.hi), b.sub(i64(1), x.lo), x.ok), t)


def _least(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _greatest(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


def _ones_below_top(b, v):
    """v (not negative) with every bit below its highest set bit set: 2^k - 1 >= v."""
    for k in (1, 2, 4, 8, 16, 32):
        v = b.or_(v, b.ashr(v, i64(k)))
    return v


def _held(t):
    """(least, greatest) value whose bit pattern a .t register may hold, as bounds keep it."""
    w = width(t)
    return max(-(1 << (w - 1)), -(1 << 62)), min((1 << w) - 1, 1 << 62)


def _wrap(value, t):
    """An immediate as the integer a .t register holds, read as t reads it."""
    w = width(t)
    v = value & ((1 << w) - 1)
    return v - (1 << w) if t.startswith("s") and v >> (w - 1) else v
