"""Loops whose trip count the block shape fixes, unrolled so that a block program can take them.

A block program needs acyclic code (blockprograms.py), but the classic shared-memory tree
reduction loops around its barrier: `for (s = blockDim.x / 2; s > 0; s >>= 1) { if (tid < s)
sdata[tid] += sdata[tid + s]; __syncthreads(); }`. For one block shape its trip count is a
number, as in a bitonic sort's or a scan's sweeps over the block: every thread of the block
takes the same way out of the loop, and the loop is the same as its body written out that
many times. Without this such a kernel runs in rounds, a loop over the threads per stretch
between barriers (26-50x the time of an OpenMP reduction for the tree).

A loop taken (natural, laid out contiguously as nvcc does: header first, one back edge from its
last block, entered at the header only): the registers that decide its exits (the exit
branches' predicates and what computes them) must be written only in blocks that run on every
iteration (no branch inside the loop jumps over them, none in an inner loop) by instructions
shapevalues.execute knows, from values known on entry (analysis/shapevalues.py). Then the
loop is run on those registers alone to count its iterations, and its text is repeated: each
copy's labels renamed, exit branches not taken in that iteration dropped, the one taken made
unconditional, the back edge dropped (the next copy follows). Outer loops first, then the
inner ones of each copy, whose counts are known once the outer one is written out.

`fold_shape_branches` does the same for branches: one whose predicate the block shape fixes
is made unconditional or dropped, so that the block program knows every lane goes on after it,
and the code no path reaches any more goes with it.

`unroll_warp_loops` writes out, for any kernel and whatever its block shape, the loops of a
constant trip count around warp collectives: a warp sum written with `warpSize` (nvcc leaves
`for (o = warpSize / 2; o > 0; o /= 2) v += __shfl_down_sync(~0, v, o)` a loop, since WARP_SZ
is a PTX constant it does not fold) is then a run of shuffles whose lane offsets are immediates
(warpruns.fixed_shuffle), which the scheduler resolves as fixed permutations and warp regions
run as vector code; as a loop, each shuffle was a lane-by-lane collective per iteration.
"""
from __future__ import annotations

import dataclasses
import itertools

from ...ptx import ir
from ..analysis import cfg, shapevalues
from ..analysis.dataflow import defs_uses
from ..analysis.suspensions import is_warp_collective

MAX_TRIPS = 64               # a loop run more often than this stays a loop (and the rounds)
MAX_STATEMENTS = 3000        # nor is a body unrolled past this many statements (a block program
                             # of 1,140 statements, bitonic at 1024 threads, compiles in ~5 s)
MAX_LOOPS = 256              # loops written out per function, inner ones of each copy counted
WARP_LOOP_GROWTH = 1000      # statements unroll_warp_loops may add to a kernel (a warp sum's
                             # loop of 5 trips adds ~50)
ANY_SHAPE = (shapevalues.VARYING,) * 3      # %ntid unknown: constants alone


class _Refused(Exception):
    """This loop stays a loop."""


def unroll_shape_loops(pfn: ir.Function, ntid: tuple) -> ir.Function:
    """`pfn` with every loop unrolled whose trip count blocks of shape `ntid` fix (others
    stay loops: the block program runs them as loops, blockloops.py); the same function
    when there is none."""
    body = pfn.body
    if any(isinstance(st, ir.Instruction) and st.opcode == "brx" for st in body):
        return pfn
    serial = itertools.count(1)
    for _ in range(MAX_LOOPS):
        unrolled = _unroll_one(body, ntid, serial, MAX_STATEMENTS)
        if unrolled is None:
            break
        body = unrolled
    return pfn if body is pfn.body else dataclasses.replace(pfn, body=body)


