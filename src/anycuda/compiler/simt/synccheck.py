"""synccheck: barriers and warp collectives used where CUDA leaves the outcome undefined.

Under ANYCUDA_SANITIZE=synccheck (`anycuda run --sanitize=synccheck`) kernels are built as for
memcheck (the general path, the mode in the cache key; their accesses are not tested), and the
block function's scheduler checks each barrier and warp collective as it resolves it. That is
the one place where every thread's stop is known: a thread waits at a site (its frame's resume
code names the instruction), has exited, or waits elsewhere. What is reported:

  - a whole-block barrier (bar.sync / barrier.sync / bar.red without a thread count) that
    completes while threads of the block exited without reaching it, or while its threads
    wait at different instructions in different warps: "divergent threads in block"
    (`check_block_barrier`, one entry per use of the barrier);
  - a warp counted at a barrier whose lanes wait at different barrier instructions, or, at a
    barrier with a thread count, with some of its lanes exited: "divergent threads in warp"
    (`check_warp_arrival`, one entry per arrival);
  - a warp arriving at a barrier with another thread count than the warps before it:
    "invalid arguments" (`check_thread_count`);
  - threads left waiting at barriers that can never complete (different barrier ids, a count
    the running warps cannot reach): the entry comes before the launch fails with the barrier
    deadlock it fails with unchecked (`check_deadlock`);
  - a warp collective (shfl.sync, vote.sync, match.sync, redux.sync, bar.warp.sync) whose
    calling lane is not in its own member mask, whose lanes at one instruction give masks
    that differ, or whose mask names a lane of the block that does not take part (it exited,
    or waits at another instruction; for bar.warp.sync any bar.warp.sync with the same mask
    counts, as sm_70 allows) (`check_collective`, an entry per lane at fault, one per group
    for the missing lanes; lanes of the block only: a mask naming lanes past a partial
    warp's end is not reported).

An entry goes into the launch's record of failed checks (abi.CHECK_ENTRY): `site` the resume
code of the thread named (runtime/syncreport.py finds its instruction from the kernel's sync
sites), `what` one of SYNC_KINDS, `size` the other thread involved (linear index, NO_THREAD for
none), `other` that thread's resume code (0: it exited), `address` the masks (the lane's, and
the group's or the missing lanes above bit 32). The launch goes on (a deadlock still fails it).
Nothing here is emitted for a kernel built without the tool.
"""
from __future__ import annotations

from llvmlite import ir

from .. import abi
from ..irutil import at_function_start, declare, field_ptr, for_range, i32, i64, internal_function, load_field
from ..types import I1, I32, I64, PTR
from .workspace import C, frame_at, thread_state

NO_THREAD = 0xFFFFFFFF
FOUND = "anycuda.synccheck.found"
FOUND_TYPE = ir.FunctionType(ir.VoidType(), [PTR, I32, I32, I32, I64])


def found_fn(module) -> ir.Function:
    """void found(i8* frame, i32 what, i32 other thread, i32 other's resume, i64 masks): one
    entry naming the frame's thread, its block and its resume code."""
    return internal_function(module, FOUND, FOUND_TYPE, _emit_found)


def _emit_found(fn):
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    fr, what, other, other_resume, masks = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    launch = b.inttoptr(load_field(b, fr, C["launch"], I64), PTR)
    log = b.inttoptr(load_field(b, launch, abi.LAUNCH["check_log"], I64), PTR)
    with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(log, I64), i64(0))):
        index = b.atomic_rmw("add", b.bitcast(log, I64.as_pointer()), i64(1), "monotonic")
        with b.if_then(b.icmp_unsigned("<", index, load_field(b, log, 8, I64))):
            entry = b.gep(log, [b.add(i64(abi.CHECK_LOG_HEADER), b.mul(index, i64(abi.CHECK_ENTRY_BYTES)))])
            values = [("address", masks), ("size", other), ("site", load_field(b, fr, C["resume"], I32)),
                      ("what", what), ("other", other_resume)]
            values += [(k, load_field(b, fr, C[k], I32)) for k in ("tid_x", "tid_y", "tid_z",
                                                                      "ctaid_x", "ctaid_y", "ctaid_z")]
            for name, v in values:
                b.store(v, field_ptr(b, entry, abi.CHECK_ENTRY[name], v.type))
    b.ret_void()


def _state(b, fr):
    return b.load(thread_state(b, fr))


def _resume(b, fr):
    return load_field(b, fr, C["resume"], I32)


def _report(b, ws, fsize, who, what, other, masks=None):
    """An entry naming thread `who` (i32), `other` (i32, or NO_THREAD: its resume is then 0)."""
    has_other = b.icmp_unsigned("!=", other, i32(NO_THREAD))
    other_fr = frame_at(b, ws, fsize, b.select(has_other, other, who))
    gone = b.icmp_signed("==", _state(b, other_fr), i32(abi.THREAD_EXITED))
    other_resume = b.select(b.or_(gone, b.not_(has_other)), i32(0), _resume(b, other_fr))
    b.call(found_fn(b.module), [frame_at(b, ws, fsize, who), i32(what), other, other_resume,
                                masks if masks is not None else i64(0)])


