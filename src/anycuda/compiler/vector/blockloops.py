"""Loops in a block program (blockprograms.py): a loop between two barriers runs as a loop
over the warp's lanes, for as long as some lane goes round again.

A grid-stride sum before a warp's shuffles (`for (i = gid; i < n; i += stride) s += x[i]`)
made a kernel's code cyclic, and the whole kernel kept the rounds, a lane at a time. Here a
loop is a backward branch `@p bra L` (or `bra L`) at position `back` to the label L at `head`,
within one stretch (no barrier in it), entered only at L, with one back branch, its other
exits forward branches to labels past it (a `break`) leaving this loop alone.

The lanes that go round are the loop's mask m, a phi at the head: those arriving, then those
whose back branch was taken; lanes leave and never come back, so m only shrinks. Within the
loop an instruction under m writes every lane (as if the loop ran them all): the lanes out of
m compute what nobody reads, accesses and stores still go under m, and registers keep their
Affine shapes, so `x[i]` stays one vector load. What a leaving lane holds is caught as it
leaves: each register the loop writes and code after it reads has an exit value, taken from
the lane's register where it leaves (at the back branch not taken, or a break), the value
from before the loop in the lanes that never came in; after the loop the register is that.

A register's shape at the head is a phi of its base: stride and type as before the loop. If
the body's end gives it another stride, or none, the program is made again without that
register's shape in loops (LoopShapeLost, caught by emit_module).

LoopParts is a part of BlockProgram, which inherits it (like blockmemory.BlockMemory).
"""
from __future__ import annotations

import bisect

from dataclasses import dataclass, field

from llvmlite import ir

from ...ptx import ir as pir
from ..analysis import gridstride, uniformity
from ..analysis.cfg import branch_target
from ..analysis.dataflow import defs_uses
from ..analysis.memory import MEMORY_BOUND_INSTRUCTIONS, global_access, memory_address
from ..types import I1
from .blockops import Affine, holding_if
from .warpruns import NotVectorisable


class LoopShapeLost(Exception):
    """A register's shape at a loop's head did not hold at its back branch: make the program
    again without it (`register`)."""

    def __init__(self, register: str):
        super().__init__(register)
        self.register = register


def loop_regions(body: list, labels: dict, cuts: list) -> tuple:
    """({position of a loop's label: position of its back branch} for the loops within a
    stretch, the same for the loops around a barrier: the positions after barriers are
    `cuts`; blockstretches.py makes those) for every backward branch of `body`.
    NotVectorisable for a loop the program does not take: a second back branch to its label,
    a branch into it from outside but to its label, loops that overlap without nesting, a
    loop around a barrier inside another or left by a branch (a break).

    O(n + b * l) for b branches and l loops (each loop checked against the branches, not
    against every statement: a kernel of 50,000 instructions with hundreds of loops was
    O(n * l) before)."""
    branches = [(pos, target) for pos, st in enumerate(body) if (target := branch_target(st, labels)) is not None]
    cuts = sorted(cuts)
    loops, around = {}, {}
    for pos, target in branches:
        if target > pos:
            continue
        if target in loops or target in around:
            raise NotVectorisable("a loop with two back branches")
        # a cut in target+1 .. pos: a barrier inside the loop
        crosses = bisect.bisect_left(cuts, target + 1) < bisect.bisect_right(cuts, pos)
        (around if crosses else loops)[target] = pos
    every = {**loops, **around}
    for head, back in every.items():
        for pos, target in branches:
            if head < target <= back and not head <= pos <= back:
                raise NotVectorisable("a branch into a loop")
            if head in around and head <= pos < back and target > back:
                raise NotVectorisable("a branch out of a loop around a barrier")
        for other, other_back in every.items():
            if head < other <= back < other_back:
                raise NotVectorisable("loops that overlap")
            if head in around and other in around and head < other <= back:
                raise NotVectorisable("a loop around a barrier inside another")
    return loops, around


def memory_bound(body: list, head: int, back: int, uniform: set) -> bool:
    """Whether the loop head..back does at most MEMORY_BOUND_INSTRUCTIONS instructions a round
    per access of global memory at an address that differs between threads (not through a
    register of `uniform`, analysis.uniformity.block_uniform_registers): a tiled GEMM's loop
    over tiles has 36, a 3-D stencil's march along z 8-13; n-body's loop over the bodies, 16
    per load, reads one body for every thread, and as a block program ran 10-35% slower."""
    instructions = [st for st in body[head:back + 1] if isinstance(st, pir.Instruction)]
    accesses = sum(1 for st in instructions if global_access(st) and not _uniform_address(st, uniform))
    return len(instructions) <= MEMORY_BOUND_INSTRUCTIONS * accesses


