"""The block function: how one block's threads run on one CPU thread.

Each thread runs through its step function until it reaches a site (a barrier, a warp
collective, a wait after a failed mbarrier test), exits or traps. While the block's threads stop
alike they run in uniform rounds (one loop over the threads that LLVM vectorises); otherwise in
general rounds, thread by thread, after which the warps' collectives (collectives.py), the
block's barriers (barriers.py) and its mbarrier waits (mbarrierwaits.py) are resolved. No
schedule can hang: every round runs a thread or releases a barrier, a collective or a wait; a
block that cannot is a deadlock, and the launch fails (LAUNCH_ERR_BARRIER/MBARRIER_DEADLOCK).

A kernel without sites needs none of this: its block is a plain loop over threads that
reuses one frame, or a loop over its warps' regions, and the worker runs a chunk of its
blocks in one call (cpu/launch.py, emit_run_blocks); one whose warps take turns through a
grid-stride loop keeps its frame and turn areas in its slot of the workspace and gives way,
so that several blocks are in flight. The block's frames, spill and collective arrays and
turn areas lie in its workspace (workspace.py).
"""
from __future__ import annotations

import functools
from contextlib import contextmanager
from dataclasses import dataclass

from llvmlite import ir

from .. import abi
from ..analysis import guards
from ..irutil import (at_function_start, collection_paused, declare, for_range, i32, i64, load_field,
                      load_invariant_field, set_loop_hints, split_index, store_field)
from ..types import I1, I32, I64, PTR
from . import segments
from .barriers import bar_slot, emit_resolve_barrier
from .collectives import emit_resolve_warp, emit_uniform_collective, uniform_collective
from .mbarrierwaits import emit_released, stall_slots, wait_state
from .rounds import (RangeReduction, RoundFunction, all_stay, block_shape, bounded_shape, each_thread,
                     each_thread_by_column, scalar_params, step_tail)
from .workspace import (C, MOST_WARPS, TURN_ANSWERS, TURN_AREAS, frame_at, no_site_state_offset, thread_state,
                        turn_stride, workspace_layout)

NO_VECTORIZE = {"llvm.loop.unroll.disable": None, "llvm.loop.vectorize.enable": False}
# the fewest rows a block needs for its threads to be looped y innermost (BlockPlan.by_column):
# a column of 8 fills a vector of 8 floats (32 x 8 blocks: the naive transpose 4.5x faster)
COLUMN_THREADS = 8


def _record_stop(b, fn, fr, code, kinds, site_consts, site_kinds=()):
    """Record in a thread's frame where step stopped (`code`, not a trap): its state, resume
    point, and the operands of its site that are constants (FunctionLowering.suspend leaves them out)."""
    exited = b.icmp_signed("==", code, i32(abi.STEP_EXIT))
    kind = b.load(b.gep(kinds, [b.sub(b.select(exited, i32(1), code), i32(1))]))
    is_block = ir.Constant(I1, 0)
    for k in sorted(abi.BLOCK_SITE_KINDS):
        is_block = b.or_(is_block, b.icmp_signed("==", kind, i32(k)))
    waits = b.select(is_block, i32(abi.THREAD_WAIT_BAR), i32(abi.THREAD_WAIT_WARP))
    if abi.SITE["yield"] in site_kinds:
        # a thread at a yield waits for nothing
        waits = b.select(b.icmp_signed("==", kind, i32(abi.SITE["yield"])), i32(abi.THREAD_RUN), waits)
    waits = wait_state(b, kind, waits, site_kinds)
    st = b.select(exited, i32(abi.THREAD_EXITED), waits)
    b.store(st, thread_state(b, fr))
    store_field(b, fr, C["resume"], code)
    with_consts = [(i + 1, c) for i, c in enumerate(site_consts) if c]
    if not with_consts:
        return
    after = fn.append_basic_block("consts.done")
    sw = b.switch(code, after)
    for site, consts in with_consts:
        blk = fn.append_basic_block(f"consts{site}")
        sw.add_case(i32(site), blk)
        b.position_at_end(blk)
        for off, (value, bits) in sorted(consts.items()):
            store_field(b, fr, off, ir.Constant(ir.IntType(bits), value))
        b.branch(after)
    b.position_at_end(after)


def init_block_fields(b, fr, L, cta, shared, worker):
    """The parts of a frame header that are the same for every thread of the block."""
    for k, v in (("exit_flag", i32(0)), ("resume", i32(0)), ("state", i32(abi.THREAD_RUN)), ("worker", worker),
                 ("op_mask", i32(-1)), ("op_pred", i32(0))):
        store_field(b, fr, C[k], v)
    for k in ("ntid_x", "ntid_y", "ntid_z"):
        store_field(b, fr, C[k], load_invariant_field(b, L, abi.LAUNCH["block_" + k[-1]], I32))
    for k in ("nctaid_x", "nctaid_y", "nctaid_z"):
        store_field(b, fr, C[k], load_invariant_field(b, L, abi.LAUNCH["grid_" + k[-1]], I32))
    for k, v in zip(("ctaid_x", "ctaid_y", "ctaid_z"), cta):
        store_field(b, fr, C[k], v)
    store_field(b, fr, C["shared_base"], b.ptrtoint(shared, I64))
    store_field(b, fr, C["launch"], b.ptrtoint(L, I64))


def _set_thread_index(b, fr, x, y, z, linear):
    for k, v in (("tid_x", x), ("tid_y", y), ("tid_z", z), ("linear", linear)):
        store_field(b, fr, C[k], v)


def _reentry(b, fn, name, first):
    """A new block that the code may branch back to with another resume value: (the i32
    phi, holding `first` when coming from here, and the block)."""
    entry = b.block
    blk = fn.append_basic_block(name)
    b.branch(blk)
    b.position_at_end(blk)
    phi = b.phi(I32, name=name + ".resume")
    phi.add_incoming(first, entry)
    return phi, blk


@contextmanager
def _each_lane(b, lo, nx, ny, index):
    """Loops over the 32 threads of the warp that starts at linear index `lo`, giving (x, y,
    z, linear index); `index`: three i32 stack slots. The warp's first thread's index costs
    divisions, the others carry from it."""
    for slot, v in zip(index, split_index(b, lo, nx, ny)):
        b.store(v, slot)
    with for_range(b, lo, b.add(lo, i32(32)), "lane") as t:
        x, y, z = (b.load(slot) for slot in index)
        yield x, y, z, t
        x1 = b.add(x, i32(1))
        wrap_x = b.icmp_unsigned("==", x1, nx)
        y1 = b.select(wrap_x, b.add(y, i32(1)), y)
        wrap_y = b.icmp_unsigned("==", y1, ny)
        b.store(b.select(wrap_x, i32(0), x1), index[0])
        b.store(b.select(wrap_y, i32(0), y1), index[1])
        b.store(b.select(wrap_y, b.add(z, i32(1)), z), index[2])


