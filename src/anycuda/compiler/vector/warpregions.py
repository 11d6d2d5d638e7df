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
block-stride loop, histogram's loop of atomic adds). Not where each thread walks through
memory of its own (a thread per CSR row: analysis/walks.py): side by side, the lanes' loads
are gathers from 32 places at once, and thread after thread one stream each. A strided load
in a region's loop is prefetched some iterations ahead (prefetch_ahead).

Only instructions with a vector form that handles all their modifiers are taken (TAKES:
warpruns.VECTOR_MODS and the memory, conversion and division forms of regionops.REGION_MODS;
atomics go lane after lane); a region that could reach another one, or a stop it cannot leave
a lane at (a barrier with register operands, a vote), is not made, and the warp goes through
the rounds as before.

WarpRegion is written in parts: this module (what a region takes, its pieces and masks, its
turns and stops, registers in slots), lockstep.py (the code a warp runs together),
regionmemory.py (how its lanes reach memory) and regionops.py (the instructions it handles
itself).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..analysis import dataflow, gridstride, memory, suspensions, uniformity, walks
from ..irutil import convert_bits, declare, i32, i64, intrinsic_suffix
from ..ops.instructions import compare, compare_op
from ..ops.table import takes
from ..types import I1, I32, I64, PTR, llvm_type, llvm_width, type_mods, width
from . import laneshapes, warpruns
from .lockstep import Lockstep
from .regiondivisors import RegionDivisors
from .regionmemory import RegionMemory
from .regionops import REGION_MODS, REGION_OPS, cvt_form
from .warpruns import INT_TYPES, LANES, VECTOR_MODS, NotVectorisable, WarpCode, fixed_shuffle

DONE = 0x7FFFFFFF                   # a lane's program counter once it has stopped
RAN, NOT_RUN, TURNED = abi.REGION_RAN, abi.REGION_NOT_RUN, abi.REGION_TURNED
# rows of memory a grid-stride loop's warp reads per turn, of all its buffers together: a
# loop over one buffer runs 4 iterations a turn, over two 2, over three or more 1
# (turn_iterations). Rows lie a power of two apart (2^18 elements on 1,024 blocks of 256)
# and share a cache set; with the rows prefetched for the next turn, 4 rows of each of two
# buffers overfilled an 8-way set: on a Zen 3, triad_f32_stride 18.6 -> 13.9 ms with turns of
# 1 iteration, copy_f16_stride 9.8 -> 6.4 with turns of 2, while the reduction (one buffer, a
# larger state stored at each turn) went 4.8 -> 7.7 with turns of 1 (NOTES "Turns by buffers")
TURN_ROWS = 4
MAX_TURN_BYTES = 2048               # the most state a warp may leave between turns (stack space)
_ORDERINGS = frozenset(("lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"))
# the modifiers of the instructions a region takes: its own forms' and a run's
TAKES = {**VECTOR_MODS, **REGION_MODS}
_PLAIN_BARRIER = frozenset(("cta", "sync", "aligned"))      # where a lane may stop (_check_stop)


@dataclass
class Piece:
    """Straight-line code a lane runs from `start`: the positions of its instructions (a
    branch or exit only last), then position `next` when it falls through (None: it does not).
    A stop is a piece of its own (`stop` True)."""
    start: int
    positions: list
    next: int | None
    stop: bool = False


