"""Native code that turns a memory fault inside a kernel into a launch error, and stops a
launch that runs past its time limit.

A worker registers a FaultTrap (a sigjmp_buf plus a few slots) under a pthread key before it
runs blocks. The SIGSEGV/SIGBUS handler built here looks the trap up for the faulting
thread; if there is one, it records the address and jumps back into the worker, which
reports CUDA_ERROR_ILLEGAL_ADDRESS for the launch. A fault on any other thread goes to the
handler that was installed before (Python's faulthandler, or the default action).

The same handler takes the watchdog's stop signal (runtime/watchdog.py), sent to a worker
with the launch record as its value (pthread_sigqueue): where the thread's trap is armed for
that launch and the worker is not `held` (in a printf or assert hook, which run Python, or in
malloc and free, which hold libc's locks: a jump out of those would leave them held), it
jumps back as for a fault, after the watchdog has set the launch's error; else it returns,
and the watchdog sends the signal again a little later.
"""
from __future__ import annotations

from llvmlite import ir

from .. import abi
from ..irutil import declare, i32, i64
from ..types import I32, I64, PTR

HANDLER = "anycuda.fault_handler"
KEY = "anycuda.fault_key"
PREV = "anycuda.fault_prev"          # previous handler address
PREV_INFO = "anycuda.fault_prev_siginfo"  # nonzero when it takes (sig, info, ctx)


def build_handler_module(stop_signal: int) -> ir.Module:
    mod = ir.Module(name="anycuda_faults")
    key = ir.GlobalVariable(mod, I64, name=KEY)
    prev = ir.GlobalVariable(mod, I64, name=PREV)
    prev_info = ir.GlobalVariable(mod, I64, name=PREV_INFO)
    for g in (key, prev, prev_info):
        g.initializer = i64(0)
    getspecific = declare(mod, "pthread_getspecific", PTR, [I32])
    longjmp = declare(mod, "siglongjmp", ir.VoidType(), [PTR, I32])
    signal = declare(mod, "signal", I64, [I32, I64])
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I32, PTR, PTR]), name=HANDLER)
    sig, info, uctx = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    trap = b.call(getspecific, [b.trunc(b.load(key), I32)])
    armed = b.icmp_unsigned("!=", b.ptrtoint(trap, I64), i64(0))
    slot = lambda off: _trap_slot(b, trap, off)
    info_word = lambda off: b.load(b.bitcast(b.gep(info, [i64(off)]), I64.as_pointer()))
    fault, stop = fn.append_basic_block("fault"), fn.append_basic_block("stop")
    b.cbranch(b.icmp_signed("==", sig, i32(stop_signal)), stop, fault)

    b.position_at_end(stop)
    ignore, check = fn.append_basic_block("ignore"), fn.append_basic_block("check")
    b.cbranch(armed, check, ignore)
    b.position_at_end(check)
    # (siginfo_t of a queued signal: si_value at byte 24)
    ours = b.icmp_unsigned("==", b.load_atomic(slot(abi.FAULT_LAUNCH), "monotonic", 8), info_word(24))
    free = b.icmp_unsigned("==", b.load_atomic(slot(abi.FAULT_HELD), "monotonic", 8), i64(0))
    jump = fn.append_basic_block("jump")
    b.cbranch(b.and_(ours, free), jump, ignore)
    b.position_at_end(jump)
    b.store(i64(0), slot(abi.FAULT_ADDR))
    b.call(longjmp, [trap, i32(1)])
    b.unreachable()
    b.position_at_end(ignore)
    b.ret_void()

    b.position_at_end(fault)
    jump_back, other = fn.append_basic_block("ours"), fn.append_basic_block("other")
    b.cbranch(armed, jump_back, other)
    b.position_at_end(jump_back)
    b.store(info_word(16), slot(abi.FAULT_ADDR))
    b.call(longjmp, [trap, i32(1)])
    b.unreachable()
    b.position_at_end(other)
    p = b.load(prev)
    chain = fn.append_basic_block("chain")
    default = fn.append_basic_block("default")
    b.cbranch(b.icmp_unsigned(">", p, i64(1)), chain, default)   # 0 = SIG_DFL, 1 = SIG_IGN
    b.position_at_end(chain)
    with b.if_else(b.icmp_unsigned("!=", b.load(prev_info), i64(0))) as (three, one):
        with three:
            b.call(b.inttoptr(p, fn.function_type.as_pointer()), [sig, info, uctx])
        with one:
            b.call(b.inttoptr(p, ir.FunctionType(ir.VoidType(), [I32]).as_pointer()), [sig])
    b.ret_void()
    b.position_at_end(default)
    b.call(signal, [sig, i64(0)])      # back to the default action; the fault repeats and ends the process
    b.ret_void()
    return mod


