"""Divisions whose quotient stays one value along a run of a row's threads: the `i / C` and
`i % C` of a flat index (llm.c's encoder: `bt = i / C; c = i % C; out[i] = wte[tokens[bt] * C +
c] + ...`), a permute's `i / (N * d)`.

Vectorised over threadIdx.x, such a quotient is a vector of (mostly) equal values, and every
address made from it becomes a gather: `tokens[i / C]` one address sixteen times,
`wte[tokens[i / C] * C + i % C]` sixteen consecutive ones that the vectoriser cannot see as a
run (embedding_flat took 3-4x the time of the same kernel written with a block-wide quotient).
A block without sites therefore runs each row of its threads in *segments*, each a run of
threads over which every such division's quotient is one value (simt/blockfunction.py): the
step function's SEGMENT case computes, for one thread, the dividends and divisors; the block
function, from the values at threads x0 and x0 + 1, finds how far each quotient stays the
same and runs those threads with the resume bit SEGMENTED, where each division reads its
segment's quotient from the frame instead of dividing. Within a segment the quotient is then
loop-invariant and `i - q * C` steps by one: plain vector loads.

A division qualifies when its dividend is *linear in tid.x*: a 32-bit register, written once
(guards.fixed_registers), computed from threadIdx.x by adds, subtractions, multiplications by
values the same along a row, and shifts by them (so that along a row it is c + k * x, modulo
2^32, exactly); and its divisor is the same along a row (an immediate, or a fixed register
that does not read tid.x). Whether the run is long enough, the dividend non-negative and free
of wrapping, is decided at run time, per segment (blockfunction): where not, the row runs as
before.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ptx import ir as pir
from .dataflow import defs_uses, definition_positions
from .guards import fixed_registers

SEGMENT = -2                  # the step function's case: a thread's dividends and divisors
SEGMENTED = 1 << 22           # a bit of the resume argument (beside guards.PASSED, abi.AFFINE_RESUME)
MAX_DIVISIONS = 8             # distinct (dividend, divisor) pairs a kernel segments by
# threads a quotient must stay one value for (divisor / step): a segment shorter than two of
# AVX-512's vectors keeps the vector division (`i / 3` of an RGB row)
MIN_RUN = 32

_INT32 = ("s32", "u32", "b32")
_ROW_UNIFORM_SPECIALS = frozenset(("ntid", "ctaid", "nctaid", "nwarpid", "warpsz", "gridid", "nsmid",
                                   "dynamic_smem_size", "total_smem_size"))
_NONLINEAR = None              # a degree: the value depends on tid.x other than linearly


@dataclass(frozen=True)
class Division:
    """One dividend and divisor that a kernel divides by (div and rem of them share it)."""
    dividend: str              # register, linear in tid.x
    divisor: object            # pir.Reg (fixed, the same along a row) or pir.Imm
    signed: bool


@dataclass(frozen=True)
class Segmenting:
    """What a kernel segments its rows by: `divisions`, and `at` {position of a div or rem:
    index of its Division}; `closure`, the positions (body order) of the instructions that
    compute the dividends and divisors (the SEGMENT case lowers just these)."""
    divisions: tuple
    at: dict
    closure: tuple


def segmenting(body, params) -> Segmenting | None:
    """The kernel's divisions to segment by (the module's docstring), or None where it has none."""
    fixed = fixed_registers(body, params)
    defs = definition_positions(body)
    degrees = _Degrees(body, defs, fixed)
    divisions, at = [], {}
    for pos, st in enumerate(body):
        if not (isinstance(st, pir.Instruction) and st.opcode in ("div", "rem") and len(st.operands) == 3):
            continue
        t = next((m for m in st.mods if m in ("s32", "u32")), None)
        dividend, divisor = st.operands[1], st.operands[2]
        if t is None or not isinstance(dividend, pir.Reg) or degrees.of(dividend) != 1:
            continue
        if isinstance(divisor, pir.Imm):
            if divisor.is_float or not isinstance(divisor.value, int) or divisor.value == 0:
                continue
        elif not (isinstance(divisor, pir.Reg) and degrees.of(divisor) == 0):
            continue
        d = Division(dividend.name, divisor, t == "s32")
        if d not in divisions:
            if len(divisions) == MAX_DIVISIONS:
                continue
            divisions.append(d)
        at[pos] = divisions.index(d)
    if not at:
        return None
    roots = [d.dividend for d in divisions] + [d.divisor.name for d in divisions if isinstance(d.divisor, pir.Reg)]
    return Segmenting(tuple(divisions), at, tuple(_closure(body, defs, roots)))


def _closure(body, defs, roots) -> list:
    """Positions, in body order, of the definitions the registers `roots` are computed from
    (each written once: fixed registers)."""
    need, todo = set(), list(roots)
    while todo:
        (pos,) = defs[todo.pop()]
        if pos not in need:
            need.add(pos)
            todo.extend(defs_uses(body[pos])[1])
    return sorted(need)


class _Degrees:
    """Each fixed register's degree in tid.x along a row of threads: 0 (the same for the whole
    row), 1 (c + k * x modulo 2^32) or _NONLINEAR; registers looked at once (memo)."""

    def __init__(self, body, defs, fixed):
        self.body, self.defs, self.fixed = body, defs, fixed
        self.memo = {}

    def of(self, op):
        if isinstance(op, pir.Reg):
            if op.name not in self.fixed:
                return _NONLINEAR
            if op.name not in self.memo:
                self.memo[op.name] = _NONLINEAR        # (a cycle: none)
                self.memo[op.name] = self._instruction(self.body[self.defs[op.name][0]])
            return self.memo[op.name]
        if isinstance(op, pir.SpecialReg):
            if op.name == "tid":
                return 1 if op.component == "x" else 0
            return 0 if op.name in _ROW_UNIFORM_SPECIALS else _NONLINEAR   # %laneid, %warpid: x's
        if isinstance(op, (pir.Imm, pir.Sym, pir.Addr)):
            return 0                                   # (fixed: a parameter's address or load)
        return _NONLINEAR

    def _instruction(self, st):
        if st.opcode == "ld":
            return 0                                   # (fixed: a kernel parameter's load)
        sources = [self.of(op) for op in st.operands[1:]]
        if _NONLINEAR in sources:
            return _NONLINEAR
        if not any(sources):
            return 0
        # linear in x: 32-bit wrapping arithmetic of which at most one factor reads x
        if not any(m in _INT32 for m in st.mods) or {"cc", "sat", "hi", "wide"} & set(st.mods):
            return _NONLINEAR
        if st.opcode in ("mov", "add", "sub", "neg"):
            return 1
        if st.opcode == "mul" and "lo" in st.mods:
            return 1 if sum(sources) == 1 else _NONLINEAR
        if st.opcode == "mad" and "lo" in st.mods:
            return 1 if sources[0] + sources[1] <= 1 else _NONLINEAR
        if st.opcode == "shl":
            return 1 if sources[1] == 0 else _NONLINEAR
        return _NONLINEAR
