"""Warp matrix instructions: mma.sync, mma.sp, wmma, ldmatrix, stmatrix, movmatrix.

Each lane holds a fragment of each matrix (fragments.py), and what a lane gets depends on
the other lanes' fragments, so these are warp collectives (analysis/suspensions.py): a lane
stores its operand registers in its frame's matrix area (`_area`: one 8-byte slot per
register) and suspends at a site of kind "matrix" whose op_a is the address of a resolver
function and op_b the area's frame offset. When the warp's lanes are there, the scheduler
(simt/collectives.py) calls the resolver once for the warp; it reads every lane's area and
writes each lane's result slots, which the lane copies to its destination registers when
it resumes. A resolver is made once per form and module (`_resolver`):

  product    D = A * B + C: the lanes' A, B and C fragments gathered into whole matrices
             (a lane outside the group, one that exited, gives zeros), multiplied, D scattered
             into the lanes' result slots. mma.sync, mma.sp and wmma.mma; the quad pairs'
             m8n8k4 is four products, its fragments four matrices stacked (Product.batches).
  ldmatrix / stmatrix   rows of 8 b16 elements at the addresses lanes 8m .. 8m+7 give,
             into (out of) every lane's registers, transposed with .trans.
  movmatrix  an 8x8 b16 matrix transposed across the lanes.

wmma.load and wmma.store are not collectives: our wmma layout (fragments.wmma_fragment) is a
function of the lane, so each lane loads and stores its own elements.
In a block program, where a warp's registers are vectors, none of these is a collective: the
program calls the same product (warp_product) with the warp's registers in an array
(compiler/vector/warpmatrix.py).

Arithmetic, exactly: each element of D is its C element (converted exactly: f16 to f32, s32
to 64 bits) plus the products A[r][k] * B[k][c] added in the order k = 0, 1, ..., K - 1.
.f16, .bf16, .tf32, .e4m3 and .e5m2 multiplicands are converted to f32 exactly (a .tf32
operand's low 13 bits are ignored, as the ISA's tf32 format has none), so each product is
exact in f32 (but for a .bf16 or .tf32 product beyond f32's range, which rounds as an f32
multiplication does) and each addition rounds once to nearest even (for .f16, .e4m3 and .e5m2, whose
products also stay within f32's range, written as a fused multiply-add: the same bits); an
.f16 D is that f32 sum rounded once to f16.
.f64 uses a fused multiply-add per k (one rounding each). Integers (.s8/.u8/.s4/.u4) are
summed exactly in 64 bits; .satfinite clamps D to the s32 range, without it D wraps to 32
bits. A .b1 product adds, for each k, A[r][k] xor (and) B[k][c], which is C plus the popcount
of the row's and column's xor (and), wrapping to 32 bits.
mma.sp adds only A's kept elements, in the order the metadata lists them (k order when it is
sorted, as ::ordered_metadata requires), each times the row of B its index names: the zeros'
products are never formed (so an infinite B there does not make a NaN).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from llvmlite import ir

from ...ptx import ir as pir
from ...ptx.errors import UnsupportedPtx
from ...ptx.modifiers import MMA_SHAPES, MODIFIERS, TYPES, WMMA_SHAPES, words
from ..irutil import declare, for_range, i32, i64, in_memory, internal_function
from ..simt.collectives import MATRIX_RESOLVER
from ..simt.workspace import frame_at
from ..types import F16, F32, F64, I16, I32, I64, space_of
from . import memcheck
from .fragmentmoves import converted_raw, gathered_raw, moves_whole_warp, scatter_whole_warp
from .fragments import (BITS, LANES, MIXABLE, MMA_FORMS, QUAD_PAIRS, SPARSE_FORMS, WMMA_FORMS, Fragment, Sparsity,
                        is_quad_pair, mma_fragment, sparse_a_shape, sparsity, wmma_fragment)
from .table import handles

SLOT = 8                                       # bytes per register slot of a lane's matrix area
INTEGERS = ("s8", "u8", "s4", "u4", "b1")
UNSIGNED = ("u8", "u4", "b1")
FLOAT8 = ("e4m3", "e5m2")
BIT_OPS = ("xor", "and")                       # .b1's operations in place of the multiplication
# multiplicands whose products are exact f32 numbers, never beyond f32's range (11-bit
# significands at most, exponents within +-24): a fused multiply-add of them rounds the sum
# once, as the addition of the exact product does, so it gives the same bits in fewer steps
EXACT_IN_F32 = frozenset(("f16", "e4m3", "e5m2"))


# ---------------------------------------------------------------- forms
@dataclass(frozen=True)
class Product:
    """D = A * B + C of one warp: the four fragments (d has C's layout), whether an integer
    D saturates, how an element of A meets one of B ('mul', or .b1's 'xor' and 'and', whose
    results are counted) and how many independent products the fragments stack (the
    quad pairs' four: batch j is rows j * M / batches on of A, C and D, and j * K on of B).
    A sparse product (mma.sp) has its A's kept elements, the lanes' metadata words and the
    sparsity selector."""
    name: str
    a: Fragment
    b: Fragment
    c: Fragment
    d: Fragment
    satfinite: bool
    combine: str = "mul"
    batches: int = 1
    sparse: Sparsity | None = None
    selector: int = 0

    @property
    def slots(self) -> tuple:
        """First slot of a, b, c and d in a lane's area (a sparse product's metadata word is
        the slot before d's)."""
        a, b, c = self.a.regs, self.b.regs, self.c.regs
        return 0, a, a + b, a + b + c + (self.sparse is not None)


class Refused(Exception):
    """A form anycuda does not lower (the message says which)."""


def _types(inst) -> list:
    """The instruction's type modifiers in order, the ISA's narrow floats (.e4m3) among them."""
    return [m for m in inst.mods if m in TYPES]


def _one_of(inst, choices, what):
    found = [m for m in inst.mods if m in choices]
    if len(found) != 1:
        raise Refused(f"needs one {what}")
    return found[0]


def _bit_op(inst, at):
    """'xor' or 'and' for a .b1 product (which must name one, with .popc), else 'mul'."""
    ops = [m for m in inst.mods if m in BIT_OPS]
    if at != "b1":
        if ops or "popc" in inst.mods:
            raise Refused(f".{(ops or ['popc'])[0]} with .{at} multiplicands (only .b1 takes it)")
        return "mul"
    if len(ops) != 1 or "popc" not in inst.mods:
        raise Refused("a .b1 product takes .xor.popc or .and.popc")
    return ops[0]


def mma_product(inst) -> Product:
    """The product of `mma.sync.aligned.shape.alayout.blayout{.satfinite}.dtype.atype.btype.ctype
    {.bitOp.popc}`: .row.col, except that the quad pairs' m8n8k4 takes either layout for each;
    or of `mma.sp{::ordered_metadata}.sync.aligned.shape.row.col{.satfinite}.dtype.atype.btype.ctype`."""
    shape = _one_of(inst, MMA_SHAPES, "shape")
    ts = _types(inst)
    if len(ts) != 4:
        raise Refused("needs .dtype.atype.btype.ctype")
    dt, at, bt, ct = ts
    if inst.opcode == "mma.sp" or "sp::ordered_metadata" in inst.mods:
        return _sparse_product(inst, shape, dt, at, bt, ct)
    layouts = [m for m in inst.mods if m in ("row", "col")]
    quad = is_quad_pair(shape, at)
    if len(layouts) != 2 or not quad and layouts != ["row", "col"]:
        raise Refused("takes .row.col only" if not quad else "needs .alayout.blayout")
    fragment = (lambda s, x, t: mma_fragment(s, x, t, {"a": layouts[0], "b": layouts[1], "c": "quad"}[x])) \
        if quad else mma_fragment
    name = "mma" + (f".{layouts[0]}.{layouts[1]}" if quad else "")
    return _product(name, shape, dt, at, bt, ct, "satfinite" in inst.mods, MMA_FORMS, fragment,
                    _bit_op(inst, at), QUAD_PAIRS if quad else 1)


def _sparse_product(inst, shape, dt, at, bt, ct) -> Product:
    """mma.sp: A's fragment the dense one of half the K, B's and C's the dense ones of `shape`;
    the selector an immediate in the range its shape allows."""
    if [m for m in inst.mods if m in ("row", "col")] != ["row", "col"]:
        raise Refused("takes .row.col only")
    if dt != ct:
        raise Refused("takes .dtype equal to .ctype")
    _bit_op(inst, at)
    sp = sparsity(shape, at) if (shape, at) in SPARSE_FORMS else None
    selector = inst.operands[5] if len(inst.operands) == 6 else None
    if not isinstance(selector, pir.Imm):
        raise Refused("needs metadata and an immediate sparsity selector")
    if sp is not None and not 0 <= selector.value < sp.selectors:
        raise Refused(f"takes a sparsity selector of 0 to {sp.selectors - 1} with {shape} .{at}")
    half = sparse_a_shape(shape)

    def fragment(s, x, t):
        return mma_fragment(half if x == "a" else s, x, t)
    p = _product(f"mma.sp.sel{selector.value}", shape, dt, at, bt, ct, "satfinite" in inst.mods, SPARSE_FORMS,
                 fragment)
    return Product(p.name, p.a, p.b, p.c, p.d, p.satfinite, sparse=sp, selector=selector.value)


def wmma_product(inst) -> Product:
    """The product of `wmma.mma{.bitOp.popc}.sync.aligned.alayout.blayout.shape.dtype{.atype.btype}.ctype`
    (an .f16 form names only dtype and ctype). The layouts name how the fragments were
    loaded, which in our layout changes nothing."""
    shape = _one_of(inst, WMMA_SHAPES, "shape")
    ts = _types(inst)
    if len(ts) == 2:
        ts = [ts[0], "f16", "f16", ts[1]]
    if len(ts) != 4:
        raise Refused("needs .dtype.ctype or .dtype.atype.btype.ctype")
    if any(m in inst.mods for m in ("rz", "rm", "rp")):
        raise Refused("rounds to nearest only")
    return _product("wmma", shape, *ts, "satfinite" in inst.mods, WMMA_FORMS, wmma_fragment, _bit_op(inst, ts[1]))


def _product(kind, shape, dt, at, bt, ct, satfinite, forms, fragment, combine="mul", batches=1) -> Product:
    accumulators = forms.get((shape, at))
    if accumulators is None:
        raise Refused(f"{shape} with .{at} multiplicands is not supported by anycuda yet")
    if bt != at and not any(at in kinds and bt in kinds for kinds in MIXABLE):
        raise Refused(f".{at} with .{bt} multiplicands is not a form of the PTX ISA")
    if dt not in accumulators or ct not in accumulators:
        raise Refused(f".{dt} and .{ct} accumulators with .{at} multiplicands "
                      f"(takes {', '.join('.' + t for t in accumulators)})")
    if satfinite and (at not in INTEGERS or at == "b1"):
        raise Refused(f".satfinite with .{at} multiplicands is not a form of the PTX ISA")
    name = f"{kind}.{shape}.{dt}.{at}.{bt}.{ct}" + (".satfinite" if satfinite else "") \
        + (f".{combine}.popc" if combine != "mul" else "")
    return Product(name, fragment(shape, "a", at), fragment(shape, "b", bt), fragment(shape, "c", ct),
                   fragment(shape, "c", dt), satfinite, combine, batches)


def _matrix_handler(*opcodes, lowers, form):
    """Register a handler of `opcodes` that lowers the modifiers `lowers` (words) in the
    combinations `form(inst)` accepts. The table's own check lets every modifier of the ISA
    through to `form`'s check, so that a refusal names the whole instruction, its shape
    and types: `mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32: .e4m3 is not ...`."""
    allowed = words(lowers)

    def check(inst):
        bad = next((m for m in inst.mods if m not in allowed), None)
        try:
            if bad is not None:
                raise Refused(f".{bad} is not supported by anycuda yet")
            form(inst)
        except Refused as e:
            return f"{inst.opcode}.{'.'.join(inst.mods)}: {e}"
        return None
    return handles(*opcodes, mods=words(*(MODIFIERS[op] for op in opcodes)), types=4, check=check)


def _copies(inst) -> int:
    return {"x1": 1, "x2": 2, "x4": 4}[_one_of(inst, ("x1", "x2", "x4"), ".x1, .x2 or .x4")]


def ldmatrix_form(inst):
    """ldmatrix/stmatrix.sync.aligned.m8n8.xN{.trans}{.shared{::cta}}.b16 (the .m16n16/.m8n16
    and .b8 forms of sm_100 are not done)."""
    if "m8n8" not in inst.mods or "b16" not in inst.mods:
        raise Refused("takes .m8n8 with .b16 only")
    return _copies(inst)


def movmatrix_form(inst):
    if not {"m8n8", "trans", "b16"} <= set(inst.mods):
        raise Refused("takes .m8n8.trans.b16 only")


def product_of(inst) -> Product:
    """The product of an mma, mma.sp or wmma.mma instruction (Refused for a form not lowered)."""
    return wmma_product(inst) if inst.opcode == "wmma.mma" else mma_product(inst)


def wmma_memory_form(inst):
    """(fragment, row-major?) of a wmma.load or wmma.store."""
    which = _one_of(inst, ("a", "b", "c", "d"), "matrix .a, .b, .c or .d")
    shape = _one_of(inst, WMMA_SHAPES, "shape")
    layout = _one_of(inst, ("row", "col"), "layout .row or .col")
    ts = _types(inst)
    if len(ts) != 1:
        raise Refused("needs one type")
    t = ts[0]
    operand = "c" if which in ("c", "d") else which
    if operand == "c":
        if not any(t in accs for (s, _), accs in WMMA_FORMS.items() if s == shape):
            raise Refused(f".{t} accumulators are not supported by anycuda yet")
    elif (shape, t) not in WMMA_FORMS:
        raise Refused(f"{shape} with .{t} is not supported by anycuda yet")
    elif BITS[t] < 8 and layout != {"a": "row", "b": "col"}[operand]:
        raise Refused(f"a .{t} {operand.upper()} takes .{'row' if operand == 'a' else 'col'} only")
    return wmma_fragment(shape, operand, t), layout == "row"


# ---------------------------------------------------------------- the lane's side
def _area(f, slots) -> int:
    """The frame offset of this kernel's matrix area, made at its first use at the frame's
    end and grown to the most `slots` an instruction asks for (at most 32: wmma's f32 a, b,
    c and d). Nothing else takes frame space while instructions are lowered (the .local
    variables have theirs before), so the area stays last and can grow."""
    off, size = getattr(f, "_matrix_area", (None, 0))
    if off is None:
        off = (f.frame_size + SLOT - 1) // SLOT * SLOT
    assert size == 0 or f.frame_size == off + size, "the frame grew past the matrix area"
    size = max(size, SLOT * slots)
    f.frame_size = off + size
    f._matrix_area = (off, size)
    return off


def _slot(b, base, area, slot):
    return b.bitcast(b.gep(base, [i64(area + SLOT * slot)]), I64.as_pointer())


def _registers(f, op, count, what):
    items = op.items if isinstance(op, pir.Vec) else (op,)
    if len(items) != count:
        raise f.error(f"{f.inst.opcode}: {what} takes {count} registers, got {len(items)}")
    return items


def _suspend(f, resolver, words, results, sources=()):
    """Store `words` (i64, slot by slot from 0) in this lane's matrix area, suspend at a
    matrix site resolved by `resolver`, and on resume write `results` ((register, slot,
    bits) each) from the area. `sources`: the register (PTX item) each word was read from,
    None for a computed one; inside a run of matrix instructions (matrixruns.py) all of it
    goes to the run instead, which suspends once for its members."""
    if not f.is_kernel:
        raise f.error(f"{f.inst.opcode} inside a device function that was not inlined is not supported",
                      UnsupportedPtx)
    if f.matrix_run is not None:
        sources = list(sources) + [None] * (len(words) - len(sources))
        return f.matrix_run.add(resolver, words, sources, results)
    b = f.b
    area = _area(f, max([len(words)] + [slot + 1 for _, slot, _ in results]))
    for slot, word in enumerate(words):
        b.store(word, _slot(b, f.ctx, area, slot))

    def write(bb):
        for reg, slot, bits in results:
            v = bb.load(_slot(bb, f.ctx, area, slot))
            f.write(reg, bb.trunc(v, ir.IntType(bits)) if bits < 64 else v, f"b{bits}")
    f.suspend("matrix", {"op_a": b.ptrtoint(resolver, I64), "op_b": i32(area), "op_mask": i32(-1)}, write)


def _read_words(f, op, frag, what):
    bits = frag.reg_bits
    return [f.b.zext(f.read(r, f"b{bits}"), I64) if bits < 64 else f.read(r, "b64")
            for r in _registers(f, op, frag.regs, what)]


def _product_site(f, product, ops):
    d, a, b, c = ops[:4]
    words = (_read_words(f, a, product.a, "A") + _read_words(f, b, product.b, "B")
             + _read_words(f, c, product.c, "C"))
    sources = (_registers(f, a, product.a.regs, "A") + _registers(f, b, product.b.regs, "B")
               + _registers(f, c, product.c.regs, "C"))
    if product.sparse is not None:
        words.append(f.b.zext(f.read(ops[4], "b32"), I64))
        sources += (ops[4],)
    first = product.slots[3]
    results = [(r, first + i, product.d.reg_bits) for i, r in enumerate(_registers(f, d, product.d.regs, "D"))]
    _suspend(f, _resolver(f.b.module, product.name, lambda fn: _emit_product(fn, product)), words, results,
             sources)


def _lowered(forms) -> frozenset:
    """The shapes and types of `forms` ((shape, a type) -> accumulator types)."""
    return words({s for s, _ in forms}, {t for _, t in forms}, *forms.values())


MMA_MODS = words("sync aligned row col satfinite xor and popc sp::ordered_metadata", _lowered(MMA_FORMS),
                 _lowered(SPARSE_FORMS))
WMMA_MODS = words("sync aligned row col satfinite rn xor and popc", _lowered(WMMA_FORMS))


@_matrix_handler("mma", "mma.sp", lowers=MMA_MODS, form=mma_product)
def mma(f, inst):
    _product_site(f, mma_product(inst), inst.operands)


@_matrix_handler("wmma.mma", lowers=WMMA_MODS, form=wmma_product)
def wmma_mma(f, inst):
    _product_site(f, wmma_product(inst), inst.operands)


LDMATRIX_MODS = words("sync aligned m8n8 x1 x2 x4 trans shared shared::cta b16")     # (and stmatrix)
MOVMATRIX_MODS = words("sync aligned m8n8 trans b16")


@_matrix_handler("ldmatrix", "stmatrix", lowers=LDMATRIX_MODS, form=ldmatrix_form)
def ldmatrix(f, inst):
    b = f.b
    copies, trans, load = ldmatrix_form(inst), "trans" in inst.mods, inst.opcode == "ldmatrix"
    regs_op, addr_op = (inst.operands[0], inst.operands[1]) if load else (inst.operands[1], inst.operands[0])
    regs = _registers(f, regs_op, copies, "the fragment")
    row = f.address(addr_op, space_of(inst))
    if f.mc.checked:                    # the lanes whose addresses name the rows (8 per matrix)
        with b.if_then(b.icmp_unsigned("<", f.read(pir.SpecialReg("laneid"), "u32"), i32(8 * copies))):
            memcheck.check(f, row, 16, "read" if load else "write", space_of(inst))
    words = [b.ptrtoint(row, I64)]
    if not load:
        words += [b.zext(f.read(r, "b32"), I64) for r in regs]
    results = [(r, 1 + i, 32) for i, r in enumerate(regs)] if load else []
    name = f"{inst.opcode}.x{copies}" + (".trans" if trans else "")
    _suspend(f, _resolver(b.module, name, lambda fn: _emit_rows(fn, copies, trans, load)), words, results,
             [None] + ([] if load else list(regs)))


@_matrix_handler("movmatrix", lowers=MOVMATRIX_MODS, form=movmatrix_form)
def movmatrix(f, inst):
    word = f.b.zext(f.read(inst.operands[1], "b32"), I64)
    _suspend(f, _resolver(f.b.module, "movmatrix", _emit_transpose), [word], [(inst.operands[0], 1, 32)],
             [inst.operands[1]])


def _lane_places(f, frag):
    """A constant table of (row << 16 | col) for each (lane, element) of `frag`, and this
    lane's row in it."""
    lane = f.read(pir.SpecialReg("laneid"), "u32")
    return _places_table(f.b.module, frag), f.b.mul(lane, i32(frag.count))


WMMA_MEMORY_MODS = words("a b c d global shared shared::cta", WMMA_MODS)


@_matrix_handler("wmma.load", "wmma.store", lowers=WMMA_MEMORY_MODS, form=wmma_memory_form)
def wmma_memory(f, inst):
    """Each lane loads (stores) its own elements of our layout: element (row, col) of the
    matrix is at row * stride + col (.row) or col * stride + row (.col) elements from the
    address; the stride defaults to the matrix's columns (.row) or rows (.col)."""
    b = f.b
    frag, row_major = wmma_memory_form(inst)
    load = inst.opcode == "wmma.load"
    addr_op, regs_op = (inst.operands[1], inst.operands[0]) if load else (inst.operands[0], inst.operands[1])
    base = f.address(addr_op, space_of(inst))
    if len(inst.operands) > 2:
        stride = b.zext(f.read(inst.operands[2], "u32"), I64)
    else:
        stride = i64(frag.cols if row_major else frag.rows)
    regs = _registers(f, regs_op, frag.regs, "the fragment")
    if f.mc.checked:                    # the whole matrix, from its first element to its last
        lines, line = (frag.rows, frag.cols) if row_major else (frag.cols, frag.rows)
        span = b.mul(b.add(b.mul(i64(lines - 1), stride), i64(line)), i64(frag.bits // 8))
        memcheck.check(f, base, span, "read" if load else "write", space_of(inst), align=frag.bits // 8)
    table, row0 = _lane_places(f, frag)
    et, rt = ir.IntType(frag.bits), ir.IntType(frag.reg_bits)
    for r, reg in enumerate(regs):
        word = ir.Constant(rt, 0) if load else f.read(reg, f"b{frag.reg_bits}")
        for j in range(frag.per_reg):
            i = r * frag.per_reg + j
            rc = b.load(b.gep(table, [i32(0), b.add(row0, i32(i))]))
            row, col = b.zext(b.lshr(rc, i32(16)), I64), b.zext(b.and_(rc, i32(0xFFFF)), I64)
            index = b.add(b.mul(row, stride), col) if row_major else b.add(b.mul(col, stride), row)
            shift = ir.Constant(rt, j * frag.bits)
            if frag.bits < 8:               # sub-byte elements (loads only): element e is bits e * bits on
                word = b.or_(word, b.shl(b.zext(_load_bits(b, base, index, frag.bits), rt), shift))
                continue
            ptr = b.bitcast(b.gep(base, [b.mul(index, i64(frag.bits // 8))]), et.as_pointer())
            if load:
                word = b.or_(word, b.shl(b.zext(b.load(ptr), rt) if frag.bits < frag.reg_bits else b.load(ptr), shift))
            else:
                b.store(b.trunc(b.lshr(word, shift), et) if frag.bits < frag.reg_bits else word, ptr)
        if load:
            f.write(reg, word, f"b{frag.reg_bits}")


def _load_bits(b, base, index, bits):
    """The `bits`-bit element `index` (i64) of memory at `base`, elements packed low bits first
    in each byte (the ISA's sub-byte types)."""
    at = b.mul(index, i64(bits))
    byte = b.load(b.gep(base, [b.lshr(at, i64(3))]))
    return b.trunc(b.lshr(byte, b.trunc(b.and_(at, i64(7)), ir.IntType(8))), ir.IntType(bits))


# ---------------------------------------------------------------- resolvers (one per form and module)
def _resolver(module, name, emit) -> ir.Function:
    """void anycuda.matrix.<name>(i8* ws, i64 fsize, i32 lo, i32 group, i64 area): resolve the
    warp of threads [lo, lo + 32) whose lanes in `group` (bit per lane) wait at the site."""
    return internal_function(module, f"anycuda.matrix.{name}", MATRIX_RESOLVER, emit)


def _places_table(module, frag) -> ir.Value:
    """The global constant [32 * count x i32] of (row << 16 | col) of `frag`."""
    name = f"anycuda.matrix.places.{frag.name}"
    g = module.globals.get(name)
    if g is None:
        values = [r << 16 | c for lane in frag.places for r, c in lane]
        ty = ir.ArrayType(I32, len(values))
        g = ir.GlobalVariable(module, ty, name=name)
        g.initializer = ir.Constant(ty, values)
        g.global_constant = True
        g.linkage = "internal"
    return g


class _Warp:
    """What a resolver reads: the lanes' areas and which lanes take part."""

    def __init__(self, fn):
        self.fn = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.ws, self.fsize, self.lo, self.group, self.area = fn.args

    def slot(self, lane, slot):
        """i64* slot `slot` of lane `lane`'s area."""
        b = self.b
        fr = frame_at(b, self.ws, self.fsize, b.add(self.lo, lane))
        return b.bitcast(b.gep(fr, [b.add(self.area, i64(SLOT * slot))]), I64.as_pointer())

    def constant_slot(self, lane: int, slot):
        """slot() of lane number `lane`."""
        return self.slot(i32(lane), slot)

    def taking_part(self, lane):
        return self.b.trunc(self.b.lshr(self.group, lane), ir.IntType(1))

    @contextmanager
    def lanes(self, name, count=LANES):
        """Loop over the lanes below `count` that take part; yields the lane."""
        with for_range(self.b, i32(0), i32(count), name) as lane:
            with self.b.if_then(self.taking_part(lane)):
                yield lane


class _WarpInArray(_Warp):
    """What a block program's product function reads (warp_product): the warp's registers in
    one array, a row of 32 lanes per slot (slot s of lane l at s * 32 + l), every lane taking
    part (a lane outside the program's mask gave zeros, as one that does not take part)."""
    every_lane = True

    def __init__(self, fn):
        self.fn = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        (self.slots,) = fn.args
        self.group = i32(-1)

    def slot(self, lane, slot):
        index = i32(slot * LANES + lane) if isinstance(lane, int) else self.b.add(lane, i32(slot * LANES))
        return self.b.gep(self.slots, [index])

    def constant_slot(self, lane: int, slot):
        return self.slot(lane, slot)

    def taking_part(self, lane):
        return ir.Constant(ir.IntType(1), 1)


def _compute_type(etype):
    return F64 if etype == "f64" else I64 if etype in INTEGERS + ("s32",) else F32   # f32: the other floats


def float8_value(bits: int, etype: str) -> float:
    """The number an .e4m3 (no infinities; S.1111.111 is NaN) or .e5m2 (IEEE's rules) byte
    stands for (PTX ISA, "Alternate Floating Point Data Formats")."""
    ebits, mbits, bias = (4, 3, 7) if etype == "e4m3" else (5, 2, 15)
    sign = -1.0 if bits & 0x80 else 1.0
    e, m = (bits >> mbits) & ((1 << ebits) - 1), bits & ((1 << mbits) - 1)
    top = (1 << ebits) - 1
    if etype == "e4m3" and e == top and m == (1 << mbits) - 1 or etype == "e5m2" and e == top and m:
        return float("nan")
    if etype == "e5m2" and e == top:
        return sign * float("inf")
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - mbits)
    return sign * (1 + m / (1 << mbits)) * 2.0 ** (e - bias)


def _float8_table(module, etype):
    """The global constant [256 x float] of float8_value."""
    name = f"anycuda.matrix.{etype}"
    g = module.globals.get(name)
    if g is None:
        ty = ir.ArrayType(F32, 256)
        g = ir.GlobalVariable(module, ty, name=name)
        g.initializer = ir.Constant(ty, [float8_value(v, etype) for v in range(256)])
        g.global_constant = True
        g.linkage = "internal"
    return g


def _to_compute(b, bits_value, etype):
    """An element's bits (iN) as the type the product is computed in, exactly."""
    if etype in FLOAT8:
        return b.load(b.gep(_float8_table(b.module, etype), [i32(0), b.zext(bits_value, I32)]))
    if etype == "f16":
        return b.fpext(b.bitcast(bits_value, F16), F32)
    if etype == "bf16":
        return b.bitcast(b.shl(b.zext(bits_value, I32), i32(16)), F32)
    if etype == "tf32":
        return b.bitcast(b.and_(bits_value, i32(~0x1FFF)), F32)
    if etype == "f32":
        return b.bitcast(bits_value, F32)
    if etype == "f64":
        return b.bitcast(bits_value, F64)
    return b.zext(bits_value, I64) if etype in UNSIGNED else b.sext(bits_value, I64)


def _from_compute(b, value, etype, satfinite):
    """A D element's bits (i64) from the computed value."""
    if etype == "f16":
        return b.zext(b.bitcast(b.fptrunc(value, F16), I16), I64)
    if etype == "f32":
        return b.zext(b.bitcast(value, I32), I64)
    if etype == "f64":
        return b.bitcast(value, I64)
    if satfinite:
        value = b.select(b.icmp_signed("<", value, i64(-2 ** 31)), i64(-2 ** 31), value)
        value = b.select(b.icmp_signed(">", value, i64(2 ** 31 - 1)), i64(2 ** 31 - 1), value)
    return b.and_(value, i64(0xFFFFFFFF))


def _element_index(w, frag, lane, i):
    """i32 index in the row-major matrix of `lane`'s element i of `frag`: for a fragment in
    lane order, i after the lane's first (consecutive stores, which LLVM makes vectors); else
    from the places table."""
    b = w.b
    if frag.in_lane_order:
        return b.add(b.urem(b.mul(lane, i32(frag.count)), i32(frag.rows * frag.cols)), i32(i))
    rc = b.load(b.gep(_places_table(b.module, frag), [i32(0), b.add(b.mul(lane, i32(frag.count)), i32(i))]))
    return b.add(b.mul(b.lshr(rc, i32(16)), i32(frag.cols)), b.and_(rc, i32(0xFFFF)))


def _gather(w, frag, first, matrix):
    """Each taking-part lane's elements of `frag` (from slot `first` on) into `matrix`. Of a
    fragment whose second half of lanes holds copies of the first's, the copies are not read
    (they are the same elements unless the lanes' own code changed one copy alone)."""
    b = w.b
    et = ir.IntType(frag.bits)
    lanes = min(LANES, -(-frag.rows * frag.cols // frag.count)) if frag.in_lane_order else LANES
    with w.lanes("gather", lanes) as lane:
        for r in range(frag.regs):
            word = b.load(w.slot(lane, first + r))
            for j in range(frag.per_reg):
                index = _element_index(w, frag, lane, r * frag.per_reg + j)
                v = b.trunc(b.lshr(word, i64(j * frag.bits)), et) if frag.bits < 64 else word
                b.store(_to_compute(b, v, frag.etype), b.gep(matrix, [i32(0), index]))


def _scatter(w, frag, first, matrix, satfinite):
    """`matrix` into each taking-part lane's result slots (from `first` on) in `frag`'s layout."""
    b = w.b
    with w.lanes("scatter") as lane:
        for r in range(frag.regs):
            word = i64(0)
            for j in range(frag.per_reg):
                index = _element_index(w, frag, lane, r * frag.per_reg + j)
                bits = _from_compute(b, b.load(b.gep(matrix, [i32(0), index])), frag.etype, satfinite)
                word = b.or_(word, b.shl(bits, i64(j * frag.bits)))
            b.store(word, w.slot(lane, first + r))


def warp_product(module, p: Product) -> ir.Function:
    """void anycuda.matrix.warp.<name>(i64* slots): D = A * B + C of one warp whose registers
    are in an array (_WarpInArray; D's slots after A's, B's and C's, as Product.slots says),
    for the block programs (compiler/vector/warpmatrix.py)."""
    return internal_function(module, f"anycuda.matrix.warp.{p.name}",
                             ir.FunctionType(ir.VoidType(), [I64.as_pointer()]),
                             lambda fn: _emit_product(fn, p, _WarpInArray))


def _emit_product(fn, p: Product, warp=_Warp):
    """D = A * B + C for the warp, in the order and rounding of the module docstring."""
    w = warp(fn)
    b = w.b
    m, n, k = p.a.rows, p.b.cols, p.a.cols          # m counts the rows of every batch
    ct = _compute_type(p.c.etype)          # every form's multiplicands compute in its accumulators' type
    assert _compute_type(p.a.etype) == ct == _compute_type(p.b.etype), p.name
    A = in_memory(b, b.alloca(ir.ArrayType(ct, m * k), name="A"))
    B = in_memory(b, b.alloca(ir.ArrayType(ct, p.b.rows * n), name="B"))    # K rows a batch
    C = in_memory(b, b.alloca(ir.ArrayType(ct, m * n), name="C"))
    sa, sb, sc, sd = p.slots
    operands = ((p.a, sa, A), (p.b, sb, B), (p.c, sc, C))

    def lane_by_lane():
        for frag, first, matrix in operands:
            b.store(ir.Constant(matrix.type.pointee, None), matrix)
            _gather(w, frag, first, matrix)
    def whole_warp():
        raws = [gathered_raw(b, frag, w.constant_slot, first) for frag, first, _ in operands]
        for (frag, _, matrix), raw in zip(operands, raws):
            converted_raw(b, frag, raw, matrix, _to_compute)
    _whole_warp_or(w, p, whole_warp, lane_by_lane)
    columns = _sparse_columns(w, p, sd - 1) if p.sparse is not None else None
    # a row of C at a time, as one vector of its n elements: each element's sum still adds
    # the products in k order (k is 4 to 32: unrolled), n of them side by side; a sparse A's
    # kept elements in the order of its metadata, each meeting B's row that names
    vt = ir.VectorType(ct, n)
    fused = ct == F64 or ct == F32 and {p.a.etype, p.b.etype} <= EXACT_IN_F32
    fma = declare(b.module, f"llvm.fma.v{n}{'f64' if ct == F64 else 'f32'}", vt, [vt, vt, vt]) if fused else None
    align = ct.width // 8 if isinstance(ct, ir.IntType) else (8 if ct == F64 else 4)
    with for_range(b, i32(0), i32(m), "r") as r:
        row = b.bitcast(b.gep(C, [i32(0), b.mul(r, i32(n))]), vt.as_pointer())
        total = b.load(row, align=align)
        b_first = b.mul(b.udiv(r, i32(m // p.batches)), i32(k * n))       # this row's batch's B
        for kk in range(k):
            x = b.load(b.gep(A, [i32(0), b.add(b.mul(r, i32(k)), i32(kk))]))
            xs = b.shuffle_vector(b.insert_element(ir.Constant(vt, None), x, i32(0)), ir.Constant(vt, None),
                                  ir.Constant(ir.VectorType(I32, n), [0] * n))
            at = i32(kk * n) if columns is None else \
                b.mul(b.load(b.gep(columns, [i32(0), b.add(b.mul(r, i32(k)), i32(kk))])), i32(n))
            y = b.load(b.bitcast(b.gep(B, [i32(0), b.add(b_first, at)]), vt.as_pointer()), align=align)
            total = _accumulate(b, p.combine, fma, total, xs, y)
        b.store(total, row, align=align)
    _whole_warp_or(w, p, lambda: scatter_whole_warp(b, p.d, w.constant_slot, sd, C, p.satfinite),
                   lambda: _scatter(w, p.d, sd, C, p.satfinite))
    b.ret_void()


def _whole_warp_or(w, p, whole_warp, lane_by_lane):
    """whole_warp() where all 32 lanes take part and fragmentmoves knows the product's
    element types, else lane_by_lane()."""
    if not moves_whole_warp(p.a, p.b, p.c, p.d):
        return lane_by_lane()
    if getattr(w, "every_lane", False):
        return whole_warp()
    with w.b.if_else(w.b.icmp_unsigned("==", w.group, i32(-1))) as (every_lane, some):
        with every_lane:
            whole_warp()
        with some:
            lane_by_lane()


def _sparse_columns(w, p, meta_slot):
    """The column of A (row of B) of each kept element of a sparse A, [rows x K/2 x i32], from
    the lanes' metadata words (fragments.Sparsity; a lane that does not take part gives 0)."""
    b, sp = w.b, p.sparse
    m, kept_cols = p.a.rows, p.a.cols
    columns = b.alloca(ir.ArrayType(I32, m * kept_cols), name="columns")
    with for_range(b, i32(0), i32(m), "meta") as r:
        group, half = b.and_(r, i32(7)), b.lshr(r, i32(3))
        for chunk in range(sp.k // sp.chunk):
            lane = b.add(b.mul(group, i32(4)), i32(p.selector * sp.threads + chunk // 4))
            word = b.select(w.taking_part(lane), b.trunc(b.load(w.slot(lane, meta_slot)), I32), i32(0))
            nibble = b.lshr(word, b.add(b.mul(half, i32(16)), i32(4 * (chunk % 4))))
            for j in range(sp.kept):
                unit = b.and_(b.lshr(nibble, i32(2 * j * sp.units)), i32(3))
                column = b.add(b.udiv(unit, i32(sp.units)), i32(chunk * sp.chunk))
                b.store(column, b.gep(columns, [i32(0), b.add(b.mul(r, i32(kept_cols)), i32(chunk * sp.kept + j))]))
    return columns


def _accumulate(b, combine, fma, total, x, y):
    """total + x * y: fused (fma given), exact integers, or f32 rounding the sum; for .b1
    total + (x xor y) or total + (x and y) of 0/1 elements, which summed are the popcounts."""
    if fma is not None:
        return b.call(fma, [x, y, total])
    if combine != "mul":
        return b.add(total, getattr(b, {"xor": "xor", "and": "and_"}[combine])(x, y))
    if isinstance(total.type.element, ir.IntType):
        return b.add(total, b.mul(x, y))
    return b.fadd(total, b.fmul(x, y))


def _emit_rows(fn, copies, trans, load):
    """ldmatrix (load) or stmatrix: matrix m's row r is at the address lane 8m + r gave
    (slot 0); a lane's register m (slot 1 + m) holds elements (g, 2t) and (g, 2t + 1) of
    matrix m, or of its transpose with .trans (g = lane / 4, t = lane % 4, LDMATRIX)."""
    w = _Warp(fn)
    b = w.b
    with w.lanes("rows") as lane:
        g, t = b.lshr(lane, i32(2)), b.and_(lane, i32(3))
        for m in range(copies):
            word = i64(0)
            mine = b.load(w.slot(lane, 1 + m)) if not load else None
            for j in range(2):
                col = b.add(b.mul(t, i32(2)), i32(j))
                row_lane, offset = (col, g) if trans else (g, col)
                source = b.add(i32(8 * m), row_lane)

                def element(bb, source=source, offset=offset):
                    base = bb.load(w.slot(source, 0))
                    return bb.inttoptr(bb.add(base, bb.zext(bb.mul(offset, i32(2)), I64)), I16.as_pointer())
                there = w.taking_part(source)
                if load:
                    # a row whose lane does not take part reads as 0 rather than from its stale address
                    got = _load_if(b, there, element)
                    word = b.or_(word, b.shl(b.zext(got, I64), i64(16 * j)))
                else:
                    with b.if_then(there):
                        b.store(b.trunc(b.lshr(mine, i64(16 * j)), I16), element(b))
            if load:
                b.store(word, w.slot(lane, 1 + m))
    b.ret_void()


def _load_if(b, cond, pointer):
    """*pointer(b) where cond holds, else 0."""
    before = b.block
    with b.if_then(cond):
        v = b.load(pointer(b))
        inside = b.block
    phi = b.phi(I16)
    phi.add_incoming(v, inside)
    phi.add_incoming(ir.Constant(I16, 0), before)
    return phi


def _emit_transpose(fn):
    """movmatrix.trans: lane l's element j becomes element (2t + j, g) of the source matrix,
    which lane 4 (2t + j) + g / 2 holds as its element g % 2 (LDMATRIX)."""
    w = _Warp(fn)
    b = w.b
    with w.lanes("transpose") as lane:
        g, t = b.lshr(lane, i32(2)), b.and_(lane, i32(3))
        word = i64(0)
        for j in range(2):
            row = b.add(b.mul(t, i32(2)), i32(j))
            source = b.add(b.mul(row, i32(4)), b.lshr(g, i32(1)))
            shift = b.zext(b.mul(b.and_(g, i32(1)), i32(16)), I64)
            bits = b.and_(b.lshr(b.load(w.slot(source, 0)), shift), i64(0xFFFF))
            bits = b.select(w.taking_part(source), bits, i64(0))
            word = b.or_(word, b.shl(bits, i64(16 * j)))
        b.store(word, w.slot(lane, 1))
    b.ret_void()

