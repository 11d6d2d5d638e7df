"""The instructions that suspend a thread until others arrive: block barriers (bar, barrier)
and warp collectives (shfl, vote, match, redux, elect, activemask, bar.warp.sync). Each stores
its operands in the thread's collective slots and suspends; the block scheduler
(simt/collectives.py, simt/barriers.py) resolves the group and the result is written back
when the thread resumes."""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from ...ptx.modifiers import SHUFFLES
from .. import abi
from ..analysis.uniformity import constant_registers
from ..irutil import convert_bits, declare, i32, i64, load_field
from ..simt.workspace import COLL_ARRAYS
from ..types import I1, I32, I64, llvm_type
from . import racecheck
from .table import handles, inst_type


@handles("bar", "barrier", mods="cta sync arrive red popc and or u32 pred warp aligned")
def barrier(f, inst):
    b = f.b
    if "warp" not in inst.mods:
        racecheck.count_barrier(f, warp=False)
    if "warp" in inst.mods:
        mask = f.read(inst.operands[0], "b32")
        racecheck.count_barrier(f, warp=True)
        return f.suspend("warp_sync", {"op_mask": mask}, None)
    if "red" in inst.mods:
        kind = next(m for m in inst.mods if m in ("popc", "and", "or"))
        pred_op = inst.operands[-1]
        p = f.read(pred_op, "pred")
        dst = inst.operands[0]

        def results(bb):
            if kind == "popc":
                f.write(dst, load_field(bb, f.ctx, abi.CTX["res"], I32), "u32")
            else:
                f.write(dst, bb.icmp_unsigned("!=", load_field(bb, f.ctx, abi.CTX["res"], I32), i32(0)), "pred")
        operands = _barrier_operands(f, inst.operands[1:-1])
        operands["op_pred"] = b.zext(p, I32)
        return f.suspend(f"bar_red_{kind}", operands, results)
    # bar.arrive suspends too: its thread waits for the rest of its warp (the ISA counts
    # arrivals per warp), then goes on without waiting for the other warps
    f.suspend("bar_arrive" if "arrive" in inst.mods else "bar_sync", _barrier_operands(f, inst.operands), None)


def _barrier_operands(f, ops):
    """Frame slots of a barrier `a{, b}`: op_b the barrier id, op_c the warps it expects
    (b is a thread count, a multiple of the warp size; without b, 0 stands for the whole block)."""
    b = f.b
    # ids beyond 15 are undefined in PTX; keeping the low bits keeps the scheduler's table in bounds
    bar_id = b.and_(f.read(ops[0], "u32"), i32(abi.NUM_BARRIERS - 1))
    if len(ops) < 2:
        return {"op_b": bar_id, "op_c": i32(0)}
    count = f.read(ops[1], "u32")
    partial = b.zext(b.icmp_unsigned("!=", b.and_(count, i32(31)), i32(0)), I32)
    return {"op_b": bar_id, "op_c": b.add(b.lshr(count, i32(5)), partial)}


