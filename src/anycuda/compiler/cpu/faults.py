"""Native code that turns a memory fault inside a kernel into a launch error.

A worker registers a FaultTrap (a sigjmp_buf plus two slots) under a pthread key before it
runs blocks. The SIGSEGV/SIGBUS handler built here looks the trap up for the faulting
thread; if there is one, it records the address and jumps back into the worker, which
reports CUDA_ERROR_ILLEGAL_ADDRESS for the launch. A fault on any other thread goes to the
handler that was installed before (Python's faulthandler, or the default action).
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


def build_handler_module() -> ir.Module:
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
    ours = fn.append_basic_block("ours")
    other = fn.append_basic_block("other")
    b.cbranch(b.icmp_unsigned("!=", b.ptrtoint(trap, I64), i64(0)), ours, other)
    b.position_at_end(ours)
    addr = b.load(b.bitcast(b.gep(info, [i64(16)]), I64.as_pointer()))
    b.store(addr, b.bitcast(b.gep(trap, [i64(abi.FAULT_ADDR)]), I64.as_pointer()))
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


def emit_trap_setup(b: ir.IRBuilder, L, on_fault):
    """In a worker: register a FaultTrap and arm it. Returns the trap pointer; control
    arrives in the block `on_fault` (positioned by the caller) after a fault."""
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
    key = b.trunc(b.load(b.bitcast(b.gep(L, [i64(abi.LAUNCH["fault_key"])]), I64.as_pointer())), I32)
    b.call(setspecific, [key, trap])
    r = b.call(sigsetjmp, [trap, i32(1)])
    cont = fn.append_basic_block("armed")
    b.cbranch(b.icmp_signed("!=", r, i32(0)), on_fault, cont)
    b.position_at_end(cont)
    return trap, key