class WarpRegion(Lockstep, RegionMemory, RegionDivisors, WarpCode):
    """The region function of the fixed shuffle at body position `first`: `i32 (i8* spill,
    i8* header, i8* ws, i64 fsize, i32 lo, i8* params, i32* codes, i8* turn)` for the warp
    whose first thread is `lo`, called after the scheduler resolved that shuffle for the
    warp; it answers abi.REGION_RAN, _NOT_RUN or _TURNED (`turn`: the warp's turn area).

    ~620 lines here, with its parts Lockstep and RegionMemory beside it: one class because
    all of them emit into one function through one builder over one state (the lanes' mask
    and program counters, the registers' slots, the strided registers' scalars)."""

    ARG_TYPES = WarpCode.ARG_TYPES + (PTR, I32.as_pointer(), PTR)
    RETURNS = I32

    def __init__(self, f, first, name, constants):
        super().__init__(f, [first], name, constants)
        self.params, self.codes, self.turn = self.fn.args[5:]
        self.fn.turn_bytes = 0        # the state a warp leaves between turns (0: it runs whole)
        self._step_slots = []         # prefetch_ahead's slots of a load's last address
        self._round_sites = {}        # body position -> its rounds' counts (_round_site)
        self._counts = None           # _pass_counts
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
        self.divisors = frozenset()   # registers a strided value's division keeps its stride by (use_divisors)
        self._divisor_definitions = {}  # their definitions (divisor_parameters)
        self.plain = None             # a region without those forms, called where a divisor is too small
        self.position = None          # the body position of the instruction being emitted
        self.piece = None             # the piece being emitted
        self.reloading = None         # register -> its <1 x T> value, while a lane reload runs
        self._window = None           # _shared_base's value
        self._defs = None             # dataflow.definition_positions of the body (_definitions)
        self.stores_codes = True      # the lanes' stop codes go to codes[lo ...] when all have stopped
        self._live = None
        self._reciprocals = {}        # divisor -> the slots of remembered_reciprocal
        self._from_quotients = None   # the registers computed from a strided quotient (_walks_rows)

    # -------------------------------------------------------------- what a region takes
    def takes(self, st) -> bool:
        """Whether the region has a vector form for `st`, which handles all its modifiers
        (TAKES); one it does not take leaves the warp to the rounds."""
        if not isinstance(st, pir.Instruction) or not takes(TAKES, st):
            return False
        return st.opcode != "cvt" or cvt_form(st) is not None

    def op(self, opcode):
        return REGION_OPS.get(opcode) or warpruns.VECTOR_OPS[opcode]

    def pieces(self) -> dict:
        """{start: Piece} of all the code a lane may run from the region's start, checked
        (found once)."""
        if self._pieces is not None:
            return self._pieces
        body = self.f.pfn.body
        # the same for every region of the function (its registers' widths, its constants)
        self.strides = self.f.analysed(("lane_strides", self.flips, self.divisors), lambda: laneshapes.lane_strides(
            body, self._bits, self.constants, self.flips, self.divisors))
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
        return laneshapes.instruction_stride(st, self.strides, self._bits, self.constants, self.flips,
                                             self.divisors)[1]

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
        if self.plain is not None:
            self._plain_where_divisors_small()
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
                    turn_go[start] = self._count_turn(self.turn_iterations(start))
                m = None if lockstep else b.load(self.some_mask)
                (self._emit_stop if piece.stop else self._emit_piece)(piece, m)
        self.lockstep = False
        if turn_points:
            self._emit_turns(turn_points, turn_go, resume)
        b.position_at_end(self.finish)
        self._leave()
        self.save_round_counts()
        self._return(RAN)
        # called once per warp: a call costs nothing there, and the block function it would
        # be inlined into is large already (layernorm's cold compile 4.1 -> 2.9 s)
        self.fn.attributes.add("noinline")
        if self.plain is not None:
            # (the block function keeps room for the turn state of whichever region runs)
            self.fn.turn_bytes = max(self.fn.turn_bytes, self.plain.turn_bytes)
        return self.fn

    # -------------------------------------------------------------- turns
    # A grid-stride loop's warp steps by the grid's width: run a warp's whole loop at a time,
    # each warp reads a column of the grid's rows, 128 bytes per row, and the memory serves
    # such columns at less than half its speed (benchmarks/models/grid_stride_order.c: reduce's
    # order 2.2-2.4 ms, the block's warps in turns of 4-8 iterations 1.05-1.15 ms, C's
    # sequential order 0.64-1.2). With turns, the block function calls the region of each warp
    # again until none gives way: a warp in lockstep at the loop's back edge leaves the
    # registers live there in its turn state (the pointer `turn`, whose first i32 says where
    # it resumes: 0 at its start) after turn_iterations iterations and answers TURNED. In
    # lockstep every lane runs: no lane has stopped, and their counters are all there.

    def _turn_points(self) -> list:
        """The pieces that start at the yield before a grid-stride loop's back edge (only
        kernels with sites have yields: gridstride.grid_stride_yields)."""
        body, pieces = self.f.pfn.body, self.pieces()
        # (a piece may start at the body's end: a kernel whose last instruction is a branch)
        return [start for start in sorted(pieces) if start < len(body) and isinstance(body[start], pir.Instruction)
                and suspensions.is_yield(body[start])
                and any(body[p].opcode == "bra" and body[p].guard is None and self._target(body[p]) < p
                        for p in pieces[start].positions)]

    def _turn_state(self, live) -> tuple:
        """([(slot, offset, alignment)], bytes) of what a warp leaves between turns at a back
        edge where `live` are live: lane 0 of strided registers, the vectors of others, the
        last addresses of the loads prefetch_ahead measures. The resume number is at offset 0."""
        slots = [self.scalars[r] if r in self.scalars else self.slots[r] for r in sorted(live) if r in self.slots]
        state, offset = [], max(64, (self.round_counts_bytes() + 63) // 64 * 64)
        # (and the reciprocals of the divisors: made again at each turn, a double division and a
        # rounding, they were a tenth of broadcast_stride's time)
        reciprocals = [slot for pair in self._reciprocals.values() for slot in pair]
        for slot in slots + self._step_slots + reciprocals:
            ty = slot.type.pointee
            size = max(llvm_width(ty.element) * ty.count // 8, 1) if isinstance(ty, ir.VectorType) else 8
            align = min(size, 64)
            offset = (offset + align - 1) // align * align
            state.append((slot, offset, align))
            offset += size
        return state, offset

    def turn_iterations(self, start) -> int:
        """Iterations a turn of the grid-stride loop at turn point `start` runs (the innermost
        loop around it): TURN_ROWS rows of all the buffers the loop walks together."""
        spans = [(h, e) for h, e in self._loop_spans() if h <= start <= e]
        if not spans:
            return TURN_ROWS
        head, back = min(spans, key=lambda span: span[1] - span[0])
        _, _, roots = self.f.memory_read()
        buffers = memory.buffers_walked(self.f.pfn.body, head, back + 1, roots, self._walks_rows)
        return max(1, TURN_ROWS // max(buffers, 1))

    def _count_turn(self, iterations):
        """At a turn point in lockstep: give way after `iterations` iterations; the block
        where the warp goes on (and where it resumes)."""
        b = self.b
        count = b.add(b.load(self.turn_count), i32(1))
        b.store(count, self.turn_count)
        give_way, go = self.fn.append_basic_block("turn.end"), self.fn.append_basic_block("turn.go")
        b.cbranch(b.icmp_unsigned(">=", count, i32(iterations)), give_way, go)
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
            self.save_round_counts()
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
        ts, cmp = type_mods(setp.mods), compare_op(setp)
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
        ends = compare(self, cmp, t, *first), compare(self, cmp, t, *last)
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

    def _return(self, answer):
        self.b.ret(i32(answer))

    def _bits(self, name):
        return llvm_width(self._reg_type(name))

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
        fn = declare(self.b.module, f"llvm.vector.reduce.{kind}.v{v.type.count}{intrinsic_suffix(elem)}", elem, [v.type])
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
        self.takes_turns = not f.sites   # at its grid-stride loops' heads (_turn_points)

    def _turn_points(self) -> list:
        """In a kernel without sites (no yields), the heads of its grid-stride loops: a warp in
        lockstep gives way there every turn_iterations iterations, as at a yield. Run whole,
        each warp of saxpy's grid-stride loop read 128 bytes per row of the grid, rows 1 MB
        apart (1.4-1.6x the time of an OpenMP loop in f32; f64's 256 bytes, 0.6-0.8x)."""
        if not self.takes_turns:
            return super()._turn_points()
        f = self.f
        body, pieces = f.pfn.body, self.pieces()
        loops = gridstride.grid_stride_loops(body, f.branch_targets, f.mc.kernel_params(f.pfn))
        return sorted({self._target(body[p]) for p in loops} & set(pieces))

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
                   and dataflow.computed_by(body[p].operands[0].base.name, "xor", body, defs) for p in skipped)

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
    return st.opcode in ("bar", "barrier") and set(st.mods) <= _PLAIN_BARRIER


def emit_entry_region(f) -> dict:
    """{0: region function} for a kernel without sites lowered by `f` whose threads loop, or
    store through a partner's index under a branch (EntryRegion); {} for another, or one
    with an instruction a region does not take."""
    constants = uniformity.constant_registers(f.pfn.body)
    code = EntryRegion(f, f"{f.fn.name}.region0", constants)
    flips = code.flips_stores()
    if not flips and walks.threads_walk_alone(f.pfn.body, f.mc.kernel_params(f.pfn)):
        # each thread's loop reads a run of its own: one stream thread after thread, where a
        # warp's lanes side by side gathered from 32 (analysis/walks.py)
        _unused(code)
        return {}
    if flips:
        # where the partners are in the same warp (the flipped check fails), a region that
        # holds the partners' indices as vectors and accesses them as a permuted window
        partners = EntryRegion(f, f"{f.fn.name}.partners", constants)
        partners.flips = False
        # (a region that calls another on failure must not leave a turn of that one's)
        code.takes_turns = partners.takes_turns = False
        partners = _looping_region(partners, True)
        code.partners = partners.fn if partners else None
    if not flips:
        _plain_for_divisors(f, code, constants)
    # (a kernel holding its atomics in a table gets a region without a loop too: its loop over
    # threads does not vectorise around the table's add, and a region's lanes add straight
    # into a dense table: histogram_global_thread 51 -> 23 ms)
    code = _looping_region(code, flips or f.atomic_table is not None)
    return {0: code.fn} if code else {}


def _plain_for_divisors(f, code, constants):
    """Where entry region `code` keeps a quotient strided by a kernel parameter
    (divisor_parameters): the same region without that form, made first, which `code` calls
    where a divisor is too small (_plain_where_divisors_small); without it, `code` does without
    the form too."""
    code.use_divisors(code.divisor_parameters())
    try:
        divides = bool(code.divisors) and bool(code.quotient_divisions())
    except NotVectorisable:
        return                                  # (nor is `code` made)
    plain = _looping_region(EntryRegion(f, f"{f.fn.name}.plain", constants)) if divides else None
    if plain is None:
        code.use_divisors({})
    else:
        code.plain = plain.fn


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
    entry = EntryRegion(f, f"{f.fn.name}.region0", constants)
    _plain_for_divisors(f, entry, constants)
    entry = _looping_region(entry)
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
