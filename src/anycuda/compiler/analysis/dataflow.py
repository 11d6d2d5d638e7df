"""Target-neutral analyses over a PTX function body: which instructions suspend a thread
(barriers and warp collectives), the control-flow graph, and which registers are live
across each suspension (they are the values a thread must keep in its frame while it waits).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ...ptx import ir
from ..types import ORDERED_MODS, type_mods, vector_count, width

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


# A suspension that never waits (see grid_stride_yields). Its opcode has a dot, which the
# parser splits off as a modifier, so no PTX source can spell it.
YIELD = "anycuda.yield"


def is_yield(inst: ir.Instruction) -> bool:
    return inst.opcode == YIELD


def is_suspension(inst: ir.Instruction) -> bool:
    """A thread stops here until other threads of its block or warp arrive (or, at a yield,
    only lets the other threads of its block catch up)."""
    return is_block_barrier(inst) or is_warp_collective(inst) or is_yield(inst)


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
        return _regs(op.first) + _regs(op.second)      # first: a register or a vector (sparse tex)
    return []


def defs_uses(inst: ir.Instruction) -> tuple:
    """(registers written, registers read) by one instruction, as tuples. Kept on the
    instruction (which is frozen) once found: every analysis asks again, some twenty times
    per instruction in a kernel's lowering."""
    known = inst.__dict__.get("_defs_uses")
    if known is not None:
        return known
    known = _defs_uses(inst)
    object.__setattr__(inst, "_defs_uses", known)
    return known


def _defs_uses(inst: ir.Instruction) -> tuple:
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
    return tuple(defs), tuple(uses)


def has_suspensions(body: list) -> bool:
    """Whether a function body reaches a barrier, a warp collective or a yield itself."""
    return any(isinstance(st, ir.Instruction) and is_suspension(st) for st in body)


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


def strongly_connected_components(nodes, successors):
    """The strongly connected components of the graph over `nodes` (hashable) with edges
    `successors(node)`, each a list, every component yielded after the components it reaches
    (Tarjan's algorithm, iterative: O(nodes + edges))."""
    index, low, on_stack, stack = {}, {}, set(), []
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(successors(root)))]
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(successors(nxt))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    component.append(x)
                    if x == node:
                        break
                yield component


def build_cfg(body: list, branch_targets: dict) -> list:
    """Basic blocks of a flat function body. Labels start blocks; branches, returns and
    suspensions end them. O(n)."""
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
    """Each block's live_in and live_out: the least solution of the classic backward
    dataflow (a guarded definition does not kill its register), found per register from its
    uses: a register read in a block before any unguarded write there is live into it, and
    from there into each predecessor's exit and, unless that predecessor writes it
    unguarded, into its entry, and on. Each (block, register) pair enters a live_in once and
    each (edge, register) pair a live_out once: O(n + E * L) for E edges and L registers live
    at once, the size of the answer; no round over the whole function is repeated."""
    preds = _predecessors(blocks)
    kills = []
    todo = []
    for b in blocks:
        gen, kill = set(), set()
        for _, inst in b.instructions:
            d, u = defs_uses(inst)
            gen.update(r for r in u if r not in kill)
            if inst.guard is None:
                kill.update(d)
        kills.append(kill)
        b.live_in, b.live_out = set(gen), set()
        todo += [(b.index, r) for r in gen]
    while todo:                       # (block, register): r has just become live into block
        x, r = todo.pop()
        for p in preds[x]:
            pb = blocks[p]
            if r in pb.live_out:
                continue
            pb.live_out.add(r)
            if r not in kills[p] and r not in pb.live_in:
                pb.live_in.add(r)
                todo.append((p, r))


def live_across_suspensions(body: list, branch_targets: dict) -> dict:
    """{position of a suspending instruction: sorted registers live after it, excluding its own
    results}. These are what a waiting thread must keep in its frame. O(n + E * L), as
    compute_liveness."""
    blocks = build_cfg(body, branch_targets)
    compute_liveness(blocks)
    return {pos: sorted(live) for pos, live in _live_across(blocks).items()}


def _live_across(blocks: list) -> dict:
    """{position of a suspension: the set of registers live after it, less its results}
    (blocks with their liveness). A suspension ends its block (ends_block)."""
    result = {}
    for b in blocks:
        if b.instructions and is_suspension(b.instructions[-1][1]):
            pos, inst = b.instructions[-1]
            defs, _ = defs_uses(inst)
            live = set(b.live_out)
            if inst.guard is None:
                live -= set(defs)
            result[pos] = live
    return result


