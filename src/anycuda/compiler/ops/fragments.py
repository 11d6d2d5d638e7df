"""Where the elements of a warp's matrix fragments live: for each matrix operand of a warp
matrix instruction, which (row, column) of the matrix each lane's element i holds.

A fragment is a lane's share of a matrix: `regs` registers of `reg_bits` bits, each holding
`per_reg` elements of `bits` bits, element i in register i // per_reg at bit
(i % per_reg) * bits (the ISA's "elements, low to high"). `place(lane, i)` is its (row, col).

mma.sync's layouts are the ISA's (PTX ISA, "Matrix Fragments for mma.mMnNkK"): each written
below as the ISA's formula of groupID = laneid >> 2 and threadID_in_group = laneid % 4.
mma.m8n8k4 with .f16 multiplicands is four products at once, one per quad pair of lanes: its
fragments hold the four matrices of an operand stacked (QUAD_PAIRS), so that one product of
taller matrices, taken block by block, is the four.
wmma's layouts are implementation-defined on GPUs; ours (wmma_fragment) puts the matrix's elements in
row-major order lane after lane (lane l's element i is element (l * n + i) mod rows * cols),
so that load, mma and store agree; where the ISA gives a fragment more elements than the
matrix has per lane (.f16 multiplicands), the lanes of the second half hold copies.
ldmatrix and movmatrix use the ISA's 8x8 layout of b16 elements (LDMATRIX).

Nothing here emits code: compiler/ops/matrix.py reads these tables.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

LANES = 32
# element type -> its width in bits
BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "s8": 8, "u8": 8, "s32": 32, "b16": 16,
        "e4m3": 8, "e5m2": 8, "s4": 4, "u4": 4, "b1": 1}


@dataclass(frozen=True)
class Fragment:
    name: str                      # which layout: 'mma.m16n8k16.a.f16', 'wmma.m16n16k16.c.f32', ...
    rows: int
    cols: int
    etype: str                     # the element type (BITS)
    regs: int                      # registers per lane
    per_reg: int                   # elements per register
    places: tuple                  # places[lane][i] = (row, col)

    @property
    def bits(self) -> int:
        return BITS[self.etype]

    @property
    def reg_bits(self) -> int:
        return 64 if self.etype == "f64" else 32

    @property
    def count(self) -> int:
        """Elements per lane."""
        return self.regs * self.per_reg

    def place(self, lane: int, i: int) -> tuple:
        return self.places[lane][i]

    @property
    def in_lane_order(self) -> bool:
        """Whether lane l's element i is element (l * count + i) mod rows * cols of the matrix
        in row-major order (our wmma layouts): a lane's elements are one run of it."""
        size = self.rows * self.cols
        return all(self.places[lane][i] == divmod((lane * self.count + i) % size, self.cols)
                   for lane in range(LANES) for i in range(self.count))


def _fragment(name, rows, cols, etype, regs, per_reg, formula) -> Fragment:
    places = tuple(tuple(formula(lane >> 2, lane & 3, i) for i in range(regs * per_reg)) for lane in range(LANES))
    return Fragment(name, rows, cols, etype, regs, per_reg, places)


