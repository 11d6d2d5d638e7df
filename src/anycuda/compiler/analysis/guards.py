"""Known branches: the `if (i >= n) return;` of an elementwise kernel, the `if (x < cols &&
y < rows)` around a tile's loads and stores, a stencil's `if (x == 0 || x == nx - 1)` border
test: branches that, in most blocks, every thread takes the same way.

Run thread by thread in one vectorised loop, such a branch is if-converted into masked loads
and stores, which AVX2 CPUs execute slowly (saxpy: 35 ms against 13 ms without the guard,
benchmarks/NOTES.md), or not vectorised at all (scan's four guarded loads 16 bytes apart,
transpose's guarded tile). In every block but the last an exit guard is usually false for
all of the block's threads, and a border test for all the blocks inside the grid, so a block
first *probes* its threads' predicates of these branches and runs, where they all agree
with "not taken", a copy of the code without them (blockfunction.emit_block_function).

A branch is known when its predicate is *fixed*: written by one instruction, computed
through pure instructions from values that stay the same for a thread during the launch
(its thread and block index, the kernel's parameters, immediates, other fixed registers),
so that wherever the thread meets the branch the predicate holds what the probe computed
(fixed_registers). Of those, the branches of the kernel's first straight-line stretch
(find_probed_branches: exit guards, border tests) and, anywhere, the range guards (order
comparisons such as `base + k < n`, and their conjunctions): an equality like `threadIdx.x
== 0` later in a kernel is a branch the block's threads take differently, which would only
keep the probe from passing.

The probe is a case of the step function (its resume argument PROBE): it computes just the
known predicates (probe_closure) and answers with a bit per known branch, set when the
thread does not take it. Each round of the block (from the start, from a barrier, ...)
that can reach known branches (rounds_reaching: the bits of those) runs its settled copy,
the resume argument with the PASSED bit, when the block's threads all have those bits.
"""
from __future__ import annotations

import bisect

from ...ptx import ir as pir
from .cfg import build_cfg, strongly_connected_components
from .dataflow import definition_positions, defs_uses
from .suspensions import is_suspension

PROBE = -1
PASSED = 1 << 21                  # a bit of the resume argument, beside abi.AFFINE_RESUME
MAX_KNOWN = 32                    # one bit each in the probe's i32 answer

# opcodes whose only effect is to write their destination registers
_PURE = frozenset(("mov", "cvt", "cvta", "add", "sub", "mul", "mad", "mul24", "mad24", "shl", "shr", "and",
                   "or", "xor", "not", "neg", "abs", "min", "max", "setp", "selp", "set"))
# special registers that stay the same for a thread during a launch
_FIXED_SPECIALS = frozenset(("tid", "ntid", "ctaid", "nctaid", "laneid", "warpid", "nwarpid", "warpsz",
                             "gridid", "nsmid", "dynamic_smem_size", "total_smem_size"))


MAX_PROBED = 4                    # branches of the first stretch

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
    """Positions in `body` of the branches of the kernel's first straight-line stretch, in
    order, whose predicates come from launch-fixed values: its exit guards and border tests,
    known whatever comparison they make (known_branches). `params`: the kernel parameters'
    names. The stretch ends at an instruction with effects or of another kind than pure
    computation and loads (stores, atomics, barriers, calls).

    A label ends the stretch unless only such branches lead to it: with those not taken it
    is reached by falling through (`v = i + 1 < n ? in[i + 1] : 0;`)."""
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


def fixed_registers(body, params) -> set:
    """Registers written once, unguarded, by a pure instruction (or a kernel parameter's load)
    of fixed operands: the same value wherever the thread reads them. The greatest such set:
    from every register written once, unguarded, a worklist takes out those whose definition
    reads one taken out (and looks again only at the readers of one taken out): O(n)."""
    defs = definition_positions(body)
    fixed = {r for r, ps in defs.items() if len(ps) == 1 and body[ps[0]].guard is None}
    readers = {}
    for r in fixed:
        for u in defs_uses(body[defs[r][0]])[1]:
            readers.setdefault(u, []).append(r)
    tainted = set(defs) - fixed
    todo = sorted(fixed)
    while todo:
        r = todo.pop()
        if r in fixed and not _fixed(body[defs[r][0]], params, tainted):
            fixed.discard(r)
            tainted.add(r)
            todo.extend(x for x in readers.get(r, ()) if x in fixed)
    return fixed


# comparisons whose outcome changes once along a thread or block index: range guards
_ORDER = frozenset(("lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"))


def _range_guard(r, body, defs, memo=None) -> bool:
    """Register r (written once) is an order comparison, or an and/or/not/mov of such:
    each register looked at once (memo; a cycle is none)."""
    memo = {} if memo is None else memo
    if r in memo:
        return memo[r]
    memo[r] = False
    st = body[defs[r][0]]
    if st.opcode == "setp":
        memo[r] = bool(_ORDER & set(st.mods))
    elif st.opcode in ("and", "or", "not", "mov") and "pred" in st.mods:
        regs = [op.operand if isinstance(op, pir.Not) else op for op in st.operands[1:]]
        memo[r] = all(isinstance(op, pir.Reg) and op.name in defs and _range_guard(op.name, body, defs, memo)
                      for op in regs)
    return memo[r]