class LiveBefore:
    """{position of an instruction: the registers live just before it} (live_before), made per
    basic block when a position of it is first asked for: O(n * L) for the liveness of the
    blocks, then O(size * L) for each block asked about (L: the registers live at once)."""

    def __init__(self, blocks: list):
        self.blocks = blocks
        self.block_of = {pos: b.index for b in blocks for pos, _ in b.instructions}
        self.made = {}

    def get(self, pos, default=None):
        if pos not in self.made:
            b = self.block_of.get(pos)
            if b is None:
                return default
            block = self.blocks[b]
            live = set(block.live_out)
            for q, inst in reversed(block.instructions):
                d, u = defs_uses(inst)
                if inst.guard is None:
                    live -= set(d)
                live |= set(u)
                self.made[q] = frozenset(live)
        return self.made[pos]

    def __getitem__(self, pos):
        if pos not in self.block_of:
            raise KeyError(pos)
        return self.get(pos)


def live_before(body: list, branch_targets: dict) -> LiveBefore:
    """{position of an instruction: the registers live just before it} (a LiveBefore)."""
    blocks = build_cfg(body, branch_targets)
    compute_liveness(blocks)
    return LiveBefore(blocks)


def _predecessors(blocks: list) -> dict:
    """{block index: indices of the blocks that branch or fall into it}. O(blocks + edges)."""
    preds = {b.index: [] for b in blocks}
    for b in blocks:
        for x in b.succs:
            preds[x].append(b.index)
    return preds


def _loads_kernel_param(st: ir.Instruction, params) -> bool:
    """`ld.param r, [p]` of a kernel parameter p: the same value in every thread."""
    src = st.operands[1] if len(st.operands) == 2 else None
    return ("param" in st.mods and isinstance(src, ir.Addr) and isinstance(src.base, ir.Sym)
            and src.base.name in params)


def _written_by(inst: ir.Instruction) -> set:
    """Registers an instruction may write: a suspension's results are written on resume, and
    bar.red's destination counts as a use in defs_uses, so every register a suspension names
    is taken as written."""
    if is_suspension(inst):
        return {r for part in defs_uses(inst) for r in part}
    return set(defs_uses(inst)[0])


_SEVERAL = -1        # reaching_definitions' summary of two or more definitions (None: none)


def _join(a, b):
    """The union of two summaries of definition sets (None: none, a position: that one,
    _SEVERAL: two or more)."""
    if a is None or a == b:
        return b
    if b is None:
        return a
    return _SEVERAL


class ReachingDefinitions:
    """Which definitions of a register reach an instruction (before it runs), as one of: none,
    the position of the only one, or several (`only(pos, r)` answers the middle case). A
    guarded definition does not kill the earlier ones; a suspension writes every register it
    names (_written_by).

    Cost: O(n) to index the body's definitions by block. A question about register r asks
    for r's summary at the entry of the blocks between the question and r's definitions
    (a backward search that stops at blocks where r is written unguarded), then solves those
    entries with a worklist over the lattice none < one < several, which each entry climbs
    at most twice; entries are kept, so that each (block, register) pair is solved once over
    all questions. A register asked about where it is live (at a site, or by the instruction
    that reads it) is live in every block the search passes (a definition that reaches a
    use without a write in between keeps its register live on the way), so the total is
    O(n + the size of the liveness sets), as compute_liveness: O(n * L) for L registers live
    at once, not the O(blocks * registers) per round of a dense dataflow."""

    def __init__(self, body: list, branch_targets: dict, blocks=None):
        self.blocks = blocks if blocks is not None else build_cfg(body, branch_targets)
        self.preds = _predecessors(self.blocks)
        self.block_of = {}
        self.writes = []                     # per block: {register: [(position, guarded)] in order}
        for b in self.blocks:
            w = {}
            for pos, inst in b.instructions:
                self.block_of[pos] = b.index
                for r in _written_by(inst):
                    w.setdefault(r, []).append((pos, inst.guard is not None))
            self.writes.append(w)
        self.entries = {}                    # register -> {block: summary at its entry}
        self.visits = 0                      # blocks solved (for tests that count work)

    def _through(self, b: int, r: str, v, before=None):
        """The summary after block b's writes of r (those before position `before`), from v."""
        for pos, guarded in self.writes[b].get(r, ()):
            if before is not None and pos >= before:
                break
            v = _join(v, pos) if guarded else pos
        return v

    def _killed(self, b: int, r: str) -> bool:
        return any(not guarded for _, guarded in self.writes[b].get(r, ()))

    def _entry(self, b: int, r: str):
        known = self.entries.setdefault(r, {})
        if b in known:
            return known[b]
        # the blocks whose entry is needed: backward from b, past blocks that do not kill r
        region, todo = {b}, [b]
        while todo:
            x = todo.pop()
            for p in self.preds[x]:
                if p not in region and p not in known and not self._killed(p, r):
                    region.add(p)
                    todo.append(p)
        self.visits += len(region)
        value = {x: None for x in region}
        succs = {x: [s for s in self.blocks[x].succs if s in region] for x in region}

        def exit_of(p):
            return self._through(p, r, value[p] if p in value else known.get(p))
        work, queued = sorted(region), set(region)
        while work:
            x = work.pop()
            queued.discard(x)
            v = None
            for p in self.preds[x]:
                v = _join(v, exit_of(p))
            if v != value[x]:
                value[x] = v
                for s in succs[x]:
                    if s not in queued:
                        queued.add(s)
                        work.append(s)
        known.update(value)
        return known[b]

    def summary(self, pos: int, r: str):
        """r's definitions that reach position pos: None, a position or _SEVERAL."""
        b = self.block_of[pos]
        writes = [w for w in self.writes[b].get(r, ()) if w[0] < pos]
        start = max((i for i, (_, guarded) in enumerate(writes) if not guarded), default=None)
        if start is None:
            v = self._entry(b, r)
        else:
            v, writes = writes[start][0], writes[start + 1:]
        for q, _ in writes:
            v = _join(v, q)
        return v

    def only(self, pos: int, r: str):
        """The position of the one definition of r that reaches pos, or None (none, several)."""
        v = self.summary(pos, r)
        return None if v == _SEVERAL else v


