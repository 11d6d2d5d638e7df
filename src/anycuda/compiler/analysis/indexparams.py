"""A kernel's index parameters: the scalars its index arithmetic divides and multiplies by.

CuPy's elementwise kernels read an array's shape and byte strides from their parameters
(CArray, CIndexer) and compute each element's address as `i / shape[1]`, `i % shape[1]`
times the strides. As registers, those values give the warp regions nothing to work with: a
quotient of a register divisor goes lane by lane, a product by a register stride has no lane
stride (vector/laneshapes.py). The same kernel with the values written in as constants
(runtime/specialisation.py, compiler/constantprop.py) gets a quotient form and strided
accesses.

An index parameter is one an unguarded `ld.param` of an integer type reads, whose value
(through integer instructions) is an operand of a division, remainder, product, shift or
`and` whose result goes into an address, and which is never, as it is or plus an offset, an address or a `cvta`'s source: a
pointer is new at each call, and a variant made for one pointer would be used once (a
stride reaches addresses too, but only through a product). A loop's bound is not one: the same code runs arrays of any
size alike (nvcc divides by it to count a grid-stride loop's turns, but that count goes into
the loop's tests, not an address).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ptx import ir as pir
from ..types import type_mods
from .dataflow import defs_uses

_LOADED = frozenset(("u32", "s32", "b32", "u64", "s64", "b64"))
_INDEXING = frozenset(("div", "rem", "mul", "mad", "shl", "shr", "and", "bfe"))
_THROUGH = frozenset(("mov", "cvt", "add", "sub", "and", "or", "xor", "shl", "shr", "mul", "not", "popc", "neg"))
_OFFSET = frozenset(("mov", "cvt", "cvta", "add", "sub"))        # a pointer's way to an address


@dataclass(frozen=True)
class IndexParameter:
    """`ld.param` of `size` bytes at byte `offset` of parameter `name`."""
    name: str
    offset: int
    size: int
    ptx_type: str


def index_parameters(body: list) -> list:
    """[IndexParameter] of a kernel's body (the module docstring), in body order, each once."""
    found, addressing = [], _addressing(body)
    for pos, st in enumerate(body):
        load = _parameter_load(st)
        if load is None or load in found:
            continue
        register = st.operands[0].name
        if _indexes(body, _derived_from(body, pos, register, _THROUGH), addressing) \
                and not _addresses(body, _derived_from(body, pos, register, _OFFSET)):
            found.append(load)
    return found


def _parameter_load(st) -> IndexParameter | None:
    if not isinstance(st, pir.Instruction) or st.opcode != "ld" or "param" not in st.mods or st.guard is not None:
        return None
    types = type_mods(st.mods)
    dest, addr = st.operands[0], st.operands[1] if len(st.operands) > 1 else None
    if len(types) != 1 or types[0] not in _LOADED or not isinstance(dest, pir.Reg):
        return None
    if not isinstance(addr, pir.Addr) or not isinstance(addr.base, pir.Sym):
        return None
    return IndexParameter(addr.base.name, addr.offset, int(types[0][1:]) // 8, types[0])


def _derived_from(body, pos, register, through) -> set:
    """The registers whose values come from `register` as written at `pos`, through the
    instructions of `through` (a fixed point over the body: loops carry them round)."""
    derived = {register}
    changed = True
    while changed:
        changed = False
        for st in body[pos + 1:]:
            if not isinstance(st, pir.Instruction) or st.opcode not in through:
                continue
            written, read = defs_uses(st)
            if derived.intersection(read) and not derived.issuperset(written):
                derived.update(written)
                changed = True
    return derived


def _indexes(body, derived, addressing) -> bool:
    """Whether an instruction of _INDEXING reads a register of `derived` and writes one of
    `addressing`."""
    for st in body:
        if isinstance(st, pir.Instruction) and st.opcode in _INDEXING:
            written, read = defs_uses(st)
            if derived.intersection(read) and addressing.intersection(written):
                return True
    return False


def _addressing(body) -> set:
    """The registers whose values (through integer instructions) go into a memory operand's
    address."""
    found = {op.base.name for st in body if isinstance(st, pir.Instruction)
             for op in st.operands if isinstance(op, pir.Addr) and isinstance(op.base, pir.Reg)}
    changed = True
    while changed:
        changed = False
        for st in body:
            if isinstance(st, pir.Instruction) and (st.opcode in _THROUGH or st.opcode in _INDEXING
                                                    or st.opcode == "cvta"):
                written, read = defs_uses(st)
                if found.intersection(written) and not found.issuperset(read):
                    found.update(read)
                    changed = True
    return found


def _addresses(body, derived) -> bool:
    """Whether a register of `derived` is a memory operand's base or a cvta's source."""
    for st in body:
        if not isinstance(st, pir.Instruction):
            continue
        if st.opcode == "cvta" and derived.intersection(defs_uses(st)[1]):
            return True
        for op in st.operands:
            if isinstance(op, pir.Addr) and isinstance(op.base, pir.Reg) and op.base.name in derived:
                return True
    return False
