"""A block's workspace: where its block function keeps the threads' state between steps.

A worker's workspace for one block starts 64-byte aligned with the threads' frames
(`frame_at`: a header laid out by abi.CTX, whose `state` field `thread_state` points to, then
the step function's locals), then the spill arrays (registers live across a site, an element
per thread), the collective arrays (COLL_ARRAYS: a warp collective's operand and results, an
element per thread), the stop codes of a uniform round, and the block's state between the
worker's calls (the guard probe's answer, the warps' turn answers and turn areas); the
block's shared memory follows (`workspace_layout`, which the launch loop uses too).
`emit_record_error` records a launch's first error in its launch record.
"""
from __future__ import annotations

from llvmlite import ir

from .. import abi
from ..irutil import field_ptr, i32, i64, load_field, store_field
from ..types import I32, I64, PTR

C = abi.CTX


def frame_at(b, ws, fsize, t):
    return b.gep(ws, [b.mul(b.sext(t, I64), fsize)])


# A warp collective's value operand and results, one array each with an element per thread,
# after the spill arrays (ops/suspending._coll_slot): name -> (byte offset, element type)
COLL_ARRAYS = {"a": (0, I64), "res": (8 * abi.MAX_BLOCK_THREADS, I64),
               "pred": (16 * abi.MAX_BLOCK_THREADS, I32), "res_pred": (20 * abi.MAX_BLOCK_THREADS, I32)}
COLL_BYTES = 24 * abi.MAX_BLOCK_THREADS


def collective_at(b, coll, name, t):
    """Pointer to thread t's element of the collective array `name` (coll: the arrays' base)."""
    off, ty = COLL_ARRAYS[name]
    return b.bitcast(b.gep(coll, [b.add(i64(off), b.mul(b.sext(t, I64), i64(ty.width // 8)))]), ty.as_pointer())


def emit_record_error(module: ir.Module) -> ir.Function:
    """void anycuda.record_error(i8* ctx, i32 code): the first error of a launch wins."""
    fn = module.globals.get("anycuda.record_error")
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I32]), name="anycuda.record_error")
    fn.linkage = "internal"
    ctx, code = fn.args
    b = ir.IRBuilder(fn.append_basic_block())
    launch = b.inttoptr(load_field(b, ctx, C["launch"], I64), PTR)
    res = b.cmpxchg(field_ptr(b, launch, abi.LAUNCH["error"], I32), i32(0), code, "seq_cst", "seq_cst")
    with b.if_then(b.extract_value(res, 1)):
        gx = load_field(b, ctx, C["nctaid_x"], I32)
        gy = load_field(b, ctx, C["nctaid_y"], I32)
        cx, cy, cz = (b.zext(load_field(b, ctx, C[k], I32), I64) for k in ("ctaid_x", "ctaid_y", "ctaid_z"))
        gx64, gy64 = b.zext(gx, I64), b.zext(gy, I64)
        blk = b.add(cx, b.mul(gx64, b.add(cy, b.mul(gy64, cz))))
        store_field(b, launch, abi.LAUNCH["err_block"], blk)
        store_field(b, launch, abi.LAUNCH["err_thread"], b.sext(load_field(b, ctx, C["linear"], I32), I64))
    b.ret_void()
    return fn


def thread_state(b, frame):
    return field_ptr(b, frame, C["state"], I32)


MOST_WARPS = abi.MAX_BLOCK_THREADS // 32
# a block's state between the worker's calls, in its workspace: the guard probe's answer
# (i32 at 0), the warps' last turn answers (i32 each, at TURN_ANSWERS) and their turn areas
# (at TURN_AREAS, one stride apart; 64-byte aligned, as the regions store their vectors)
TURN_ANSWERS = 64
TURN_AREAS = TURN_ANSWERS + (4 * MOST_WARPS + 63) // 64 * 64


def turn_stride(regions) -> int:
    """Bytes per warp of the block's turn areas: the largest state a region's warp leaves
    between turns (warpregions, "turns"), 0 when none gives way."""
    return max(((r.turn_bytes + 63) // 64 * 64 for r in (regions or {}).values()), default=0)


def no_site_state_offset(frame_size: int) -> int:
    """Where the state between calls (TURN_ANSWERS, TURN_AREAS) starts in the workspace of a
    block without sites that gives way: after its one frame."""
    return (frame_size + 63) // 64 * 64


def no_site_frames_bytes(frame_size: int, stride: int) -> int:
    """The bytes before the shared window in such a block's workspace: its frame, its state."""
    return no_site_state_offset(frame_size) + TURN_AREAS + stride * MOST_WARPS


def up64(b, v):
    """i64 v rounded up to a multiple of 64."""
    return b.and_(b.add(v, i64(63)), i64(~63))


def shared_window_stride(b, shared_total):
    """i64: how far apart the shared windows of a block program's group of blocks lie in one
    workspace slot (the launch lays them out, the program finds its warp's): the block's
    shared bytes (i64) rounded up to 16."""
    return b.and_(b.add(shared_total, i64(15)), i64(~15))


def workspace_layout(b, n, frame_size, spill_bytes, stride=0):
    """Byte offsets (i64) in a block's workspace of the spill arrays, the collective arrays
    (COLL_ARRAYS), the per-thread stop codes of a uniform round, the block's state between
    calls (TURN_ANSWERS, TURN_AREAS; `stride`: turn_stride), and the end: frames first,
    shared memory after the end. The workspace starts 64-byte aligned."""
    n64 = b.zext(n, I64)
    spill = b.mul(n64, i64(frame_size))
    coll = b.add(spill, i64(abi.MAX_BLOCK_THREADS * spill_bytes))
    codes = b.add(coll, i64(COLL_BYTES))
    state = up64(b, b.add(codes, b.mul(n64, i64(4))))
    return spill, coll, codes, state, b.add(state, i64(TURN_AREAS + stride * MOST_WARPS))
