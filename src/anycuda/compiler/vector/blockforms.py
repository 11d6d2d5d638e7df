"""Sums of shapeless values: a register of a block program (blockprograms.py) that is an
Affine shape plus whole multiples of vectors with no shape, so that where those vectors
cancel, the result has a shape after all.

A tile and its halo loaded by a block's threads in turns write `tile[t / W][t % W]`; nvcc
makes the remainder `t - (t / W) * W`, so the shared address `tile + 4W (t / W) + 4 (t - (t /
W) W)` is `tile + 4t`, a ramp, though neither `t / W` nor `t % W` is one. Without its shape
the store looked at its addresses and wrote two or three runs (blockmemory._run_by_run);
with it, one vector store. The terms are kept as (vector, coefficient) pairs: the vectors
are only compared, never read, so a term cancels exactly when the same value is added and
taken away, whatever it holds (arithmetic modulo 2^bits, as the registers'). A register's
form holds while its value is the very vector its form was derived with (a loop's phi, a
value reloaded after a barrier or written under a mask is another vector, and starts a new
form).

FormParts is a part of BlockProgram, which inherits it.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ...ptx import ir as pir
from ..types import llvm_type, type_mods, width
from .blockops import MAX_STRIDE, Affine, constant_shape, product, shape_sum

KINDS = frozenset(("mov", "add", "sub", "shl", "mul", "mad"))     # the instructions that keep forms


@dataclass(frozen=True)
class Form:
    """Lane t holds shape's `base + stride * t` plus the sum of coefficient * vector over
    `terms` (each coefficient nonzero modulo 2^bits)."""
    shape: Affine
    terms: tuple
    bits: int


def _merged(pairs, bits) -> tuple:
    """The terms of `pairs` with the same vector added up, those that cancel left out."""
    sums = {}
    for value, k in pairs:
        old = sums.get(id(value), (value, 0))[1]
        sums[id(value)] = (value, (old + k) % (1 << bits))
    return tuple((value, k) for value, k in sums.values() if k)


def _factor(form) -> int | None:
    """The constant a form is, if it is one (a uniform constant shape without terms)."""
    if form is None or form.terms or form.shape.stride or not isinstance(form.shape.base, ir.Constant):
        return None
    return form.shape.base.constant


class FormParts:
    """Forms of the block program's registers (see the module docstring)."""

    def sum_form(self, st, kind) -> Form | None:
        """The form instruction `st` (a `kind` of KINDS whose result has no shape) gives its
        destination, from its operands as they are before it writes; None where it has none."""
        if kind not in KINDS or "hi" in st.mods or "wide" in st.mods:
            return None
        ts = type_mods(st.mods)
        if not ts or ts[-1][0] not in "bus" or not isinstance(st.operands[0], pir.Reg):
            return None
        t = ts[-1]
        forms = [self._operand_form(op, t) for op in st.operands[1:]]
        if any(f is None for f in forms):
            return None
        bits = width(t)
        if kind == "mov":
            return forms[0]
        a, c = forms[0], forms[1]
        if kind in ("add", "sub"):
            return self._sum(a, c, t, 1 if kind == "add" else -1)
        if kind == "shl":
            n = _factor(c)
            return None if n is None or n >= bits else self._scaled(a, 1 << n, t)
        if _factor(a) is not None and _factor(c) is None:
            a, c = c, a                     # the constant second
        n = _factor(c)
        if n is None:
            return None
        scaled = self._scaled(a, n, t)
        if kind == "mul" or scaled is None:
            return scaled
        return self._sum(scaled, forms[2], t)

    def keep_form(self, op, form) -> Affine | None:
        """After the instruction wrote register `op` whole: its shape where the form's terms
        all cancelled, else None, the form kept for the instructions after it."""
        if not form.terms:
            return form.shape
        if self.whole.get(op.name):
            self.forms[op.name] = (self.values[op.name], form)
        return None

    def _operand_form(self, op, t) -> Form | None:
        shape = self.shape(op, t)
        if shape is not None:
            return Form(shape, (), width(t))
        if not isinstance(op, pir.Reg):
            return None
        value = self.values.get(op.name)
        kept = self.forms.get(op.name)
        if kept is not None and kept[0] is value and kept[1].bits == width(t):
            return kept[1]
        if value is None or not isinstance(value.type, ir.VectorType) or value.type.element != llvm_type(t):
            return None
        return Form(Affine(ir.Constant(llvm_type(t), 0), 0, None, MAX_STRIDE), ((value, 1),), width(t))

    def _scaled(self, form, n, t) -> Form | None:
        shape = product(self.b, form.shape, constant_shape(ir.Constant(llvm_type(t), n % (1 << width(t)))),
                        form.shape.exact)
        if shape is None:
            return None
        return Form(shape, _merged(((v, k * n) for v, k in form.terms), form.bits), form.bits)

    def _sum(self, a, c, t, sign=1) -> Form | None:
        """a + c (sign 1) or a - c (sign -1)."""
        shape = shape_sum(self.b, a.shape, c.shape, sign)
        if shape is None:
            return None
        return Form(shape, _merged(a.terms + tuple((v, sign * k) for v, k in c.terms), width(t)), width(t))
