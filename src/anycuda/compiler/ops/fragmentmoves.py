"""A whole warp's fragments into matrices and back, when all 32 lanes take part.

A product's resolver (matrix.py) reads every lane's fragment registers into whole A, B and C
matrices and writes D back into the lanes' result slots. The general way goes lane by lane
in a loop, each element placed through the fragment's table of places and converted on its
own: ~5,800 machine instructions for one m16n8k16 product of 2,048 multiply-adds, three
quarters of them moving elements. When every lane takes part (a warp that runs mma.sync as
the ISA requires), the moves are written out lane by lane with every place a constant:

- a register whose elements are neighbours in a row of the matrix (an f16 A register holds
  (g, 2t) and (g, 2t + 1)) is one store of the whole register into a matrix of the raw
  element bits; any other element is stored on its own;
- the raw matrix becomes the compute type in one vector conversion (f16 to f32 is then a
  few vcvtph2ps);
- D goes back the same way: one vector conversion to the raw bits, one load per register
  whose elements are neighbours.

An element a fragment places twice (a wmma .f16 multiplicand: the second half of the lanes
holds copies) is read from its first lane only, as the general way does. Nothing here knows
a layout: the places come from the fragment (fragments.py).
"""
from __future__ import annotations

from llvmlite import ir

from ..irutil import i64, in_memory
from ..types import F16, F32, F64, I32, I64

ELEMENT_TYPES = frozenset(("f16", "bf16", "tf32", "f32", "f64", "s8", "u8", "s32", "e4m3", "e5m2"))


def moves_whole_warp(*frags) -> bool:
    """Whether these fragments' elements are types the conversions below know."""
    return all(f.etype in ELEMENT_TYPES and f.bits in (8, 16, 32, 64) for f in frags)


def _neighbours(frag, lane, r):
    """The first element's (row, col) when register r of `lane` holds elements that follow
    each other in one row, else None."""
    places = frag.places[lane][r * frag.per_reg:(r + 1) * frag.per_reg]
    row, col = places[0]
    if all(p == (row, col + j) for j, p in enumerate(places)) and col + frag.per_reg <= frag.cols:
        return row, col
    return None


def _raw_matrix(b, frag):
    """A zeroed [rows * cols x iBITS] array of the matrix's element bits."""
    ty = ir.ArrayType(ir.IntType(frag.bits), frag.rows * frag.cols)
    raw = in_memory(b, b.alloca(ty, name="raw"))
    b.store(ir.Constant(ty, None), raw)
    return raw


def _element_pointer(b, raw, frag, row, col, width):
    index = row * frag.cols + col
    return b.bitcast(b.gep(raw, [ir.Constant(I32, 0), ir.Constant(I32, index)]), ir.IntType(width).as_pointer())


def _align(ty) -> int:
    return 8 if ty in (F64, I64) else 4


def _vector(b, array, count, ty):
    return b.bitcast(array, ir.VectorType(ty, count).as_pointer())