def unroll_warp_loops(pfn: ir.Function) -> ir.Function:
    """`pfn` with its loops of a constant trip count that hold a warp collective written out
    (other loops stay), the integer operands known as constants made immediates and the
    branches they decide folded; the same function where it holds no warp collective or
    has more than MAX_STATEMENTS statements."""
    body = pfn.body
    if len(body) > MAX_STATEMENTS or not _holds_warp_collective(body) \
            or any(isinstance(st, ir.Instruction) and st.opcode == "brx" for st in body):
        # (each loop written out costs a constant propagation over the whole body: in a big
        # kernel with many such loops, O(n^2); big kernels keep their loops)
        return pfn
    serial, limit = itertools.count(1), len(body) + WARP_LOOP_GROWTH
    for _ in range(MAX_LOOPS):
        unrolled = _unroll_one(body, ANY_SHAPE, serial, limit, _holds_warp_collective)
        if unrolled is None:
            break
        body = unrolled
    # (a loop's `if (warpSize < 2) skip it` is known too, once its operands are)
    return fold_shape_branches(dataclasses.replace(pfn, body=_known_operands(body)), ANY_SHAPE)


def _holds_warp_collective(text: list) -> bool:
    return any(isinstance(st, ir.Instruction) and is_warp_collective(st) for st in text)


# the operands a constant may replace: sources of the integer operations constant propagation
# knows, and a shuffle's (not the predicates of a setp's combination or a selp's choice)
_FOLDED = {**dict.fromkeys(shapevalues.OPCODES | {"shfl"}, slice(1, None)), "setp": slice(1, 3), "selp": slice(1, 3)}


def known_operands(pfn: ir.Function, ntid: tuple) -> ir.Function:
    """`pfn` for blocks of shape `ntid` with the integer values constant propagation knows
    written in (_known_operands): a block program keeps such a register as a constant, the
    same in every warp, instead of a stack slot per warp (blockprograms: idle warps)."""
    return dataclasses.replace(pfn, body=_known_operands(pfn.body, ntid))


# integer instructions whose result has their own type: one whose every operand is known
# becomes a `mov` of its value
_SAME_TYPE_RESULT = (shapevalues.OPCODES - {"setp", "cvt", "mul", "mad"}) | {"mul.lo", "mad.lo"}


def _known_operands(body: list, ntid: tuple = ANY_SHAPE) -> list:
    """`body` with the registers read by integer instructions and shuffles replaced by their
    values where constant propagation knows them there (a copy's `offset >> 1` and `lane %
    warpSize` are constants once the loop around them is written out), and an unguarded
    integer instruction whose result is known made a `mov` of it."""
    values = shapevalues.BlockValues(body, ntid)
    body = list(body)
    for block in values.blocks:
        env = values.entry.get(block.index)
        if env is None:
            continue
        env = dict(env)
        for pos, st in block.instructions:
            at = _FOLDED.get(st.opcode)
            t = shapevalues.int_type(st.mods)
            if at is not None and (st.opcode == "shfl" or t is not None):
                result = shapevalues.execute(st, env, ntid) if st.guard is None and t is not None else None
                kind = st.opcode + (".lo" if st.has("lo") else "")
                if result and len(result) == 1 and kind in _SAME_TYPE_RESULT:
                    (dst, value), = result.items()
                    body[pos] = dataclasses.replace(st, opcode="mov", mods=(t,), operands=(ir.Reg(dst), ir.Imm(value)))
                else:
                    ops = list(st.operands)
                    ops[at] = [_value_or_register(op, env) for op in ops[at]]
                    if tuple(ops) != st.operands:
                        body[pos] = _by_power_of_two(dataclasses.replace(st, operands=tuple(ops)))
            shapevalues.step(st, env, ntid)
    return body


