"""Probed branches: the `if (i >= n) return;` at the top of an elementwise kernel, and the
branches after it that, in most blocks, every thread takes the same way (a stencil's
`if (x == 0 || x == nx - 1 || ...)` border test).

Run thread by thread in one vectorised loop, such a branch is if-converted into masked loads
and stores, which AVX2 CPUs execute slowly (saxpy: 35 ms against 13 ms without the guard,
benchmarks/NOTES.md). In every block but the last an exit guard is usually false for all of
the block's threads, and a border test for all the blocks inside the grid, so a block of a
kernel without barriers or collectives first *probes* each thread's branches alone and, when
no thread takes any of them, runs a copy of the body in which they are known not taken
(scheduler._emit_thread_loops).

The probed branches sit in the kernel's first straight-line stretch of code (every thread
reaches them unless it took an earlier one). The probe runs only that
stretch, which must not write memory; its predicates must be computed, through pure
instructions, from values that stay the same for the whole launch (the thread and block
index, the kernel's parameters, immediates), so that running the stretch twice, once to probe
and once for real, takes the same branches. Loads may sit in the stretch (the stencil loads
its centre before the border test) as long as no predicate depends on what they read: the
real run performs the same loads.

A kernel with barriers or warp collectives is probed the same way, once per block before its
first round. A branch later in the kernel on the predicate of a probed branch (scan's
`if (base + k < n) out[base + k] = ...` after the barriers, on the predicates of its loads)
is then known too, as long as nothing else writes that predicate (known_branches); the
block's rounds that can reach a known branch (rounds_reaching) run in a copy with them
settled when the probe passed.

The step function tells the uses apart by its resume argument, which is a constant at each
call: PROBE returns at the first probed branch taken (PROBE_TAKEN) or after the last one
(PROBE_STAYS); with the PASSED bit set the known branches go their known way, the rest is
the kernel as written (resume site = the argument without that bit).
"""
from __future__ import annotations

from ..ptx import ir as pir
from .analysis import defs_uses, is_suspension

PROBE = -1
PASSED = 1 << 21                  # a bit of the resume argument, beside abi.AFFINE_RESUME
NO_GUARD = PASSED                 # from the kernel's start, the probe passed
PROBE_STAYS = 1
PROBE_TAKEN = 2

# opcodes whose only effect is to write their destination registers
_PURE = frozenset(("mov", "cvt", "cvta", "add", "sub", "mul", "mad", "mul24", "mad24", "shl", "shr", "and",
                   "or", "xor", "not", "neg", "abs", "min", "max", "setp", "selp", "set"))
# special registers that stay the same for a thread during a launch
_FIXED_SPECIALS = frozenset(("tid", "ntid", "ctaid", "nctaid", "laneid", "warpid", "nwarpid", "warpsz",
                             "gridid", "nsmid", "dynamic_smem_size", "total_smem_size"))


MAX_PROBED = 4

# loads whose ordering or side effects a second execution could change
_ORDERED_LOADS = frozenset(("volatile", "relaxed", "acquire", "mmio"))


def _fixed_operand(op, params, tainted) -> bool:
    if isinstance(op, pir.SpecialReg):
        return op.name in _FIXED_SPECIALS
    if isinstance(op, pir.Sym):
        return op.name in params                  # a kernel parameter's address (mov %rd, param)
    if isinstance(op, pir.Addr):
        return isinstance(op.base, pir.Sym) and op.base.name in params
    if isinstance(op, pir.Vec):
        return all(_fixed_operand(o, params, tainted) for o in op.items)
    if isinstance(op, pir.Reg):
        return op.name not in tainted
    if isinstance(op, pir.Not):
        return _fixed_operand(op.operand, params, tainted)
    return isinstance(op, pir.Imm)


def _fixed(inst: pir.Instruction, params, tainted) -> bool:
    """The instruction computes its destinations from launch-fixed values only."""
    if inst.opcode == "ld":
        # a kernel parameter cannot change during the launch; other memory might
        return "param" in inst.mods and _fixed_operand(inst.operands[1], params, tainted)
    return inst.opcode in _PURE and all(_fixed_operand(o, params, tainted) for o in inst.operands[1:])


def _harmless_load(inst: pir.Instruction) -> bool:
    return inst.opcode == "ld" and not _ORDERED_LOADS & set(inst.mods)


