"""Integers a launch's block shape fixes: constant propagation over a PTX body with %ntid known.

A block program is made for one block shape, so `%ntid.x` is a number there, and so is every
integer computed from it and from immediates alone: `s = blockDim.x / 2`, then `s >>= 1` in
a loop. `execute` runs one instruction on such values (the instructions and types below, the
rest unknown); `BlockValues` propagates them over the control-flow graph, a register holding
a value at a point where every path into it gives that value. Values are kept as unsigned
integers of the register's width (a predicate as 0 or 1).
"""
from __future__ import annotations

from ...ptx import ir
from ..types import INT_TYPES, type_mods, width as _width
from .cfg import build_cfg, predecessors
from .dataflow import defs_uses

VARYING = object()                 # a register whose value differs between paths or threads

_INT_TYPES = INT_TYPES - {"b128"}


def int_type(mods) -> str | None:
    """The one integer type among an instruction's modifiers (None: another or several)."""
    types = type_mods(mods)
    return types[-1] if types and all(t in _INT_TYPES for t in types) else None


def _signed(value: int, t: str) -> int:
    w = _width(t)
    value &= (1 << w) - 1
    return value - (1 << w) if t[0] == "s" and value >> (w - 1) else value


def _shift_right(a, b, t):
    w = _width(t)
    return _signed(a, t) >> min(b, w) if t[0] == "s" else (a >> b if b < w else 0)


def _divide(a, b, t):
    a, b = _signed(a, t), _signed(b, t)
    if b == 0:
        return None                            # undefined on a GPU: leave it to run time
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _remainder(a, b, t):
    q = _divide(a, b, t)
    return None if q is None else _signed(a, t) - q * _signed(b, t)


# opcode -> f(a, b, type) on operands as unsigned values of the type's width; None: unknown
_BINARY = {
    "add": lambda a, b, t: a + b,
    "sub": lambda a, b, t: a - b,
    "and": lambda a, b, t: a & b,
    "or": lambda a, b, t: a | b,
    "xor": lambda a, b, t: a ^ b,
    "shl": lambda a, b, t: a << b if b < _width(t) else 0,
    "shr": _shift_right,
    "min": lambda a, b, t: min(_signed(a, t), _signed(b, t)),
    "max": lambda a, b, t: max(_signed(a, t), _signed(b, t)),
    "div": _divide,
    "rem": _remainder,
}
_UNARY = {
    "mov": lambda a, t: a,
    "not": lambda a, t: ~a,
    "neg": lambda a, t: -a,
    "abs": lambda a, t: abs(_signed(a, t)),
}
_COMPARE = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b,
    "hi": lambda a, b: a > b, "hs": lambda a, b: a >= b,
}
# what execute knows (an instruction outside these never has a known result)
OPCODES = frozenset(_BINARY) | frozenset(_UNARY) | {"mul", "mad", "setp", "cvt", "selp"}
_SHIFT_AMOUNT = {"shl", "shr"}          # their second operand is a .u32 whatever the type
# the modifiers of the operations execute knows: types, products' halves, comparisons
_PLAIN_MODS = _INT_TYPES | {"lo", "wide"} | set(_COMPARE)


def operand_value(op, env: dict, ntid: tuple):
    """An operand's value (an int), or VARYING."""
    if isinstance(op, ir.Imm):
        return op.value if isinstance(op.value, int) else VARYING
    if isinstance(op, ir.Reg):
        return env.get(op.name, VARYING)
    if isinstance(op, ir.SpecialReg) and op.name == "ntid" and op.component in ("x", "y", "z"):
        return ntid["xyz".index(op.component)]
    return VARYING