def reaching_definitions(body: list, branch_targets: dict) -> ReachingDefinitions:
    """Reaching definitions, answered per question (see ReachingDefinitions)."""
    return ReachingDefinitions(body, branch_targets)


def written_since_resume(body: list, branch_targets: dict, rewritten=None, asked=None) -> dict:
    """{position of a suspending instruction: the registers of asked[position] (by default
    those live across it) that some path from the kernel's entry or from a resume reaches
    it with, written on the way}. The others, if live across it, still hold what was saved
    at the last suspension (and reloaded at the resume after it), so saving them again would
    store the same values: a round of threads through a run of shuffles stores only what
    the shuffles' arithmetic changed. `rewritten`: {suspension position: registers its
    resume recomputes rather than reloads}.

    Found per register from the places that make it written (the entry, where every register
    counts as written; its writes; a suspension's results and recomputed registers): forward
    to the next suspension, no further than a later write of it (which counts on its own)
    nor into a block it is not live into. The last write on a path to a suspension where the
    register is live keeps it live all the way, so the answers are the same as those of the
    whole dataflow of written sets, whose sets held every register written since the last
    suspension, in every block (O(blocks * registers) per round). Each (block, register)
    pair is entered once: O(n + E * L) for E edges and L registers live at once."""
    rewritten = rewritten or {}
    blocks = build_cfg(body, branch_targets)
    compute_liveness(blocks)
    if asked is None:
        asked = _live_across(blocks)
    wanted = set().union(*asked.values()) if asked else set()
    last_write = []                 # per block: {register: index of its last write, a final suspension not counted}
    for b in blocks:
        last = {}
        for i, (_, inst) in enumerate(b.instructions):
            if not is_suspension(inst):
                for r in _written_by(inst):
                    if r in wanted:
                        last[r] = i
        last_write.append(last)
    result = {pos: set() for pos in asked}
    entered = set()                 # (block, register) pairs a written path has entered at their start

    def run(b: int, i: int, r: str):
        """r was written just before index i of block b: follow it to the suspensions it reaches."""
        todo = [(b, i)]
        while todo:
            b, i = todo.pop()
            block = blocks[b]
            if last_write[b].get(r, -1) >= i:
                continue            # written again in this block: that write goes on from there
            last = block.instructions[-1][1] if block.instructions else None
            if last is not None and is_suspension(last):
                pos = block.instructions[-1][0]
                if i < len(block.instructions) and pos in result and r in asked[pos]:
                    result[pos].add(r)
                continue            # (its own writes start again after it)
            for c in block.succs:
                if (c, r) not in entered and r in blocks[c].live_in:
                    entered.add((c, r))
                    todo.append((c, 0))
    for r in sorted(wanted):
        if (0, r) not in entered:
            entered.add((0, r))
            run(0, 0, r)            # every register counts as written at the entry
    for b in blocks:
        for i, (pos, inst) in enumerate(b.instructions):
            regs = _written_by(inst)
            if is_suspension(inst):
                regs = regs | set(rewritten.get(pos, ()))
            for r in sorted(regs & wanted):
                if i + 1 < len(b.instructions):
                    run(b.index, i + 1, r)
                else:
                    for c in b.succs:
                        if (c, r) not in entered and r in blocks[c].live_in:
                            entered.add((c, r))
                            run(c, 0, r)
    return result