def _frame_only_args(ws):
    """step()'s last arguments (abi.STEP_TAIL) in a block without sites: the one frame stands
    for the header, and there are no spill arrays, thread count or induction value."""
    return [ws, ir.Constant(PTR, None), i64(0), i64(0)]


def _emit_guard_probe(module, plan, sites, bounds=None, needed=0):
    """i32 probe(i8* L, i8* ws, i8* header, i8* spill): bit i set when no thread of the block
    takes the kernel's known branch i (compiler/analysis/guards.py); each thread computes only their
    predicates. A function of its own: inline, its loop multiplied the paths through the
    block function (LLVM duplicated the code that computes the workspace's pointers, whose
    phis cost sgemm's tile round its vectorised loop). With `sites`, each thread has its
    frame in the workspace and the block's header; else the one frame `ws` stands for both.
    `bounds` (compiler/simt/probebounds.py), where the kernel has it, answers first for the whole
    block from its index ranges; the loop over the threads runs where it proves nothing.
    The answer is known once a thread has taken one of the branches `needed` (all that its
    caller asks about: all_stay), or every branch where `needed` is 0: the probe ends at the
    end of that thread's row (a row's loop stays one that vectorises). A block at the edge of
    the grid takes a border test in its first row or its last: stencil7_3d_block's blocks at
    the edges probed all 512 threads, a tenth of the kernel's time."""
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, PTR, PTR, PTR]), name=plan.name + ".probe")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    L, ws, header, spill = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    if bounds is not None:
        with b.if_then(b.call(bounds, [L, header, i32(0)]), likely=True):
            b.ret(i32(-1))
    nx, ny, nz = (load_field(b, L, abi.LAUNCH["block_" + k], I32) for k in "xyz")
    params = b.inttoptr(load_field(b, L, abi.LAUNCH["params"], I64), PTR)
    scalars = [b.load(b.bitcast(b.gep(params, [i64(info.offset)]), ty.as_pointer()), align=info.size)
               for info, ty in plan.scalar_params]
    threads = b.zext(b.mul(b.mul(nx, ny), nz), I64)
    stays = b.alloca(I32, name="all.stay")
    b.store(i32(-1), stays)

    def answered():
        so_far = b.load(stays)
        if needed:
            return b.not_(all_stay(b, so_far, needed))
        return b.icmp_unsigned("==", so_far, i32(0))

    with each_thread(b, nx, ny, nz, "probe.", after_row=lambda: _return_if(b, answered(), stays)) \
            as (x, y, z, linear, _):
        if sites:
            fr, tail = frame_at(b, ws, i64(plan.frame_size), linear), [header, spill, threads, i64(0)]
        else:
            if plan.frame_needs_index:
                _set_thread_index(b, ws, x, y, z, linear)
            fr, tail = ws, _frame_only_args(ws)
        code = b.call(plan.step, [fr, i32(guards.PROBE), params, x, y, z, linear] + scalars + tail,
                      attrs=plan.step_call_attrs)
        b.store(b.and_(b.load(stays), code), stays)
    b.ret(b.load(stays))
    return fn


def _return_if(b, cond, slot):
    """Return the i32 in `slot` where `cond` holds."""
    with b.if_then(cond, likely=False):
        b.ret(b.load(slot))


def block_stays(b, fn, probe, bounds, L, ws, bits):
    """i1: no thread of a kernel without sites takes its known branches `bits`: `bounds`
    (compiler/simt/probebounds.py, or None) first, the probe where they prove nothing. The bounds
    test here rather than in the probe: inlined with the block function into the loop over
    a chunk's blocks (emit_run_blocks), its parameter loads leave that loop."""
    probed = lambda: all_stay(b, b.call(probe, [L, ws, ws, ir.Constant(PTR, None)]), bits)
    if bounds is None:
        return probed()
    before = b.block
    probing, known = fn.append_basic_block("probe"), fn.append_basic_block("known")
    b.cbranch(b.call(bounds, [L, ws, i32(0)]), known, probing)
    b.position_at_end(probing)
    answer = probed()
    answered = b.block
    b.branch(known)
    b.position_at_end(known)
    stays = b.phi(I1, name="stays")
    stays.add_incoming(ir.Constant(I1, 1), before)
    stays.add_incoming(answer, answered)
    return stays


# LLVM instructions of a step function above which it is called from its rounds, not copied
# into each: a generated 3,000-instruction kernel (23k) compiled in half the time and ran no
# slower without the copies (benchmarks/NOTES.md); the suite's kernels are far below it
STEP_INLINE_LIMIT = 20000


@dataclass
class BlockPlan:
    """What a kernel's block function is made from: its step function and what the lowering
    (lowering/function.py) found out about its sites."""
    name: str                       # the kernel's prefix: the function is `<name>.block`
    step: ir.Function               # the kernel's step function
    site_kinds: list                # abi.SITE kind of each site (site k at k - 1); empty: no sites
    frame_size: int                 # bytes of a thread's frame
    frame_needs_index: bool = True  # device functions, printf and trap read the thread index there
    scalar_params: tuple = ()       # (ParamInfo, LLVM type) of the parameters step takes as values
    site_consts: tuple = ()         # per site: {frame offset: (value, bits)} of its constant operands
    spill_bytes: int = 0            # bytes per thread of the spill arrays
    affine_sites: dict = None       # site -> its rebuilt registers' slots (rounds.affine_spills)
    self_checked_sites: tuple = ()  # yield sites whose rounds check themselves (rounds.RoundFunction)
    advances: dict = None           # site -> (a warp run's function, its last site)
    regions: dict = None            # site -> its warp region's function (0: the entry region)
    guarded_rounds: dict = None     # site -> the known branches (bits) a round from it may skip
    probe_bounds: ir.Function = None    # the block's bounds of the known branches (probebounds.py)
    synccheck: bool = False         # barriers and collectives checked as they resolve (synccheck.py)
    combined_init: ir.Function = None   # void(frame): a block's combined atomics set up (ops/aggregation.py)
    combined_flush: ir.Function = None  # void(frame): ... performed, after its last thread
    combined_merge: ir.Function = None  # void(frame, carried): ... or carried on by the worker, in
                                        # its workspace, to the next block (aggregation.emit_merge)
    combined_in_place: bool = False     # carried, and held by the blocks in the worker's workspace
                                        # itself: no frame, set-up or merge per block (aggregation.in_place)
    one_round: bool = False         # one round function for every site, the site its argument: lean
                                    # code, whose step is not specialised per site (lowering/module.py)
    by_column: bool = False         # without sites: its threads looped y innermost where the block
                                    # has COLUMN_THREADS rows (analysis.memory.stores_run_along_y)
    bands: bool = False             # without sites, shared memory or a visible block order
                                    # (analysis.memory.any_block_order): its blocks may run in bands (bands.py)
    segments: tuple = ()            # without sites: the divisions its rows run in segments by, each
                                    # (dividend, divisor, quotient frame offsets, signed): segments.py

    @functools.cached_property
    def step_call_attrs(self) -> tuple:
        """Attributes of each call of the step function: copied into every round that calls
        it, so that the loop over threads sees its code (and vectorises it), unless it is so
        big that the copies would make optimising cost rounds x its size: then it is
        noinline, one copy called from each round (STEP_INLINE_LIMIT)."""
        if sum(len(block.instructions) for block in self.step.blocks) <= STEP_INLINE_LIMIT:
            return ("alwaysinline",)
        self.step.attributes.add("noinline")
        return ()