def gathered_raw(b, frag, slot, first):
    """Every lane's elements of `frag` (its registers from slot `first` on; slot(lane, s) an
    i64* of lane `lane`) into a matrix of their bits, a stack array (converted_raw makes it
    the compute type)."""
    raw = _raw_matrix(b, frag)
    et, placed = ir.IntType(frag.bits), set()
    for lane in range(32):
        for r in range(frag.regs):
            places = frag.places[lane][r * frag.per_reg:(r + 1) * frag.per_reg]
            if placed.issuperset(places):
                continue
            word = b.load(slot(lane, first + r))
            start = _neighbours(frag, lane, r)
            if start is not None and placed.isdisjoint(places):
                width = frag.bits * frag.per_reg
                b.store(b.trunc(word, ir.IntType(width)) if width < 64 else word,
                        _element_pointer(b, raw, frag, *start, width), align=frag.bits // 8)
            else:
                for j, place in enumerate(places):
                    if place not in placed:
                        bits = b.trunc(b.lshr(word, i64(j * frag.bits)), et) if frag.bits < 64 else word
                        b.store(bits, _element_pointer(b, raw, frag, *place, frag.bits), align=frag.bits // 8)
            placed.update(places)
    return raw


def converted_raw(b, frag, raw, matrix, convert_scalar):
    """The matrix of bits `raw` (gathered_raw) as the compute type into `matrix`, in one
    vector conversion; convert_scalar(b, bits, etype) converts one element where no vector
    form is written (the 8-bit floats). (Its wide loads wait for the narrow stores that wrote the bits to
    reach the cache: a product gathers every operand before it converts the first.)"""
    n = frag.rows * frag.cols
    et = ir.IntType(frag.bits)
    values = b.load(_vector(b, raw, n, et), align=frag.bits // 8)
    ct = matrix.type.pointee.element
    b.store(_to_compute(b, values, frag.etype, n, convert_scalar), _vector(b, matrix, n, ct), align=_align(ct))


def _to_compute(b, v, etype, n, convert_scalar):
    """A vector of n elements' bits as the compute type (matrix._compute_type), exactly."""
    vec = lambda t: ir.VectorType(t, n)    # noqa: E731
    if etype == "f16":
        return b.fpext(b.bitcast(v, vec(F16)), vec(F32))
    if etype == "bf16":
        return b.bitcast(b.shl(b.zext(v, vec(I32)), ir.Constant(vec(I32), [16] * n)), vec(F32))
    if etype == "tf32":
        return b.bitcast(b.and_(v, ir.Constant(vec(I32), [~0x1FFF] * n)), vec(F32))
    if etype in ("f32", "f64"):
        return b.bitcast(v, vec(F32 if etype == "f32" else F64))
    if etype in ("s8", "s32"):
        return b.sext(v, vec(I64))
    if etype == "u8":
        return b.zext(v, vec(I64))
    out = ir.Constant(vec(F32), None)            # the 8-bit floats: a table each
    for i in range(n):
        out = b.insert_element(out, convert_scalar(b, b.extract_element(v, ir.Constant(I32, i)), etype),
                               ir.Constant(I32, i))
    return out


def _from_compute(b, v, etype, n, satfinite):
    """matrix._from_compute for a vector of n results: their bits (iBITS each)."""
    vec = lambda t: ir.VectorType(t, n)    # noqa: E731
    if etype == "f16":
        return b.bitcast(b.fptrunc(v, vec(F16)), vec(ir.IntType(16)))
    if etype == "f32":
        return b.bitcast(v, vec(I32))
    if etype == "f64":
        return b.bitcast(v, vec(I64))
    if satfinite:
        low, high = ir.Constant(vec(I64), [-2 ** 31] * n), ir.Constant(vec(I64), [2 ** 31 - 1] * n)
        v = b.select(b.icmp_signed("<", v, low), low, v)
        v = b.select(b.icmp_signed(">", v, high), high, v)
    return b.trunc(v, vec(I32))


def scatter_whole_warp(b, frag, slot, first, matrix, satfinite):
    """`matrix` (the compute type) into every lane's result slots from `first` on, in `frag`'s layout."""
    n = frag.rows * frag.cols
    raw = _raw_matrix(b, frag)
    ct = matrix.type.pointee.element
    values = b.load(_vector(b, matrix, n, ct), align=_align(ct))
    b.store(_from_compute(b, values, frag.etype, n, satfinite), _vector(b, raw, n, ir.IntType(frag.bits)),
            align=frag.bits // 8)
    for lane in range(32):
        for r in range(frag.regs):
            start = _neighbours(frag, lane, r)
            if start is not None:
                width = frag.bits * frag.per_reg
                word = b.load(_element_pointer(b, raw, frag, *start, width), align=frag.bits // 8)
                word = b.zext(word, I64) if width < 64 else word
            else:
                word = i64(0)
                for j, place in enumerate(frag.places[lane][r * frag.per_reg:(r + 1) * frag.per_reg]):
                    bits = b.load(_element_pointer(b, raw, frag, *place, frag.bits), align=frag.bits // 8)
                    bits = b.zext(bits, I64) if frag.bits < 64 else bits
                    word = b.or_(word, b.shl(bits, i64(j * frag.bits)))
            b.store(word, slot(lane, first + r))
