"""Warps with nothing to do between two barriers of a block program.

Written out (unrolling.py), the shared-memory tree reduction is a row of stretches `if (tid <
s) sdata[tid] += sdata[tid + s]; __syncthreads();` with s a number, halved each time: from
s = 16 on only the first warp has lanes in the step, yet each stretch of the block program
was a loop over all of the block's warps, the idle ones testing an empty mask (reduce_tree
~5x the time of an OpenMP reduction). Where a stretch is one span behind a branch on the
thread index, which lanes go into the span is known for each lane when the program is made:
the loop over the warps can stop after the last warp that has such a lane, provided the
stretch leaves the warps it skips as they were (what blockprograms.BlockProgram keeps
across the barrier: checked there).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ptx import ir
from ..analysis import shapevalues, uniformity
from ..analysis.dataflow import definitions_of, defs_uses

WARP = 32
_BARRIERS = frozenset(("bar", "barrier"))
_BRANCHES = frozenset(("bra", "brx", "ret", "exit", "trap", "call"))


@dataclass(frozen=True)
class Busy:
    """The leading `warps` of the block have a lane that runs the stretch's spans; `written`:
    the registers the stretch writes that are live after it (each must stay a constant)."""
    warps: int
    written: frozenset


def busy_warps(body: list, lo: int, hi: int, block: tuple, values, live_after: set, lanes: int = WARP) -> Busy | None:
    """For the stretch at body positions lo..hi-1 (a barrier at hi-1, or the body's end) of a
    1-D block: Busy, or None where the stretch is not a row of pieces `prefix; @p bra L; span;
    L:` up to its barrier (or to `ret` at the end: thread 0 storing the block's sum), each
    prefix of integer instructions every lane runs and constant propagation follows
    (`values`: shapevalues.BlockValues of the body for the block's shape), each `p` known in
    each lane from its thread index, each span branching only inside itself, and no register
    a span writes live after the barrier. A warp-synchronous tail is two pieces: `if (tid <
    32) { the last warp's sums }` and `if (tid == 0) out[blockIdx.x] = s[0]`."""
    x, y, z = block
    last = hi == len(body)                  # the kernel's last stretch: it ends at `L: ret`
    if y != 1 or z != 1 or hi > len(body) or not (last or _is_barrier(body[hi - 1])):
        return None
    stop = hi if last else hi - 1
    labels = {st.name: p for p, st in enumerate(body[lo:hi], lo) if isinstance(st, ir.Label)}
    pieces = _pieces(body, lo, stop, labels, last)
    if not pieces:
        return None
    warps, prefixes, span_writes = 0, [], set()
    for start, prefix, branch, span in pieces:
        running = _lanes_running(body, start, prefix, body[branch], x, values)
        if running is None:
            return None
        warps = max(warps, max(running) // lanes + 1 if running else 0)
        prefixes += prefix
        span_writes.update(r for p in span for r in defs_uses(body[p])[0])
    if span_writes & live_after:
        return None
    written = frozenset(r for p in prefixes for r in defs_uses(body[p])[0]) & frozenset(live_after)
    return Busy(warps, written)


def _pieces(body, lo, stop, labels, last) -> list | None:
    """The stretch's pieces from `lo` to `stop` as (where it starts, its prefix's positions,
    its branch's, its span's), or None where the stretch is not such a row of them (at the
    kernel's end, `ret` may follow the last). A branch every lane takes forward, within the
    stretch, is passed over with what it jumps: a loop the block shape runs no turn of
    (`for (s = blockDim.x / 2; s > 32; s >>= 1)` in blocks of 64 threads)."""
    pieces, pos = [], lo
    while True:
        prefix, branch, p = [], None, pos
        while p < stop:
            st = body[p]
            p += 1
            if not isinstance(st, ir.Instruction):
                continue
            if st.opcode == "bra" and st.guard is None:
                target = labels.get(_target(st))
                if target is None or target < p or target > stop:
                    return None
                p = target
                continue
            if st.opcode == "bra":
                branch = p - 1
                break
            if last and _ends(st) and all(not isinstance(t, ir.Instruction) or _ends(t) for t in body[p - 1:stop]):
                break
            prefix.append(p - 1)
        if branch is None:
            return pieces if not prefix else None
        end = labels.get(_target(body[branch]))
        if end is None or end < branch or end > stop:
            return None
        span = [p for p in range(branch + 1, end) if isinstance(body[p], ir.Instruction)]
        if any(not _inside(body[p], labels, branch, end) for p in span):
            return None
        if any(body[p].guard is not None or body[p].opcode not in shapevalues.OPCODES for p in prefix):
            return None
        pieces.append((pos, prefix, branch, span))
        pos = end


def _lanes_running(body, lo, prefix, branch, threads, values) -> list | None:
    """The thread indices whose lane does not take `branch` after the prefix, or None where
    that is not known in some lane. Each lane's values of registers written once, in the
    entry code or an earlier stretch's prefix, are known too (_per_lane), and this prefix's
    are added to them."""
    env = values_at(body, lo, values)
    if env is None:
        return None
    tids = _thread_index_registers(body)
    known = _per_lane(body, threads, values, tids)
    lanes = []
    for t in range(threads):
        lane = {**env, **{r: v[t] for r, v in known.items()}, **dict.fromkeys(tids, t)}
        for p in prefix:
            shapevalues.step(body[p], lane, values.ntid)
        lanes.append(lane)
    _note_per_lane(known, lanes, [r for p in prefix for r in defs_uses(body[p])[0]], values.written_once)
    running = []
    for t, lane in enumerate(lanes):
        g = lane.get(branch.guard.reg.name, shapevalues.VARYING)
        if g is shapevalues.VARYING:
            return None
        if bool(g) == branch.guard.negated:         # the branch over the span is not taken
            running.append(t)
    return running


def _per_lane(body, threads, values, tids) -> dict:
    """{register: its value in each thread} for registers written once (unguarded) where every
    lane that goes on runs the write: the straight entry code (before any label or branch),
    then stretches' prefixes as they are looked at. Such a value is the register's wherever
    it is read. A stretch's guard may be one of them: nvcc computes `t < d` once, in the
    up-sweep of a Blelloch scan, and branches on it in the down-sweep too, whose stretches ran
    every warp."""
    if values.per_lane is None:
        values.written_once = _written_once(body)
        values.per_lane = {}
        end = next((p for p, st in enumerate(body) if isinstance(st, ir.Label)
                    or (isinstance(st, ir.Instruction) and st.opcode in _BRANCHES)), len(body))
        straight = [st for st in body[:end] if isinstance(st, ir.Instruction)]
        lanes = []
        for t in range(threads):
            env = dict.fromkeys(tids, t)
            for st in straight:
                shapevalues.step(st, env, values.ntid)
                env.update((r, t) for r in defs_uses(st)[0] if r in tids)
            lanes.append(env)
        _note_per_lane(values.per_lane, lanes, [r for st in straight for r in defs_uses(st)[0]], values.written_once)
    return values.per_lane


def _note_per_lane(known, lanes, written, once) -> None:
    """Add to `known` the registers of `written` written once whose value every lane knows."""
    for r in set(written) & once:
        per_thread = tuple(lane.get(r, shapevalues.VARYING) for lane in lanes)
        if all(v is not shapevalues.VARYING for v in per_thread):
            known[r] = per_thread


def _written_once(body) -> set:
    """Registers with one definition in the body, by an unguarded instruction."""
    return {r for r, sts in definitions_of(body).items() if len(sts) == 1 and sts[0].guard is None}


def values_at(body, pos, values) -> dict | None:
    """The known registers just before body position `pos`."""
    block = next((blk for blk in reversed(values.blocks) if blk.start <= pos), None)
    if block is None or block.index not in values.entry:
        return None
    env = dict(values.entry[block.index])
    for q, st in block.instructions:
        if q >= pos:
            break
        shapevalues.step(st, env, values.ntid)
    return env


def _thread_index_registers(body) -> set:
    """Registers written once, unguarded, by `mov r, %tid.x`: the lane's thread index."""
    return set(uniformity.moved_once(body, lambda op: isinstance(op, ir.SpecialReg) and op.name == "tid"
                                     and op.component == "x"))


def _ends(st) -> bool:
    return st.opcode in ("ret", "exit") and st.guard is None


def _is_barrier(st) -> bool:
    return isinstance(st, ir.Instruction) and st.opcode in _BARRIERS


def _target(st):
    op = st.operands[0] if st.operands else None
    return op.name if isinstance(op, ir.Sym) else None


def _inside(st, labels, branch, end) -> bool:
    """An instruction of the span that neither leaves it nor ends its thread."""
    if st.opcode in ("ret", "exit", "trap", "call", "brx"):
        return False
    if st.opcode != "bra":
        return True
    target = labels.get(_target(st))
    return target is not None and branch < target <= end
