"""Constants carried into the instructions that read them, in a function's PTX body.

A register written once, by a `mov` of an integer immediate, holds that value wherever it is
read (a read before the write reads an undefined value, which may as well be it). Written
into the instructions that read it as an immediate, and instructions whose sources are then
all immediates folded into such a `mov` in turn, a value reaches the analyses that act on
immediates: a division by a number takes the quotient form, a product by a number has a
lane stride (vector/laneshapes.py). nvcc leaves few such registers; a kernel specialised on
its launch's parameter values (runtime/specialisation.py: `ld.param` made `mov` of the
value) has a chain of them: CuPy's `cvt.u32.u64 %r1, %rd36` of its shape, then `div.u32 %r18,
%r5, %r1`.

Only integer instructions of the forms below are folded, each with PTX's semantics (results
wrap to their type; shift amounts past the width give 0 or the sign; cvt truncates and
extends as its source type says). Immediates go only into the source operands of the
instructions in SUBSTITUTED, where the lowering reads any operand alike; of a commutative
operation with one immediate, the immediate goes second (the analyses look for it there).
"""
from __future__ import annotations

from dataclasses import replace

from ..ptx import ir as pir
from .analysis.uniformity import constant_registers
from .types import INT_TYPES, type_mods, width

# instructions whose sources may be immediates
SUBSTITUTED = frozenset(("mov", "cvt", "add", "sub", "mul", "mad", "div", "rem", "and", "or", "xor", "not", "shl",
                         "shr", "min", "max", "neg", "abs", "popc", "setp", "selp", "bfe"))
