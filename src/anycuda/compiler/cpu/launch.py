"""A kernel's launch function: its blocks shared out to workers on libgomp's threads.

`emit_launch` adds, per kernel, the worker that takes blocks from a shared counter (so load
balances across cores; where the launch record says `backwards`, the counter's chunks count
from the grid's end) and calls the block function (simt/blockfunction.py) on each, and the
launch function that runs the workers with libgomp's GOMP_parallel. A worker traps memory
faults (faults.py), moves off the launching thread's CPU (placement.py), and ends with the
fence its streaming stores need (streamstores.py). A kernel without sites runs a chunk of its
blocks in one call (`emit_run_blocks`); a kernel whose block function gives way keeps several
blocks in flight, their turns interleaved.
"""
from __future__ import annotations

from llvmlite import ir

from .. import abi
from ..irutil import (at_function_start, collection_paused, declare, either, field_ptr, for_range, i32, i64, load_field,
                      load_invariant_field, split_index, store_field)
from ..simt.workspace import C, no_site_frames_bytes, shared_window_stride, up64, workspace_layout
from ..types import I1, I32, I64, PTR
from . import faults, placement, streamstores

# blocks a worker keeps in flight when their block function gives way (emit_launch): their
# grid-stride loops' turns interleaved, a worker reads the rows of several neighbouring blocks
# together (benchmarks/models/grid_stride_order.c: reduce 2.03 ms with a block's warps in
# turns, 1.49 with four blocks' warps, 1.45 with sixteen; NOTES "Blocks in flight"). Eight
# since blocks without sites take turns too: a row of their run of halves is then 4 KB, a
# page (copy_f16_stride 3.5 -> 2.7 ms on one core, 8 against 4 slots 4-8% faster for reduce,
# histogram, saxpy_f32_stride; NOTES "Blocks in flight without sites")
BLOCKS_IN_FLIGHT = 8
LAUNCH_FN = ir.FunctionType(ir.VoidType(), [PTR])        # void (Launch*): a kernel's launch function