def turned_loops(pfn, labels: dict, loops: dict, around: dict, any_step=False) -> dict:
    """{head: back} of the loops of `loops` (within a stretch) that a block program runs in
    turns, every warp one round of it in each turn (blockstretches.py): grid-stride loops that
    are memory-bound, in no other loop, with a guarded back branch and no way out but that
    branch (no break, no return) and something after it. A warp running its own grid-stride loop to
    its end reads a column of the grid's rows, 128 bytes a row and rows a grid apart, which
    no prefetcher follows: a warp-shuffle sum took 1.65x C's time in a C model of that order,
    1.0x with the block's warps in turns (NOTES "Grid-stride loops in turns"). With `any_step`
    (a program of blocks in groups, blockgroups.py) such loops whatever their step: a march
    along z, whose group reads whole rows in each turn."""
    body = pfn.body
    strided, uniform = grid_strided(pfn), uniform_registers(pfn)
    every = {**loops, **around}
    turned = {}
    for head, back in loops.items():
        st = body[back]
        if (back not in strided and not any_step) or head == 0 or st.guard is None or back + 1 >= len(body):
            continue
        if any(h < head and back < b for h, b in every.items()):
            continue
        if any(isinstance(s, pir.Instruction) and s.opcode in ("ret", "exit") for s in body[head:back]) \
                or any((t := branch_target(s, labels)) is not None and t > back for s in body[head:back]):
            continue
        if memory_bound(body, head, back, uniform):
            turned[head] = back
    return turned


def _uniform_address(st, uniform) -> bool:
    addr = memory_address(st)
    base = addr.base if isinstance(addr, pir.Addr) else addr
    return isinstance(base, pir.Sym) or (isinstance(base, pir.Reg) and base.name in uniform)


def grid_strided(pfn) -> dict:
    """{position of a back branch: StrideLoop} of the loops of kernel `pfn` whose step comes
    from the grid's size (gridDim)."""
    return gridstride.grid_stride_loops(pfn.body, {}, _param_names(pfn), wide=frozenset(("nctaid",)))


def uniform_registers(pfn) -> set:
    """The registers every thread of a block computes alike (memory_bound's `uniform`)."""
    return uniformity.block_uniform_registers(pfn.body, _param_names(pfn))


def _param_names(pfn) -> list:
    return [d.name for d in pfn.params]


@dataclass
class _Open:
    """A loop being made: its extent, the registers with exit values and those values."""
    head: int
    back: int
    outs: dict = field(default_factory=dict)      # register -> its exit value so far


