"""Walks: loops in which each thread steps through memory of its own, a few bytes a turn.

A thread per CSR row (`for (j = rowptr[row]; j < rowptr[row + 1]; ++j) sum += vals[j] *
x[cols[j]]`), a thread per dense row (`A[row * n + j]`), a thread per chunk (`in[i * K + k]`):
each thread reads a run of neighbouring elements, one a turn, from a start that differs
between threads by more than an element. Run as vectors across a warp's lanes (a warp
region or a block program), every turn is a gather of 32 elements from 32 places, 32 streams
at once, and a lane that finishes early waits for the longest run of its warp: the CSR
product ran 4.5x the time of an OpenMP loop over its rows. Run thread after thread, each
walk is one stream that the loads and the hardware prefetcher follow, as in C (0.8x).

A loop keeps its lanes side by side wherever some access of it is one vector access across
them (neighbouring threads at neighbouring elements: a naive GEMM's `B[k * n + col]`, a
stencil's march along z), where it computes much for each element it reads, which vector
code does 16 elements at a time (MEMORY_BOUND_INSTRUCTIONS, as a block program's test), and
where it has atomics: side by side, a warp's atomics at one address are one atomic
(vector/laneatomics.py), thread after thread each is its own. A walk all threads take alike
(n-body's `pos[j]`) is one value for the warp, not a walk.
"""
from __future__ import annotations

from ...ptx import ir
from .cfg import back_edges
from .dataflow import defs_uses
from .memory import MEMORY_BOUND_INSTRUCTIONS, access_bytes, global_access, memory_address
from .strides import ThreadStrides

WALK_STEP_BYTES = 64             # the most a walk's address moves a turn (four doubles unrolled, one float4 a turn)
SLOW_RECURRENCES = frozenset(("min", "max", "div", "sqrt", "rcp", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh"))
FLOAT_TYPES = frozenset(("f16", "f16x2", "bf16", "bf16x2", "f32", "f64"))
_ATOMICS = frozenset(("atom", "red"))
_BY_REGISTER = "register"        # a step held in a register (_Facts._step)


def threads_walk_alone(body: list, kernel_params) -> bool:
    """Whether kernel `body`'s threads are best run one after another (see the module
    docstring): some memory-bound loop walks, and no loop has an access that is one vector
    access across neighbouring threads."""
    labels = {st.name: pos for pos, st in enumerate(body) if isinstance(st, ir.Label)}
    loops = back_edges(body, labels)
    if not loops:
        return False
    facts = _Facts(body, kernel_params)
    walks = False
    for head, back in loops:
        if any(isinstance(st, ir.Instruction) and st.opcode in _ATOMICS for st in body[head:back + 1]):
            return False        # (side by side, a warp's atomics at one address are one: laneatomics.py)
        kinds = [facts.kind(st, head, back) for st in body[head:back + 1] if global_access(st)]
        if "across" in kinds:
            return False
        instructions = sum(1 for st in body[head:back + 1] if isinstance(st, ir.Instruction))
        walks |= "walk" in kinds and instructions <= MEMORY_BOUND_INSTRUCTIONS * len(kinds) \
            and not _slow_recurrence(body, head, back)
    return walks


def _slow_recurrence(body: list, head: int, back: int) -> bool:
    """Whether a value the loop head..back carries from turn to turn goes through a slow
    floating-point instruction (SLOW_RECURRENCES): a row's running maximum. Thread after
    thread each turn waits for the last one's (a row maximum ran 3.3x slower than with the
    lanes side by side, 32 recurrences at once)."""
    inside = [(st, *defs_uses(st)) for st in body[head:back + 1] if isinstance(st, ir.Instruction)]
    written = {r for _, defs, _ in inside for r in defs}
    carried, seen = set(), set()
    for _, defs, uses in inside:           # read in the loop before it is written there
        carried |= (set(uses) & written) - seen
        seen |= set(defs)
    for st, defs, uses in inside:          # what the carried values reach in one turn
        if carried.intersection(uses):
            if st.opcode in SLOW_RECURRENCES and FLOAT_TYPES & set(st.mods):
                return True
            carried |= set(defs)
    return False


class _Facts:
    """What the kind of an access needs to know of the kernel's registers."""

    def __init__(self, body, kernel_params):
        self.body = body
        self.strides = ThreadStrides(body, kernel_params)
        self.defs, self.uniform = self.strides.defs, self.strides.uniform
        self.positions = {}
        for pos, st in enumerate(body):
            if isinstance(st, ir.Instruction):
                self.positions[id(st)] = pos

    def kind(self, st, head: int, back: int) -> str:
        """"across" where neighbouring threads access neighbouring elements, "walk" where
        each thread's address moves by at most WALK_STEP_BYTES a turn of the loop head..back
        from a start of its own, else "other" (a gather, or an address alike in every thread)."""
        addr = memory_address(st)
        if not isinstance(addr, ir.Addr) or not isinstance(addr.base, ir.Reg) or addr.base.name in self.uniform:
            return "other"
        size, name = access_bytes(st), addr.base.name
        step = self._step(name, head, back)
        if step is not None:
            # a pointer stepped in the loop: its starts say how the threads' runs lie
            starts = [d for d in self.defs[name] if not head <= self.positions[id(d)] <= back]
            if any(self.strides.written_by(d) == size for d in starts):
                return "across"
            return "walk" if step != _BY_REGISTER and abs(step) <= WALK_STEP_BYTES else "other"
        sts = self.defs.get(name, ())
        if len(sts) != 1:
            return "other"
        if self.strides.written_by(sts[0]) == size:
            return "across"
        index = self._scaled_index(sts[0])
        if index is None:
            return "other"
        reg, scale = index
        step = self._step(reg, head, back)
        return "walk" if step not in (None, _BY_REGISTER) and abs(step * scale) <= WALK_STEP_BYTES else "other"

    def _step(self, name: str, head: int, back: int):
        """What register `name` goes up by each turn of the loop head..back, where its one
        definition there is `add name, name, step`: the immediate, or _BY_REGISTER (a naive
        GEMM's `B + k * n`); else None."""
        inside = [d for d in self.defs.get(name, ()) if head <= self.positions[id(d)] <= back]
        if len(inside) != 1:
            return None
        d = inside[0]
        if d.opcode not in ("add", "sub") or d.guard is not None or len(d.operands) != 3:
            return None
        a, b = d.operands[1], d.operands[2]
        if d.opcode == "add" and isinstance(b, ir.Reg) and b.name == name:
            a, b = b, a                    # (add is either way round)
        if not (isinstance(a, ir.Reg) and a.name == name):
            return None
        if isinstance(b, ir.Imm) and isinstance(b.value, int) and not b.is_float:
            return b.value if d.opcode == "add" else -b.value
        return _BY_REGISTER if isinstance(b, ir.Reg) else None

    def _scaled_index(self, st):
        """(index register, scale) where `st` is `add a, base, (mul.wide index, scale)`."""
        if st.opcode != "add" or st.guard is not None or len(st.operands) != 3:
            return None
        for op in st.operands[1:]:
            sts = self.defs.get(op.name, ()) if isinstance(op, ir.Reg) else ()
            if len(sts) == 1:
                m = sts[0]
                if m.opcode == "mul" and "wide" in m.mods and m.guard is None \
                        and isinstance(m.operands[1], ir.Reg) and isinstance(m.operands[2], ir.Imm):
                    return m.operands[1].name, m.operands[2].value
        return None
