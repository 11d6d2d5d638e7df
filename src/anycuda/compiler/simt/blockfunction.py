"""The block function: how one block's threads run on one CPU thread.

Each thread runs through its step function until it reaches a site (a barrier or a warp
collective), exits or traps. While the block's threads stop alike they run in uniform rounds
(one loop over the threads that LLVM vectorises: see emit_block_function); otherwise in
general rounds, thread by thread, after which the warps' collectives (collectives.py) and
then the block's barriers (barriers.py) are resolved. No schedule can hang: every round
either runs a thread or releases a barrier or a collective; a round that can do neither is a
barrier deadlock, and the launch fails with LAUNCH_ERR_BARRIER_DEADLOCK.

A kernel without sites needs none of this: its block is a plain loop over threads that
reuses one frame, and the worker runs a chunk of its blocks in one call
(cpu/launch.py, emit_run_blocks). The block's frames, spill and collective arrays and
turn areas lie in its workspace (workspace.py).
"""
from __future__ import annotations

from contextlib import contextmanager

from llvmlite import ir

from .. import abi
from ..analysis import guards
from ..irutil import (at_function_start, collection_paused, declare, for_range, for_range_counting, i32, i64,
                      in_thread_group, load_field, load_invariant, load_invariant_field, set_loop_hints, split_index,
                      store_field, thread_parallel_group)
from ..types import I1, I32, I64, PTR
from .barriers import bar_slot, emit_resolve_barrier
from .collectives import emit_resolve_warp, emit_uniform_collective, uniform_collective
from .workspace import C, TURN_ANSWERS, TURN_AREAS, frame_at, thread_state, turn_stride, workspace_layout

NO_VECTORIZE = {"llvm.loop.unroll.disable": None, "llvm.loop.vectorize.enable": False}


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


def _init_block_fields(b, fr, L, cta, shared, worker):
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


@contextmanager
def _each_thread(b, nx, ny, nz, tag="", counted_from=None):
    """Loops over a block's threads in x-fastest order, giving (x, y, z, linear index, counter).
    Nested loops keep the thread index free of divisions, so the optimiser sees the innermost
    loop as a simple counted loop over threadIdx.x. With `counted_from` (i64), the counter is
    counted_from + linear index, a second induction variable of the innermost loop; else None."""
    with for_range(b, i32(0), nz, tag + "z") as z:
        with for_range(b, i32(0), ny, tag + "y") as y:
            row = b.mul(b.add(b.mul(z, ny), y), nx)
            if counted_from is None:
                with for_range(b, i32(0), nx, tag + "x") as x:
                    yield x, y, z, b.add(row, x), None
                    latch = b.block
            else:
                with for_range_counting(b, i32(0), nx, b.add(counted_from, b.zext(row, I64)), tag + "x") as (x, count):
                    yield x, y, z, b.add(row, x), count
                    latch = b.block
            # the threads' own accesses carry nothing from one thread to the next; a loop with
            # any other memory access stays a plain loop to the vectoriser
            set_loop_hints(b.module, latch.terminator, {"llvm.loop.parallel_accesses": thread_parallel_group(b.module)})


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


def _emit_thread_loops(b, fn, ws, step, nx, ny, nz, fail, params, frame_needs_index, scalars, mode=0):
    """A block without sites: one frame, reused by each thread in turn. `mode` is the step's
    resume argument (0, or guards.PASSED)."""
    with _each_thread(b, nx, ny, nz) as (x, y, z, linear, _):
        _emit_thread(b, fn, ws, step, (x, y, z, linear), fail, params, frame_needs_index, scalars, mode)


def _emit_thread(b, fn, ws, step, index, fail, params, frame_needs_index, scalars, mode=0):
    """One thread of a block without sites, `index` its (x, y, z, linear), in the one frame."""
    if frame_needs_index:        # device functions read the index from the frame
        _set_thread_index(b, ws, *index)
        store_field(b, ws, C["exit_flag"], i32(0))
    code = b.call(step, [ws, i32(mode), params, *index] + scalars + _frame_only_args(ws))
    ok = fn.append_basic_block("ok")
    b.cbranch(b.icmp_signed("==", code, i32(abi.STEP_TRAP)), fail, ok)
    b.position_at_end(ok)


