"""Lane reloads: a lane loop's value computed again from the memory a vector load read it from.

A warp region runs an atomic lane after lane (regionops._atom): a loop over the 32 lanes
in which lane l takes its address from a stack copy of the address vector. The copy is two
64-byte stores and then 32 four-byte loads of what they stored, which the core cannot
forward from the wide stores: in histogram (`atomicAdd(&h[data[i]], 1)`) that loop was two
thirds of the kernel's time.

Where the address comes, in the same straight piece of code, from a vector load of
consecutive elements (`data[i]`: one byte per lane, widened, scaled by 4, added to the
histogram's offset), the loop can compute lane l's address itself: lane l's element is in
memory at lane 0's address + l * size (a line the vector load has just brought in), and the
few scalar instructions from there are cheaper than the stack copy. An operand of the
atomic is reloaded alike (`atomicAdd(&out[idx[i]], w[i])`), a float one only as it was
loaded.

That is the same value only if the memory still holds what the vector load read when the
loop reads it: nothing in the piece stores after the load, and the loop's own atomics
cannot write it (they are in another state space, or the load is `.nc`, from memory that the
kernel does not write). Every other register the computation reads must be alike in every
lane and hold, at the atomic, the value it held where it was read.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ptx import ir as pir
from ..analysis import dataflow
from ..types import MEMORY_WRITES, ORDERED_MODS, space_of, type_mods, width

# what a reloaded value may go through on its way from the load (integers only: a float add
# may have a product fused into it, which reads registers of its own)
THROUGH = frozenset(("mov", "cvt", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor"))
_INTEGER = frozenset(("u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "b8", "b16", "b32", "b64"))
_LOADABLE = _INTEGER | {"f32", "f64"}      # a float loaded is an atomic's operand as it is


@dataclass(frozen=True)
class Reload:
    """How lane l's value of `register` is computed again: the loads of `loads` (body
    positions) read lane l's element at lane 0's address + l * their element size, and the
    instructions at `positions` (body order, the loads among them) run on lane l's values."""
    register: str
    positions: tuple
    loads: frozenset


def find_reload(body, positions, at, register, strides, writer_space):
    """The Reload of `register` as the instruction at `positions[at]` reads it, where
    `positions` is a straight piece of code in lockstep and `strides` the registers' lane
    strides (laneshapes); the instruction writes memory in `writer_space` ('' generic,
    None: it writes none). None where lane l's value cannot be computed again."""
    found = _Search(body, positions, at, strides, writer_space)
    if found.traced(register, at) is not True:
        return None
    chain = sorted(found.chain)
    written = {r for i in chain for r in dataflow.defs_uses(body[positions[i]])[0]}
    if written & found.alike:
        return None         # a register read both as the lanes' own values and as alike
    return Reload(register, tuple(positions[i] for i in chain), frozenset(positions[i] for i in found.loads))


class _Search:
    """The backward walk of find_reload over one piece (indices into its positions)."""

    def __init__(self, body, positions, at, strides, writer_space):
        self.body, self.positions, self.at = body, positions, at
        self.strides, self.writer_space = strides, writer_space
        self.chain, self.loads, self.alike = set(), set(), set()
        self._known = {}

    def traced(self, register, i):
        """True: the register as read at index i comes from a reloadable load; False: it is
        alike in every lane and unchanged from there to the atomic; None: neither."""
        j = self._definition_before(register, i)
        if j is not None and self._derived(j) is True:
            return True
        if self.strides.get(register) != 0 or self._written(register, i, self.at):
            return None
        self.alike.add(register)
        return False

    def _derived(self, j):
        """Whether the instruction at index j computes from a reloadable load (True), from
        no load (False), or cannot be followed (None); the chain gathers those that are True."""
        if j not in self._known:
            self._known[j] = None           # (a definition that reads itself is no chain)
            self._known[j] = self._follow(j)
            if self._known[j]:
                self.chain.add(j)
        return self._known[j]

    def _follow(self, j):
        st = self.body[self.positions[j]]
        if st.guard is not None:
            return None
        if st.opcode == "ld":
            if not self._reloadable(j, st):
                return None
            self.loads.add(j)
            return True
        ts = type_mods(st.mods)
        if st.opcode not in THROUGH or not ts or not set(ts) <= _INTEGER or set(st.mods) & {"hi", "cc", "sat"}:
            return None
        if not isinstance(st.operands[0], pir.Reg):
            return None
        derived = False
        for op in st.operands[1:]:
            if isinstance(op, pir.Reg):
                traced = self.traced(op.name, j)
                if traced is None:
                    return None
                derived |= traced
            elif not isinstance(op, (pir.Imm, pir.Sym)):
                return None
        return derived

    def _reloadable(self, j, st):
        """A load of one integer or float element per lane, each lane's next to the last
        one's (its base register's stride is the element's size), whose memory nothing writes
        before the atomic has read it again."""
        ts = type_mods(st.mods)
        dst, addr = st.operands[0], st.operands[1]
        if len(ts) != 1 or ts[0] not in _LOADABLE or set(st.mods) & ORDERED_MODS or not isinstance(dst, pir.Reg):
            return False
        if not isinstance(addr, pir.Addr) or not isinstance(addr.base, pir.Reg):
            return False
        space = space_of(st)
        if space not in ("global", "const", "shared"):
            return False
        if self.writer_space is not None and "nc" not in st.mods and self.writer_space in ("", space):
            return False
        if self.strides.get(addr.base.name) != max(width(ts[0]) // 8, 1):
            return False
        if self._written(addr.base.name, j, self.at):
            return False
        return not any(self.body[self.positions[k]].opcode in MEMORY_WRITES for k in range(j + 1, self.at))

    def _definition_before(self, register, i):
        """The index of the last instruction before index i that writes `register`, or None."""
        for j in range(i - 1, -1, -1):
            if register in dataflow.defs_uses(self.body[self.positions[j]])[0]:
                return j
        return None

    def _written(self, register, start, end):
        """Whether an instruction at indices [start, end) writes `register`."""
        return any(register in dataflow.defs_uses(self.body[self.positions[k]])[0] for k in range(start, end))
