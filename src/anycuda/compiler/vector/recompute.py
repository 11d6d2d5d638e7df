"""Values a block program's next stretch computes again rather than keeping in a stack array.

What a warp needs after a barrier waits in an array, one element per warp
(blockstretches.py: _keep, _resume). Much of it is a function of the warp's place in the
block alone: a thread's row `threadIdx.y`, the address of its element of a shared tile
(`tile + 4 * (ty * 20 + tx)`), whether that address is exact, the bounds its block checks.
Loaded from the array, such a value is anything to LLVM, and every check made on it stays:
conv2d_tiled's 25 taps of its shared tile each tested whether the tap's 32-bit address wraps,
a compare and a branch each. Computed again from the warp's counter (whose `urem` by the
block's rows bounds it), the same test folds away, and the store and load are gone.

A value is computed again when it is a tree of at most MAX_INSTRUCTIONS pure instructions
(integer arithmetic, comparisons, selects, casts and lane shuffles; divisions by nonzero
constants only, which cannot trap) over constants, the program's arguments, values of its
entry block (the kernel's parameters are loaded there: blockops._ld_param) and the counter of
the stretch's loop over warps (`warps`: every stretch's counter, which the copy replaces by
the current one). A load, a call or a phi anywhere in it keeps it in its array, but for a
phi that stands for one value: a register first written in a part a warp may skip (a tiled
GEMM's `if (n > 0)` around its loop over tiles, which nvcc writes before the loop) has no
value the other way. The value so computed is the one the warp's threads had: a pure
function of the warp's index and the launch, the same in every stretch.

Computed again, the tiled GEMMs' shared-tile addresses (made before their loop over tiles,
kept across its barriers) let LLVM drop a wrap check per product: one worker, env-switched,
sgemm_tiled_32x32 92 / 99 -> 32 / 36 ms, dgemm_tiled_16x16 203 / 143 -> 87 / 85,
sgemm_tiled_32x8 99 / 62 -> 28 / 27 (NOTES).
"""
from __future__ import annotations

import copy

from llvmlite import ir

MAX_INSTRUCTIONS = 48          # instructions a value may take to compute again

_PURE = frozenset(("add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "icmp", "select",
                   "zext", "sext", "trunc", "bitcast", "inttoptr", "ptrtoint",
                   "insertelement", "extractelement", "shufflevector"))
_DIVISIONS = frozenset(("udiv", "sdiv", "urem", "srem"))


def recomputable(value, warps, entry, one_way=None) -> bool:
    """Whether `value` can be computed again in a later stretch (see the module docstring);
    `warps`: the stretches' warp counters, `entry`: the program's entry block, `one_way`: phis
    that stand for one value (see `recompute`)."""
    seen = set()
    one_way = one_way or {}

    def walk(v) -> bool:
        v = _through(v, one_way)
        if not isinstance(v, ir.Instruction) or v.parent is entry or v in warps:
            return isinstance(v, (ir.Constant, ir.Argument, ir.GlobalValue, ir.Instruction))
        if id(v) in seen:
            return True
        seen.add(id(v))
        if len(seen) > MAX_INSTRUCTIONS or not _pure(v):
            return False
        return all(walk(op) for op in v.operands)
    return walk(value)


def recompute(b: ir.IRBuilder, value, warp, warps, entry, memo: dict, one_way=None):
    """`value` computed again at the builder, with every counter of `warps` replaced by
    `warp` (the current stretch's); `memo` maps what was computed again in this stretch to
    its copy, so shared parts are made once. `one_way` maps a phi of a register first written
    in a part a warp may skip (blockprograms._merge) to its value from that part: the way past
    the part has no value for it (a thread's register never written), so the part's value is
    as good there, and costs nothing to compute (pure, no division that traps)."""
    one_way = one_way or {}
    value = _through(value, one_way)
    if not isinstance(value, ir.Instruction) or value.parent is entry:
        return value
    if value in warps:
        return warp
    made = memo.get(id(value))
    if made is None:
        made = copy.copy(value)
        made.parent = b.block
        made.operands = [recompute(b, op, warp, warps, entry, memo, one_way) for op in value.operands]
        made.metadata = dict(value.metadata)
        made._set_name("")
        b._insert(made)
        memo[id(value)] = made
    return made


def _through(value, one_way):
    """The value a phi of `one_way` stands for, through nested parts (a phi of a phi)."""
    while value in one_way:
        value = one_way[value]
    return value


def _pure(inst) -> bool:
    if inst.opname in _DIVISIONS:
        return isinstance(inst.operands[1], ir.Constant) and not _may_trap(inst.operands[1])
    return inst.opname in _PURE


def _may_trap(divisor) -> bool:
    """Whether a constant divisor has a lane that may trap: zero, or all ones (-1: INT_MIN / -1)."""
    bits = (divisor.type.element if isinstance(divisor.type, ir.VectorType) else divisor.type).width
    ones = (1 << bits) - 1
    lanes = divisor.constant if isinstance(divisor.constant, (list, tuple)) else [divisor.constant]
    for lane in lanes:
        lane = lane.constant if isinstance(lane, ir.Constant) else lane
        if not isinstance(lane, int) or lane & ones in (0, ones):
            return True
    return False