# ---------------------------------------------------------------- mma.sync (the ISA's layouts)
# (shape, operand, element class) -> (registers, elements per register,
# (groupID, threadID_in_group, i) -> (row, col)). Classes: "h" 16-bit floats, "s" one element
# a register (.tf32, .f64), "i8" / "i4" / "b1" the integers, "w" 32- or 64-bit accumulators
# one a register (f32, s32, f64), "h2" f16 accumulators.
_C16 = lambda g, t, i: (g + 8 * (i >= 2), 2 * t + (i & 1))      # noqa: E731 - m16n8 C/D
MMA_LAYOUTS = {
    ("m16n8k16", "a", "h"): (4, 2, lambda g, t, i: (g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >= 4))),
    ("m16n8k16", "b", "h"): (2, 2, lambda g, t, i: (2 * t + (i & 1) + 8 * (i >= 2), g)),
    ("m16n8k8", "a", "h"): (2, 2, lambda g, t, i: (g + 8 * (i >= 2), 2 * t + (i & 1))),
    ("m16n8k8", "b", "h"): (1, 2, lambda g, t, i: (2 * t + i, g)),
    ("m8n8k4", "a", "s"): (1, 1, lambda g, t, i: (g, t)),
    ("m8n8k4", "b", "s"): (1, 1, lambda g, t, i: (t, g)),
    ("m16n8k4", "a", "s"): (2, 1, lambda g, t, i: (g + 8 * i, t)),
    ("m16n8k4", "b", "s"): (1, 1, lambda g, t, i: (t, g)),
    ("m16n8k8", "a", "s"): (4, 1, lambda g, t, i: (g + 8 * (i & 1), t + 4 * (i >= 2))),
    ("m16n8k8", "b", "s"): (2, 1, lambda g, t, i: (t + 4 * i, g)),
    ("m16n8k16", "a", "s"): (8, 1, lambda g, t, i: (g + 8 * (i & 1), t + 4 * (i >> 1))),
    ("m16n8k16", "b", "s"): (4, 1, lambda g, t, i: (t + 4 * i, g)),
    # B of the sparse m16n8k32 .f16 (the ISA's figure: each register two rows further on)
    ("m16n8k32", "b", "h"): (4, 2, lambda g, t, i: (2 * t + (i & 1) + 8 * (i >> 1), g)),
    ("m16n8", "c", "w"): (4, 1, _C16),
    ("m16n8", "c", "h2"): (2, 2, _C16),
    ("m8n8", "c", "w"): (2, 1, lambda g, t, i: (g, 2 * t + i)),
}