class _Slots:
    """i32 stack slots of a check (made once per call, at the function's start), each set to
    its first value where the check starts."""

    def __init__(self, b, **init):
        for name, value in init.items():
            with at_function_start(b):
                slot = b.alloca(I32, name=name)
            b.store(i32(value), slot)
            setattr(self, name, slot)


def _first_where(b, slot, t, cond):
    """Keep in `slot` the first thread index `t` for which `cond` holds (slot starts NO_THREAD)."""
    unset = b.icmp_unsigned("==", b.load(slot), i32(NO_THREAD))
    b.store(b.select(b.and_(cond, unset), t, b.load(slot)), slot)


# ------------------------------------------------------------------------- barriers

def check_warp_arrival(b, ws, fsize, lo, hi, counted: bool):
    """The warp [lo, hi) arrives at a barrier (every non-exited lane waits at one barrier id):
    its lanes at different barrier instructions are divergent; so are lanes that exited, at a
    barrier with a thread count (`counted`, i1: at a whole-block barrier exited threads are
    check_block_barrier's)."""
    s = _Slots(b, first=NO_THREAD, other=NO_THREAD)
    with for_range(b, lo, hi, "sw") as t:
        fr = frame_at(b, ws, fsize, t)
        st = _state(b, fr)
        waits = b.icmp_signed("==", st, i32(abi.THREAD_WAIT_BAR))
        _first_where(b, s.first, t, waits)
        first = b.load(s.first)
        first_fr = frame_at(b, ws, fsize, b.select(b.icmp_unsigned("==", first, i32(NO_THREAD)), t, first))
        elsewhere = b.and_(waits, b.icmp_signed("!=", _resume(b, fr), _resume(b, first_fr)))
        gone = b.and_(counted, b.icmp_signed("==", st, i32(abi.THREAD_EXITED)))
        _first_where(b, s.other, t, b.or_(elsewhere, gone))
    with b.if_then(b.icmp_unsigned("!=", b.load(s.other), i32(NO_THREAD)), likely=False):
        _report(b, ws, fsize, b.load(s.first), abi.SYNC_WARP_DIVERGENT, b.load(s.other))


def check_thread_count(b, ws, fsize, lo, hi, mine, theirs, arrived):
    """A warp arrives at a barrier that `arrived` warps reached before it, expecting `theirs`
    warps (0: the whole block): its own count `mine` must be the same."""
    differs = b.and_(b.icmp_signed(">", arrived, i32(0)), b.icmp_signed("!=", mine, theirs))
    with b.if_then(differs, likely=False):
        s = _Slots(b, first=NO_THREAD)
        with for_range(b, lo, hi, "sn") as t:
            waits = b.icmp_signed("==", _state(b, frame_at(b, ws, fsize, t)), i32(abi.THREAD_WAIT_BAR))
            _first_where(b, s.first, t, waits)
        counts = b.or_(b.zext(b.mul(mine, i32(32)), I64), b.shl(b.zext(b.mul(theirs, i32(32)), I64), i64(32)))
        _report(b, ws, fsize, b.load(s.first), abi.SYNC_COUNT_DIFFERS, i32(NO_THREAD), counts)


def check_block_barrier(b, ws, fsize, n, bar_id):
    """Whole-block barrier `bar_id` completes: a thread of the block that exited, or one
    counted there at another instruction in another warp, is a divergence."""
    s = _Slots(b, first=NO_THREAD, other=NO_THREAD)
    with for_range(b, i32(0), n, "sb") as t:
        fr = frame_at(b, ws, fsize, t)
        st = _state(b, fr)
        here = b.and_(b.icmp_signed("==", st, i32(abi.THREAD_BAR_ARRIVED)),
                      b.icmp_signed("==", load_field(b, fr, C["op_b"], I32), bar_id))
        _first_where(b, s.first, t, here)
        first = b.load(s.first)
        known = b.icmp_unsigned("!=", first, i32(NO_THREAD))
        first_fr = frame_at(b, ws, fsize, b.select(known, first, t))
        other_warp = b.icmp_unsigned("!=", b.lshr(t, i32(5)), b.lshr(first, i32(5)))
        elsewhere = b.and_(b.and_(here, other_warp), b.icmp_signed("!=", _resume(b, fr), _resume(b, first_fr)))
        _first_where(b, s.other, t, b.or_(elsewhere, b.icmp_signed("==", st, i32(abi.THREAD_EXITED))))
    with b.if_then(b.icmp_unsigned("!=", b.load(s.other), i32(NO_THREAD)), likely=False):
        # (a barrier completes with a thread counted there: `first` is one)
        _report(b, ws, fsize, b.load(s.first), abi.SYNC_BLOCK_DIVERGENT, b.load(s.other))


