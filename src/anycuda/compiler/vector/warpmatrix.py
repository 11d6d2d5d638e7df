"""Warp matrix instructions in block programs (blockprograms.py): mma, mma.sp, wmma.mma,
wmma.load, wmma.store, ldmatrix, stmatrix and movmatrix on a warp's registers held as vectors.

In the rounds each of them is a warp collective (ops/matrix.py): every lane saves its live
registers in its frame, the scheduler calls a resolver that reads the 32 frames, every lane
reloads. For the suite's mma.sync GEMM (benchmarks/tensorcores.py) that was ~0.8 us per
m16n8k16 product of 2,048 multiply-adds. In a block program a warp's registers are already
`<32 x T>` values, so:

- a product stores its operand registers in one stack array, a row of 32 lanes per register,
  calls the product the resolvers make (matrix.warp_product: the same gathers, order of
  additions and roundings), and reads D's rows back;
- ldmatrix loads the 8 rows of 16 bytes of each matrix from the addresses lanes 8m .. 8m+7
  hold and permutes them into the lanes' registers (with .trans, transposed); stmatrix
  permutes the registers into rows and stores them there;
- movmatrix is a permutation of the warp's halves;
- wmma.load and wmma.store are gathers and scatters of the lanes' own elements (our wmma
  layout is a function of the lane), a register at a time where each lane's elements of it
  are neighbours in memory. Fragments of sub-byte elements (.s4, .u4, .b1) are left to the
  rounds.

The ISA has all 32 lanes run these together (.sync.aligned). Under a mask the program gives
what the rounds give for lanes that do not take part: their operands count as zeros, the rows
their addresses name are read as zeros and not written, and they get no results.
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from ..irutil import either, i32
from ..ops import matrix
from ..types import I16, I32, I64
from .warpruns import NotVectorisable

WARP = 32
ROW_HALVES = 8                 # an ldmatrix row: 8 b16 elements, 16 bytes
# the modifiers each form handles: those ops/matrix.py lowers, but not `shared::cta` (the
# block program's memory names shared memory `.shared`)
TAKES = {
    "mma": matrix.MMA_MODS,
    "mma.sp": matrix.MMA_MODS,
    "wmma.mma": matrix.WMMA_MODS,
    "ldmatrix": matrix.LDMATRIX_MODS - {"shared::cta"},
    "stmatrix": matrix.LDMATRIX_MODS - {"shared::cta"},
    "movmatrix": matrix.MOVMATRIX_MODS,
    "wmma.load": matrix.WMMA_MEMORY_MODS - {"shared::cta"},
    "wmma.store": matrix.WMMA_MEMORY_MODS - {"shared::cta"},
}


def _form(w, st, form):
    """form(st), a Refused form not taken."""
    w.need_warps(st.opcode)
    try:
        return form(st)
    except matrix.Refused as e:
        raise NotVectorisable(f"{st.opcode}: {e}") from None


def _items(op, count):
    items = op.items if isinstance(op, pir.Vec) else (op,)
    if len(items) != count or not all(isinstance(r, pir.Reg) for r in items):
        raise NotVectorisable(f"a fragment of {len(items)} operands where {count} registers are wanted")
    return items


def _zero_outside_mask(w, v):
    return v if w.mask is None else w.b.select(w.mask, v, ir.Constant(v.type, None))


def _product(w, st):
    """D = A * B + C of each warp, through the array its product function reads."""
    p = _form(w, st, matrix.product_of)
    b = w.b
    d, a, bb, c = st.operands[:4]
    sources = [(r, frag.reg_bits) for op, frag in ((a, p.a), (bb, p.b), (c, p.c)) for r in _items(op, frag.regs)]
    if p.sparse is not None:
        sources.append((st.operands[4], 32))
    first_d = p.slots[3]
    assert first_d == len(sources)
    slots = w.scratch(ir.ArrayType(I64, (first_d + p.d.regs) * WARP), "matrix.slots")
    row = ir.VectorType(I64, WARP)

    def slot_row(s):
        return b.bitcast(b.gep(slots, [i32(0), i32(s * WARP)]), row.as_pointer())
    # (every operand is read before D is written: the accumulators are often D's registers too)
    for s, (op, bits) in enumerate(sources):
        v = w.read(op, "b64") if bits == 64 else b.zext(w.read(op, f"b{bits}"), row)
        b.store(_zero_outside_mask(w, v), slot_row(s), align=8)
    b.call(matrix.warp_product(w.mod, p), [b.gep(slots, [i32(0), i32(0)])])
    bits = p.d.reg_bits
    for i, r in enumerate(_items(d, p.d.regs)):
        v = b.load(slot_row(first_d + i), align=8)
        w.write(r, v if bits == 64 else b.trunc(v, ir.VectorType(ir.IntType(bits), WARP)), f"b{bits}")


def _lane_on(w, lane):
    """i1: lane `lane` of the current warp is in the mask (None: every lane is)."""
    return None if w.mask is None else w.b.extract_element(w.mask, i32(lane))


def _row_order(copies, trans):
    """For each register m and half h of lane t (index m * 64 + 2t + h): the index of its
    element in the rows of the matrices, row after row (matrix m's row r at (8m + r) * 8):
    lane t holds elements (t / 4, 2 (t % 4) + h) of matrix m, or of its transpose."""
    order = []
    for m in range(copies):
        for t in range(WARP):
            for h in range(2):
                row, col = (2 * (t % 4) + h, t // 4) if trans else (t // 4, 2 * (t % 4) + h)
                order.append((8 * m + row) * ROW_HALVES + col)
    return order


def _join(b, parts):
    """Vectors of one type, end to end."""
    while len(parts) > 1:
        n = parts[0].type.count
        pairs = [(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        joined = [b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, 2 * n), list(range(2 * n)))) for x, y in pairs]
        parts = joined + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


def _ldmatrix(w, st):
    copies = _form(w, st, matrix.ldmatrix_form)
    trans = "trans" in st.mods
    b = w.b
    regs = _items(st.operands[0], copies)
    addrs, _ = w.access(st, st.operands[1])        # the lanes' row addresses
    row_t = ir.VectorType(I16, ROW_HALVES)
    rows = []
    for lane in range(8 * copies):
        ptr = b.inttoptr(b.extract_element(addrs, i32(lane)), row_t.as_pointer())
        on = _lane_on(w, lane)
        rows.append(b.load(ptr, align=2) if on is None else
                    either(b, on, lambda ptr=ptr: b.load(ptr, align=2), lambda: ir.Constant(row_t, None)))
    halves = _join(b, rows)
    order = _row_order(copies, trans)
    moved = b.shuffle_vector(halves, ir.Constant(halves.type, None), ir.Constant(ir.VectorType(I32, len(order)), order))
    words = b.bitcast(moved, ir.VectorType(I32, WARP * copies))
    for m, r in enumerate(regs):
        part = b.shuffle_vector(words, ir.Constant(words.type, None),
                                ir.Constant(ir.VectorType(I32, WARP), list(range(m * WARP, (m + 1) * WARP))))
        w.write(r, part, "b32")


def _stmatrix(w, st):
    copies = _form(w, st, matrix.ldmatrix_form)
    trans = "trans" in st.mods
    b = w.b
    w.prepare_store()
    addrs, _ = w.access(st, st.operands[0])
    words = _join(b, [w.read(r, "b32") for r in _items(st.operands[1], copies)])
    halves = b.bitcast(words, ir.VectorType(I16, 2 * WARP * copies))
    order = _row_order(copies, trans)
    inverse = [0] * len(order)
    for i, at in enumerate(order):
        inverse[at] = i
    rows = b.shuffle_vector(halves, ir.Constant(halves.type, None),
                            ir.Constant(ir.VectorType(I32, len(order)), inverse))
    row_t = ir.VectorType(I16, ROW_HALVES)
    for lane in range(8 * copies):
        value = b.shuffle_vector(rows, ir.Constant(rows.type, None), ir.Constant(
            ir.VectorType(I32, ROW_HALVES), list(range(lane * ROW_HALVES, (lane + 1) * ROW_HALVES))))
        ptr = b.inttoptr(b.extract_element(addrs, i32(lane)), row_t.as_pointer())
        on = _lane_on(w, lane)
        if on is None:
            b.store(value, ptr, align=2)
        else:
            with b.if_then(on):
                b.store(value, ptr, align=2)


def _movmatrix(w, st):
    """The 8 x 8 matrix of halves whose row g lane 4g + t holds (columns 2t, 2t + 1),
    transposed: element (r, c) is half 8r + c of the warp's register."""
    _form(w, st, matrix.movmatrix_form)
    b = w.b
    halves = b.bitcast(w.read(st.operands[1], "b32"), ir.VectorType(I16, 2 * WARP))
    order = [8 * (2 * (t % 4) + h) + t // 4 for t in range(WARP) for h in range(2)]
    moved = b.shuffle_vector(halves, ir.Constant(halves.type, None), ir.Constant(ir.VectorType(I32, 2 * WARP), order))
    w.write(st.operands[0], b.bitcast(moved, ir.VectorType(I32, WARP)), "b32")


def _wmma_memory(w, st):
    """wmma.load / wmma.store: each lane's elements at its own addresses (our layout is a
    function of the lane, ops/matrix.wmma_memory), a register at a time: one gather (scatter)
    of whole registers where each lane's elements of it are neighbours in memory, else one
    per element."""
    frag, row_major = _form(w, st, matrix.wmma_memory_form)
    if frag.bits < 8:
        raise NotVectorisable(f"{st.opcode} of .{frag.etype} elements")
    b = w.b
    load = st.opcode == "wmma.load"
    addr_op, regs_op = (st.operands[1], st.operands[0]) if load else (st.operands[0], st.operands[1])
    regs = _items(regs_op, frag.regs)
    if not load:
        w.prepare_store()
    addrs, _ = w.access(st, addr_op)
    lanes_t = ir.VectorType(I64, WARP)
    stride = b.zext(w.read(st.operands[2], "u32"), lanes_t) if len(st.operands) > 2 else \
        ir.Constant(lanes_t, frag.cols if row_major else frag.rows)
    size = frag.bits // 8

    def addresses(places):
        """The lanes' addresses of the elements at `places` (one (row, col) per lane)."""
        lines, along = zip(*((r, c) if row_major else (c, r) for r, c in places))
        index = b.add(b.mul(ir.Constant(lanes_t, list(lines)), stride), ir.Constant(lanes_t, list(along)))
        return b.add(addrs, b.mul(index, ir.Constant(lanes_t, size)))
    word_t = ir.IntType(frag.reg_bits)
    for r, reg in enumerate(regs):
        places = [frag.places[lane][r * frag.per_reg:(r + 1) * frag.per_reg] for lane in range(WARP)]
        word = None if load else w.read(reg, f"b{frag.reg_bits}")
        if all(_one_after_another(p, row_major) for p in places):
            got = w.gather_scatter(addresses([p[0] for p in places]), word_t, size, word)
        else:                               # (a .col register of two halves: element by element)
            et = ir.IntType(frag.bits)
            got = ir.Constant(ir.VectorType(word_t, WARP), None) if load else None
            for j in range(frag.per_reg):
                shift = ir.Constant(ir.VectorType(word_t, WARP), j * frag.bits)
                part = None if load else b.trunc(b.lshr(word, shift), ir.VectorType(et, WARP))
                element = w.gather_scatter(addresses([p[j] for p in places]), et, size, part)
                if load:
                    got = b.or_(got, b.shl(b.zext(element, got.type), shift))
        if load:
            w.write(reg, got, f"b{frag.reg_bits}")


def _one_after_another(places, row_major) -> bool:
    """Whether elements at `places` follow each other in memory of the layout."""
    step = (0, 1) if row_major else (1, 0)
    return all(p == (places[0][0] + j * step[0], places[0][1] + j * step[1]) for j, p in enumerate(places))


OPS = {"mma": _product, "mma.sp": _product, "wmma.mma": _product,
       "ldmatrix": _ldmatrix, "stmatrix": _stmatrix, "movmatrix": _movmatrix,
       "wmma.load": _wmma_memory, "wmma.store": _wmma_memory}
assert set(OPS) == set(TAKES)