def _label_references(body) -> dict:
    """label name -> positions of the statements that name it (branches, branch-target lists)."""
    refs = {}

    def visit(op, pos):
        if isinstance(op, pir.Sym):
            refs.setdefault(op.name, []).append(pos)
        for item in getattr(op, "items", ()) or ():
            visit(item, pos)
    for pos, st in enumerate(body):
        if isinstance(st, pir.Instruction):
            for op in st.operands:
                visit(op, pos)
        elif isinstance(st, pir.BranchTargets):
            for name in st.targets:
                refs.setdefault(name, []).append(pos)
    return refs


def find_probed_branches(body, params) -> list:
    """Positions in `body` of the kernel's probed branches (see the module's docstring), in
    order; empty when the kernel has none. `params`: the kernel parameters' names.

    A label ends the stretch unless only probed branches lead to it: with those not taken
    it is reached by falling through (`v = i + 1 < n ? in[i + 1] : 0;`)."""
    found, tainted, refs = [], set(), None
    for pos, st in enumerate(body):
        if len(found) == MAX_PROBED:
            break
        if isinstance(st, pir.Label):
            refs = refs if refs is not None else _label_references(body)
            if not found or not set(refs.get(st.name, ())) <= set(found):
                break
            continue
        if not isinstance(st, pir.Instruction):
            continue
        if st.opcode == "bra":
            target = st.operands[0] if st.operands else None
            guard = st.guard
            if guard is None or not isinstance(target, pir.Sym) or guard.reg.name in tainted:
                break
            found.append(pos)
            continue
        if st.guard is not None:
            break
        if _fixed(st, params, tainted):
            tainted.difference_update(defs_uses(st)[0])
        elif _harmless_load(st) or st.opcode in _PURE:
            tainted.update(defs_uses(st)[0])        # what it computes may differ in the real run
        else:
            break
    return found


def _single_definitions(body) -> set:
    """Registers that exactly one instruction of `body` writes."""
    count = {}
    for st in body:
        if isinstance(st, pir.Instruction):
            for r in defs_uses(st)[0]:
                count[r] = count.get(r, 0) + 1
    return {r for r, k in count.items() if k == 1}


def known_branches(body, probed) -> dict:
    """{position: taken} of the branches whose way a passed probe settles: the probed
    branches (not taken) and every other guarded `bra` on the predicate of one of them,
    when no other instruction writes that predicate (taken when it tests the opposite
    polarity)."""
    known = {pos: False for pos in probed}
    once = _single_definitions(body)
    polarity = {body[pos].guard.reg.name: body[pos].guard.negated for pos in probed
                if body[pos].guard.reg.name in once}
    for pos, st in enumerate(body):
        if (pos not in known and isinstance(st, pir.Instruction) and st.opcode == "bra"
                and st.guard is not None and st.guard.reg.name in polarity):
            known[pos] = st.guard.negated != polarity[st.guard.reg.name]
    return known


def rounds_reaching(body, known, site_positions) -> set:
    """The resume sites (0: the kernel's start; else {site: position of its suspending
    instruction}) from which a thread can reach a known branch before it stops again."""
    labels = {st.name: pos for pos, st in enumerate(body) if isinstance(st, pir.Label)}
    tables = {st.name: st.targets for st in body if isinstance(st, pir.BranchTargets)}

    def successors(st, pos):
        if not isinstance(st, pir.Instruction):
            return [pos + 1]
        names = []
        if st.opcode == "bra" and st.operands and isinstance(st.operands[0], pir.Sym):
            names = [st.operands[0].name]
        elif st.opcode == "brx" and len(st.operands) > 1 and isinstance(st.operands[1], pir.Sym):
            names = tables.get(st.operands[1].name, ())
        ends = st.guard is None and st.opcode in ("bra", "brx", "ret", "exit", "trap")
        return [labels[n] for n in names if n in labels] + ([] if ends else [pos + 1])

    def reaches(start):
        seen, todo = set(), [start]
        while todo:
            pos = todo.pop()
            if pos in seen or pos >= len(body):
                continue
            seen.add(pos)
            if pos in known:
                return True
            st = body[pos]
            if not (isinstance(st, pir.Instruction) and is_suspension(st)):
                todo.extend(successors(st, pos))
        return False
    starts = {0: 0, **{site: pos + 1 for site, pos in site_positions.items()}}
    return {site for site, start in starts.items() if reaches(start)}