def execute(st: ir.Instruction, env: dict, ntid: tuple) -> dict | None:
    """{register: value} that `st` writes, when every value it reads is known and it is one
    of the operations above on integers; None otherwise. The guard is the caller's."""
    ops = st.operands
    if any(m not in _PLAIN_MODS for m in st.mods):
        return None               # (.sat clamps, .cc writes a carry: not the plain operation)
    values = [operand_value(op, env, ntid) for op in ops[1:]]
    if not ops or VARYING in values or not isinstance(ops[0], (ir.Reg, ir.Pair)):
        return None
    if st.opcode == "setp":
        return _compare(st, values)
    t = int_type(st.mods)
    if t is None or not isinstance(ops[0], ir.Reg):
        return None
    mask = (1 << _width(t)) - 1
    if st.opcode == "cvt":
        return _convert(st, values[0])
    if st.opcode == "selp" and len(values) == 3:
        result = values[0] if values[2] else values[1]
    elif st.opcode in _UNARY and len(values) == 1:
        result = _UNARY[st.opcode](values[0] & mask, t)
    elif st.opcode in _BINARY and len(values) == 2:
        b = values[1] & (0xFFFFFFFF if st.opcode in _SHIFT_AMOUNT else mask)
        result = _BINARY[st.opcode](values[0] & mask, b, t)
    elif st.opcode in ("mul", "mad") and st.has("lo") and len(values) == (2 if st.opcode == "mul" else 3):
        result = (values[0] & mask) * (values[1] & mask) + (values[2] if st.opcode == "mad" else 0)
    elif st.opcode == "mul" and st.has("wide") and len(values) == 2:
        result, mask = _signed(values[0], t) * _signed(values[1], t), (1 << 2 * _width(t)) - 1
    else:
        return None
    return None if result is None else {ops[0].name: result & mask}


def _compare(st, values) -> dict | None:
    """setp.cmp.type p[|q], a, b (no boolean combination with a third predicate)."""
    t = int_type(st.mods)
    cmps = [m for m in st.mods if m in _COMPARE]
    if t is None or len(cmps) != 1 or len(values) != 2 or (t[0] == "b" and cmps[0] not in ("eq", "ne")):
        return None
    a, b = (_signed(v, t) if t[0] == "s" else v & ((1 << _width(t)) - 1) for v in values)
    result = int(_COMPARE[cmps[0]](a, b))
    dest = st.operands[0]
    if isinstance(dest, ir.Pair):
        if not isinstance(dest.first, ir.Reg):
            return None
        return {dest.first.name: result, dest.second.name: 1 - result}
    return {dest.name: result}


def _convert(st, value) -> dict | None:
    """cvt between integer types: truncated or extended as the source type's sign says."""
    types = type_mods(st.mods)
    if len(types) != 2 or not all(t in _INT_TYPES for t in types) or st.has("sat"):
        return None
    dst, src = types
    return {st.operands[0].name: _signed(value, src) & ((1 << _width(dst)) - 1)}


def step(st: ir.Instruction, env: dict, ntid: tuple) -> None:
    """Update `env` for one instruction: its results where known, VARYING for the rest of
    what it writes (also when its guard is not known to hold)."""
    defs = defs_uses(st)[0]
    if st.guard is not None:
        g = env.get(st.guard.reg.name, VARYING)
        if g is VARYING:
            env.update(dict.fromkeys(defs, VARYING))
            return
        if bool(g) == st.guard.negated:
            return                              # the guard is false: nothing is written
    written = execute(st, env, ntid)
    env.update(dict.fromkeys(defs, VARYING))
    if written:
        env.update(written)


def meet(states: list) -> dict:
    """What every one of `states` knows alike."""
    first, rest = states[0], states[1:]
    return {r: v for r, v in first.items() if all(s.get(r, VARYING) == v for s in rest) and v is not VARYING}


class BlockValues:
    """The registers known at the start of each basic block (`entry[b]`, {name: value}), for
    blocks of shape `ntid`. Iterated to a fixed point (a register's knowledge only goes from a
    value to VARYING, so it ends); every edge counts, known branches or not."""

    def __init__(self, body: list, ntid: tuple):
        self.body, self.ntid = body, ntid
        # {register: its value in each thread} for registers written once where every lane
        # runs the write, and the registers written once (vector/idlewarps.py fills them)
        self.per_lane, self.written_once = None, frozenset()
        self.blocks = build_cfg(body, {})
        self.preds = predecessors(self.blocks)
        self.entry = {0: {}}
        self.exit = {}
        changed = True
        while changed:
            changed = False
            for b in self.blocks:
                done = [self.exit[p] for p in self.preds[b.index] if p in self.exit]
                start = {} if b.index == 0 else (meet(done) if done else None)
                if start is None:
                    continue
                env = dict(start)
                for _, st in b.instructions:
                    step(st, env, ntid)
                env = {r: v for r, v in env.items() if v is not VARYING}
                if self.exit.get(b.index) != env or self.entry.get(b.index) != start:
                    self.entry[b.index], self.exit[b.index] = start, env
                    changed = True