# Warp collectives keep their value operand and their results in arrays after the spill
# arrays, one element per thread (workspace.COLL_ARRAYS), rather than in the thread's frame:
# a loop over threads that all reach one collective then stores and reloads them with
# contiguous vector accesses, and the scheduler resolves a whole warp from them at once.
def _coll_slot(f, name):
    b = f.b
    off, ty = COLL_ARRAYS[name]
    t = b.mul(b.sext(f.fn.args[6], I64), i64(ty.width // 8))
    i = b.add(i64(abi.MAX_BLOCK_THREADS * f.spill_bytes + off), t)
    return b.bitcast(b.gep(f.step_arg("spill"), [i]), ty.as_pointer())


def _coll_store(f, name, value):
    """Store a collective's operand for this thread (a device function that was not inlined
    cannot suspend: f.suspend reports that)."""
    if f.is_kernel:
        f.thread_access(f.b.store(value, _coll_slot(f, name)))


def _result_writer(f, dst, t):
    def results(bb):
        if isinstance(dst, pir.Pair):
            f.write(dst.first, _res_value(f, bb, t), t)
            f.write(dst.second, bb.icmp_unsigned("!=", f.thread_access(bb.load(_coll_slot(f, "res_pred"))), i32(0)), "pred")
        else:
            f.write(dst, _res_value(f, bb, t), t)
    return results


def _res_value(f, bb, t):
    v = f.thread_access(bb.load(_coll_slot(f, "res")))
    if t == "pred":
        return bb.icmp_unsigned("!=", bb.trunc(v, I32), i32(0))
    return convert_bits(bb, v, llvm_type(t))


def _warp_operand(f, op):
    """A b32 operand of a warp collective; a register that holds one integer constant
    (uniformity.constant_registers) is that constant, so that the scheduler knows it."""
    v = f.read(op, "b32")
    if isinstance(op, pir.Reg):
        consts = getattr(f, "_warp_constants", None)
        if consts is None or consts[0] is not f.pfn.body:
            consts = f._warp_constants = (f.pfn.body, constant_registers(f.pfn.body))
        if op.name in consts[1]:
            return i32(consts[1][op.name] & 0xFFFFFFFF)
    return v


def _membermask(f, inst, index):
    if len(inst.operands) > index:
        return _warp_operand(f, inst.operands[index])
    return i32(-1)


@handles("shfl", mods=("sync b32", SHUFFLES))
def shfl(f, inst):
    b = f.b
    mode = next(m for m in inst.mods if m in ("up", "down", "bfly", "idx"))
    a = f.read(inst.operands[1], "b32")
    lane = _warp_operand(f, inst.operands[2])
    clamp = _warp_operand(f, inst.operands[3])
    mask = _membermask(f, inst, 4)
    _coll_store(f, "a", b.zext(a, I64))
    f.suspend(f"shfl_{mode}", {"op_b": lane, "op_c": clamp, "op_mask": mask},
              _result_writer(f, inst.operands[0], "b32"))


@handles("vote", mods="sync all any uni ballot pred b32")
def vote(f, inst):
    b = f.b
    mode = next(m for m in inst.mods if m in ("all", "any", "uni", "ballot"))
    p = f.read(inst.operands[1], "pred")
    mask = _membermask(f, inst, 2)
    t = "b32" if mode == "ballot" else "pred"
    _coll_store(f, "pred", b.zext(p, I32))
    f.suspend(f"vote_{mode}", {"op_mask": mask}, _result_writer(f, inst.operands[0], t))


@handles("match", mods="sync any all b32 b64")
def match(f, inst):
    b = f.b
    mode = next(m for m in inst.mods if m in ("any", "all"))
    t = inst_type(f, inst)
    a = f.read(inst.operands[1], t)
    mask = _membermask(f, inst, 2)
    _coll_store(f, "a", b.zext(a, I64) if t == "b32" else a)
    f.suspend(f"match_{mode}_{t}", {"op_mask": mask}, _result_writer(f, inst.operands[0], "b32"))


@handles("redux", mods="sync add min max and or xor u32 s32 b32")
def redux(f, inst):
    b = f.b
    op = next(m for m in inst.mods if m in ("add", "min", "max", "and", "or", "xor"))
    t = inst_type(f, inst)
    kind = f"redux_{op}" if op in ("add", "and", "or", "xor") else f"redux_{op}_{'s32' if t == 's32' else 'u32'}"
    a = f.read(inst.operands[1], t)
    mask = _membermask(f, inst, 2)
    _coll_store(f, "a", b.zext(a, I64))
    f.suspend(kind, {"op_mask": mask}, _result_writer(f, inst.operands[0], t))


@handles("elect", mods="sync")
def elect(f, inst):
    """`d|p, membermask`: the leader is the lowest lane of the members that takes part (the
    lane NVIDIA's GPUs elect): a ballot of the members, its lowest bit."""
    if len(inst.operands) != 2 or not isinstance(inst.operands[0], pir.Pair):
        raise f.error("elect.sync takes d|p, membermask")
    _coll_store(f, "pred", i32(1))
    mask = _membermask(f, inst, 1)
    _coll_store(f, "a", f.b.zext(mask, I64))        # the lane's own mask, for after the ballot
    dst = inst.operands[0]

    def results(bb):
        # only members may lead: a lane outside its own mask takes part too (its result is
        # undefined), and must not be elected
        own = bb.trunc(f.thread_access(bb.load(_coll_slot(f, "a"))), I32)
        ballot = bb.and_(bb.trunc(f.thread_access(bb.load(_coll_slot(f, "res"))), I32), own)
        leader = bb.call(declare(bb.module, "llvm.cttz.i32", I32, [I32, I1]), [ballot, ir.Constant(I1, 0)])
        f.write(dst.first, leader, "u32")
        f.write(dst.second, bb.icmp_unsigned("==", f.read(pir.SpecialReg("laneid", None), "u32"), leader), "pred")
    f.suspend("vote_ballot", {"op_mask": mask}, results)


@handles("activemask", mods="b32")
def activemask(f, inst):
    f.suspend("activemask", {"op_mask": i32(0)}, _result_writer(f, inst.operands[0], "b32"))

