"""Dataflow over a PTX function body: what each instruction writes and reads (defs_uses), where
each register is defined, which registers are live across each suspension (they are the
values a thread must keep in its frame while it waits), which definitions reach an
instruction, and what a thread writes between a resume and its next suspension.
"""
from __future__ import annotations

from ...ptx import ir
from .cfg import build_cfg, predecessors
from .suspensions import is_suspension

# Instructions that write no register operand.
NO_DEST = {"st", "red", "bar", "barrier", "membar", "fence", "bra", "brx", "ret", "exit", "trap",
           "brkpt", "call", "prefetch", "prefetchu", "nanosleep", "pmevent", "griddepcontrol",
           "cp.async", "cp.async.bulk", "cp.reduce.async.bulk", "discard", "applypriority",
           "stmatrix", "st.async", "red.async", "multimem.st", "multimem.red", "setmaxnreg",
           "tensormap.replace", "mbarrier.init", "mbarrier.inval", "mbarrier.expect_tx",
           "mbarrier.complete_tx", "wgmma.fence", "wgmma.commit_group", "wgmma.wait_group"}


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


def compute_liveness(blocks: list) -> None:
    """Each block's live_in and live_out: the least solution of the classic backward
    dataflow (a guarded definition does not kill its register), found per register from its
    uses: a register read in a block before any unguarded write there is live into it, and
    from there into each predecessor's exit and, unless that predecessor writes it
    unguarded, into its entry, and on. Each (block, register) pair enters a live_in once and
    each (edge, register) pair a live_out once: O(n + E * L) for E edges and L registers live
    at once, the size of the answer; no round over the whole function is repeated."""
    preds = predecessors(blocks)
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


def loads_kernel_param(st: ir.Instruction, params) -> bool:
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
        self.preds = predecessors(self.blocks)
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
                            # keep a round over its threads scalar


def definition_positions(body: list) -> dict:
    """{register: the positions of the instructions that write it, in body order}. O(n)."""
    defs = {}
    for pos, st in enumerate(body):
        if isinstance(st, ir.Instruction):
            for r in defs_uses(st)[0]:
                defs.setdefault(r, []).append(pos)
    return defs


def definitions_of(body: list) -> dict:
    """{register: the instructions that write it, in body order}."""
    return {r: [body[p] for p in ps] for r, ps in definition_positions(body).items()}


def readers_of(defs: dict) -> dict:
    """{register: the registers with a definition (of `defs`, definitions_of) that reads it}."""
    readers = {}
    for r, sts in defs.items():
        for st in sts:
            for u in defs_uses(st)[1]:
                readers.setdefault(u, set()).add(r)
    return {u: sorted(rs) for u, rs in readers.items()}


def computed_by(reg, opcode, body, defs) -> bool:
    """Whether an instruction of `opcode` (or one `opcode(instruction)` accepts) is among those
    register `reg` is computed from."""
    matches = opcode if callable(opcode) else (lambda st: st.opcode == opcode)
    seen, todo = set(), [reg]
    while todo:
        r = todo.pop()
        if r in seen:
            continue
        seen.add(r)
        for p in defs.get(r, ()):
            if matches(body[p]):
                return True
            todo.extend(defs_uses(body[p])[1])
    return False


def computed_from(registers, body, defs) -> set:
    """The registers computed from any of `registers` (theirs included), `defs`
    definition_positions of `body`: one pass forward over the readers. O(n)."""
    readers = readers_of({r: [body[p] for p in positions] for r, positions in defs.items()})
    found, todo = set(), list(registers)
    while todo:
        r = todo.pop()
        if r not in found:
            found.add(r)
            todo.extend(readers.get(r, ()))
    return found


DATA_LOADS = ("ld", "ldu", "atom", "tex", "suld", "shfl")    # what makes a value data-dependent


def loaded_from_memory(reg, body, defs) -> bool:
    """Whether register `reg` is computed from a value loaded from memory other than the
    kernel's parameters (`defs`: definition_positions): an index read from a table, a
    neighbour's value through a shuffle."""
    return computed_by(reg, lambda st: st.opcode in DATA_LOADS and "param" not in st.mods, body, defs)
