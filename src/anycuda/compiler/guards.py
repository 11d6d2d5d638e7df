"""Exit guards: the `if (i >= n) return;` at the top of an elementwise kernel.

Run thread by thread in one vectorised loop, such a guard is if-converted into masked loads
and stores, which AVX2 CPUs execute slowly (saxpy: 35 ms against 13 ms without the guard,
benchmarks/NOTES.md). In every block but the last the guard is usually false for all of the
block's threads, so a block of a kernel without barriers or collectives first *probes* each
thread's guard alone and, when no thread leaves there, runs a copy of the body in which the
guard is known false (scheduler._emit_thread_loops).

The probe runs only the instructions before the guard. They must do nothing but compute
registers from values that stay the same for the whole launch (the thread and block index,
the kernel's parameters, immediates), so that running them twice, once to probe and once for
real, gives the same guard.

The step function tells the three uses apart by its resume argument, which is a constant at
each call: PROBE returns at the guard (STEP_EXIT when the thread would leave, PROBE_STAYS
otherwise), NO_GUARD does not branch there, anything else is the kernel as written.
"""
from __future__ import annotations

from ..ptx import ir as pir

PROBE = -1
NO_GUARD = -2
PROBE_STAYS = 1

# opcodes whose only effect is to write their destination registers
_PURE = frozenset(("mov", "cvt", "cvta", "add", "sub", "mul", "mad", "mul24", "mad24", "shl", "shr", "and",
                   "or", "xor", "not", "neg", "abs", "min", "max", "setp", "selp", "set"))
# special registers that stay the same for a thread during a launch
_FIXED_SPECIALS = frozenset(("tid", "ntid", "ctaid", "nctaid", "laneid", "warpid", "nwarpid", "warpsz",
                             "gridid", "nsmid", "dynamic_smem_size", "total_smem_size"))


def _fixed_operand(op, params) -> bool:
    if isinstance(op, pir.SpecialReg):
        return op.name in _FIXED_SPECIALS
    if isinstance(op, pir.Sym):
        return op.name in params                  # a kernel parameter's address (mov %rd, param)
    if isinstance(op, pir.Addr):
        return isinstance(op.base, pir.Sym) and op.base.name in params
    if isinstance(op, pir.Vec):
        return all(_fixed_operand(o, params) for o in op.items)
    return isinstance(op, (pir.Reg, pir.Imm, pir.Not, pir.Pair))


def _pure(inst: pir.Instruction, params) -> bool:
    if inst.guard is not None:
        return False
    if inst.opcode == "ld":
        # a kernel parameter cannot change during the launch; other memory might
        return "param" in inst.mods and _fixed_operand(inst.operands[1], params)
    return inst.opcode in _PURE and all(_fixed_operand(o, params) for o in inst.operands)


def _leaves(body, label: str) -> bool:
    """The code at `label` ends the thread at once (`ret` or `exit`, labels in between)."""
    at = next((i for i, st in enumerate(body) if isinstance(st, pir.Label) and st.name == label), None)
    if at is None:
        return False
    for st in body[at + 1:]:
        if isinstance(st, pir.Label):
            continue
        if isinstance(st, pir.Instruction):
            return st.guard is None and st.opcode in ("ret", "exit")
    return False


def find_exit_guard(body, params) -> int | None:
    """The position in `body` of the kernel's exit guard: a predicated `bra` to code that
    ends the thread, reached from the kernel's start through pure instructions only (see the
    module's docstring); None when the kernel has none."""
    for pos, st in enumerate(body):
        if isinstance(st, pir.Label):
            return None                           # the guard must be in the first block
        if not isinstance(st, pir.Instruction):
            continue
        if st.opcode == "bra":
            target = st.operands[0] if st.operands else None
            if st.guard is not None and isinstance(target, pir.Sym) and _leaves(body, target.name):
                return pos
            return None
        if not _pure(st, params):
            return None
    return None
