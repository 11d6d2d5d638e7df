"""PTX scalar types: their LLVM representation, width and signedness.

Registers keep the LLVM type of their declaration; an instruction reads them at its own
type (bitcast, truncation or extension as PTX allows). 16-bit floats live in `half`;
bf16 and the packed pairs live in integers holding their bits, because LLVM's bfloat and
vector-of-half arithmetic do not round like PTX does.
"""
from __future__ import annotations

import functools

from llvmlite import ir

I1, I8, I16, I32, I64, I128 = (ir.IntType(n) for n in (1, 8, 16, 32, 64, 128))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = I8.as_pointer()

_BITS = {"8": 8, "16": 16, "32": 32, "64": 64, "128": 128}

INT_TYPES = {f"{k}{n}" for k in "bus" for n in (8, 16, 32, 64)} | {"b128"}
FLOAT_TYPES = {"f16", "f32", "f64"}
PACKED_TYPES = {"f16x2", "bf16x2"}
ALL_TYPES = INT_TYPES | FLOAT_TYPES | PACKED_TYPES | {"bf16", "pred", "e4m3x2", "e5m2x2", "tf32"}


def type_kind(t: str) -> str:
    """'float' for floating-point types (packed pairs included), 'int' for the rest."""
    return "float" if t.startswith("f") or t.startswith("bf") or t == "tf32" else "int"


def llvm_width(t: ir.Type) -> int:
    """Bit width of an LLVM scalar type that holds a register."""
    if isinstance(t, ir.IntType):
        return t.width
    return {"half": 16, "float": 32, "double": 64}[str(t)]


@functools.lru_cache(maxsize=None)       # (a few dozen type names, asked for at every operand)
def width(t: str) -> int:
    """Bit width of a PTX type name."""
    if t == "pred":
        return 1
    if t in ("f16x2", "bf16x2", "tf32"):
        return 32
    if t in ("bf16", "e4m3x2", "e5m2x2"):
        return 16
    return _BITS[t.lstrip("bfusx")] if t[0] in "bus" else _BITS[t[1:]]


@functools.lru_cache(maxsize=None)
def llvm_type(t: str) -> ir.Type:
    """The LLVM type that holds a value of PTX type `t` in a register."""
    if t == "pred":
        return I1
    if t == "f16":
        return F16
    if t == "f32":
        return F32
    if t == "f64":
        return F64
    return ir.IntType(width(t))


def type_mods(mods) -> list:
    """The type modifiers of an instruction, in source order (`cvt.rn.f32.s32` -> ['f32', 's32'])."""
    return [m for m in mods if m in ALL_TYPES]


def vector_count(mods) -> int:
    """Elements of a vector access (`ld.v4.f32` -> 4), 1 for a scalar one."""
    return next((int(m[1:]) for m in mods if m in ("v2", "v4", "v8")), 1)


SPACES = ("global", "shared", "local", "const", "param")
# modifiers of a memory access that orders it against other threads' (a region or a lane
# reload may not move or merge such an access)
ORDERED_MODS = frozenset(("volatile", "relaxed", "acquire", "release", "mmio"))
# the opcodes that write memory
MEMORY_WRITES = frozenset(("st", "atom", "red"))


def space_of(inst) -> str:
    """The state space an instruction's modifiers name (`ld.shared::cta.u32` -> 'shared'),
    '' for a generic access."""
    return next((m.split("::")[0] for m in inst.mods if m.split("::")[0] in SPACES), "")