# Pure integer instructions through which a value computed from block-uniform operands stays
# block-uniform.
_UNIFORM_OPCODES = frozenset(("mov", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor",
                              "not", "cvt", "cvta", "min", "max", "div", "rem", "neg", "abs"))
_UNIFORM_SPECIAL = frozenset(("ntid", "nctaid", "ctaid", "nsmid"))
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
    yields (frames to set up per block, two rounds for one iteration).

    Cost: O(n) for the CFG, a summary of each block (a stop, an atomic, its induction
    candidates) and the steps' uniformity (each register's definition read once), plus, per
    back edge, a walk of its natural loop's blocks: O(n + B * d) for B blocks in loops nested
    d deep (each block is walked once per loop around it)."""
    if not has_suspensions(body):
        return {}
    blocks = build_cfg(body, branch_targets)
    defs = definition_positions(body)
    params = set(kernel_params)
    preds = _predecessors(blocks)
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
            return ({"param"}, []) if _loads_kernel_param(st, params) else None
        if st.opcode not in _UNIFORM_OPCODES:
            return None
        varying, regs = set(), []
        for op in ops[1:]:
            if isinstance(op, ir.Reg):
                regs.append(op.name)
            elif isinstance(op, ir.SpecialReg):
                if op.name not in _UNIFORM_SPECIAL:
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
                    if _GRID_WIDE & (uniform(step) or set()):
                        result[pos] = StrideLoop(d, any(scatters[y] for y in loop))
                        break
                else:
                    continue
                break
            else:
                continue
            break
    return dict(sorted(result.items()))


def definition_positions(body: list) -> dict:
    """{register: the positions of the instructions that write it, in body order}. O(n)."""
    defs = {}
    for pos, st in enumerate(body):
        if isinstance(st, ir.Instruction):
            for r in defs_uses(st)[0]:
                defs.setdefault(r, []).append(pos)
    return defs


def _definitions(body: list) -> dict:
    """{register: the instructions that write it, in body order}."""
    return {r: [body[p] for p in ps] for r, ps in definition_positions(body).items()}


def _alike_registers(body: list, kernel_params, opcodes, specials) -> set:
    """Registers each of whose definitions is an unguarded instruction of `opcodes` that reads
    only immediates, symbols, special registers of `specials` and registers of the set, or
    `ld.param` of a kernel parameter (a fixpoint from every register down). O(n): each
    register's definitions are read again only when one they read is taken out."""
    params = set(kernel_params)
    defs = _definitions(body)

    def alike(st, uniform):
        """st computes its register from what `uniform` and `specials` allow."""
        if st.guard is not None or "cc" in st.mods or not st.operands or not isinstance(st.operands[0], ir.Reg):
            return False
        if st.opcode == "ld":
            return _loads_kernel_param(st, params)
        if st.opcode not in opcodes:
            return False
        for op in st.operands[1:]:
            if isinstance(op, ir.Reg):
                if op.name not in uniform:
                    return False
            elif isinstance(op, ir.SpecialReg):
                if op.name not in specials:
                    return False
            elif not isinstance(op, (ir.Imm, ir.Sym)):
                return False
        return True
    # the greatest such set: a worklist takes out the registers with a definition that reads
    # one taken out, looking again only at the readers of each one taken out
    uniform = set(defs)
    readers = _readers(defs)
    todo = sorted(uniform)
    while todo:
        r = todo.pop()
        if r in uniform and not all(alike(st, uniform) for st in defs[r]):
            uniform.discard(r)
            todo.extend(x for x in readers.get(r, ()) if x in uniform)
    return uniform


def _readers(defs: dict) -> dict:
    """{register: the registers with a definition (of `defs`, _definitions) that reads it}."""
    readers = {}
    for r, sts in defs.items():
        for st in sts:
            for u in defs_uses(st)[1]:
                readers.setdefault(u, set()).add(r)
    return {u: sorted(rs) for u, rs in readers.items()}