def _by_power_of_two(st: ir.Instruction) -> ir.Instruction:
    """An unsigned division or remainder by a power of two as the shift or mask nvcc writes
    for a literal divisor (`lane = threadIdx.x % warpSize`): warp regions take those, and
    not integer divisions."""
    t = shapevalues.int_type(st.mods)
    if st.opcode not in ("div", "rem") or t is None or t[0] != "u" or len(st.operands) != 3:
        return st
    d = st.operands[2]
    if not isinstance(d, ir.Imm) or not isinstance(d.value, int) or d.value <= 0 or d.value & (d.value - 1):
        return st
    if st.opcode == "div":
        return dataclasses.replace(st, opcode="shr", operands=st.operands[:2] + (ir.Imm(d.value.bit_length() - 1),))
    return dataclasses.replace(st, opcode="and", mods=("b" + t[1:],), operands=st.operands[:2] + (ir.Imm(d.value - 1),))


def _value_or_register(op, env: dict):
    v = env.get(op.name, shapevalues.VARYING) if isinstance(op, ir.Reg) else shapevalues.VARYING
    return op if v is shapevalues.VARYING else ir.Imm(v)


def fold_shape_branches(pfn: ir.Function, ntid: tuple) -> ir.Function:
    """`pfn` with the conditional branches whose predicate blocks of shape `ntid` fix made
    unconditional or dropped (the tree reduction's `if (blockDim.x / 2 == 0) skip the loop`:
    left in, the lanes after it were a mask the block program could not tell was every lane,
    so each later write was a masked one and lost its shape)."""
    values = shapevalues.BlockValues(pfn.body, ntid)
    known = {}
    for block in values.blocks:
        env = values.entry.get(block.index)
        if env is None or not block.instructions:
            continue
        env = dict(env)
        for pos, st in block.instructions:
            if st.opcode == "bra" and st.guard is not None:
                g = env.get(st.guard.reg.name, shapevalues.VARYING)
                if g is not shapevalues.VARYING:
                    known[pos] = bool(g) != st.guard.negated
            shapevalues.step(st, env, ntid)
    if not known:
        return pfn
    body = []
    for pos, st in enumerate(pfn.body):
        if pos not in known:
            body.append(st)
        elif known[pos]:
            body.append(dataclasses.replace(st, guard=None))
    if any(known.values()):
        body = _drop_unreachable(body)
    return dataclasses.replace(pfn, body=body)


def _drop_unreachable(body: list) -> list:
    """`body` without the instructions and labels no path from its start reaches. A branch
    made unconditional leaves the code it jumped over dead, and dead code still counts: a
    warp-synchronous tree's `for (s = blockDim.x / 2; s > 32; s >>= 1)` around a barrier,
    skipped whole in blocks of 64, still cut the block program's stretches there, and its
    tail ran every warp (4M floats: 1.8-1.9 ms, 0.6-1.0 without the dead loop; blocks of 128
    0.7-0.8). Left as it is where the body has an indirect branch (brx.idx's targets stay
    labels)."""
    if any(isinstance(st, ir.BranchTargets) or (isinstance(st, ir.Instruction) and st.opcode == "brx")
           for st in body):
        return body
    blocks = cfg.build_cfg(body, {})
    reached, todo = {0}, [0]
    while todo:
        for nxt in blocks[todo.pop()].succs:
            if nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    dead = {pos for blk in blocks if blk.index not in reached for pos, _ in blk.instructions}
    dead_labels = {name for blk in blocks if blk.index not in reached for name in blk.labels}
    if not dead and not dead_labels:
        return body
    return [st for pos, st in enumerate(body)
            if pos not in dead and not (isinstance(st, ir.Label) and st.name in dead_labels)]


def _unroll_one(body: list, ntid: tuple, serial, limit: int, wanted=None) -> list | None:
    """The body with its first loop that can be unrolled (outermost first; one whose text
    `wanted` accepts, where given) unrolled within `limit` statements, or None."""
    values = shapevalues.BlockValues(body, ntid)
    loops = _Loops(values.blocks)
    for header, latch in loops.back_edges:
        if wanted is not None and not wanted(body[values.blocks[header].start:_end(body, values.blocks, latch)]):
            continue
        try:
            trips, exit_block, exits = _count_trips(values, loops, header, latch)
            unrolled = _write_out(body, values.blocks, header, latch, trips, exit_block, exits, serial)
        except _Refused:
            continue
        if len(unrolled) <= limit:
            return unrolled
    return None


