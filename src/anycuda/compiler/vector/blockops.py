"""The instructions of a block program (blockprograms.py), on all of a block's lanes at once.

warpruns' vector forms do the arithmetic; these keep the shapes of what they compute (Affine:
lane t holds base + stride * t) and add what a whole block does: memory (through the
program's accesses, blockmemory.py), barriers, shuffles within each warp. OPS is the table;
TAKES the modifiers each form handles (an instruction with another one is not taken, and
the kernel keeps the rounds).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from llvmlite import ir

from ...ptx import ir as pir
from ...ptx.modifiers import DATA, MODIFIERS
from ..analysis import memory
from ..irutil import convert_bits, i32, i64, intrinsic
from ..ops import aggregation, atomics
from ..simt.collectives import shfl_source
from ..types import I1, I32, I64, llvm_type, space_of, type_mods, width
from . import blockcopies, warpmatrix
from .regionops import REGION_MODS, REGION_OPS
from .warpruns import VECTOR_MODS, VECTOR_OPS, NotVectorisable, fixed_shuffle

WARP = 32
MAX_STRIDE = 1 << 30       # a larger stride is not worth tracking (and may not fit an i64 product)
# the spaces of a block program's loads and stores, and cache operators, which do not change
# what an access does
_MEMORY_MODS = frozenset(("global", "shared", "param", "const", "nc", "ca", "cg", "cs", "lu", "cv", "wb", "wt"))
_VECTORS = frozenset(("v2", "v4"))      # float2, float4, int4, ...: element by element


@dataclass
class Affine:
    """A register whose lane t holds base + stride * t (in its own width, wrapping), where
    `exact` (an i1, or None for always) holds."""
    base: ir.Value
    stride: int
    exact: ir.Value | None = None
    align: int = 1            # a power of two that divides base (32 for a warp's first thread)


def and_scalar(b, a, c):
    return c if a is None else b.and_(a, c)


def holding_if(b, shape, cond):
    """`shape` on the further condition `cond` (an i1, checked at run time)."""
    return replace(shape, exact=and_scalar(b, shape.exact, cond))


def _shaped(kind, ops=VECTOR_OPS):
    """A vector form of `ops` (warpruns' by default) that also derives the Affine shape of
    its result."""
    def run(w, st):
        shape = _shape_of(w, st, kind)          # (from the operands before the write: `add %r, %r, 8`)
        high = _high_bits_alike(w, st) if shape is None and kind == "shr" else None
        form = w.sum_form(st, kind) if shape is None else None      # (blockforms.py)
        ops[st.opcode](w, st)
        if form is not None:
            shape = w.keep_form(st.operands[0], form)
        w.set_shape(st.operands[0], shape)
        w.high_alike = None if high is None else (w.position, st.operands[0].name, *high)
    return run


def _high_bits_alike(w, st):
    """(value, q, exact) where `shr` of a ramp leaves the bits from q up alike in every lane (as
    value's), though the whole is no ramp: nvcc writes `threadIdx.x / 32 * 4` (a warp's slot in
    a block reduction's shared array) as `(tid >> 3) & ~3`, which the `and` after it makes
    uniform (_and_of_high_bits). The lanes' values lie in one aligned run of 2^k (their span
    below 2^k, their first a multiple of it), so their bits from k up are the first lane's."""
    t = type_mods(st.mods)[-1]
    a, c = w.shape(st.operands[1], t), w.shape(st.operands[2], t)
    if a is None or c is None or c.stride != 0 or not isinstance(c.base, ir.Constant) or a.stride <= 0:
        return None
    k = _known_run_bits(a, w.lanes)
    n = c.base.constant
    if k is None or n >= width(t):
        return None
    return (w.b.ashr if t[0] == "s" else w.b.lshr)(a.base, c.base), max(k - n, 0), a.exact


def _and_of_high_bits(w, st, c):
    """The uniform shape of `and r, x, m` right after `shr x, ...` left x's bits from q up alike
    in the lanes (_high_bits_alike), where m keeps none below q; else None."""
    src = st.operands[1]
    if w.high_alike is None or not isinstance(src, pir.Reg) or c is None or c.stride != 0 \
            or not isinstance(c.base, ir.Constant):
        return None
    pos, reg, value, q, exact = w.high_alike
    if pos != w.position - 1 or reg != src.name or c.base.constant & ((1 << q) - 1):
        return None
    return Affine(w.b.and_(value, c.base), 0, exact)


def _affine(base, stride, exact, align=1):
    return Affine(base, stride, exact, min(align, MAX_STRIDE)) if abs(stride) < MAX_STRIDE else None


def constant_shape(value, stride=0):
    """The shape of a constant (its alignment: the lowest bit set)."""
    v = value.constant
    return Affine(value, stride, None, (v & -v) if v else MAX_STRIDE)


def _within_warp(b, st, t, kind, a, c, exact, lanes):
    """`a >> n`, `a & (2^n - 1)` and `a & m` (m without bits below n) of a ramp whose `lanes`
    lanes stay within one aligned run of 2^n values (`tid.x >> 5` is the warp's index, alike in
    its lanes; `tid.x & 31` the lane; `t & -32` the warp's first thread): uniform, the lane's
    own ramp, uniform. Where the alignment is not known (nvcc's `int t = threadIdx.x; t / 32`
    adds its rounding, `(t >> 31) >>> 27`, before it shifts), that the lanes stay within one
    run is checked at run time (_one_run)."""
    if not (isinstance(c.base, ir.Constant) and c.stride == 0):
        return None
    m = c.base.constant
    if a.stride == 0:
        op = b.and_ if kind == "and" else (b.ashr if t[0] == "s" else b.lshr)
        return Affine(op(a.base, c.base), 0, exact)
    if kind == "shr":
        n = m
    elif m == (1 << ((m + 1).bit_length() - 1)) - 1:
        n = (m + 1).bit_length() - 1                  # the low n bits: the lane's place in its run
    else:
        n = (m & -m).bit_length() - 1 if m else width(t)    # none below n: the run's start
    if a.stride <= 0 or n <= 0 or n >= width(t) or not a.stride * (lanes - 1) < (1 << n):
        return None
    static, inside = _one_run(b, a, n, lanes)
    exact = exact if static else and_scalar(b, exact, inside)
    if kind == "shr":
        return Affine((b.ashr if t[0] == "s" else b.lshr)(a.base, c.base), 0, exact, max(a.align >> n, 1))
    if m == (1 << n) - 1:
        if (1 << n) <= a.align:                         # (the run starts at the first lane)
            return Affine(ir.Constant(a.base.type, 0), a.stride, exact, MAX_STRIDE)
        return Affine(b.and_(a.base, c.base), a.stride, exact)
    return Affine(b.and_(a.base, c.base), 0, exact, min(1 << n, MAX_STRIDE))


def _known_run_bits(a, lanes):
    """k where the alignment of ramp `a` (a positive stride) shows its lanes lie in one aligned
    run of 2^k values (their span below 2^k, their first a multiple of it), else None."""
    k = (a.stride * (lanes - 1)).bit_length()
    return k if (1 << k) <= a.align else None


def _one_run(b, a, n, lanes):
    """(known, inside): whether the lanes of ramp `a` (a positive stride spanning less than
    2^n) lie in one aligned run of 2^n values is known from its alignment (_known_run_bits: a
    run of 2^k, k <= n, lies in one of 2^n), else `inside`, its test at run time."""
    if _known_run_bits(a, lanes) is not None:
        return True, None
    low = b.and_(a.base, ir.Constant(a.base.type, (1 << n) - 1))
    return False, b.icmp_unsigned("<", b.add(low, ir.Constant(a.base.type, a.stride * (lanes - 1))),
                                  ir.Constant(a.base.type, 1 << n))


def _shape_of(w, st, kind):
    ts = type_mods(st.mods)
    if not ts or ts[-1][0] not in "bus" or isinstance(st.operands[0], pir.Pair):
        return None
    t = ts[-1]
    b = w.b
    if kind == "mov":
        return w.shape(st.operands[1], t)
    if kind == "neg":
        # (nvcc's `-(size_t)nx` for a step back by a row or a plane)
        a = w.shape(st.operands[1], t)
        return None if a is None else _affine(b.neg(a.base), -a.stride, a.exact, a.align)
    a = w.shape(st.operands[1], t)
    c = w.shape(st.operands[2], t)
    if a is None and kind == "and":
        return _and_of_high_bits(w, st, c)
    if a is None or c is None:
        return None
    if kind in ("add", "sub"):
        return shape_sum(b, a, c, 1 if kind == "add" else -1)
    exact = a.exact if c.exact is None else and_scalar(b, a.exact, c.exact)
    if kind in ("shr", "and"):
        return _within_warp(b, st, t, kind, a, c, exact, w.lanes)
    if kind in ("mul", "mad") and "hi" not in st.mods:
        times = product(b, a, c, exact)
        if times is None or kind == "mul":
            return times
        d = w.shape(st.operands[3], t)
        return None if d is None else shape_sum(b, times, d)
    if not (isinstance(c.base, ir.Constant) and c.stride == 0):
        return None
    n = c.base.constant
    if kind == "shl" and n < width(t):
        return _affine(b.shl(a.base, c.base), a.stride << n, exact, a.align << n)
    return None


def shape_sum(b, a, c, sign=1):
    """The shape of a + c (sign 1) or a - c (sign -1): exact where both are."""
    exact = a.exact if c.exact is None else and_scalar(b, a.exact, c.exact)
    return _affine((b.add if sign > 0 else b.sub)(a.base, c.base), a.stride + sign * c.stride, exact,
                   min(a.align, c.align))


def product(b, a, c, exact):
    """The shape of a * c: uniform times uniform, or a ramp times a constant."""
    if a.stride == 0 and c.stride == 0:
        return _affine(b.mul(a.base, c.base), 0, exact, a.align * c.align)
    for ramp, k in ((a, c), (c, a)):
        if k.stride == 0 and isinstance(k.base, ir.Constant):
            return _affine(b.mul(ramp.base, k.base), ramp.stride * k.base.constant, exact, ramp.align * k.align)
    return None


def _mul(w, st):
    """mul.lo (warpruns), mul.hi (warp regions) and mul.wide: the product of two values of
    type t in twice its width."""
    if "hi" in st.mods:
        return REGION_OPS["mul"](w, st)
    if "wide" not in st.mods:
        return _SHAPED["mul"](w, st)
    t = type_mods(st.mods)[-1]
    if t not in ("s16", "u16", "s32", "u32"):
        raise NotVectorisable(f"mul.wide.{t}")
    b = w.b
    wide_t = t[0] + str(2 * width(t))
    wide = llvm_type(wide_t)
    ext = b.sext if t[0] == "s" else b.zext
    a, c = (ext(w.read(op, t), w._vec(wide)) for op in st.operands[1:3])
    sa, sc = w.shape(st.operands[1], t), w.shape(st.operands[2], t)
    w.write(st.operands[0], b.mul(a, c), wide_t)
    if sa is None or sc is None:
        return
    if sa.stride == 0 and sc.stride == 0:
        # alike in every lane (a row's start, `(size_t)row * C`): the product of the two
        # widened values, which no lane can take out of range
        w.set_shape(st.operands[0], _affine(b.mul(ext(sa.base, wide), ext(sc.base, wide)), 0,
                                            and_scalar(b, sa.exact, sc.exact) if sc.exact is not None else sa.exact))
        return
    if sc.stride != 0 and sa.stride == 0 and isinstance(sa.base, ir.Constant):
        sa, sc = sc, sa                 # the constant second: `mul.wide 4, i` as `mul.wide i, 4`
    if sc.stride == 0 and isinstance(sc.base, ir.Constant):
        widened = w.widened(sa, t, 2 * width(t))
        n = sc.base.constant if t[0] == "u" else _signed(sc.base.constant, width(t))
        w.set_shape(st.operands[0], _affine(b.mul(widened.base, ir.Constant(wide, n & ((1 << (2 * width(t))) - 1))),
                                            widened.stride * n, widened.exact))


def _signed(v, bits):
    return v - (1 << bits) if v >> (bits - 1) else v


def _mov(w, st):
    src = st.operands[1]
    if isinstance(src, pir.Vec) or isinstance(st.operands[0], pir.Vec):
        return _mov_parts(w, st)
    if isinstance(src, pir.SpecialReg):
        t = type_mods(st.mods)[-1]
        value, shape = w.shaped_special(src)
        w.write(st.operands[0], convert_bits(w.b, value, llvm_type(t), False), t)
        if shape is not None and width(t) == 32:
            w.set_shape(st.operands[0], shape)
        return
    _SHAPED["mov"](w, st)


def _mov_parts(w, st):
    """`mov.b64 {lo, hi}, x` and `mov.b64 x, {lo, hi}` (and .b32 of two halves, four parts of
    .b64): a register taken apart into its parts, the first the lowest bits, or made of them;
    nvcc moves a double through a shuffle so (`__shfl_down_sync` of a double: two 32-bit
    shuffles), and half2 values so. `_` takes no part."""
    t = type_mods(st.mods)[-1]
    dst, src = st.operands[0], st.operands[1]
    parts = (dst if isinstance(dst, pir.Vec) else src).items
    if t[0] != "b" or width(t) % len(parts) or isinstance(dst, pir.Vec) == isinstance(src, pir.Vec):
        raise NotVectorisable(f"mov.{t} of {len(parts)} parts")
    b, bits = w.b, width(t) // len(parts)
    whole_ty, part_ty = ir.VectorType(ir.IntType(width(t)), w.lanes), ir.VectorType(ir.IntType(bits), w.lanes)

    def shift(j):
        return ir.Constant(whole_ty, [j * bits] * w.lanes)
    if isinstance(dst, pir.Vec):
        whole = convert_bits(b, w.read(src, t), ir.IntType(width(t)))
        pieces = [(item, b.trunc(b.lshr(whole, shift(j)), part_ty)) for j, item in enumerate(parts)
                  if not (isinstance(item, pir.Sym) and item.name == "_")]
        for item, piece in pieces:        # (after taking every part: a part may be the source)
            w.write(item, piece, f"b{bits}")
        return
    value = ir.Constant(whole_ty, None)
    for j, item in enumerate(parts):
        piece = convert_bits(b, w.read(item, f"b{bits}"), ir.IntType(bits))
        value = b.or_(value, b.shl(b.zext(piece, whole_ty), shift(j)))
    w.write(dst, value, t)


# Volatile loads and stores are taken as plain ones. In the block's shared memory (the
# warp-synchronous idiom's `volatile` sdata, nvcc's scan sample) a block program is one order
# of the block's threads, a warp's lanes in step and the warps one after another between
# barriers, each access made where the program says, so volatile adds nothing. In global
# memory (CUDA's __threadfence example reads the other blocks' partial sums through a volatile
# pointer) each access is made where the program says too, once: nothing is read again from
# what was loaded before a fence or an atomic (_fence, BlockMemory.each_lane_update), and a
# volatile store never streams past the caches. A spin on a word, where volatile matters, is
# left to the rounds (check_takes).
def _ld(w, st):
    t = type_mods(st.mods)[-1]
    if t[0] not in "bsuf" or width(t) < 8 or t in ("f16", "bf16"):
        raise NotVectorisable(f"ld.{t}")
    elem = llvm_type(t)
    if "param" in st.mods:
        if isinstance(st.operands[0], pir.Vec):
            raise NotVectorisable("ld.param of a vector")
        return _ld_param(w, st, t, elem)
    size = width(t) // 8
    loaded = []
    for item, addr in _elements(st.operands[0], st.operands[1], size):
        addrs, shape = w.access(st, addr)
        loaded.append((item, w.load(addrs, shape, elem, size, register_part(addr)), shape))
    for item, value, shape in loaded:   # (after every load: a destination may be the address register)
        w.write(item, value, t)
        w.set_shape(item, _alike_loaded(w, item, value, shape, t))


def _alike_loaded(w, item, value, address_shape, t):
    """The shape of an integer every lane loaded from one address (CSR's `rowptr[row]` in a
    warp per row): alike in every lane where the address's shape holds, so that the indices
    made from it (`rowptr[row] + lane`) keep theirs and their loads are vector loads, not a
    gather whose addresses are looked at each time."""
    if address_shape is None or address_shape.stride != 0 or t[0] not in "bsu" or not isinstance(item, pir.Reg):
        return None
    lane0 = convert_bits(w.b, w.b.extract_element(value, i32(0)), w._reg_type(item.name), t[0] == "s")
    return Affine(lane0, 0, address_shape.exact)


def _elements(data, addr, size):
    """[(data operand, its element's address)] of a load or store: one, or each element of
    a .v2/.v4 vector at its offset (a float4's four floats: a group of interleaved accesses,
    blockmemory.load/store, that becomes one access of the lanes' span). A `_` element of
    a load is not loaded."""
    if not isinstance(data, pir.Vec):
        return [(data, addr)]
    if not isinstance(addr, pir.Addr):
        addr = pir.Addr(addr, 0)
    return [(item, pir.Addr(addr.base, addr.offset + i * size)) for i, item in enumerate(data.items)
            if not (isinstance(item, pir.Sym) and item.name == "_")]


def _ld_param(w, st, t, elem):
    op = st.operands[1]
    params = w.layout.kernel_params(w.pfn)
    if not isinstance(op, pir.Addr) or not isinstance(op.base, pir.Sym) or op.base.name not in params:
        raise NotVectorisable("ld.param of something else than a kernel parameter")
    b = w.b
    # in the entry block: alike for every warp, and a value later stretches can compute from
    # (recompute.py) rather than keep
    with b.goto_block(w.fn.entry_basic_block):
        ptr = b.bitcast(b.gep(w.params, [i64(params[op.base.name].offset + op.offset)]), elem.as_pointer())
        value = b.load(ptr, align=max(width(t) // 8, 1))
    w.write(st.operands[0], w.splat(value), t)
    if t[0] in "bus" and isinstance(st.operands[0], pir.Reg):
        # in the register's width: nvcc loads an int parameter into a 64-bit register
        # (`ld.param.s32 %rd3`) for a size_t product, whose shape was lost with a narrower base
        kept = convert_bits(b, value, w._reg_type(st.operands[0].name), t[0] == "s")
        w.set_shape(st.operands[0], Affine(kept, 0))


def _st(w, st):
    t = type_mods(st.mods)[-1]
    if t[0] not in "bsuf" or width(t) < 8 or t in ("f16", "bf16"):
        raise NotVectorisable(f"st.{t}")
    size = width(t) // 8
    # (a group of interleaved stores is made at its last part: that part decides)
    w.streaming = memory.streams(st, w.read_memory) and "volatile" not in st.mods
    for item, addr in _elements(st.operands[1], st.operands[0], size):
        addrs, shape = w.access(st, addr)
        w.store(addrs, shape, w.read(item, t), size, register_part(addr))
    w.streaming = False


def _atom(w, st):
    """atom and red in the block's shared memory or in global memory, outside loops: lane
    after lane in lane order (lanes' atomics in some order is what a GPU gives too), each a
    plain update in shared memory (only this worker touches the block's own) and an atomic
    one in global memory, where other blocks run on other workers (the last block of a
    threadFenceReduction takes its ticket so). cub's block radix sort counts a tile's
    digits in shared memory, eight atomics a thread in straight code, which kept its scatter
    in the rounds (~29 ms a launch of 2,048 tiles). In a loop an atomic keeps the rounds: a
    spin on a lock would wait in a block program for warps that run after it (a hang), and
    the warp regions' lane loops count a shared histogram 7x faster than a loop of lanes here
    (NOTES.md)."""
    space = space_of(st)
    if space not in ("shared", "global"):
        raise NotVectorisable(f"{st.opcode} outside shared and global memory")
    if any(head <= w.position <= back for head, back in {**w.loops, **w.barrier_loops}.items()):
        raise NotVectorisable(f"{st.opcode} in a loop")
    ops, kind, t = atomics.lane_form(st)
    op = atomics.operation(st)
    if kind is None and t is not None and atomics.wraps(op, t):
        kind = op
    if kind is None or not isinstance(ops[1], (pir.Addr, pir.Reg)) or {"v2", "v4", "v8"} & set(st.mods):
        raise NotVectorisable(f"{st.opcode} {st.mods}")
    b, private = w.b, space == "shared"
    atomics.fence_before_release(b, st)
    addrs, _ = w.access(st, ops[1] if isinstance(ops[1], pir.Addr) else pir.Addr(ops[1], 0))
    values = [w.read(op, t) for op in ops[2:]]
    flush = atomics.flushes_subnormals(st) if kind == "fadd" and t == "f32" else None

    def update(p, v):
        if kind == "cas":
            return atomics.compare_and_swap(b, private, p, *v)
        if kind in atomics.WRAPPING:
            return atomics.wrapping_step(b, kind, private, p, v[0])
        return atomics.rmw(b, private, kind, p, v[0], flush)
    old = w.each_lane_update(addrs, llvm_type(t), values, update)
    if ops[0] is not None:
        w.write(ops[0], old, t)


def _fence(w, st):
    """membar and fence: nothing at the block's scope (its threads run on this worker, in the
    program's order), else a sequentially consistent fence, as in the rounds (ops/instructions.py):
    what other blocks, on other workers, read after their own fence or atomic."""
    if "cta" not in st.mods:
        w.b.fence("seq_cst")
        w.forget_loaded()


def register_part(addr):
    """(register, offset) of an address `[%r + offset]`, else None."""
    return (addr.base.name, addr.offset) if isinstance(addr, pir.Addr) and isinstance(addr.base, pir.Reg) else None


def load_bases(body) -> set:
    """Registers that loads read at two or more offsets (a vector load's elements among
    them): a group of interleaved loads."""
    offsets = {}
    for st in body:
        if isinstance(st, pir.Instruction) and st.opcode == "ld" and type_mods(st.mods):
            size = width(type_mods(st.mods)[-1]) // 8
            for _, addr in _elements(st.operands[0], st.operands[1], size):
                part = register_part(addr)
                if part is not None:
                    offsets.setdefault(part[0], set()).add(part[1])
    return {r for r, seen in offsets.items() if len(seen) > 1}


def _cvta(w, st):
    """Generic addresses of global memory are the addresses; shared memory's are its
    window's base plus the offset (FunctionLowering.symbol_address)."""
    t = type_mods(st.mods)[-1]
    b = w.b
    value = convert_bits(b, w.read(st.operands[1], t), I64, False)
    shape = w.shape(st.operands[1], t)
    if "shared" in st.mods:
        step = b.sub if "to" in st.mods else b.add
        value = step(value, w.splat(w.shared_base))
        shape = Affine(step(shape.base, w.shared_base), shape.stride, shape.exact) if shape and width(t) == 64 else None
    elif "global" not in st.mods:
        raise NotVectorisable(f"cvta with {st.mods}")
    w.write(st.operands[0], value, t)
    w.set_shape(st.operands[0], shape)


def _cvt(w, st):
    """Between integer types: extended by the source's signedness, or truncated (a
    truncation keeps the shape: it is the same ramp, modulo the narrower width). To and
    between floats: warp regions' forms (integer to float to nearest, f32 <-> f64)."""
    ts = type_mods(st.mods)
    if len(ts) != 2 or any(t[0] not in "bus" or t == "b128" for t in ts) or set(st.mods) - set(ts):
        return REGION_OPS["cvt"](w, st)
    to, frm = ts
    b = w.b
    v = w.read(st.operands[1], frm)
    shape = w.shape(st.operands[1], frm)
    if width(to) > width(frm):
        v = (b.sext if frm[0] == "s" else b.zext)(v, w._vec(llvm_type(to)))
        shape = w.widened(shape, frm, width(to)) if shape is not None else None
    elif width(to) < width(frm):
        v = b.trunc(v, w._vec(llvm_type(to)))
        shape = Affine(b.trunc(shape.base, llvm_type(to)), shape.stride, shape.exact) if shape is not None else None
    w.write(st.operands[0], v, to)
    w.set_shape(st.operands[0], shape)


def _barrier(w, st):
    """Every lane is at the same point of the program: a barrier of the whole block is nothing,
    and so is a warp's (`bar.warp.sync`, __syncwarp: its lanes run in step, and it is no
    stretch's end, blockstretches.py)."""
    if "warp" in st.mods:
        w.need_warps("bar.warp.sync")
        return
    if len(st.operands) != 1 or not isinstance(st.operands[0], pir.Imm) \
            or st.operands[0].value != 0 or st.guard is not None:
        raise NotVectorisable(f"{st.opcode} with {st.mods}")


def _shuffle(w, st):
    """A fixed shuffle: within each warp, each lane takes its source lane's value. Its member
    mask may be anything (a ballot's, for a block narrower than a warp): a lane reading a lane
    outside the mask gets an undefined value, and the lane's register is one."""
    w.need_warps("shfl")
    fixed = fixed_shuffle(st, w.constants, any_mask=True)
    if fixed is None:
        raise NotVectorisable("a shuffle with operands known only at run time")
    mode, lane_op, clamp = fixed
    srcs = [shfl_source(mode, lane, lane_op, clamp) for lane in range(WARP)]
    index = [t - t % WARP + srcs[t % WARP][0] for t in range(w.lanes)]
    a = w.read(st.operands[1], "b32")
    moved = w.b.shuffle_vector(a, ir.Constant(a.type, None), ir.Constant(ir.VectorType(I32, w.lanes), index))
    dst = st.operands[0]
    if isinstance(dst, pir.Pair):
        w.write(dst.first, moved, "b32")
        w.write(dst.second, w.lane_constant((int(srcs[t % WARP][1]) for t in range(w.lanes)), I1), "pred")
    else:
        w.write(dst, moved, "b32")


def _member_masks(w, st, index):
    """(the lanes running here, <32 x i1>; the member mask operand's lanes (i32), or None where
    there is none) of a warp collective."""
    w.need_warps(st.opcode)
    lanes = ir.Constant(ir.VectorType(I1, WARP), [1] * WARP) if w.mask is None else w.mask
    return lanes, (w.read(st.operands[index], "b32") if len(st.operands) > index else None)


def _alike_mask(w, st, index) -> bool:
    """Whether every lane names the same member mask (none, a number, a register alike in the
    lanes): the members are then one group."""
    op = st.operands[index] if len(st.operands) > index else None
    return op is None or isinstance(op, pir.Imm) or (isinstance(op, pir.Reg) and
                                                   (op.name in w.uniform or op.name in w.constants))


def _own_members(w, lanes, masks):
    """<32 x i1>: the running lanes whose bit is set in their lane of `masks` (all where None):
    the members, where every lane names the same mask."""
    if masks is None:
        return lanes
    bit = w.b.lshr(masks, w.lane_constant(range(WARP)))
    return w.b.and_(lanes, w.b.trunc(bit, ir.VectorType(I1, WARP)))


def _ballot(w, p, lanes):
    """i32: the bits of the running lanes where predicate vector `p` holds."""
    return w.b.bitcast(w.b.and_(p, lanes), I32)


def _vote(w, st):
    """vote.sync: ballot (a bit per member lane), all, any, uni, over each lane's members
    (its own mask's running lanes: cooperative groups' tiles give each tile's lanes theirs)."""
    mode = next(m for m in st.mods if m in ("all", "any", "uni", "ballot"))
    lanes, masks = _member_masks(w, st, 2)
    p = w.read(st.operands[1], "pred")
    b = w.b
    masks = masks if masks is not None else w.splat(i32(-1))
    holds = b.and_(w.splat(_ballot(w, p, lanes)), masks)
    if mode == "ballot":
        return w.write(st.operands[0], holds, "b32")
    fails = b.and_(w.splat(_ballot(w, b.not_(p), lanes)), masks)
    zero = w.splat(i32(0))
    some, none_fails = b.icmp_unsigned("!=", holds, zero), b.icmp_unsigned("==", fails, zero)
    value = {"any": some, "all": none_fails, "uni": b.or_(none_fails, b.not_(some))}[mode]
    w.write(st.operands[0], value, "pred")


def _redux(w, st):
    """redux.sync (add, min, max of 32-bit integers; and, or, xor of bits) over each lane's
    members: one reduction where the lanes name one mask, else one for each lane (the
    tiles of cooperative groups, each its own mask). The operation as an atomic's (its
    identity aggregation's), LLVM's reduction naming signed min and max smin and smax."""
    t = type_mods(st.mods)[-1]
    kind = atomics.rmw_kind(next(m for m in st.mods if m in ("add", "min", "max", "and", "or", "xor")), t)
    reduce = f"llvm.vector.reduce.{_SIGNED_REDUCE.get(kind, kind)}.v{WARP}i32"
    lanes, masks = _member_masks(w, st, 2)
    b = w.b
    v = convert_bits(b, w.read(st.operands[1], t), I32)
    identity = w.splat(aggregation.identity(kind, I32))

    def total(members):
        return intrinsic(b, reduce, I32, [b.select(members, v, identity)])
    if _alike_mask(w, st, 2):
        return w.write(st.operands[0], w.splat(total(_own_members(w, lanes, masks))), t)
    result = ir.Constant(v.type, None)
    for lane in range(WARP):
        members = _own_members(w, lanes, w.splat(b.extract_element(masks, i32(lane))))
        result = b.insert_element(result, total(members), i32(lane))
    w.write(st.operands[0], result, t)


_SIGNED_REDUCE = {"min": "smin", "max": "smax"}     # atomicrmw's names -> LLVM's reductions'


def _activemask(w, st):
    """activemask: the lanes running here (a GPU may give any that are; these run in step)."""
    lanes, _ = _member_masks(w, st, len(st.operands))
    w.write(st.operands[0], w.splat(w.b.bitcast(lanes, I32)), "b32")


_SHAPED = {kind: _shaped(kind) for kind in ("mov", "add", "sub", "shl", "shr", "and", "mul", "mad")}
# floats' roots, reciprocals and approximations (ex2: expf), negation and absolute values as
# warp regions make them
_AS_IN_REGIONS = ("rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh", "neg", "abs")
OPS = {**VECTOR_OPS, **_SHAPED, "mul": _mul, "mov": _mov, "ld": _ld, "st": _st, "cvta": _cvta, "cvt": _cvt,
       "bar": _barrier, "barrier": _barrier, "shfl": _shuffle, "vote": _vote, "redux": _redux,
       "activemask": _activemask, **{op: REGION_OPS[op] for op in ("bfe", "bfi", "bmsk", "div", "rem")},
       "atom": _atom, "red": _atom, "membar": _fence, "fence": _fence,
       **{op: REGION_OPS[op] for op in _AS_IN_REGIONS}, "neg": _shaped("neg", REGION_OPS), **warpmatrix.OPS,
       **blockcopies.OPS}
# atomics of the block's own shared memory, spelled `.shared` as its loads and stores are
# (BlockMemory.access; not a cluster's: another block's, on another worker), and of global memory
_ATOMICS = (REGION_MODS["atom"] - {"shared::cta", "shared::cluster"}) | {"inc", "dec"}
# The modifiers each form handles (an allow-list, ops.table.takes): warpruns' and warp regions'
# for the forms taken from there; loads and stores of one element or a .v2/.v4 vector, in
# the spaces and with the cache operators of _MEMORY_MODS (not ordered, not .param stores);
# cvta of global and shared memory; integer division and remainder with no modifier but the type.
TAKES = {
    **VECTOR_MODS,
    "mul": REGION_MODS["mul"],
    "ld": DATA | _MEMORY_MODS | _VECTORS | {"volatile"},
    "st": DATA | (_MEMORY_MODS - {"param"}) | _VECTORS | {"volatile"},
    "cvta": frozenset(("to", "global", "shared", "u32", "u64")),
    "cvt": REGION_MODS["cvt"],
    **dict.fromkeys(("bar", "barrier"), frozenset(("sync", "aligned", "warp"))),
    "vote": frozenset(("sync", "all", "any", "uni", "ballot", "pred", "b32")),
    "redux": frozenset(("sync", "add", "min", "max", "and", "or", "xor", "u32", "s32", "b32")),
    "activemask": frozenset(("b32",)),
    **{op: REGION_MODS[op] for op in ("bfe", "bfi", "bmsk")},
    "div": REGION_MODS["div"],
    "rem": REGION_MODS["rem"],
    **dict.fromkeys(("atom", "red"), _ATOMICS),
    **dict.fromkeys(("membar", "fence"), MODIFIERS["membar"] | MODIFIERS["fence"]),
    **{op: REGION_MODS[op] for op in _AS_IN_REGIONS},
    **warpmatrix.TAKES,
    **blockcopies.TAKES,
}
assert set(TAKES) == set(OPS)


# ---------------------------------------------------------------------- masks of lanes
# A mask is a <lanes x i1> value, or None for every lane; an undefined constant is no lane.

def is_empty(mask) -> bool:
    """A constant mask of no lane (llvmlite makes a vector constant of None all zeros)."""
    if not isinstance(mask, ir.Constant):
        return False
    c = mask.constant
    return c is None or isinstance(c, (tuple, list)) and not any(getattr(x, "constant", x) for x in c)


def and_masks(b, a, c):
    """Masks (None: every lane) and-ed."""
    if a is None:
        return c
    if c is None:
        return a
    if is_empty(a) or is_empty(c):
        return a if is_empty(a) else c
    return b.and_(a, c)


def or_masks(b, a, c):
    if a is None or c is None:
        return None
    if is_empty(a):
        return c
    if is_empty(c):
        return a
    return b.or_(a, c)