@collection_paused
def emit_block_function(module, plan: BlockPlan) -> ir.Function:
    """i32 run_block(i8* L, i8* ws, i8* shared, i32 cx, i32 cy, i32 cz, i32 worker, i32 start):
    abi.BLOCK_DONE, BLOCK_FAILED or BLOCK_GAVE_WAY; `start` is abi.BLOCK_FIRST for the first
    block in the workspace `ws`, BLOCK_LATER for a later one, BLOCK_RESUMED for the block that
    gave way in it. Only a block function whose kernel starts with a region that takes turns
    gives way (`fn.gives_way`): after each pass over its warps, so that the worker can run the
    turns of several blocks in an order closer to the memory's (emit_launch, and for a kernel
    without sites emit_run_blocks).

    With sites, a block runs in *uniform rounds* while it can: when every thread is runnable
    at the same resume point (all at the start, or all released from one barrier), one loop
    over the threads calls step with that resume point as a constant, so that after inlining
    the loop body is just that region's code and LLVM can vectorise it across threads. Such a
    loop has no early exit: the threads' stop codes go to an array that is scanned after it.
    When all threads stop at the same whole-block bar.sync (no thread count) or the same
    yield (the back edge or exit of a grid-stride loop, analysis.grid_stride_yields), the next
    uniform round starts at once (after a yield: one iteration of that loop for every
    thread); anything else (a trap, threads stopping at different places, a warp
    collective, a named barrier with a count, bar.red, bar.arrive) records the stops in the
    frames and continues with general rounds, thread by thread, where a yield waits for
    nothing: the thread runs on at once."""
    return BlockFunction(module, plan).emit()