class LoopParts:
    """A block program's loops (see the module docstring): a part of BlockProgram."""

    def _loop(self, head: int, back: int) -> int:
        """The loop from the label at `head` (already joined) to its back branch at `back`;
        the position after it."""
        b, body = self.b, self.pfn.body
        self.flush_stores()
        self._spans_loaded = {}
        written = {r for st in body[head:back + 1] if isinstance(st, pir.Instruction) for r in defs_uses(st)[0]}
        carried = sorted(written & self._live_at(head))
        exits = self._break_targets(head, back)
        # (what lanes read after it: those leaving it, and those that wait past it, which keep
        # what they had through the writes the loop makes in every lane)
        live_after = self._live_across(back + 1) | {r for label in exits for r in self._live_at(self.labels[label])}
        outs = sorted(written & live_after)
        pre = b.block
        header = self.fn.append_basic_block("loop")
        b.branch(header)
        b.position_at_end(header)

        def phi(before, ty=None):
            node = b.phi(before.type if ty is None else ty)
            node.add_incoming(before, pre)
            return node

        arriving = self.here
        entering = self._all_lanes() if self.here is None else self.here
        m = phi(entering)
        kept_frame, self.frame = self.frame, m
        values = {r: phi(self.reg_value(r)) for r in carried}
        shapes = {}
        for r in carried:
            shape = self.shapes.get(r)
            if shape is not None and r not in self.shapeless:
                exact = None if shape.exact is None else phi(shape.exact)
                shapes[r] = Affine(phi(shape.base), shape.stride, exact, 1)
        out_phis = {r: phi(self.reg_value(r)) for r in outs}
        opened = _Open(head, back, dict(out_phis))
        fell = phi(self._none())
        # (lanes wait at other labels past the loop as they did before it: those masks stay)
        waiting = {label: mask for label, mask in self.reach.items() if label not in exits}
        reach = {label: phi(self.reach.get(label, self._none())) for label in exits}
        for r in written:
            self.shapes.pop(r, None)
        self.uniform -= written
        self.values.update(values)
        self.shapes.update(shapes)
        self.whole.update(dict.fromkeys(values, True))
        self.here, self.reach = m, {**waiting, **reach}
        self._open_loops.append(opened)

        self._run(head + 1, back)

        st = body[back]
        guard = None
        if st.guard is not None:
            guard = self.read(st.guard.reg, "pred")
            if st.guard.negated:
                guard = b.not_(guard)
        here = self._all_lanes() if self.here is None else self.here
        going_on = here if guard is None else b.and_(here, guard)
        fell_now = fell
        if guard is not None:
            leaving = b.and_(here, b.not_(guard))
            self._catch_leaving(opened, leaving)
            fell_now = b.or_(fell, leaving)
        self.flush_stores()
        self._spans_loaded = {}
        self._open_loops.pop()
        for r, node in values.items():
            node.add_incoming(self.reg_value(r), b.block)
        for r, shape in shapes.items():
            now = self.shapes.get(r)
            if now is None or now.stride != shape.stride or now.base.type != shape.base.type:
                raise LoopShapeLost(r)
            shape.base.add_incoming(now.base, b.block)
            if shape.exact is not None:
                shape.exact.add_incoming(ir.Constant(I1, 1) if now.exact is None else now.exact, b.block)
            elif now.exact is not None:
                raise LoopShapeLost(r)
        for r, node in out_phis.items():
            node.add_incoming(opened.outs[r], b.block)
        last_shapes = {r: self.shapes[r] for r in outs if r in self.shapes and r not in self.shapeless}
        m.add_incoming(going_on, b.block)
        fell.add_incoming(fell_now, b.block)
        for label, node in reach.items():
            node.add_incoming(self.reach.get(label, self._none()), b.block)
        if any(self.reach.get(label) is not mask for label, mask in waiting.items()):
            raise NotVectorisable("a loop that changes which lanes wait past it")
        after = self.fn.append_basic_block("loop.end")
        b.cbranch(self._some_lane(going_on), header, after)
        b.position_at_end(after)

        self.forget_round_addresses(pre, head, back)
        self.frame = kept_frame
        self.uniform -= written
        for r in written:
            self.values.pop(r, None)
            self.shapes.pop(r, None)
        for r, value in opened.outs.items():
            self.values[r] = value
            self.whole[r] = False
        # every lane that came in leaves at the back branch where none breaks or ends in the
        # loop: the lanes after it are those before it (all of them, often: writes stay whole)
        ends = any(isinstance(st, pir.Instruction) and st.opcode in ("ret", "exit") for st in body[head:back])
        self.here = arriving if not exits and not ends else fell_now
        if not exits and not ends and guard is not None:
            self._exit_shapes(last_shapes, fell, arriving)
        return back + 1

    def _exit_shapes(self, last_shapes, fell, arriving):
        """Where every lane of the block went round the loop and all left it at once, each
        register's exit value is its value in the last turn, which keeps that turn's shape:
        the shapes hold on condition that every lane came in (`arriving`) and none had left
        before the last turn (`fell` there is empty). nvcc's remainder loop before a loop
        unrolled by four (`for (i = lane; i < C; i += 32)`) leaves `i` to the main loop, whose
        `x[i]` was a gather per turn without it (layernorm, a warp per row)."""
        together = self.b.not_(self._some_lane(fell))
        if arriving is not None:
            together = self.b.and_(together, self._every_lane(arriving))
        for r, shape in last_shapes.items():
            self.shapes[r] = holding_if(self.b, shape, together)

    def _break_targets(self, head, back) -> set:
        """Labels past the loop that branches in it go to (its breaks); NotVectorisable for
        one past an enclosing loop too (a break out of two loops)."""
        targets = set()
        outer = self._open_loops[-1].back if self._open_loops else None
        for st in self.pfn.body[head:back]:
            target = branch_target(st, self.labels)
            if target is not None and target > back:
                if outer is not None and target > outer:
                    raise NotVectorisable("a branch out of two loops")
                targets.add(st.operands[0].name)
        return targets

    def _catch_leaving(self, opened, leaving):
        """The lanes of `leaving` take their registers' values as their exit values."""
        for r, out in opened.outs.items():
            opened.outs[r] = self.b.select(leaving, self.reg_value(r), out)

    def _note_branch(self, target_pos: int, taken):
        """A forward branch taken by the lanes of `taken`: where it leaves the innermost open
        loop, those lanes leave it here."""
        if self._open_loops and target_pos > self._open_loops[-1].back:
            self._catch_leaving(self._open_loops[-1], self._all_lanes() if taken is None else taken)