class _Loops:
    """Back edges of the blocks in text order (a branch to a block at or before its own),
    outermost first; and for a loop, the blocks on every path through it."""

    def __init__(self, blocks: list):
        self.blocks = blocks
        self.edges = [(b.index, s) for b in blocks for s in b.succs]
        backs = [(s, b) for b, s in self.edges if s <= b]
        self.back_edges = sorted(backs, key=lambda e: (e[0], -e[1]))

    def check_shape(self, header: int, latch: int) -> None:
        """_Refused unless the loop is entered at its header only and has one back edge."""
        for u, v in self.edges:
            inside_u, inside_v = header <= u <= latch, header <= v <= latch
            if inside_v and not inside_u and v != header:
                raise _Refused("entered in the middle")
            if v == header and inside_u and u != latch:
                raise _Refused("more than one back edge")

    def every_iteration(self, header: int, latch: int) -> list:
        """The loop's blocks that run on each of its iterations: no edge inside it jumps over
        them, and they are in no inner loop."""
        inner = [(v, u) for v, u in self.back_edges if header <= v <= u <= latch and (v, u) != (header, latch)]
        skipped = set()
        for u, v in self.edges:
            if header <= u < v <= latch:        # (a branch out of the loop skips nothing of it)
                skipped.update(range(u + 1, v))
        return [b for b in range(header, latch + 1)
                if b not in skipped and not any(v <= b <= u for v, u in inner)]


def _count_trips(values, loops: _Loops, header: int, latch: int) -> tuple:
    """(iterations, the block whose exit the last one takes, the exits)."""
    loops.check_shape(header, latch)
    blocks = values.blocks
    spine = loops.every_iteration(header, latch)
    exits = _exit_branches(blocks, header, latch)
    if any(_ends_every_thread(blocks[b]) for b in spine):
        raise _Refused("a return that every iteration reaches")
    if not set(exits) <= set(spine):
        raise _Refused("an exit that not every iteration reaches")
    deciding = _deciding_registers(blocks, header, latch, exits, set(spine))
    outside = [values.exit[p] for p in values.preds[header] if not header <= p <= latch and p in values.exit]
    if not outside:
        raise _Refused("never entered")
    env = {r: v for r, v in shapevalues.meet(outside).items() if r in deciding}
    for trip in range(1, MAX_TRIPS + 1):
        for b in spine:
            for _, st in blocks[b].instructions:
                if set(defs_uses(st)[0]) & deciding:
                    shapevalues.step(st, env, values.ntid)
            if b in exits and _branch_taken(exits[b], env) != (b == latch):
                return trip, b, exits
    raise _Refused("too many iterations")


def _exit_branches(blocks: list, header: int, latch: int) -> dict:
    """{block: its last instruction} for the blocks that leave the loop, and the latch. A
    branch out of the loop to a block that only returns is no exit: the threads that take it
    end (nvcc's `if (...) return;` inside a loop), the others go on."""
    exits = {}
    for b in range(header, latch + 1):
        block = blocks[b]
        last = block.instructions[-1][1] if block.instructions else None
        outside = [s for s in block.succs if not header <= s <= latch]
        returning = bool(outside) and all(_returns_only(blocks[s]) for s in outside)
        if returning and b != latch:
            if last.guard is None:
                raise _Refused("a return that every thread here takes")
            continue
        if b == latch or outside:
            if last is None or last.opcode != "bra" or (b != latch and last.guard is None):
                raise _Refused("an exit that is not a conditional branch")
            exits[b] = last
    return exits


def _returns_only(block) -> bool:
    return len(block.instructions) == 1 and _ends_every_thread(block)


def _ends_every_thread(block) -> bool:
    last = block.instructions[-1][1] if block.instructions else None
    return last is not None and last.opcode in ("ret", "exit", "trap") and last.guard is None


