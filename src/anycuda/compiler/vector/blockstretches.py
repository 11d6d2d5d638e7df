"""The stretches of a block program (blockprograms.py): the program runs from barrier to barrier,
each stretch a loop over the block's warps, and what a warp needs in a later stretch waits in
a stack array, one element per warp (_keep, _resume), unless it is a function of the warp's
index and the launch that the later stretch computes again (recompute.py).

Within a stretch a warp's registers are <lanes x T> values that stay in vector registers (a
value for the whole block, 16 zmm registers each, made LLVM spill nearly everything: 1.05 us
per block of scan against 0.2-0.4 in the models).

Two kinds of branch lead from stretch to stretch:

- A *uniform* forward branch, whose predicate every lane of the warp holds alike (a setp of
  values alike in the lanes: BlockProgram.uniform), takes the whole warp or none of it: the
  code it jumps over runs behind one test (_behind) and the lanes' mask is left as it was, so
  writes stay whole and registers keep their shapes (a tiled GEMM's `if (tiles > 0)` before
  its loop made every later address a gather). Where its target lies past a barrier, the
  warp's choice is kept (`skipping`) and each stretch up to the target runs behind it.
- A loop around barriers (a tiled GEMM's loop over tiles): its first and its last stretch are
  cut at its label and after its back branch, and after the last stretch the program goes
  back to the first where some warp goes round (_round_again). Its back branch must be
  uniform; a warp that does not go round waits past the loop while the others do (its
  stretches skip it, as a barrier on a GPU counts only the threads that have not left;
  CUDA leaves it undefined). The state kept at its label must be the same from both
  ways in: registers the loop writes are kept in their arrays (no constant), with the shapes
  they have at the back branch as well (else LoopShapeLost, made again without), and the
  back branch stores its state in that form (_keep_as).

A grid-stride loop within a stretch runs *in turns* (blockloops.turned_loops): it is made as
a loop around barriers whose one stretch is its body, so that each turn runs one round of
every warp and the block's warps read a row of the grid together; its lanes may part, which
a loop around a barrier's may not (see "loops in turns" below).
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from ..analysis import dataflow, shapevalues
from ..analysis.dataflow import defs_uses
from ..irutil import for_range, i32, mark_stretch
from ..types import I1, I8, I32
from . import idlewarps
from .blockloops import LoopShapeLost, loop_regions, turned_loops
from .blockops import Affine, and_scalar, is_empty
from . import recompute
from .warpruns import NotVectorisable

_BARRIERS = frozenset(("bar", "barrier"))
LONG_BLOCK_BARRIERS = 3     # barriers of a kernel whose blocks' loads are all prefetched for the next blocks


class StretchParts:
    """A block program's stretches and what they keep (see the module docstring): a part of
    BlockProgram."""

    def _emit_stretches(self):
        body, b = self.pfn.body, self.b
        # (a warp's barrier, __syncwarp, is no end: its lanes run in step)
        cuts = [pos + 1 for pos, st in enumerate(body)
                if isinstance(st, pir.Instruction) and st.opcode in _BARRIERS and "warp" not in st.mods]
        self.loops, self.barrier_loops = loop_regions(body, self.labels, cuts)
        # a block passes several barriers: a loop around one, or three of them
        # (BlockMemory._prefetch_next_blocks)
        self.long_blocks = bool(self.barrier_loops) or len(cuts) >= LONG_BLOCK_BARRIERS
        # grid-stride loops in turns: made as loops around barriers, a round of every warp a turn
        self.turned = turned_loops(self.pfn, self.labels, self.loops, self.barrier_loops, any_step=self.group > 1)
        for head in self.turned:
            self.barrier_loops[head] = self.loops.pop(head)
        self.barrier_backs = {back: head for head, back in self.barrier_loops.items()}
        for head, back in self.barrier_loops.items():
            cuts += [head, back + 1]
        bounds = sorted(set([0, len(body)] + cuts))
        kept, rounds, single_before = None, {}, False
        for s, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
            if lo in self.barrier_loops:          # a loop's first stretch: where its rounds start
                if kept is None:
                    raise NotVectorisable("a loop around a barrier from the kernel's start")
                start = self.fn.append_basic_block(f"stretch{s}.round")
                b.branch(start)
                b.position_at_end(start)
                rounds[lo] = (start, kept)
            closing = self.barrier_backs.get(hi - 1)
            if closing is not None:
                self._reset_again()
            # (every warp starts the first stretch: nothing is kept for any before it; the
            # stretches of a loop run every warp each round)
            busy = None if kept is None or self._in_barrier_loop(lo) else self._busy_warps(lo, hi)
            # (a block of one warp runs only its first warp's lanes in every such stretch)
            single = (busy[1].warps <= 1 if busy is not None
                      else self.warps == 1 and kept is not None and not self._in_barrier_loop(lo))
            self.keep_windows_into_stretch(single, single_before)
            single_before = single
            count = self.group_warps if busy is None else b.load(busy[0])
            mark_stretch(b, s)
            with for_range(b, i32(0), count, f"stretch{s}.warp") as w:
                self.warp = w
                self._warp_counters.add(w)
                self.shared_base = self.warp_shared_base()
                self.note_warp_block()
                self._spans_loaded = {}
                self._resumed = {}
                self._recomputed = {}
                if kept is not None:
                    self._resume(kept)
                if lo in self._turn_after:        # (past a loop in turns: the lanes that came to it)
                    self.here = self._load_kept(self._turn_after[lo])
                self._run_stretch(lo, hi)
                self.flush_stores()
                if closing is not None:           # (before a loop starting here adds its choice)
                    self._keep_as(rounds[closing][1], self._written_in(closing, hi - 1))
                if hi < len(body):
                    written = frozenset()
                    if hi in self.barrier_loops:
                        written = self._written_in(hi, self.barrier_loops[hi])
                        self._skipping[self._leaving(hi)] = ir.Constant(I1, 0)
                    if hi in self.turned:
                        self._enter_turns(hi, written)
                    kept_next = self._keep(self._live_across(hi), written, turned=hi in self.turned)
                    if closing in self.turned:
                        self._exit_values(kept_next, closing)
            if busy is not None:
                self._set_busy(busy, kept_next)
            if closing is not None:
                self._round_again(rounds[closing][0])
            kept = kept_next if hi < len(body) else None

    def _in_barrier_loop(self, pos) -> bool:
        return any(head <= pos <= back for head, back in self.barrier_loops.items())

    def _written_in(self, lo, hi) -> frozenset:
        """The registers written at body positions lo..hi."""
        return frozenset(r for st in self.pfn.body[lo:hi + 1] if isinstance(st, pir.Instruction)
                         for r in defs_uses(st)[0])

    # -------------------------------------------------------------- idle warps
    def _busy_warps(self, lo, hi):
        """(a stack slot for the number of warps the stretch lo..hi runs, idlewarps.Busy) where
        only its first warps have lanes in its work; None where every warp has some."""
        if self.group > 1:                 # (idlewarps reckons with one block's warps)
            return None
        busy = idlewarps.busy_warps(self.pfn.body, lo, hi, self.block, self.shape_values(), self._live_across(hi),
                                    self.lanes)
        if busy is None or busy.warps >= self.warps:
            return None
        return self.scratch(I32, "busy.warps"), busy

    def shape_values(self) -> shapevalues.BlockValues:
        """The integers the block shape fixes at each point of the body, made when first asked."""
        if self._shape_values is None:
            self._shape_values = shapevalues.BlockValues(self.pfn.body, self.block)
        return self._shape_values

    def _set_busy(self, busy, kept):
        """The count of warps a stretch runs, now that what it keeps is known: the busy ones
        where the registers it writes and keeps are constants (kept alike for every warp, the
        idle ones included), else all (a write under a partial mask, say)."""
        slot, found = busy
        constant = all(kept["values"].get(r, ("constant",))[0] == "constant"
                       and all(how[0] == "constant" for how in _shape_kept(kept, r)) for r in found.written)
        with self.b.goto_block(self.fn.entry_basic_block):
            self.b.position_after(slot)
            self.b.store(i32(found.warps if constant else self.warps), slot)

    # -------------------------------------------------------------- uniform skips
    def _run_stretch(self, lo, hi):
        """Positions lo..hi-1 of a stretch, each part a warp skips (`skipping`) behind its test."""
        self._skipped = {}             # choices whose target this stretch reached (a loop's state still)
        self._applied = set()          # choices whose parts run behind their tests now
        self._run(lo, hi)

    def run_skipping(self, lo, hi) -> bool:
        """Where the warp has choices to skip past `lo` not yet applied: lo..hi-1, each part
        behind the tests of the choices that skip it (the farthest outermost), and True."""
        pending = sorted((key for key in self._skipping if key not in self._applied), key=self._skip_at.get)
        if not pending:
            return False
        self._applied |= set(pending)
        self._run_behind(lo, hi, pending)
        self._applied -= set(pending)
        return True

    def _run_behind(self, lo, hi, labels):
        if not labels:
            return self._run(lo, hi)
        label = labels[-1]
        target = self._skip_at[label]
        end = min(target, hi)
        flag = self._skipping[label]
        if end > lo:
            self._behind(self.b.not_(flag), lambda: self._run_behind(lo, end, labels[:-1]))
        if target <= hi:
            self._skipped[label] = self._skipping.pop(label)
        if end < hi:
            self._run(end, hi)

    def uniform_target(self, pos, st):
        """The position of the label a uniform forward branch at `pos` goes to, or None: one
        whose predicate every lane of the warp holds alike, or any where every lane is here
        (`bra.uni` past an else: no lane waits anywhere, so none comes into what it jumps
        over another way)."""
        if not (isinstance(st, pir.Instruction) and st.opcode == "bra" and isinstance(st.operands[0], pir.Sym)):
            return None
        if st.guard is not None and st.guard.reg.name not in self.uniform:
            return None
        if st.guard is None and (self.here is not None or not all(map(is_empty, self.reach.values()))):
            return None
        target = self.labels.get(st.operands[0].name, -1)
        if target <= pos or self.here is not None and is_empty(self.here):
            return None
        if self._open_loops and target > self._open_loops[-1].back:
            return None                # (a break: its lanes' exit values are caught on the mask's way)
        return target

    def skip_uniformly(self, pos, st, target, hi) -> int:
        """The uniform branch at `pos` to `target`: what it jumps over up to `hi` runs behind
        the warp's choice, which is kept (`skipping`) where the target lies past `hi`. The
        position to go on from."""
        b = self.b
        if st.guard is None:
            taken = ir.Constant(I1, 1)
        else:
            taken = b.extract_element(self.read(st.guard.reg, "pred"), i32(0))
            if st.guard.negated:
                taken = b.not_(taken)
        end = min(target, hi)
        if target > hi:
            # (a second way to a label the warp may already skip to: a choice of its own, so
            # that what is left of the way there runs behind both)
            key = st.operands[0].name
            if key in self._skipping:
                key = f"{key}#{len(self._skip_at)}"
            self._skip_at[key] = target
            self._skipping[key] = taken
        if st.guard is not None and end > pos + 1:
            self._behind(b.not_(taken), lambda: self._run(pos + 1, end))
        return end

    def _behind(self, cond, run, idle=False):
        """run() behind a test of i1 `cond`; after it, each register, shape, mask and choice it
        changed is a phi of its value and the one before. `idle`: what is skipped would have
        run for no lane (the masks it makes are the same either way)."""
        b = self.b
        self.flush_stores()
        before = (dict(self.values), dict(self.shapes), dict(self.whole), self.here, dict(self.reach),
                  {**self._skipped, **self._skipping}, set(self.uniform), [dict(o.outs) for o in self._open_loops])
        pre = b.block
        inside, join = self.fn.append_basic_block("span"), self.fn.append_basic_block("span.join")
        b.cbranch(cond, inside, join)
        b.position_at_end(inside)
        run()
        self.flush_stores()
        self._spans_loaded = {}
        end = b.block
        b.branch(join)
        b.position_at_end(join)
        self._merge(before, pre, end, idle, cond)

    # -------------------------------------------------------------- loops around barriers
    def _leaving(self, head):
        """The choice of a warp that has left the loop at `head`: it skips the loop's
        stretches to the position after its back branch while others go round."""
        key = f"round{head}"
        self._skip_at[key] = self.barrier_loops[head] + 1
        return key

    def _reset_again(self):
        """Before the last stretch of a loop: no warp has yet said it goes round."""
        if self._again is None:
            self._again = self.scratch(I1, "round.again")
        self.b.store(ir.Constant(I1, 0), self._again)

    def go_round(self, pos, st):
        """The back branch of a loop around barriers, in this warp: its lanes go round (every
        lane here alike: the branch's predicate is uniform), or the warp leaves the loop and
        waits past it while other warps go round, as threads that leave do on a GPU (a
        barrier counts the threads that have not left; CUDA leaves it undefined). In a loop
        in turns the lanes may part: those that go round are its mask in the next turn."""
        head = self.barrier_backs[pos]
        if head not in self.turned and (st.guard is None or st.guard.reg.name not in self.uniform):
            raise NotVectorisable("a loop around a barrier whose lanes may part")
        b = self.b
        p = self.read(st.guard.reg, "pred")
        if st.guard.negated:
            p = b.not_(p)
        here = self._all_lanes() if self.here is None else self.here
        going = b.and_(p, here)
        if head in self.turned:
            self._catch_exit_values(head, b.and_(here, b.not_(p)), going, here)
            self.here, self.frame = going, None
        go = self._some_lane(going)
        b.store(b.or_(b.load(self._again), go), self._again)
        self._skipping[self._leaving(head)] = b.not_(go)

    # -------------------------------------------------------------- loops in turns
    # A grid-stride loop within a stretch (blockloops.turned_loops) is made as a loop around
    # barriers whose one stretch is its body: each turn runs one round of every warp. Its lanes
    # part (the last round of a warp has lanes past the end), so unlike a loop around a
    # barrier its mask is kept from turn to turn, and, as in a loop within a stretch
    # (blockloops.py), a write under that mask (its frame) sets every lane, while each
    # register read after the loop takes its exit value in the lanes leaving (kept apart).
    # Past the loop the lanes are those that came to it (every lane that enters leaves by
    # the back branch): that mask is kept at its head (_turn_after).

    def _enter_turns(self, head, written):
        """At a loop in turns' head, as the stretch before it ends: the mask past the loop
        (the lanes here and those waiting at the label after it) and each exit value, as they
        are before the first turn."""
        back = self.turned[head]
        follows = self.pfn.body[back + 1]
        # (lanes waiting at a label just past the loop join those leaving it: as they were
        # split before the loop, their union is known, mostly all lanes)
        waiting = self.reach.pop(follows.name, self._none()) if isinstance(follows, pir.Label) else self._none()
        self._turn_after[back + 1] = self._keep_value(("after", head), self.parts.union(self.b, self.here, waiting))
        self._turn_outs[head] = {r: self._keep_value(("out", r), self.reg_value(r), True)
                                 for r in sorted(written & self._live_at(back + 1))}
        # lanes that never enter leave with the shapes their registers have here: where every
        # lane skips the loop (nvcc's remainder loop before a loop unrolled by four, none of it
        # left to do), the loop after it read its index as a ramp again, not through gathers
        # (a byte copy's grid-stride loop 4x slower than without the unrolling)
        shapes = self._turn_shapes.setdefault(head, {})
        self._turn_exact[head] = {}
        for r in self._turn_outs[head]:
            shape = self._kept_shape(r)
            exact = ir.Constant(I1, 0) if shape is None else shape.exact or ir.Constant(I1, 1)
            self._turn_exact[head][r] = self._keep_value(("out exact", r), exact, True)
            if shape is not None:
                shapes[r] = self._keep_exit_shape(r, shape)

    def _catch_exit_values(self, head, leaving, going, here):
        """The lanes of `leaving` take their registers' values as their exit values. Where
        every lane came in and all leave in this turn (`here`, none `going` on: a loop whose
        rounds the warp's lanes count alike, a march along z), an exit value keeps the shape
        its register has at the back branch (its base kept per warp), as a loop within a
        stretch's does (blockloops._exit_shapes): nvcc's remainder loop after a loop unrolled
        by four reads the main loop's index, whose accesses were gathers without it."""
        b = self.b
        with b.if_then(self._some_lane(leaving)):
            for r, how in self._turn_outs[head].items():
                self._store_as(how, b.select(leaving, self.reg_value(r), self._load_kept(how)))
            together = b.and_(b.not_(self._some_lane(going)), self._every_lane(here))
            shapes = self._turn_shapes.setdefault(head, {})
            for r, exact in self._turn_exact[head].items():
                shape, known = self._kept_shape(r), shapes.get(r)
                if shape is not None and (known is None or known[1] == shape.stride
                                          and known[0][3] == shape.base.type):
                    shapes[r] = self._keep_exit_shape(r, shape)
                    self._store_as(exact, and_scalar(b, shape.exact, together))
                else:           # (a shape the exit does not keep: its lanes as they are)
                    self._store_as(exact, ir.Constant(I1, 0))

    def _kept_shape(self, r):
        """Register r's shape as a loop in turns' exit may keep it, or None."""
        return None if r in self.shapeless else self.shapes.get(r)

    def _keep_exit_shape(self, r, shape):
        """(how its base is kept, its stride): the shape exit value r leaves a loop in turns with."""
        return self._keep_value(("out base", r), shape.base, True), shape.stride

    def _exit_values(self, kept, head):
        """What the stretch after a loop in turns resumes: its registers' exit values, and
        the shapes they keep where all lanes left together (_catch_exit_values)."""
        shapes = self._turn_shapes.get(head, {})
        for r, how in self._turn_outs[head].items():
            kept["values"][r] = how
            kept["whole"][r] = False
            kept["shapes"].pop(r, None)
            if r in shapes:
                base, stride = shapes[r]
                kept["shapes"][r] = (base, stride, self._turn_exact[head][r], 1)
        kept["uniform"] = kept["uniform"] - set(self._turn_outs[head])

    def turn_label(self, pos, label) -> bool:
        """At the label of a loop in turns: the lanes going round become the frame
        (blockprograms.write)."""
        if pos not in self.turned:
            return False
        self.here = self._joined(label, self.reach.pop(label, self._none()))
        self.frame = self.here
        return True

    def _round_again(self, start):
        """After the last stretch of a loop: back to its first where some warp goes round."""
        b = self.b
        after = self.fn.append_basic_block("round.done")
        b.cbranch(b.load(self._again), start, after)
        b.position_at_end(after)

    # -------------------------------------------------------------- what a warp keeps
    def _live_across(self, cut) -> set:
        """Registers to keep at body position `cut` (just after a barrier), by each thread's
        own paths: those live at the cut for the lanes going on there, and those live at each
        label some lanes branched to and wait for, further on (the lanes of an else wait
        through the barriers of its then). A register every lane writes again before reading
        needs no keeping: the tree reduction written out by unrolling.py rewrote its step's
        registers in every copy, and 5 vectors a warp were stored and reloaded at each of 8
        barriers for nothing."""
        live = set(self._live_at(cut))
        for label in self.reach:
            live |= self._live_at(self.labels[label])
        for key in self._skipping:         # (a warp that skips to a label: its lanes wait there)
            live |= self._live_at(self._skip_at[key])
        return live

    def _live_at(self, pos) -> frozenset:
        """The registers live (dataflow.live_before) at the first instruction from `pos` on."""
        if self._liveness is None:
            self._liveness = dataflow.live_before(self.pfn.body, {})
        body = self.pfn.body
        first = next((q for q in range(pos, len(body)) if isinstance(body[q], pir.Instruction)), None)
        return frozenset() if first is None else self._liveness[first]

    def _slot(self, key, ty):
        """The stack array of `key`, one `ty` per warp."""
        if key not in self._slots:
            self._slots[key] = self.scratch(ir.ArrayType(ty, self.warps), "kept")
        return self.b.gep(self._slots[key], [i32(0), self.warp])

    def _keep_value(self, key, v, fixed=False, may_recompute=False):
        """Store v (an i1 or <lanes x i1> as bytes) for this warp; what _resume needs to load
        it. A constant is not stored, but where `fixed` (a loop's state: the back branch
        stores another value in its place); nor, where `may_recompute`, a value the next stretch
        can compute again from its warp's index (recompute.py)."""
        if not fixed and (v is None or is_empty(v) or isinstance(v, ir.Constant)):
            return ("constant", v)
        if may_recompute and not fixed and recompute.recomputable(v, self._warp_counters, self.fn.entry_basic_block,
                                                                  self.one_way):
            return ("recompute", v)
        how = ("slot", key, _stored_type(v.type), v.type)
        self._store_as(how, v)
        return how

    def _load_kept(self, how, resuming=False):
        """A kept value, loaded from its slot; `resuming`: as the warp's stretch begins, which
        _store_as remembers."""
        if how[0] == "constant":
            return how[1]
        if how[0] == "recompute":
            return recompute.recompute(self.b, how[1], self.warp, self._warp_counters, self.fn.entry_basic_block,
                                       self._recomputed, self.one_way)
        _, key, stored, ty = how
        v = self.b.load(self._slot(key, stored))
        v = self.b.trunc(v, ty) if _is_bool(ty) else v
        if resuming:
            self._resumed[key] = v
        return v

    def _keep(self, live, written=frozenset(), turned=False) -> dict:
        """At the end of a stretch: this warp's registers live after it, their shapes, and its
        masks and choices, each in its array; the description _resume restores them from.
        `written`: the registers a loop starting here writes (kept in their arrays, their
        shapes with the least alignment, none of them whole: the back branch stores its own);
        `turned`: that loop runs in turns (its mask is kept in its array too). The other
        registers' values and shapes that the next stretch can compute again are not kept
        (recompute.py): a loop's rounds leave them as they are."""
        kept = {"values": {}, "shapes": {}, "whole": {}, "reach": {}, "skipping": {}}
        for r in sorted(live):
            fixed = r in written
            shape = None if fixed and r in self.shapeless else self.shapes.get(r)
            if r in self.values or fixed:
                kept["values"][r] = self._keep_register(r, shape, fixed)
                kept["whole"][r] = self.whole.get(r, False) and not fixed
            if shape is not None:
                kept["shapes"][r] = (self._keep_value(("base", r), shape.base, fixed, may_recompute=True),
                                     shape.stride,
                                     self._keep_value(("exact", r), shape.exact, may_recompute=not fixed),
                                     1 if fixed else shape.align)
        kept["uniform"] = frozenset(self.uniform & set(kept["values"])) - written
        here = self._all_lanes() if turned and self.here is None else self.here
        kept["here"] = self._keep_value(("here",), here, turned)
        for label, mask in self.reach.items():
            kept["reach"][label] = self._keep_value(("reach", label), mask)
        for label, flag in self._skipping.items():
            kept["skipping"][label] = self._keep_value(("skipping", label), flag, True)
        return kept

    def _keep_register(self, r, shape, fixed=False):
        """A register's lanes are rebuilt from its shape where that is exact (a broadcast and an
        add cost less than storing and loading up to four vectors per warp: scan kept eight
        address vectors); where exactness is checked at run time, they are stored only when
        the check fails."""
        value = self.reg_value(r)
        if shape is None or shape.base.type != value.type.element:
            return self._keep_value(("v", r), value, fixed, may_recompute=True)
        if shape.exact is None:
            return ("ramp",)
        with self.b.if_then(self.b.not_(shape.exact), likely=False):
            kept = self._keep_value(("v", r), value, True)
        return ("ramp unless", kept)

    def _keep_as(self, kept, written):
        """At a loop's back branch: its state stored as `kept` (the description at its head)
        says; the registers it does not write are as they were."""
        b = self.b
        for r in sorted(written):
            how = kept["values"].get(r)
            if how is None:
                continue
            shape = None if r in self.shapeless else self.shapes.get(r)
            shape_how = kept["shapes"].get(r)
            if shape_how is not None:
                base_how, stride, exact_how, _ = shape_how
                if shape is None or shape.stride != stride or shape.base.type != base_how[3] \
                        or (exact_how[0] == "constant") != (shape.exact is None):
                    raise LoopShapeLost(r)
                self._store_as(base_how, shape.base)
                if shape.exact is not None:
                    self._store_as(exact_how, shape.exact)
            elif how[0] != "slot":
                raise LoopShapeLost(r)
            if how[0] == "slot":
                self._store_as(how, self.reg_value(r))
            elif how[0] == "ramp unless":
                with b.if_then(b.not_(shape.exact), likely=False):
                    self._store_as(how[1], self.reg_value(r))
        if kept["here"][0] == "constant":
            if self.here is not kept["here"][1]:
                raise NotVectorisable("a loop around a barrier that changes which lanes run")
        else:
            self._store_as(kept["here"], self._all_lanes() if self.here is None else self.here)
        skipping = {**self._skipped, **self._skipping}
        if set(kept["reach"]) != set(self.reach) or set(kept["skipping"]) != set(skipping):
            raise NotVectorisable("a loop around a barrier that lanes leave")
        for label, how in kept["reach"].items():
            if how[0] == "constant":
                if self.reach[label] is not how[1]:
                    raise NotVectorisable("a loop around a barrier that lanes leave")
            else:
                self._store_as(how, self.reach[label])
        for label, how in kept["skipping"].items():
            self._store_as(how, skipping[label])

    def _store_as(self, how, v):
        """Store v in its slot, but where it is the value the warp loaded from there as the
        stretch began and nothing was stored there since: a register live across several
        barriers and not written between them (scan's indices and values, across the 18
        barriers of its tree) was stored back at each for nothing."""
        key = how[1]
        if self._resumed.get(key) is v:
            return
        self._resumed.pop(key, None)
        if _is_bool(v.type):
            v = self.b.zext(v, _stored_type(v.type))
        self.b.store(v, self._slot(key, how[2]))

    def _ramp(self, shape):
        """base + stride * t in lane t, in the base's width."""
        mask = (1 << shape.base.type.width) - 1
        return self.b.add(self.splat(shape.base), self.lane_constant([(shape.stride * t) & mask for t in range(self.lanes)],
                                                                     shape.base.type))

    def _resume(self, kept):
        def load(how):
            return self._load_kept(how, resuming=True)
        self.whole = dict(kept["whole"])
        self.shapes = {r: Affine(load(base), stride, load(exact), align)
                       for r, (base, stride, exact, align) in kept["shapes"].items()}
        self.values = {}
        for r, how in kept["values"].items():
            if how[0] == "ramp":
                self.values[r] = self._ramp(self.shapes[r])
            elif how[0] == "ramp unless":
                shape = self.shapes[r]
                self.values[r] = self.b.select(shape.exact, self._ramp(shape), self._load_kept(how[1]))
            else:
                self.values[r] = load(how)
        self.uniform = set(kept["uniform"])
        self.here = load(kept["here"])
        self.reach = {label: load(how) for label, how in kept["reach"].items()}
        self._skipping = {label: load(how) for label, how in kept["skipping"].items()}


def _stored_type(ty):
    """How a value of type `ty` lies in its slot: an i1 or <lanes x i1> as bytes."""
    if not _is_bool(ty):
        return ty
    return ir.VectorType(I8, ty.count) if isinstance(ty, ir.VectorType) else I8


def _is_bool(ty) -> bool:
    return (ty.element if isinstance(ty, ir.VectorType) else ty) == I1


def _shape_kept(kept, r) -> tuple:
    """How a kept register's shape is restored: its base's and exactness's (none: no shape)."""
    shape = kept["shapes"].get(r)
    return () if shape is None else (shape[0], shape[2])

