"""The instructions a warp region handles itself: loads and stores (through the region's memory
accesses, regionmemory.py), cvta, cvt, mul.wide, div, rcp/sqrt/rsqrt, neg/abs and atomics, each
on the warp's 32 lanes at once. Each mirrors compiler/ops/instructions.py for the forms it
accepts, whose modifiers REGION_MODS lists; what a warp run handles (warpruns.VECTOR_OPS and
VECTOR_MODS) a region takes from there.
"""
from __future__ import annotations

from contextlib import nullcontext

from llvmlite import ir

from ...ptx import ir as pir
from ...ptx.modifiers import (CACHE_HINT, DATA, EVICTION, LOAD_CACHING, PREFETCH_SIZES, REDUCTIONS, SCOPES, SPACES,
                              STORE_CACHING, VECTORS, words)
from ..cpu import streamstores
from ..irutil import declare, i64, intrinsic, intrinsic_suffix, masked_store
from ..ops import atomics, atomictable, bitops, floatops
from ..types import I1, I32, I64, llvm_type, space_of, type_mods, width
from . import laneatomics, warpruns
from .warpruns import FLOAT_TYPES, HALF_TYPES, INT_TYPES, LANES, VECTOR_MODS, NotVectorisable

_CVT_INTS, _CVT_FLOATS = INT_TYPES | {"b16", "b32", "b64", "u8", "s8", "b8"}, {"f32", "f64"}
_HALF_WIDENINGS = frozenset((("f32", "f16"), ("f64", "f16")))      # (wider, f16)
_WHOLE_INTS = frozenset(t + str(n) for t in "su" for n in (16, 32, 64))     # float-to-integer destinations
_TO_INTEGER = {"rni": "llvm.rint", "rzi": "llvm.trunc", "rmi": "llvm.floor", "rpi": "llvm.ceil"}
_ACCESS = DATA | SPACES | VECTORS | CACHE_HINT | EVICTION | {"weak"}     # and hints that change nothing here
# The modifiers each of the region's own forms handles (an allow-list, like warpruns.VECTOR_MODS):
# loads and stores not ordered against other threads (.volatile, .relaxed, .acquire, .release,
# .mmio are not here), cvt's forms of cvt_form, division and roots rounded to nearest, atomics
# of the operations atomicrmw has, on 32- and 64-bit values.
REGION_MODS = {
    "ld": _ACCESS | LOAD_CACHING | PREFETCH_SIZES | {"nc"},
    "st": _ACCESS | STORE_CACHING,
    "cvta": SPACES | {"to", "u32", "u64"},
    "cvt": _CVT_INTS | _CVT_FLOATS | {"f16", "rn", "rni", "rzi", "rmi", "rpi", "sat", "rna", "tf32"},
    "mul": VECTOR_MODS["mul"] | {"wide", "hi"},
    "mad": VECTOR_MODS["mad"] | {"wide"},
    "div": FLOAT_TYPES | INT_TYPES | {"rn", "full", "approx", "ftz"},
    "copysign": FLOAT_TYPES,
    **dict.fromkeys(("popc", "clz", "brev"), {"b32", "b64"}),
    "bfe": {"u32", "u64", "s32", "s64"},
    "bfi": {"b32", "b64"},
    "bmsk": {"clamp", "wrap", "b32"},
    "rem": INT_TYPES,
    "rcp": FLOAT_TYPES | {"rn", "approx", "ftz"},
    "sqrt": FLOAT_TYPES | {"rn", "approx", "ftz"},
    "rsqrt": FLOAT_TYPES | {"approx", "ftz"},
    **dict.fromkeys(("ex2", "lg2", "sin", "cos", "tanh"), {"f32", "approx", "ftz"}),
    **dict.fromkeys(("neg", "abs"), INT_TYPES | FLOAT_TYPES | HALF_TYPES | {"ftz"}),
    **dict.fromkeys(("atom", "red"), words(REDUCTIONS - {"inc", "dec"}, "cas exch relaxed acquire release acq_rel",
                                           "global shared shared::cta shared::cluster b32 b64", SCOPES, CACHE_HINT,
                                           INT_TYPES, FLOAT_TYPES)),
}


