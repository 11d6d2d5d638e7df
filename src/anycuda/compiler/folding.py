"""An IR builder that folds integer arithmetic on constants instead of emitting it.

PTX's semantics are written once for any operand (compiler/ops/), so an immediate operand
gives LLVM instructions on constants: `zext i32 4 to i64` for a `mul.wide` by 4, an
`icmp uge i32 10, 32` and two selects for a shift by 10. The optimiser folds them, but only
after parsing them; quick code is not optimised and a big kernel's text is long. Folding them
while building costs a type check per instruction and keeps them out of the text.

Only scalar integers (and selects on a constant condition) are folded, each with LLVM's
semantics: a result wraps to its width, and shifts, divisions and anything that LLVM leaves
undefined or poison (shift amounts of the width or more) are built as instructions.
"""
from __future__ import annotations

import math
import struct

from llvmlite import ir

_UNSIGNED = {"==": int.__eq__, "!=": int.__ne__, "<": int.__lt__, "<=": int.__le__,
             ">": int.__gt__, ">=": int.__ge__}
_BOOL = ir.IntType(1)


def _int_constant(v) -> bool:
    return (isinstance(v, ir.Constant) and isinstance(v.type, ir.IntType)
            and isinstance(v.constant, int))


def _unsigned(v: ir.Constant) -> int:
    return int(v.constant) & ((1 << v.type.width) - 1)


def _signed(v: ir.Constant) -> int:
    u, w = _unsigned(v), v.type.width
    return u - (1 << w) if u >> (w - 1) else u


def _wrapped(t: ir.IntType, value: int) -> ir.Constant:
    return ir.Constant(t, value & ((1 << t.width) - 1))


def _both_constant(lhs, rhs) -> bool:
    return _int_constant(lhs) and _int_constant(rhs) and lhs.type == rhs.type


class FoldingBuilder(ir.IRBuilder):
    """ir.IRBuilder whose integer casts, compares, selects and wrapping arithmetic on
    constants give constants."""

    def zext(self, value, typ, name=""):
        if _int_constant(value) and isinstance(typ, ir.IntType):
            return _wrapped(typ, _unsigned(value))
        return super().zext(value, typ, name)

    def sext(self, value, typ, name=""):
        if _int_constant(value) and isinstance(typ, ir.IntType):
            return _wrapped(typ, _signed(value))
        return super().sext(value, typ, name)

    def trunc(self, value, typ, name=""):
        if _int_constant(value) and isinstance(typ, ir.IntType):
            return _wrapped(typ, _unsigned(value))
        return super().trunc(value, typ, name)

    def icmp_unsigned(self, cmpop, lhs, rhs, name=""):
        if _both_constant(lhs, rhs):
            return ir.Constant(_BOOL, int(_UNSIGNED[cmpop](_unsigned(lhs), _unsigned(rhs))))
        return super().icmp_unsigned(cmpop, lhs, rhs, name)

    def icmp_signed(self, cmpop, lhs, rhs, name=""):
        if _both_constant(lhs, rhs):
            return ir.Constant(_BOOL, int(_UNSIGNED[cmpop](_signed(lhs), _signed(rhs))))
        return super().icmp_signed(cmpop, lhs, rhs, name)

    def select(self, cond, lhs, rhs, name="", flags=()):
        if _int_constant(cond) and cond.type == _BOOL:
            return lhs if _unsigned(cond) else rhs
        return super().select(cond, lhs, rhs, name, flags)

    def add(self, lhs, rhs, name="", flags=()):
        if _both_constant(lhs, rhs) and not flags:
            return _wrapped(lhs.type, _unsigned(lhs) + _unsigned(rhs))
        return super().add(lhs, rhs, name, flags)

    def sub(self, lhs, rhs, name="", flags=()):
        if _both_constant(lhs, rhs) and not flags:
            return _wrapped(lhs.type, _unsigned(lhs) - _unsigned(rhs))
        return super().sub(lhs, rhs, name, flags)

    def mul(self, lhs, rhs, name="", flags=()):
        if _both_constant(lhs, rhs) and not flags:
            return _wrapped(lhs.type, _unsigned(lhs) * _unsigned(rhs))
        return super().mul(lhs, rhs, name, flags)

    def and_(self, lhs, rhs, name="", flags=()):
        if _both_constant(lhs, rhs):
            return _wrapped(lhs.type, _unsigned(lhs) & _unsigned(rhs))
        return super().and_(lhs, rhs, name, flags)

    def or_(self, lhs, rhs, name="", flags=()):
        if _both_constant(lhs, rhs):
            return _wrapped(lhs.type, _unsigned(lhs) | _unsigned(rhs))
        return super().or_(lhs, rhs, name, flags)

    def xor(self, lhs, rhs, name="", flags=()):
        if _both_constant(lhs, rhs):
            return _wrapped(lhs.type, _unsigned(lhs) ^ _unsigned(rhs))
        return super().xor(lhs, rhs, name, flags)


_FLOAT_FORMATS = {32: ("<I", "<f"), 64: ("<Q", "<d")}


def float_constant(t: ir.Type, bits: int, width: int):
    """The constant of float type `t` (32 or 64 bits wide) with IEEE bit pattern `bits`, for
    a finite value (the text spells it exactly); None for other widths, infinities and NaNs,
    whose payload a Python float need not keep: the caller bitcasts the integer then."""
    formats = _FLOAT_FORMATS.get(width)
    if formats is None:
        return None
    value = struct.unpack(formats[1], struct.pack(formats[0], bits & ((1 << width) - 1)))[0]
    return ir.Constant(t, value) if math.isfinite(value) else None
