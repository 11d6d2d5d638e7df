"""Warp regions: from a shuffle on, a warp's 32 lanes run as one vector program until each stops.

A run of shuffles (compiler/vector/warpruns.py) ends at its last shuffle, and the code after it
runs lane by lane in the block's rounds. In layernorm that code is two row loops
(`for (i = lane; i < C; i += 32)`): each lane walks its 24 elements alone, a serial chain
of scalar adds, where the warp's 32 lanes together read 32 neighbouring floats.

A region starts at a fixed shuffle (warpruns.fixed_shuffle) where every lane of a warp
waits, after the scheduler has resolved it, and goes on in vector form (a `<32 x T>` per
register, as in a run) through branches and loops, loads and stores and further fixed
shuffles, up to where each lane stops: the kernel's end, a barrier, or a shuffle that not
all 32 lanes reach together. A yield (the back edge of a grid-stride loop, where the rounds
run one iteration for every thread at a time) is no stop: a warp runs its whole loop.

Control flow is followed with masks. Each lane has a program counter (the body position
where it goes on); the region runs, again and again, the stretch of code at the least
counter of the lanes still running, for the lanes that are there (the reconvergence of a
GPU at the lowest address): register writes and memory accesses are masked to those
lanes, a branch sets their counters, a stop takes them out. Lanes that part at a branch
meet again where the paths join, since the lanes behind go first, and a loop runs while
any lane is in it.

When every lane has stopped, the region leaves the warp where the step function would
have: each lane's stop code where the scheduler reads its threads' stops, the registers
live at the stops in the spill arrays, a stopping shuffle's operand in the collective
array. The block goes on as after any round.

While every lane runs together the region is in *lockstep*: no masks, and each register
whose lanes hold base + lane * stride (compiler/vector/laneshapes.py: a row's start, a loop's index
and element pointers) is one scalar, lane 0's value. A load or store through such an
address, one element per lane, is one vector access; a branch on a predicate alike in every
lane is one i1. A warp enters lockstep where it starts and where its lanes meet again at a
loop's head, if the strided registers live there check out; it leaves lockstep (their
vectors rebuilt) where its lanes part, or where a strided form's condition fails (a widened
index that wraps in some lane). Lanes that part around straight pieces of code that branch
only forward to where they meet (`if (lane == 0) mean[row] = m;`, bitonic sort's nested
`if`s) stay in lockstep, the pieces run under masks. Outside the strided forms a load or
store whose 32 addresses are consecutive elements, with every lane there, is one vector
access; one whose address an xor computes may be one window of 32 elements in the order
lane ^ u (partners in one warp: a masked vector access and a permutation); any other goes
lane by lane. Memory is accessed in the order of a warp running its
lanes together, which CUDA allows (threads are ordered only at barriers, atomics and fences).

A kernel whose threads loop before they first stop also gets a region from its start
(EntryRegion), and one from each barrier that the block's threads leave together where
they loop before they stop again (BarrierRegion): run thread after thread, such a loop sits
inside the loop over threads and does not vectorise (layernorm's first row loop, scan's
block-stride loop, histogram's loop of atomic adds). A strided load in a region's loop is
prefetched some iterations ahead (prefetch_ahead).

Only instructions with a vector form are taken (warpruns.VECTOR_OPS and the memory,
conversion and division forms below; atomics go lane after lane); a region that could
reach another one, or a stop it cannot leave a lane at (a barrier with register operands, a
vote), is not made, and the warp goes through the rounds as before.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..analysis import dataflow, suspensions, uniformity
from ..cpu import streamstores
from ..irutil import (at_function_start, convert_bits, declare, for_range, i32, i64, load_field, register_address,
                      set_loop_hints)
from ..ops import atomics
from ..ops.instructions import _cmp_op, _compare
from ..types import I1, I32, I64, MEMORY_WRITES, ORDERED_MODS, PTR, llvm_type, llvm_width, space_of, type_mods, width
from . import lanereloads, laneshapes, warpruns
from .warpruns import FLOAT_TYPES, INT_TYPES, LANES, NotVectorisable, WarpCode, fixed_shuffle

DONE = 0x7FFFFFFF                   # a lane's program counter once it has stopped
RAN, NOT_RUN, TURNED = abi.REGION_RAN, abi.REGION_NOT_RUN, abi.REGION_TURNED
TURN_ITERATIONS = 8                 # iterations of a grid-stride loop a warp runs per turn
MAX_TURN_BYTES = 2048               # the most state a warp may leave between turns (stack space)
# modifiers a region's handler reads itself, beyond those a run takes
_REGION_MODS = {"mul": {"wide"}}
_ORDERINGS = frozenset(("lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"))
PREFETCH_AHEAD = 16                 # iterations a loop's strided loads are prefetched ahead
MAX_CONVERTED = 4                   # the most pieces a parted warp runs under masks in lockstep


@dataclass
class Piece:
    """Straight-line code a lane runs from `start`: the positions of its instructions (a
    branch or exit only last), then position `next` when it falls through (None: it does not).
    A stop is a piece of its own (`stop` True)."""
    start: int
    positions: list
    next: int | None
    stop: bool = False


class WarpRegion(WarpCode):
    """The region function of the fixed shuffle at body position `first`: `i32 (i8* spill,
    i8* header, i8* ws, i64 fsize, i32 lo, i8* params, i32* codes, i8* turn)` for the warp
    whose first thread is `lo`, called after the scheduler resolved that shuffle for the
    warp; it answers abi.REGION_RAN, _NOT_RUN or _TURNED (`turn`: the warp's turn area)."""

    ARG_TYPES = WarpCode.ARG_TYPES + (PTR, I32.as_pointer(), PTR)
    RETURNS = I32

    def __init__(self, f, first, name, constants):
        super().__init__(f, [first], name, constants)
        self.params, self.codes, self.turn = self.fn.args[5:]
        self.fn.turn_bytes = 0        # the state a warp leaves between turns (0: it runs whole)
        self._step_slots = []         # prefetch_ahead's slots of a load's last address
        self.slots = None             # register -> its <32 x T> stack slot, once the region runs
        self.labels = f.analysed("labels", lambda: {st.name: pos for pos, st in enumerate(f.pfn.body)
                                                    if isinstance(st, pir.Label)})
        self.stops = []               # body positions of the sites where lanes may stop
        self._pieces = None
        self.lockstep = False         # emitting the code the whole warp runs together
        self.scalars = {}             # strided register -> its lane-0 value's <1 x T> slot (lockstep)
        self.transient = set()        # registers whose masked writes need not keep other lanes' values
        self.guarded = False          # the instruction being emitted has a guard (its mask is not
                                      # only the lanes that run its piece: see write)
        self.converted = None         # in lockstep, the lanes of an if-converted piece (_convertible)
        self.unmasked = frozenset()   # registers those pieces write for every lane (_run_converted)
        self.bails = False            # a failed strided check before any store returns NOT_RUN
        self.partners = None          # or calls this region function (EntryRegion)
        self.strides = {}             # register -> laneshapes stride of its lanes in lockstep (pieces())
        self.flips = True             # an xor of a strided register keeps its stride (laneshapes)
        self.position = None          # the body position of the instruction being emitted
        self.piece = None             # the piece being emitted
        self.reloading = None         # register -> its <1 x T> value, while a lane reload runs
        self._window = None           # _shared_base's value
        self._defs = None             # dataflow.definition_positions of the body (_definitions)
        self.stores_codes = True      # the lanes' stop codes go to codes[lo ...] when all have stopped
        self._live = None

    # -------------------------------------------------------------- what a region takes
    def takes(self, st) -> bool:
        if not isinstance(st, pir.Instruction):
            return False
        if st.opcode not in REGION_OPS and st.opcode not in warpruns.VECTOR_OPS:
            return False
        if st.opcode == "cvt" and _cvt_form(st) is None:
            return False
        return not (set(st.mods) & (warpruns._UNHANDLED_MODS - _REGION_MODS.get(st.opcode, set())))

    def op(self, opcode):
        return REGION_OPS.get(opcode) or warpruns.VECTOR_OPS[opcode]

    def pieces(self) -> dict:
        """{start: Piece} of all the code a lane may run from the region's start, checked
        (found once)."""
        if self._pieces is not None:
            return self._pieces
        body = self.f.pfn.body
        # the same for every region of the function (its registers' widths, its constants)
        self.strides = self.f.analysed(("lane_strides", self.flips), lambda: laneshapes.lane_strides(
            body, self._bits, self.constants, self.flips))
        pieces, todo = {}, [self.first + 1]
        while todo:
            start = todo.pop()
            if start in pieces:
                continue
            piece = self._piece(body, start)
            pieces[start] = piece
            for pos in piece.positions:
                st = body[pos]
                if st.opcode == "bra":
                    todo.append(self._target(st))
            if piece.next is not None:
                todo.append(piece.next)
        self.reached = {pos for piece in pieces.values() for pos in piece.positions}
        self._pieces = pieces
        return pieces

    def has_loop(self) -> bool:
        """Whether a lane may branch back in the region: a loop that 32 lanes run side by side."""
        return bool(self._loop_heads())

    def _loop_heads(self) -> set:
        """The positions the region's lanes may branch back to."""
        return {head for head, _ in self._loop_spans()}

    def _loop_spans(self) -> set:
        """{(loop head, position of a branch back to it)} of the region's loops."""
        body = self.f.pfn.body
        return {(self._target(body[p]), p) for piece in self.pieces().values() if not piece.stop
                for p in piece.positions if body[p].opcode == "bra" and self._target(body[p]) < p}

    def _piece(self, body, start):
        positions, pos = [], start
        while pos < len(body):
            st = body[pos]
            if isinstance(st, pir.Label) and pos != start:
                return Piece(start, positions, pos)
            if not isinstance(st, pir.Instruction):
                pos += 1
                continue
            if suspensions.is_yield(st):
                # it waits for nothing; the lanes go through (reduce's grid-stride loop, one
                # vector load per iteration in lockstep: 6.4-7.9 -> 4.9-5.2 ms, NOTES.md)
                pos += 1
                continue
            if suspensions.is_suspension(st):
                if positions:
                    return Piece(start, positions, pos)
                self._check_stop(st, pos)
                return Piece(start, [pos], pos + 1 if fixed_shuffle(st, self.constants) else None, stop=True)
            if st.opcode in ("bra", "ret", "exit"):
                if st.opcode == "bra" and st.operands and not isinstance(st.operands[0], pir.Sym):
                    raise NotVectorisable("an indirect branch")
                positions.append(pos)
                return Piece(start, positions, pos + 1 if st.guard is not None else None)
            if not self.takes(st):
                raise NotVectorisable(f"'{st.opcode}' with {st.mods}")
            if positions and self._check_of(st) is not None:
                # a piece of its own, where lanes that fail the check go on outside lockstep
                return Piece(start, positions, pos)
            positions.append(pos)
            pos += 1
        return Piece(start, positions, None)          # the end of the body: the kernel exits

    def _check_of(self, st):
        """The condition lockstep relies on to compute st's strided results from lane 0
        (laneshapes.instruction_stride), or None."""
        dsts = dataflow.defs_uses(st)[0]
        if not dsts or any(self.strides.get(r) is laneshapes.VARYING for r in dsts):
            return None
        return laneshapes.instruction_stride(st, self.strides, self._bits, self.constants, self.flips)[1]

    def _check_stop(self, st, pos):
        """A lane may stop at a fixed shuffle or a barrier of constant operands:
        the scheduler's site table holds all the step function would store there."""
        if pos not in self.f.site_at:
            raise NotVectorisable(f"'{st.opcode}' at {pos} is not a site")
        if st.guard is not None:
            raise NotVectorisable("a guarded stop")
        barrier = _plain_barrier(st) and all(isinstance(op, pir.Imm) for op in st.operands)
        if not (fixed_shuffle(st, self.constants) or barrier):
            raise NotVectorisable(f"a lane cannot stop at '{st.opcode}'")
        self.stops.append(pos)

    def _target(self, st):
        name = st.operands[0].name
        if name not in self.labels:
            raise NotVectorisable(f"branch to {name}")
        return self.labels[name]

    # -------------------------------------------------------------- the region
    def emit(self):
        b = self.b
        body = self.f.pfn.body
        pieces = self.pieces()
        self._make_slots(pieces)
        for axis in "xyz":
            # kept for the whole function (WarpCode caches them): made where every piece sees them
            self.thread_index(axis)
        self._begin(body)
        self.pc = b.alloca(self._vec(I32), name="pc")
        self.code = b.alloca(self._vec(I32), name="code")
        self.some_mask = b.alloca(self._vec(I1), name="some")
        b.store(self.splat(i32(abi.STEP_EXIT)), self.code)
        # each piece twice: in lockstep, for the whole warp together (no masks, strided
        # registers as scalars: a loop that every lane runs alike is a plain vector loop),
        # and for some of its lanes; a warp enters lockstep where its strided registers
        # check out (_enter)
        self.whole = {start: self.fn.append_basic_block(f"whole{start}") for start in sorted(pieces)}
        some = {start: self.fn.append_basic_block(f"some{start}") for start in sorted(pieces)}
        self.some = some
        self.entries = {}
        self.dispatch = self.fn.append_basic_block("dispatch")
        self.finish = self.fn.append_basic_block("finish")
        turn_points = self._turn_points()
        if turn_points:
            self.turn_count = b.alloca(I32, name="turn.count")
            b.store(i32(0), self.turn_count)
            resume = b.switch(b.load(b.bitcast(self.turn, I32.as_pointer())), self._enter(self.first + 1))
            turn_go = {}
        else:
            b.branch(self._enter(self.first + 1))
        b.position_at_end(self.dispatch)
        pcs = b.load(self.pc)
        least = self._reduce("umin", pcs, I32)
        pick = self.fn.append_basic_block("pick")
        b.cbranch(b.icmp_unsigned("==", least, i32(DONE)), self.finish, pick)
        b.position_at_end(pick)
        mask = b.icmp_unsigned("==", pcs, self.splat(least))
        b.store(mask, self.some_mask)
        pick_whole, pick_some = self.fn.append_basic_block("pick.whole"), self.fn.append_basic_block("pick.some")
        b.cbranch(self._reduce("and", mask, I1), pick_whole, pick_some)
        # lanes that meet again enter lockstep at a loop's head: checking the strided registers
        # at every piece made most of a region's code (layernorm's compile +2 s), and code
        # that does not loop runs once per warp anyway
        heads = self._loop_heads()
        whole = {start: self._enter(start) if start in heads else some[start] for start in pieces}
        for blk, table in ((pick_whole, whole), (pick_some, some)):
            b.position_at_end(blk)
            sw = b.switch(least, self.finish)
            for start, target in table.items():
                sw.add_case(i32(start), target)
        for start, piece in sorted(pieces.items()):
            for blk, lockstep in ((self.whole[start], True), (some[start], False)):
                b.position_at_end(blk)
                self.lockstep = lockstep
                if lockstep and start in turn_points:
                    turn_go[start] = self._count_turn()
                m = None if lockstep else b.load(self.some_mask)
                (self._emit_stop if piece.stop else self._emit_piece)(piece, m)
        self.lockstep = False
        if turn_points:
            self._emit_turns(turn_points, turn_go, resume)
        b.position_at_end(self.finish)
        self._leave()
        self._return(RAN)
        # called once per warp: a call costs nothing there, and the block function it would
        # be inlined into is large already (layernorm's cold compile 4.1 -> 2.9 s)
        self.fn.attributes.add("noinline")
        return self.fn

    # -------------------------------------------------------------- turns
    # A grid-stride loop's warp steps by the grid's width: run a warp's whole loop at a time,
    # each warp reads a column of the grid's rows, 128 bytes per row, and the memory serves
    # such columns at less than half its speed (benchmarks/models/grid_stride_order.c: reduce's
    # order 2.2-2.4 ms, the block's warps in turns of 4-8 iterations 1.05-1.15 ms, C's
    # sequential order 0.64-1.2). With turns, the block function calls the region of each warp
    # again until none gives way: a warp in lockstep at the loop's back edge leaves the
    # registers live there in its turn state (the pointer `turn`, whose first i32 says where
    # it resumes: 0 at its start) after TURN_ITERATIONS iterations and answers TURNED. In
    # lockstep every lane runs: no lane has stopped, and their counters are all there.

    def _turn_points(self) -> list:
        """The pieces that start at the yield before a grid-stride loop's back edge (only
        kernels with sites have yields: gridstride.grid_stride_yields)."""
        body, pieces = self.f.pfn.body, self.pieces()
        return [start for start in sorted(pieces) if isinstance(body[start], pir.Instruction)
                and suspensions.is_yield(body[start])
                and any(body[p].opcode == "bra" and body[p].guard is None and self._target(body[p]) < p
                        for p in pieces[start].positions)]

    def _turn_state(self, live) -> tuple:
        """([(slot, offset, alignment)], bytes) of what a warp leaves between turns at a back
        edge where `live` are live: lane 0 of strided registers, the vectors of others, the
        last addresses of the loads prefetch_ahead measures. The resume number is at offset 0."""
        slots = [self.scalars[r] if r in self.scalars else self.slots[r] for r in sorted(live) if r in self.slots]
        state, offset = [], 64
        for slot in slots + self._step_slots:
            ty = slot.type.pointee
            size = max(llvm_width(ty.element) * ty.count // 8, 1) if isinstance(ty, ir.VectorType) else 8
            align = min(size, 64)
            offset = (offset + align - 1) // align * align
            state.append((slot, offset, align))
            offset += size
        return state, offset

    def _count_turn(self):
        """At a turn point in lockstep: give way after TURN_ITERATIONS iterations; the block
        where the warp goes on (and where it resumes)."""
        b = self.b
        count = b.add(b.load(self.turn_count), i32(1))
        b.store(count, self.turn_count)
        give_way, go = self.fn.append_basic_block("turn.end"), self.fn.append_basic_block("turn.go")
        b.cbranch(b.icmp_unsigned(">=", count, i32(TURN_ITERATIONS)), give_way, go)
        b.position_at_end(go)
        return give_way, go

    def _emit_turns(self, points, blocks, resume):
        """The turn points' exits (the state stored, TURNED) and entries (the state loaded);
        too large a state, and the region runs its warps whole."""
        b = self.b
        states = {start: self._turn_state(self._live_at(start)) for start in points}
        most = max(size for _, size in states.values())
        if most > MAX_TURN_BYTES:
            for give_way, go in blocks.values():
                with b.goto_block(give_way):
                    b.branch(go)
            return
        self.fn.turn_bytes = most
        for number, start in enumerate(points, 1):
            give_way, go = blocks[start]
            state, _ = states[start]
            b.position_at_end(give_way)
            for slot, offset, align in state:
                b.store(b.load(slot), self._turn_slot(slot, offset), align=align)
            b.store(i32(number), b.bitcast(self.turn, I32.as_pointer()))
            b.ret(i32(TURNED))
            back = self.fn.append_basic_block(f"turn.resume{start}")
            resume.add_case(i32(number), back)
            b.position_at_end(back)
            for slot, offset, align in state:
                b.store(b.load(self._turn_slot(slot, offset), align=align), slot)
            b.branch(go)

    def _turn_slot(self, slot, offset):
        return self.b.bitcast(self.b.gep(self.turn, [i64(offset)]), slot.type)

    def _begin(self, body):
        """The region's first instruction, which the scheduler has run for the warp."""
        self._resolved_first_shuffle(body[self.first])

    def _written_at_start(self) -> set:
        return set(dataflow.defs_uses(self.f.pfn.body[self.first])[0])

    def _start_values(self, names) -> dict:
        """{register: its vector when the region starts} for those of `names` that the first
        shuffle's resume would read (others are written before use)."""
        f = self.f
        readable = set(f.site_live.get(self.first, [])) | set(f.remat) | set(f.remat_at.get(self.first, {}))
        written = self._written_at_start()
        return {r: self._value_at_first(r) for r in sorted(names) if r in readable and r not in written}

    def _make_slots(self, pieces):
        """A stack slot per register the region touches, holding its value at the start."""
        b, body = self.b, self.f.pfn.body
        names = set(self._saved()) | self._written_at_start()
        for piece in pieces.values():
            for pos in piece.positions:
                names |= {r for regs in dataflow.defs_uses(body[pos]) for r in regs}
        start_values = self._start_values(names)
        slots = {}
        for r in sorted(names):
            slot = b.alloca(self._vec(self._reg_type(r)), name=r.lstrip("%"))
            if r in start_values:
                b.store(start_values[r], slot)
            slots[r] = slot
        self.slots = slots
        self.scalars = {r: b.alloca(ir.VectorType(self._reg_type(r), 1), name=r.lstrip("%") + ".0")
                        for r in sorted(names) if self.strides.get(r) is not laneshapes.VARYING}
        # registers no lane needs but where it writes them (live at no piece's start, where
        # the other lanes wait, nor reloaded at a stop): a masked write need not keep the
        # other lanes' values, so a loop's temporaries do not flow from each piece into every
        # other (layernorm's output loop spilled them all, each iteration)
        waiting = set(self._saved())
        for start in pieces:
            waiting |= self._live_at(start)
        self.transient = set(names) - waiting

    def _saved(self):
        """Registers the step function reloads at one of the region's stops."""
        f = self.f
        saved = set()
        for pos in self.stops:
            here = f.remat_at.get(pos, {})
            saved |= {r for r in f.site_live.get(pos, []) if r in f.spill_slots and r not in here}
        return saved

    def _emit_piece(self, piece, mask):
        """A piece's instructions for the lanes in `mask` (None: in lockstep, every lane)."""
        body = self.f.pfn.body
        self.piece = piece
        for i, pos in enumerate(piece.positions):
            st = body[pos]
            self.position = pos
            if st.opcode in ("bra", "ret", "exit"):
                taken = self._guard(st) if st.guard is not None else None
                ends = self._ends(piece.positions[:i], st) if self.lockstep and taken is not None \
                    and taken.type != I1 else None
                target = self._target(st) if st.opcode == "bra" else None
                return self._branch(mask, taken, target, piece.next, ends)
            if self.lockstep:
                self._checked(st, pos if i else piece.start)
                self._lockstep_instruction(st)
                continue
            self.mask = mask if st.guard is None else self.b.and_(mask, self._guard(st))
            self.guarded = st.guard is not None
            self.op(st.opcode)(self, st)
            self.mask, self.guarded = None, False
        self._branch(mask, None, piece.next, None)

    def _ends(self, before, st):
        """In lockstep, (i1: every lane takes branch st, i1: some lane does) where its predicate
        is a setp just `before` it that orders a strided register against a value alike in
        every lane (a loop's `i < n`): the lanes' values are monotone unless they wrap, so
        lanes 0 and 31 decide, two scalar compares in place of a vector compare and two
        reductions per iteration. None for another branch."""
        body, pred = self.f.pfn.body, st.guard.reg.name
        at = next((i for i in reversed(range(len(before))) if pred in dataflow.defs_uses(body[before[i]])[0]), None)
        setp = body[before[at]] if at is not None else None
        if setp is None or setp.opcode != "setp" or setp.guard is not None or len(setp.operands) != 3 \
                or not isinstance(setp.operands[0], pir.Reg):
            return None
        ts, cmp = type_mods(setp.mods), _cmp_op(setp)
        if not ts or ts[-1] not in INT_TYPES or cmp not in _ORDERINGS:
            return None
        t, sources = ts[-1], setp.operands[1:]
        steps = [0 if isinstance(op, pir.Imm) else self.strides.get(op.name) for op in sources]
        if any(k is None or k is laneshapes.VARYING for k in steps) or sorted(k != 0 for k in steps) != [False, True] \
                or any(isinstance(op, pir.Reg) and self._bits(op.name) != width(t) for op in sources):
            return None
        if any(set(dataflow.defs_uses(body[p])[0]) & {op.name for op in sources if isinstance(op, pir.Reg)}
               for p in before[at + 1:]):
            return None
        return self._end_lanes_decide(cmp, t, sources, steps, st.guard.negated)

    def _end_lanes_decide(self, cmp, t, sources, steps, negated):
        """(i1 the strided operand's lanes do not wrap, i1 every lane, i1 some lane)."""
        b = self.b
        signed = t.startswith("s") and cmp not in ("lo", "ls", "hi", "hs")
        bits = width(t)
        first = [self._lane0_scalar(op, t) for op in sources]
        last = [b.add(v, ir.Constant(v.type, (k * (LANES - 1)) % (1 << bits))) for v, k in zip(first, steps)]
        v, k = next((v, k) for v, k in zip(first, steps) if k)
        span = abs(k) * (LANES - 1)
        top, low = ((1 << (bits - 1)) - 1, -(1 << (bits - 1))) if signed else ((1 << bits) - 1, 0)
        order = b.icmp_signed if signed else b.icmp_unsigned
        unwrapped = order("<=", v, ir.Constant(v.type, top - span)) if k > 0 else \
            order(">=", v, ir.Constant(v.type, low + span))
        ends = _compare(self, cmp, t, *first), _compare(self, cmp, t, *last)
        every, some = b.and_(*ends), b.or_(*ends)
        if negated:
            every, some = b.not_(some), b.not_(every)
        return unwrapped, every, some

    def _branch(self, mask, taken, target, fall, ends=None):
        """The lanes in `mask` go on at `target` where `taken` holds (None: all of them) and at
        `fall` elsewhere; a None position: they exit. The whole warp going one way goes
        straight to that piece's lockstep code; otherwise the lanes' counters are set and
        the next piece is picked. In lockstep a predicate alike in every lane is one i1."""
        b = self.b
        if self.lockstep and taken is None:
            return b.branch(self._whole_block(target))
        if self.lockstep and taken.type == I1:
            return b.cbranch(taken, self._whole_block(target), self._whole_block(fall))
        if taken is None:
            taken, fall = self._all_lanes(), target
        elif self.lockstep:
            not_all, parted = self.fn.append_basic_block("not.all"), self.fn.append_basic_block("parted")
            every, some = self._every_some(taken, ends)
            b.cbranch(every, self._whole_block(target), not_all)
            b.position_at_end(not_all)
            b.cbranch(some, parted, self._whole_block(fall))
            b.position_at_end(parted)
            chain = self._convertible(fall, target)
            if chain:
                checks = [self._check(c) for c in self._chain_checks(chain)]
                if not checks:
                    return self._run_converted(chain, b.not_(taken), target)
                converted, unchecked = self.fn.append_basic_block("converted"), self.fn.append_basic_block("unchecked")
                b.cbranch(functools.reduce(b.and_, checks), converted, unchecked)
                b.position_at_end(converted)
                self._run_converted(chain, b.not_(taken), target)
                b.position_at_end(unchecked)
            self._leave_lockstep(self._live_at(target) | self._live_at(fall))
            mask = self._all_lanes()
        for where, lanes in ((target, b.and_(mask, taken)), (fall, b.and_(mask, b.not_(taken)))):
            if where is None:
                self._stop(lanes, abi.STEP_EXIT)
            else:
                self._go(lanes, where)
        b.branch(self.dispatch)

    def _every_some(self, taken, ends):
        """(i1 every lane, i1 some lane) of `taken`: from the end lanes (_ends) where their
        values did not wrap, else by reductions."""
        b = self.b
        if ends is None:
            return self._reduce("and", taken, I1), self._reduce("or", taken, I1)
        unwrapped, every, some = ends
        quick, slow, known = (self.fn.append_basic_block(n) for n in ("ends.quick", "ends.slow", "ends.known"))
        b.cbranch(unwrapped, quick, slow)
        b.position_at_end(slow)
        answers = [(every, some, quick), (self._reduce("and", taken, I1), self._reduce("or", taken, I1), slow)]
        b.branch(known)
        b.position_at_end(quick)
        b.branch(known)
        b.position_at_end(known)
        every_phi, some_phi = b.phi(I1), b.phi(I1)
        for e, s_, blk in answers:
            every_phi.add_incoming(e, blk)
            some_phi.add_incoming(s_, blk)
        return every_phi, some_phi

    def _whole_block(self, target):
        """Where the whole warp goes on in lockstep at `target` (None: every lane exits)."""
        if target is not None:
            return self.whole[target]
        blk = self.fn.append_basic_block("all.exit")
        with self.b.goto_block(blk):
            self._leave_lockstep(self._saved())
            self.b.store(self.splat(i32(abi.STEP_EXIT)), self.code)
            self.b.branch(self.finish)
        return blk

    def _emit_stop(self, piece, mask):
        """Lanes at a site: a fixed shuffle that the whole warp reaches together is run, and
        the warp goes on; otherwise the lanes stop there."""
        b = self.b
        pos = piece.positions[0]
        st = self.f.pfn.body[pos]
        site = self.f.site_at[pos]
        if piece.next is not None and self.lockstep:
            self.op("shfl")(self, st)
            return b.branch(self.whole[piece.next])
        if self.lockstep:
            self._leave_lockstep(self._saved() | self._live_at(pos))
            mask = self._all_lanes()
        if piece.next is not None:
            ptr = self._coll_vector("a", I64)
            operand = b.zext(self.read(st.operands[1], "b32"), self._vec(I64))
            b.store(b.select(mask, operand, b.load(ptr, align=8)), ptr, align=8)
        self._stop(mask, site)
        b.branch(self.dispatch)

    # -------------------------------------------------------------- lockstep
    def _alone(self, st) -> bool:
        """Whether every register st writes is strided: lockstep computes their lane 0 alone."""
        dsts = dataflow.defs_uses(st)[0]
        return bool(dsts) and all(r in self.scalars for r in dsts)

    def _checked(self, st, start):
        """Where computing st's lane 0 alone relies on a condition (laneshapes' checked
        forms; st begins the piece at `start`), the lanes leave lockstep when it fails and
        run the piece outside lockstep."""
        check = self._check_of(st)
        if check is None:
            return
        b = self.b
        go_on, fails = self.fn.append_basic_block("strided"), self.fn.append_basic_block("strided.not")
        b.cbranch(self._check(check), go_on, fails)
        b.position_at_end(fails)
        if self.bails and start in self._untouched():
            # nothing done yet that the threads cannot do again: they run the warp instead,
            # or the region made for partners in the same warp (EntryRegion.partners)
            b.ret(i32(NOT_RUN) if self.partners is None else b.call(self.partners, self.fn.args))
        else:
            self._leave_lockstep(self._live_at(start))
            b.store(self._all_lanes(), self.some_mask)
            b.branch(self.some[start])
        b.position_at_end(go_on)

    def _untouched(self) -> set:
        """The pieces a warp may reach in lockstep from the start before it stores anything."""
        body, pieces = self.f.pfn.body, self.pieces()
        seen, todo = set(), [self.first + 1]
        while todo:
            start = todo.pop()
            if start in seen or start not in pieces:
                continue
            seen.add(start)
            piece = pieces[start]
            if piece.stop or any(body[p].opcode in MEMORY_WRITES for p in piece.positions):
                continue
            todo.extend(self._target(body[p]) for p in piece.positions if body[p].opcode == "bra")
            todo.append(piece.next)
        return seen

    def _return(self, answer):
        self.b.ret(i32(answer))

    def _lockstep_instruction(self, st):
        """Instruction `st` for the whole warp. One whose results are all strided computes
        their lane-0 values alone (each form laneshapes keeps a stride for computes lane 0
        from lane 0); another computes vectors, reading strided registers as
        base + lane * stride, masked by its guard where that differs between lanes and by
        the lanes of an if-converted piece (self.converted)."""
        alone = self._alone(st)
        mask = None if alone else self.converted
        if st.guard is not None and st.guard.reg.name not in self.scalars:
            mask = self._guard(st) if mask is None else self.b.and_(mask, self._guard(st))
        elif st.guard is not None:
            with self.b.if_then(self._guard(st)):
                return self._run_masked(st, mask, alone)
        self._run_masked(st, mask, alone)

    def _run_masked(self, st, mask, alone):
        self.mask = mask
        self.guarded = st.guard is not None
        try:
            if alone:
                with self._lane_zero():
                    return self.op(st.opcode)(self, st)
            self.op(st.opcode)(self, st)
        finally:
            self.mask, self.guarded = None, False

    def _convertible(self, fall, target) -> list:
        """The pieces from `fall` on where lanes that part at a forward branch may stay in
        lockstep, the code they skip run for the others under a mask (`if (lane == 0)
        mean[row] = m;`), or []: straight pieces that each go on to the next or branch
        forward to the branch's `target` (bitonic sort's `if (l > i) { ...; if (swap) {...} }`),
        the last one falling through into it, and what they leave live there is no strided
        register (those are one value for every lane). Their other registers are computed for
        every lane alike, which reads only registers of every lane and so is harmless; their
        loads and stores are for their lanes alone."""
        body, pieces, chain = self.f.pfn.body, self.pieces(), []
        if target is None or target < fall:
            return []
        written = set()
        while fall != target:
            piece = pieces.get(fall)
            if piece is None or piece.stop or piece.next is None or len(chain) == MAX_CONVERTED:
                return []
            for p in piece.positions:
                st = body[p]
                if st.opcode in ("ret", "exit") or st.opcode == "bra" and (st.guard is None or self._target(st) != target):
                    return []
                check = self._check_of(st)
                if check is not None and written & {op.name for op in check[1:] if isinstance(op, pir.Reg)}:
                    return []              # (its check is made before the chain runs)
                written |= set(dataflow.defs_uses(st)[0])
            chain.append(piece)
            fall = piece.next
        return [] if written & self._live_at(target) & set(self.scalars) else chain

    def _chain_checks(self, chain) -> list:
        """The conditions of the strided forms in `chain`: made before it runs, where the
        registers they read hold what they will hold there (_convertible)."""
        body = self.f.pfn.body
        return [c for piece in chain for p in piece.positions if (c := self._check_of(body[p])) is not None]

    def _run_converted(self, chain, lanes, target):
        """The pieces of `chain` (_convertible) for `lanes`, a branch forward to `target` taking
        the lanes it takes out of those that run the rest; then the whole warp at target.
        A register no lane reads after the chain is written in every lane, as computed: its
        lanes keep a partner's index whole (bitonic sort's `data + 4 * (i ^ j)`, where the
        masked lanes' old values made gather's window check fail)."""
        b, body, outer = self.b, self.f.pfn.body, self.piece
        written = {r for piece in chain for p in piece.positions for r in dataflow.defs_uses(body[p])[0]}
        self.unmasked = frozenset(written - self._live_at(target))
        for piece in chain:
            self.piece = piece
            for pos in piece.positions:
                st = body[pos]
                self.position = pos
                if st.opcode == "bra":
                    taken = self._guard(st)
                    if taken.type == I1:
                        taken = self.splat(taken)
                    lanes = b.and_(lanes, b.not_(taken))
                    continue
                self.converted = lanes
                self._lockstep_instruction(st)
        self.converted, self.piece, self.unmasked = None, outer, frozenset()
        return b.branch(self.whole[target])

    def _lane_zero(self):
        """Values are <1 x T> (lane 0's) while inside."""
        return self._holding(1)

    @contextmanager
    def _holding(self, lanes):
        saved = self.lanes
        self.lanes = lanes
        try:
            yield
        finally:
            self.lanes = saved

    def _lane0(self, v):
        """Lane 0 of vector v as a <1 x T>."""
        return self.b.shuffle_vector(v, ir.Constant(v.type, None), ir.Constant(ir.VectorType(I32, 1), [0]))

    def _lane0_scalar(self, op, t):
        """Operand op's lane-0 value as type t, a scalar (op strided or alike in every lane)."""
        with self._lane_zero():
            return self.b.extract_element(self.read(op, t), i32(0))

    def _check(self, check):
        """i1: the condition of a strided form (laneshapes.instruction_stride) holds."""
        b = self.b
        kind = check[0]
        if kind == laneshapes.THREAD_INDEX:
            nx = load_field(b, self.header, abi.CTX["ntid_x"], I32)
            return b.icmp_unsigned("==", b.and_(nx, i32(LANES - 1)), i32(0))
        op, k = check[1], check[-1]
        bits = self._bits(op.name) if isinstance(op, pir.Reg) else 32
        v = self._lane0_scalar(op, f"b{bits}")
        t = v.type
        if kind == laneshapes.LOW_BITS:
            mask = check[2]
            return b.icmp_unsigned("<=", b.and_(v, ir.Constant(t, mask)), ir.Constant(t, mask - (LANES - 1) * k))
        if kind == laneshapes.FLIPPED:
            # the bits below the other value's lowest set one (all of them for 0) take the
            # lanes' steps without a carry out of them: the xor leaves those bits alone
            u = self._lane0_scalar(check[2], f"b{bits}")
            low = b.sub(b.and_(u, b.neg(u)), ir.Constant(t, 1))
            span = ir.Constant(t, (LANES - 1) * k)
            return b.and_(b.icmp_unsigned(">=", low, span), b.icmp_unsigned("<=", b.and_(v, low), b.sub(low, span)))
        signed, span = check[2], (LANES - 1) * abs(k)
        if signed:
            cmp, top, low = b.icmp_signed, (1 << (bits - 1)) - 1, -(1 << (bits - 1))
        else:
            cmp, top, low = b.icmp_unsigned, (1 << bits) - 1, 0
        return cmp("<=", v, ir.Constant(t, top - span)) if k > 0 else cmp(">=", v, ir.Constant(t, low + span))

    def _bits(self, name):
        return llvm_width(self._reg_type(name))

    def _enter(self, start):
        """The block that takes the whole warp, all of its lanes at `start`, into lockstep:
        the strided registers live there must hold base + lane * stride (else the lanes run
        the piece outside lockstep)."""
        if start in self.entries:
            return self.entries[start]
        b = self.b
        blk = self.fn.append_basic_block(f"enter{start}")
        self.entries[start] = blk
        with b.goto_block(blk):
            live = sorted(r for r in self._live_at(start) if r in self.scalars)
            holds = self._strides_hold(live)
            inside, outside = self.fn.append_basic_block(f"enter{start}.yes"), \
                self.fn.append_basic_block(f"enter{start}.no")
            b.cbranch(holds, inside, outside)
            b.position_at_end(inside)
            for r in live:
                b.store(self._lane0(b.load(self.slots[r])), self.scalars[r])
            b.branch(self.whole[start])
            b.position_at_end(outside)
            b.store(self._all_lanes(), self.some_mask)
            b.branch(self.some[start])
        return blk

    def _strides_hold(self, registers):
        """i1: each of the strided `registers` holds base + lane * stride in its vector slot."""
        b = self.b
        holds = ir.Constant(I1, 1)
        for r in registers:
            v = b.load(self.slots[r])
            alike = b.icmp_unsigned("==", _bits_of(b, v), _bits_of(b, self._strided_vector(r, v)))
            holds = b.and_(holds, self._reduce("and", alike, I1))
        return holds

    def _strided_vector(self, r, v):
        """base + lane * stride of r, from lane 0 of vector or <1 x T> value v."""
        b = self.b
        base = self.splat(b.extract_element(v, i32(0)))
        k = self.strides[r]
        if not k:
            return base
        return b.add(base, ir.Constant(base.type, [lane * k for lane in range(LANES)]))

    def _leave_lockstep(self, live):
        """Before the lanes go their own ways: the strided registers of `live` as vectors."""
        b = self.b
        for r in sorted(live):
            if r in self.scalars:
                b.store(self._strided_vector(r, b.load(self.scalars[r])), self.slots[r])

    def _live_at(self, pos) -> set:
        """Registers live where a lane goes on at body position `pos` (None: none)."""
        if pos is None:
            return set()
        if self._live is None:
            self._live = self.f.analysed("live_before", lambda: dataflow.live_before(self.f.pfn.body,
                                                                                    self.f.branch_targets))
        body = self.f.pfn.body
        while pos < len(body) and not isinstance(body[pos], pir.Instruction):
            pos += 1
        return set(self._live.get(pos, ()))

    def _leave(self):
        """Every lane has stopped: its code for the scheduler, the registers its site reloads
        (none when every lane exited: layernorm's region runs its whole kernel, and storing
        the registers of stops it never took was a fifth of its time)."""
        b = self.b
        code = b.load(self.code)
        if self.stores_codes:
            codes = b.bitcast(b.gep(self.codes, [self.lo]), self._vec(I32).as_pointer())
            b.store(code, codes, align=4)
        saved = sorted(self._saved())
        if not saved:
            return
        stopped = self._reduce("or", b.icmp_signed("!=", code, self.splat(i32(abi.STEP_EXIT))), I1)
        with b.if_then(stopped):
            for r in saved:
                self._store_spill(r, b.load(self.slots[r]))

    def _go(self, mask, target, value=None):
        b = self.b
        value = self.splat(i32(target)) if value is None else value
        b.store(b.select(mask, value, b.load(self.pc)), self.pc)

    def _stop(self, mask, code):
        b = self.b
        b.store(b.select(mask, self.splat(i32(code)), b.load(self.code)), self.code)
        self._go(mask, DONE)

    def _guard(self, st):
        """st's guard: <32 x i1>, or in lockstep an i1 where it is alike in every lane."""
        if self.lockstep and st.guard.reg.name in self.scalars:
            g = self._lane0_scalar(st.guard.reg, "pred")
        else:
            g = self.read(st.guard.reg, "pred")
        return self.b.not_(g) if st.guard.negated else g

    def _reduce(self, kind, v, elem):
        fn = declare(self.b.module, f"llvm.vector.reduce.{kind}.v{v.type.count}{_suffix(elem)}", elem, [v.type])
        return self.b.call(fn, [v])

    # -------------------------------------------------------------- registers in slots
    def reg_value(self, name):
        if self.reloading is not None and name in self.reloading:
            return self.reloading[name]
        if self.slots is None:
            return super().reg_value(name)
        if name not in self.slots:
            raise NotVectorisable(f"{name} has no slot")
        if self.lockstep and name in self.scalars:
            v = self.b.load(self.scalars[name])
            return v if self.lanes == 1 else self._strided_vector(name, v)
        if self.lanes == 1:
            raise NotVectorisable(f"lane 0 of {name}, which is not strided")    # (laneshapes is wrong)
        return self.b.load(self.slots[name])

    def write(self, op, value, t):
        if self.slots is None:
            return super().write(op, value, t)
        if not isinstance(op, pir.Reg) or op.name not in self.slots:
            raise NotVectorisable(f"destination {op}")
        value = convert_bits(self.b, value, self._reg_type(op.name), t.startswith("s"))
        if self.reloading is not None:
            self.reloading[op.name] = value
            return None
        if self.lockstep and op.name in self.scalars:
            if value.type.count != 1:
                value = self._lane0(value)
            return self.b.store(value, self.scalars[op.name])
        # a transient register need not keep the lanes that do not run its piece, but one that
        # a guard leaves unwritten keeps its value in lanes that go on to read it
        if self.mask is not None and (self.guarded or op.name not in self.transient and op.name not in self.unmasked):
            value = self.b.select(self.mask, value, self.reg_value(op.name))
        self.b.store(value, self.slots[op.name])

    def special(self, op):
        if self.lanes == 1 and op.name == "tid":
            # lane 0's index (where lockstep relies on the lanes' being consecutive, _check)
            with self._holding(LANES):
                return self._lane0(super().special(op))
        return super().special(op)

    def read(self, op, t):
        if isinstance(op, pir.Sym):
            # a variable's address, as FunctionLowering.symbol_address(window=True)
            return convert_bits(self.b, self.splat(self._symbol(op.name)), llvm_type(t))
        return super().read(op, t)

    def _symbol(self, name):
        """i64: a shared variable's offset in the shared window, or a global's address."""
        f = self.f
        shared = f.mc.shared_offset(f.pfn, name)
        if isinstance(shared, int):
            return i64(shared)
        if f.mc.global_symbol(name) is not None and name not in f.ptrs and name not in f.local_offsets:
            return self.b.ptrtoint(f.mc.global_symbol(name), I64)
        raise NotVectorisable(f"symbol {name}")

    # -------------------------------------------------------------- memory
    def addresses(self, op, space):
        """<32 x i64> addresses of a memory operand in state space `space` ('' = generic)."""
        b, f = self.b, self.f
        if not isinstance(op, pir.Addr):
            raise NotVectorisable(f"memory operand {op}")
        if op.base is None:
            addr = self.splat(i64(op.offset))
        elif isinstance(op.base, pir.Sym):
            name = op.base.name
            shared = isinstance(f.mc.shared_offset(f.pfn, name), int)
            addr = self.splat(b.add(self._symbol(name), i64(op.offset)))
            if shared and space != "shared":
                addr = b.add(addr, self.splat(self._shared_base()))     # its generic address
            elif not shared and space not in ("global", "const", ""):
                raise NotVectorisable(f"symbol {name} in .{space}")
        else:
            addr = register_address(b, self.read(op.base, f"b{self._bits(op.base.name)}"), op.offset)
        if space == "shared":
            addr = b.add(addr, self.splat(self._shared_base()))
        return addr

    def _shared_base(self):
        """i64: the block's shared window, loaded once per call: loaded where it is used, in a
        loop whose stores LLVM cannot tell apart from the header's (histogram's loop over the
        lanes' atomics) the load stayed in the loop, a third load per element."""
        if self._window is None:
            with at_function_start(self.b):
                self._window = load_field(self.b, self.header, abi.CTX["shared_base"], I64)
        return self._window

    def strided_address(self, op, space):
        """(lane 0's address, stride) of a memory operand in lockstep whose base register is
        strided; else None."""
        if not self.lockstep or self.lanes != LANES or not isinstance(op, pir.Addr):
            return None
        stride = 0
        if isinstance(op.base, pir.Reg):
            stride = self.strides.get(op.base.name) if op.base.name in self.scalars else None
            if stride is None or stride and self._bits(op.base.name) != 64:
                return None
        with self._lane_zero():
            return self.b.extract_element(self.addresses(op, space), i32(0)), stride

    def load_lanes(self, base, elem, size, count):
        """`count` vectors of the lanes' elements, lane l's `count` consecutive ones at base +
        l * count * size (ld.v2 / ld.v4 of consecutive lanes as one load); with a mask, one
        element each (the other lanes' are undefined and not read)."""
        b = self.b
        if self.mask is not None:
            return [self._masked_load(base, ir.VectorType(elem, LANES), size, self.mask)]
        wide = b.load(b.inttoptr(base, ir.VectorType(elem, LANES * count).as_pointer()), align=size)
        if count == 1:
            return [wide]
        return [b.shuffle_vector(wide, ir.Constant(wide.type, None),
                                 ir.Constant(ir.VectorType(I32, LANES), [lane * count + i for lane in range(LANES)]))
                for i in range(count)]

    def prefetch_ahead(self, address, nbytes, pos, write=False):
        """Where the access of `nbytes` from `address` (i64) at body position `pos` is in a loop
        of the region: a prefetch of where it will be PREFETCH_AHEAD iterations later, by the
        step its address took since the last one. A grid-stride loop's warp steps by the
        grid's width (64 KB in histogram), which no hardware prefetcher follows, and the
        warp waits for memory each iteration: histogram 71 -> 34-39 ms (NOTES.md).
        A store (`write`) is prefetched for writing, so that its line is owned before the
        store needs it (layernorm's output row: 0.89-0.91x the time), and only where its step
        is a constant: measuring a store's step cost scan 1.16x and softmax 1.05x its time."""
        if pos is None:
            return
        spans = [(head, back) for head, back in self._loop_spans() if head <= pos <= back]
        if not spans:
            return
        b = self.b
        constant = self._constant_step(pos, min(spans, key=lambda span: span[1] - span[0]))
        if write and constant is None:
            return
        if constant is not None:
            step = i64(constant)
        else:
            with at_function_start(b):
                slot = b.alloca(I64, name=f"last{pos}")
                b.store(i64(0), slot)
            self._step_slots.append(slot)
            last = b.load(slot)
            b.store(address, slot)
            step = b.select(b.icmp_unsigned("==", last, i64(0)), i64(0), b.sub(address, last))
        ahead = b.add(address, b.mul(step, i64(PREFETCH_AHEAD)))
        prefetch = declare(b.module, "llvm.prefetch.p0", ir.VoidType(), [PTR, I32, I32, I32])
        for line in range(0, nbytes, 64):
            # (read, locality 2: into L2, not L1, data). Into L1 (locality 3), each prefetch
            # held one of the core's few L1 miss buffers for a DRAM latency: reduce 4.3 ->
            # 3.4 ms with L2 (a C model of its warps' grid-stride loop: 4.1 -> 3.2 ms)
            b.call(prefetch, [b.inttoptr(b.add(ahead, i64(line)), PTR), i32(int(write)), i32(2), i32(1)])

    def _constant_step(self, pos, span):
        """The bytes by which the address of the access at `pos` steps per iteration of the
        loop `span` (head, back edge), where the loop moves its base register by one
        unguarded `add`/`sub` of an immediate (layernorm's row loops: 128 or 512); else
        None, and the step is measured as the region runs. Measured, it cost six
        instructions and a stack slot per load and iteration (layernorm's last row loop
        loads three rows: three times the loop's own work)."""
        body = self.f.pfn.body
        addr = next((op for op in body[pos].operands if isinstance(op, pir.Addr)), None)
        if addr is None or not isinstance(addr.base, pir.Reg):
            return None
        base = addr.base.name
        head, back = span
        writes = [body[p] for p in range(head, back + 1) if isinstance(body[p], pir.Instruction)
                  and base in dataflow.defs_uses(body[p])[0]]
        if len(writes) != 1:
            return None
        st = writes[0]
        if st.opcode not in ("add", "sub") or st.guard is not None or len(st.operands) != 3:
            return None
        _, src, amount = st.operands
        if not (isinstance(src, pir.Reg) and src.name == base and isinstance(amount, pir.Imm)
                and isinstance(amount.value, int)):
            return None
        return amount.value if st.opcode == "add" else -amount.value

    def gather(self, addrs, elem, size, flipped=False):
        """The lanes' elements at `addrs` (for the lanes in self.mask; others undefined): one
        vector load where they are consecutive, one element where they are alike (a block's
        total, a row's scale), else lane by lane. `flipped`: the addresses come from an xor,
        and may be a window's elements in the order lane ^ u (_xor_window), tried first."""
        b = self.b
        if self.lanes == 1:
            # (lockstep, an address alike in every lane)
            return self.splat(b.load(b.inttoptr(b.extract_element(addrs, i32(0)), elem.as_pointer()), align=size))
        vec = self._vec(elem)
        first = b.extract_element(addrs, i32(0))
        ways = [(lambda: self._consecutive(addrs, size), lambda: b.load(b.inttoptr(first, vec.as_pointer()), align=size)),
                (lambda: self._alike(addrs), lambda: self.splat(b.load(b.inttoptr(first, elem.as_pointer()), align=size)))]
        if flipped:
            holds, start, u = self._xor_window(addrs, size)
            ways.insert(0, (lambda: holds, lambda: self._permute_lanes(
                self._masked_load(start, vec, size, self._permute_lanes(self._lanes(), u)), u)))

        def by_lane():
            tmp = self._scratch(vec)
            elements = b.bitcast(tmp, elem.as_pointer())
            with self._each_lane_here(self._from_lane_array(addrs), elem, "ld.lane") as (lane, p):
                b.store(b.load(p, align=size), b.gep(elements, [lane]))
            return b.load(tmp)
        return self._first_way(ways, by_lane, "ld")

    def scatter(self, addrs, value, size, flipped=False):
        """Store the lanes' elements of `value` at `addrs`, for the lanes in self.mask (as
        gather: `flipped`, the addresses come from an xor)."""
        b = self.b
        elem = value.type.element
        first = b.extract_element(addrs, i32(0))
        ways = [(lambda: self._consecutive(addrs, size),
                 lambda: b.store(value, b.inttoptr(first, value.type.as_pointer()), align=size))]
        if flipped:
            holds, start, u = self._xor_window(addrs, size)
            ways.insert(0, (lambda: holds, lambda: self._masked_store(
                self._permute_lanes(value, u), start, size, self._permute_lanes(self._lanes(), u))))

        def by_lane():
            values = self.lane_array(value)
            with self._each_lane_here(self._from_lane_array(addrs), elem, "st.lane") as (lane, p):
                b.store(b.load(b.gep(values, [lane])), p, align=size)
        self._first_way(ways, by_lane, "st", loads=False)

    def _first_way(self, ways, otherwise, name, loads=True):
        """The first of `ways` ([(test, access)]: i1 and the access's code, each made when
        called) whose test holds, else `otherwise()`; for `loads`, the value of the access
        that ran."""
        b = self.b
        done = self.fn.append_basic_block(f"{name}.done")
        results = []
        for test, access in ways:
            yes, no = self.fn.append_basic_block(f"{name}.way"), self.fn.append_basic_block(f"{name}.other")
            b.cbranch(test(), yes, no)
            b.position_at_end(yes)
            results.append((access(), b.block))
            b.branch(done)
            b.position_at_end(no)
        results.append((otherwise(), b.block))
        b.branch(done)
        b.position_at_end(done)
        if not loads:
            return None
        v = b.phi(results[0][0].type)
        for value, blk in results:
            v.add_incoming(value, blk)
        return v

    def lane_addresses(self, op, space):
        """lane -> i64: that lane's address of memory operand `op` in state space `space`, for a
        loop over the lanes (_each_lane_here) that writes memory there: computed again in the
        loop where the lanes' values come from a vector load (lanereloads), else from a stack
        copy of the lanes' addresses."""
        b = self.b
        reload = self._reload(op.base, space) if isinstance(op, pir.Addr) else None
        if reload is not None:
            return lambda lane: self._reloaded(reload, lane, lambda: self.addresses(op, space))
        offsets = self._shared_offsets(op, space)
        if offsets is None:
            return self._from_lane_array(self.addresses(op, space))
        base, offset_of = self._shared_base(), self._from_lane_array(offsets)
        return lambda lane: b.add(base, b.zext(offset_of(lane), I64))

    def lane_operand(self, op, t, space):
        """lane -> that lane's value of operand `op` as type t, for a loop over the lanes that
        writes memory in `space`: one scalar where it is alike in every lane (histogram's
        `atomicAdd(&h[b], 1)`, where a load per lane from a stack copy was a third of the
        loop's loads), computed again in the loop where it comes from a vector load, else
        from a stack copy."""
        reload = self._reload(op, space)
        if reload is not None:
            return lambda lane: self._reloaded(reload, lane, lambda: self.read(op, t))
        v = self.read(op, t)
        if isinstance(v, ir.Constant) and isinstance(v.constant, list) and len({str(c) for c in v.constant}) == 1:
            return lambda lane: v.constant[0]
        return self._from_lane_array(v)

    def _reload(self, op, space):
        """The lanereloads.Reload of register operand `op` as the instruction being emitted
        reads it, in lockstep with every lane's register vectors (else None)."""
        if not (self.lockstep and self.lanes == LANES and isinstance(op, pir.Reg) and self.piece is not None):
            return None
        positions = self.piece.positions
        return lanereloads.find_reload(self.f.pfn.body, positions, positions.index(self.position), op.name,
                                       self.strides, space)

    def _reloaded(self, reload, lane, value):
        """The scalar of value() (a <1 x T> of registers read) where the registers of `reload`
        hold lane `lane`'s values, computed from its elements in memory."""
        body = self.f.pfn.body
        saved, self.mask, self.reloading = self.mask, None, {}
        try:
            with self._lane_zero():
                for pos in reload.positions:
                    if pos in reload.loads:
                        self._reload_element(body[pos], lane)
                    else:
                        self.op(body[pos].opcode)(self, body[pos])
                return self.b.extract_element(value(), i32(0))
        finally:
            self.mask, self.reloading = saved, None

    def _reload_element(self, st, lane):
        """Lane `lane`'s element of a load of one element per lane at lane 0's address + lane *
        size (lanereloads), into its register (the reload's values)."""
        b = self.b
        t, items, size = _elements(st, st.operands[0])
        first = b.extract_element(self.addresses(st.operands[1], space_of(st)), i32(0))
        at = b.add(first, b.mul(b.zext(lane, I64), i64(size)))
        self.write(items[0], self.splat(b.load(b.inttoptr(at, llvm_type(t).as_pointer()), align=size)), t)

    def _shared_offsets(self, op, space):
        """The lanes' <32 x i32> offsets in the shared window where a 32-bit register holds the
        address with no displacement (histogram's `atom.shared.add.u32 [%r22], 1`), else None.
        A loop over the lanes reads 4-byte offsets and adds the window's base: 7% less time per
        lane than 8-byte addresses in a C model of histogram's loop (0.48 against 0.52 ns)."""
        if space != "shared" or not isinstance(op, pir.Addr) or not isinstance(op.base, pir.Reg) or op.offset:
            return None
        if llvm_width(self._reg_type(op.base.name)) != 32:
            return None
        return self.read(op.base, "u32")

    def _from_lane_array(self, v):
        """lane -> that lane's element of vector v, from a stack copy."""
        elements = self.lane_array(v)
        return lambda lane: self.b.load(self.b.gep(elements, [lane]))

    @contextmanager
    def _each_lane_here(self, address_of, elem, name):
        """A loop over the lanes an access is for (_lanes), giving (lane, its element pointer
        address_of(lane)). It stays a loop: unrolled 32 times over, the slow paths of every
        access made most of a region's code (and compile time). And a scalar loop:
        vectorised, it became four masked scatters of eight lanes for layernorm's store of
        one lane (`if (lane == 0) mean[row] = m`); a loop over the mask's set bits instead
        made histogram's atomics, where every lane runs, 8% slower (the counted loop's lane
        test folds away there)."""
        b = self.b
        here = b.bitcast(self._lanes(), I32)
        with for_range(b, i32(0), i32(LANES), name) as lane:
            with b.if_then(b.trunc(b.lshr(here, lane), I1)):
                yield lane, b.inttoptr(address_of(lane), elem.as_pointer())
            latch = b.block
        set_loop_hints(b.module, latch.terminator, {"llvm.loop.unroll.disable": None, "llvm.loop.vectorize.enable": False})

    def lane_array(self, v):
        """Pointer to the elements of vector v in a stack slot, for a loop over the lanes: an
        element taken by a varying index is a store of the whole vector each time (eight
        256-bit stores per lane in histogram's atomics)."""
        slot = self._scratch(v.type)
        self.b.store(v, slot)
        return self.b.bitcast(slot, v.type.element.as_pointer())

    def _consecutive(self, addrs, size):
        """i1: every lane is here and lane l's address is lane 0's plus l * size."""
        b = self.b
        start = self.splat(b.extract_element(addrs, i32(0)))
        steps = ir.Constant(self._vec(I64), [lane * size for lane in range(LANES)])
        return self._every_lane(b.icmp_unsigned("==", addrs, b.add(start, steps)))

    def flipped(self, op) -> bool:
        """Whether memory operand `op`'s address is computed from an xor (gather's `flipped`)."""
        if not isinstance(op, pir.Addr) or not isinstance(op.base, pir.Reg):
            return False
        return _computed_by(op.base.name, "xor", self.f.pfn.body, self._definitions())

    def _definitions(self) -> dict:
        """dataflow.definition_positions of the kernel's body, found once."""
        if self._defs is None:
            self._defs = self.f.analysed("definition_positions", lambda: dataflow.definition_positions(self.f.pfn.body))
        return self._defs

    def _xor_window(self, addrs, size):
        """(i1 holds, i64 start, i64 u): the 32 addresses are the elements of one window of 32
        from `start`, lane l's the window's element l ^ u (a butterfly's partners in one warp,
        bitonic sort's `data[i ^ j]` for j < 32, an xor-swizzled tile). The window is the
        aligned one around lane 0's address (an array from cudaMalloc is aligned, and a
        warp's indices start at a multiple of 32; the least of the 32 addresses, a reduction,
        cost as much as the access), u lane 0's element in it; the check is over every lane,
        so that a lane outside the mask holding another address sends the access lane by
        lane."""
        b = self.b
        shift = size.bit_length() - 1
        first = b.extract_element(addrs, i32(0))
        start = b.and_(first, i64(-LANES * size))
        u = b.lshr(b.sub(first, start), i64(shift))
        lanes = ir.Constant(self._vec(I64), list(range(LANES)))
        expected = b.add(self.splat(start), b.shl(b.xor(lanes, self.splat(u)), self.splat(i64(shift))))
        return self._reduce("and", b.icmp_unsigned("==", addrs, expected), I1), start, u

    def _permute_lanes(self, v, u):
        """Vector v with lane l holding v's lane l ^ u (u < 32): a fixed swap of lanes for each
        bit of u, chosen by that bit. (The permutation is its own inverse: a store permutes
        its values and mask by it too.)"""
        b = self.b
        for bit in range(LANES.bit_length() - 1):
            swapped = b.shuffle_vector(v, ir.Constant(v.type, None),
                                       ir.Constant(ir.VectorType(I32, LANES), [lane ^ (1 << bit) for lane in range(LANES)]))
            on = b.icmp_unsigned("!=", b.and_(u, i64(1 << bit)), i64(0))
            v = b.select(on, swapped, v)
        return v

    def _masked_load(self, start, vec, size, mask):
        """Vector type `vec`'s elements from address `start` (i64) where `mask` holds (others
        undefined; none read)."""
        fn = declare(self.b.module, f"llvm.masked.load.v{LANES}{_suffix(vec.element)}.p0", vec,
                     [vec.as_pointer(), I32, mask.type, vec])
        return self.b.call(fn, [self.b.inttoptr(start, vec.as_pointer()), i32(size), mask, ir.Constant(vec, None)])

    def _masked_store(self, value, start, size, mask):
        """Vector `value`'s elements to address `start` (i64) where `mask` holds."""
        fn = declare(self.b.module, f"llvm.masked.store.v{LANES}{_suffix(value.type.element)}.p0", ir.VoidType(),
                     [value.type, value.type.as_pointer(), I32, mask.type])
        return self.b.call(fn, [value, self.b.inttoptr(start, value.type.as_pointer()), i32(size), mask])

    def _alike(self, addrs):
        """i1: every lane is here and has lane 0's address."""
        b = self.b
        return self._every_lane(b.icmp_unsigned("==", addrs, self.splat(b.extract_element(addrs, i32(0)))))

    def _every_lane(self, holds):
        """i1: every lane is here (an access for all of them) and `holds` (<32 x i1>) for each."""
        b = self.b
        return b.and_(self._reduce("and", holds, I1), self._reduce("and", self._lanes(), I1))

    def _lanes(self):
        """The lanes an access is for: self.mask, or all of them (a recomputed definition)."""
        return self.mask if self.mask is not None else self._all_lanes()

    def _all_lanes(self):
        return ir.Constant(self._vec(I1), [1] * LANES)

    def _scratch(self, ty):
        with at_function_start(self.b):
            return self.b.alloca(ty)


def _bits_of(b, v):
    """An integer view of vector v, to compare bit patterns (floats, NaNs included)."""
    if isinstance(v.type.element, ir.IntType):
        return v
    return b.bitcast(v, ir.VectorType(ir.IntType(llvm_width(v.type.element)), v.type.count))


def _suffix(elem):
    return f"i{elem.width}" if isinstance(elem, ir.IntType) else {"float": "f32", "double": "f64"}[str(elem)]


# ---------------------------------------------------------------------- instructions in a region
# Each mirrors compiler/ops/instructions.py for the forms it accepts.

def _elements(st, data_op):
    """(type, data operands, element size) of a ld or st that a region takes."""
    ts = type_mods(st.mods)
    if not ts or set(st.mods) & ORDERED_MODS:
        raise NotVectorisable(f"{st.opcode} {st.mods}")
    t = ts[-1]
    items = data_op.items if isinstance(data_op, pir.Vec) else [data_op]
    size = max(width(t) // 8, 1)
    return t, items, size


def _ld(w, st):
    t, items, size = _elements(st, st.operands[0])
    f, b = w.f, w.b
    if f.is_kernel_param(st.operands[1]):
        off = f.kernel_param_offset(st.operands[1])
        for i, item in enumerate(items):
            p = b.bitcast(b.gep(w.params, [i64(off + i * size)]), llvm_type(t).as_pointer())
            w.write(item, w.splat(b.load(p, align=size)), t)
        return
    space = space_of(st)
    if not f.parallel_space(space):
        raise NotVectorisable(f"ld in .{space or 'generic'}")
    strided = w.strided_address(st.operands[1], space)
    if strided is not None and strided[1] == size * len(items) and (w.mask is None or len(items) == 1):
        w.prefetch_ahead(strided[0], size * len(items) * LANES, w.position)
        for item, v in zip(items, w.load_lanes(strided[0], llvm_type(t), size, len(items))):
            w.write(item, v, t)
        return
    addrs = w.addresses(st.operands[1], space)
    flipped = w.flipped(st.operands[1])
    for i, item in enumerate(items):
        at = b.add(addrs, w.splat(i64(i * size))) if i else addrs
        w.write(item, w.gather(at, llvm_type(t), size, flipped), t)


def _st(w, st):
    t, items, size = _elements(st, st.operands[1])
    space = space_of(st)
    if not w.f.parallel_space(space):
        raise NotVectorisable(f"st in .{space or 'generic'}")
    b = w.b
    strided = w.strided_address(st.operands[0], space)
    if strided is not None and strided[1] == size and len(items) == 1:
        value = w.read(items[0], t)
        streams = w.f.streams(st)
        with streamstores.unless_streaming(b) if streams else nullcontext():
            w.prefetch_ahead(strided[0], size * LANES, w.position, write=True)
        if w.mask is None:
            store = b.store(value, b.inttoptr(strided[0], value.type.as_pointer()), align=size)
            return streamstores.mark(b.module, store) if streams else store
        return w._masked_store(value, strided[0], size, w.mask)
    addrs = w.addresses(st.operands[0], space)
    flipped = w.flipped(st.operands[0])
    for i, item in enumerate(items):
        at = b.add(addrs, w.splat(i64(i * size))) if i else addrs
        w.scatter(at, w.read(item, t), size, flipped)


def _cvta(w, st):
    t = warpruns._type(st, {"u32", "u64"})
    if isinstance(st.operands[1], pir.Sym):
        raise NotVectorisable("cvta of a symbol")
    v = w.read(st.operands[1], "u64")
    if "shared" in [m.split("::")[0] for m in st.mods]:
        base = w.splat(w._shared_base())
        v = w.b.sub(v, base) if "to" in st.mods else w.b.add(v, base)
    elif not {"global", "const", "param"} & set(st.mods):
        raise NotVectorisable(f"cvta {st.mods}")
    w.write(st.operands[0], v, t)


_CVT_INTS, _CVT_FLOATS = INT_TYPES | {"b16", "b32", "b64", "u8", "s8", "b8"}, {"f32", "f64"}


def _cvt_form(st):
    """(destination type, source type, rounding modifier or None) of a cvt that _cvt takes,
    else None: known before a region is emitted (WarpRegion.takes), so that a region that
    meets another is not made up to there first."""
    ts = type_mods(st.mods)
    if not ts:
        return None
    dst, src = ts[0], ts[-1]
    rnd = next((m for m in st.mods if m in ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi")), None)
    ints, floats = _CVT_INTS, _CVT_FLOATS
    if (dst in ints and src in ints and rnd is None
            or dst in floats and src in ints and rnd in (None, "rn")
            or (dst, src) == ("f64", "f32") and rnd is None
            or (dst, src) == ("f32", "f64") and rnd in (None, "rn")):
        return dst, src, rnd
    return None


def _cvt(w, st):
    """Integer to integer, integer to float (round to nearest) and float widening or
    narrowing (to nearest): floatops.cvt's forms without saturation or directed rounding."""
    form = _cvt_form(st)
    if form is None:
        raise NotVectorisable(f"cvt {st.mods}")
    dst, src, rnd = form
    ints, floats = _CVT_INTS, _CVT_FLOATS
    b = w.b
    v = w.read(st.operands[1], src)
    if dst in ints and src in ints and rnd is None:
        to = w._vec(ir.IntType(width(dst)))
        if width(src) > width(dst):
            v = b.trunc(v, to)
        elif width(src) < width(dst):
            v = b.sext(v, to) if src.startswith("s") else b.zext(v, to)
    elif dst in floats and src in ints and rnd in (None, "rn"):
        to = w._vec(llvm_type(dst))
        v = b.sitofp(v, to) if src.startswith("s") else b.uitofp(v, to)
    elif (dst, src) == ("f64", "f32") and rnd is None:
        v = b.fpext(v, w._vec(llvm_type(dst)))
    elif (dst, src) == ("f32", "f64") and rnd in (None, "rn"):
        v = b.fptrunc(v, w._vec(llvm_type(dst)))
    else:
        raise NotVectorisable(f"cvt {st.mods}")
    w.write(st.operands[0], v, dst)


def _mul(w, st):
    if "wide" not in st.mods:
        return warpruns.VECTOR_OPS["mul"](w, st)
    t = warpruns._type(st, {"u16", "s16", "u32", "s32"})
    a, c = (w.read(op, t) for op in st.operands[1:])
    b = w.b
    wide = w._vec(ir.IntType(2 * width(t)))
    ext = b.sext if t.startswith("s") else b.zext
    w.write(st.operands[0], b.mul(ext(a, wide), ext(c, wide)), t[0] + str(2 * width(t)))


def _rounding(st):
    return next((m for m in st.mods if m in ("rn", "rz", "rm", "rp", "approx", "full")), "rn")


def _div(w, st):
    """div.rn and div.full of floats: one IEEE division (floatops.div)."""
    t = warpruns._type(st, FLOAT_TYPES)
    if _rounding(st) not in ("rn", "full"):
        raise NotVectorisable(f"div {st.mods}")
    a, c = (w.read(op, t) for op in st.operands[1:])
    w.write(st.operands[0], w.b.fdiv(a, c), t)


def _root_or_reciprocal(w, st):
    """rcp.rn, sqrt.rn / .approx, rsqrt.approx of floats, as floatops.unary computes them."""
    t = warpruns._type(st, FLOAT_TYPES)
    mode = _rounding(st)
    x = w.read(st.operands[1], t)
    b = w.b
    one = w.splat(ir.Constant(llvm_type(t), 1.0))
    sqrt = lambda v: b.call(declare(b.module, f"llvm.sqrt.v{v.type.count}{t}", v.type, [v.type]), [v])
    if st.opcode == "rcp" and mode == "rn":
        v = b.fdiv(one, x)
    elif st.opcode == "sqrt" and mode in ("rn", "approx"):
        v = sqrt(x)
    elif st.opcode == "rsqrt" and mode == "approx":
        v = b.fdiv(one, sqrt(x))
    else:
        raise NotVectorisable(f"{st.opcode} {st.mods}")
    w.write(st.operands[0], v, t)


def _neg_abs(w, st):
    """neg and abs of integers and floats (instructions.abs_neg without ftz)."""
    t = warpruns._type(st, INT_TYPES | FLOAT_TYPES)
    a = w.read(st.operands[1], t)
    b = w.b
    if t in FLOAT_TYPES:
        v = b.fneg(a) if st.opcode == "neg" else \
            b.call(declare(b.module, f"llvm.fabs.v{a.type.count}{t}", a.type, [a.type]), [a])
    elif st.opcode == "neg":
        v = b.neg(a)
    else:
        v = b.select(b.icmp_signed("<", a, ir.Constant(a.type, None)), b.neg(a), a)
    w.write(st.operands[0], v, t)


def _atom(w, st):
    """atom and red of the operations atomicrmw has, and cas: lane after lane in lane order,
    each lane's update as atomics.lower_atomic makes it (a plain update in the block's own
    shared memory, which only this CPU thread touches). Lanes' atomics in some order is
    what a GPU gives too."""
    ops = st.operands if st.opcode == "atom" else (None,) + tuple(st.operands)
    op, ts = atomics.operation(st), type_mods(st.mods)
    t = ts[-1] if ts else None
    kind = atomics.rmw_kind(op, t) if op != "cas" else "cas"
    if kind is None or t not in INT_TYPES | FLOAT_TYPES | {"b32", "b64"} or {"v2", "v4", "v8"} & set(st.mods):
        raise NotVectorisable(f"{st.opcode} {st.mods}")
    if kind in ("xchg", "cas"):
        t = f"b{width(t)}"                      # bits, as lower_atomic exchanges them
    flush = None
    if kind == "fadd" and t == "f32":
        flush = atomics.flushes_subnormals(st)
        if flush is None:
            raise NotVectorisable("generic add.f32: where each lane's address points decides whether subnormals flush")
    b, private = w.b, atomics.block_private(st)
    atomics.fence_before_release(b, st)
    elem = llvm_type(t)
    space = space_of(st)
    address_of = w.lane_addresses(ops[1], space)
    values = [w.lane_operand(op, t, space) for op in ops[2:]]
    old = b.bitcast(w._scratch(w._vec(elem)), elem.as_pointer())

    # a loop over the lanes: 32 unrolled copies, each lane's address extracted from the
    # vector, ran 4x slower on an AVX-512 EPYC (histogram 3.0 -> 0.76 ns per element, one
    # worker) for 10% they gained on a Zen 3 (NOTES.md)
    with w._each_lane_here(address_of, elem, st.opcode) as (lane, p):
        v = [value(lane) for value in values]
        got = atomics.compare_and_swap(b, private, p, *v) if kind == "cas" else atomics.rmw(b, private, kind, p, v[0], flush)
        b.store(got, b.gep(old, [lane]))
    if ops[0] is not None:
        w.write(ops[0], b.load(b.bitcast(old, w._vec(elem).as_pointer())), t)


REGION_OPS = {"ld": _ld, "st": _st, "cvta": _cvta, "cvt": _cvt, "mul": _mul, "div": _div,
              "rcp": _root_or_reciprocal, "sqrt": _root_or_reciprocal, "rsqrt": _root_or_reciprocal,
              "neg": _neg_abs, "abs": _neg_abs, "atom": _atom, "red": _atom}


class EntryRegion(WarpRegion):
    """A kernel from its start, as one vector program per warp until each lane stops: the
    block function calls it for each warp of a block of full warps, in place of the first
    round over the block's threads (compiler/simt/blockfunction.py).

    Run thread after thread, such a kernel's loop (scan's `for (k = threadIdx.x; k < 1024;
    k += blockDim.x)`) is a loop inside the loop over threads, which LLVM does not vectorise:
    each thread walks its elements alone. As a region, the warp's lanes step through the
    loop together, their neighbouring elements one vector access."""

    def __init__(self, f, name, constants):
        super().__init__(f, -1, name, constants)        # the first piece starts at position 0
        # in a kernel without sites the block function can run a warp's threads itself
        # (bitonic sort's partners in the same warp fail the flipped form's check at once:
        # outside lockstep the region ran 8x slower than the threads one by one; a region
        # for such partners takes them instead, where it is made: emit_entry_region)
        self.bails = not f.sites
        # and reads no stop codes there (every lane exits: blockfunction.emit_block_function):
        # storing them anyway, 128 bytes per warp into a stack array, cost bitonic sort 6%
        # (0.93-0.945x the time without)
        self.stores_codes = bool(f.sites)

    def _begin(self, body):
        pass

    def flips_stores(self) -> bool:
        """Whether the kernel stores, under a branch of its threads' own, through an index
        flipped by an xor (bitonic sort's `data[i ^ j]`). Run thread after thread, LLVM
        vectorises such a store as one branch per lane; in lockstep it is one masked vector
        store where the flipped bits leave a warp's 32 indices consecutive
        (laneshapes.FLIPPED)."""
        body = self.f.pfn.body
        try:
            pieces = self.pieces()
        except NotVectorisable:
            return False
        defs = self._definitions()
        skipped = set()
        for piece in pieces.values():
            for p in piece.positions:
                st = body[p]
                if st.opcode == "bra" and st.guard is not None and p not in self.f.known_branches \
                        and self._target(st) > p and piece.next in pieces:
                    skipped |= set(pieces[piece.next].positions)
        return any(body[p].opcode == "st" and isinstance(body[p].operands[0], pir.Addr)
                   and isinstance(body[p].operands[0].base, pir.Reg)
                   and _computed_by(body[p].operands[0].base.name, "xor", body, defs) for p in skipped)

    def _written_at_start(self) -> set:
        return set()

    def _start_values(self, names) -> dict:
        return {}


class BarrierRegion(WarpRegion):
    """The region of a block barrier that every thread leaves together (`bar.sync` of a
    constant id and no thread count): called for each warp of a block of full warps once all
    its threads have arrived, in place of the round that would run them on one by one. Run
    thread after thread, a loop after a barrier (histogram's loop over its bytes, each an
    atomic add to the block's bins) sits inside the loop over threads and runs each
    thread's iterations alone."""

    def _begin(self, body):
        pass                                    # a barrier has no results


def _plain_barrier(st) -> bool:
    """bar.sync / barrier.sync of the whole block (not red, arrive, or a warp's)."""
    return st.opcode in ("bar", "barrier") and not ({"red", "warp", "arrive"} & set(st.mods))


def emit_entry_region(f) -> dict:
    """{0: region function} for a kernel without sites lowered by `f` whose threads loop, or
    store through a partner's index under a branch (EntryRegion); {} for another, or one
    with an instruction a region does not take."""
    constants = uniformity.constant_registers(f.pfn.body)
    code = EntryRegion(f, f"{f.fn.name}.region0", constants)
    flips = code.flips_stores()
    if flips:
        # where the partners are in the same warp (the flipped check fails), a region that
        # holds the partners' indices as vectors and accesses them as a permuted window
        partners = EntryRegion(f, f"{f.fn.name}.partners", constants)
        partners.flips = False
        partners = _looping_region(partners, True)
        code.partners = partners.fn if partners else None
    code = _looping_region(code, flips)
    return {0: code.fn} if code else {}


def _computed_by(reg, opcode, body, defs) -> bool:
    """Whether an instruction of `opcode` is among those register `reg` is computed from."""
    seen, todo = set(), [reg]
    while todo:
        r = todo.pop()
        if r in seen:
            continue
        seen.add(r)
        for p in defs.get(r, ()):
            if body[p].opcode == opcode:
                return True
            todo.extend(dataflow.defs_uses(body[p])[1])
    return False


def _looping_region(code, anyway=False):
    """`code` with its region function made, if the lanes may loop in it (or `anyway`);
    else None (and the function left unused)."""
    try:
        if not (anyway or code.has_loop()):
            # without a loop the loop over threads vectorises the code as it is (and a run's
            # tail up to a barrier, softmax's and scan's, as fast after the run's advance
            # function), and compiles faster
            raise NotVectorisable("no loop")
        code.emit()
        return code
    except NotVectorisable:
        _unused(code)
        return None


def _unused(code):
    """A region function not made: internal and never called, LLVM deletes it."""
    code.fn.blocks.clear()
    code.b = ir.IRBuilder(code.fn.append_basic_block("unused"))
    code._return(RAN)


def emit_regions(f) -> dict:
    """{site of a fixed shuffle or a barrier: region function} for the kernel lowered by `f`,
    and {0: its entry region} where its threads loop before they first stop (layernorm's
    first row loop, before its first shuffle)."""
    body = f.pfn.body
    constants = uniformity.constant_registers(body)
    entry = _looping_region(EntryRegion(f, f"{f.fn.name}.region0", constants))
    regions = {0: entry.fn} if entry else {}
    covered = entry.reached if entry else set()
    # only where a run of shuffles starts: the lanes of a warp all wait there after the code
    # before it, and the run's inner shuffles are the region's own (each region is as large
    # as all the code it may reach: one per shuffle made layernorm's compile 15x longer)
    for run in warpruns.find_runs(body, constants):
        pos, site = run[0], f.site_at.get(run[0])
        if site is None or pos in covered:
            # (a run an earlier region reaches: its warps come there inside that region)
            continue
        code = _looping_region(WarpRegion(f, pos, f"{f.fn.name}.region{site}", constants))
        if code:
            regions[site] = code.fn
            covered |= code.reached
    # and after each barrier that the threads leave together, where they loop before they
    # stop again
    for pos, st in enumerate(body):
        site = f.site_at.get(pos)
        if site is None or not _plain_barrier(st) or st.guard is not None or len(st.operands) != 1 \
                or not isinstance(st.operands[0], pir.Imm):
            continue
        code = _looping_region(BarrierRegion(f, pos, f"{f.fn.name}.region{site}", constants))
        if code:
            regions[site] = code.fn
    return regions