def _emit_guard_probe(module, name, step, scalar_params, frame_size, frame_needs_index, sites, bounds=None):
    """i32 probe(i8* L, i8* ws, i8* header, i8* spill): bit i set when no thread of the block
    takes the kernel's known branch i (compiler/analysis/guards.py); each thread computes only their
    predicates. A function of its own: inline, its loop multiplied the paths through the
    block function (LLVM duplicated the code that computes the workspace's pointers, whose
    phis cost sgemm's tile round its vectorised loop). With `sites`, each thread has its
    frame in the workspace and the block's header; else the one frame `ws` stands for both.
    `bounds` (compiler/simt/probebounds.py), where the kernel has it, answers first for the whole
    block from its index ranges; the loop over the threads runs where it proves nothing."""
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, PTR, PTR, PTR]), name=name + ".probe")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    L, ws, header, spill = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    if bounds is not None:
        with b.if_then(b.call(bounds, [L, header]), likely=True):
            b.ret(i32(-1))
    nx, ny, nz = (load_field(b, L, abi.LAUNCH["block_" + k], I32) for k in "xyz")
    params = b.inttoptr(load_field(b, L, abi.LAUNCH["params"], I64), PTR)
    scalars = [b.load(b.bitcast(b.gep(params, [i64(info.offset)]), ty.as_pointer()), align=info.size)
               for info, ty in scalar_params]
    threads = b.zext(b.mul(b.mul(nx, ny), nz), I64)
    stays = b.alloca(I32, name="all.stay")
    b.store(i32(-1), stays)
    with _each_thread(b, nx, ny, nz, "probe.") as (x, y, z, linear, _):
        if sites:
            fr, tail = frame_at(b, ws, i64(frame_size), linear), [header, spill, threads, i64(0)]
        else:
            if frame_needs_index:
                _set_thread_index(b, ws, x, y, z, linear)
            fr, tail = ws, _frame_only_args(ws)
        code = b.call(step, [fr, i32(guards.PROBE), params, x, y, z, linear] + scalars + tail,
                      attrs=("alwaysinline",))
        b.store(b.and_(b.load(stays), code), stays)
    b.ret(b.load(stays))
    return fn


def _block_stays(b, fn, probe, bounds, L, ws, bits):
    """i1: no thread of a kernel without sites takes its known branches `bits`: `bounds`
    (compiler/simt/probebounds.py, or None) first, the probe where they prove nothing. The bounds
    test here rather than in the probe: inlined with the block function into the loop over
    a chunk's blocks (emit_run_blocks), its parameter loads leave that loop."""
    probed = lambda: _all_stay(b, b.call(probe, [L, ws, ws, ir.Constant(PTR, None)]), bits)
    if bounds is None:
        return probed()
    before = b.block
    probing, known = fn.append_basic_block("probe"), fn.append_basic_block("known")
    b.cbranch(b.call(bounds, [L, ws]), known, probing)
    b.position_at_end(probing)
    answer = probed()
    answered = b.block
    b.branch(known)
    b.position_at_end(known)
    stays = b.phi(I1, name="stays")
    stays.add_incoming(ir.Constant(I1, 1), before)
    stays.add_incoming(answer, answered)
    return stays


def _all_stay(b, stays, bits):
    """i1: the probe's answer has every bit of `bits` (a round's known branches)."""
    return b.icmp_unsigned("==", b.and_(stays, i32(bits)), i32(bits))


class _RangeReduction:
    """The least and greatest of the values a loop over threads adds (signed), kept in stack
    slots that the optimiser turns into vectorisable min and max reductions."""

    def __init__(self, b, ty):
        self.b = b
        bits = ty.width
        here = b.block
        b.position_at_start(b.function.entry_basic_block)     # once per call, not per round
        self.lo = b.alloca(ty)
        self.hi = b.alloca(ty)
        b.position_at_end(here)
        b.store(ir.Constant(ty, (1 << (bits - 1)) - 1), self.lo)
        b.store(ir.Constant(ty, -(1 << (bits - 1))), self.hi)

    def add(self, v):
        b = self.b
        lo, hi = b.load(self.lo), b.load(self.hi)
        b.store(b.select(b.icmp_signed("<", v, lo), v, lo), self.lo)
        b.store(b.select(b.icmp_signed(">", v, hi), v, hi), self.hi)

    def low(self):
        return self.b.load(self.lo)

    def single(self):
        """i1: every value added was the same (and one was added)."""
        return self.b.icmp_signed("==", self.b.load(self.lo), self.b.load(self.hi))


def _spill_element(b, spill, off, size, t):
    """Pointer to thread t's element of the spill array at `off` (elements of `size` bytes)."""
    ty = ir.IntType(8 * size)
    base = b.bitcast(b.gep(spill, [i64(abi.MAX_BLOCK_THREADS * off)]), ty.as_pointer())
    return b.gep(base, [t])


def _widen(b, t, size):
    """The i32 thread index t in a spill element's integer type."""
    return b.sext(t, I64) if size == 8 else t


def _affine_spills(b, spill, header, n, slots, holds):
    """i1: each spill array of `slots` ([(header slot, spill offset, element size, stride,
    known)]) holds first + stride * t for thread t, `first` being thread 0's element, which
    goes to the header slot (FunctionLowering._reload: the resume that rebuilds those
    registers from it rather than reloading them). A `known` slot is not compared: the
    lowering proved its form (FunctionLowering._proven_affine). `holds`: an i1 stack slot."""
    ok = ir.Constant(I1, 1)
    for slot, off, size, stride, known in slots:
        first = b.load(_spill_element(b, spill, off, size, i32(0)))
        store_field(b, header, abi.FRAME_HEADER + 8 * slot, first)
        if known:
            continue
        b.store(ir.Constant(I1, 1), holds)
        with for_range(b, i32(0), n, "affine") as t:
            expect = b.add(first, _widen(b, t, size)) if stride else first
            value = b.load(_spill_element(b, spill, off, size, t))
            b.store(b.and_(b.load(holds), b.icmp_unsigned("==", value, expect)), holds)
        ok = b.and_(ok, b.load(holds))
    return ok