def emit_trap_setup(b: ir.IRBuilder, L, on_fault, wid):
    """In a worker (number `wid` of its team): register a FaultTrap and arm it, for the
    launch record L, and where the launch has a time limit tell the watchdog which thread
    runs worker `wid`. Returns the trap pointer and the key; control arrives in the block
    `on_fault` (positioned by the caller) after a fault or a stop."""
    mod = b.module
    setspecific = declare(mod, "pthread_setspecific", I32, [I32, PTR])
    sigsetjmp = mod.globals.get("__sigsetjmp")
    if sigsetjmp is None:
        sigsetjmp = ir.Function(mod, ir.FunctionType(I32, [PTR, I32]), name="__sigsetjmp")
        sigsetjmp.attributes.add("returns_twice")
    fn = b.function
    with b.goto_entry_block():
        slot = b.alloca(ir.ArrayType(ir.IntType(8), abi.FAULT_TRAP_BYTES), name="fault_trap")
        slot.align = 16
    trap = b.bitcast(slot, PTR)
    b.store_atomic(b.ptrtoint(L, I64), _trap_slot(b, trap, abi.FAULT_LAUNCH), "monotonic", 8)
    b.store_atomic(i64(0), _trap_slot(b, trap, abi.FAULT_HELD), "monotonic", 8)
    key = b.trunc(b.load(b.bitcast(b.gep(L, [i64(abi.LAUNCH["fault_key"])]), I64.as_pointer())), I32)
    b.call(setspecific, [key, trap])
    r = b.call(sigsetjmp, [trap, i32(1)])
    cont = fn.append_basic_block("armed")
    b.cbranch(b.icmp_signed("!=", r, i32(0)), on_fault, cont)
    b.position_at_end(cont)
    _note_thread(b, L, wid, b.call(declare(mod, "pthread_self", I64, []), []))
    return trap, key


def emit_trap_release(b: ir.IRBuilder, L, trap, key, wid):
    """At a worker's end: no stop from here on, the watchdog forgets the thread, the trap
    is unregistered."""
    b.store_atomic(i64(1), _trap_slot(b, trap, abi.FAULT_HELD), "monotonic", 8)
    _note_thread(b, L, wid, i64(0))
    b.call(declare(b.module, "pthread_setspecific", I32, [I32, PTR]), [key, ir.Constant(PTR, None)])


def _trap_slot(b, trap, offset):
    return b.bitcast(b.gep(trap, [i64(offset)]), I64.as_pointer())


def block_slot(b: ir.IRBuilder, fault_key, otherwise) -> ir.Value:
    """i64*: where the calling worker's trap keeps the index of the block it runs (the one a
    fault names), or `otherwise` (an i64*) where no trap is set. `fault_key` is the launch
    record's."""
    trap = b.call(declare(b.module, "pthread_getspecific", PTR, [I32]), [b.trunc(fault_key, I32)])
    armed = b.icmp_unsigned("!=", b.ptrtoint(trap, I64), i64(0))
    return b.select(armed, _trap_slot(b, trap, abi.FAULT_BLOCK), otherwise)


def _note_thread(b, L, wid, value):
    """watch_threads[wid] = value, where the launch has a time limit."""
    table = b.load(b.bitcast(b.gep(L, [i64(abi.LAUNCH["watch_threads"])]), I64.as_pointer()))
    with b.if_then(b.icmp_unsigned("!=", table, i64(0)), likely=False):
        b.store_atomic(value, b.gep(b.inttoptr(table, I64.as_pointer()), [b.zext(wid, I64)]), "monotonic", 8)


def held(b: ir.IRBuilder, fault_key, call):
    """call() with the worker's trap `held` (see the module docstring): no stop jumps out of
    it. `fault_key` is the launch record's (i64)."""
    trap = b.call(declare(b.module, "pthread_getspecific", PTR, [I32]), [b.trunc(fault_key, I32)])
    armed = b.icmp_unsigned("!=", b.ptrtoint(trap, I64), i64(0))
    count = _trap_slot(b, trap, abi.FAULT_HELD)

    def step(by):
        with b.if_then(armed):
            b.store_atomic(b.add(b.load_atomic(count, "monotonic", 8), i64(by)), count, "monotonic", 8)
    step(1)
    result = call()
    step(-1)
    return result
