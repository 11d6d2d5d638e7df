"""Threads waiting after a failed mbarrier test (ops/mbarrier.py), in the block function.

A thread that stopped at an `mbar_wait` site (state THREAD_WAIT_MBAR) keeps in its frame the
address of the mbarrier object it tested (op_a) and the word it saw there (res). After each
general round (blockfunction.py) `anycuda.resolve_mbarrier_waits` lets it run again as soon
as that word changed: another thread arrived, a transaction completed, the phase moved on.
When no word changed and nothing else of the block can run (no thread runnable, no barrier
released), every waiter runs again anyway: its test fails again and the program decides
(nvcc's loops test again; a loop that arrives itself between tests goes on). That forced
round is how a try_wait whose time limit runs out behaves on a GPU.

No schedule can hang: a forced round that leaves the block as it found it (every thread's
state, resume point and waited-on word the same: a signature of them) counts towards
STALLED_ROUNDS; that many in a row is a deadlock (the phases awaited can never complete) and
the launch fails with LAUNCH_ERR_MBARRIER_DEADLOCK, naming the first waiting thread's block.
The count and not the first repetition: a loop that counts its failed tests in a register
before doing something else leaves no trace in the signature.

A thread that spins on a word (ops/spinwaits.py) waits here the same way, on the aligned word
that holds it. Where that word lies outside the block's shared memory (a flag in global or
mapped memory, which the host or another block may write at any time) the address carries
OUTSIDE in its low bit, and the block's rounds never call its waiting a deadlock: it spins,
as it would on a GPU, letting the block's other threads run between its tests.
"""
from __future__ import annotations

from llvmlite import ir

from .. import abi
from ..irutil import for_range, i32, i64, load_field, store_field
from ..types import I32, I64, PTR
from .workspace import C, emit_record_error, frame_at, thread_state

STALLED_ROUNDS = 1 << 14
OUTSIDE = 1                 # op_a's low bit: a word outside the block's shared memory (ops/spinwaits.py)


def _mix(b, h, v):
    """A 64-bit hash step (multiply-xorshift) of h with v."""
    h = b.mul(b.xor(h, v), i64(0x9E3779B97F4A7C15))
    return b.xor(h, b.lshr(h, i64(29)))