class BlockFunction:
    """The making of one block function (emit_block_function): the function, its builder and
    the values its stages share (the launch's block shape and parameters, the workspace's
    arrays, the blocks that the rounds branch between), each stage a method, in the order
    emit() calls them (the uniform rounds are functions of their own: rounds.py). One class
    of ~550 lines because the stages are parts of one LLVM function: each branches to blocks
    the others made (the dispatch, the scan, the general rounds)."""

    def __init__(self, module, plan):
        self.module, self.plan = module, plan
        self.nsites_kinds, self.site_consts = plan.site_kinds, plan.site_consts
        fn = self.fn = self._function(module, plan)
        fn.linkage = "internal"
        fn.probe = None
        self.guarded_rounds = plan.guarded_rounds or {}
        self.L, self.ws, self.shared, self.cx, self.cy, self.cz, self.worker = fn.args[:7]
        self.start = fn.args[7]
        regions = plan.regions
        takes_turns = bool(regions) and 0 in regions and bool(regions[0].turn_bytes)
        # without sites, a block gives way only where its state between calls is its frame
        # and turn areas (a frame on the stack, for combined atomics, would not outlive the call)
        fn.gives_way = takes_turns and (bool(self.nsites_kinds) or plan.combined_init is None)
        b = self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        L = self.L
        # (invariant: a loop over a chunk's blocks loads them once, emit_run_blocks)
        self.nx, self.ny, self.nz = block_shape(b, L)
        self.n = b.mul(b.mul(self.nx, self.ny), self.nz)
        self.fsize = i64(plan.frame_size)
        params = self.params = b.inttoptr(load_invariant_field(b, L, abi.LAUNCH["params"], I64), PTR)
        self.scalars = scalar_params(b, params, plan)
        self.fail = fn.append_basic_block("fail")

    @staticmethod
    def _function(module, plan):
        return ir.Function(module, ir.FunctionType(I32, [PTR, PTR, PTR, I32, I32, I32, I32, I32]),
                           name=plan.name + ".block")

    def emit(self) -> ir.Function:
        if not self.nsites_kinds:
            self._without_sites()
            return self.fn
        self._set_up()
        self._init_frames()
        self._workspace()
        self._uniform_rounds()
        self._scan()
        self._general_rounds()
        b = self.b
        b.position_at_end(self.done)
        b.ret(i32(abi.BLOCK_DONE))
        b.position_at_end(self.fail)
        b.ret(i32(abi.BLOCK_FAILED))
        return self.fn

    # -------------------------------------------------------------- a kernel without sites
    def _without_sites(self):
        b, fn, ws, plan = self.b, self.fn, self.ws, self.plan
        regions, guarded_rounds, n = plan.regions, self.guarded_rounds, self.n
        # a block that gave way (fn.gives_way) goes on at its warps' next turns: its frame
        # and turn areas are as it left them in its workspace
        self.resumed = fn.append_basic_block("resumed") if fn.gives_way else None
        self.kept_turns = None
        # (made here, where both ways start: the resumed one uses them too)
        self.full_warp_count = b.lshr(n, i32(5))
        if self.resumed is not None:
            state = b.gep(ws, [i64(no_site_state_offset(plan.frame_size))])
            fn.turn_stride = turn_stride({0: regions[0]})
            self.kept_turns = _WarpTurns(b, fn, fn.turn_stride, state)
            fresh = fn.append_basic_block("fresh")
            b.cbranch(b.icmp_signed("==", self.start, i32(abi.BLOCK_RESUMED)), self.resumed, fresh)
            b.position_at_end(fresh)
        # the frame is reached only through `ws` here (locals are stack slots), so it cannot
        # alias the kernel's memory: the optimiser may keep its fields in registers
        ws.add_attribute("noalias")
        if plan.combined_init is not None and not plan.combined_in_place:
            # a block that combines its threads' atomics in the frame (ops/aggregation.py) uses
            # a frame on this function's stack, which nothing else reaches: LLVM then keeps the
            # combined values in registers over the loop over threads and vectorises it
            frame = b.alloca(ir.ArrayType(ir.IntType(8), plan.frame_size), name="frame")
            frame.align = 64
            self.carried = ws             # (the worker's own frame: where merge carries the totals)
            ws = self.ws = b.bitcast(frame, PTR)
        init_block_fields(b, ws, self.L, (self.cx, self.cy, self.cz), self.shared, self.worker)
        store_field(b, ws, C["linear"], i32(-1))    # unknown unless the loop keeps it up to date
        if not plan.combined_in_place:
            self._combined(plan.combined_init)
        if regions:
            # a block of full warps runs the kernel a warp at a time as vector code
            # (warpregions.EntryRegion)
            warps, threads = fn.append_basic_block("by.warp"), fn.append_basic_block("by.thread")
            b.cbranch(b.icmp_unsigned("==", b.and_(n, i32(31)), i32(0)), warps, threads)
            b.position_at_end(warps)
            self._entry_region_warps(regions[0], threads)
            self._combined_end()
            b.ret(i32(abi.BLOCK_DONE))
            b.position_at_end(threads)
        if 0 in guarded_rounds:
            # a block whose threads all pass the known branches (an exit guard, a border
            # test) runs the body without them: plain vector loads and stores instead of
            # masked ones (compiler/analysis/guards.py)
            probe = fn.probe = _emit_guard_probe(self.module, plan, False, needed=guarded_rounds[0])
            with b.if_else(block_stays(b, fn, probe, plan.probe_bounds, self.L, ws, guarded_rounds[0])) \
                    as (unguarded, guarded):
                with unguarded:
                    self._thread_loops(guards.PASSED)
                with guarded:
                    self._thread_loops()
        else:
            self._thread_loops()
        self._combined_end()
        b.ret(i32(abi.BLOCK_DONE))
        b.position_at_end(self.fail)
        b.ret(i32(abi.BLOCK_FAILED))

    def _entry_region_warps(self, region, threads):
        """A block of full warps without sites, each warp through the kernel's entry region;
        where the region takes turns at its grid-stride loops, each warp that gave way is
        called again until none does (_WarpTurns, its turn areas on this function's stack)."""
        b, fn, ws = self.b, self.fn, self.ws
        # the region stores no stop codes here (all are exits), but one that did would find
        # room for them at codes[lo ...]
        stride = turn_stride({0: region})
        with at_function_start(b):
            codes = b.bitcast(b.alloca(ir.ArrayType(I32, abi.MAX_BLOCK_THREADS), name="region.codes"),
                              I32.as_pointer())
            lane_index = [b.alloca(I32, name="lane." + k) for k in "xyz"]
            state = None
            if stride and self.kept_turns is None:
                state = b.alloca(ir.ArrayType(ir.IntType(8), TURN_AREAS + stride * MOST_WARPS), name="turn.state")
                state.align = 64
                state = b.bitcast(state, PTR)
        turns = self.kept_turns or _WarpTurns(b, fn, stride, state)

        def run(lo, turn, first):
            got = b.call(region, [ir.Constant(PTR, None), ws, ws, i64(0), lo, self.params, codes, turn])
            # a region that did not run (warpregions.NOT_RUN: nothing stored yet): the warp's
            # threads one by one, and all of the block's when it is the first warp (the
            # others would not run either, as a rule, and the loop over the block's threads
            # vectorises)
            not_run = b.icmp_unsigned("==", got, i32(abi.REGION_NOT_RUN))
            with b.if_then(not_run, likely=False):
                if first:
                    lanes = fn.append_basic_block("by.lane")
                    b.cbranch(b.icmp_unsigned("==", lo, i32(0)), threads, lanes)
                    b.position_at_end(lanes)
                with _each_lane(b, lo, self.nx, self.ny, lane_index) as index:
                    self._thread(index)
            return b.select(not_run, i32(abi.REGION_RAN), got)
        turns.each_warp(b, fn, self.full_warp_count, region, "rg", run, self.resumed)

    def _combined(self, hook):
        """Set up, or perform after the last thread, the atomics the block's threads combine
        in the frame (plan.combined_init / combined_flush; none: nothing)."""
        if hook is not None:
            self.b.call(hook, [self.ws])

    def _combined_end(self):
        """After the block's last thread: its combined atomics performed, or merged into
        the totals its worker carries to its next block (plan.combined_merge)."""
        if self.plan.combined_in_place:
            return                        # (the worker's workspace holds them: performed after its run)
        if self.plan.combined_merge is not None:
            self.b.call(self.plan.combined_merge, [self.ws, self.carried])
        else:
            self._combined(self.plan.combined_flush)

    def _thread_loops(self, mode=0):
        """A block without sites: one frame, reused by each thread in turn. `mode` is the step's
        resume argument (0, or guards.PASSED). Where the plan says `by_column` and the block
        has enough rows, y is the innermost loop (vectorised across a column of threads)."""
        b = self.b

        def by_row():
            if self.plan.segments:
                segments.run_rows_in_segments(self, mode, self._thread)
                return
            with each_thread(b, self.nx, self.ny, self.nz) as (x, y, z, linear, _):
                self._thread((x, y, z, linear), mode)
        if not self.plan.by_column:
            by_row()
            return
        with b.if_else(b.icmp_unsigned(">=", self.ny, i32(COLUMN_THREADS))) as (columns, rows):
            with columns:
                with each_thread_by_column(b, self.nx, self.ny, self.nz, "c") as index:
                    self._thread(index, mode)
            with rows:
                by_row()

    def _thread(self, index, mode=0):
        """One thread of a block without sites, `index` its (x, y, z, linear), in the one frame."""
        b, code = self.b, self.call_step(index, mode)
        ok = self.fn.append_basic_block("ok")
        b.cbranch(b.icmp_signed("==", code, i32(abi.STEP_TRAP)), self.fail, ok)
        b.position_at_end(ok)

    def call_step(self, index, mode):
        """The step function called for one thread of a block without sites (its code: step's
        answer), `index` its (x, y, z, linear), in the one frame."""
        b, ws = self.b, self.ws
        if self.plan.frame_needs_index:        # device functions read the index from the frame
            _set_thread_index(b, ws, *index)
            store_field(b, ws, C["exit_flag"], i32(0))
        return b.call(self.plan.step, [ws, i32(mode), self.params, *index] + self.scalars + _frame_only_args(ws),
                      attrs=self.plan.step_call_attrs)

    # -------------------------------------------------------------- a kernel with sites
    def _set_up(self):
        """The block's shape bounded, the sites' tables and the function's stack slots."""
        b, module, plan, nsites_kinds, site_consts = self.b, self.module, self.plan, self.nsites_kinds, self.site_consts
        self.nx, self.ny, self.nz, self.n = bounded_shape(b, self.nx, self.ny, self.nz)
        self.full_warps = b.icmp_unsigned("==", b.and_(self.n, i32(31)), i32(0))
        # which stop codes (0: exit, k: site k) are collectives resolved a warp at a time
        coll_sites = self.coll_sites = {i + 1 for i, k in enumerate(nsites_kinds)
                                        if uniform_collective(k, site_consts[i])}
        table_ty = ir.ArrayType(ir.IntType(8), len(nsites_kinds) + 1)
        table_g = ir.GlobalVariable(module, table_ty, name=plan.name + ".collective_sites")
        table_g.initializer = ir.Constant(table_ty, [int(c in coll_sites) for c in range(len(nsites_kinds) + 1)])
        table_g.global_constant = True
        table_g.linkage = "internal"
        self.coll_table = b.bitcast(table_g, ir.IntType(8).as_pointer())
        self.advances = plan.advances or {}
        self.regions = regions = plan.regions or {}
        # where a warp goes on as vector code after a collective (a barrier's region starts where
        # its uniform round would, below)
        self.run_sites = sorted(set(self.advances)
                                | {s for s in regions if s and nsites_kinds[s - 1] != abi.SITE["bar_sync"]})
        kinds_ty = ir.ArrayType(I32, len(nsites_kinds))
        kinds_g = ir.GlobalVariable(module, kinds_ty, name=plan.name + ".sites")
        kinds_g.initializer = ir.Constant(kinds_ty, nsites_kinds)
        kinds_g.global_constant = True
        kinds_g.linkage = "internal"
        self.kinds = b.bitcast(kinds_g, I32.as_pointer())
        self.has_barriers = any(k in abi.BLOCK_SITE_KINDS for k in nsites_kinds)
        if self.has_barriers:
            bars_ty = ir.ArrayType(I32, abi.NUM_BARRIERS * abi.BAR_FIELDS)
            bars_arr = b.alloca(bars_ty, name="bars")
            b.store(ir.Constant(bars_ty, None), bars_arr)
            self.bars = b.bitcast(bars_arr, I32.as_pointer())
        self.mbar_seen = stall_slots(b) if abi.SITE["mbar_wait"] in nsites_kinds else None
        self.cur = b.alloca(I32, name="uniform.site")
        self.lane_index = [b.alloca(I32, name="lane." + k) for k in "xyz"]
        self.lanes_differ = b.alloca(I1, name="lanes.differ")
        self.same = b.alloca(I1, name="same")
        self.unready = b.alloca(I1, name="unready")
        affine_sites = self.affine_sites = plan.affine_sites or {}
        nslots = sum(len(v) for v in affine_sites.values())
        header_arr = b.alloca(ir.ArrayType(ir.IntType(8), abi.FRAME_HEADER + 8 * nslots), name="header")
        header_arr.align = 16
        self.header = b.bitcast(header_arr, PTR)
        init_block_fields(b, self.header, self.L, (self.cx, self.cy, self.cz), self.shared, self.worker)

    def _init_frames(self):
        """Each thread's frame header: a copy of the block's, then its own index, once per worker
        and launch (the frames are reused by the worker's next blocks: only their block index
        changes, and state, resume and a site's operands are written before they are read).
        Setting every field of every frame for each block was a third of scan_blocks' time."""
        b, ws, fsize, start = self.b, self.ws, self.fsize, self.start
        memcpy = declare(self.module, "llvm.memcpy.p0i8.p0i8.i64", ir.VoidType(), [PTR, PTR, I64, I1])
        with b.if_else(b.icmp_signed("==", start, i32(abi.BLOCK_FIRST))) as (first_block, later_block):
            with first_block:
                with each_thread(b, self.nx, self.ny, self.nz, "i") as (x, y, z, linear, _):
                    fr = frame_at(b, ws, fsize, linear)
                    b.call(memcpy, [fr, self.header, i64(abi.FRAME_HEADER), ir.Constant(I1, 0)])
                    _set_thread_index(b, fr, x, y, z, linear)
            with later_block:
                # device functions read the block index and their exit flag from the frame (the
                # step function's traps and a barrier deadlock copy the index there themselves:
                # writing four fields of every frame for each block was a tenth of scan_blocks'
                # time, as scatters)
                # (a resumed block has its frames as it left them)
                if self.plan.frame_needs_index:
                    with b.if_then(b.icmp_signed("==", start, i32(abi.BLOCK_LATER))):
                        with for_range(b, i32(0), self.n, "ib") as t:
                            fr = frame_at(b, ws, fsize, t)
                            for k, v in zip(("ctaid_x", "ctaid_y", "ctaid_z"), (self.cx, self.cy, self.cz)):
                                store_field(b, fr, C[k], v)
                            store_field(b, fr, C["exit_flag"], i32(0))

    def _workspace(self):
        """The workspace's arrays, the guard probe's answer, and the blocks the rounds branch to."""
        b, fn, ws, plan, start = self.b, self.fn, self.ws, self.plan, self.start
        stride = fn.turn_stride = turn_stride(self.regions)
        spill_off, coll_off, codes_off, state_off, _ = workspace_layout(b, self.n, plan.frame_size, plan.spill_bytes,
                                                                        stride)
        self.spill = b.gep(ws, [spill_off])
        self.coll = b.gep(ws, [coll_off])
        self.codes = b.bitcast(b.gep(ws, [codes_off]), I32.as_pointer())
        state = b.gep(ws, [state_off])
        self.turns = _WarpTurns(b, fn, stride, state)
        self.resumed = fn.append_basic_block("resumed") if fn.gives_way else None
        # which of the kernel's known branches no thread of the block takes: a round that can
        # reach only such ones runs a copy without them (compiler/analysis/guards.py)
        # (asked once per block: a resumed block finds the answer in its state)
        self.stays = None
        if self.guarded_rounds:
            probe = _emit_guard_probe(self.module, plan, True, plan.probe_bounds)
            stays_slot = b.bitcast(state, I32.as_pointer())
            with b.if_then(b.icmp_signed("!=", start, i32(abi.BLOCK_RESUMED))):
                b.store(b.call(probe, [self.L, ws, self.header, self.spill]), stays_slot)
            self.stays = b.load(stays_slot)
        self.nwarps = b.udiv(b.add(self.n, i32(31)), i32(32))
        self.full_warp_count = b.lshr(self.n, i32(5))
        self.outer = fn.append_basic_block("round")
        self.done = fn.append_basic_block("done")
        self.dispatch = fn.append_basic_block("uniform")
        self.scan = fn.append_basic_block("uniform.scan")
        b.store(i32(0), self.cur)
        if self.resumed is None:
            b.branch(self.dispatch)
        else:
            b.cbranch(b.icmp_signed("==", start, i32(abi.BLOCK_RESUMED)), self.resumed, self.dispatch)

    def _uniform_rounds(self):
        """The uniform rounds, one block each, that `dispatch` picks from `cur`."""
        b, fn, nsites_kinds, site_consts = self.b, self.fn, self.nsites_kinds, self.site_consts
        # uniform rounds: resume 0, and after each whole-block bar.sync without a thread count
        # (a constant barrier id too: threads at one bar.sync with different ids deadlock)
        op_b, op_c = abi.CTX["op_b"], abi.CTX["op_c"]
        # and after a yield (all threads at one yield: the next iteration of a grid-stride loop)
        self.yields = [i + 1 for i, k in enumerate(nsites_kinds) if k == abi.SITE["yield"]]
        again = [i + 1 for i, k in enumerate(nsites_kinds)
                 if k == abi.SITE["bar_sync"] and site_consts[i].get(op_c, (None,))[0] == 0
                 and op_b in site_consts[i]] + self.yields
        # and after a warp collective that every thread reached (resolved for all warps at once)
        self.collectives = [i + 1 for i, k in enumerate(nsites_kinds) if uniform_collective(k, site_consts[i])]
        b.position_at_end(self.dispatch)
        sw = b.switch(b.load(self.cur), self.outer)
        # collective rounds: the threads whose warps were resolved at a collective go on from it
        # (each from its own site, so one loop and one more inlined copy of the step function
        # serve every collective site: softmax has 20 shuffle sites), the others stay where they
        # stopped; those rounds are usually a few instructions up to the next collective, and
        # vectorised per site they ran no faster
        self.coll_round = fn.append_basic_block("collective.round") if self.collectives else None
        self.affine_again = {site for site in again if site in self.affine_sites}
        any_site = None
        for site in [0] + again + (["collective"] if self.collectives else []):
            if self.plan.one_round and site != "collective":
                if any_site is None:
                    any_site = fn.append_basic_block("uniform.any")
                    b.position_at_end(any_site)
                    self._call_round(RoundFunction(self, "round", None), b.load(self.cur))
                    b.branch(self.scan)
                sw.add_case(i32(site), any_site)
                continue
            if site == "collective":
                body = self.coll_round
            else:
                body = fn.append_basic_block(f"uniform{site}")
                sw.add_case(i32(site), body)
            b.position_at_end(body)
            if site == "collective":
                self._collective_round()
            elif site in self.regions:
                # a block of full warps goes on a warp at a time as vector code until each lane
                # stops, from the start (warpregions.EntryRegion) or a barrier (BarrierRegion);
                # a partial warp in a round
                warps = fn.append_basic_block(f"uniform{site}.warps")
                threads = fn.append_basic_block(f"uniform{site}.threads")
                b.cbranch(self.full_warps, warps, threads)
                b.position_at_end(warps)
                region = self.regions[site]
                self.turns.each_warp(b, fn, self.full_warp_count, region, f"rw{site}.",
                                     lambda lo, turn, first: b.call(region, [self.spill, self.header, self.ws,
                                                                             self.fsize, lo, self.params, self.codes,
                                                                             turn]),
                                     self.resumed if site == 0 else None)
                b.branch(self.scan)
                b.position_at_end(threads)
                self._general_round(site)
            else:
                self._general_round(site)
            b.branch(self.scan)

        self.resume_at = {}
        for site in again:
            blk = fn.append_basic_block(f"uniform.again{site}")
            self.resume_at[site] = blk
            b.position_at_end(blk)
            b.store(i32(site), self.cur)
            b.branch(self.dispatch)

    def _collective_round(self):
        """Only full warps get here, each with all its lanes at one site (collective.check):
        a warp's first lane tells whether the warp goes on, and from where. While all of a
        warp's lanes stop at one collective again (the next shuffle of a warp_sum), it is
        resolved at once and the lanes run on: a warp's collectives concern only its own
        lanes, so the block's scheduler need not see each one."""
        b, fn, codes = self.b, self.fn, self.codes
        with for_range(b, i32(0), self.full_warp_count, "cr") as w:
            lo = b.mul(w, i32(32))
            first_code = b.load(b.gep(codes, [lo]))
            with b.if_then(self._is_coll(first_code)):
                resume, again_blk = _reentry(b, fn, "cr.again", first_code)
                with _each_lane(b, lo, self.nx, self.ny, self.lane_index) as (x, y, z, linear):
                    code = b.call(self.plan.step, [frame_at(b, self.ws, self.fsize, linear), resume, self.params,
                                                   x, y, z, linear]
                                  + self.scalars + step_tail(b, self.header, self.spill, self.n),
                                  attrs=self.plan.step_call_attrs)
                    b.store(code, b.gep(codes, [linear]))
                    latch = b.block
                set_loop_hints(self.module, latch.terminator, NO_VECTORIZE)
                c0 = b.load(b.gep(codes, [lo]))
                differ = self._lanes_differ_from(lo, c0)
                # a trap's code (negative) is not looked up
                at_coll = self._is_coll(b.select(b.icmp_signed(">", c0, i32(0)), c0, i32(0)))
                go_on = b.and_(at_coll, b.not_(differ))
                resolved = fn.append_basic_block("cr.resolve")
                stop = fn.append_basic_block("cr.stop")
                b.cbranch(go_on, resolved, stop)
                b.position_at_end(resolved)
                resume.add_incoming(self._resolve_warp_at(c0, lo), b.block)
                b.branch(again_blk)
                b.position_at_end(stop)

    def _general_round(self, site):
        """The uniform round from `site`, a call of its own function (rounds.py)."""
        self._call_round(RoundFunction(self, f"round{site}", site))

    def _call_round(self, round_function, site=None):
        self.b.call(round_function.emit(), [self.L, self.ws, self.header,
                                            self.stays if self.stays is not None else i32(0),
                                            site if site is not None else i32(0)])

    def _scan(self):
        """After a uniform round: where its threads stopped, and what runs next."""
        b, fn, codes, nsites_kinds, site_consts = self.b, self.fn, self.codes, self.nsites_kinds, self.site_consts
        same, unready, full_warp_count, regions = self.same, self.unready, self.full_warp_count, self.regions
        b.position_at_end(self.scan)
        first = b.load(codes)
        # whether every thread stopped alike, and whether one trapped (STEP_TRAP is the least
        # code): the least and greatest code, two integer reductions; as and/or reductions of
        # compares, the vectorised loop kept its mask registers on the stack (9% of sgemm)
        codes_range = RangeReduction(b, I32)
        with for_range(b, i32(0), self.n, "s") as t:
            codes_range.add(b.load(b.gep(codes, [t])))
        b.store(codes_range.single(), same)
        untrapped = fn.append_basic_block("uniform.ok")
        b.cbranch(b.icmp_signed("==", codes_range.low(), i32(abi.STEP_TRAP)), self.fail, untrapped)
        b.position_at_end(untrapped)
        agreed = fn.append_basic_block("uniform.agreed")
        self.record = record = fn.append_basic_block("uniform.record")
        if self.collectives:
            # a block of full warps where every warp has all its lanes at one collective that
            # uniform_collective accepts, or none at any (those wait at a barrier, a yield or
            # have exited: they stay there): each such warp is resolved at once, as a vector,
            # and a collective round runs its threads on; otherwise the general rounds
            warps_ready = fn.append_basic_block("collective.check")
            # every thread at the first shuffle of a run of shuffles, in full warps: each warp is
            # brought to the run's last shuffle, and a uniform round goes on from there
            at_run = ir.Constant(I1, 0)
            for site in self.run_sites:
                at_run = b.or_(at_run, b.icmp_signed("==", first, i32(site)))
            go_on = b.or_(b.not_(self._is_coll(first)), b.and_(at_run, self.full_warps))
            b.cbranch(b.and_(b.load(same), go_on), agreed, warps_ready)
            b.position_at_end(warps_ready)
            b.store(ir.Constant(I1, 0), same)           # reused: whether any warp is at a collective
            b.store(b.not_(self.full_warps), unready)   # whether the warps are not ready
            # a warp at a collective when all its lanes stopped there; lanes that stopped at
            # different places are fine unless one of them is at a collective. The lanes are
            # compared with their warp's first (a vectorised pass); the table of collective
            # sites is looked up once per warp, and per lane only in a warp whose lanes differ.
            with for_range(b, i32(0), full_warp_count, "cc") as w:
                lo = b.mul(w, i32(32))
                c0 = b.load(b.gep(codes, [lo]))
                differ = self._lanes_differ_from(lo, c0)
                at_coll = self._is_coll(c0)
                b.store(b.or_(b.load(same), b.and_(at_coll, b.not_(differ))), same)
                with b.if_then(differ):
                    b.store(b.or_(b.load(unready), at_coll), unready)
                    with for_range(b, lo, b.add(lo, i32(32)), "ccm") as t:
                        b.store(b.or_(b.load(unready), self._is_coll(b.load(b.gep(codes, [t])))), unready)
            resolve = fn.append_basic_block("collective.resolve")
            b.cbranch(b.and_(b.load(same), b.not_(b.load(unready))), resolve, record)
            b.position_at_end(resolve)
            with for_range(b, i32(0), full_warp_count, "cw") as w:
                lo = b.mul(w, i32(32))
                first_lane = b.gep(codes, [lo])
                # the collective round resumes a warp's lanes from its first lane's code
                b.store(self._resolve_warp_at(b.load(first_lane), lo), first_lane)
                latch = b.block
            set_loop_hints(self.module, latch.terminator, {"llvm.loop.unroll.disable": None})
            b.branch(self.coll_round)
        else:
            b.cbranch(b.load(same), agreed, record)
        b.position_at_end(agreed)
        sw = b.switch(first, record)
        sw.add_case(i32(abi.STEP_EXIT), self.done)
        for site, blk in self.resume_at.items():
            sw.add_case(i32(site), blk)
        for site in self.run_sites:
            blk = fn.append_basic_block(f"uniform.run{site}")
            sw.add_case(i32(site), blk)
            b.position_at_end(blk)
            if site in regions:
                # each warp resolves the shuffle and runs on as vector code (compiler/vector/warpregions.py)
                # until each of its lanes stops; their stop codes are scanned as after a round
                def run_region(lo, turn, first, site=site):
                    if first:
                        emit_uniform_collective(b, nsites_kinds[site - 1], site_consts[site - 1], lo, self.coll,
                                                self.ws, self.fsize)
                    return b.call(regions[site], [self.spill, self.header, self.ws, self.fsize, lo, self.params,
                                                  codes, turn])
                self.turns.each_warp(b, fn, full_warp_count, regions[site], f"rg{site}.", run_region)
                b.branch(self.scan)
                continue
            with for_range(b, i32(0), full_warp_count, "rw") as w:
                last = self._resolve_known_site(site, b.mul(w, i32(32)))
            self._call_round(RoundFunction(self, f"run{site}", last.constant, from_rebuilt=False))
            b.branch(self.scan)

    def _general_rounds(self):
        """The stops recorded in the frames, then rounds thread by thread, the warps'
        collectives and the block's barriers resolved after each."""
        b, fn, module, ws, fsize, plan = self.b, self.fn, self.module, self.ws, self.fsize, self.plan
        nsites_kinds, site_consts, kinds, n, outer = self.nsites_kinds, self.site_consts, self.kinds, self.n, self.outer
        b.position_at_end(self.record)
        with for_range(b, i32(0), n, "m") as t:
            _record_stop(b, fn, frame_at(b, ws, fsize, t), b.load(b.gep(self.codes, [t])), kinds, site_consts,
                         nsites_kinds)
        b.branch(outer)

        b.position_at_end(outer)
        with for_range(b, i32(0), self.nwarps, "w") as w:
            lo = b.mul(w, i32(32))
            hi = b.add(lo, i32(32))
            hi = b.select(b.icmp_signed("<", n, hi), n, hi)
            warp = fn.append_basic_block("warp")
            b.branch(warp)
            b.position_at_end(warp)
            with for_range(b, lo, hi, "t") as t:
                fr = frame_at(b, ws, fsize, t)
                with b.if_then(b.icmp_signed("==", b.load(thread_state(b, fr)), i32(abi.THREAD_RUN))):
                    index = [load_field(b, fr, C[k], I32) for k in ("tid_x", "tid_y", "tid_z", "linear")]
                    resume = load_field(b, fr, C["resume"], I32)
                    if self.yields:
                        # here a yield releases at once: the thread goes on until it waits or exits
                        resume, again_blk = _reentry(b, fn, "step", resume)
                    code = b.call(plan.step, [fr, resume, self.params] + index + self.scalars + step_tail(b, self.header, self.spill, self.n))
                    ok = fn.append_basic_block("ok")
                    b.cbranch(b.icmp_signed("==", code, i32(abi.STEP_TRAP)), self.fail, ok)
                    b.position_at_end(ok)
                    if self.yields:
                        at_yield = ir.Constant(I1, 0)
                        for site in self.yields:
                            at_yield = b.or_(at_yield, b.icmp_signed("==", code, i32(site)))
                        stop = fn.append_basic_block("stopped")
                        resume.add_incoming(code, b.block)
                        b.cbranch(at_yield, again_blk, stop)
                        b.position_at_end(stop)
                    _record_stop(b, fn, fr, code, kinds, site_consts, nsites_kinds)
            if set(nsites_kinds) - abi.BLOCK_SITE_KINDS - {abi.SITE["yield"], abi.SITE["mbar_wait"]}:
                # (lanes at two bar.warp.sync instructions meet only where synccheck would
                # otherwise take the first group's lanes for missing from the second's: a
                # bar.warp.sync has no result, so running them apart changes nothing else)
                meet = plan.synccheck and nsites_kinds.count(abi.SITE["warp_sync"]) > 1
                resolve = emit_resolve_warp(module, plan.synccheck, meet)
                released = b.call(resolve, [ws, fsize, lo, hi, kinds, self.coll])
                nxt = fn.append_basic_block("warp.next")
                b.cbranch(b.icmp_signed("!=", released, i32(0)), warp, nxt)
                b.position_at_end(nxt)
        if self.has_barriers:
            bars, same = self.bars, self.same
            released = b.call(emit_resolve_barrier(module, plan.synccheck), [ws, fsize, n, kinds, bars, self.header])
            resolved = fn.append_basic_block("resolved")
            b.cbranch(b.icmp_signed("<", released, i32(0)), self.fail, resolved)
            b.position_at_end(resolved)
            # and threads waiting at mbarriers, when their words changed or nothing else can run
            waits = [ws, fsize, n, released, self.header]
            released = b.add(released, emit_released(b, self.fail, self.mbar_seen, waits))
            recheck = fn.append_basic_block("recheck")
            b.cbranch(b.icmp_signed("!=", released, i32(0)), recheck, self.done)
            # back to uniform rounds when a release leaves every thread runnable at one site that
            # has a uniform round, and no barrier holds arrivals (uniform rounds never touch them)
            b.position_at_end(recheck)
            r = load_field(b, ws, C["resume"], I32)
            ok = ir.Constant(I1, 1)
            for bar_id in range(abi.NUM_BARRIERS):
                ok = b.and_(ok, b.icmp_signed("==", b.load(bar_slot(b, bars, i32(bar_id), abi.BAR_ARRIVED)), i32(0)))
            b.store(ok, same)
            with for_range(b, i32(0), n, "rc") as t:
                fr = frame_at(b, ws, fsize, t)
                here = b.and_(b.icmp_signed("==", b.load(thread_state(b, fr)), i32(abi.THREAD_RUN)),
                              b.icmp_signed("==", load_field(b, fr, C["resume"], I32), r))
                b.store(b.and_(b.load(same), here), same)
            uniform = fn.append_basic_block("recheck.uniform")
            b.cbranch(b.load(same), uniform, outer)
            b.position_at_end(uniform)
            sw = b.switch(r, outer)
            for site, blk in self.resume_at.items():
                sw.add_case(i32(site), blk)
        elif self.mbar_seen is not None:
            waiting = emit_released(b, self.fail, self.mbar_seen, [ws, fsize, n, i32(0), self.header])
            b.cbranch(b.icmp_signed("!=", waiting, i32(0)), outer, self.done)
        else:
            # warp collectives always make progress (resolve_warp releases at least the lane it
            # chose), so after a round every thread has exited
            b.branch(self.done)

    # -------------------------------------------------------------- helpers of the rounds
    def _is_coll(self, code):
        """i1: stop code `code` (not a trap) is a collective in coll_sites."""
        b = self.b
        if not self.coll_sites:
            return ir.Constant(I1, 0)
        return b.trunc(b.load(b.gep(self.coll_table, [b.sext(code, I64)])), I1)

    def _lanes_differ_from(self, lo, code):
        """i1: some lane of the warp at thread `lo` stopped elsewhere than at `code` (a
        vectorised pass over the warp's stop codes)."""
        b, lanes_differ = self.b, self.lanes_differ
        b.store(ir.Constant(I1, 0), lanes_differ)
        with for_range(b, lo, b.add(lo, i32(32)), "lane.cmp") as t:
            differs = b.icmp_signed("!=", b.load(b.gep(self.codes, [t])), code)
            b.store(b.or_(b.load(lanes_differ), differs), lanes_differ)
        return b.load(lanes_differ)

    def _resolve_known_site(self, site, lo):
        """_resolve_warp_at for a collective site known here; returns the site to resume from."""
        b, nsites_kinds, site_consts = self.b, self.nsites_kinds, self.site_consts
        emit_uniform_collective(b, nsites_kinds[site - 1], site_consts[site - 1], lo, self.coll, self.ws, self.fsize)
        if site not in self.advances:
            return i32(site)
        advance, last = self.advances[site]
        b.call(advance, [self.spill, self.header, self.ws, self.fsize, lo], attrs=("alwaysinline",))
        emit_uniform_collective(b, nsites_kinds[last - 1], site_consts[last - 1], lo, self.coll, self.ws, self.fsize)
        return i32(last)

    def _resolve_warp_at(self, code, lo):
        """Resolve for the full warp at thread `lo` the collective whose site is `code`
        (all its lanes wait there); nothing for another code. Returns the site the lanes
        resume from: `code`, or the last shuffle of a run of shuffles that starts at `code`
        (compiler/vector/warpruns.py), which the run's vector code has brought the warp to."""
        b, fn = self.b, self.fn
        after = fn.append_basic_block("cw.resolved")
        wsw = b.switch(code, after)
        resumes = [(code, b.block)]
        for site in sorted(self.coll_sites):
            blk = fn.append_basic_block(f"cw.site{site}")
            wsw.add_case(i32(site), blk)
            b.position_at_end(blk)
            resumes.append((self._resolve_known_site(site, lo), b.block))
            b.branch(after)
        b.position_at_end(after)
        resume = b.phi(I32, name="cw.resume")
        for value, blk in resumes:
            resume.add_incoming(value, blk)
        return resume

