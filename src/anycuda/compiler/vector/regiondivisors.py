"""Divisions in a warp region: quotients kept as one value in lockstep, and divisors' reciprocals.

A grid-stride loop's `x[i / C] * y[i % C]` (CuPy's and llm.c's index arithmetic) divides each
lane's index by a kernel parameter. Where no lane of a warp passes a multiple of C, the
quotient is one value and the remainder steps as the index does (laneshapes.QUOTIENT): in
lockstep `x[i / C]` is then one load and `y[i % C]` one vector, where divided lane by lane
both were gathers (5x the time of the C loop). A warp whose lanes pass a multiple leaves
lockstep for the rest of its turn, which costs more than the division saves: the divisor must
be at least laneshapes.QUOTIENT_WARPS warps' span of the index, which the entry region tests
before it runs (a kernel parameter, alike in every call), sending the warp to a region made
without the form (EntryRegion.plain) where it is not. Addresses computed from such a quotient
read a row of C and its number, not a row of the grid: they do not count as walked buffers
for the loop's turns.

Every division by a divisor the block has alike multiplies by its reciprocal
(bitops.uniform_quotient), which the region remembers per divisor, across turns too.

RegionDivisors is a part of WarpRegion (warpregions.py), which inherits it; the entry
region's methods (divisor_parameters on) are its own.
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from ..analysis import dataflow
from ..irutil import at_function_start, convert_bits, i32, i64
from ..ops import bitops
from ..types import I1, I32, I64, llvm_type, type_mods, width
from . import laneshapes
from .warpruns import LANES


def _integer_cvt(st) -> bool:
    """Whether st is a cvt between integer types that only truncates or extends."""
    types = type_mods(st.mods)
    return st.opcode == "cvt" and len(types) == 2 and all(t[:1] in ("b", "s", "u") for t in types) \
        and not set(st.mods) - set(types) and len(st.operands) == 2


class RegionDivisors:
    """A warp region's divisions (see the module docstring): a part of WarpRegion."""

    def remembered_reciprocal(self, divisor):
        """(b, d) -> bitops.reciprocal of the u32 d, made again only where `divisor` (an
        operand) holds another value than at the region's last division by it (kept across
        turns: _turn_state): a loop's `i / C` made it each iteration, a double division and a
        rounding, which LLVM does not hoist: the region's loops are entered from its dispatch
        as well as from before them, not loops its passes take."""
        last, m = self._reciprocal_slots(divisor)

        def reciprocal(b, d):
            with b.if_then(b.icmp_unsigned("!=", b.load(last), d), likely=False):
                b.store(d, last)
                b.store(bitops.reciprocal(b, d), m)
            return b.load(m)
        return reciprocal

    def _reciprocal_slots(self, divisor):
        """The i32 divisor and i64 reciprocal slots of remembered_reciprocal's `divisor`."""
        key = divisor.name if isinstance(divisor, pir.Reg) else str(divisor)
        if key not in self._reciprocals:
            b = self.b
            with at_function_start(b):
                last, m = b.alloca(I32), b.alloca(I64)
                b.store(i32(0), last)        # (any M serves d = 0 and 1: bitops answers those)
                b.store(i64(0), m)
            self._reciprocals[key] = last, m
        return self._reciprocals[key]

    def divisor_parameters(self) -> dict:
        """{register: its definition} of the kernel's registers written once by an ld.param of
        an integer, or by an integer cvt of such a register (nvcc's 64-bit division divides in
        32 bits where both operands fit, by the parameter's low word); {} where the kernel
        divides by none of them. Divisors a division of a strided value may keep its stride by
        (laneshapes.QUOTIENT), the region testing them before it runs (_plain_where_divisors_small)."""
        body, f = self.f.pfn.body, self.f
        found = {}
        for r, positions in sorted(self._definitions().items(), key=lambda item: item[1][0]):
            st = body[positions[0]]
            types = type_mods(st.mods)
            if len(positions) != 1 or st.guard is not None or not types or types[0][:1] not in ("b", "s", "u") \
                    or width(types[0]) not in (32, 64):
                continue
            if st.opcode == "ld" and len(st.operands) == 2 and f.is_kernel_param(st.operands[1]) \
                    or _integer_cvt(st) and isinstance(st.operands[1], pir.Reg) and st.operands[1].name in found:
                found[r] = st
        divided = any(isinstance(st, pir.Instruction) and st.opcode in ("div", "rem") and len(st.operands) == 3
                      and isinstance(st.operands[2], pir.Reg) and st.operands[2].name in found for st in body)
        return found if divided else {}

    def use_divisors(self, definitions):
        """Take the registers of `definitions` (divisor_parameters') as the divisors a division
        keeps its quotient strided by; the pieces found so far assumed others."""
        self._divisor_definitions = definitions
        self.divisors = frozenset(definitions)
        self._pieces = None

    def _divisor_value(self, name):
        """(value, type) that divisor register `name` (of use_divisors) holds, from the kernel's
        parameters: its ld.param's, or converted as its cvt converts its parameter's."""
        b, st = self.b, self._divisor_definitions[name]
        t = type_mods(st.mods)[-1]
        if st.opcode == "ld":
            p = b.gep(self.params, [i64(self.f.kernel_param_offset(st.operands[1]))])
            return b.load(b.bitcast(p, llvm_type(t).as_pointer())), t
        value, vt = self._divisor_value(st.operands[1].name)
        dst = type_mods(st.mods)[0]
        source = convert_bits(b, value, llvm_type(t), vt.startswith("s"))
        return convert_bits(b, source, llvm_type(dst), t.startswith("s")), dst

    def quotient_divisions(self) -> list:
        """[(divisor register, the division's type, the dividend's stride)] of the divisions
        whose quotients lockstep keeps strided by a register (laneshapes.QUOTIENT)."""
        body, pieces = self.f.pfn.body, self.pieces()
        checks = [self._quotient_check(body[p]) for piece in pieces.values() for p in piece.positions]
        return sorted({(c[2].name, c[3], c[4]) for c in checks if c is not None and isinstance(c[2], pir.Reg)})

    def _quotient_check(self, st):
        """The QUOTIENT check of a div or rem whose quotient lockstep keeps strided, or None."""
        check = self._check_of(st) if st.opcode in ("div", "rem") else None
        return check if check is not None and check[0] == laneshapes.QUOTIENT else None

    def _plain_where_divisors_small(self):
        """At the region's start: where a divisor of quotient_divisions is less than
        laneshapes.QUOTIENT_WARPS warps' span of its dividend, most warps would fail its check
        and leave lockstep every turn of their loop: the region without the quotient forms
        (self.plain) runs the warp instead. The divisors are kernel parameters, alike in every
        call: a warp that gives way at a turn resumes in the region it started in."""
        b = self.b
        small = ir.Constant(I1, 0)
        for name, t, k in self.quotient_divisions():
            value, vt = self._divisor_value(name)
            d = convert_bits(b, value, llvm_type(t), vt.startswith("s"))
            least = ir.Constant(d.type, laneshapes.QUOTIENT_WARPS * LANES * k)
            small = b.or_((b.icmp_signed if t.startswith("s") else b.icmp_unsigned)("<", d, least), small)
        with b.if_then(small, likely=False):
            b.ret(b.call(self.plain, self.fn.args))

    def _walks_rows(self, address) -> bool:
        """Whether an address register may walk the grid's rows: not one computed from a
        quotient lockstep keeps strided (a broadcast's `x[i / C]` and `y[i % C]` read a row of
        C and its number, not a row of the grid; counted, the broadcast's turns were one
        iteration each, the warp's call and state for every 32 elements)."""
        if self._from_quotients is None:
            body, defs = self.f.pfn.body, self._definitions()
            quotients = [r for r, ps in defs.items() for p in ps if self._quotient_check(body[p]) is not None]
            self._from_quotients = dataflow.computed_from(quotients, body, defs)
        return address not in self._from_quotients