_COMMUTATIVE = frozenset(("add", "mul", "and", "or", "xor", "min", "max"))
_BAD_MODS = frozenset(("sat", "cc", "hi", "wide", "rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "ftz", "relu"))
_MAX_ROUNDS = 64


def with_parameters(body: list, values: dict) -> list:
    """`body` with each unguarded `ld.param` of an integer parameter slot in `values`
    ({(parameter name, byte offset): (the bytes' value, how many bytes)}) that reads no more
    than those bytes made a `mov` of what it reads, and the constants propagated: the kernel
    specialised to launches with those parameter values."""
    out = []
    for st in body:
        if isinstance(st, pir.Instruction) and st.opcode == "ld" and "param" in st.mods and st.guard is None \
                and len(st.operands) == 2 and isinstance(st.operands[1], pir.Addr) \
                and isinstance(st.operands[1].base, pir.Sym):
            key = (st.operands[1].base.name, st.operands[1].offset)
            types = type_mods(st.mods)
            if key in values and len(types) == 1 and types[0] in INT_TYPES and width(types[0]) <= 8 * values[key][1]:
                st = replace(st, opcode="mov", mods=(types[0],),
                             operands=(st.operands[0], pir.Imm(_as_type(values[key][0], types[0]))))
        out.append(st)
    return propagate(out)


def propagate(body: list) -> list:
    """`body` (a function's statements) with its registers of constant value written into the
    instructions that read them and the instructions on constants folded, to a fixed point;
    the same list where nothing changes."""
    for _ in range(_MAX_ROUNDS):
        constants = constant_registers(body)
        changed = False
        out = []
        for st in body:
            new = _rewritten(st, constants) if isinstance(st, pir.Instruction) else st
            changed |= new is not st
            out.append(new)
        body = out
        if not changed:
            break
    return body


def _rewritten(st: pir.Instruction, constants: dict) -> pir.Instruction:
    """The instruction with its constant sources as immediates, folded where it can be."""
    if st.opcode not in SUBSTITUTED or len(st.operands) < 2 or not isinstance(st.operands[0], pir.Reg):
        return st
    types = type_mods(st.mods)
    sources = list(st.operands[1:])
    for k, op in enumerate(sources):
        if isinstance(op, pir.Reg) and op.name in constants:
            t = _source_type(st, types, k)
            if t is not None:
                sources[k] = pir.Imm(_as_type(constants[op.name], t))
    if st.opcode in _COMMUTATIVE and len(sources) == 2 and isinstance(sources[0], pir.Imm) \
            and not isinstance(sources[1], pir.Imm):
        sources.reverse()
    if st.opcode == "mad" and len(sources) == 3 and isinstance(sources[0], pir.Imm) \
            and not isinstance(sources[1], pir.Imm):
        sources[0], sources[1] = sources[1], sources[0]
    folded = _folded(st, types, sources)
    if folded is not None:
        return folded
    if sources == list(st.operands[1:]):
        return st
    return replace(st, operands=(st.operands[0], *sources))


def _source_type(st, types, k) -> str | None:
    """The PTX type source k of `st` is read as (None: not an integer)."""
    if st.opcode == "cvt" and len(types) == 2:
        t = types[1]
    elif st.opcode in ("shl", "shr") and k == 1:
        t = "u32"
    elif (st.opcode == "selp" and k == 2) or (st.opcode == "mad" and "wide" in st.mods and k == 2):
        return None                   # (a predicate; a wide mad's addend, twice its type's width)
    elif st.opcode == "bfe" and k > 0:
        t = "u32"
    else:
        t = types[-1] if types else None
    return t if t in INT_TYPES else None


def _as_type(value: int, t: str | None) -> int:
    """`value` (bits) as type t reads it: signed for .s types, else unsigned."""
    if t is None:
        return value
    bits = width(t)
    value &= (1 << bits) - 1
    return value - (1 << bits) if t[0] == "s" and value >> (bits - 1) else value


def _folded(st, types, sources) -> pir.Instruction | None:
    """`mov.T dest, value` where `st` is an integer instruction of SUBSTITUTED's arithmetic on
    immediates alone and unguarded, else None."""
    if st.guard is not None or not sources or not all(_int_imm(op) for op in sources):
        return None
    if st.opcode == "mov" and isinstance(st.operands[1], pir.Imm):
        return None                   # (a constant's definition already: folded again, each round would change it)
    if _BAD_MODS.intersection(st.mods) and not (st.opcode == "mul" and "lo" in st.mods and "wide" not in st.mods):
        return None
    if not types or not set(types) <= INT_TYPES or "b128" in types:
        return None
    values = [op.value for op in sources]
    result = _value(st.opcode, st.mods, types, values)
    if result is None:
        return None
    dest_type = "u32" if st.opcode == "popc" else types[0]
    if width(dest_type) not in (32, 64):
        return None                   # (a narrow result in a wider register: left to the lowering)
    return replace(st, opcode="mov", mods=(f"b{width(dest_type)}",),
                   operands=(st.operands[0], pir.Imm(_as_type(result, dest_type))))


def _int_imm(op) -> bool:
    return isinstance(op, pir.Imm) and isinstance(op.value, int) and not op.is_float


def _value(opcode, mods, types, values) -> int | None:
    """The bits of `opcode` on `values` (PTX semantics), None where it is not folded here."""
    t = types[-1]
    bits = width(t)
    mask = (1 << bits) - 1
    signed = t[0] == "s"

    def s(v):
        v &= mask
        return v - (1 << bits) if signed and v >> (bits - 1) else v
    a = s(values[0])
    if opcode == "mov" and len(values) == 1:
        return a & mask
    if opcode == "cvt" and len(types) == 2:
        src = types[1]
        sb = width(src)
        v = values[0] & ((1 << sb) - 1)
        if src[0] == "s" and v >> (sb - 1):
            v -= 1 << sb
        return v & ((1 << width(types[0])) - 1)
    if opcode in ("not", "neg", "abs", "popc") and len(values) == 1:
        return {"not": ~a, "neg": -a, "abs": abs(a), "popc": bin(a & mask).count("1")}[opcode] & \
            (0xFFFFFFFF if opcode == "popc" else mask)
    if len(values) != 2:
        return None
    b = s(values[1])
    if opcode in ("shl", "shr"):
        amount = values[1] & 0xFFFFFFFF
        if opcode == "shl":
            return (a << amount) & mask if amount < bits else 0
        return (a >> min(amount, bits)) & mask if signed else ((a & mask) >> amount if amount < bits else 0)
    simple = {"add": lambda: a + b, "sub": lambda: a - b, "and": lambda: a & b, "or": lambda: a | b,
              "xor": lambda: a ^ b, "min": lambda: min(a, b), "max": lambda: max(a, b)}
    if opcode in simple:
        return simple[opcode]() & mask
    if opcode == "mul" and "lo" in mods:
        return (a * b) & mask
    return None