@collection_paused
def emit_launch(module, name, block_fn, has_sites, frame_size, export_name, spill_bytes=0, chunk_calls=True,
                race_shadow=False, shared_blocks=1):
    """The worker (one per core, takes blocks from a counter) and `void export_name(i8* L)`.
    With `chunk_calls`, a kernel without sites runs each chunk's blocks in one call
    (emit_run_blocks). With `race_shadow`, each block's shared window is followed by its
    racecheck shadow (compiler/ops/racecheck.py). `shared_blocks`: the blocks whose shared
    windows a call of the block function takes (a block program's group, blockgroups.py)."""
    thread_num = declare(module, "omp_get_thread_num", I32, [])
    worker_ty = ir.FunctionType(ir.VoidType(), [PTR])
    worker = ir.Function(module, worker_ty, name=name + ".worker")
    worker.linkage = "internal"
    (L,) = worker.args
    b = ir.IRBuilder(worker.append_basic_block("entry"))
    nx = load_field(b, L, abi.LAUNCH["block_x"], I32)
    ny = load_field(b, L, abi.LAUNCH["block_y"], I32)
    nz = load_field(b, L, abi.LAUNCH["block_z"], I32)
    n = b.zext(b.mul(b.mul(nx, ny), nz), I64)
    if has_sites:
        # (laid out as the block function lays it out, with its turn areas)
        frames_bytes = workspace_layout(b, b.trunc(n, I32), frame_size, spill_bytes,
                                        getattr(block_fn, "turn_stride", 0))[-1]
    else:
        # (a block that gives way keeps its turn areas after its one frame)
        frames_int = (no_site_frames_bytes(frame_size, block_fn.turn_stride)
                      if getattr(block_fn, "gives_way", False) else frame_size)
        frames_bytes = i64(frames_int)
    shared_bytes = b.zext(load_field(b, L, abi.LAUNCH["shared_total"], I32), I64)
    if shared_blocks > 1:          # (a block program's group of blocks: a window each, 16 bytes apart)
        shared_bytes = b.mul(shared_window_stride(b, shared_bytes), i64(shared_blocks))
    if race_shadow:
        shadow = b.add(i64(abi.RACE_SHADOW_HEADER), b.mul(shared_bytes, i64(abi.RACE_SHADOW_ENTRY)))
        shadow = b.add(up64(b, shadow), i64(abi.RACE_GLOBAL_BYTES))
        shared_bytes = b.add(up64(b, shared_bytes), shadow)
    # a block's workspace: its frames, then its shared memory window (64 bytes apart from
    # the next block's)
    slot_bytes = b.add(b.add(up64(b, frames_bytes), up64(b, shared_bytes)), i64(64))
    most = BLOCKS_IN_FLIGHT if getattr(block_fn, "gives_way", False) else 1
    # inlined into the worker, whose sigsetjmp (returns_twice) holds LLVM back, the block
    # function ran slower: sgemm 61-68 ms inlined into the one-block loop, 205-217 into the
    # loop over slots, 49 on its own (NOTES "Blocks in flight"). A kernel without sites runs
    # a chunk's blocks in a function of their own, the block function inlined there
    # (emit_run_blocks)
    run_blocks = None
    if chunk_calls and not has_sites:
        run_blocks = emit_run_blocks(module, name, block_fn, most, (frames_int + 63) // 64 * 64)
    if run_blocks is None and getattr(block_fn, "carried_hooks", None):
        raise AssertionError(f"{name}: totals carried across blocks need a run of blocks per call")
    if run_blocks is None:
        block_fn.attributes.add("noinline")
    # (the thread's own mapping, kept for its next launches, ending at a guard: a shared
    # window indexed past its end faults instead of overwriting the heap)
    get_memory = b.inttoptr(load_field(b, L, abi.LAUNCH["worker_memory"], I64),
                            ir.FunctionType(PTR, [I64]).as_pointer())
    ws = b.call(get_memory, [b.mul(slot_bytes, i64(most))])
    oom = b.icmp_unsigned("==", b.ptrtoint(ws, I64), i64(0))
    with b.if_then(oom):
        b.cmpxchg(field_ptr(b, L, abi.LAUNCH["error"], I32), i32(0), i32(abi.LAUNCH_ERR_OUT_OF_MEMORY),
                  "seq_cst", "seq_cst")
        b.ret_void()
    fault = worker.append_basic_block("fault")
    done = worker.append_basic_block("done")
    wid = b.call(thread_num, [])
    trap, key = faults.emit_trap_setup(b, L, fault, wid)
    placement.leave_caller_cpu(b, L, wid)
    gx = b.zext(load_field(b, L, abi.LAUNCH["grid_x"], I32), I64)
    gy = b.zext(load_field(b, L, abi.LAUNCH["grid_y"], I32), I64)
    nblocks = load_field(b, L, abi.LAUNCH["nblocks"], I64)
    chunk = load_field(b, L, abi.LAUNCH["chunk"], I64)
    backwards = b.icmp_unsigned("!=", load_field(b, L, abi.LAUNCH["backwards"], I32), i32(0))
    if not has_sites:
        # (where the fault path finds the thread index; a run of blocks in flight moves it)
        b.store(ws, b.bitcast(b.gep(trap, [i64(abi.FAULT_FRAME)]), PTR.as_pointer()))
    if run_blocks is not None:
        # each chunk in one call, without a call, the slots' bookkeeping and a division per
        # block: stencil5 0.77-0.88x C -> 0.75-0.79x, saxpy and vector_add unchanged within
        # the noise (NOTES "One call per chunk")
        at_block = b.bitcast(b.gep(trap, [i64(abi.FAULT_BLOCK)]), I64.as_pointer())
        shared = b.gep(ws, [up64(b, frames_bytes)])
        chunks = worker.append_basic_block("chunks")
        b.branch(chunks)
        b.position_at_end(chunks)
        err = b.load_atomic(field_ptr(b, L, abi.LAUNCH["error"], I32), "monotonic", 4)
        healthy = worker.append_basic_block("healthy")
        b.cbranch(b.icmp_signed("!=", err, i32(0)), done, healthy)
        b.position_at_end(healthy)
        first, last = _take_chunk(b, worker, L, nblocks, chunk, backwards, done)
        r = b.call(run_blocks, [L, ws, shared, first, last, gx, gy, wid, at_block, slot_bytes])
        b.cbranch(b.icmp_signed("==", r, i32(abi.BLOCK_FAILED)), done, chunks)
    else:
        _emit_slot_rounds(b, worker, L, block_fn, ws, slot_bytes, frames_bytes, trap, wid, gx, gy,
                          nblocks, chunk, backwards, most, done)
    _emit_worker_end(b, worker, L, ws, trap, key, wid, fault, done, has_sites, get_memory)
    return _emit_launch_function(module, worker, export_name)


def _emit_slot_rounds(b, worker, L, block_fn, ws, slot_bytes, frames_bytes, trap, wid, gx, gy,
                      nblocks, chunk, backwards, most, done):
    """The worker's loop for a kernel with sites: rounds over its `most` slots, each a block
    in flight."""
    # a cooperative launch gives each block a worker of its own (blocks wait for each other)
    cooperative = b.icmp_unsigned("!=", load_field(b, L, abi.LAUNCH["grid_workspace"], I64), i64(0))
    slots = b.select(cooperative, i32(1), i32(most))
    with at_function_start(b):
        block_of = b.alloca(ir.ArrayType(I64, most), name="slot.block")
        in_flight = b.alloca(ir.ArrayType(I1, most), name="slot.in_flight")
        used = b.alloca(ir.ArrayType(I1, most), name="slot.used")      # its frames are set up
        window = [b.alloca(I64, name="window." + k) for k in ("next", "end")]
        taking = b.alloca(I1, name="taking")
        some_in_flight = b.alloca(I1, name="some.in.flight")
    for array in (in_flight, used):
        b.store(ir.Constant(array.type.pointee, None), array)
    for slot in window:
        b.store(i64(0), slot)
    b.store(ir.Constant(I1, 1), taking)
    rounds = worker.append_basic_block("rounds")
    b.branch(rounds)
    # each round calls the block of each slot: a new one (taken `chunk` at a time from the
    # shared counter) or the one that gave way there; the blocks of a worker's slots are
    # neighbours, so their turns read neighbouring memory. Once optimised code has taken
    # over, the worker takes no more blocks (the launch function runs the rest there).
    b.position_at_end(rounds)
    b.store(ir.Constant(I1, 0), some_in_flight)
    with for_range(b, i32(0), slots, "slot") as g:
        at = lambda array: b.gep(array, [i32(0), g])
        err = b.load_atomic(field_ptr(b, L, abi.LAUNCH["error"], I32), "monotonic", 4)
        healthy = worker.append_basic_block("healthy")
        b.cbranch(b.icmp_signed("!=", err, i32(0)), done, healthy)
        b.position_at_end(healthy)
        call, next_slot = worker.append_basic_block("call"), worker.append_basic_block("next.slot")
        resume_from = b.block
        take = worker.append_basic_block("take")
        b.cbranch(b.load(at(in_flight)), call, take)
        b.position_at_end(take)
        got = _take_block(b, worker, L, window, taking, nblocks, chunk, backwards, next_slot)
        b.store(got, at(block_of))
        start = b.select(b.load(at(used)), i32(abi.BLOCK_LATER), i32(abi.BLOCK_FIRST))
        b.store(ir.Constant(I1, 1), at(used))
        took = b.block
        b.branch(call)
        b.position_at_end(call)
        start_phi = b.phi(I32, name="start")
        start_phi.add_incoming(i32(abi.BLOCK_RESUMED), resume_from)
        start_phi.add_incoming(start, took)
        blk = b.load(at(block_of))
        cx, cy, cz = (b.trunc(v, I32) for v in split_index(b, blk, gx, gy))
        b.store(blk, b.bitcast(b.gep(trap, [i64(abi.FAULT_BLOCK)]), I64.as_pointer()))
        ws_g = b.gep(ws, [b.mul(b.zext(g, I64), slot_bytes)])
        shared = b.gep(ws_g, [up64(b, frames_bytes)])
        r = b.call(block_fn, [L, ws_g, shared, cx, cy, cz, wid, start_phi])
        _after_slot_call(b, worker, r, done, at(in_flight), some_in_flight, next_slot)
    b.cbranch(b.or_(b.load(taking), b.load(some_in_flight)), rounds, done)


def _after_slot_call(b, fn, r, failed, in_flight, some_in_flight, next_slot):
    """After a slot's block function answered `r`: to `failed` where the block failed; else
    whether it gave way (its slot's `in_flight`, and `some_in_flight`), then on at `next_slot`."""
    ran = fn.append_basic_block("ran")
    b.cbranch(b.icmp_signed("==", r, i32(abi.BLOCK_FAILED)), failed, ran)
    b.position_at_end(ran)
    gave_way = b.icmp_signed("==", r, i32(abi.BLOCK_GAVE_WAY))
    b.store(gave_way, in_flight)
    b.store(b.or_(b.load(some_in_flight), gave_way), some_in_flight)
    b.branch(next_slot)
    b.position_at_end(next_slot)


def _emit_worker_end(b, worker, L, ws, trap, key, wid, fault, done, has_sites, get_memory):
    """The worker's fault path and its end."""
    # a memory fault in this worker's block: the launch fails with an illegal address; a
    # stop (the launch's error already says it timed out): the first worker stopped names
    # its block
    b.position_at_end(fault)
    error = field_ptr(b, L, abi.LAUNCH["error"], I32)
    won = b.extract_value(b.cmpxchg(error, i32(0), i32(abi.LAUNCH_ERR_ILLEGAL_ADDRESS), "seq_cst", "seq_cst"), 1)
    stopped = b.icmp_unsigned("==", b.load_atomic(error, "monotonic", 4), i32(abi.LAUNCH_ERR_TIMEOUT))
    # (err_info, 0 until then, marks the first stop)
    first_stopped = b.and_(stopped, b.extract_value(
        b.cmpxchg(field_ptr(b, L, abi.LAUNCH["err_info"], I64), i64(0), i64(1), "seq_cst", "seq_cst"), 1))
    with b.if_then(b.or_(won, first_stopped)):
        slot = lambda off: b.load(b.bitcast(b.gep(trap, [i64(off)]), I64.as_pointer()))
        store_field(b, L, abi.LAUNCH["err_block"], slot(abi.FAULT_BLOCK))
        with b.if_then(won):
            store_field(b, L, abi.LAUNCH["err_info"], slot(abi.FAULT_ADDR))
        # (a kernel without sites runs a block in one frame: FAULT_FRAME)
        thread = i64(-1)
        if not has_sites:
            frame = b.load(b.bitcast(b.gep(trap, [i64(abi.FAULT_FRAME)]), PTR.as_pointer()))
            thread = b.sext(load_field(b, frame, C["linear"], I32), I64)
        store_field(b, L, abi.LAUNCH["err_thread"], thread)
    b.branch(done)
    b.position_at_end(done)
    streamstores.fence(b)           # the launch's streaming stores before its end
    faults.emit_trap_release(b, L, trap, key, wid)
    b.call(get_memory, [i64(0)])          # (a large workspace goes back: workermemory.KEPT)
    b.ret_void()


def _emit_launch_function(module, worker, export_name):
    """`void export_name(i8* L)`: the workers on libgomp's threads, then the optimised code
    for what is left where it took over meanwhile."""
    gomp = declare(module, "GOMP_parallel", ir.VoidType(),
                   [ir.FunctionType(ir.VoidType(), [PTR]).as_pointer(), PTR, I32, I32])
    launch = ir.Function(module, LAUNCH_FN, name=export_name)
    (L,) = launch.args
    b = ir.IRBuilder(launch.append_basic_block("entry"))
    streamstores.set_flag(b, load_field(b, L, abi.LAUNCH["stream_stores"], I32))
    nw = load_field(b, L, abi.LAUNCH["num_workers"], I32)
    placement.note_caller_cpu(b, L)
    b.call(gomp, [worker, L, nw, i32(0)])
    left = b.icmp_unsigned("<", load_field(b, L, abi.LAUNCH["next_block"], I64), load_field(b, L, abi.LAUNCH["nblocks"], I64))
    healthy = b.icmp_unsigned("==", load_field(b, L, abi.LAUNCH["error"], I32), i32(0))
    with b.if_then(b.and_(b.and_(_handing_over(b, L), left), healthy)):
        store_field(b, L, abi.LAUNCH["num_workers"], load_field(b, L, abi.LAUNCH["all_workers"], I32))
        # taken out of the slot, so that the code taking over runs the blocks left rather than
        # see the slot set and pass them on again (it passes them on if the slot is set anew)
        taken = b.atomic_rmw("xchg", field_ptr(b, L, abi.LAUNCH["handoff"], I64), i64(0), "monotonic")
        b.call(b.inttoptr(taken, LAUNCH_FN.as_pointer()), [L])
    b.ret_void()
    return launch


def _take_block(b, worker, L, window, taking, nblocks, chunk, backwards, none_left):
    """The next block of the worker's window [next, end) (i64), taking the next chunk
    (_take_chunk) when it is used up; where there are none (or optimised code has taken
    over), `taking` becomes false and control goes to `none_left`."""
    nxt, end = window
    grab, got, stop = (worker.append_basic_block(k) for k in ("grab", "got", "none.left"))
    b.cbranch(b.and_(b.load(taking), b.icmp_unsigned("<", b.load(nxt), b.load(end))), got, grab)
    b.position_at_end(grab)
    ask = worker.append_basic_block("ask")
    b.cbranch(b.load(taking), ask, stop)
    b.position_at_end(ask)
    first, last = _take_chunk(b, worker, L, nblocks, chunk, backwards, stop)
    b.store(first, nxt)
    b.store(last, end)
    b.branch(got)
    b.position_at_end(stop)
    b.store(ir.Constant(I1, 0), taking)
    b.branch(none_left)
    b.position_at_end(got)
    blk = b.load(nxt)
    b.store(b.add(blk, i64(1)), nxt)
    return blk


def _take_chunk(b, worker, L, nblocks, chunk, backwards, none_left):
    """The blocks [first, last) (i64) of the next `chunk` from the launch's counter, counted
    from the grid's end where `backwards` (i1); control goes to `none_left` where there are
    none left, or where optimised code has taken over."""
    ask, got = (worker.append_basic_block(k) for k in ("ask.counter", "got.chunk"))
    b.cbranch(_handing_over(b, L), none_left, ask)
    b.position_at_end(ask)
    taken = b.atomic_rmw("add", field_ptr(b, L, abi.LAUNCH["next_block"], I64), chunk, "monotonic")
    end = b.add(taken, chunk)
    end = b.select(b.icmp_unsigned("<", nblocks, end), nblocks, end)
    # backwards, the counter's k-th chunk is the k-th from the end, its blocks still in
    # index order (the hardware prefetchers follow each block's ascending addresses)
    first = b.select(backwards, b.sub(nblocks, end), taken)
    last = b.select(backwards, b.sub(nblocks, taken), end)
    b.cbranch(b.icmp_unsigned("<", taken, nblocks), got, none_left)
    b.position_at_end(got)
    return first, last


def emit_run_blocks(module, name, block_fn, slots=1, shared_offset=0):
    """`i32 run_blocks(i8* L, i8* ws, i8* shared, i64 first, i64 last, i64 gx, i64 gy,
    i32 worker, i64* at_block, i64 slot_bytes)`: the blocks first..last-1 of a kernel without
    sites, in one loop with the block function inlined, each block's index in `*at_block`
    while it runs (a memory fault names it); where the block function has a band
    (simt/bands.py) and the launch's blocks more than one row of threads, the rest of each
    row of the grid in the chunk at a time, through the band. abi.BLOCK_FAILED where a block failed;
    BLOCK_DONE after the last, or before it where the launch has failed (another worker's
    block). A block function that gives way has `slots` blocks in
    flight, each in its own slot of the workspace (`slot_bytes` apart, its shared window
    `shared_offset` into it), taking chunks from the launch's counter (until other code
    takes the launch over: _handing_over) as they run out: _run_blocks_in_flight."""
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, PTR, PTR, I64, I64, I64, I64, I32, I64.as_pointer(), I64]),
                     name=name + ".blocks")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    block_fn.attributes.add("alwaysinline")
    if getattr(block_fn, "gives_way", False):
        _run_blocks_in_flight(fn, block_fn, slots, shared_offset)
        return fn
    L, ws, shared, first, last, gx, gy, worker, at_block, _ = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    # combined atomics whose totals the worker carries from block to block (ops/aggregation.py):
    # set up before the run's first block, performed after its last
    carried = getattr(block_fn, "carried_hooks", None)
    if carried:
        b.call(carried[0], [ws])
    start = tuple(split_index(b, first, gx, gy))
    band = getattr(block_fn, "band", None)
    if band is not None:
        # blocks of one row of threads keep to the block function: a band of them runs their
        # threads in the same order, and blackscholes ran 1.25x slower as one (NOTES "Bands")
        rows = b.mul(load_invariant_field(b, L, abi.LAUNCH["block_y"], I32),
                     load_invariant_field(b, L, abi.LAUNCH["block_z"], I32))
        in_bands = b.icmp_unsigned(">", rows, i32(1))
    entry = b.block
    loop, next_block, failed, done = (fn.append_basic_block(k) for k in ("block", "next.block", "failed", "done"))
    b.branch(loop)
    b.position_at_end(loop)
    blk, cx, cy, cz = (b.phi(I64, name=k) for k in ("blk", "cx", "cy", "cz"))
    for phi, v in zip((blk, cx, cy, cz), (first, *start)):
        phi.add_incoming(v, entry)
    coords = [b.trunc(v, I32) for v in (cx, cy, cz)]

    def one_block():
        b.store(blk, at_block)
        return b.call(block_fn, [L, ws, shared, *coords, worker, i32(abi.BLOCK_LATER)])
    if band is not None:
        # the rest of the chunk's row of the grid in one band (simt/bands.py)
        band.attributes.add("alwaysinline")
        rest = b.sub(last, blk)
        rest = b.select(b.icmp_unsigned("<", b.sub(gx, cx), rest), b.sub(gx, cx), rest)
        step = b.select(in_bands, rest, i64(1))
        r = either(b, in_bands, lambda: b.call(band, [L, ws, shared, *coords, worker, b.trunc(step, I32),
                                                             at_block, blk]), one_block)
    else:
        step = i64(1)
        r = one_block()
    b.cbranch(b.icmp_signed("==", r, i32(abi.BLOCK_FAILED)), failed, next_block)
    b.position_at_end(next_block)
    following = _next_block(b, blk, (cx, cy, cz), gx, gy, step)
    err = b.load_atomic(field_ptr(b, L, abi.LAUNCH["error"], I32), "monotonic", 4)
    more = b.and_(b.icmp_unsigned("<", following[0], last), b.icmp_signed("==", err, i32(0)))
    for phi, v in zip((blk, cx, cy, cz), following):
        phi.add_incoming(v, next_block)
    b.cbranch(more, loop, done)
    b.position_at_end(failed)
    if carried:
        b.call(carried[1], [ws])
    b.ret(i32(abi.BLOCK_FAILED))
    b.position_at_end(done)
    if carried:
        b.call(carried[1], [ws])
    b.ret(i32(abi.BLOCK_DONE))
    return fn


