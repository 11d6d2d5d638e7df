"""Lane strides: which registers a warp's 32 lanes hold as `base + lane * stride`.

A warp region (compiler/vector/warpregions.py) keeps each register as a `<32 x T>` vector. Most of
what a row loop computes is not that varied: the row's start and the channel count are the
same in every lane (stride 0), the loop's index and element pointers step by one element
per lane (`x + 4 * (lane + 32 * k)`: stride 4). Held as one scalar, the lane-0 value, such a
register costs a scalar instruction where its vector costs eight (`<32 x i64>` is eight
AVX2 registers), and a load through it is one vector load without checking its 32
addresses.

`lane_strides` finds, for every register of a kernel, the stride its lanes keep when the
32 lanes run together (the region's lockstep mode, no lane masked), or VARYING. It does not
look at control flow: each definition must compute a value of its register's stride from
operands of theirs. That holds in lockstep, where every lane runs every instruction, as long
as the values a lockstep stretch starts from have their strides: the region checks the
registers live there when it enters lockstep (and leaves lockstep when its lanes part).

Strides are of bit patterns, modulo 2**width of the register. An instruction that keeps a
stride computes the lane-0 result from the lane-0 operands (`instruction_stride`); a few
(CHECKS) do so only when no lane's value wraps past the others', which the region checks
at run time before it relies on it.
"""
from __future__ import annotations

from ...ptx import ir as pir
from ..analysis import dataflow
from ..analysis.suspensions import MATRIX_RUN
from ..types import type_mods, width

VARYING = None
LANES = 32
# the run-time conditions of instruction_stride's checked forms
EXTEND = "extend"              # a strided 32-bit value widened: no lane wraps past 2**32
LOW_BITS = "low bits"          # a strided value `and` 2**m - 1: no lane carries past bit m
THREAD_INDEX = "thread index"  # %tid: the warp's lanes are consecutive in x (ntid.x % 32 == 0)
FLIPPED = "flipped"            # a strided value `xor` one alike in every lane: no lane carries into its bits
QUOTIENT = "quotient"          # a strided value divided by one alike in every lane: no lane passes a multiple
# specials that every lane of a warp reads alike
_UNIFORM_SPECIALS = frozenset(("ntid", "nctaid", "ctaid", "warpid", "nwarpid", "gridid", "smid", "nsmid",
                               "warpsz"))
# opcodes whose result is not the lanes' own function of their operands
_ACROSS_LANES = frozenset(("shfl", "vote", "match", "activemask", "redux", "elect", "atom", "red", "bar", "barrier",
                           "call", "tex", "tld4", "suld", "sust",
                           # a fragment's elements are the lane's own (wmma.load reads by %laneid)
                           "mma", "mma.sp", "wmma.mma", "wmma.load", "ldmatrix", "movmatrix", MATRIX_RUN))
# a divisor keeps the quotient's stride where it is at least this many warps' span of the
# dividend: at most one warp in as many passes a multiple of it (_quotient)
QUOTIENT_WARPS = 4
_UNKNOWN = object()            # a register whose definitions the analysis has not read yet


def normalise(stride, bits):
    """A stride as the signed value of its `bits`-bit pattern."""
    if stride is VARYING or stride is _UNKNOWN:
        return stride
    m = stride % (1 << bits)
    return m - (1 << bits) if m >= 1 << (bits - 1) else m


