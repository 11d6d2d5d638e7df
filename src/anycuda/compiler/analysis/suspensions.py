"""Which instructions suspend a thread: block barriers, warp collectives, and the yields the
lowering puts at the back edges of grid-stride loops (YIELD) and its other waits (an
mbarrier's, a spin's, a warp's step before a volatile access). A suspension ends a basic block
(cfg.py), and the registers live across it are what a thread keeps while it waits
(dataflow.py). Each test looks at one instruction: O(1).
"""
from __future__ import annotations

from ...ptx import ir

# A run of warp matrix instructions lowered as one collective (compiler/ops/matrixruns.py);
# spelt with a dot, as YIELD below, so that no source can.
MATRIX_RUN = "anycuda.matrix_run"

WARP_COLLECTIVES = {"shfl", "vote", "match", "redux", "activemask", "elect",
                    "mma", "mma.sp", "wmma.mma", "ldmatrix", "stmatrix", "movmatrix",     # compiler/ops/matrix.py
                    MATRIX_RUN}


def is_block_barrier(inst: ir.Instruction) -> bool:
    """`bar.sync`, `barrier.sync`, `bar.red`, `barrier.red`, `bar.arrive` (and the bare `bar id`
    form). bar.arrive suspends too: its thread waits for the rest of its warp."""
    if inst.opcode not in ("bar", "barrier"):
        return False
    return "warp" not in inst.mods


def is_warp_collective(inst: ir.Instruction) -> bool:
    if inst.opcode in WARP_COLLECTIVES:
        return True
    return inst.opcode == "bar" and "warp" in inst.mods


# A suspension that never waits (see grid_stride_yields). Its opcode has a dot, which the
# parser splits off as a modifier, so no PTX source can spell it.
YIELD = "anycuda.yield"


def is_matrix_run(inst: ir.Instruction) -> bool:
    return inst.opcode == MATRIX_RUN


def is_yield(inst: ir.Instruction) -> bool:
    return inst.opcode == YIELD


# Where a thread waits after an mbarrier test that failed (ops/mbarrier.py puts one after each
# mbarrier.test_wait and try_wait of a kernel); spelt like YIELD, so that no source can.
MBARRIER_WAIT = "anycuda.mbarrier_wait"
MBARRIER_TESTS = frozenset(("mbarrier.test_wait", "mbarrier.try_wait"))


def is_mbarrier_wait(inst: ir.Instruction) -> bool:
    return inst.opcode == MBARRIER_WAIT


# Where a thread that spins on a word other threads write waits for it to change
# (ops/spinwaits.py puts one before the back branch of such a loop); spelt like YIELD.
SPIN_WAIT = "anycuda.spin_wait"


def is_spin_wait(inst: ir.Instruction) -> bool:
    return inst.opcode == SPIN_WAIT


# Where a thread waits for the lanes of its warp that reach the same place, so that a warp's
# volatile accesses happen in step (ops/warpsteps.py puts one before such an access); spelt
# like YIELD.
WARP_STEP = "anycuda.warp_step"


def is_warp_step(inst: ir.Instruction) -> bool:
    return inst.opcode == WARP_STEP


def is_suspension(inst: ir.Instruction) -> bool:
    """A thread stops here until other threads of its block or warp arrive (or, at a yield,
    only lets the other threads of its block catch up; at an mbarrier wait, until its
    mbarrier changes; at a spin wait, until the word it spins on changes; at a warp step,
    until the lanes of its warp that come there have)."""
    return (is_block_barrier(inst) or is_warp_collective(inst) or is_yield(inst) or is_mbarrier_wait(inst)
            or is_spin_wait(inst) or is_warp_step(inst))


def has_suspensions(body: list) -> bool:
    """Whether a function body reaches a barrier, a warp collective or a yield itself, or an
    mbarrier test (which becomes a test and a wait in a kernel: a device function holding
    one is inlined as one that holds a barrier)."""
    return any(isinstance(st, ir.Instruction) and (is_suspension(st) or st.opcode in MBARRIER_TESTS)
               for st in body)