@collection_paused
def emit_block_function(module, name, step, nsites_kinds, frame_size, frame_needs_index=True, scalar_params=(),
                        site_consts=(), spill_bytes=0, affine_sites=None, self_checked_sites=(),
                        advances=None, regions=None, guarded_rounds=None, probe_bounds=None):
    """i32 run_block(i8* L, i8* ws, i8* shared, i32 cx, i32 cy, i32 cz, i32 worker, i32 start):
    abi.BLOCK_DONE, BLOCK_FAILED or BLOCK_GAVE_WAY; `start` is abi.BLOCK_FIRST for the first
    block in the workspace `ws`, BLOCK_LATER for a later one, BLOCK_RESUMED for the block that
    gave way in it. Only a block function whose kernel starts with a region that takes turns
    gives way (`fn.gives_way`): after each pass over its warps, so that the worker can run the
    turns of several blocks in an order closer to the memory's (emit_launch).

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
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, PTR, PTR, I32, I32, I32, I32, I32]), name=name + ".block")
    fn.linkage = "internal"
    guarded_rounds = guarded_rounds or {}
    L, ws, shared, cx, cy, cz, worker, start = fn.args
    fn.gives_way = bool(regions) and 0 in regions and bool(regions[0].turn_bytes) and bool(nsites_kinds)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    # (invariant: a loop over a chunk's blocks loads them once, emit_run_blocks)
    nx, ny, nz = (load_invariant_field(b, L, abi.LAUNCH["block_" + k], I32) for k in "xyz")
    n = b.mul(b.mul(nx, ny), nz)
    fsize = i64(frame_size)
    params = b.inttoptr(load_invariant_field(b, L, abi.LAUNCH["params"], I64), PTR)
    scalars = [load_invariant(b, b.bitcast(b.gep(params, [i64(info.offset)]), ty.as_pointer()), align=info.size)
               for info, ty in scalar_params]
    fail = fn.append_basic_block("fail")
    if not nsites_kinds:
        # the frame is reached only through `ws` here (locals are stack slots), so it cannot
        # alias the kernel's memory: the optimiser may keep its fields in registers
        ws.add_attribute("noalias")
        _init_block_fields(b, ws, L, (cx, cy, cz), shared, worker)
        store_field(b, ws, C["linear"], i32(-1))    # unknown unless the loop keeps it up to date
        if regions:
            # a block of full warps runs the kernel a warp at a time as vector code
            # (warpregions.EntryRegion); it stores no stop codes here (all are exits), but a
            # region that did would find room for them at codes[lo ...]
            codes = b.bitcast(b.alloca(ir.ArrayType(I32, abi.MAX_BLOCK_THREADS), name="region.codes"),
                              I32.as_pointer())
            lane_index = [b.alloca(I32, name="lane." + k) for k in "xyz"]
            warps, threads = fn.append_basic_block("by.warp"), fn.append_basic_block("by.thread")
            b.cbranch(b.icmp_unsigned("==", b.and_(n, i32(31)), i32(0)), warps, threads)
            b.position_at_end(warps)
            region = lambda lo: b.icmp_unsigned("==", b.call(regions[0], [ir.Constant(PTR, None), ws, ws, i64(0), lo,
                                                                       params, codes, ir.Constant(PTR, None)]),
                                                i32(abi.REGION_RAN))
            # a region that did not run (warpregions.NOT_RUN): the warp's threads one by one,
            # and all of the block's when it is the first warp (the others would not either,
            # as a rule, and the loop over the block's threads vectorises)
            later = fn.append_basic_block("by.warp.later")
            b.cbranch(region(i32(0)), later, threads)
            b.position_at_end(later)
            with for_range(b, i32(1), b.lshr(n, i32(5)), "rg") as w:
                lo = b.mul(w, i32(32))
                with b.if_then(b.not_(region(lo)), likely=False):
                    with _each_lane(b, lo, nx, ny, lane_index) as index:
                        _emit_thread(b, fn, ws, step, index, fail, params, frame_needs_index, scalars)
            b.ret(i32(abi.BLOCK_DONE))
            b.position_at_end(threads)
        if 0 in guarded_rounds:
            # a block whose threads all pass the known branches (an exit guard, a border
            # test) runs the body without them: plain vector loads and stores instead of
            # masked ones (compiler/analysis/guards.py)
            probe = _emit_guard_probe(module, name, step, scalar_params, frame_size, frame_needs_index, False)
            with b.if_else(_block_stays(b, fn, probe, probe_bounds, L, ws, guarded_rounds[0])) as (unguarded, guarded):
                with unguarded:
                    _emit_thread_loops(b, fn, ws, step, nx, ny, nz, fail, params, frame_needs_index, scalars,
                                       guards.PASSED)
                with guarded:
                    _emit_thread_loops(b, fn, ws, step, nx, ny, nz, fail, params, frame_needs_index, scalars)
        else:
            _emit_thread_loops(b, fn, ws, step, nx, ny, nz, fail, params, frame_needs_index, scalars)
        b.ret(i32(abi.BLOCK_DONE))
        b.position_at_end(fail)
        b.ret(i32(abi.BLOCK_FAILED))
        return fn
    # the runtime refuses blocks of more than MAX_BLOCK_THREADS threads; saying so here lets
    # LLVM prove that the per-thread arrays of the workspace (spills, collective operands, stop
    # codes), MAX_BLOCK_THREADS elements apart, do not overlap in a loop over threads, instead
    # of guarding each vectorised loop with run-time overlap checks
    umin = lambda v: b.select(b.icmp_unsigned("<", v, i32(abi.MAX_BLOCK_THREADS)), v, i32(abi.MAX_BLOCK_THREADS))
    nx, ny, nz = umin(nx), umin(ny), umin(nz)
    n = b.mul(b.mul(nx, ny), nz)
    full_warps = b.icmp_unsigned("==", b.and_(n, i32(31)), i32(0))
    # which stop codes (0: exit, k: site k) are collectives resolved a warp at a time
    coll_sites = {i + 1 for i, k in enumerate(nsites_kinds) if uniform_collective(k, site_consts[i])}
    table_ty = ir.ArrayType(ir.IntType(8), len(nsites_kinds) + 1)
    table_g = ir.GlobalVariable(module, table_ty, name=name + ".collective_sites")
    table_g.initializer = ir.Constant(table_ty, [int(c in coll_sites) for c in range(len(nsites_kinds) + 1)])
    table_g.global_constant = True
    table_g.linkage = "internal"
    coll_table = b.bitcast(table_g, ir.IntType(8).as_pointer())

    def is_coll(code):
        """i1: stop code `code` (not a trap) is a collective in coll_sites."""
        if not coll_sites:
            return ir.Constant(I1, 0)
        return b.trunc(b.load(b.gep(coll_table, [b.sext(code, I64)])), I1)
    def lanes_differ_from(lo, code):
        """i1: some lane of the warp at thread `lo` stopped elsewhere than at `code` (a
        vectorised pass over the warp's stop codes)."""
        b.store(ir.Constant(I1, 0), lanes_differ)
        with for_range(b, lo, b.add(lo, i32(32)), "lane.cmp") as t:
            differs = b.icmp_signed("!=", b.load(b.gep(codes, [t])), code)
            b.store(b.or_(b.load(lanes_differ), differs), lanes_differ)
        return b.load(lanes_differ)

    advances = advances or {}
    regions = regions or {}
    # where a warp goes on as vector code after a collective (a barrier's region starts where
    # its uniform round would, below)
    run_sites = sorted(set(advances) | {s for s in regions if s and nsites_kinds[s - 1] != abi.SITE["bar_sync"]})

    def resolve_known_site(site, lo):
        """resolve_warp_at for a collective site known here; returns the site to resume from."""
        emit_uniform_collective(b, nsites_kinds[site - 1], site_consts[site - 1], lo, coll, ws, fsize)
        if site not in advances:
            return i32(site)
        advance, last = advances[site]
        b.call(advance, [spill, header, ws, fsize, lo], attrs=("alwaysinline",))
        emit_uniform_collective(b, nsites_kinds[last - 1], site_consts[last - 1], lo, coll, ws, fsize)
        return i32(last)

    def resolve_warp_at(code, lo):
        """Resolve for the full warp at thread `lo` the collective whose site is `code`
        (all its lanes wait there); nothing for another code. Returns the site the lanes
        resume from: `code`, or the last shuffle of a run of shuffles that starts at `code`
        (compiler/vector/warpruns.py), which the run's vector code has brought the warp to."""
        after = fn.append_basic_block("cw.resolved")
        wsw = b.switch(code, after)
        resumes = [(code, b.block)]
        for site in sorted(coll_sites):
            blk = fn.append_basic_block(f"cw.site{site}")
            wsw.add_case(i32(site), blk)
            b.position_at_end(blk)
            resumes.append((resolve_known_site(site, lo), b.block))
            b.branch(after)
        b.position_at_end(after)
        resume = b.phi(I32, name="cw.resume")
        for value, blk in resumes:
            resume.add_incoming(value, blk)
        return resume
    kinds_ty = ir.ArrayType(I32, len(nsites_kinds))
    kinds_g = ir.GlobalVariable(module, kinds_ty, name=name + ".sites")
    kinds_g.initializer = ir.Constant(kinds_ty, nsites_kinds)
    kinds_g.global_constant = True
    kinds_g.linkage = "internal"
    kinds = b.bitcast(kinds_g, I32.as_pointer())
    has_barriers = any(k in abi.BLOCK_SITE_KINDS for k in nsites_kinds)
    if has_barriers:
        bars_ty = ir.ArrayType(I32, abi.NUM_BARRIERS * abi.BAR_FIELDS)
        bars_arr = b.alloca(bars_ty, name="bars")
        b.store(ir.Constant(bars_ty, None), bars_arr)
        bars = b.bitcast(bars_arr, I32.as_pointer())
    cur = b.alloca(I32, name="uniform.site")
    lane_index = [b.alloca(I32, name="lane." + k) for k in "xyz"]
    affine_holds = b.alloca(I1, name="affine.holds")
    lanes_differ = b.alloca(I1, name="lanes.differ")
    same = b.alloca(I1, name="same")
    unready = b.alloca(I1, name="unready")
    affine_sites = affine_sites or {}
    nslots = sum(len(v) for v in affine_sites.values())
    header_arr = b.alloca(ir.ArrayType(ir.IntType(8), abi.FRAME_HEADER + 8 * nslots), name="header")
    header_arr.align = 16
    header = b.bitcast(header_arr, PTR)
    _init_block_fields(b, header, L, (cx, cy, cz), shared, worker)
    # each thread's frame header: a copy of the block's, then its own index, once per worker
    # and launch (the frames are reused by the worker's next blocks: only their block index
    # changes, and state, resume and a site's operands are written before they are read).
    # Setting every field of every frame for each block was a third of scan_blocks' time.
    memcpy = declare(module, "llvm.memcpy.p0i8.p0i8.i64", ir.VoidType(), [PTR, PTR, I64, I1])
    with b.if_else(b.icmp_signed("==", start, i32(abi.BLOCK_FIRST))) as (first_block, later_block):
        with first_block:
            with _each_thread(b, nx, ny, nz, "i") as (x, y, z, linear, _):
                fr = frame_at(b, ws, fsize, linear)
                b.call(memcpy, [fr, header, i64(abi.FRAME_HEADER), ir.Constant(I1, 0)])
                _set_thread_index(b, fr, x, y, z, linear)
        with later_block:
            # device functions read the block index and their exit flag from the frame (the
            # step function's traps and a barrier deadlock copy the index there themselves:
            # writing four fields of every frame for each block was a tenth of scan_blocks'
            # time, as scatters)
            # (a resumed block has its frames as it left them)
            if frame_needs_index:
                with b.if_then(b.icmp_signed("==", start, i32(abi.BLOCK_LATER))):
                    with for_range(b, i32(0), n, "ib") as t:
                        fr = frame_at(b, ws, fsize, t)
                        for k, v in zip(("ctaid_x", "ctaid_y", "ctaid_z"), (cx, cy, cz)):
                            store_field(b, fr, C[k], v)
                        store_field(b, fr, C["exit_flag"], i32(0))
    stride = fn.turn_stride = turn_stride(regions)
    spill_off, coll_off, codes_off, state_off, _ = workspace_layout(b, n, frame_size, spill_bytes, stride)
    spill = b.gep(ws, [spill_off])
    coll = b.gep(ws, [coll_off])
    codes = b.bitcast(b.gep(ws, [codes_off]), I32.as_pointer())
    state = b.gep(ws, [state_off])
    turns = _WarpTurns(b, fn, stride, state)
    resumed = fn.append_basic_block("resumed") if fn.gives_way else None

    def block_args(t, induction=None):
        return [header, spill, b.zext(n, I64), induction if induction is not None else i64(0)]
    # which of the kernel's known branches no thread of the block takes: a round that can
    # reach only such ones runs a copy without them (compiler/analysis/guards.py)
    # (asked once per block: a resumed block finds the answer in its state)
    stays = None
    if guarded_rounds:
        probe = _emit_guard_probe(module, name, step, scalar_params, frame_size, frame_needs_index, True,
                                  probe_bounds)
        stays_slot = b.bitcast(state, I32.as_pointer())
        with b.if_then(b.icmp_signed("!=", start, i32(abi.BLOCK_RESUMED))):
            b.store(b.call(probe, [L, ws, header, spill]), stays_slot)
        stays = b.load(stays_slot)

    def induction_first(site):
        """i64: the `first` of the site's induction register (stride 1), which
        _affine_spills put in the header; None when the site has none."""
        for slot, _, size, stride, _ in affine_sites[site]:
            if stride:
                first = load_field(b, header, abi.FRAME_HEADER + 8 * slot, ir.IntType(8 * size))
                return first if size == 8 else b.sext(first, I64)
        return None
    nwarps = b.udiv(b.add(n, i32(31)), i32(32))
    full_warp_count = b.lshr(n, i32(5))
    outer = fn.append_basic_block("round")
    done = fn.append_basic_block("done")
    dispatch = fn.append_basic_block("uniform")
    scan = fn.append_basic_block("uniform.scan")
    b.store(i32(0), cur)
    if resumed is None:
        b.branch(dispatch)
    else:
        b.cbranch(b.icmp_signed("==", start, i32(abi.BLOCK_RESUMED)), resumed, dispatch)

    # uniform rounds: resume 0, and after each whole-block bar.sync without a thread count
    # (a constant barrier id too: threads at one bar.sync with different ids deadlock)
    op_b, op_c = abi.CTX["op_b"], abi.CTX["op_c"]
    # and after a yield (all threads at one yield: the next iteration of a grid-stride loop)
    yields = [i + 1 for i, k in enumerate(nsites_kinds) if k == abi.SITE["yield"]]
    again = [i + 1 for i, k in enumerate(nsites_kinds)
             if k == abi.SITE["bar_sync"] and site_consts[i].get(op_c, (None,))[0] == 0
             and op_b in site_consts[i]] + yields
    # and after a warp collective that every thread reached (resolved for all warps at once)
    collectives = [i + 1 for i, k in enumerate(nsites_kinds) if uniform_collective(k, site_consts[i])]
    b.position_at_end(dispatch)
    sw = b.switch(b.load(cur), outer)
    # collective rounds: the threads whose warps were resolved at a collective go on from it
    # (each from its own site, so one loop and one more inlined copy of the step function
    # serve every collective site: softmax has 20 shuffle sites), the others stay where they
    # stopped; those rounds are usually a few instructions up to the next collective, and
    # vectorised per site they ran no faster
    coll_round = fn.append_basic_block("collective.round") if collectives else None
    affine_entry = {site: fn.append_basic_block(f"uniform{site}.affine") for site in again if site in affine_sites}

    def uniform_round(site, resume):
        """One loop over the threads, each calling step from `resume` (a constant), stop codes
        to `codes`. A round from a grid-stride loop's back-edge yield in `self_checked_sites`
        checks for itself whether every thread stopped at that yield again with the site's
        rebuilt registers in their form (min and max reductions over the threads: the stop
        codes, and each register's saved value less stride * t) and then runs the next
        round at once: one loop over the threads per iteration instead of three (the round,
        the scan of the stop codes, the form's check: a third of reduce's time went to the
        last two). Rounds from barriers were tried the same way, checking for the one site
        their threads could reach next: sgemm did not get faster."""
        checked = site in self_checked_sites         # a yield with rebuilt registers (affine_entry)
        slots = affine_sites[site] if checked else []
        if checked:
            code_range = _RangeReduction(b, I32)
            # (a slot of a proven form needs no reduction: thread 0's element is the value)
            slot_ranges = [None if known else _RangeReduction(b, ir.IntType(8 * size))
                           for _, _, size, _, known in slots]
        counted_from = induction_first(site) if resume != site else None

        def each_thread(resume):
            with _each_thread(b, nx, ny, nz, "u", counted_from) as (x, y, z, linear, induction):
                fr = frame_at(b, ws, fsize, linear)
                code = b.call(step, [fr, i32(resume), params, x, y, z, linear] + scalars
                              + block_args(linear, induction), attrs=("alwaysinline",))
                in_thread_group(module, b.store(code, b.gep(codes, [linear])))
                if checked:
                    code_range.add(code)
                    for (_, off, size, stride, _), rng in zip(slots, slot_ranges):
                        if rng is None:
                            continue
                        value = in_thread_group(module, b.load(_spill_element(b, spill, off, size, linear)))
                        rng.add(b.sub(value, _widen(b, linear, size)) if stride else value)
        if site in guarded_rounds:
            with b.if_else(_all_stay(b, stays, guarded_rounds[site])) as (settled, as_written):
                with settled:
                    each_thread(resume | guards.PASSED)
                with as_written:
                    each_thread(resume)
        else:
            each_thread(resume)
        if not checked:
            return
        same = b.and_(code_range.single(), b.icmp_signed("==", code_range.low(), i32(site)))
        for rng in slot_ranges:
            if rng is not None:
                same = b.and_(same, rng.single())
        go_on = fn.append_basic_block(f"uniform{site}.again")
        leave = fn.append_basic_block(f"uniform{site}.scan")
        b.cbranch(same, go_on, leave)
        b.position_at_end(go_on)
        for (slot, off, size, _, _), rng in zip(slots, slot_ranges):
            first = b.load(_spill_element(b, spill, off, size, i32(0))) if rng is None else rng.low()
            store_field(b, header, abi.FRAME_HEADER + 8 * slot, first)
        b.branch(affine_entry[site])
        b.position_at_end(leave)

    def general_round(site):
        """The uniform round from `site`: from the rebuilt registers where they check out."""
        if site in affine_entry:
            holds = _affine_spills(b, spill, header, n, affine_sites[site], affine_holds)
            general = fn.append_basic_block(f"uniform{site}.general")
            b.cbranch(holds, affine_entry[site], general)
            b.position_at_end(affine_entry[site])
            uniform_round(site, site + abi.AFFINE_RESUME)
            b.branch(scan)
            b.position_at_end(general)
        uniform_round(site, site)

    for site in [0] + again + (["collective"] if collectives else []):
        if site == "collective":
            body = coll_round
        else:
            body = fn.append_basic_block(f"uniform{site}")
            sw.add_case(i32(site), body)
        b.position_at_end(body)
        if site == "collective":
            # only full warps get here, each with all its lanes at one site (collective.check):
            # a warp's first lane tells whether the warp goes on, and from where. While all of
            # a warp's lanes stop at one collective again (the next shuffle of a warp_sum), it
            # is resolved at once and the lanes run on: a warp's collectives concern only its
            # own lanes, so the block's scheduler need not see each one
            with for_range(b, i32(0), full_warp_count, "cr") as w:
                lo = b.mul(w, i32(32))
                first_code = b.load(b.gep(codes, [lo]))
                with b.if_then(is_coll(first_code)):
                    resume, again_blk = _reentry(b, fn, "cr.again", first_code)
                    with _each_lane(b, lo, nx, ny, lane_index) as (x, y, z, linear):
                        code = b.call(step, [frame_at(b, ws, fsize, linear), resume, params, x, y, z, linear]
                                      + scalars + block_args(linear), attrs=("alwaysinline",))
                        b.store(code, b.gep(codes, [linear]))
                        latch = b.block
                    set_loop_hints(module, latch.terminator, NO_VECTORIZE)
                    c0 = b.load(b.gep(codes, [lo]))
                    differ = lanes_differ_from(lo, c0)
                    # a trap's code (negative) is not looked up
                    at_coll = is_coll(b.select(b.icmp_signed(">", c0, i32(0)), c0, i32(0)))
                    go_on = b.and_(at_coll, b.not_(differ))
                    resolved = fn.append_basic_block("cr.resolve")
                    stop = fn.append_basic_block("cr.stop")
                    b.cbranch(go_on, resolved, stop)
                    b.position_at_end(resolved)
                    resume.add_incoming(resolve_warp_at(c0, lo), b.block)
                    b.branch(again_blk)
                    b.position_at_end(stop)
        elif site in regions:
            # a block of full warps goes on a warp at a time as vector code until each lane
            # stops, from the start (warpregions.EntryRegion) or a barrier (BarrierRegion);
            # a partial warp in a round
            warps, threads = fn.append_basic_block(f"uniform{site}.warps"), fn.append_basic_block(f"uniform{site}.threads")
            b.cbranch(full_warps, warps, threads)
            b.position_at_end(warps)
            turns.each_warp(b, fn, full_warp_count, regions[site], f"rw{site}.",
                            lambda lo, turn, first: b.call(regions[site], [spill, header, ws, fsize, lo, params,
                                                                           codes, turn]),
                            resumed if site == 0 else None)
            b.branch(scan)
            b.position_at_end(threads)
            general_round(site)
        else:
            general_round(site)
        b.branch(scan)

    resume_at = {}
    for site in again:
        blk = fn.append_basic_block(f"uniform.again{site}")
        resume_at[site] = blk
        b.position_at_end(blk)
        b.store(i32(site), cur)
        b.branch(dispatch)

    b.position_at_end(scan)
    first = b.load(codes)
    # whether every thread stopped alike, and whether one trapped (STEP_TRAP is the least
    # code): the least and greatest code, two integer reductions; as and/or reductions of
    # compares, the vectorised loop kept its mask registers on the stack (9% of sgemm)
    codes_range = _RangeReduction(b, I32)
    with for_range(b, i32(0), n, "s") as t:
        codes_range.add(b.load(b.gep(codes, [t])))
    b.store(codes_range.single(), same)
    untrapped = fn.append_basic_block("uniform.ok")
    b.cbranch(b.icmp_signed("==", codes_range.low(), i32(abi.STEP_TRAP)), fail, untrapped)
    b.position_at_end(untrapped)
    agreed = fn.append_basic_block("uniform.agreed")
    record = fn.append_basic_block("uniform.record")
    if collectives:
        # a block of full warps where every warp has all its lanes at one collective that
        # uniform_collective accepts, or none at any (those wait at a barrier, a yield or
        # have exited: they stay there): each such warp is resolved at once, as a vector,
        # and a collective round runs its threads on; otherwise the general rounds
        warps_ready = fn.append_basic_block("collective.check")
        # every thread at the first shuffle of a run of shuffles, in full warps: each warp is
        # brought to the run's last shuffle, and a uniform round goes on from there
        at_run = ir.Constant(I1, 0)
        for site in run_sites:
            at_run = b.or_(at_run, b.icmp_signed("==", first, i32(site)))
        go_on = b.or_(b.not_(is_coll(first)), b.and_(at_run, full_warps))
        b.cbranch(b.and_(b.load(same), go_on), agreed, warps_ready)
        b.position_at_end(warps_ready)
        b.store(ir.Constant(I1, 0), same)           # reused: whether any warp is at a collective
        b.store(b.not_(full_warps), unready)        # whether the warps are not ready
        # a warp at a collective when all its lanes stopped there; lanes that stopped at
        # different places are fine unless one of them is at a collective. The lanes are
        # compared with their warp's first (a vectorised pass); the table of collective
        # sites is looked up once per warp, and per lane only in a warp whose lanes differ.
        with for_range(b, i32(0), full_warp_count, "cc") as w:
            lo = b.mul(w, i32(32))
            c0 = b.load(b.gep(codes, [lo]))
            differ = lanes_differ_from(lo, c0)
            at_coll = is_coll(c0)
            b.store(b.or_(b.load(same), b.and_(at_coll, b.not_(differ))), same)
            with b.if_then(differ):
                b.store(b.or_(b.load(unready), at_coll), unready)
                with for_range(b, lo, b.add(lo, i32(32)), "ccm") as t:
                    b.store(b.or_(b.load(unready), is_coll(b.load(b.gep(codes, [t])))), unready)
        resolve = fn.append_basic_block("collective.resolve")
        b.cbranch(b.and_(b.load(same), b.not_(b.load(unready))), resolve, record)
        b.position_at_end(resolve)
        with for_range(b, i32(0), full_warp_count, "cw") as w:
            lo = b.mul(w, i32(32))
            first_lane = b.gep(codes, [lo])
            # the collective round resumes a warp's lanes from its first lane's code
            b.store(resolve_warp_at(b.load(first_lane), lo), first_lane)
            latch = b.block
        set_loop_hints(module, latch.terminator, {"llvm.loop.unroll.disable": None})
        b.branch(coll_round)
    else:
        b.cbranch(b.load(same), agreed, record)
    b.position_at_end(agreed)
    sw = b.switch(first, record)
    sw.add_case(i32(abi.STEP_EXIT), done)
    for site, blk in resume_at.items():
        sw.add_case(i32(site), blk)
    for site in run_sites:
        blk = fn.append_basic_block(f"uniform.run{site}")
        sw.add_case(i32(site), blk)
        b.position_at_end(blk)
        if site in regions:
            # each warp resolves the shuffle and runs on as vector code (compiler/vector/warpregions.py)
            # until each of its lanes stops; their stop codes are scanned as after a round
            def run_region(lo, turn, first, site=site):
                if first:
                    emit_uniform_collective(b, nsites_kinds[site - 1], site_consts[site - 1], lo, coll, ws, fsize)
                return b.call(regions[site], [spill, header, ws, fsize, lo, params, codes, turn])
            turns.each_warp(b, fn, full_warp_count, regions[site], f"rg{site}.", run_region)
            b.branch(scan)
            continue
        with for_range(b, i32(0), full_warp_count, "rw") as w:
            last = resolve_known_site(site, b.mul(w, i32(32)))
        uniform_round(last.constant, last.constant)
        b.branch(scan)
    b.position_at_end(record)
    with for_range(b, i32(0), n, "m") as t:
        _record_stop(b, fn, frame_at(b, ws, fsize, t), b.load(b.gep(codes, [t])), kinds, site_consts, nsites_kinds)
    b.branch(outer)

    b.position_at_end(outer)
    with for_range(b, i32(0), nwarps, "w") as w:
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
                if yields:
                    # here a yield releases at once: the thread goes on until it waits or exits
                    resume, again_blk = _reentry(b, fn, "step", resume)
                code = b.call(step, [fr, resume, params] + index + scalars + block_args(t))
                ok = fn.append_basic_block("ok")
                b.cbranch(b.icmp_signed("==", code, i32(abi.STEP_TRAP)), fail, ok)
                b.position_at_end(ok)
                if yields:
                    at_yield = ir.Constant(I1, 0)
                    for site in yields:
                        at_yield = b.or_(at_yield, b.icmp_signed("==", code, i32(site)))
                    stop = fn.append_basic_block("stopped")
                    resume.add_incoming(code, b.block)
                    b.cbranch(at_yield, again_blk, stop)
                    b.position_at_end(stop)
                _record_stop(b, fn, fr, code, kinds, site_consts, nsites_kinds)
        if any(k not in abi.BLOCK_SITE_KINDS and k != abi.SITE["yield"] for k in nsites_kinds):
            released = b.call(emit_resolve_warp(module), [ws, fsize, lo, hi, kinds, coll])
            nxt = fn.append_basic_block("warp.next")
            b.cbranch(b.icmp_signed("!=", released, i32(0)), warp, nxt)
            b.position_at_end(nxt)
    if has_barriers:
        released = b.call(emit_resolve_barrier(module), [ws, fsize, n, kinds, bars, header])
        resolved = fn.append_basic_block("resolved")
        b.cbranch(b.icmp_signed("<", released, i32(0)), fail, resolved)
        b.position_at_end(resolved)
        recheck = fn.append_basic_block("recheck")
        b.cbranch(b.icmp_signed("!=", released, i32(0)), recheck, done)
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
        for site, blk in resume_at.items():
            sw.add_case(i32(site), blk)
    else:
        # warp collectives always make progress, so after a round every thread has exited
        b.branch(done)
    b.position_at_end(done)
    b.ret(i32(abi.BLOCK_DONE))
    b.position_at_end(fail)
    b.ret(i32(abi.BLOCK_FAILED))
    return fn


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
