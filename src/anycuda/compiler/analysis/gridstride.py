"""Grid-stride loops, where the lowering puts a yield at the back edge (grid_stride_yields): a
uniform round then runs one iteration for every thread of the block, neighbouring threads
touching neighbouring addresses.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ptx import ir
from .cfg import build_cfg, predecessors
from .dataflow import definition_positions, loads_kernel_param
from .suspensions import has_suspensions, is_suspension
from .uniformity import UNIFORM_OPCODES, UNIFORM_SPECIAL

# A step from these spans more than the block's own stretch of memory. A block-stride loop
# (step %ntid alone, as in one block per row) keeps a block within a few KB that stay in
# cache when its threads run one after another; yields there only added rounds (softmax
# 8192 x 1024, one thread: 645-912 -> 778-819 ms).
_GRID_WIDE = frozenset(("nctaid", "param", "nsmid", "ntid"))


@dataclass(frozen=True)
class StrideLoop:
    """A grid-stride loop that gets a yield (grid_stride_yields)."""
    induction: str          # its induction register
    scatters: bool          # it has atomics: read-modify-writes at computed addresses, which
                            # keep a round over its threads scalar


def grid_stride_yields(body: list, branch_targets: dict, kernel_params) -> dict:
    """{position of a back-edge branch of a grid-stride loop, where a yield goes: StrideLoop}.

    A grid-stride loop (`for (i = first; i < n; i += gridDim.x * blockDim.x)`) makes each
    thread walk memory alone with a stride of the whole grid; run thread after thread on the
    CPU, every load misses the cache and the loop over threads is never innermost, so nothing
    vectorises. A yield at the back edge (a suspension that never blocks) lets the scheduler's
    uniform rounds run one iteration for all threads of the block, one after the other, with
    neighbouring threads touching neighbouring addresses (and a loop over threads LLVM may
    vectorise). A warp region steps over the yields: where one is made, a block of whole
    warps runs each warp's whole loop in it (compiler/vector/warpregions.py), and the rounds between
    yields remain for blocks with a partial warp.

    The shape: a natural loop that contains no suspension (nor call, which might hide one),
    with an induction `add r, r, s` whose step `s` has one definition outside the loop, by pure
    integer instructions of immediates, %ntid/%nctaid/%ctaid, kernel parameters and other such
    registers (so it is the same for every thread of the block), at least one of them
    %nctaid or a kernel parameter (see _GRID_WIDE). Loops with a constant step are left alone: short counted loops (a tile's k loop)
    are unrolled and vectorised across threads already, and a yield there costs a round per
    iteration.

    Only in kernels that have sites already: a kernel without any runs its block as a plain
    loop over threads with one reused frame and no spills, and the common grid-stride kernel
    launched with a grid that covers the data (one iteration per thread) was 7x slower with
    yields (frames to set up per block, two rounds for one iteration). Its warp region takes
    turns at the loops' heads instead (grid_stride_loops; warpregions.EntryRegion).

    Cost: O(n) for the CFG, a summary of each block (a stop, an atomic, its induction
    candidates) and the steps' uniformity (each register's definition read once), plus, per
    back edge, a walk of its natural loop's blocks: O(n + B * d) for B blocks in loops nested
    d deep (each block is walked once per loop around it)."""
    return grid_stride_loops(body, branch_targets, kernel_params) if has_suspensions(body) else {}


def grid_stride_loops(body: list, branch_targets: dict, kernel_params, wide=_GRID_WIDE) -> dict:
    """{position of a back-edge branch of a grid-stride loop: StrideLoop}, in any kernel (the
    shape grid_stride_yields describes): a loop whose step is computed from one of `wide`."""
    blocks = build_cfg(body, branch_targets)
    defs = definition_positions(body)
    params = set(kernel_params)
    preds = predecessors(blocks)
    memo = {}

    def own(r):
        """(what r's one definition reads itself: 'param' and special registers, the registers
        it reads), or None where that definition cannot be block-uniform."""
        ps = defs.get(r, [])
        if len(ps) != 1:
            return None
        st = body[ps[0]]
        if st.guard is not None or "cc" in st.mods:
            return None
        ops = st.operands
        if not ops or not isinstance(ops[0], ir.Reg) or ops[0].name != r:
            return None
        if st.opcode == "ld":
            return ({"param"}, []) if loads_kernel_param(st, params) else None
        if st.opcode not in UNIFORM_OPCODES:
            return None
        varying, regs = set(), []
        for op in ops[1:]:
            if isinstance(op, ir.Reg):
                regs.append(op.name)
            elif isinstance(op, ir.SpecialReg):
                if op.name not in UNIFORM_SPECIAL:
                    return None
                varying.add(op.name)
            elif not isinstance(op, (ir.Imm, ir.Sym)):
                return None
        return varying, regs

    def uniform(r):
        """None when r is not block-uniform, else the set of what it is computed from
        ('param' and the special registers; empty: a compile-time constant). Iterative,
        each register's definition read once over all calls (memo)."""
        todo = [(r, None)]
        while todo:
            x, found = todo.pop()
            if found is None:                # first visit
                if x in memo:
                    continue
                memo[x] = None               # until known; a cycle is not uniform
                found = own(x)
                if found is None:
                    continue
                todo.append((x, found))
                todo += [(u, None) for u in reversed(found[1]) if u not in memo]
            else:                            # what it reads is known
                varying = set(found[0])
                for u in found[1]:
                    if memo.get(u) is None:
                        varying = None
                        break
                    varying |= memo[u]
                memo[x] = varying
        return memo[r]

    # per block, what a loop's walk needs of it: a stop, an atomic, the induction candidates
    stops, scatters, adds, block_of = [], [], [], {}
    for blk in blocks:
        found = []
        for q, st in blk.instructions:
            block_of[q] = blk.index
            if st.opcode != "add" or st.guard is not None or len(st.operands) != 3:
                continue
            d, x, y = st.operands
            if not all(isinstance(o, ir.Reg) for o in (d, x, y)):
                continue
            step = y if x.name == d.name else x if y.name == d.name else None
            if step is not None:
                found.append((d.name, step.name))
        adds.append(found)
        stops.append(any(is_suspension(st) or st.opcode in ("call", "brx") for _, st in blk.instructions))
        scatters.append(any(st.opcode in ("atom", "red") for _, st in blk.instructions))
    result = {}
    for b in blocks:
        if not b.instructions:
            continue
        pos, last = b.instructions[-1]
        if last.opcode != "bra":
            continue
        for h in b.succs:
            if h > b.index:
                continue
            loop, todo = {h}, [b.index]
            while todo:                  # the natural loop of the back edge b -> h
                x = todo.pop()
                if x in loop:
                    continue
                loop.add(x)
                todo += preds[x]
            if any(stops[x] for x in loop):
                continue
            for x in loop:               # (in the order the loop's instructions were walked before)
                for d, step in adds[x]:
                    if any(block_of[q] in loop for q in defs.get(step, [])):
                        continue
                    if wide & (uniform(step) or set()):
                        result[pos] = StrideLoop(d, any(scatters[y] for y in loop))
                        break
                else:
                    continue
                break
            else:
                continue
            break
    return dict(sorted(result.items()))
