"""Grid-wide synchronisation: the grid workspace of a cooperative launch, and waiting on it.

CUDA's cooperative groups find the grid barrier through `%envreg1` (high half) and
`%envreg2` (low half; cooperative_groups/details/driver_abi.h reads them as
`load_env_reg64<HiReg=1, LoReg=2>`): the address of a workspace the driver gives each cooperative launch
(0 in a normal launch, so `grid.is_valid()` is false there). `grid.sync()` counts arrivals
with an atomic add on its barrier word, then one thread per block polls the word with
`ld.acquire.gpu` until the last arrival flips its top bit. A cooperative launch runs every
block on its own OS thread (runtime/program.py), so the polling thread of one block waits
while other blocks, maybe on the same core, still have to arrive.

In a module that reads the workspace, every volatile, relaxed or acquire load from global
memory is followed by `anycuda.grid_wait` while the launch is cooperative: the thread gives
the CPU away (sched_yield) so that the blocks it waits for run, and gives up when the launch
has already failed (a fault in another block would leave it polling forever) or when a
load from the barrier word has kept returning the same value for longer than the
workspace's timeout (blocks that never arrive: on a GPU a hang, here
LAUNCH_ERR_GRID_DEADLOCK). Modules that do not read `%envreg` get the same code as before.
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..irutil import declare, field_ptr, i32, i64, load_field
from ..types import I32, I64, PTR

WAIT_GO_ON, WAIT_LAUNCH_FAILED, WAIT_DEADLOCK = 0, 1, 2
GRID_WS_REGISTERS = ("envreg1", "envreg2")


def _reads_workspace(op) -> bool:
    if isinstance(op, pir.SpecialReg):
        return op.name in GRID_WS_REGISTERS
    if isinstance(op, pir.Vec):
        return any(_reads_workspace(item) for item in op.items)
    return False


def reads_grid_workspace(module: pir.Module) -> bool:
    """Whether some function of the module reads the grid workspace's address."""
    return any(isinstance(st, pir.Instruction) and any(_reads_workspace(op) for op in st.operands)
               for fn in module.functions if fn.body for st in fn.body)


def workspace_register(b: ir.IRBuilder, launch: ir.Value, name: str) -> ir.Value:
    """%envreg1 / %envreg2: the high / low half of the launch's grid workspace address."""
    ws = load_field(b, launch, abi.LAUNCH["grid_workspace"], I64)
    return b.trunc(b.lshr(ws, i64(32)) if name == "envreg1" else ws, I32)


def emit_grid_wait(module: ir.Module) -> ir.Function:
    """i32 anycuda.grid_wait(i8* launch, i64 address, i64 value), after a load of `value`
    from `address` in a cooperative launch: WAIT_GO_ON, WAIT_LAUNCH_FAILED or WAIT_DEADLOCK."""
    fn = module.globals.get("anycuda.grid_wait")
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, I64, I64]), name="anycuda.grid_wait")
    fn.linkage = "internal"
    launch, addr, value = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ws_int = load_field(b, launch, abi.LAUNCH["grid_workspace"], I64)
    ws = b.inttoptr(ws_int, PTR)
    error = b.load_atomic(field_ptr(b, launch, abi.LAUNCH["error"], I32), "monotonic", 4)
    with b.if_then(b.icmp_unsigned("!=", error, i32(0)), likely=False):
        b.ret(i32(WAIT_LAUNCH_FAILED))
    b.call(declare(module, "sched_yield", I32, []), [])
    barrier = b.add(ws_int, i64(abi.GRID_WS["barrier"]))
    on_barrier = b.and_(b.icmp_unsigned(">=", addr, barrier), b.icmp_unsigned("<", addr, b.add(barrier, i64(4))))
    with b.if_then(b.not_(on_barrier)):
        b.ret(i32(WAIT_GO_ON))
    # the watchdog: how long the barrier word has read the same
    seen_p = field_ptr(b, ws, abi.GRID_WS["seen"], I64)
    since_p = field_ptr(b, ws, abi.GRID_WS["since_ns"], I64)
    seen = b.load_atomic(seen_p, "monotonic", 8)
    since = b.load_atomic(since_p, "monotonic", 8)
    now = b.call(_clock_ns(module), [])
    marked = b.or_(b.and_(value, i64(0xFFFFFFFF)), i64(1 << 32))     # never 0, the unset value
    changed = b.or_(b.icmp_unsigned("!=", seen, marked), b.icmp_unsigned("==", since, i64(0)))
    with b.if_then(changed):
        b.store_atomic(marked, seen_p, "monotonic", 8)
        b.store_atomic(now, since_p, "monotonic", 8)
        b.ret(i32(WAIT_GO_ON))
    timeout = b.load_atomic(field_ptr(b, ws, abi.GRID_WS["timeout_ns"], I64), "monotonic", 8)
    stuck = b.icmp_unsigned(">", b.sub(now, since), timeout)
    b.ret(b.select(stuck, i32(WAIT_DEADLOCK), i32(WAIT_GO_ON)))
    return fn


def _clock_ns(module: ir.Module) -> ir.Function:
    """i64 anycuda.monotonic_ns(): CLOCK_MONOTONIC in nanoseconds."""
    fn = module.globals.get("anycuda.monotonic_ns")
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(I64, []), name="anycuda.monotonic_ns")
    fn.linkage = "internal"
    ts_ty = ir.LiteralStructType([I64, I64])
    clock_gettime = declare(module, "clock_gettime", I32, [I32, ts_ty.as_pointer()])
    b = ir.IRBuilder(fn.append_basic_block())
    ts = b.alloca(ts_ty)
    b.call(clock_gettime, [i32(1), ts])      # CLOCK_MONOTONIC
    sec = b.load(b.gep(ts, [i32(0), i32(0)]))
    nsec = b.load(b.gep(ts, [i32(0), i32(1)]))
    b.ret(b.add(b.mul(sec, i64(1_000_000_000)), nsec))
    return fn


def after_ordered_load(f, addr: ir.Value, value: ir.Value) -> None:
    """After a volatile/relaxed/acquire load from global memory in a module that reads the
    grid workspace: in a cooperative launch, wait politely (see emit_grid_wait); when the
    wait gives up, the thread traps with LAUNCH_ERR_GRID_DEADLOCK (a failed launch keeps its
    first error)."""
    b = f.b
    launch = f.launch_ptr()
    ws = load_field(b, launch, abi.LAUNCH["grid_workspace"], I64)
    with b.if_then(b.icmp_unsigned("!=", ws, i64(0)), likely=False):
        bits = value.type.width if isinstance(value.type, ir.IntType) else 64
        v64 = b.zext(value, I64) if bits < 64 else value
        r = b.call(emit_grid_wait(b.module), [launch, b.ptrtoint(addr, I64), v64])
        stop = f.fn.append_basic_block("grid.wait.stop")
        go_on = f.fn.append_basic_block("grid.wait.on")
        b.cbranch(b.icmp_signed("!=", r, i32(WAIT_GO_ON)), stop, go_on)
        b.position_at_end(stop)
        f.emit_trap(abi.LAUNCH_ERR_GRID_DEADLOCK)
        b.position_at_end(go_on)
