"""Target-neutral analyses over a PTX function body: which instructions suspend a thread
(barriers and warp collectives), the control-flow graph, and which registers are live
across each suspension (they are the values a thread must keep in its frame while it waits).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ptx import ir

# Instructions that write no register operand.
NO_DEST = {"st", "red", "bar", "barrier", "membar", "fence", "bra", "brx", "ret", "exit", "trap",
           "brkpt", "call", "prefetch", "prefetchu", "nanosleep", "pmevent", "griddepcontrol",
           "cp.async", "cp.async.bulk", "cp.reduce.async.bulk", "discard", "applypriority",
           "stmatrix", "st.async", "red.async", "multimem.st", "multimem.red", "setmaxnreg",
           "tensormap.replace", "mbarrier.init", "mbarrier.inval", "mbarrier.expect_tx",
           "mbarrier.complete_tx", "wgmma.fence", "wgmma.commit_group", "wgmma.wait_group"}

WARP_COLLECTIVES = {"shfl", "vote", "match", "redux", "activemask"}


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


def is_suspension(inst: ir.Instruction) -> bool:
    """A thread stops here until other threads of its block or warp arrive."""
    return is_block_barrier(inst) or is_warp_collective(inst)


def _regs(op) -> list:
    if isinstance(op, ir.Reg):
        return [op.name]
    if isinstance(op, ir.Addr):
        return [op.base.name] if isinstance(op.base, ir.Reg) else []
    if isinstance(op, (ir.Vec, ir.ParamList)):
        return [n for item in op.items for n in _regs(item)]
    if isinstance(op, ir.Not):
        return _regs(op.operand)
    if isinstance(op, ir.Pair):
        return [op.first.name, op.second.name]
    return []


def defs_uses(inst: ir.Instruction) -> tuple:
    """(registers written, registers read) by one instruction."""
    ops = inst.operands
    uses = []
    defs = []
    if inst.opcode in NO_DEST or not ops:
        for op in ops:
            uses += _regs(op)
    else:
        dest = ops[0]
        if isinstance(dest, (ir.Reg, ir.Pair, ir.Vec)):
            defs = _regs(dest)
        else:
            uses += _regs(dest)
        for op in ops[1:]:
            uses += _regs(op)
    if inst.guard is not None:
        uses.append(inst.guard.reg.name)
    return defs, uses


def ends_block(inst: ir.Instruction) -> bool:
    return inst.opcode in ("bra", "brx", "ret", "exit", "trap") or is_suspension(inst)


@dataclass
class Block:
    index: int
    start: int                      # index in the instruction list
    instructions: list = field(default_factory=list)     # (position, Instruction)
    labels: list = field(default_factory=list)
    succs: list = field(default_factory=list)
    live_in: set = field(default_factory=set)
    live_out: set = field(default_factory=set)


def build_cfg(body: list, branch_targets: dict) -> list:
    """Basic blocks of a flat function body. Labels start blocks; branches, returns and
    suspensions end them."""
    blocks = [Block(0, 0)]
    label_block = {}
    for pos, st in enumerate(body):
        cur = blocks[-1]
        if isinstance(st, ir.Label):
            if cur.instructions:
                cur = Block(len(blocks), pos)
                blocks.append(cur)
            cur.labels.append(st.name)
            label_block[st.name] = cur.index
        elif isinstance(st, ir.Instruction):
            cur.instructions.append((pos, st))
            if ends_block(st):
                blocks.append(Block(len(blocks), pos + 1))
    for b in blocks:
        last = b.instructions[-1][1] if b.instructions else None
        fall = b.index + 1 if b.index + 1 < len(blocks) else None
        if last is None or not ends_block(last) or is_suspension(last):
            succ = [fall]
        elif last.opcode == "bra":
            target = label_block.get(last.operands[0].name) if isinstance(last.operands[0], ir.Sym) else None
            succ = [target] + ([fall] if last.guard is not None else [])
        elif last.opcode == "brx":
            names = branch_targets.get(last.operands[1].name, ()) if len(last.operands) > 1 else ()
            succ = [label_block.get(n) for n in names]
            if last.guard is not None:
                succ.append(fall)
        else:  # ret / exit / trap
            succ = [fall] if last.guard is not None else []
        b.succs = sorted({s for s in succ if s is not None})
    return blocks


def compute_liveness(blocks: list) -> None:
    """Classic backward dataflow; a guarded definition does not kill its register."""
    gen_kill = []
    for b in blocks:
        gen, kill = set(), set()
        for _, inst in b.instructions:
            d, u = defs_uses(inst)
            gen |= {r for r in u if r not in kill}
            if inst.guard is None:
                kill |= set(d)
        gen_kill.append((gen, kill))
    changed = True
    while changed:
        changed = False
        for b in reversed(blocks):
            out = set()
            for s in b.succs:
                out |= blocks[s].live_in
            gen, kill = gen_kill[b.index]
            new_in = gen | (out - kill)
            if out != b.live_out or new_in != b.live_in:
                b.live_out, b.live_in = out, new_in
                changed = True


def live_across_suspensions(body: list, branch_targets: dict) -> dict:
    """{position of a suspending instruction: sorted registers live after it, excluding its own
    results}. These are what a waiting thread must keep in its frame."""
    blocks = build_cfg(body, branch_targets)
    compute_liveness(blocks)
    result = {}
    for b in blocks:
        if b.instructions and is_suspension(b.instructions[-1][1]):
            pos, inst = b.instructions[-1]
            defs, _ = defs_uses(inst)
            live = set(b.live_out)
            if inst.guard is None:
                live -= set(defs)
            result[pos] = sorted(live)
    return result