def emit_resolve_waits(module: ir.Module) -> ir.Function:
    """i32 anycuda.resolve_mbarrier_waits(i8* ws, i64 fsize, i32 n, i32 others, i64* seen,
    i8* header): make runnable each waiting thread whose mbarrier word changed; when none did
    and `others` (threads the barriers released) is 0, every waiting thread. `seen` holds the
    signature of the last forced round and the count of forced rounds in a row that left it
    unchanged (two i64, 0 at the block's start). Returns the number of threads made
    runnable; -1 on a deadlock (the error is recorded, naming the block from `header`)."""
    fn = module.globals.get("anycuda.resolve_mbarrier_waits")
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, I64, I32, I32, I64.as_pointer(), PTR]),
                     name="anycuda.resolve_mbarrier_waits")
    fn.linkage = "internal"
    ws, fsize, n, others, seen, header = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    v = {k: b.alloca(I32, name=k) for k in ("released", "waiting", "first", "outside")}
    sig = b.alloca(I64, name="signature")
    for k, init in (("released", 0), ("waiting", 0), ("first", -1), ("outside", 0)):
        b.store(i32(init), v[k])
    b.store(i64(0), sig)
    waits = lambda fr: b.icmp_signed("==", b.load(thread_state(b, fr)), i32(abi.THREAD_WAIT_MBAR))
    with for_range(b, i32(0), n, "t") as t:
        fr = frame_at(b, ws, fsize, t)
        st = b.load(thread_state(b, fr))
        h = _mix(b, b.load(sig), b.zext(st, I64))
        h = _mix(b, h, b.zext(load_field(b, fr, C["resume"], I32), I64))
        with b.if_then(waits(fr)):
            watched = load_field(b, fr, C["op_a"], I64)
            word = b.load(b.inttoptr(b.and_(watched, i64(~7)), I64.as_pointer()), align=8)
            b.store(b.or_(b.load(v["outside"]), b.trunc(b.and_(watched, i64(OUTSIDE)), I32)), v["outside"])
            seen_word = load_field(b, fr, C["res"], I64)
            b.store(_mix(b, _mix(b, h, load_field(b, fr, C["op_a"], I64)), seen_word), sig)
            b.store(b.add(b.load(v["waiting"]), i32(1)), v["waiting"])
            with b.if_then(b.icmp_signed("<", b.load(v["first"]), i32(0))):
                b.store(t, v["first"])
            with b.if_then(b.icmp_unsigned("!=", word, seen_word)):
                b.store(i32(abi.THREAD_RUN), thread_state(b, fr))
                b.store(b.add(b.load(v["released"]), i32(1)), v["released"])
        with b.if_then(b.icmp_signed("!=", st, i32(abi.THREAD_WAIT_MBAR))):
            b.store(h, sig)
    released = b.load(v["released"])
    settled = b.or_(b.icmp_signed("!=", released, i32(0)),
                    b.or_(b.icmp_signed("==", b.load(v["waiting"]), i32(0)), b.icmp_signed("!=", others, i32(0))))
    with b.if_then(settled):
        b.ret(released)
    # nothing can run but the waiters: they run again, unless that has changed nothing too often
    stalls = b.gep(seen, [i32(1)])
    same = b.icmp_unsigned("==", b.load(sig), b.load(seen))
    # (a word that the host or other blocks may write: no round of this block tells a deadlock)
    same = b.and_(same, b.icmp_signed("==", b.load(v["outside"]), i32(0)))
    count = b.select(same, b.add(b.load(stalls), i64(1)), i64(0))
    b.store(b.load(sig), seen)
    b.store(count, stalls)
    with b.if_then(b.icmp_unsigned(">=", count, i64(STALLED_ROUNDS))):
        stuck = frame_at(b, ws, fsize, b.load(v["first"]))
        for k in ("ctaid_x", "ctaid_y", "ctaid_z"):
            store_field(b, stuck, C[k], load_field(b, header, C[k], I32))
        b.call(emit_record_error(module), [stuck, i32(abi.LAUNCH_ERR_MBARRIER_DEADLOCK)])
        b.ret(i32(-1))
    with for_range(b, i32(0), n, "f") as t:
        fr = frame_at(b, ws, fsize, t)
        with b.if_then(waits(fr)):
            b.store(i32(abi.THREAD_RUN), thread_state(b, fr))
    b.ret(b.load(v["waiting"]))
    return fn


def stall_slots(b):
    """The `seen` of emit_resolve_waits: two i64 stack slots of the block function, zero."""
    seen = b.alloca(ir.ArrayType(I64, 2), name="mbarrier.seen")
    b.store(ir.Constant(seen.type.pointee, None), seen)
    return b.bitcast(seen, I64.as_pointer())


def emit_released(b, fail, seen, args):
    """A call of emit_resolve_waits where the builder `b` is, with `seen` (stall_slots, None
    in a kernel without mbarrier waits: then 0) and args (ws, fsize, n, others, header), and
    on to the block `fail` on a deadlock; the number of threads it made runnable."""
    if seen is None:
        return i32(0)
    ws, fsize, n, others, header = args
    released = b.call(emit_resolve_waits(b.module), [ws, fsize, n, others, seen, header])
    ok = b.function.append_basic_block("waits.resolved")
    b.cbranch(b.icmp_signed("<", released, i32(0)), fail, ok)
    b.position_at_end(ok)
    return released


def wait_state(b, kind, state, site_kinds):
    """The state of a thread stopped at a site of `kind` (i32): THREAD_WAIT_MBAR at an
    mbarrier wait, else `state`; `site_kinds`: the kernel's."""
    if abi.SITE["mbar_wait"] not in site_kinds:
        return state
    return b.select(b.icmp_signed("==", kind, i32(abi.SITE["mbar_wait"])), i32(abi.THREAD_WAIT_MBAR), state)