def _integer_layouts(kind, per, shapes):
    """The integer layouts of one element width: the ISA gives each the 8-bit layouts with
    `per` elements a register instead of four (.s4 eight, .b1 thirty-two), K scaled alike;
    `shapes` are its m8n8, smaller m16n8 and larger m16n8 shapes."""
    small, mid, big = shapes
    return {
        (small, "a", kind): (1, per, lambda g, t, i: (g, per * t + i)),
        (small, "b", kind): (1, per, lambda g, t, i: (per * t + i, g)),
        (mid, "a", kind): (2, per, lambda g, t, i: (g + 8 * (i >= per), per * t + i % per)),
        (mid, "b", kind): (1, per, lambda g, t, i: (per * t + i, g)),
        (big, "a", kind): (4, per, lambda g, t, i: (g + 8 * ((i // per) & 1), per * t + i % per + 4 * per * (i >= 2 * per))),
        (big, "b", kind): (2, per, lambda g, t, i: (per * t + i % per + 4 * per * (i >= per), g)),
    }


MMA_LAYOUTS.update(_integer_layouts("i8", 4, ("m8n8k16", "m16n8k16", "m16n8k32")))
# B of the sparse m16n8k64 with 8-bit elements (the ISA's figures: each register 16 rows further on)
MMA_LAYOUTS[("m16n8k64", "b", "i8")] = (4, 4, lambda g, t, i: (4 * t + (i & 3) + 16 * (i >> 2), g))
MMA_LAYOUTS.update(_integer_layouts("i4", 8, ("m8n8k32", "m16n8k32", "m16n8k64")))
MMA_LAYOUTS.update(_integer_layouts("b1", 32, ("m8n8k128", "m16n8k128", "m16n8k256")))

# mma.m8n8k4 with .f16 multiplicands computes four products, one per quad pair (lanes 4q .. 4q+3
# and 16 + 4q .. 16 + 4q + 3, the high four): here the four matrices of an operand stacked,
# quad pair q's first in row 8q (A, C, D) or 4q (B). Keyed by the operand's layout (A and B
# may each be .row or .col) or the accumulator's class. hi = lane >= 16, q = groupID & 3.
QUAD_PAIR_SHAPE = "m8n8k4"
_QUAD = {
    ("a", "row"): (2, 2, lambda q, hi, t, i: (8 * q + t + 4 * hi, i)),
    ("a", "col"): (2, 2, lambda q, hi, t, i: (8 * q + i + 4 * hi, t)),
    ("b", "row"): (2, 2, lambda q, hi, t, i: (4 * q + t, i + 4 * hi)),
    ("b", "col"): (2, 2, lambda q, hi, t, i: (4 * q + i, t + 4 * hi)),
    ("c", "h2"): (4, 2, lambda q, hi, t, i: (8 * q + t + 4 * hi, i)),
    ("c", "w"): (8, 1, lambda q, hi, t, i: (8 * q + (t & 1) + (i & 2) + 4 * hi, (i & 4) + (t & 2) + (i & 1))),
}
QUAD_PAIRS = 4

# mma.sync forms: (shape, a type) -> the accumulator types allowed (b's type is a's, or one
# MIXABLE with it); MMA_CLASS: a multiplicand type's layout class
MMA_FORMS = {
    ("m16n8k16", "f16"): ("f16", "f32"), ("m16n8k8", "f16"): ("f16", "f32"), ("m8n8k4", "f16"): ("f16", "f32"),
    ("m16n8k16", "bf16"): ("f32",), ("m16n8k8", "bf16"): ("f32",),
    ("m16n8k4", "tf32"): ("f32",), ("m16n8k8", "tf32"): ("f32",),
    **{(s, "f64"): ("f64",) for s in ("m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16")},
    **{(s, t): ("s32",) for s in ("m8n8k16", "m16n8k16", "m16n8k32") for t in ("s8", "u8")},
    **{(s, t): ("s32",) for s in ("m8n8k32", "m16n8k32", "m16n8k64") for t in ("s4", "u4")},
    **{(s, "b1"): ("s32",) for s in ("m8n8k128", "m16n8k128", "m16n8k256")},
    **{(s, t): ("f16", "f32") for s in ("m16n8k16", "m16n8k32") for t in ("e4m3", "e5m2")},
}
# the 8-bit floats' fragments are the 8-bit integers' (PTX ISA, mma.m16n8k16 and m16n8k32)
MMA_CLASS = {"f16": "h", "bf16": "h", "tf32": "s", "f64": "s", "s8": "i8", "u8": "i8", "e4m3": "i8", "e5m2": "i8",
             "s4": "i4", "u4": "i4", "b1": "b1"}
# multiplicand types that may be mixed in one product
MIXABLE = (("s8", "u8"), ("s4", "u4"), ("e4m3", "e5m2"))


# ---------------------------------------------------------------- mma.sp (sparse A)
@dataclass(frozen=True)
class Sparsity:
    """mma.sp's structured sparse A (PTX ISA, "Sparse matrix storage"): each row of A is chunks
    of `4 // units` elements of which `2 // units` are kept (2 of 4; .tf32, whose element is two
    16-bit units, 1 of 2). A's fragment holds the kept elements (the dense fragment of half the
    K); the metadata gives each chunk four bits, two 2-bit indices of units in the chunk (of a
    .tf32 element, its first unit's). A lane's .b32 metadata holds four chunks of row g (bits
    0-15, chunk c at bits 4c) and the same four of row g + 8 (bits 16-31); `threads` lanes of
    each group of four hold a row's chunks, lane j of them chunks 4j .. 4j + 3, and the sparsity
    selector says which lanes: 4 * groupID + selector * threads + j. (The ISA shows this map in
    figures only; the m16n8k32 .f16 one agrees with a test run on GPUs by another project, the
    others are its pattern, to be checked against GPU golden files.)"""
    k: int                        # K of the product (A's fragment is the dense one of K / 2)
    units: int                    # 16-bit units of an element for the indices (2 for .tf32)

    @property
    def chunk(self) -> int:
        return 4 // self.units

    @property
    def kept(self) -> int:
        return 2 // self.units

    @property
    def threads(self) -> int:
        """Lanes of a group of four that hold metadata."""
        return self.k // self.chunk // 4

    @property
    def selectors(self) -> int:
        """How many values the sparsity selector may take."""
        return 4 // self.threads


# mma.sp forms: (shape, a type) -> the accumulator types allowed (D's type is C's)
SPARSE_FORMS = {
    **{(s, "f16"): ("f16", "f32") for s in ("m16n8k16", "m16n8k32")},
    **{(s, "bf16"): ("f32",) for s in ("m16n8k16", "m16n8k32")},
    **{(s, "tf32"): ("f32",) for s in ("m16n8k8", "m16n8k16")},
    **{(s, t): ("s32",) for s in ("m16n8k32", "m16n8k64") for t in ("s8", "u8")},
    **{("m16n8k64", t): ("f32",) for t in ("e4m3", "e5m2")},
}


def sparsity(shape: str, atype: str) -> Sparsity:
    return Sparsity(dims(shape)[2], 2 if BITS[atype] == 32 else 1)


def sparse_a_shape(shape: str) -> str:
    """The shape whose dense A fragment holds a sparse `shape`'s kept elements (half the K)."""
    m, n, k = dims(shape)
    return f"m{m}n{n}k{k // 2}"


def dims(shape: str) -> tuple:
    """(M, N, K) of a shape modifier 'mMnNkK'."""
    m, rest = shape[1:].split("n")
    n, k = rest.split("k")
    return int(m), int(n), int(k)


def is_quad_pair(shape: str, atype: str) -> bool:
    """Whether mma.`shape` with .`atype` multiplicands is the four quad-pair products."""
    return shape == QUAD_PAIR_SHAPE and atype == "f16"


@lru_cache(maxsize=None)
def mma_fragment(shape: str, operand: str, etype: str, layout: str = "") -> Fragment:
    """The ISA's fragment of operand 'a', 'b' or 'c' (also D) of mma.sync.`shape` with
    elements of `etype` (a form MMA_FORMS lists). `layout` ('row' or 'col') names a
    quad-pair A's or B's layout, and 'quad' a quad-pair accumulator."""
    m, n, k = dims(shape)
    kind = {"f32": "w", "s32": "w", "f64": "w", "f16": "h2"}.get(etype) if operand == "c" else MMA_CLASS[etype]
    if layout:
        regs, per_reg, formula = _QUAD[(operand, kind if operand == "c" else layout)]
        rows, cols = {"a": (m * QUAD_PAIRS, k), "b": (k * QUAD_PAIRS, n), "c": (m * QUAD_PAIRS, n)}[operand]
        return _fragment(f"mma.{shape}.{operand}.{etype}.{layout}", rows, cols, etype, regs, per_reg,
                         lambda g, t, i: formula(g & 3, g >> 2, t, i))
    rows, cols = {"a": (m, k), "b": (k, n), "c": (m, n)}[operand]
    key = (f"m{m}n8", "c", kind) if operand == "c" else (shape, operand, kind)
    regs, per_reg, formula = MMA_LAYOUTS[key]
    return _fragment(f"mma.{shape}.{operand}.{etype}", rows, cols, etype, regs, per_reg, formula)


# ---------------------------------------------------------------- wmma (ours)
# (shape, a/b type) -> the accumulator types allowed
WMMA_FORMS = {
    ("m16n16k16", "f16"): ("f16", "f32"), ("m32n8k16", "f16"): ("f16", "f32"), ("m8n32k16", "f16"): ("f16", "f32"),
    ("m16n16k16", "bf16"): ("f32",), ("m32n8k16", "bf16"): ("f32",), ("m8n32k16", "bf16"): ("f32",),
    ("m16n16k8", "tf32"): ("f32",), ("m8n8k4", "f64"): ("f64",),
    ("m16n16k16", "s8"): ("s32",), ("m32n8k16", "s8"): ("s32",), ("m8n32k16", "s8"): ("s32",),
    ("m16n16k16", "u8"): ("s32",), ("m32n8k16", "u8"): ("s32",), ("m8n32k16", "u8"): ("s32",),
    ("m8n8k32", "s4"): ("s32",), ("m8n8k32", "u4"): ("s32",), ("m8n8k128", "b1"): ("s32",),
}


@lru_cache(maxsize=None)
def wmma_fragment(shape: str, operand: str, etype: str) -> Fragment:
    """Our fragment of operand 'a', 'b' or 'c' (also D) of wmma.`shape` with elements of
    `etype`: the ISA's register count (eight .f16x2 registers for an .f16 multiplicand, else
    as many elements as the matrix has per lane), the elements in row-major order lane
    after lane."""
    m, n, k = dims(shape)
    rows, cols = {"a": (m, k), "b": (k, n), "c": (m, n)}[operand]
    bits = BITS[etype]
    per_reg = max(32 // bits, 1)
    if etype == "f16" and operand != "c":
        regs = 8
    else:
        regs = max(rows * cols // LANES // per_reg, 1)
    count = regs * per_reg
    size = rows * cols

    def formula(g, t, i):
        q = ((g * 4 + t) * count + i) % size
        return q // cols, q % cols
    return _fragment(f"wmma.{shape}.{operand}.{etype}", rows, cols, etype, regs, per_reg, formula)


# ---------------------------------------------------------------- ldmatrix, stmatrix, movmatrix
# ldmatrix, stmatrix and movmatrix: one 8x8 matrix of b16 elements, lane l holding row l / 4,
# columns 2 * (l % 4) and the next (PTX ISA, ldmatrix)
LDMATRIX = _fragment("ldmatrix", 8, 8, "b16", 1, 2, lambda g, t, i: (g, 2 * t + i))