def _operand_stride(op, strides, bits, t):
    """The stride of an operand read as type `t`: _UNKNOWN while its register's is unknown."""
    if isinstance(op, (pir.Imm, pir.Sym)):
        return 0
    if isinstance(op, pir.Reg):
        s = strides.get(op.name, _UNKNOWN)
        if s is _UNKNOWN or s is VARYING or s == 0:
            return s
        # a register read narrower keeps its stride (mod the narrower width); read wider it
        # would be extended, which a lane may wrap
        tb = 1 if t == "pred" else width(t)
        return normalise(s, tb) if bits(op.name) >= tb else VARYING
    if isinstance(op, pir.SpecialReg):
        if op.name == "laneid":
            return 1
        if op.name == "tid" and op.component in ("x", "y", "z"):
            return 1 if op.component == "x" else 0
        return 0 if op.name in _UNIFORM_SPECIALS else VARYING
    if isinstance(op, pir.Not):
        s = _operand_stride(op.operand, strides, bits, "pred")
        return s if s in (0, _UNKNOWN) else VARYING
    if isinstance(op, pir.Addr):
        return 0 if op.base is None else _operand_stride(op.base, strides, bits, "u64")
    if isinstance(op, pir.Vec):
        ss = [_operand_stride(item, strides, bits, t) for item in op.items]
        return _UNKNOWN if _UNKNOWN in ss else (0 if all(s == 0 for s in ss) else VARYING)
    return VARYING


def _constant(op, constants):
    """An integer operand's compile-time value, or None."""
    if isinstance(op, pir.Imm) and not op.is_float and isinstance(op.value, int):
        return op.value
    if isinstance(op, pir.Reg):
        return constants.get(op.name)
    return None


def instruction_stride(st, strides, bits, constants, flips=True, divisors=frozenset()):
    """(stride of what `st` writes, check) given the registers' strides: check is None, or
    (EXTEND, operand, signed?, its stride), (LOW_BITS, operand, mask, its stride),
    (FLIPPED, operand, the other operand, its stride), (QUOTIENT, dividend, divisor, the division's type,
    the dividend's stride) or (THREAD_INDEX,), a condition the
    lane-0 computation relies on. The stride is _UNKNOWN
    while an operand's is unknown. Without `flips`, an xor keeps no stride (FLIPPED's
    check would fail: a butterfly's partners in one warp). A division keeps one (QUOTIENT)
    by an immediate divisor, or by a register of `divisors`, which the region tests before it
    runs (warpregions.EntryRegion.divisors)."""
    ts = type_mods(st.mods)
    t = ts[-1] if ts else "b32"
    if st.guard is not None:
        g = _operand_stride(st.guard.reg, strides, bits, "pred")
        if g is _UNKNOWN or g is VARYING:
            return g, None
    if "cc" in st.mods or not st.operands:
        return VARYING, None
    if st.opcode == "ld":
        if {"volatile", "relaxed", "acquire", "mmio"} & set(st.mods):
            return VARYING, None
        s = _operand_stride(st.operands[1], strides, bits, "u64")
        return (s if s in (0, _UNKNOWN) else VARYING), None
    if st.opcode in _ACROSS_LANES:
        return VARYING, None
    srcs = st.operands[1:]
    read = [_operand_stride(op, strides, bits, _source_type(st, i, t)) for i, op in enumerate(srcs)]
    if _UNKNOWN in read:
        return _UNKNOWN, None
    if VARYING in read:
        return VARYING, None
    check = (THREAD_INDEX,) if any(isinstance(op, pir.SpecialReg) and op.name == "tid" for op in srcs) else None
    if all(s == 0 for s in read):
        return 0, check
    if t[0] not in "bsu" or st.opcode == "setp":
        return VARYING, None
    result = _linear(st, srcs, read, constants, width(t), flips, divisors)
    if result is None or (result[1] is not None and check is not None):
        return VARYING, None
    return result[0], result[1] or check


def _source_type(st, i, t):
    """The type instruction `st` reads its source operand i as."""
    if st.opcode == "selp" and i == 2:
        return "pred"
    if st.opcode in ("shl", "shr") and i == 1:
        return "b32"
    if st.opcode == "cvt":
        return type_mods(st.mods)[-1]
    return t


