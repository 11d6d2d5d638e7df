"""Where a launch's workers run: not on the CPU of the thread that launched.

The launching thread is worker 0 (GOMP_parallel); libgomp's other threads sleep between
launches that a pause separates. Waking one, Linux may put it on the waker's CPU, where the
launching thread goes on running blocks: the woken worker waits for the load balancer (a
scheduler tick, ~4 ms here) and then shares that CPU while another one idles. On the
2-core VM of the benchmarks this was what made saxpy's slow rounds, for C's OpenMP loop as
for anycuda (benchmarks/NOTES.md, "What saxpy's slow rounds are"); a C model of the fix
below took C's launches over 11 ms after a pause from 3-8 of 30 to 0-1 of 30.

So the launch function notes its CPU in the record (`caller_cpu`), and a worker other than
worker 0 that starts on that CPU moves itself: its affinity set without that CPU (Linux
migrates it at once), then the set it had, which leaves it where it went. A thread allowed
only that CPU stays. Costs: a `sched_getcpu` (vDSO) per worker and launch; two syscalls
where a worker moves.
"""
from __future__ import annotations

from llvmlite import ir

from .. import abi
from ..irutil import declare, field_ptr, i32, i64, load_field
from ..types import I32, I64, PTR

CPU_SET_WORDS = 16          # glibc's cpu_set_t: 1024 bits
MOVE_OFF = "anycuda.move_off_cpu"


def note_caller_cpu(b: ir.IRBuilder, L) -> None:
    """In a launch function, before its workers start: the launching thread's CPU."""
    cpu = b.call(declare(b.module, "sched_getcpu", I32, []), [])
    b.store(cpu, field_ptr(b, L, abi.LAUNCH["caller_cpu"], I32))


def leave_caller_cpu(b: ir.IRBuilder, L, worker: ir.Value) -> None:
    """In a worker (`worker`: its libgomp thread number): move off the launching thread's
    CPU when it starts there."""
    caller = load_field(b, L, abi.LAUNCH["caller_cpu"], I32)
    with b.if_then(b.and_(b.icmp_signed("!=", worker, i32(0)), b.icmp_signed(">=", caller, i32(0))), likely=True):
        here = b.call(declare(b.module, "sched_getcpu", I32, []), [])
        with b.if_then(b.icmp_signed("==", here, caller), likely=False):
            b.call(emit_move_off_cpu(b.module), [caller])


def emit_move_off_cpu(module: ir.Module) -> ir.Function:
    """`void move_off_cpu(i32 cpu)`: the calling thread leaves `cpu` for another it may run
    on, keeping the CPUs it may run on (once per module)."""
    if MOVE_OFF in module.globals:
        return module.globals[MOVE_OFF]
    mask_ty = ir.ArrayType(I64, CPU_SET_WORDS)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I32]), name=MOVE_OFF)
    fn.linkage = "internal"
    (cpu,) = fn.args
    self_ = declare(module, "pthread_self", I64, [])
    get = declare(module, "pthread_getaffinity_np", I32, [I64, I64, PTR])
    set_ = declare(module, "pthread_setaffinity_np", I32, [I64, I64, PTR])
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    leave = fn.append_basic_block("leave")
    had, away = b.alloca(mask_ty, name="had"), b.alloca(mask_ty, name="away")
    as_bytes = lambda mask: b.bitcast(mask, PTR)
    me = b.call(self_, [])
    size = i64(8 * CPU_SET_WORDS)
    known = b.icmp_signed("==", b.call(get, [me, size, as_bytes(had)]), i32(0))
    word = b.lshr(cpu, i32(6))
    in_set = b.and_(known, b.icmp_unsigned("<", word, i32(CPU_SET_WORDS)))
    clear = fn.append_basic_block("clear")
    b.cbranch(in_set, clear, leave)
    b.position_at_end(clear)
    b.store(b.load(had), away)
    slot = b.gep(away, [i32(0), word])
    bit = b.shl(i64(1), b.zext(b.and_(cpu, i32(63)), I64))
    b.store(b.and_(b.load(slot), b.xor(bit, i64(-1))), slot)
    others = i64(0)
    for k in range(CPU_SET_WORDS):
        others = b.or_(others, b.load(b.gep(away, [i32(0), i32(k)])))
    move = fn.append_basic_block("move")
    b.cbranch(b.icmp_unsigned("!=", others, i64(0)), move, leave)
    b.position_at_end(move)
    b.call(set_, [me, size, as_bytes(away)])
    b.call(set_, [me, size, as_bytes(had)])
    b.branch(leave)
    b.position_at_end(leave)
    b.ret_void()
    return fn
