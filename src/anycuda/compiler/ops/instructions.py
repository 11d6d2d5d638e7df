"""PTX instruction semantics on the CPU: one handler per opcode family, driven by tables.

A handler receives the FunctionLowering `f` (registers, operands, addresses, control flow)
and the instruction. Modifiers are looked up in tables rather than spelled out per
variant; awkward operations are named helpers in bitops.py and floatops.py.
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from ...ptx.errors import UnsupportedPtx
from ...ptx.modifiers import (BOOL_OPS as BOOL_MODS, CACHE_HINT, COMPARISONS, DATA, EVICTION, FLOAT_CLASSES, FLOATS,
                              HALVES, INTEGER_ROUNDING, INTEGERS, LOAD_CACHING, MODIFIERS, PACKED_INTEGERS, PERMUTES, PREFETCH_SIZES,
                              REDUCTIONS, ROUNDING, SCOPES, SPACES, STORE_CACHING, VECTORS, words)
from ..analysis import guards
from ..cpu import streamstores
from ..irutil import apart_from_header, convert_bits, i32, i64
from ..simt import gridsync
from ..types import (FLOAT_TYPES, I1, INT_TYPES, PACKED_TYPES, llvm_type, space_of, type_mods,
                     vector_count, width)
from . import aggregation, asynccopy, atomictable, atomics, bitops, floatops, initcheck, mbarrier, memcheck, racecheck, suspending, textures  # noqa: F401 - those register their handlers
from .calls import lower_call
from . import matrix  # noqa: F401 - registers the warp matrix instructions (mma, wmma, ldmatrix)
from .table import (BOOL_OPS, HANDLERS, OPERAND_COUNTS, VARIABLE_FORMS, handles, inst_type, operand_counts,  # noqa: F401 - the table, read through this module too
                    refusal)

ANY_ROUNDING = words(ROUNDING, INTEGER_ROUNDING, "rna rs")


def rounding(inst):
    for m in inst.mods:
        if m in ANY_ROUNDING:
            return m
    return None


def ops_in(f, inst, t, first=1):
    return [f.read(op, t) for op in inst.operands[first:]]


def is_floatish(t):
    return t in ("f16", "bf16", "f32", "f64", "f16x2", "bf16x2")


# ---------------------------------------------------------------------- moves and memory

@handles("mov", mods=(DATA, "pred"))
def mov(f, inst):
    t = inst_type(f, inst)
    dst, src = inst.operands[0], inst.operands[1]
    if isinstance(src, pir.Sym):
        v = f.symbol_address(src.name, window=True)
        f.write(dst, convert_bits(f.b, v, llvm_type(t)), t)
        return
    f.write(dst, f.read(src, t), t, pointer=f.pointer_of(src))


def _ordering(inst):
    if "volatile" in inst.mods or "relaxed" in inst.mods:
        return "monotonic"
    if "acquire" in inst.mods:
        return "acquire"
    if "release" in inst.mods:
        return "release"
    return None


def _elements(f, inst, addr_op, data_op, kind):
    """The elements of a (vector) ld/st: (register operand, element address) pairs, plus
    the type, its LLVM type, its size and the memory ordering the modifiers ask for. A
    checked kernel tests the whole access (`kind`: read or write) first (memcheck.py)."""
    t = inst_type(f, inst)
    n = vector_count(inst.mods)
    base = f.address(addr_op, space_of(inst))
    items = data_op.items if isinstance(data_op, pir.Vec) else [data_op]
    if len(items) != n:
        raise f.error(f"{inst.opcode}.v{n} needs {n} register operands, got {len(items)}")
    size = max(width(t) // 8, 1)
    if not f.is_kernel_param(addr_op):
        memcheck.check(f, base, size * n, kind, space_of(inst))
        if f.atomic_table is not None and space_of(inst) in ("", "global"):
            atomictable.guard(f, base, size * n)        # the thread sees its own held atomics
    pairs = [(item, f.b.gep(base, [i64(i * size)]) if i else base) for i, item in enumerate(items)]
    return pairs, t, llvm_type(t), size, _ordering(inst)


@handles("ld", "ldu", mods=(DATA, SPACES, SCOPES, LOAD_CACHING, EVICTION, CACHE_HINT, PREFETCH_SIZES, VECTORS,
                         "weak volatile relaxed acquire mmio nc"))
def ld(f, inst):
    b = f.b
    pairs, t, lt, size, order = _elements(f, inst, inst.operands[1], inst.operands[0], "read")
    for i, (item, addr) in enumerate(pairs):
        if order and width(t) <= 64:
            # volatile/relaxed/acquire: an atomic load, which the optimiser may not hoist or merge
            ilt = ir.IntType(max(width(t), 8))
            v = b.load_atomic(f.typed_ptr(addr, ilt), "acquire" if order == "acquire" else "monotonic", size)
            if f.mc.waits_on_grid and space_of(inst) in ("", "global"):
                gridsync.after_ordered_load(f, addr, v)      # maybe polling a grid barrier
            v = convert_bits(b, v, lt)
        elif f.is_kernel_param(inst.operands[1]):
            # read-only for the launch: loaded once, at the entry, where the optimiser can see
            # it is the same for every thread; a 64-bit one also as the pointer it holds
            v, p = f.kernel_param_value(inst.operands[1], i * size, t)
            f.write(item, v, t, pointer=p)
            continue
        else:
            v = apart_from_header(b.module, b.load(f.typed_ptr(addr, lt), align=size))
            if f.parallel_space(space_of(inst)):
                f.thread_access(v)
            if space_of(inst) == "const":
                # no kernel writes constant memory: the optimiser may keep its values out of
                # loops that store elsewhere, with no test of where those stores land
                v.set_metadata("invariant.load", b.module.add_metadata([]))
        f.write(item, v, t)


@handles("st", mods=(DATA, SPACES, SCOPES, STORE_CACHING, EVICTION, CACHE_HINT, VECTORS,
                     "weak volatile relaxed release mmio"))
def st(f, inst):
    b = f.b
    pairs, t, lt, size, order = _elements(f, inst, inst.operands[0], inst.operands[1], "write")
    if order == "release":
        streamstores.fence_if_streaming(b)
    streaming = f.streams(inst)
    for item, addr in pairs:
        v = f.read(item, t)
        if order and width(t) <= 64:
            ilt = ir.IntType(max(width(t), 8))
            b.store_atomic(convert_bits(b, v, ilt), f.typed_ptr(addr, ilt),
                           "release" if order == "release" else "monotonic", size)
        else:
            access = apart_from_header(b.module, b.store(v, f.typed_ptr(addr, lt), align=size))
            if f.parallel_space(space_of(inst)):
                f.thread_access(access)
            if streaming:
                streamstores.mark(b.module, access)


@handles("cvta", mods=(SPACES, "to u32 u64"))
def cvta(f, inst):
    b = f.b
    t = inst_type(f, inst)
    v = f.read(inst.operands[1], "u64") if not isinstance(inst.operands[1], pir.Sym) \
        else f.symbol_address(inst.operands[1].name, window=True)
    pointer = None
    if "shared" in [m.split("::")[0] for m in inst.mods]:
        base = f.shared_base()
        v = b.sub(v, base) if "to" in inst.mods else b.add(v, base)
    else:
        pointer = f.pointer_of(inst.operands[1])      # the generic and global windows coincide
    f.write(inst.operands[0], convert_bits(b, v, llvm_type(t)), t, pointer=pointer)


@handles("isspacep", mods=SPACES)
def isspacep(f, inst):
    """Whether a generic address lies in a space's window (FunctionLowering.space_windows).
    The global window is what the shared and local ones leave: the ISA has the kernel
    parameters inside it, and on the CPU .const data is ordinary memory too."""
    b = f.b
    a = f.read(inst.operands[1], "u64")

    def inside(space):
        res = ir.Constant(I1, 0)
        for lo, hi in f.space_windows(space):
            res = b.or_(res, b.and_(b.icmp_unsigned(">=", a, lo), b.icmp_unsigned("<", a, hi)))
        return res
    sp = space_of(inst)
    if sp == "global":
        res = b.not_(b.or_(inside("shared"), inside("local")))
    else:
        res = inside(sp)
    f.write(inst.operands[0], res, "pred")


HINTS = ("prefetch", "prefetchu", "nanosleep", "pmevent", "griddepcontrol", "brkpt", "discard", "applypriority",
         "setmaxnreg")


@handles(*HINTS, mods=words(*(MODIFIERS[op] for op in HINTS)))
def no_effect(f, inst):
    """Hints and debugging aids with no effect on the CPU, whatever their modifiers say
    (griddepcontrol.wait: the grids of a stream run one after the other; setmaxnreg: a
    thread's registers are not a shared budget here)."""


@handles("createpolicy", mods=MODIFIERS["createpolicy"])
def createpolicy(f, inst):
    """A cache policy is read only by .L2::cache_hint operands, hints here: any value does."""
    f.write(inst.operands[0], i64(0), "b64")


@handles("membar", "fence", "fence.proxy", mods=MODIFIERS["membar"] | MODIFIERS["fence"] | MODIFIERS["fence.proxy"])
def fence(f, inst):
    """Every membar and fence is a sequentially consistent fence, which orders at least what
    any of their orderings and scopes asks; a proxy fence too (on the CPU every proxy is the
    generic one: asynchronous copies are plain copies done when issued, ops/asynccopy.py)."""
    f.b.fence("seq_cst")


# ---------------------------------------------------------------------- conversion

# the types floatops.cvt and cvt_pack2 convert between (not fp8 pairs or tf32 yet)
CVT_TYPES = frozenset(INT_TYPES | FLOAT_TYPES | PACKED_TYPES | {"bf16", "tf32"})


@handles("cvt", mods=(CVT_TYPES, ROUNDING, INTEGER_ROUNDING, "ftz sat relu satfinite rna"), types=2)
def cvt(f, inst):
    ts = type_mods(inst.mods)
    dst_t, src_t = ts[0], ts[-1]
    if dst_t == "tf32" or "rna" in inst.mods:
        # cvt.rna.tf32.f32 (nvcc's __float_to_tf32 for tf32 wmma and mma operands) only
        if sorted(inst.mods) != ["f32", "rna", "tf32"]:
            raise f.error(f"cvt.{'.'.join(inst.mods)} is not supported by anycuda yet (cvt.rna.tf32.f32 is)",
                          UnsupportedPtx)
        f.write(inst.operands[0], floatops.cvt_rna_tf32(f.b, f.read(inst.operands[1], "f32")), "b32")
        return
    relu, satfinite = "relu" in inst.mods, "satfinite" in inst.mods
    if (relu or satfinite) and (src_t != "f32" or dst_t not in ("f16", "bf16", "f16x2", "bf16x2")):
        raise f.error(f"cvt.{'relu' if relu else 'satfinite'} from .{src_t} to .{dst_t} is not supported",
                      UnsupportedPtx)
    if dst_t in ("f16x2", "bf16x2"):
        hi = f.read(inst.operands[1], src_t)
        lo = f.read(inst.operands[2], src_t)
        v = floatops.cvt_pack2(f.b, hi, lo, dst_t, rounding(inst), relu, satfinite)
        f.write(inst.operands[0], v, dst_t)
        return
    v = f.read(inst.operands[1], src_t)
    if relu or satfinite:
        v = floatops.cvt_half(f.b, v, dst_t, rounding(inst), relu, satfinite)
    else:
        v = floatops.cvt(f.b, v, dst_t, src_t, rounding(inst), "sat" in inst.mods, "ftz" in inst.mods)
    f.write(inst.operands[0], v, dst_t)


# ---------------------------------------------------------------------- integer and float arithmetic

def _ftz(inst):
    return "ftz" in inst.mods


def _float_result(f, inst, t, v):
    if "sat" in inst.mods and t in ("f32", "f64", "f16"):
        v = floatops.saturate(f.b, v)
    if _ftz(inst) and t == "f32":
        v = floatops.flush_denormal(f.b, v)
    return v


def _float_inputs(f, inst, t, vals):
    if _ftz(inst) and t == "f32":
        return [floatops.flush_denormal(f.b, v) for v in vals]
    return vals


PACKED_OR_HALF = ("f16", "bf16", "f16x2", "bf16x2")


def _half_op(f, inst, t, op, vals):
    return floatops.half_arith(f.b, op, vals, t, rounding(inst), _ftz(inst), "sat" in inst.mods,
                               "relu" in inst.mods)


def fused_operands(b, inst, product, x, y, a, c):
    """The fma operands of add/sub `inst` (sources a, c) with the product x * y of the mul
    `product` fused into it (fusion.fused_products), as ptxas makes it. Scalars or vectors."""
    mul_reg = product.operands[0].name
    first = isinstance(inst.operands[1], pir.Reg) and inst.operands[1].name == mul_reg
    other = c if first else a
    if inst.opcode == "sub":        # x*y - c, or a - x*y = (-x)*y + a
        other, x = (b.fneg(other), x) if first else (other, b.fneg(x))
    return x, y, other


@handles("add", "sub", mods=(INTEGERS, FLOATS, HALVES, ROUNDING, "ftz sat cc"))
def add_sub(f, inst):
    b = f.b
    t = inst_type(f, inst)
    a, c = ops_in(f, inst, t)
    op = inst.opcode
    if t in PACKED_OR_HALF:
        return f.write(inst.operands[0], _half_op(f, inst, t, op, [a, c]), t)
    if t in ("f32", "f64"):
        a, c = _float_inputs(f, inst, t, [a, c])
        rnd = rounding(inst)
        product = f.fused_products.get(id(inst))
        if product is not None:
            x, y = _float_inputs(f, product, t, ops_in(f, product, t))
            v = f.mc.intrinsic(b, f"llvm.fma.{t}", a.type, list(fused_operands(b, inst, product, x, y, a, c)))
        elif rnd in ("rz", "rm", "rp"):
            v = floatops.arith_rnd(b, op, [a, c], rnd)
        else:
            v = b.fadd(a, c) if op == "add" else b.fsub(a, c)
        return f.write(inst.operands[0], _float_result(f, inst, t, v), t)
    if "sat" in inst.mods:
        name = ("llvm.sadd.sat" if op == "add" else "llvm.ssub.sat") + f".i{width(t)}"
        v = f.mc.intrinsic(b, name, a.type, [a, c])
        return f.write(inst.operands[0], v, t)
    if "cc" in inst.mods or op in ("addc", "subc"):
        return _carry_arith(f, inst, t, op, a, c)
    pointer = None
    if op == "add" and width(t) == 64:
        pa, pc = f.pointer_of(inst.operands[1]), f.pointer_of(inst.operands[2])
        if pa is not None and pc is None:
            pointer = b.gep(pa, [c])
        elif pc is not None and pa is None:
            pointer = b.gep(pc, [a])
    f.write(inst.operands[0], b.add(a, c) if op == "add" else b.sub(a, c), t, pointer=pointer)


def _carry_arith(f, inst, t, op, a, c, use_carry=False):
    """add.cc/addc/sub.cc/subc: the carry flag lives in a per-function i1."""
    b = f.b
    wide = ir.IntType(width(t) + 1)
    aw, cw = b.zext(a, wide), b.zext(c, wide)
    cin = b.zext(b.load(f.carry), wide) if use_carry else ir.Constant(wide, 0)
    if op.startswith("add"):
        r = b.add(b.add(aw, cw), cin)
        cout = b.trunc(b.lshr(r, ir.Constant(wide, width(t))), I1)
    else:
        r = b.sub(b.sub(aw, cw), cin)
        cout = b.trunc(b.lshr(r, ir.Constant(wide, width(t))), I1)  # borrow
    if "cc" in inst.mods:
        b.store(cout, f.carry)
    f.write(inst.operands[0], b.trunc(r, a.type), t)


@handles("addc", "subc", mods="u32 s32 u64 s64 cc")
def addc(f, inst):
    t = inst_type(f, inst)
    a, c = ops_in(f, inst, t)
    _carry_arith(f, inst, t, inst.opcode, a, c, use_carry=True)


@handles("mul", mods=(INTEGERS, FLOATS, HALVES, ROUNDING, "hi lo wide ftz sat"))
def mul(f, inst):
    b = f.b
    t = inst_type(f, inst)
    a, c = ops_in(f, inst, t)
    if t in PACKED_OR_HALF:
        return f.write(inst.operands[0], _half_op(f, inst, t, "mul", [a, c]), t)
    if t in ("f32", "f64"):
        a, c = _float_inputs(f, inst, t, [a, c])
        rnd = rounding(inst)
        v = floatops.arith_rnd(b, "mul", [a, c], rnd) if rnd in ("rz", "rm", "rp") else b.fmul(a, c)
        return f.write(inst.operands[0], _float_result(f, inst, t, v), t)
    signed = t.startswith("s")
    if "wide" in inst.mods:
        v = bitops.mul_wide(b, a, c, signed)
        return f.write(inst.operands[0], v, t[0] + str(2 * width(t)))
    if "hi" in inst.mods:
        return f.write(inst.operands[0], bitops.mul_hi(b, a, c, signed), t)
    f.write(inst.operands[0], b.mul(a, c), t)


@handles("mad", "fma", "madc", mods=(INTEGERS, FLOATS, HALVES, ROUNDING, "hi lo wide sat cc ftz relu"))
def mad(f, inst):
    b = f.b
    t = inst_type(f, inst)
    if t in PACKED_OR_HALF:
        vals = ops_in(f, inst, t)
        return f.write(inst.operands[0], _half_op(f, inst, t, "fma", vals), t)
    if t in ("f32", "f64"):
        a, c, d = _float_inputs(f, inst, t, ops_in(f, inst, t))
        rnd = rounding(inst)
        if rnd in ("rz", "rm", "rp"):
            v = floatops.arith_rnd(b, "fma", [a, c, d], rnd)
        else:
            v = f.mc.intrinsic(b, f"llvm.fma.{'f32' if t == 'f32' else 'f64'}", a.type, [a, c, d])
        return f.write(inst.operands[0], _float_result(f, inst, t, v), t)
    signed = t.startswith("s")
    wide_mode = "wide" in inst.mods
    a, c = f.read(inst.operands[1], t), f.read(inst.operands[2], t)
    dt = t[0] + str(2 * width(t)) if wide_mode else t
    d = f.read(inst.operands[3], dt)
    if wide_mode:
        prod = bitops.mul_wide(b, a, c, signed)
    elif "hi" in inst.mods:
        prod = bitops.mul_hi(b, a, c, signed)
    else:
        prod = b.mul(a, c)
    if "sat" in inst.mods and "hi" in inst.mods:
        wide = ir.IntType(2 * width(t))
        full = b.add(b.sext(prod, wide), b.sext(d, wide))
        lo, hi = ir.Constant(wide, -(1 << 31)), ir.Constant(wide, (1 << 31) - 1)
        full = b.select(b.icmp_signed("<", full, lo), lo, b.select(b.icmp_signed(">", full, hi), hi, full))
        return f.write(inst.operands[0], b.trunc(full, a.type), t)
    if "cc" in inst.mods or inst.opcode == "madc":
        return _carry_arith(f, inst, dt, "add", prod, d, use_carry=inst.opcode == "madc")
    f.write(inst.operands[0], b.add(prod, d), dt)


@handles("mul24", "mad24", mods="u32 s32 hi lo")
def mul24(f, inst):
    t = inst_type(f, inst)
    vals = ops_in(f, inst, t)
    hi = "hi" in inst.mods
    if inst.opcode == "mul24":
        v = bitops.mul24(f.b, vals[0], vals[1], t.startswith("s"), hi)
    else:
        v = bitops.mad24(f.b, vals[0], vals[1], vals[2], t.startswith("s"), hi)
    f.write(inst.operands[0], v, t)


@handles("sad", mods=INTEGERS)
def sad(f, inst):
    t = inst_type(f, inst)
    a, c, d = ops_in(f, inst, t)
    f.write(inst.operands[0], bitops.sad(f.b, a, c, d, t.startswith("s")), t)


@handles("div", mods=(INTEGERS, FLOATS, ROUNDING, "approx full ftz"))
def div(f, inst):
    b = f.b
    t = inst_type(f, inst)
    a, c = ops_in(f, inst, t)
    if t in ("f32", "f64"):
        a, c = _float_inputs(f, inst, t, [a, c])
        mode = "approx" if "approx" in inst.mods else ("full" if "full" in inst.mods else (rounding(inst) or "rn"))
        v = floatops.div(b, a, c, mode)
        return f.write(inst.operands[0], _float_result(f, inst, t, v), t)
    if _divides_alike(f, inst, t):
        v = bitops.uniform_quotient(b, a, c, t.startswith("s"))
    else:
        v = bitops.int_div(b, a, c, t.startswith("s"))
    f.write(inst.operands[0], _segmented(f, v, a, c), t)


@handles("rem", mods=INTEGERS)
def rem(f, inst):
    t = inst_type(f, inst)
    a, c = ops_in(f, inst, t)
    if _divides_alike(f, inst, t):
        v = bitops.uniform_remainder(f.b, a, c, t.startswith("s"))
    else:
        v = bitops.int_rem(f.b, a, c, t.startswith("s"))
    f.write(inst.operands[0], _segmented(f, v, a, c, remainder=True), t)


def _segmented(f, divided, a, c, remainder=False):
    """The quotient (remainder) a segment of a row's threads shares where the kernel's rows run
    in segments by this division (analysis/quotients.py); `divided` elsewhere."""
    at = getattr(f, "segment_quotient", None)        # (a device function, a warp region: none)
    return divided if at is None else at(divided, a, c, remainder)


def _divides_alike(f, inst, t) -> bool:
    """A 32-bit division whose divisor every thread of the block computes alike (`i / n`, `i % n`
    by a kernel parameter): bitops' reciprocal form, whose multiplications vectorise where a
    division does not (x86 has no vector division: `x / n` took 17x the time of `x * n`, 1.5x
    with it). LLVM does not hoist the reciprocal's own 64-bit division out of the loop over
    the threads (it stays behind the thread's `if (i < n)`: a division by a variable is not
    speculated), so each thread still makes one. Exact whatever the divisor: alike only
    decides where it pays (not in a device function, whose parameters are the caller's)."""
    divisor = inst.operands[2]
    return (t in ("u32", "s32") and f.is_kernel and isinstance(divisor, pir.Reg)
            and divisor.name in f.registers_alike())


@handles("abs", "neg", mods=("s16 s32 s64", FLOATS, HALVES, "ftz"))
def abs_neg(f, inst):
    b = f.b
    t = inst_type(f, inst)
    (a,) = ops_in(f, inst, t)
    if t in ("f16", "bf16", "f16x2", "bf16x2"):
        return f.write(inst.operands[0], _half_op(f, inst, t, inst.opcode, [a]), t)
    if t in ("f32", "f64"):
        (a,) = _float_inputs(f, inst, t, [a])
        if inst.opcode == "abs":
            v = f.mc.intrinsic(b, f"llvm.fabs.{t}", a.type, [a])
        else:
            v = b.fneg(a)
        return f.write(inst.operands[0], v, t)
    if inst.opcode == "neg":
        return f.write(inst.operands[0], b.neg(a), t)
    f.write(inst.operands[0], b.select(b.icmp_signed("<", a, ir.Constant(a.type, 0)), b.neg(a), a), t)


@handles("min", "max", mods=(INTEGERS, PACKED_INTEGERS, FLOATS, HALVES, "ftz NaN relu"))
def min_max(f, inst):
    b = f.b
    packed = next((m for m in inst.mods if m in PACKED_INTEGERS), None)
    if packed is not None:      # .u16x2, .s16x2: each half on its own, in a b32 register
        vals = ops_in(f, inst, "b32")
        v = bitops.packed_min_max(b, vals, inst.opcode, packed == "s16x2", "relu" in inst.mods)
        return f.write(inst.operands[0], v, "b32")
    t = inst_type(f, inst)
    vals = ops_in(f, inst, t)
    if t in PACKED_OR_HALF:
        op = inst.opcode + ("_nan" if "NaN" in inst.mods else "")
        return f.write(inst.operands[0], _half_op(f, inst, t, op, vals), t)
    if t in ("f32", "f64"):
        vals = _float_inputs(f, inst, t, vals)
        fn = floatops.fmin if inst.opcode == "min" else floatops.fmax
        v = vals[0]
        for other in vals[1:]:
            v = fn(b, v, other, "NaN" in inst.mods, False)
        return f.write(inst.operands[0], v, t)
    cmp = b.icmp_signed if t.startswith("s") else b.icmp_unsigned
    pred = "<" if inst.opcode == "min" else ">"
    v = vals[0]
    for other in vals[1:]:
        v = b.select(cmp(pred, v, other), v, other)
    if "relu" in inst.mods:
        zero = ir.Constant(v.type, 0)
        v = b.select(b.icmp_signed("<", v, zero), zero, v)
    f.write(inst.operands[0], v, t)


# Float functions: opcode -> floatops helper taking (b, x, mode, ftz)
@handles("rcp", "sqrt", "rsqrt", "sin", "cos", "ex2", "lg2", "tanh", mods=(FLOATS, HALVES, ROUNDING, "approx ftz"))
def float_function(f, inst):
    t = inst_type(f, inst)
    (x,) = ops_in(f, inst, t)
    mode = "approx" if "approx" in inst.mods else (rounding(inst) or "rn")
    if t in PACKED_OR_HALF:
        return f.write(inst.operands[0], _half_op(f, inst, t, inst.opcode, [x]), t)
    v = floatops.unary(f.b, inst.opcode, x, mode, _ftz(inst))
    f.write(inst.operands[0], v, t)


@handles("copysign", mods=FLOATS)
def copysign(f, inst):
    t = inst_type(f, inst)
    a, c = ops_in(f, inst, t)
    # copysign d, a, b: the magnitude of b with the sign of a
    v = f.mc.intrinsic(f.b, f"llvm.copysign.{t}", c.type, [c, a])
    f.write(inst.operands[0], v, t)


@handles("testp", mods=(FLOAT_CLASSES, FLOATS))
def testp(f, inst):
    t = inst_type(f, inst)
    kind = next(m for m in inst.mods if m in ("finite", "infinite", "number", "notanumber", "normal", "subnormal"))
    x = f.read(inst.operands[1], t)
    f.write(inst.operands[0], floatops.testp(f.b, x, kind), "pred")


# ---------------------------------------------------------------------- bits

@handles("and", "or", "xor", mods="pred b16 b32 b64")
def logic(f, inst):
    b = f.b
    t = inst_type(f, inst)
    a, c = ops_in(f, inst, t)
    v = {"and": b.and_, "or": b.or_, "xor": b.xor}[inst.opcode](a, c)
    f.write(inst.operands[0], v, t)


@handles("not", mods="pred b16 b32 b64")
def not_(f, inst):
    t = inst_type(f, inst)
    (a,) = ops_in(f, inst, t)
    f.write(inst.operands[0], f.b.not_(a), t)


@handles("cnot", mods="b16 b32 b64")
def cnot(f, inst):
    t = inst_type(f, inst)
    (a,) = ops_in(f, inst, t)
    b = f.b
    v = b.zext(b.icmp_unsigned("==", a, ir.Constant(a.type, 0)), a.type)
    f.write(inst.operands[0], v, t)


@handles("shl", "shr", mods=("b16 b32 b64", INTEGERS))
def shifts(f, inst):
    t = inst_type(f, inst)
    a = f.read(inst.operands[1], t)
    n = f.read(inst.operands[2], "u32")
    f.write(inst.operands[0], bitops.shift(f.b, a, n, bitops.shift_kind(inst.opcode, t)), t)


@handles("popc", "clz", "brev", mods="b32 b64")
def count_bits(f, inst):
    t = inst_type(f, inst)
    (a,) = ops_in(f, inst, t)
    fn = {"popc": bitops.popc, "clz": bitops.clz, "brev": bitops.brev}[inst.opcode]
    f.write(inst.operands[0], fn(f.b, a), t if inst.opcode == "brev" else "u32")


@handles("bfind", mods="u32 u64 s32 s64 shiftamt")
def bfind(f, inst):
    t = inst_type(f, inst)
    (a,) = ops_in(f, inst, t)
    f.write(inst.operands[0], bitops.bfind(f.b, a, t.startswith("s"), "shiftamt" in inst.mods), "u32")


@handles("bfe", mods="u32 u64 s32 s64")
def bfe(f, inst):
    t = inst_type(f, inst)
    a = f.read(inst.operands[1], t)
    pos, ln = f.read(inst.operands[2], "u32"), f.read(inst.operands[3], "u32")
    f.write(inst.operands[0], bitops.bfe(f.b, a, pos, ln, t.startswith("s")), t)


@handles("bfi", mods="b32 b64")
def bfi(f, inst):
    t = inst_type(f, inst)
    a, c = f.read(inst.operands[1], t), f.read(inst.operands[2], t)
    pos, ln = f.read(inst.operands[3], "u32"), f.read(inst.operands[4], "u32")
    f.write(inst.operands[0], bitops.bfi(f.b, a, c, pos, ln), t)


@handles("prmt", mods=("b32", PERMUTES))
def prmt(f, inst):
    a, c, d = ops_in(f, inst, "b32")
    mode = next((m for m in inst.mods if m in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")), None)
    f.write(inst.operands[0], bitops.prmt(f.b, a, c, d, mode), "b32")


@handles("shf", mods="l r clamp wrap b32")
def shf(f, inst):
    a, c, d = ops_in(f, inst, "b32")
    f.write(inst.operands[0], bitops.shf(f.b, a, c, d, "l" in inst.mods, "clamp" in inst.mods), "b32")


@handles("lop3", mods="b32")
def lop3(f, inst):
    a, c, d = [f.read(op, "b32") for op in inst.operands[1:4]]
    lut = inst.operands[4]
    if not isinstance(lut, pir.Imm):
        raise f.error("lop3 needs an immediate LUT")
    f.write(inst.operands[0], bitops.lop3(f.b, a, c, d, lut.value & 0xFF), "b32")


@handles("bmsk", mods="clamp wrap b32")
def bmsk(f, inst):
    a, c = ops_in(f, inst, "b32")
    f.write(inst.operands[0], bitops.bmsk(f.b, a, c, "clamp" in inst.mods), "b32")


@handles("szext", mods="clamp wrap u32 s32")
def szext(f, inst):
    t = inst_type(f, inst)
    a, n = ops_in(f, inst, "b32")
    v = bitops.szext(f.b, a, n, "clamp" in inst.mods, t == "s32")
    f.write(inst.operands[0], v, t)


@handles("fns", mods="b32")
def fns(f, inst):
    mask, base = f.read(inst.operands[1], "b32"), f.read(inst.operands[2], "b32")
    offset = f.read(inst.operands[3], "s32")
    f.write(inst.operands[0], bitops.fns(f.b, mask, base, offset), "b32")


@handles("dp4a", "dp2a", mods="u32 s32 lo hi", types=2)
def dot_product(f, inst):
    ts = type_mods(inst.mods)
    a = f.read(inst.operands[1], "b32")
    c = f.read(inst.operands[2], "b32")
    d = f.read(inst.operands[3], "b32")
    a_signed, b_signed = ts[0].startswith("s"), ts[1].startswith("s")
    if inst.opcode == "dp4a":
        v = bitops.dp4a(f.b, a, c, d, a_signed, b_signed)
    else:
        v = bitops.dp2a(f.b, a, c, d, a_signed, b_signed, "hi" in inst.mods)
    f.write(inst.operands[0], v, "b32")


# ---------------------------------------------------------------------- comparisons

COMPARE_MODS = words(COMPARISONS, BOOL_MODS, "ftz b16 b32 b64", INTEGERS, FLOATS, HALVES)

INT_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
           "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
FLOAT_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
             "equ": "==", "neu": "!=", "ltu": "<", "leu": "<=", "gtu": ">", "geu": ">="}


def compare(f, cmp, t, a, c):
    """The i1 (or vector of i1) of comparison `cmp` (eq, ltu, hs, num, ...) of a and c, values
    of type t; `f` is anything with a builder `b` (the vector forms call it too)."""
    b = f.b
    if t in ("f32", "f64", "f16"):
        if cmp == "num":
            return b.fcmp_ordered("ord", a, c)
        if cmp == "nan":
            return b.fcmp_unordered("uno", a, c)
        op = FLOAT_CMP[cmp]
        if cmp.endswith("u") and cmp != "neu" or cmp == "neu":
            return b.fcmp_unordered(op, a, c)
        return b.fcmp_ordered(op, a, c)
    if t == "bf16":
        a, c = floatops.bf16_to_f32(b, a), floatops.bf16_to_f32(b, c)
        return compare(f, cmp, "f32", a, c)
    if t.startswith("s") and cmp not in ("lo", "ls", "hi", "hs"):
        return b.icmp_signed(INT_CMP[cmp], a, c)
    return b.icmp_unsigned(INT_CMP[cmp], a, c)


def compare_op(inst):
    """The comparison modifier of a set or setp."""
    return next(m for m in inst.mods if m in INT_CMP or m in FLOAT_CMP or m in ("num", "nan"))


def _bool_op(f, inst):
    """The BoolOp modifier as a function of one compare result (c is the fourth operand), or
    None."""
    bop = next((m for m in inst.mods if m in BOOL_OPS), None)
    if bop is None:
        return None
    c = f.read(inst.operands[3], "pred")
    fn = {"and": f.b.and_, "or": f.b.or_, "xor": f.b.xor}[bop]
    return lambda t: fn(t, c)


def _lane_compares(f, inst, t):
    """The compare results of set/setp on source type t: one per lane, so two for the packed
    f16x2/bf16x2 (low half first), each lane compared on its own."""
    b = f.b
    cmp = compare_op(inst)
    a, c = f.read(inst.operands[1], t), f.read(inst.operands[2], t)
    if t in ("f16x2", "bf16x2"):
        elem = t[:-2]
        pairs = list(zip(floatops.unpack2(b, a, elem), floatops.unpack2(b, c, elem)))
    else:
        elem, pairs = t, [(a, c)]
    if _ftz(inst) and elem in ("f32", "f16"):
        pairs = [(floatops.flush_denormal(b, x), floatops.flush_denormal(b, y)) for x, y in pairs]
    return [compare(f, cmp, elem, x, y) for x, y in pairs]


@handles("setp", mods=COMPARE_MODS)
def setp(f, inst):
    b = f.b
    lanes = _lane_compares(f, inst, inst_type(f, inst))
    bop = _bool_op(f, inst) or (lambda t: t)
    dst = inst.operands[0]
    if len(lanes) == 2:
        # packed: p from the low lane, q from the high one
        if not isinstance(dst, pir.Pair):
            raise f.error(f"{inst.opcode} on a packed type needs two destinations p|q")
        f.write(dst.first, bop(lanes[0]), "pred")
        f.write(dst.second, bop(lanes[1]), "pred")
    elif isinstance(dst, pir.Pair):
        f.write(dst.first, bop(lanes[0]), "pred")
        f.write(dst.second, bop(b.not_(lanes[0])), "pred")
    else:
        f.write(dst, bop(lanes[0]), "pred")


# set: the bits written for "true" by destination type (false is 0): 1.0 for a float
# destination, every bit set for an integer one; a packed source gives one 16-bit field per lane
SET_TRUE = {"f32": 0x3F800000, "f16": 0x3C00, "bf16": 0x3F80}
SET_TRUE_LANE = {"f16x2": 0x3C00, "bf16x2": 0x3F80}


@handles("set", mods=COMPARE_MODS, types=2)
def set_(f, inst):
    b = f.b
    ts = type_mods(inst.mods)
    dt, st_ = ts[0], ts[-1]
    lanes = _lane_compares(f, inst, st_)
    bop = _bool_op(f, inst) or (lambda t: t)
    lt = ir.IntType(width(dt))
    if len(lanes) == 2:
        one = SET_TRUE_LANE.get(dt, 0xFFFF)
        v = ir.Constant(lt, 0)
        for i, t in enumerate(lanes):
            v = b.or_(v, b.select(bop(t), ir.Constant(lt, one << (16 * i)), ir.Constant(lt, 0)))
    else:
        one = SET_TRUE.get(dt, (1 << width(dt)) - 1)
        v = b.select(bop(lanes[0]), ir.Constant(lt, one), ir.Constant(lt, 0))
    f.write(inst.operands[0], v, dt)


@handles("selp", mods=DATA)
def selp(f, inst):
    t = inst_type(f, inst)
    a, c = f.read(inst.operands[1], t), f.read(inst.operands[2], t)
    p = f.read(inst.operands[3], "pred")
    f.write(inst.operands[0], f.b.select(p, a, c), t)


@handles("slct", mods=("b16 b32 b64", INTEGERS, FLOATS, "ftz"), types=2)
def slct(f, inst):
    b = f.b
    ts = type_mods(inst.mods)
    a, c = f.read(inst.operands[1], ts[0]), f.read(inst.operands[2], ts[0])
    sel = f.read(inst.operands[3], ts[1])
    if ts[1] == "f32":
        if _ftz(inst):        # a negative subnormal selector is -0, which selects a
            sel = floatops.flush_denormal(b, sel)
        p = b.fcmp_ordered(">=", sel, ir.Constant(sel.type, 0.0))
    else:
        p = b.icmp_signed(">=", sel, ir.Constant(sel.type, 0))
    f.write(inst.operands[0], b.select(p, a, c), ts[0])


# ---------------------------------------------------------------------- control flow

@handles("bra", mods="uni")
def bra(f, inst):
    b = f.b
    target = inst.operands[0]
    if not isinstance(target, pir.Sym) or target.name not in f.labels:
        raise f.error(f"unknown branch target {target}")
    blk = f.labels[target.name]
    if inst.guard is None:
        b.branch(blk)
        return
    g = f.read(inst.guard.reg, "pred")
    if inst.guard.negated:
        g = b.not_(g)
    fall = f.fn.append_basic_block("fall")
    if f.is_kernel and f.inst_pos in f.known_branches:
        # a round whose block passed the probe does not take it (compiler/analysis/guards.py; the
        # resume argument is a constant at each call of a round, so one way folds away)
        normal = f.fn.append_basic_block("guard")
        b.cbranch(b.icmp_signed("!=", b.and_(f.fn.args[1], i32(guards.PASSED)), i32(0)), fall, normal)
        b.position_at_end(normal)
    b.cbranch(g, blk, fall)
    b.position_at_end(fall)


@handles("brx", mods="idx uni")
def brx(f, inst):
    b = f.b
    idx = f.read(inst.operands[0], "u32")
    targets = f.branch_targets.get(inst.operands[1].name)
    if targets is None:
        raise f.error("brx.idx needs a .branchtargets list")
    default = f.fn.append_basic_block("brx.bad")
    sw = b.switch(idx, default)
    for i, name in enumerate(targets):
        sw.add_case(i32(i), f.labels[name])
    b.position_at_end(default)
    f.emit_trap()


@handles("ret", mods="uni")
def ret(f, inst):
    f.emit_return()


@handles("exit", mods="")
def exit_(f, inst):
    f.emit_exit()


@handles("trap", mods="")
def trap(f, inst):
    f.emit_trap()


@handles("call", mods="uni")
def call(f, inst):
    lower_call(f, inst)


# ---------------------------------------------------------------------- atomics

# atom and red, all their orderings seq_cst: not the vector forms, nor 128-bit exchanges
ATOMIC_MODS = words("global shared shared::cta shared::cluster relaxed acquire release acq_rel", SCOPES, REDUCTIONS,
                    "cas exch noftz", CACHE_HINT, "b16 b32 b64 u32 u64 s32 s64", FLOATS, HALVES)


@handles("atom", "red", mods=ATOMIC_MODS)
def atom(f, inst):
    if aggregation.combinable(f, inst, f.inst_pos):     # one address per block: one atomic per block
        aggregation.lower_combined(f, inst)
    elif f.atomic_table is not None:                    # held per address (ops/atomictable.py)
        atomictable.lower(f, inst)
    else:
        atomics.lower_atomic(f, inst)
