"""Thread strides: how far apart neighbouring threads' values of a register lie along x or y,
from the thread-linear forms of 32-bit registers (affine.py) through the 64-bit arithmetic that
nvcc's `size_t` indices and pointers go through. What walks.py asks of a loop's addresses
(one vector across neighbouring threads, or not) and memory.stores_run_along_y of a store's.
"""
from __future__ import annotations

from ...ptx import ir
from .affine import thread_linear_forms
from .dataflow import definitions_of
from .uniformity import block_uniform_registers

_STRIDE_DEPTH = 64               # definitions followed back from a register (ThreadStrides)


class ThreadStrides:
    """How far apart neighbouring threads along an axis (x or y) find a register's value: a
    number, or None where that is not known (a value loaded from memory, a product with a
    kernel parameter). 32-bit registers by their thread-linear forms; others through the
    moves, widenings, sums, differences, shifts and products by immediates that make nvcc's
    `size_t` indices and pointers from them, at most _STRIDE_DEPTH definitions back (a chain
    of thousands of additions must not exhaust Python's recursion)."""

    def __init__(self, body: list, kernel_params):
        self.defs = definitions_of(body)
        self.forms = thread_linear_forms(body, kernel_params)
        self.uniform = block_uniform_registers(body, kernel_params)
        self._known = {}                  # (register, axis) -> its stride, or None

    def of(self, op, axis: str = "x", depth: int = 0):
        """The stride of operand `op` along `axis`."""
        if isinstance(op, ir.Imm):
            return 0 if isinstance(op.value, int) and not op.is_float else None
        if not isinstance(op, ir.Reg):
            return None
        name = op.name
        if name in self.uniform:
            return 0
        if name in self.forms:
            form = self.forms[name]
            if any(a == axis and factor is not None for a, factor in form):
                return None
            k = sum(k for (a, factor), k in form.items() if a == axis)
            return (k + 2 ** 31) % 2 ** 32 - 2 ** 31
        key = (name, axis)
        if key not in self._known:
            if depth > _STRIDE_DEPTH:
                return None                     # (not remembered: a shorter way here may know it)
            self._known[key] = None             # (a register read on its own way to itself: unknown)
            sts = self.defs.get(name, ())
            self._known[key] = self.written_by(sts[0], axis, depth + 1) if len(sts) == 1 else None
        return self._known[key]

    def written_by(self, st, axis: str = "x", depth: int = 0):
        """The stride along `axis` of what instruction `st` writes."""
        if st.guard is not None or not st.operands:
            return None
        ops, op = st.operands, st.opcode
        if op in ("mov", "cvt", "cvta") and len(ops) == 2:
            return self.of(ops[1], axis, depth)
        parts = [self.of(x, axis, depth) for x in ops[1:]]
        if None in parts:
            return None
        if op == "add" and len(parts) == 2:
            return parts[0] + parts[1]
        if op == "sub" and len(parts) == 2:
            return parts[0] - parts[1]
        if op == "shl" and len(parts) == 2 and isinstance(ops[2], ir.Imm):
            return parts[0] << (ops[2].value & 63)
        if op == "mul" and len(parts) == 2 and ("wide" in st.mods or "lo" in st.mods):
            for x, k in ((ops[1], parts[1]), (ops[2], parts[0])):
                if isinstance(x, ir.Imm) and isinstance(x.value, int):
                    return k * x.value
            return 0 if parts == [0, 0] else None
        return None