class _WarpTurns:
    """The block's turn areas (warpregions, "turns") in its workspace: one set for all its
    regions, which run one after the other and so never keep their warps' states at once;
    nothing for a kernel whose regions never give way (`stride` 0). `state`: the block's
    state area (workspace_layout)."""

    def __init__(self, b, fn, stride, state):
        self.stride = stride
        if not stride:
            return
        self.areas = b.gep(state, [i64(TURN_AREAS)])
        self.answers = b.bitcast(b.gep(state, [i64(TURN_ANSWERS)]), I32.as_pointer())
        with at_function_start(b):
            self.pending = b.alloca(I1, name="turn.pending")

    def each_warp(self, b, fn, nwarps, region, tag, run, resumed=None):
        """Each of the block's `nwarps` warps through `run(lo, turn, first)`, a call of
        `region` (its answer), then again, in turn, each warp that gave way
        (abi.REGION_TURNED) until none does. `turn` is the warp's turn area, 0 in its first
        i32 before its first call. A region that never gives way is called once per warp.
        With `resumed` (an empty block, where the block function goes on when the worker
        calls it again), the block function gives way itself after each pass over the warps
        that left one of them in the middle (abi.BLOCK_GAVE_WAY)."""
        if not region.turn_bytes:
            with for_range(b, i32(0), nwarps, tag) as w:
                run(b.mul(w, i32(32)), ir.Constant(PTR, None), True)
            return
        turn = lambda w: b.gep(self.areas, [b.mul(b.zext(w, I64), i64(self.stride))])
        answer = lambda w: b.gep(self.answers, [w])

        def record(w, got):
            b.store(got, answer(w))
            b.store(b.or_(b.load(self.pending), b.icmp_unsigned("==", got, i32(abi.REGION_TURNED))), self.pending)
        b.store(ir.Constant(I1, 0), self.pending)
        with for_range(b, i32(0), nwarps, tag) as w:
            b.store(i32(0), b.bitcast(turn(w), I32.as_pointer()))
            record(w, run(b.mul(w, i32(32)), turn(w), True))
        again = resumed or fn.append_basic_block(tag + "again")
        done = fn.append_basic_block(tag + "done")
        if resumed is None:
            more = again
        else:
            more = fn.append_basic_block(tag + "give.way")
            with b.goto_block(more):
                b.ret(i32(abi.BLOCK_GAVE_WAY))
        b.cbranch(b.load(self.pending), more, done)
        b.position_at_end(again)
        b.store(ir.Constant(I1, 0), self.pending)
        with for_range(b, i32(0), nwarps, tag + "t") as w:
            with b.if_then(b.icmp_unsigned("==", b.load(answer(w)), i32(abi.REGION_TURNED))):
                record(w, run(b.mul(w, i32(32)), turn(w), False))
        b.cbranch(b.load(self.pending), more, done)
        b.position_at_end(done)