def _run_blocks_in_flight(fn, block_fn, slots, shared_offset):
    """emit_run_blocks' body for a block function that gives way: rounds over `slots` slots,
    each calling the block there again where it gave way, else the next block, until every
    block has run; when the run's blocks are used up, the next chunk comes from the launch's
    counter (a chunk can be smaller than the slots: 1,024 blocks on 16 workers make chunks
    of 4). The blocks in flight are neighbours, so their grid-stride loops' turns read a row
    of the grid as one run of memory (NOTES "Blocks in flight without sites")."""
    L, ws, _, first, last, gx, gy, worker, at_block, slot_bytes = fn.args
    if getattr(block_fn, "carried_hooks", None):
        raise AssertionError(f"{fn.name}: totals carried across blocks with blocks in flight")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    at_frame = b.bitcast(b.gep(b.bitcast(at_block, PTR), [i64(abi.FAULT_FRAME - abi.FAULT_BLOCK)]),
                         PTR.as_pointer())
    nblocks = load_field(b, L, abi.LAUNCH["nblocks"], I64)
    chunk = load_field(b, L, abi.LAUNCH["chunk"], I64)
    backwards = b.icmp_unsigned("!=", load_field(b, L, abi.LAUNCH["backwards"], I32), i32(0))
    block_of = b.alloca(ir.ArrayType(I64, slots), name="slot.block")
    in_flight = b.alloca(ir.ArrayType(I1, slots), name="slot.in_flight")
    some_in_flight, taking = b.alloca(I1, name="some.in.flight"), b.alloca(I1, name="taking")
    nxt = [b.alloca(I64, name="next." + k) for k in ("block", "x", "y", "z")]
    end = b.alloca(I64, name="end")
    b.store(ir.Constant(in_flight.type.pointee, None), in_flight)
    b.store(ir.Constant(I1, 1), taking)

    def start_window(first, last):
        for slot, v in zip(nxt + [end], (first, *split_index(b, first, gx, gy), last)):
            b.store(v, slot)
    start_window(first, last)
    failed, done = fn.append_basic_block("failed"), fn.append_basic_block("done")
    rounds = fn.append_basic_block("rounds")
    b.branch(rounds)
    b.position_at_end(rounds)
    b.store(ir.Constant(I1, 0), some_in_flight)
    with for_range(b, i32(0), i32(slots), "slot") as g:
        at = lambda array: b.gep(array, [i32(0), g])
        call, fresh, refill, none_left, taken, next_slot = (
            fn.append_basic_block(k) for k in ("call", "fresh", "refill", "none.left", "taken", "next.slot"))
        resuming = b.block
        b.cbranch(b.load(at(in_flight)), call, fresh)
        b.position_at_end(fresh)
        blk = b.load(nxt[0])
        b.cbranch(b.icmp_unsigned("<", blk, b.load(end)), taken, refill)
        b.position_at_end(refill)
        ask = fn.append_basic_block("ask")
        b.cbranch(b.load(taking), ask, next_slot)
        b.position_at_end(ask)
        start_window(*_take_chunk(b, fn, L, nblocks, chunk, backwards, none_left))
        b.branch(fresh)
        b.position_at_end(none_left)
        b.store(ir.Constant(I1, 0), taking)
        b.branch(next_slot)
        b.position_at_end(taken)
        cx, cy, cz = (b.load(v) for v in nxt[1:])
        b.store(blk, at(block_of))
        for slot, v in zip(nxt, _next_block(b, blk, (cx, cy, cz), gx, gy)):
            b.store(v, slot)
        b.branch(call)
        b.position_at_end(call)
        # (a resumed block reads its coordinates from its frame)
        start, *coords = (b.phi(ty) for ty in (I32, I64, I64, I64))
        for phi, again, new in zip((start, *coords), (i32(abi.BLOCK_RESUMED), *[i64(0)] * 3),
                                   (i32(abi.BLOCK_LATER), cx, cy, cz)):
            phi.add_incoming(again, resuming)
            phi.add_incoming(new, taken)
        coords = [b.trunc(v, I32) for v in coords]
        ws_g = b.gep(ws, [b.mul(b.zext(g, I64), slot_bytes)])
        b.store(b.load(at(block_of)), at_block)
        b.store(ws_g, at_frame)
        r = b.call(block_fn, [L, ws_g, b.gep(ws_g, [i64(shared_offset)]), *coords, worker, start])
        _after_slot_call(b, fn, r, failed, at(in_flight), some_in_flight, next_slot)
    err = b.load_atomic(field_ptr(b, L, abi.LAUNCH["error"], I32), "monotonic", 4)
    more = b.or_(b.load(some_in_flight), b.load(taking))
    b.cbranch(b.and_(more, b.icmp_signed("==", err, i32(0))), rounds, done)
    b.position_at_end(failed)
    b.ret(i32(abi.BLOCK_FAILED))
    b.position_at_end(done)
    b.ret(i32(abi.BLOCK_DONE))


