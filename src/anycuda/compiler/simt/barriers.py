"""Barriers (bar.sync, bar.arrive, bar.red) in the block function.

When the block's threads all wait at barriers or have exited, each warp whose non-exited
lanes all wait at one of the 16 named barriers arrives there as a whole warp (the PTX ISA
counts arrivals per warp; the thread count `b` of `bar.sync a, b` is a multiple of the warp
size); a barrier completes when the warps it expects have arrived (without `b`: every warp
that has a non-exited thread, so exited threads do not hold it up, as on a GPU), and its
threads get their bar.red result and run again (`emit_resolve_barrier`,
`emit_release_barrier`). Threads that wait where no barrier can complete are a barrier
deadlock: the launch fails with LAUNCH_ERR_BARRIER_DEADLOCK.
"""
from __future__ import annotations

from llvmlite import ir

from .. import abi
from ..irutil import for_range, i32, load_field, store_field
from ..types import I32, I64, PTR
from .synccheck import check_block_barrier, check_deadlock, check_thread_count, check_warp_arrival
from .workspace import C, emit_record_error, frame_at, thread_state


def bar_slot(b, bars, bar_id, field):
    return b.gep(bars, [b.add(b.mul(bar_id, i32(abi.BAR_FIELDS)), i32(field))])


def emit_release_barrier(module: ir.Module) -> ir.Function:
    """i32 anycuda.release_barrier(i8* ws, i64 fsize, i32 n, i32* kinds, i32* bars, i32 id):
    complete barrier `id`: the threads counted there get their bar.red result and run again,
    and the barrier is reset for its next use. Returns the number of threads released."""
    fn = module.globals.get("anycuda.release_barrier")
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, I64, I32, I32.as_pointer(), I32.as_pointer(), I32]),
                     name="anycuda.release_barrier")
    fn.linkage = "internal"
    ws, fsize, n, kinds, bars, bar_id = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    released = b.alloca(I32, name="released")
    b.store(i32(0), released)
    threads = b.load(bar_slot(b, bars, bar_id, abi.BAR_THREADS))
    popc = b.load(bar_slot(b, bars, bar_id, abi.BAR_POPC))
    all_ = b.zext(b.icmp_unsigned("==", popc, threads), I32)
    any_ = b.zext(b.icmp_unsigned("!=", popc, i32(0)), I32)
    with for_range(b, i32(0), n, "t") as t:
        fr = frame_at(b, ws, fsize, t)
        counted = b.icmp_signed("==", b.load(thread_state(b, fr)), i32(abi.THREAD_BAR_ARRIVED))
        here = b.icmp_signed("==", load_field(b, fr, C["op_b"], I32), bar_id)
        with b.if_then(b.and_(counted, here)):
            kind = b.load(b.gep(kinds, [b.sub(load_field(b, fr, C["resume"], I32), i32(1))]))
            res = b.select(b.icmp_signed("==", kind, i32(abi.SITE["bar_red_popc"])), popc,
                           b.select(b.icmp_signed("==", kind, i32(abi.SITE["bar_red_and"])), all_, any_))
            store_field(b, fr, C["res"], b.zext(res, I64))
            b.store(i32(abi.THREAD_RUN), thread_state(b, fr))
            b.store(b.add(b.load(released), i32(1)), released)
    for field in (abi.BAR_ARRIVED, abi.BAR_THREADS, abi.BAR_POPC):
        b.store(i32(0), bar_slot(b, bars, bar_id, field))
    b.ret(b.load(released))
    return fn