def block_uniform_registers(body: list, kernel_params) -> set:
    """Integer registers that every thread of a block computes alike: each of their
    definitions is an unguarded pure integer instruction of immediates, symbols, kernel
    parameters, %ntid/%nctaid/%ctaid and other such registers (a tile loop's counter, a row
    offset). Control flow is not looked at: a thread that skips an update leaves the
    register different from the others', which is why the scheduler checks the values
    before relying on them (blockfunction._affine_spills), unless control_uniform holds."""
    return _alike_registers(body, kernel_params, _UNIFORM_OPCODES, _UNIFORM_SPECIAL)


def control_uniform(body: list, kernel_params) -> bool:
    """Whether every thread of a block takes the same path through the body, so that at each
    site the registers of block_uniform_registers hold one value in all of them: every branch,
    return, exit and suspension is unguarded or guarded by a predicate that every thread
    computes alike (a setp of block-uniform values), and there is no indirect branch and no
    call (a device function may exit). A trap may still stop one thread: it fails the launch."""
    uniform = _alike_registers(body, kernel_params, _UNIFORM_OPCODES | {"setp"}, _UNIFORM_SPECIAL)
    for st in body:
        if not isinstance(st, ir.Instruction):
            continue
        if st.opcode in ("brx", "call"):
            return False
        steers = st.opcode in ("bra", "ret", "exit") or is_suspension(st)
        if steers and st.guard is not None and st.guard.reg.name not in uniform:
            return False
    return True


def uniform_remainders(body: list, kernel_params, forms=None) -> set:
    """Registers of `forms` (thread_linear_forms, or a part of it the caller has; computed
    when not given) whose value less their form is the same in every thread where
    control_uniform holds: computed through the forms' own exact steps (mov, add, sub,
    mul.lo, mad.lo, shl) from %tid and what block_uniform_registers allows. (The forms take
    %laneid or a loaded value as a remainder too: those differ by thread.)"""
    if forms is None:
        forms = thread_linear_forms(body, kernel_params)
    alike = _alike_registers(body, kernel_params, frozenset(("mov", "add", "sub", "mul", "mad", "shl")),
                             _UNIFORM_SPECIAL | {"tid"})
    return alike & set(forms)


# A register's thread-linear form: {(axis, factor): k}, read as the sum over the terms of
# k * factor * %tid.<axis>, where factor is a kernel parameter's name, a block or grid
# dimension ("%ntid.x", "%nctaid.y") or None (1). The form
# is all this analysis knows of a value; what the value holds beside it is not tracked.
_INT32 = frozenset(("s32", "u32", "b32"))
_CONFLICT = "conflict"           # definitions with different forms
_FACTOR_SPECIAL = frozenset(("ntid", "nctaid"))     # block-uniform sizes a form may scale by


def _add_forms(f, g, sign=1):
    out = dict(f)
    for term, k in g.items():
        out[term] = out.get(term, 0) + sign * k
    return {t: k for t, k in out.items() if k % (1 << 32)}


def linear_terms(form):
    """The terms of a thread-linear form (thread_linear_forms) in a fixed order: (axis,
    factor, k), k as a signed 32-bit multiplier."""
    for (axis, factor), k in sorted(form.items(), key=lambda t: (t[0][0], t[0][1] or "")):
        yield axis, factor, (k + 2 ** 31) % 2 ** 32 - 2 ** 31


