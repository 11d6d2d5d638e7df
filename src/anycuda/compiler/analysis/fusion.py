"""Multiplies and adds that ptxas fuses into one fma (fused_products), so that anycuda rounds
as a GPU does.
"""
from __future__ import annotations

from collections import Counter

from ...ptx import ir
from .cfg import ends_block
from .dataflow import defs_uses

_FUSABLE_TYPES = ("f32", "f64")
_NOT_FUSABLE_MODS = frozenset(("rn", "rz", "rm", "rp", "sat"))


def _fusable(inst, opcodes) -> bool:
    return (inst.opcode in opcodes and inst.guard is None and bool(inst.mods)
            and inst.mods[-1] in _FUSABLE_TYPES and not _NOT_FUSABLE_MODS & set(inst.mods)
            and all(isinstance(op, (ir.Reg, ir.Imm)) for op in inst.operands))


def fused_products(body: list) -> dict:
    """id(add or sub) -> the mul whose product it takes, for each pair that ptxas fuses into
    one fma (an H200 gives `x * y - z` written as mul.f32 and sub.f32 as one fma.rn): a float
    mul and add/sub of one type, neither with a rounding modifier or .sat, both .ftz or
    neither, unpredicated, in one basic block; the product read by that add/sub alone, and
    the mul's sources not written in between. With a rounding modifier (what __fmul_rn and
    __fadd_rn write) PTX keeps the two roundings. O(n): a write drops the products it
    overwrites or whose sources it writes through an index by source register."""
    effects = {id(st): defs_uses(st) for st in body if isinstance(st, ir.Instruction)}
    uses = Counter(r for _, read in effects.values() for r in read)
    defs = Counter(r for written, _ in effects.values() for r in written)
    fused, pending = {}, {}             # pending: product register -> its mul, in this block
    waiting = {}                        # register -> the pending products whose mul reads it
    for st in body:
        if isinstance(st, ir.Label):
            pending.clear()
            waiting.clear()
            continue
        if not isinstance(st, ir.Instruction):
            continue
        if _fusable(st, ("add", "sub")):
            for op in st.operands[1:]:
                mul = pending.get(op.name) if isinstance(op, ir.Reg) else None
                if mul is not None and mul.mods == st.mods:
                    fused[id(st)] = mul
                    break
        for w in effects[id(st)][0]:
            pending.pop(w, None)        # the product overwritten, or a source of one
            for r in waiting.pop(w, ()):
                pending.pop(r, None)
        if _fusable(st, ("mul",)):
            r = st.operands[0].name
            if uses.get(r) == 1 and defs.get(r) == 1:
                pending[r] = st
                for op in st.operands[1:]:
                    if isinstance(op, ir.Reg):
                        waiting.setdefault(op.name, []).append(r)
        if ends_block(st):
            pending.clear()
            waiting.clear()
    return fused