def emit_resolve_barrier(module: ir.Module, synccheck: bool = False) -> ir.Function:
    """i32 anycuda.resolve_barrier(i8* ws, i64 fsize, i32 n, i32* kinds, i32* bars, i8* header):
    count each warp whose non-exited threads all wait at one barrier as arrived there (the PTX
    ISA counts arrivals per warp: a warp with exited threads still counts as a whole warp), and
    complete every barrier that has the warps it expects. Returns the number of threads that
    may run again; -1 when threads wait but no barrier can ever complete (the error is
    recorded, naming the block from `header`); 0 when none can complete yet but threads wait
    at mbarriers (mbarrierwaits.py decides). With `synccheck`, each arrival, each whole-block
    completion and a deadlock are checked for divergent threads (synccheck.py)."""
    name = "anycuda.resolve_barrier" + (".synccheck" if synccheck else "")
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, I64, I32, I32.as_pointer(), I32.as_pointer(), PTR]),
                     name=name)
    fn.linkage = "internal"
    ws, fsize, n, kinds, bars, header = fn.args
    release = emit_release_barrier(module)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    names = ("released", "live_warps", "stuck", "live", "ready", "bar_id", "expect", "threads", "popc", "mbar")
    v = {k: b.alloca(I32, name=k) for k in names}
    for k, init in (("released", 0), ("live_warps", 0), ("mbar", 0)):
        b.store(i32(init), v[k])
    nwarps = b.udiv(b.add(n, i32(31)), i32(32))
    with for_range(b, i32(0), nwarps, "w") as w:
        lo = b.mul(w, i32(32))
        hi = b.add(lo, i32(32))
        hi = b.select(b.icmp_signed("<", n, hi), n, hi)
        for k, init in (("live", 0), ("ready", 1), ("bar_id", -1), ("expect", 0), ("threads", 0), ("popc", 0)):
            b.store(i32(init), v[k])
        with for_range(b, lo, hi, "t") as t:
            fr = frame_at(b, ws, fsize, t)
            st = b.load(thread_state(b, fr))
            with b.if_then(b.icmp_signed("!=", st, i32(abi.THREAD_EXITED))):
                b.store(i32(1), v["live"])
                # a thread waiting at an mbarrier may still run (mbarrierwaits.py)
                b.store(b.or_(b.load(v["mbar"]), b.zext(b.icmp_signed("==", st, i32(abi.THREAD_WAIT_MBAR)), I32)),
                        v["mbar"])
                waiting = b.icmp_signed("==", st, i32(abi.THREAD_WAIT_BAR))
                with b.if_else(waiting) as (then, otherwise):
                    with then:
                        tid = load_field(b, fr, C["op_b"], I32)
                        with b.if_then(b.icmp_signed("<", b.load(v["bar_id"]), i32(0))):
                            b.store(tid, v["bar_id"])
                            b.store(load_field(b, fr, C["op_c"], I32), v["expect"])
                        # lanes of one warp at different barriers: the warp arrives at none
                        same = b.icmp_signed("==", tid, b.load(v["bar_id"]))
                        b.store(b.and_(b.load(v["ready"]), b.zext(same, I32)), v["ready"])
                        p = b.zext(b.icmp_signed("!=", load_field(b, fr, C["op_pred"], I32), i32(0)), I32)
                        b.store(b.add(b.load(v["threads"]), i32(1)), v["threads"])
                        b.store(b.add(b.load(v["popc"]), p), v["popc"])
                    with otherwise:
                        b.store(i32(0), v["ready"])
        b.store(b.add(b.load(v["live_warps"]), b.load(v["live"])), v["live_warps"])
        bar_id = b.load(v["bar_id"])
        arrives = b.and_(b.icmp_signed("!=", b.load(v["ready"]), i32(0)), b.icmp_signed(">=", bar_id, i32(0)))
        with b.if_then(arrives):
            if synccheck:
                check_warp_arrival(b, ws, fsize, lo, hi, b.icmp_signed("!=", b.load(v["expect"]), i32(0)))
            arrived_p = bar_slot(b, bars, bar_id, abi.BAR_ARRIVED)
            expected_p = bar_slot(b, bars, bar_id, abi.BAR_EXPECTED)
            arrived = b.load(arrived_p)
            if synccheck:
                check_thread_count(b, ws, fsize, lo, hi, b.load(v["expect"]), b.load(expected_p), arrived)
            # the first warp to arrive sets what this use of the barrier expects
            with b.if_then(b.icmp_signed("==", arrived, i32(0))):
                b.store(b.load(v["expect"]), expected_p)
            arrived = b.add(arrived, i32(1))
            b.store(arrived, arrived_p)
            for field, k in ((abi.BAR_THREADS, "threads"), (abi.BAR_POPC, "popc")):
                slot = bar_slot(b, bars, bar_id, field)
                b.store(b.add(b.load(slot), b.load(v[k])), slot)
            with for_range(b, lo, hi, "a") as a:
                fr = frame_at(b, ws, fsize, a)
                with b.if_then(b.icmp_signed("==", b.load(thread_state(b, fr)), i32(abi.THREAD_WAIT_BAR))):
                    kind = b.load(b.gep(kinds, [b.sub(load_field(b, fr, C["resume"], I32), i32(1))]))
                    goes_on = b.icmp_signed("==", kind, i32(abi.SITE["bar_arrive"]))
                    b.store(b.select(goes_on, i32(abi.THREAD_RUN), i32(abi.THREAD_BAR_ARRIVED)), thread_state(b, fr))
                    b.store(b.add(b.load(v["released"]), b.zext(goes_on, I32)), v["released"])
            # a barrier with a thread count completes on the arrival that reaches it, so the
            # warps that arrive later start its next use
            expected = b.load(expected_p)
            full = b.and_(b.icmp_signed("!=", expected, i32(0)), b.icmp_signed(">=", arrived, expected))
            with b.if_then(full):
                freed = b.call(release, [ws, fsize, n, kinds, bars, bar_id])
                b.store(b.add(b.load(v["released"]), freed), v["released"])
    # a barrier without a thread count waits for every warp that still has a non-exited thread
    live_warps = b.load(v["live_warps"])
    with for_range(b, i32(0), i32(abi.NUM_BARRIERS), "id") as bar_id:
        arrived = b.load(bar_slot(b, bars, bar_id, abi.BAR_ARRIVED))
        whole = b.icmp_signed("==", b.load(bar_slot(b, bars, bar_id, abi.BAR_EXPECTED)), i32(0))
        done = b.and_(b.and_(whole, b.icmp_signed(">", arrived, i32(0))), b.icmp_signed(">=", arrived, live_warps))
        with b.if_then(done):
            if synccheck:
                check_block_barrier(b, ws, fsize, n, bar_id)
            freed = b.call(release, [ws, fsize, n, kinds, bars, bar_id])
            b.store(b.add(b.load(v["released"]), freed), v["released"])
    released = b.load(v["released"])
    deadlock = b.and_(b.icmp_signed("==", released, i32(0)), b.icmp_signed(">", live_warps, i32(0)))
    deadlock = b.and_(deadlock, b.icmp_signed("==", b.load(v["mbar"]), i32(0)))
    with b.if_then(deadlock):
        # the error names the first thread left waiting
        b.store(n, v["stuck"])
        with for_range(b, i32(0), n, "s") as t:
            exited = b.icmp_signed("==", b.load(thread_state(b, frame_at(b, ws, fsize, t))), i32(abi.THREAD_EXITED))
            first = b.icmp_signed("<", t, b.load(v["stuck"]))
            b.store(b.select(b.and_(b.not_(exited), first), t, b.load(v["stuck"])), v["stuck"])
        stuck = frame_at(b, ws, fsize, b.load(v["stuck"]))
        for k in ("ctaid_x", "ctaid_y", "ctaid_z"):
            store_field(b, stuck, C[k], load_field(b, header, C[k], I32))
        if synccheck:
            check_deadlock(b, ws, fsize, n, b.load(v["stuck"]))
        b.call(emit_record_error(module), [stuck, i32(abi.LAUNCH_ERR_BARRIER_DEADLOCK)])
        b.ret(i32(-1))
    b.ret(released)
    return fn