def thread_linear_forms(body: list, kernel_params) -> dict:
    """{register: its thread-linear form} for the 32-bit integer registers that every
    definition computes as k * %tid.x + ... plus something else (a row start, a tile offset):
    nvcc's indices such as `row * n + t + threadIdx.x`, stepped by a tile loop.

    Saving such a register at a site as value - form (compiler/lowering/function.py) and adding the form
    back on resume is exact whatever the analysis says, since each thread uses its own index
    both times; the form only matters for speed. When what is left is the same in every
    thread, a uniform round rebuilds the register from one value, and the vectoriser sees
    the accesses it addresses as contiguous rather than gathered.

    Factors are integer immediates, kernel parameters (a register whose one definition is
    `ld.param` of a 32-bit kernel parameter) and the block's and grid's dimensions (one
    `mov` from %ntid or %nctaid); the forms combine through mov, add, sub,
    mul.lo, mad.lo, shl by an immediate and selp of two values of one form. A register with
    another definition, or with definitions that disagree, has no form.

    O(n * T) for forms of T terms (at most 3 axes times the factors a kernel scales by):
    each register's definitions are read again only when a form they read has changed,
    which happens at most twice per register."""
    params = set(kernel_params)
    defs = _definitions(body)
    factor_of = {}                # register -> the kernel parameter or block dimension it holds
    for r, sts in defs.items():
        st = sts[0]
        if len(sts) != 1 or st.guard is not None or not _INT32 & set(st.mods):
            continue
        if _loads_kernel_param(st, params) and st.operands[1].offset == 0:
            factor_of[r] = st.operands[1].base.name
        elif (st.opcode == "mov" and isinstance(st.operands[1], ir.SpecialReg)
              and st.operands[1].name in _FACTOR_SPECIAL and st.operands[1].component in ("x", "y", "z")):
            factor_of[r] = f"%{st.operands[1].name}.{st.operands[1].component}"
    forms = {}                    # register -> form, _CONFLICT, or absent (not known yet)

    def operand(op):
        """The form of an operand, None while unknown, _CONFLICT when it has none."""
        if isinstance(op, ir.Reg):
            return forms.get(op.name)
        if isinstance(op, ir.SpecialReg) and op.name == "tid" and op.component in ("x", "y", "z"):
            return {(op.component, None): 1}
        if isinstance(op, (ir.Imm, ir.SpecialReg, ir.Sym)):
            return {}
        return _CONFLICT

    def scaled(f, op):
        """f times the value of `op`: an immediate, a kernel parameter or a dimension."""
        if isinstance(op, ir.Imm) and isinstance(op.value, int) and not op.is_float:
            return {t: k * op.value for t, k in f.items() if (k * op.value) % (1 << 32)}
        if isinstance(op, ir.Reg) and op.name in factor_of and all(fac is None for _, fac in f):
            return {(axis, factor_of[op.name]): k for (axis, _), k in f.items()}
        return _CONFLICT if f else {}

    def product(a, b):
        fa, fb = operand(a), operand(b)
        if fa is None or fb is None:
            return None
        if _CONFLICT in (fa, fb) or (fa and fb):
            return _CONFLICT
        return scaled(fa, b) if fa else scaled(fb, a)

    def form_of(st):
        """The form of what instruction st writes; None while an operand's is unknown."""
        ops = st.operands
        if "cc" in st.mods or not _INT32 & set(st.mods) or not isinstance(ops[0], ir.Reg):
            return _CONFLICT
        if st.opcode == "ld":
            return {} if _loads_kernel_param(st, params) else _CONFLICT
        if st.opcode == "mov" and len(ops) == 2:
            return operand(ops[1])
        if st.opcode in ("add", "sub") and len(ops) == 3 and "sat" not in st.mods:
            fa, fb = operand(ops[1]), operand(ops[2])
            if fa is None or fb is None:
                return None
            if _CONFLICT in (fa, fb):
                return _CONFLICT
            return _add_forms(fa, fb, 1 if st.opcode == "add" else -1)
        if st.opcode == "selp" and len(ops) == 4:
            fa, fb = operand(ops[1]), operand(ops[2])
            if fa is None or fb is None:
                return fa if fb is None else fb
            return fa if fa == fb else _CONFLICT
        if st.opcode == "mul" and len(ops) == 3 and "lo" in st.mods:
            return product(ops[1], ops[2])
        if st.opcode == "mad" and len(ops) == 4 and "lo" in st.mods:
            f, fc = product(ops[1], ops[2]), operand(ops[3])
            if f is None or fc is None:
                return None
            return _CONFLICT if _CONFLICT in (f, fc) else _add_forms(f, fc)
        if st.opcode == "shl" and len(ops) == 3 and isinstance(ops[2], ir.Imm) and isinstance(ops[2].value, int):
            f = operand(ops[1])
            if f is None or f == _CONFLICT:
                return f
            return scaled(f, ir.Imm(1 << (ops[2].value & 31)))
        return _CONFLICT

    # a worklist: forms only go from unknown to known to _CONFLICT, and each form_of is
    # monotone in its operands', so the registers whose definitions read a register whose
    # form changed are all that need looking at again (the answer is the one fixpoint)
    readers = _readers(defs)
    todo, queued = list(defs)[::-1], set(defs)
    while todo:
        r = todo.pop()
        queued.discard(r)
        if forms.get(r) == _CONFLICT:
            continue
        seen = [f for f in map(form_of, defs[r]) if f is not None]
        if not seen:
            continue
        new = seen[0] if all(f == seen[0] for f in seen) else _CONFLICT
        if new != forms.get(r):
            forms[r] = new
            for x in readers.get(r, ()):
                if x not in queued:
                    queued.add(x)
                    todo.append(x)
    # a definition whose form is still unknown reads something with none (a float register
    # moved into an integer one): its register has none either
    return {r: f for r, f in forms.items()
            if f and f != _CONFLICT and all(form_of(st) is not None for st in defs[r])}