def known_branches(body, params) -> dict:
    """{position of a branch a probe settles (the module's docstring): the positions of the
    instructions that compute its predicate}, in body order, at most MAX_KNOWN. A branch of
    the first stretch may test a register the kernel writes again later (a loop's counter
    starting at threadIdx.x): there the probe computes what the stretch computed, and a
    later branch on a predicate of the stretch written once (softmax's row loops, each
    entered when threadIdx.x < C) is known too."""
    defs = definition_positions(body)
    fixed = fixed_registers(body, params)
    stretch = find_probed_branches(body, params)
    tested = {}
    for pos in stretch:
        tested.setdefault(body[pos].guard.reg.name, pos)
    known, ranges = {}, {}
    for pos, st in enumerate(body):
        if len(known) == MAX_KNOWN:
            break
        if not (isinstance(st, pir.Instruction) and st.opcode == "bra" and st.guard is not None):
            continue
        r = st.guard.reg.name
        if pos in stretch:
            where = (pos, True)
        elif r in tested and len(defs[r]) == 1:
            where = (tested[r], True)
        elif r in fixed and _range_guard(r, body, defs, ranges):
            where = (pos, False)
        else:
            continue
        try:
            computed_by = _slice(body, defs, *where)
        except _NotComputable:
            continue
        if where[1] or any(_reads_block_or_launch(body[q]) for q in computed_by):
            known[pos] = computed_by
    return known


def _reads_block_or_launch(st) -> bool:
    """The instruction reads a block index or a kernel parameter: a range guard without one
    (`threadIdx.x < 32`) splits every block's threads alike, so no block passes it."""
    return st.opcode == "ld" or any(isinstance(op, pir.SpecialReg) and op.name == "ctaid" for op in st.operands)


class _NotComputable(Exception):
    """A known branch's predicate reads a register defined only further down the body."""


def _slice(body, defs, branch, in_stretch) -> set:
    """Positions of the instructions that compute the predicate of the branch at `branch`:
    each register's one definition, or in the first stretch the last one before its use."""
    need, todo = set(), [(body[branch].guard.reg.name, branch)]
    while todo:
        r, at = todo.pop()
        ps = defs.get(r, ())
        before = bisect.bisect_left(ps, at)       # (definition_positions are in body order)
        if not before or (not in_stretch and len(defs[r]) != 1):
            raise _NotComputable(r)
        pos = ps[before - 1]
        if pos not in need:
            need.add(pos)
            todo.extend((u, pos) for u in defs_uses(body[pos])[1])
    return need


def probe_closure(known) -> list:
    """Positions, in body order, of the instructions that compute the known branches'
    predicates (known_branches): run in that order, each reads what it read in the kernel."""
    return sorted(set().union(*known.values()))


def rounds_reaching(body, branch_targets, known, site_positions) -> dict:
    """{resume site: the bits (1 << index in `known`, a list of positions) of the known
    branches a thread can reach from there before it stops again}, for the sites that reach
    any; site 0 is the kernel's start, the others are {site: position of its suspending
    instruction}, which ends a basic block.

    The bits a block reaches are its own and those its successors reach, unless it ends at a
    suspension: one pass over the strongly connected components of that graph, successors
    first (Tarjan's algorithm), O(n) however many sites share the code after them (a search
    per site was O(sites * blocks))."""
    blocks = build_cfg(body, branch_targets)
    at = {blk.start: blk for blk in blocks}
    bit = {pos: 1 << i for i, pos in enumerate(known)}
    own = [0] * len(blocks)
    succs = []
    for blk in blocks:
        for pos, _ in blk.instructions:
            own[blk.index] |= bit.get(pos, 0)
        stops = blk.instructions and is_suspension(blk.instructions[-1][1])
        succs.append([] if stops else blk.succs)
    reach = _reach_bits(own, succs)
    starts = {0: 0, **{site: pos + 1 for site, pos in site_positions.items()}}
    rounds = {site: reach[at[start].index] for site, start in starts.items()}
    return {site: bits for site, bits in rounds.items() if bits}


def _reach_bits(own: list, succs: list) -> list:
    """For each node of a graph, the OR of `own` over the nodes it reaches (itself included),
    by strongly connected components, successors first: a component's value is complete when
    it comes, the components it reaches having come before it. O(nodes + edges)."""
    reach = [0] * len(own)
    for component in strongly_connected_components(range(len(own)), succs.__getitem__):
        members = set(component)
        bits = 0
        for m in component:
            bits |= own[m]
            for s in succs[m]:
                if s not in members:
                    bits |= reach[s]
        for m in component:
            reach[m] = bits
    return reach