def _linear(st, srcs, read, constants, w, flips=True, divisors=frozenset()):
    """(stride, check) of a linear integer instruction of strided operands, or None."""
    op, mods = st.opcode, set(st.mods)
    if op in ("mov", "cvta") and len(srcs) == 1:
        return read[0], None
    if op == "selp" and read[2] == 0 and read[0] == read[1]:
        return read[0], None
    if op in ("add", "sub") and len(srcs) == 2 and "sat" not in mods:
        return normalise(read[0] + (read[1] if op == "add" else -read[1]), w), None
    if op == "neg" and len(srcs) == 1:
        return normalise(-read[0], w), None
    if op == "shl" and isinstance(srcs[1], pir.Imm) and read[1] == 0:
        n = _constant(srcs[1], {}) & 0xFFFFFFFF
        return normalise(read[0] << n if n < w else 0, w), None
    if op == "shr" and isinstance(srcs[1], pir.Imm) and read[1] == 0:
        # a warp's index (tid.x >> 5): alike in every lane when none carries into bit n
        mask = (1 << min(_constant(srcs[1], {}) & 0xFFFFFFFF, w)) - 1
        if read[0] > 0 and (LANES - 1) * read[0] <= mask:
            return 0, (LOW_BITS, srcs[0], mask, read[0])
        return None
    if op in ("mul", "mad") and "lo" in mods:
        found = _product(srcs[:2], read[:2], constants)
        if found is None:
            return None
        addend = read[2] if op == "mad" and len(srcs) == 3 else 0
        return normalise(found[1] + addend, w), None
    if op == "mul" and "wide" in mods and len(srcs) == 2:
        found = _product(srcs, read, constants, w, type_mods(st.mods)[-1].startswith("s"))
        if found is None or abs(read[found[0]]) * (LANES - 1) >= 1 << (w - 1):
            return None
        i = found[0]
        return normalise(found[1], 2 * w), (EXTEND, srcs[i], type_mods(st.mods)[-1].startswith("s"), read[i])
    if op in ("and", "or", "xor") and len(srcs) == 2:
        kept = _below_stride(op, srcs, read, constants, w)
        if kept is not None:
            return kept, None
    if op == "and" and len(srcs) == 2:
        for i in (0, 1):
            mask, k = _constant(srcs[1 - i], constants), read[i]
            if mask is not None and read[1 - i] == 0 and k > 0 and mask & (mask + 1) == 0 \
                    and (LANES - 1) * k <= mask:
                return k, (LOW_BITS, srcs[i], mask, k)
        return None
    if op == "xor" and len(srcs) == 2 and flips:
        # a partner's index (bitonic sort's i ^ j): the lanes' bits below j's lowest one
        for i in (0, 1):
            if read[1 - i] == 0 and read[i] > 0:
                return read[i], (FLIPPED, srcs[i], srcs[1 - i], read[i])
        return None
    if op in ("div", "rem") and len(srcs) == 2:
        return _quotient(st, srcs, read, constants, divisors)
    if op == "cvt":
        dst, src = type_mods(st.mods)[0], type_mods(st.mods)[-1]
        if dst[0] not in "bsu" or src[0] not in "bsu" or mods & {"sat", "rn", "rz", "rm", "rp", "rni",
                                                                  "rzi", "rmi", "rpi"}:
            return None
        if width(dst) <= width(src):
            return normalise(read[0], width(dst)), None
        k = read[0]
        if abs(k) * (LANES - 1) >= 1 << (width(src) - 1):
            return None
        return k, (EXTEND, srcs[0], src.startswith("s"), k)
    return None


def _quotient(st, srcs, read, constants, divisors):
    """(stride, check) of an integer div or rem of a growing strided dividend by a divisor alike
    in every lane, or None. Where no lane's dividend passes a multiple of the divisor, the
    quotient is one value and the remainder steps as the dividend does: a grid-stride loop's
    `x[i / C] * y[i % C]` then loads x[i / C] once and y[i % C] as one vector, where divided
    lane by lane both were gathers (5x the time of the C loop). A warp that fails the check
    leaves lockstep for the rest of its turn of the loop, which costs more than the division
    saves (1.5x the time where every warp failed): the divisor must be at least
    QUOTIENT_WARPS warps' span, an immediate here, a register of `divisors` before the region
    runs (warpregions.EntryRegion.divisors), so that at most one warp in QUOTIENT_WARPS fails."""
    k, t = read[0], type_mods(st.mods)[-1]
    if read[1] != 0 or k <= 0:
        return None
    d = _constant(srcs[1], constants)
    if d is not None:
        d = normalise(d, width(t)) if t.startswith("s") else d % (1 << width(t))
        if d < QUOTIENT_WARPS * LANES * k:
            return None
    elif not (isinstance(srcs[1], pir.Reg) and srcs[1].name in divisors):
        return None
    return (0 if st.opcode == "div" else k), (QUOTIENT, srcs[0], srcs[1], t, k)