_ROOT_OPS = frozenset(("mov", "cvta", "add", "sub", "selp"))     # what a pointer goes through


def _pointer_roots(body: list, kernel_params) -> dict:
    """{register: the kernel parameters whose pointer it may hold plus an offset}: from
    `ld.param` of a kernel parameter through mov, cvta, add, sub and selp; a register
    that no such chain reaches is absent. O(n * P) for P pointer parameters: a register's
    definitions are read again only when the set of one they read grows."""
    params = set(kernel_params)
    defs = _definitions(body)
    roots = {}
    # sets only grow: a worklist looks again at the registers that read one whose set grew
    readers = _readers(defs)
    todo, queued = list(defs)[::-1], set(defs)
    while todo:
        r = todo.pop()
        queued.discard(r)
        got = set(roots.get(r, ()))
        for st in defs[r]:
            if st.opcode == "ld" and _loads_kernel_param(st, params):
                got.add(st.operands[1].base.name)
            elif st.opcode in _ROOT_OPS:
                for op in st.operands[1:]:
                    if isinstance(op, ir.Reg):
                        got |= roots.get(op.name, set())
        if got != roots.get(r, set()):
            roots[r] = got
            for x in readers.get(r, ()):
                if x not in queued:
                    queued.add(x)
                    todo.append(x)
    return roots


def _memory_address(st):
    """The address operand of a load, store or atomic, else None."""
    if st.opcode in ("st", "red"):
        return st.operands[0] if st.operands else None
    if st.opcode in ("ld", "ldu", "atom"):
        return st.operands[1] if len(st.operands) > 1 else None
    return None


def read_memory(body: list, kernel_params=()) -> tuple:
    """What the body's loads and atomics read: the addresses `[%r + offset]` as (register,
    offset), and the kernel parameters whose buffers they point into (_pointer_roots). A
    store to either writes what the kernel reads too (saxpy's `y[i] = a * x[i] + y[i]`,
    softmax's `y[i] = e` and later `y[i] *= inv`): that line is in the cache or wanted
    there (compiler/cpu/streamstores.py)."""
    roots = _pointer_roots(body, kernel_params)
    addresses, buffers = set(), set()
    for st in body:
        if not isinstance(st, ir.Instruction) or st.opcode not in ("ld", "ldu", "atom", "red") or "param" in st.mods:
            continue
        addr = _memory_address(st)
        if isinstance(addr, ir.Addr) and isinstance(addr.base, ir.Reg):
            addresses.add((addr.base.name, addr.offset))
            buffers |= roots.get(addr.base.name, set())
    return addresses, buffers, roots


def streams(st, read) -> bool:
    """Whether `st` is a store that may bypass the caches (compiler/cpu/streamstores.py): to
    .global memory at `[%r + k]`, where neither that address nor the buffer of a kernel
    parameter that %r points into is read (`read`: read_memory of its function)."""
    if not isinstance(st, ir.Instruction) or st.opcode != "st" or "global" not in st.mods:
        return False
    addr = _memory_address(st)
    if not isinstance(addr, ir.Addr) or not isinstance(addr.base, ir.Reg):
        return False
    addresses, buffers, roots = read
    return (addr.base.name, addr.offset) not in addresses and not roots.get(addr.base.name, set()) & buffers