def access_elements(st, data_op):
    """(type, data operands, element size) of a ld or st that a region takes."""
    ts = type_mods(st.mods)
    if not ts:
        raise NotVectorisable(f"{st.opcode} {st.mods}")
    t = ts[-1]
    items = data_op.items if isinstance(data_op, pir.Vec) else [data_op]
    size = max(width(t) // 8, 1)
    return t, items, size


def _ld(w, st):
    t, items, size = access_elements(st, st.operands[0])
    f, b = w.f, w.b
    if f.is_kernel_param(st.operands[1]):
        off = f.kernel_param_offset(st.operands[1])
        for i, item in enumerate(items):
            p = b.bitcast(b.gep(w.params, [i64(off + i * size)]), llvm_type(t).as_pointer())
            w.write(item, w.splat(b.load(p, align=size)), t)
        return
    space = space_of(st)
    if not f.parallel_space(space):
        raise NotVectorisable(f"ld in .{space or 'generic'}")
    strided = w.strided_address(st.operands[1], space)
    _guard_held_atomics(w, st, strided, st.operands[1], size * len(items))
    if strided is not None and strided[1] == size * len(items) and (w.mask is None or len(items) == 1):
        w.prefetch_ahead(strided[0], size * len(items) * LANES, w.position)
        for item, v in zip(items, w.load_lanes(strided[0], llvm_type(t), size, len(items))):
            w.write(item, v, t)
        return
    addrs = w.addresses(st.operands[1], space)
    flipped = w.flipped(st.operands[1])
    for i, item in enumerate(items):
        at = b.add(addrs, w.splat(i64(i * size))) if i else addrs
        w.write(item, w.gather(at, llvm_type(t), size, flipped), t)


def _st(w, st):
    t, items, size = access_elements(st, st.operands[1])
    space = space_of(st)
    if not w.f.parallel_space(space):
        raise NotVectorisable(f"st in .{space or 'generic'}")
    b = w.b
    strided = w.strided_address(st.operands[0], space)
    _guard_held_atomics(w, st, strided, st.operands[0], size * len(items))
    if strided is not None and strided[1] == size and len(items) == 1:
        value = w.read(items[0], t)
        streams = w.f.streams(st)
        with streamstores.unless_streaming(b) if streams else nullcontext():
            w.prefetch_ahead(strided[0], size * LANES, w.position, write=True)
        if w.mask is None:
            store = b.store(value, b.inttoptr(strided[0], value.type.as_pointer()), align=size)
            return streamstores.mark(b.module, store) if streams else store
        return masked_store(b, value, strided[0], size, w.mask)
    addrs = w.addresses(st.operands[0], space)
    flipped = w.flipped(st.operands[0])
    for i, item in enumerate(items):
        at = b.add(addrs, w.splat(i64(i * size))) if i else addrs
        w.scatter(at, w.read(item, t), size, flipped)


def _cvta(w, st):
    t = warpruns.form_type(st, {"u32", "u64"})
    if isinstance(st.operands[1], pir.Sym):
        raise NotVectorisable("cvta of a symbol")
    v = w.read(st.operands[1], "u64")
    if "shared" in [m.split("::")[0] for m in st.mods]:
        base = w.splat(w._shared_base())
        v = w.b.sub(v, base) if "to" in st.mods else w.b.add(v, base)
    elif not {"global", "const", "param"} & set(st.mods):
        raise NotVectorisable(f"cvta {st.mods}")
    w.write(st.operands[0], v, t)


def cvt_form(st):
    """(destination type, source type, rounding modifier or None) of a cvt that _cvt takes,
    else None: known before a region is emitted (WarpRegion.takes), so that a region that
    meets another is not made up to there first."""
    ts = type_mods(st.mods)
    if not ts:
        return None
    dst, src = ts[0], ts[-1]
    rnd = next((m for m in st.mods if m in ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi")), None)
    ints, floats = _CVT_INTS, _CVT_FLOATS
    if (dst in ints and src in ints and rnd is None
            or dst in floats and src in ints and rnd in (None, "rn")
            or (dst, src) == ("f64", "f32") and rnd is None
            or (dst, src) == ("f32", "f64") and rnd in (None, "rn")
            or src in floats and (dst in _WHOLE_INTS or dst == src) and rnd in _TO_INTEGER
            or dst in floats and dst == src and rnd is None
            or (dst, src) in _HALF_WIDENINGS and rnd is None
            or (src, dst) in _HALF_WIDENINGS and rnd in (None, "rn")):
        if "sat" in st.mods and dst not in floats and rnd not in _TO_INTEGER:
            return None         # (integer saturation is float-to-integer's own)
        return dst, src, rnd
    return None


def _cvt(w, st):
    """Integer to integer, integer to float (round to nearest), float widening or narrowing
    (to nearest), float to integer and float to a whole float (`(int)x`, rintf: rounded to
    an integer each way), a float clamped to [0, 1] (`.sat`: `__saturatef`, and nvcc's expf
    clamps its argument's fraction so): floatops.cvt's forms without ftz or directed rounding;
    and f32 rounded to tf32 (cvt.rna.tf32.f32, before a tf32 mma)."""
    if set(st.mods) == {"rna", "tf32", "f32"}:
        return w.write(st.operands[0], floatops.cvt_rna_tf32(w.b, w.read(st.operands[1], "f32")), "b32")
    if {"rna", "tf32"} & set(st.mods):
        raise NotVectorisable(f"cvt {st.mods}")
    form = cvt_form(st)
    if form is None:
        raise NotVectorisable(f"cvt {st.mods}")
    dst, src, rnd = form
    ints, floats = _CVT_INTS, _CVT_FLOATS
    b = w.b
    v = w.read(st.operands[1], src)
    if dst in ints and src in ints and rnd is None:
        to = w._vec(ir.IntType(width(dst)))
        if width(src) > width(dst):
            v = b.trunc(v, to)
        elif width(src) < width(dst):
            v = b.sext(v, to) if src.startswith("s") else b.zext(v, to)
    elif dst in floats and src in ints and rnd in (None, "rn"):
        to = w._vec(llvm_type(dst))
        v = b.sitofp(v, to) if src.startswith("s") else b.uitofp(v, to)
    elif (dst, src) == ("f64", "f32") and rnd is None:
        v = b.fpext(v, w._vec(llvm_type(dst)))
    elif (dst, src) == ("f32", "f64") and rnd in (None, "rn"):
        v = b.fptrunc(v, w._vec(llvm_type(dst)))
    elif (dst, src) in _HALF_WIDENINGS:
        v = b.fpext(v, w._vec(llvm_type(dst)))
    elif (src, dst) in _HALF_WIDENINGS:         # one rounding to nearest, NaN as the GPU's
        v = floatops.canonical_half_nan(b, b.fptrunc(v, w._vec(llvm_type(dst))))
    elif src in floats and rnd in _TO_INTEGER:
        v = _rounded_to_integer(w, v, dst, rnd)
    elif not (dst == src and rnd is None):
        raise NotVectorisable(f"cvt {st.mods}")
    if "sat" in st.mods and dst in floats:
        v = floatops.saturate(b, v)
    w.write(st.operands[0], v, dst)


def _mul_hi(w, st):
    """mul.hi: the upper half of the product in twice the width (a division by a constant,
    `t % 3`, is one)."""
    t = warpruns.form_type(st, {"u16", "s16", "u32", "s32", "u64", "s64"})
    a, c = (w.read(op, t) for op in st.operands[1:])
    b = w.b
    n = width(t)
    wide = w._vec(ir.IntType(2 * n))
    ext = b.sext if t.startswith("s") else b.zext
    product = b.mul(ext(a, wide), ext(c, wide))
    w.write(st.operands[0], b.trunc(b.lshr(product, ir.Constant(wide, [n] * wide.count)), w._vec(ir.IntType(n))), t)


def _rounded_to_integer(w, v, dst, rnd):
    """The lanes of float vector v rounded to an integer as `rnd` says, as float type dst (its
    own) or integer type dst: saturated, NaN as a GPU writes it (floatops._float_to_int)."""
    b, ft = w.b, v.type
    suffix = f"v{ft.count}{intrinsic_suffix(ft.element)}"
    r = b.call(declare(b.module, f"{_TO_INTEGER[rnd]}.{suffix}", ft, [ft]), [v])
    if dst in _CVT_FLOATS:
        return r
    it = ir.IntType(width(dst))
    to = w._vec(it)
    conv = "fptosi" if dst.startswith("s") else "fptoui"
    res = b.call(declare(b.module, f"llvm.{conv}.sat.v{ft.count}i{it.width}.{suffix}", to, [ft]), [r])
    nan = floatops.nan_as_int(ft.element, it)
    if nan == 0:
        return res                   # (fpto*i.sat gives 0 for NaN)
    return b.select(b.fcmp_unordered("uno", v, v), ir.Constant(to, [nan] * ft.count), res)


def _mul(w, st):
    """mul and mad: .hi and .wide here (mad.wide adds an addend of twice the width), the
    other forms as warp runs make them."""
    if "hi" in st.mods:
        return _mul_hi(w, st)
    if "wide" not in st.mods:
        return warpruns.VECTOR_OPS[st.opcode](w, st)
    t = warpruns.form_type(st, {"u16", "s16", "u32", "s32"})
    a, c = (w.read(op, t) for op in st.operands[1:3])
    b = w.b
    wt = t[0] + str(2 * width(t))
    wide = w._vec(ir.IntType(2 * width(t)))
    ext = b.sext if t.startswith("s") else b.zext
    product = b.mul(ext(a, wide), ext(c, wide))
    if st.opcode == "mad":          # mad.wide: the product plus an addend of twice the width (floorf's)
        product = b.add(product, w.read(st.operands[3], wt))
    w.write(st.operands[0], product, wt)


def _rounding(st):
    return next((m for m in st.mods if m in ("rn", "rz", "rm", "rp", "approx", "full")), "rn")


def _div(w, st):
    """div.rn and div.full of floats: one IEEE division (floatops.div). Integers' division and
    remainder lane by lane as bitops makes them (never a trap: x / 0 all ones, INT_MIN / -1
    INT_MIN), by a divisor the whole block has alike in bitops' reciprocal form (without it a
    grid-stride loop's `i / C` kept its kernel out of warp regions: each thread walked its
    whole loop alone, scalar, 13x the time of the same loop without the division)."""
    t = type_mods(st.mods)[-1] if type_mods(st.mods) else None
    if st.opcode == "div" and t in FLOAT_TYPES:
        return _float_div(w, st, t)
    if t is None or t[0] not in "bus" or width(t) not in (16, 32, 64) or set(st.mods) - {t}:
        raise NotVectorisable(f"{st.opcode} with {st.mods}")
    a, c = (w.read(op, t) for op in st.operands[1:3])
    divisor = st.operands[2]
    if t in ("u32", "s32") and not isinstance(divisor, pir.Imm) and _alike(w, divisor):   # (LLVM divides by constants itself)
        form = bitops.uniform_quotient if st.opcode == "div" else bitops.uniform_remainder
        d = w.b.extract_element(c, ir.Constant(I32, 0)) if isinstance(c.type, ir.VectorType) else c
        remembered = getattr(w, "remembered_reciprocal", None)
        reciprocal_of = remembered(divisor) if remembered else None
        return w.write(st.operands[0], form(w.b, a, d, t.startswith("s"), reciprocal_of), t)
    form = bitops.int_div if st.opcode == "div" else bitops.int_rem
    w.write(st.operands[0], form(w.b, a, c, t.startswith("s")), t)


def _float_div(w, st, t):
    """div.rn, .full and .approx (__fdividef) of floats, .ftz of f32, as floatops.div makes
    them (its flushes through warpruns', which know a value flushed already)."""
    mode = _rounding(st)
    if mode not in ("rn", "full", "approx") or (mode == "approx" and t != "f32"):
        raise NotVectorisable(f"div {st.mods}")
    ftz = "ftz" in st.mods and t == "f32"
    a, c = (w.read(op, t) for op in st.operands[1:])
    if ftz:
        a, c = warpruns.flushed(w, [a, c])
    q = floatops.div(w.b, a, c, mode)
    w.write(st.operands[0], warpruns.flushed_result(w, q) if ftz else q, t)


def _copysign(w, st):
    """copysign d, a, b: the magnitude of b with the sign of a, lane by lane."""
    t = warpruns.form_type(st, FLOAT_TYPES)
    a, c = (w.read(op, t) for op in st.operands[1:3])
    w.write(st.operands[0], intrinsic(w.b, f"llvm.copysign.v{LANES}{t}", a.type, [c, a]), t)


def _count_bits(w, st):
    """popc, clz and brev of b32 and b64, lane by lane, as the step function's (bitops);
    popc and clz answer in 32 bits."""
    t = warpruns.form_type(st, {"b32", "b64"})
    a = w.read(st.operands[1], t)
    v = {"popc": bitops.popc, "clz": bitops.clz, "brev": bitops.brev}[st.opcode](w.b, a)
    w.write(st.operands[0], v, t if st.opcode == "brev" else "u32")


def _bit_field(w, st):
    """bfe (a field of bits out, signed or not) and bfi (a field in: nvcc puts a double's halves
    together so after shuffling them) on the lanes' vectors, as the step function's."""
    t = type_mods(st.mods)[-1]
    pos, length = (w.read(op, "u32") for op in st.operands[-2:])
    values = [w.read(op, t) for op in st.operands[1:-2]]
    if st.opcode == "bfe":
        value = bitops.bfe(w.b, values[0], pos, length, t.startswith("s"))
    else:
        value = bitops.bfi(w.b, values[0], values[1], pos, length)
    w.write(st.operands[0], value, t)


def _bmsk(w, st):
    """bmsk (a mask of bits from a position, cub's digit of a key) on the lanes' vectors."""
    a, c = (w.read(op, "b32") for op in st.operands[1:3])
    w.write(st.operands[0], bitops.bmsk(w.b, a, c, "clamp" in st.mods), "b32")


def _alike(w, op) -> bool:
    """Every thread of the block has operand `op` alike (a block program knows it of its own
    values; a warp region asks the lowering's uniformity of a register)."""
    alike = getattr(w, "alike", None)
    if alike is not None:
        return alike(op)
    return isinstance(op, pir.Reg) and op.name in w.f.registers_alike()


def _root_or_reciprocal(w, st):
    """rcp.rn / .approx, sqrt.rn / .approx, rsqrt.approx of floats (rcp.approx.ftz is
    __fdividef's and tanhf's: without it a grid-stride loop of GELU ran each thread's loop
    alone, scalar, 11x the time of a thread per element)."""
    mode = _rounding(st)
    if mode not in ("rn", "approx") or st.opcode == "rsqrt" and mode != "approx":
        raise NotVectorisable(f"{st.opcode} {st.mods}")
    _unary(w, st, warpruns.form_type(st, FLOAT_TYPES), mode)


def _approximation(w, st):
    """ex2, lg2, sin, cos, tanh .approx of f32 (.ftz or not): ex2 as arithmetic (nvcc's expf,
    softmax's and GELU's), the others by LLVM's intrinsics."""
    _unary(w, st, warpruns.form_type(st, {"f32"}), "approx")


def _unary(w, st, t, mode):
    """A unary float instruction as floatops.unary computes it for one thread; .ftz of f32
    flushes its input and result through warpruns', which know a value flushed already."""
    ftz = "ftz" in st.mods and t == "f32"
    x = w.read(st.operands[1], t)
    if ftz:
        (x,) = warpruns.flushed(w, [x])
    v = floatops.unary(w.b, st.opcode, x, mode, False)
    w.write(st.operands[0], warpruns.flushed_result(w, v) if ftz else v, t)


def _neg_abs(w, st):
    """neg and abs of integers, floats and halves (instructions.abs_neg; .ftz of f32 flushes
    the input, -use_fast_math's fabsf)."""
    t = warpruns.form_type(st, INT_TYPES | FLOAT_TYPES | HALF_TYPES)
    a = w.read(st.operands[1], t)
    b = w.b
    if "ftz" in st.mods:
        if t != "f32":
            raise NotVectorisable(f"{st.opcode} {st.mods}")
        (a,) = warpruns.flushed(w, [a])
    if t in HALF_TYPES:
        v = floatops.half_arith(b, st.opcode, [a], t, None, False, False, False)
    elif t in FLOAT_TYPES:
        v = b.fneg(a) if st.opcode == "neg" else \
            b.call(declare(b.module, f"llvm.fabs.v{a.type.count}{t}", a.type, [a.type]), [a])
    elif st.opcode == "neg":
        v = b.neg(a)
    else:
        v = b.select(b.icmp_signed("<", a, ir.Constant(a.type, None)), b.neg(a), a)
    w.write(st.operands[0], v, t)


def _guard_held_atomics(w, st, strided, addr_op, nbytes):
    """Before a global or generic access of the lanes, where the kernel holds its atomics in
    a table (ops/atomictable.py): the table performed if the access overlaps it. The span
    of a strided access is lane 0's element up to the last lane's, active or not (a wider
    span costs at most a flush); otherwise that of the active lanes' addresses (an inactive
    lane's may be anything, 0 too: the span would cover the table every time)."""
    table = w.f.atomic_table
    if table is None or space_of(st) not in ("", "global"):
        return
    b = w.b
    if strided is not None:
        first, step = strided                   # (a constant stride)
        last = b.add(first, i64(step * (LANES - 1)))
        lo, hi = (first, last) if step >= 0 else (last, first)
    else:
        addrs, active = laneatomics.address_vector(w, addr_op, space_of(st)), w._lanes()
        vec = addrs.type
        lo = intrinsic(b, "llvm.vector.reduce.umin.v32i64", I64,
                       [b.select(active, addrs, ir.Constant(vec, [(1 << 64) - 1] * LANES))])
        hi = intrinsic(b, "llvm.vector.reduce.umax.v32i64", I64, [b.select(active, addrs, ir.Constant(vec, [0] * LANES))])
    atomictable.guard_span(b, table, w.header, lo, b.add(hi, i64(nbytes)))


def _held_atomics(w, st, ops):
    """A kernel that holds its atomics in a table (ops/atomictable.py): the lanes' values
    into it, lane after lane, or as one total where every active lane has one address
    (laneatomics' check)."""
    table, b = w.f.atomic_table, w.b
    if laneatomics.combinable(w, table.kind, ops[1]):
        one, first = laneatomics.one_address(w, laneatomics.address_vector(w, ops[1], "global"))
        with b.if_else(one) as (whole, each):
            with whole:
                total = laneatomics.warp_total(w, table.kind, table.lt, w.read(ops[2], table.ptx_type),
                                               table.flushes_inputs)
                atomictable.add_held(b, table, w.header, first, total)
            with each:
                _each_lane_held(w, st, ops, table)
    else:
        _each_lane_held(w, st, ops, table)
    table.held.add(w.position)


def _each_lane_held(w, st, ops, table):
    """The lanes' values into the table one after another: straight into their entries where
    the table is dense and holds every lane's address (_all_held_densely), else each through
    the table's add (its key compared, an entry taken or handed over). Straight, the loop
    writes only the table: the lanes' addresses and values may be computed again from the
    global memory they were loaded from (lanereloads); through the add, a hand-over's atomic
    might write that memory."""
    b = w.b
    with b.if_else(_all_held_densely(w, table, ops[1]), likely=True) as (straight, through):
        with straight:
            address_of = w.lane_addresses(ops[1], "global", writes=None)
            value = w.lane_operand(ops[2], table.ptx_type, None)
            entry_of = lambda lane: table.entry_total(b, w.header, address_of(lane))
            with w._each_lane_here(entry_of, table.lt, st.opcode, unroll=ATOMIC_LANES_UNROLLED) as (lane, p):
                atomictable.add_dense(b, table, p, value(lane))
        with through:
            address_of = w.lane_addresses(ops[1], "global")
            value = w.lane_operand(ops[2], table.ptx_type, "global")
            with w._each_lane_here(address_of, table.lt, st.opcode) as (lane, p):
                atomictable.add_held(b, table, w.header, b.ptrtoint(p, I64), value(lane))


def _all_held_densely(w, table, addr_op):
    """i1: the table is dense and every active lane's address in its span, aligned
    (atomictable.Table.dense_span)."""
    b = w.b
    addrs = laneatomics.address_vector(w, addr_op, "global")
    lo, span = table.dense_span(b, w.header)
    inside = b.and_(b.icmp_unsigned("<", b.sub(addrs, w.splat(lo)), w.splat(span)),
                    b.icmp_unsigned("==", b.and_(addrs, w.splat(i64(table.size - 1))), w.splat(i64(0))))
    return w._reduce("and", b.or_(inside, b.not_(w._lanes())), I1)


def _atom(w, st):
    """atom and red of the operations atomicrmw has, and cas: lane after lane in lane order,
    each lane's update as atomics.lower_atomic makes it (a plain update in the block's own
    shared memory, which only this CPU thread touches). Lanes' atomics in some order is
    what a GPU gives too."""
    ops, kind, t = atomics.lane_form(st)
    if w.f.atomic_table is not None:
        return _held_atomics(w, st, ops)
    if kind is None or t not in INT_TYPES | FLOAT_TYPES | {"b32", "b64"} or {"v2", "v4", "v8"} & set(st.mods):
        raise NotVectorisable(f"{st.opcode} {st.mods}")
    flush = None
    if kind == "fadd" and t == "f32":
        flush = atomics.flushes_subnormals(st)
        if flush is None:
            raise NotVectorisable("generic add.f32: where each lane's address points decides whether subnormals flush")
    b, private = w.b, atomics.block_private(st)
    atomics.fence_before_release(b, st)
    elem = llvm_type(t)
    space = space_of(st)
    old = b.bitcast(w._scratch(w._vec(elem)), elem.as_pointer())
    if laneatomics.combinable(w, kind, ops[1]):
        # every active lane at one address: one atomic for the warp (laneatomics.py)
        one, first = laneatomics.one_address(w, laneatomics.address_vector(w, ops[1], space))
        with b.if_else(one) as (combined, each):
            with combined:
                wanted = ops[0] is not None and laneatomics.result_read(w, ops[0])
                got = laneatomics.combined(w, kind, elem, private, flush, first, w.read(ops[2], t), wanted)
                if got is not None:
                    b.store(got, b.bitcast(old, w._vec(elem).as_pointer()))
            with each:
                _each_lane_atomic(w, st, ops, kind, t, space, elem, private, flush, old)
    else:
        _each_lane_atomic(w, st, ops, kind, t, space, elem, private, flush, old)
    if ops[0] is not None:
        w.write(ops[0], b.load(b.bitcast(old, w._vec(elem).as_pointer())), t)


ATOMIC_LANES_UNROLLED = 4      # copies of the lane loop's body (regionmemory._each_lane_here)


def _each_lane_atomic(w, st, ops, kind, t, space, elem, private, flush, old):
    """The lanes' atomics one after another, each lane's old value to old[lane]."""
    b = w.b
    address_of = w.lane_addresses(ops[1], space)
    values = [w.lane_operand(op, t, space) for op in ops[2:]]
    # a loop over the lanes: 32 unrolled copies, each lane's address extracted from the
    # vector, ran 4x slower on an AVX-512 EPYC (histogram 3.0 -> 0.76 ns per element, one
    # worker) for 10% they gained on a Zen 3 (NOTES.md)
    with w._each_lane_here(address_of, elem, st.opcode, unroll=ATOMIC_LANES_UNROLLED) as (lane, p):
        v = [value(lane) for value in values]
        got = atomics.compare_and_swap(b, private, p, *v) if kind == "cas" else atomics.rmw(b, private, kind, p, v[0], flush)
        b.store(got, b.gep(old, [lane]))


REGION_OPS = {"ld": _ld, "st": _st, "cvta": _cvta, "cvt": _cvt, "mul": _mul, "mad": _mul, "div": _div, "rem": _div,
              "rcp": _root_or_reciprocal, "sqrt": _root_or_reciprocal, "rsqrt": _root_or_reciprocal,
              **dict.fromkeys(("ex2", "lg2", "sin", "cos", "tanh"), _approximation),
              "neg": _neg_abs, "abs": _neg_abs, "atom": _atom, "red": _atom, "copysign": _copysign,
              **dict.fromkeys(("popc", "clz", "brev"), _count_bits), "bfe": _bit_field, "bfi": _bit_field,
              "bmsk": _bmsk}