def check_deadlock(b, ws, fsize, n, stuck):
    """No barrier can complete while thread `stuck` (the first not exited) waits: the first
    thread waiting elsewhere (another instruction, or a warp collective) is divergent with
    it, in its warp or in the block; with none, the barrier's thread count cannot be met."""
    s = _Slots(b, other=NO_THREAD)
    stuck_fr = frame_at(b, ws, fsize, stuck)
    with for_range(b, i32(0), n, "sd") as t:
        fr = frame_at(b, ws, fsize, t)
        alive = b.icmp_signed("!=", _state(b, fr), i32(abi.THREAD_EXITED))
        _first_where(b, s.other, t, b.and_(alive, b.icmp_signed("!=", _resume(b, fr), _resume(b, stuck_fr))))
    other = b.load(s.other)
    none = b.icmp_unsigned("==", other, i32(NO_THREAD))
    same_warp = b.icmp_unsigned("==", b.lshr(other, i32(5)), b.lshr(stuck, i32(5)))
    what = b.select(none, i32(abi.SYNC_BAD_COUNT),
                    b.select(same_warp, i32(abi.SYNC_WARP_DIVERGENT), i32(abi.SYNC_BLOCK_DIVERGENT)))
    has_other = b.not_(none)
    other_resume = b.select(has_other, _resume(b, frame_at(b, ws, fsize, b.select(has_other, other, stuck))), i32(0))
    b.call(found_fn(b.module), [stuck_fr, what, other, other_resume, i64(0)])


# ------------------------------------------------------------------------- warp collectives

def check_collective(b, ws, fsize, lo, hi, kinds, c, site, group_mask):
    """Warp [lo, hi) resolves the collective at `site` for lane `c` and its member mask
    `group_mask` (as given, i32): each lane taking part (waiting there, named in the mask, and
    c) must be in its own mask and give the same mask; each lane of the block that the mask
    names must take part."""
    kind = b.load(b.gep(kinds, [b.sub(site, i32(1))]))
    unmasked = ir.Constant(I1, 0)
    for name in ("activemask", "matrix", "warp_step"):
        unmasked = b.or_(unmasked, b.icmp_signed("==", kind, i32(abi.SITE[name])))
    is_warp_sync = b.icmp_signed("==", kind, i32(abi.SITE["warp_sync"]))
    with b.if_then(b.not_(unmasked)):
        s = _Slots(b, present=0)
        with for_range(b, lo, hi, "sc") as u:
            fr = frame_at(b, ws, fsize, u)
            bit = b.shl(i32(1), b.sub(u, lo))
            mask = load_field(b, fr, C["op_mask"], I32)
            waiting = b.icmp_signed("==", _state(b, fr), i32(abi.THREAD_WAIT_WARP))
            at_site = b.and_(waiting, b.icmp_signed("==", _resume(b, fr), site))
            named = b.icmp_unsigned("!=", b.and_(group_mask, bit), i32(0))
            takes_part = b.and_(at_site, b.or_(named, b.icmp_signed("==", u, c)))
            # bar.warp.sync: lanes at another bar.warp.sync with the same mask take part too
            u_kind = b.load(b.gep(kinds, [b.sub(b.select(waiting, _resume(b, fr), i32(1)), i32(1))]))
            same_sync = b.and_(b.and_(waiting, is_warp_sync),
                               b.and_(b.icmp_signed("==", u_kind, i32(abi.SITE["warp_sync"])),
                                      b.icmp_unsigned("==", mask, group_mask)))
            present = b.or_(takes_part, same_sync)
            b.store(b.or_(b.load(s.present), b.select(present, bit, i32(0))), s.present)
            with b.if_then(takes_part):
                masks = b.or_(b.zext(mask, I64), b.shl(b.zext(group_mask, I64), i64(32)))
                outside = b.icmp_unsigned("==", b.and_(mask, bit), i32(0))
                with b.if_else(outside) as (then, otherwise):
                    with then:
                        _report(b, ws, fsize, u, abi.SYNC_NOT_IN_MASK, i32(NO_THREAD), masks)
                    with otherwise:
                        with b.if_then(b.icmp_unsigned("!=", mask, group_mask), likely=False):
                            _report(b, ws, fsize, u, abi.SYNC_MASKS_DIFFER, c, masks)
        lanes = b.sub(hi, lo)
        existing = b.select(b.icmp_unsigned(">=", lanes, i32(32)), i32(-1), b.sub(b.shl(i32(1), lanes), i32(1)))
        missing = b.and_(b.and_(group_mask, existing), b.not_(b.load(s.present)))
        # (a lane outside its own mask was reported as such: what its mask names is no group)
        c_bit = b.shl(i32(1), b.sub(c, lo))
        missing = b.select(b.icmp_unsigned("==", b.and_(group_mask, c_bit), i32(0)), i32(0), missing)
        with b.if_then(b.icmp_unsigned("!=", missing, i32(0)), likely=False):
            cttz = declare(b.module, "llvm.cttz.i32", I32, [I32, I1])
            first = b.add(lo, b.call(cttz, [missing, ir.Constant(I1, 1)]))
            masks = b.or_(b.zext(group_mask, I64), b.shl(b.zext(missing, I64), i64(32)))
            _report(b, ws, fsize, c, abi.SYNC_LANE_MISSING, first, masks)