def streaming_store_bytes(body: list, kernel_params=()) -> int:
    """Bytes that one pass through the body stores where `streams` holds, each store counted
    once: what a thread of the kernel writes at least, unless it branches around them."""
    read = read_memory(body, kernel_params)
    total = 0
    for st in body:
        types = type_mods(st.mods) if streams(st, read) else None
        if types:
            total += max(width(types[-1]) // 8, 1) * vector_count(st.mods)
    return total


# instructions through which a block can see how far other blocks have got (atomics, fences,
# the cluster's shared memory and barriers, a dependent launch's handshake), or that may show
# which block ran first (a call: printf's output, an assertion's, or any of these in a
# function that is not inlined; a trap); every multimem instruction is one too
_BLOCK_ORDER_SHOWN = frozenset(("atom", "red", "red.async", "st.async", "membar", "fence", "fence.proxy",
                                "call", "trap", "brkpt", "griddepcontrol", "mapa", "getctarank",
                                "clusterlaunchcontrol.try_cancel", "clusterlaunchcontrol.query_cancel"))


def any_block_order(body: list) -> bool:
    """Whether the kernel's blocks may run in any order without a difference anyone could see
    but in time: no block can wait for another (an atomic, an ordered or volatile access, a
    fence, a cluster's memory or barrier) and nothing it does shows which ran first (printf,
    a trap). Such a kernel's blocks may be handed out last first (runtime/program.py)."""
    for st in body:
        if not isinstance(st, ir.Instruction):
            continue
        if st.opcode in _BLOCK_ORDER_SHOWN or st.opcode.startswith("multimem") \
                or ORDERED_MODS.intersection(st.mods) or any("cluster" in m for m in st.mods):
            return False
    return True


def constant_registers(body: list) -> dict:
    """{register: int} for the registers whose only definition is an unguarded `mov` of an
    integer immediate: wherever such a register is read after its definition it holds that
    value. nvcc puts the constant operands of `shfl.sync` (lane offset, clamp, member mask)
    in such registers; knowing them at compile time lets the scheduler resolve a shuffle as a
    fixed permutation of the warp's lanes."""
    defs, const = {}, {}
    for st in body:
        if not isinstance(st, ir.Instruction):
            continue
        for r in defs_uses(st)[0]:
            defs[r] = defs.get(r, 0) + 1
        ops = st.operands
        if (st.opcode == "mov" and st.guard is None and len(ops) == 2 and isinstance(ops[0], ir.Reg)
                and isinstance(ops[1], ir.Imm) and isinstance(ops[1].value, int) and not ops[1].is_float):
            const[ops[0].name] = ops[1].value
    return {r: v for r, v in const.items() if defs.get(r) == 1}


_FUSABLE_TYPES = ("f32", "f64")
_NOT_FUSABLE_MODS = frozenset(("rn", "rz", "rm", "rp", "sat"))


def _fusable(inst, opcodes) -> bool:
    return (inst.opcode in opcodes and inst.guard is None and bool(inst.mods)
            and inst.mods[-1] in _FUSABLE_TYPES and not _NOT_FUSABLE_MODS & set(inst.mods)
            and all(isinstance(op, (ir.Reg, ir.Imm)) for op in inst.operands))


def fused_products(body: list) -> dict:
    """id(add or sub) -> the mul whose product it takes, for each pair that ptxas fuses into
    one fma (an H200 gives `x * y - z` written as mul.f32 and sub.f32 as one fma.rn): a float
    mul and add/sub of one type, neither with a rounding modifier or .sat, both .ftz or
    neither, unpredicated, in one basic block; the product read by that add/sub alone, and
    the mul's sources not written in between. With a rounding modifier (what __fmul_rn and
    __fadd_rn write) PTX keeps the two roundings. O(n): a write drops the products it
    overwrites or whose sources it writes through an index by source register."""
    effects = {id(st): defs_uses(st) for st in body if isinstance(st, ir.Instruction)}
    uses = Counter(r for _, read in effects.values() for r in read)
    defs = Counter(r for written, _ in effects.values() for r in written)
    fused, pending = {}, {}             # pending: product register -> its mul, in this block
    waiting = {}                        # register -> the pending products whose mul reads it
    for st in body:
        if isinstance(st, ir.Label):
            pending.clear()
            waiting.clear()
            continue
        if not isinstance(st, ir.Instruction):
            continue
        if _fusable(st, ("add", "sub")):
            for op in st.operands[1:]:
                mul = pending.get(op.name) if isinstance(op, ir.Reg) else None
                if mul is not None and mul.mods == st.mods:
                    fused[id(st)] = mul
                    break
        for w in effects[id(st)][0]:
            pending.pop(w, None)        # the product overwritten, or a source of one
            for r in waiting.pop(w, ()):
                pending.pop(r, None)
        if _fusable(st, ("mul",)):
            r = st.operands[0].name
            if uses.get(r) == 1 and defs.get(r) == 1:
                pending[r] = st
                for op in st.operands[1:]:
                    if isinstance(op, ir.Reg):
                        waiting.setdefault(op.name, []).append(r)
        if ends_block(st):
            pending.clear()
            waiting.clear()
    return fused