def _next_block(b, blk, coords, gx, gy, step=None) -> tuple:
    """(index, x, y, z) of the block `step` (i64, 1 if None; at most to the end of the row)
    after `blk` (at `coords`), by counting, not dividing."""
    cx, cy, cz = coords
    step = i64(1) if step is None else step
    x1 = b.add(cx, step)
    row_done = b.icmp_unsigned("==", x1, gx)
    y1 = b.add(cy, b.zext(row_done, I64))
    plane_done = b.icmp_unsigned("==", y1, gy)
    return (b.add(blk, step), b.select(row_done, i64(0), x1), b.select(plane_done, i64(0), y1),
            b.add(cz, b.zext(plane_done, I64)))


def _handoff_slot(b, L):
    """The launch record's handoff slot as a pointer to a launch function: 0 until code that
    takes over a launch in flight is linked (runtime/program.py: optimised code from the
    compile server, or a block program for the launch's block shape), then its launch function."""
    return b.bitcast(field_ptr(b, L, abi.LAUNCH["handoff"], I64), LAUNCH_FN.as_pointer().as_pointer())


def _handing_over(b, L):
    """i1: other code has taken over this launch, and the launch is not cooperative."""
    there = b.icmp_unsigned("!=", b.ptrtoint(b.load_atomic(_handoff_slot(b, L), "monotonic", 8), I64), i64(0))
    cooperative = b.icmp_unsigned("!=", load_field(b, L, abi.LAUNCH["grid_workspace"], I64), i64(0))
    return b.and_(there, b.not_(cooperative))