def _deciding_registers(blocks, header, latch, exits: dict, spine: set) -> set:
    """The registers an exit's predicate is computed from inside the loop, closed over what
    computes them; _Refused where one is written anywhere but unguarded in a block of `spine`."""
    writers = {}
    for b in range(header, latch + 1):
        for _, st in blocks[b].instructions:
            for r in defs_uses(st)[0]:
                writers.setdefault(r, []).append((b, st))
    wanted = [st.guard.reg.name for st in exits.values() if st.guard is not None]
    deciding = set()
    while wanted:
        r = wanted.pop()
        if r in deciding:
            continue
        deciding.add(r)
        for b, st in writers.get(r, ()):
            if b not in spine or st.guard is not None:
                raise _Refused(f"{r} is written where not every iteration goes")
            wanted.extend(defs_uses(st)[1])
    return deciding


def _branch_taken(st: ir.Instruction, env: dict) -> bool:
    if st.guard is None:
        return True
    g = env.get(st.guard.reg.name, shapevalues.VARYING)
    if g is shapevalues.VARYING:
        raise _Refused("an exit that depends on the thread or the data")
    return bool(g) != st.guard.negated


def _write_out(body, blocks, header, latch, trips, exit_block, exits: dict, serial) -> list:
    lo, hi = blocks[header].start, _end(body, blocks, latch)
    text = body[lo:hi]
    if any(not isinstance(st, (ir.Instruction, ir.Label, ir.Pragma)) for st in text):
        raise _Refused("declarations inside")
    labels = {st.name for st in text if isinstance(st, ir.Label)}
    # a block's last instruction by its place in `text` (an instruction object may stand in
    # several places once an inner loop was written out)
    last_of = {blocks[b].instructions[-1][0] - lo: b for b in exits}
    copies = []
    for trip in range(1, trips + 1):
        names = {n: n if trip == 1 else f"{n}$u{next(serial)}" for n in labels}
        copies += _copy(text, names, last_of, latch, exit_block if trip == trips else None)
    return body[:lo] + copies + body[hi:]


def _end(body, blocks, latch: int) -> int:
    """Where the text of a loop whose last block is `latch` ends."""
    return blocks[latch + 1].start if latch + 1 < len(blocks) else len(body)


def renamed(st, names: dict):
    """Statement `st` with its label, or the label its branch goes to, renamed as `names`
    says (a name it does not hold stays): a copy of some text with labels of its own."""
    if isinstance(st, ir.Label):
        return dataclasses.replace(st, name=names[st.name])
    if (isinstance(st, ir.Instruction) and st.opcode == "bra" and st.operands and isinstance(st.operands[0], ir.Sym)
            and st.operands[0].name in names):
        return dataclasses.replace(st, operands=(ir.Sym(names[st.operands[0].name]),) + st.operands[1:])
    return st


def _copy(text, names: dict, last_of: dict, latch: int, leaving: int | None) -> list:
    """One iteration's text: labels renamed as `names` says; the loop's exit branches and its
    back edge (the last instructions of the blocks in `last_of`) dropped, but for block
    `leaving`'s (the last iteration's way out), made unconditional, after which the copy ends."""
    out = []
    for at, st in enumerate(text):
        if not isinstance(st, ir.Instruction):
            out.append(renamed(st, names))
            continue
        b = last_of.get(at)
        if b is not None:
            if b == leaving and b != latch:
                out.append(dataclasses.replace(st, guard=None))
                break
            continue
        out.append(renamed(st, names))
    kept = {st.name for st in out if isinstance(st, ir.Label)}
    for st in out:
        if isinstance(st, ir.Instruction) and st.opcode == "bra" and isinstance(st.operands[0], ir.Sym):
            target = st.operands[0].name
            if target in names.values() and target not in kept:
                raise _Refused("a branch into the part of the last iteration that does not run")
    return out