def _below_stride(op, srcs, read, constants, w):
    """The stride of an and, or or xor of a strided value by a constant that holds bits only
    below the stride's lowest set one (or, for and, every bit from there up), or None. Lanes
    k apart share those low bits, so the result steps as the value does, with no condition:
    `2 * i + 1` as nvcc writes it (`or` of 2 * i and 1), `i & ~3` of 4-aligned lanes; an
    `and` of the low bits alone is one value in every lane."""
    for i in (0, 1):
        c, k = _constant(srcs[1 - i], constants), read[i]
        if c is None or read[1 - i] != 0 or not k:
            continue
        c &= (1 << w) - 1
        low = (k & -k) - 1                  # the bits below k's lowest set one
        if not c & ~low:
            return 0 if op == "and" else k
        if op == "and" and c | low == (1 << w) - 1:
            return k
    return None


def _product(srcs, read, constants, w=None, signed=False):
    """(index of the strided operand, the product's stride) of a product by a compile-time
    constant, or None. `w`: the operands' width where they are extended first (mul.wide)."""
    if read[0] == 0 and read[1] == 0:
        return 0, 0
    for i in (0, 1):
        c = _constant(srcs[1 - i], constants)
        if read[1 - i] == 0 and c is not None:
            if w is not None:
                c = normalise(c, w) if signed else c % (1 << w)
            return i, read[i] * c
    return None


def lane_strides(body, bits, constants, flips=True, divisors=frozenset()) -> dict:
    """{register: its lanes' stride in lockstep, or VARYING} for every register `body` writes.
    `bits(name)` is a register's width (1 for a predicate); `constants` are
    uniformity.constant_registers. A register with a definition of another stride, or of none,
    is VARYING; one whose definitions only read registers of unknown stride (a cycle of its
    own) is VARYING too. `flips`, `divisors`: as instruction_stride's.

    A worklist: a register's definitions are read again only when the stride of a register
    they read has changed, and a stride only goes from unknown to known to VARYING (each
    instruction's is monotone in its operands'), so each definition is read at most three
    times per register it reads: O(n) in the body's instructions. (The answer is the one
    fixpoint from every register unknown, whatever the order.)"""
    defs = dataflow.definition_positions(body)
    readers = {}                # register -> the registers whose definitions read it
    for r, positions in defs.items():
        for pos in positions:
            for u in dataflow.defs_uses(body[pos])[1]:
                readers.setdefault(u, set()).add(r)
    strides = {}
    order = list(defs)
    todo, queued = order[::-1], set(order)
    while todo:
        r = todo.pop()
        queued.discard(r)
        if strides.get(r, _UNKNOWN) is VARYING:
            continue
        seen = set()
        for pos in defs[r]:
            st = body[pos]
            s, _ = instruction_stride(st, strides, bits, constants, flips, divisors)
            if s is not _UNKNOWN:
                seen.add(VARYING if len(dataflow.defs_uses(st)[0]) > 1 and s != 0 else s)
        if not seen:
            continue
        new = seen.pop() if len(seen) == 1 else VARYING
        if new is not VARYING:
            new = normalise(new, bits(r))
        if new != strides.get(r, _UNKNOWN):
            strides[r] = new
            for u in sorted(readers.get(r, ())):
                if u not in queued:
                    queued.add(u)
                    todo.append(u)
    return {r: strides.get(r, VARYING) for r in defs}
