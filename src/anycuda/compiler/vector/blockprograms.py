"""Block programs: all threads of a block as one vector program, for one block shape.

The rounds (compiler/simt/blockfunction.py) run a block stretch by stretch, from one barrier or
shuffle to the next, each stretch a loop over the threads that reloads and respills their
registers; scan's first kernel spends ~1.4 us per block of 1024 ints that way, where the
same computation with the block's values kept in vector registers takes 0.2-0.4 us
(benchmarks/models/block_program_scan*, NOTES "Block-wide programs").

A block program is made for a kernel with barriers or shuffles and a block of X x Y x Z
threads, X a multiple of 32, at the first launch of that shape: each warp is then 32
consecutive x values of one row, so %tid.x is a ramp over its lanes and %tid.y, %tid.z are
alike in them. Where X is a multiple of 16 or 8 only (16 x 16 tiles), a vector is one row of
that many threads instead, and a kernel with warp instructions (shuffles, %laneid) is not
taken: those need a warp's lanes in one vector. The kernel's code is *if-converted* into
code over the lanes. Each basic block runs under a mask, the lanes whose path goes through
it (a branch `@p bra L` gives L's mask `m & p` and leaves `m & !p` to the code after it;
`ret` takes lanes out; where the parts meet again the mask is m once more, laneparts.py); a
register write under a mask is a `select`. Lanes thus go through the code in program order
together, so a barrier is a point that every lane reaches at once: the program runs from
barrier to barrier, each stretch a loop over the block's warps in which a register is one
`<32 x T>` value (blockstretches.py), and a fixed shuffle (warpruns.fixed_shuffle) a
permutation of a warp's lanes. A branch every lane of a warp takes alike (`uniform`) skips
what it jumps over for the whole warp; a loop within a stretch runs over the lanes while
some lane goes round (blockloops.py), a loop around barriers as a loop of stretches
(blockstretches.py; nvcc unrolls short loops, unrolling.py the ones the block shape fixes),
and so does a grid-stride loop, whose turns run a round of every warp (blockstretches.py).

Loads and stores: a register is also tracked as `base + stride * lane` where it is one (a
scalar base and a constant stride: the thread index, times and plus constants and uniform
values), with a run-time check where widening an index could wrap in some lane. An access
whose address has stride 0 is one scalar access; stride the element size, one vector
access; stride 2-8 elements, one load of the span and a permutation (or, for stores, the
group of k stores that together cover the span as one store); any other a gather or
scatter (where it has no shape, first looked at when it runs: a few runs of consecutive
elements are a masked access each, two without a loop), or for a few lanes a loop over
them. Where every lane of the mask runs (a full block, where the bounds check holds
everywhere), accesses take constant masks or none.

A kernel with anything else (atomics, calls, votes, local memory, loops
whose lanes part round a barrier, ...) raises NotVectorisable and keeps the rounds; so does
one without barriers or shuffles, which the plain loop over its threads vectorises as it is.

The instructions (blockops.py: OPS), the memory accesses (blockmemory.py: BlockMemory), the
loops (blockloops.py: LoopParts), the stretches (blockstretches.py: StretchParts), the sums
whose shapeless parts cancel (blockforms.py: FormParts) and the groups of neighbouring blocks
run together (blockgroups.py: GroupParts) are modules of their own, parts BlockProgram
inherits; this one makes the program.
"""
from __future__ import annotations

from types import SimpleNamespace

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..analysis import fusion, memory, uniformity, walks
from ..analysis.cfg import back_branches
from ..analysis.spans import SpanFacts
from ..cpu import launch, loopprefetch
from ..irutil import at_function_start, convert_bits, dynamic_shared_start, i32, i64, load_field, store_field
from ..ops import spinwaits
from ..ops.table import takes
from ..types import I1, I32, I64, PTR, llvm_type, width
from .blockgroups import GroupParts, group_size
from .blockloops import LoopParts, LoopShapeLost, grid_strided, memory_bound, uniform_registers
from .blockforms import FormParts
from .blockmemory import PREFETCH_SITES, BlockMemory
from .blockops import OPS, TAKES, WARP, Affine, and_masks, and_scalar, constant_shape, holding_if, is_empty, load_bases
from .blockstretches import StretchParts
from .sharedwindows import SharedWindows
from .laneparts import Parts
from .warpruns import NotVectorisable, WarpCode

SKIP_AT_LEAST = 8          # instructions a branch jumps over before a test that some lane runs them pays
ACCESS_WEIGHT = 3          # a memory access under a mask counts as this many (a masked load or store
                           # is several instructions; a tree reduction's `if (tid < s)` step, 6
                           # instructions, 3 of them accesses, ran ~1.5-2x faster with the test)
EXPORT = "anycuda.blockprogram.launch"
FRAME_BYTES = abi.FRAME_HEADER + 24 * PREFETCH_SITES   # a worker's frame: the header, the prefetched
                                                        # loads' last addresses, their loops' rounds
_NAME = "ptx.blockprogram"
_BARRIERS = frozenset(("bar", "barrier"))
_TOUCHES_MEMORY = frozenset(("ld", "st", "bar", "barrier", "atom", "red", "ldmatrix", "stmatrix",
                             "wmma.load", "wmma.store", "cp.async"))    # what a waiting store must not pass
_ACCESSES = frozenset(("ld", "st", "atom", "red", "ldmatrix", "stmatrix", "wmma.load", "wmma.store", "cp.async"))
_NOT_ALIKE = frozenset(("st", "shfl", "bar", "barrier", "atom", "red", "movmatrix"))     # (what a warp's lanes may hold apart after)
_ALIKE_SPECIAL = frozenset(("ntid", "nctaid", "ctaid", "warpid", "nsmid", "gridid"))
# rows narrower than a warp: a vector is one row of 16 or 8 threads (stencil5_smem_16x16 took
# 5.6x C in the rounds, a warp of two rows having no ramp of %tid.x)
NARROW_LANES = (16, 8)


def lane_width(block) -> int | None:
    """The lanes of one vector of a block program for blocks of shape `block`: a warp where
    the rows are whole warps, else the widest of NARROW_LANES that divides a row (16 x 16
    blocks: a row of 16; a kernel with warp instructions is then not taken), or None."""
    x = block[0]
    return next((n for n in (WARP, *NARROW_LANES) if x % n == 0), None)


def supported_shape(block) -> bool:
    """Whether a block shape can have a block program: rows of whole vectors (lane_width)."""
    x, y, z = block
    return x >= 1 and lane_width(block) is not None and y >= 1 and z >= 1 and x * y * z <= abi.MAX_BLOCK_THREADS


def check_takes(pfn) -> None:
    """NotVectorisable unless a block program is worth making for kernel `pfn`: one with
    barriers or shuffles, or with a memory-bound loop that is not a grid-stride loop."""
    if spinwaits.spin_loops(pfn.body):
        # (its warps run one after another: one spinning would wait for ever for a later one)
        raise NotVectorisable("a loop that spins on a word other threads write (ops/spinwaits.py)")
    if any(isinstance(st, pir.Instruction) and (st.opcode in _BARRIERS or st.opcode == "shfl") for st in pfn.body):
        return
    # the plain loop over a block's threads vectorises a kernel without them as it is (a block
    # program made vector_add 3x slower: a loop per warp, its checks per access); but where
    # each thread runs a loop, that loop is innermost and the threads stay scalar
    if walks.threads_walk_alone(pfn.body, [d.name for d in pfn.params]):
        raise NotVectorisable("each thread walks memory of its own (analysis/walks.py)")
    labels = {st.name: pos for pos, st in enumerate(pfn.body) if isinstance(st, pir.Label)}
    loops = back_branches(pfn.body, labels)
    if loops:
        strided, uniform = grid_strided(pfn), uniform_registers(pfn)
        if any(back not in strided and memory_bound(pfn.body, head, back, uniform) for head, back in loops.items()):
            return
    raise NotVectorisable("no barrier or shuffle, and no memory-bound loop")


def emit_module(layout, pfn, block: tuple) -> str:
    """LLVM IR of a module with the block program of kernel `pfn` for blocks of shape
    `block` (x, y, z) and its launch function EXPORT (`void (Launch*)`, as a kernel's); `layout`
    is a ModuleLowering of its unit with its variables declared (the shared-memory layout).
    Raises NotVectorisable for a kernel the block program does not take."""
    shapeless = frozenset()
    while True:
        try:
            program = BlockProgram(layout, pfn, block, shapeless)
            block_fn = program.emit()
            break
        except LoopShapeLost as e:        # (each register once: the tries end)
            shapeless |= {e.register}
    # a block program called once per block: inlined into the loop over a chunk's blocks,
    # scan (1.28-1.47x C) went to 1.68-1.85x (NOTES "One call per chunk")
    launch.emit_launch(program.mod, _NAME, block_fn, False, FRAME_BYTES, EXPORT, chunk_calls=False,
                       shared_blocks=program.group if program.shared else 1)
    return str(program.mod)


class BlockProgram(BlockMemory, LoopParts, StretchParts, SharedWindows, FormParts, GroupParts):
    """`i32 (i8* L, i8* ws, i8* shared, i32 cx, i32 cy, i32 cz, i32 worker, i32 start)`, the
    signature of a block function (blockfunction.emit_block_function), for blocks of shape `block`.
    `layout` is the ModuleLowering of the kernel's unit (its parameters and shared memory)."""

    def __init__(self, layout, pfn: pir.Function, block: tuple, shapeless=frozenset()):
        self.layout, self.pfn, self.block = layout, pfn, tuple(block)
        self.shapeless = shapeless     # registers whose shapes do not hold round a loop (blockloops.py)
        self.frame = None              # a loop's mask, under which a write sets every lane
        self._open_loops = []          # the loops being made, innermost last
        self.uniform = set()           # registers every lane of the warp holds alike (_note_uniform)
        self._skipping = {}            # label -> i1: the warp jumps to it over a barrier (blockstretches.py)
        self._skipped = {}             # the same, for those reached in this stretch
        self._applied = set()          # those whose parts run behind their tests now
        self._skip_at = {}             # each of those (a label, or a label and a number) -> its position
        self._again = None             # the slot of a loop around barriers: some warp goes round
        self._turn_after = {}          # the position after a loop in turns -> how the mask there is kept
        self._turn_outs = {}           # a loop in turns' head -> {register: how its exit value is kept}
        self._turn_exact = {}          # ... -> {register: how whether its exit value keeps its shape is kept}
        self._turn_shapes = {}         # ... -> {register: (how its exit shape's base is kept, its stride)}
        threads = block[0] * block[1] * block[2]
        lanes = lane_width(block)
        if lanes is None:
            raise NotVectorisable(f"block {block} is not rows of whole vectors")
        # a "warp" of the program is `lanes` consecutive threads of one row: a real warp where
        # lanes is 32, else a part of one, which warp instructions cannot see as theirs
        self.threads, self.lanes, self.block_warps = threads, lanes, threads // lanes
        self.row_warps = block[0] // lanes          # warps in one row of x
        self.read_memory = memory.read_memory(pfn.body, layout.kernel_params(pfn))
        self.streaming = False        # the store being made may bypass the caches (_st)
        self.mod = ir.Module(name=f"{pfn.name}.block{'x'.join(map(str, block))}")
        self.fn = ir.Function(self.mod, ir.FunctionType(I32, [PTR, PTR, PTR, I32, I32, I32, I32, I32]),
                              name=_NAME + ".block")
        self.fn.linkage = "internal"
        self.launch, ws, shared, *self.ctaid, _, _ = self.fn.args
        shared.name = loopprefetch.SHARED_ARGUMENT[1:]      # (no prefetches ahead of its loads)
        self.ws = ws
        self.position = None      # the body position of the instruction being emitted
        self.high_alike = None    # (position, register, ...) of the last shr that left high bits alike (blockops)
        self.in_shared = False    # the access being made is in .shared (BlockMemory.access)
        self.access_space = ""    # the state space it names ('' generic: types.space_of)
        self.long_blocks = False  # its blocks pass several barriers (StretchParts._emit_stretches)
        self._prefetched = {}     # body position of a load -> (kind, its frame slot, its step's and first pass's stack slots)
        self._round_steps = {}    # body position of a load in a loop -> (its last address, its step: stack slots)
        self._bound_loops = None  # (head, back) of each loop -> memory-bound (BlockMemory._memory_bound_loop)
        self._definition_positions = None     # dataflow.definition_positions of the body, once asked
        self._indexed = {}        # body position of an access -> its address comes from loaded values
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        # a memory fault names the block; the faulting thread is not known (launch.emit_launch)
        store_field(self.b, ws, abi.CTX["linear"], i32(-1))
        self.params = self.b.inttoptr(load_field(self.b, self.launch, abi.LAUNCH["params"], I64), PTR)
        self.shared_base = self.group_shared = self.b.ptrtoint(shared, I64)
        self.constants = uniformity.constant_registers(pfn.body)
        self.f = SimpleNamespace(fused_products=fusion.fused_products(pfn.body))
        self.values, self.shapes, self.types = {}, {}, {}
        self.whole = {}           # register -> whether its last write set every lane
        self.forms = {}           # register -> (its vector, its Form) where it is a sum of shapeless values (blockforms.py)
        self.mask = None          # the lanes the current instruction runs for (None: all of them)
        self.warp = None          # the warp being emitted (i32, the loop's counter)
        self.here = None          # the lanes at the current position (None: all)
        self.reach = {}           # label -> the mask of the lanes that branched there
        self.parts = Parts()      # the masks as parts of the branches that made them (laneparts.py)
        self._dynamic = None      # where the dynamic shared memory starts in the window
        self._slots = {}          # what a warp keeps from stretch to stretch -> its stack array
        self._resumed = {}        # slot key -> the value this warp loaded from it as its stretch began
        self._warp_counters = set()  # each stretch's counter of its loop over warps (recompute.py)
        self._recomputed = {}     # what the stretch being made computed again (recompute.py)
        self.one_way = {}         # a phi of a register a skipped part wrote first -> its value from there
        self._elsewhere = None    # the stack slot a gather's lanes off its mask read (_off_lanes_elsewhere)
        self._pending = None      # WaitingStores: interleaved stores not yet made (BlockMemory._store)
        self._spans_loaded = {}   # a group of interleaved loads -> its span, loaded once (_load_group)
        self._liveness = None     # dataflow.LiveBefore of the body, made at the first barrier
        self._shape_values = None  # shapevalues.BlockValues of the body, made at the second (idle warps)
        self.shared = self._shared_layout()
        # neighbouring blocks run together (blockgroups.py): the program's warps are all of theirs
        self.group = group_size(pfn, self.block, self.shared)
        self.warps = self.group * self.block_warps
        self._init_windows()

    # -------------------------------------------------------------- layout
    def _shared_layout(self) -> dict:
        """{shared variable: window offset, None for an extern one (known at launch)}, as
        the module lays out the kernel's; and the registers' types."""
        local, _ = self.layout.kernel_shared_layout(self.pfn)
        offsets = {**self.layout.shared, **dict.fromkeys(self.layout.extern_shared), **local}
        for st in self.pfn.body:
            if isinstance(st, pir.VarDecl) and st.space == "reg":
                if st.vector:
                    raise NotVectorisable("a vector register")
                self.types[st.name] = st.type
            elif isinstance(st, pir.VarDecl) and st.space != "shared":
                raise NotVectorisable(f".{st.space} variable")
        return offsets

    # -------------------------------------------------------------- the program
    # The program runs stretch by stretch, from barrier to barrier, each stretch a loop over
    # the block's warps: within a stretch a warp's registers are <32 x T> values that stay
    # in vector registers (a <W x T> value for the whole block, 16 zmm registers each, made
    # LLVM spill nearly everything: 1.05 us per block of scan against 0.2-0.4 in the models),
    # and what a warp needs in a later stretch waits in a stack array, one element per warp.

    def emit(self) -> ir.Function:
        body, b = self.pfn.body, self.b
        self.labels = {st.name: pos for pos, st in enumerate(body) if isinstance(st, pir.Label)}
        self.spans = self._skippable_spans()
        self.load_bases = load_bases(body)
        self._enter_group()
        self._emit_stretches()
        if self.reach:
            raise NotVectorisable("a branch to the end")
        b.ret(i32(abi.BLOCK_DONE))
        return self.fn

    def _run(self, lo, hi):
        """Body positions lo..hi-1; a span a branch jumps over is skipped where no lane of
        the warp runs it (scan's `if (warp == 0)`: seven of eight warps went through its
        shuffles with an empty mask)."""
        pos = lo
        while pos < hi:
            if self.run_skipping(pos, hi):
                return
            st = self.pfn.body[pos]
            target = self.uniform_target(pos, st)
            if target is not None:
                pos = self.skip_uniformly(pos, st, target, hi)
                continue
            self._step(pos, st)
            if pos in self.loops:
                pos = self.loops[pos] + 1 if is_empty(self.here) else self._loop(pos, self.loops[pos])
                continue
            end = self.spans.get(pos)
            if end is not None and end <= hi and self.here is not None and not is_empty(self.here):
                self._only_if_some_lane(pos + 1, end)
                pos = end
            else:
                pos += 1

    def _skippable_spans(self) -> dict:
        """{position of a conditional forward branch: its target's position} where what lies
        between is worth a test (SKIP_AT_LEAST instructions, an access weighing ACCESS_WEIGHT)
        and self-contained: no barrier, no exit, no branch out of it but to its end, no branch
        into it from outside (analysis/spans.py)."""
        body, spans, facts = self.pfn.body, {}, None
        accesses = [0]                      # accesses[i]: memory instructions before position i
        for st in body:
            accesses.append(accesses[-1] + (isinstance(st, pir.Instruction) and st.opcode in _ACCESSES))
        for pos, st in enumerate(body):
            if not (isinstance(st, pir.Instruction) and st.opcode == "bra" and st.guard is not None
                    and isinstance(st.operands[0], pir.Sym)):
                continue
            end = self.labels.get(st.operands[0].name, -1)
            if end <= pos + 1:
                continue
            facts = facts or SpanFacts(body, self.labels, _BARRIERS | {"ret", "exit"})
            weight = facts.instructions(pos + 1, end) + (ACCESS_WEIGHT - 1) * (accesses[end] - accesses[pos + 1])
            if weight >= SKIP_AT_LEAST and facts.self_contained(pos + 1, end):
                spans[pos] = end
        return spans

    def _only_if_some_lane(self, lo, hi):
        """Positions lo..hi-1 behind a test that some lane is here (blockstretches._behind)."""
        self._behind(self._some_lane(self.here), lambda: self._run(lo, hi), idle=True)

    def _merge(self, before, pre, end, idle=False, cond=None):
        b = self.b
        values, shapes, whole, here, reach, skipping, uniform, outs = before

        def phi(now, then):
            if now is then:
                return now
            node = b.phi(now.type)
            node.add_incoming(now, end)
            node.add_incoming(ir.Constant(now.type, None) if then is None else then, pre)
            if then is None:                # (new in the part: the way past it has no value)
                self.one_way[node] = now
            return node

        for r, v in list(self.values.items()):
            if values.get(r) is not v:
                if r in values and r not in uniform:
                    self.uniform.discard(r)     # (alike on both ways in, or new: alike still)
                self.values[r] = phi(v, values.get(r))
                self.whole[r] = self.whole.get(r, False) and (r not in values or whole.get(r, False))
        for r, v in values.items():
            if r not in self.values:
                # a register the part let go of (dead after it for the lanes that ran it) that
                # a warp skipping the part still holds for what follows: philox's state, which
                # curand_uniform4's second loop reads first, while its first loop (skipped)
                # let it go at its end (the loop's exit values are those live after it)
                self.values[r] = phi(ir.Constant(v.type, None), v)
                self.whole[r] = False
                self.uniform.discard(r)
        for r, shape in list(self.shapes.items()):
            old = shapes.get(r)
            if old is shape:
                continue
            if r in values and (old is None or old.stride != shape.stride):
                del self.shapes[r]          # (the register had lanes of another form before)
                continue
            exact = None if shape.exact is None and (old is None or old.exact is None) else \
                phi(shape.exact or ir.Constant(I1, 1), None if old is None else old.exact or ir.Constant(I1, 1))
            self.shapes[r] = Affine(phi(shape.base, None if old is None else old.base), shape.stride, exact,
                                    shape.align if old is None else min(shape.align, old.align))
        def lanes(mask):
            return self._all_lanes() if mask is None else mask

        def mask_phi(now, then):
            if now is then:
                return now
            node = phi(lanes(now), lanes(then))
            if idle:              # (the lanes of `now` either way: the parts it is made of stay known)
                self.parts.alias(node, now)
            elif cond is not None:
                self.parts.chosen(node, cond, now, then)
            return node
        self.here = mask_phi(self.here, here)
        for label in set(self.reach) | set(reach):
            self.reach[label] = mask_phi(self.reach.get(label, self._none()), reach.get(label, self._none()))
        for opened, then in zip(self._open_loops, outs):     # (a break in it: the loop's exit values)
            for r, v in opened.outs.items():
                opened.outs[r] = phi(v, then[r])
        for choices in (self._skipping, self._skipped):
            for label, flag in choices.items():
                choices[label] = phi(flag, skipping.get(label, ir.Constant(I1, 0)))

    def _joined(self, label, arriving):
        """The lanes at `label`: those going on and those `arriving` by branches; where they
        make up the lanes before the branches that parted them, that very mask (all lanes,
        most often: writes after it are then whole, and registers keep their shapes; the tree
        reduction's `if (tid < s) ...` left its stride register masked, its accesses gathers)."""
        return self.parts.union(self.b, self.here, arriving)

    def _step(self, pos, st):
        b = self.b
        if isinstance(st, pir.Label):
            if pos in self.loops or pos in self.barrier_loops:
                self.drop_windows()
            if not self.turn_label(pos, st.name):
                self.here = self._joined(st.name, self.reach.pop(st.name, self._none()))
            return
        if not isinstance(st, pir.Instruction) or is_empty(self.here):
            return                    # (no lane comes here after an unconditional branch)
        guard = None
        if st.guard is not None:
            guard = self.read(st.guard.reg, "pred")
            if st.guard.negated:
                guard = b.not_(guard)
        if st.opcode == "bra" and pos in self.barrier_backs:
            return self.go_round(pos, st)
        if st.opcode == "bra":
            target = st.operands[0]
            if not isinstance(target, pir.Sym) or self.labels.get(target.name, -1) <= pos:
                raise NotVectorisable("a loop or an indirect branch")
            taken, rest = self._split(guard)
            self._note_branch(self.labels[target.name], taken)
            self.reach[target.name] = self.parts.union(b, self.reach.get(target.name, self._none()), taken)
            self.here = rest
            return
        if st.opcode in ("ret", "exit"):
            self.here = self._split(guard)[1]
            return
        if st.opcode in _TOUCHES_MEMORY and st.opcode != "st" and not self.passes_waiting_stores(st):
            self.flush_stores()
        if st.opcode in ("atom", "red"):
            self.drop_windows()
        self.mask = and_masks(b, self.here, guard)
        if not takes(TAKES, st):
            raise NotVectorisable(f"'{st.opcode}' with {st.mods}")
        self.position = pos
        OPS[st.opcode](self, st)
        self.mask = None
        self._note_uniform(st)

    def _split(self, guard):
        """(the lanes here where `guard` holds, the others): a branch's two ways."""
        if guard is None:
            return self.here, self._none()
        taken, rest = and_masks(self.b, self.here, guard), and_masks(self.b, self.here, self.b.not_(guard))
        self.parts.split(self.here, taken, rest, guard)
        return taken, rest

    def _note_uniform(self, st):
        """After `st` wrote its register: whether every lane of the warp holds one value in it
        (`uniform`), where the write was whole and all it reads is alike in the lanes: a branch
        on such a predicate takes the warp as one (blockstretches.py). A load is alike where
        its address is."""
        dst = st.operands[0] if st.operands else None
        if st.opcode in _NOT_ALIKE or not isinstance(dst, pir.Reg) or not self.whole.get(dst.name):
            return
        sources = st.operands[1:]
        if st.opcode == "ld":
            sources = [sources[0].base if isinstance(sources[0], pir.Addr) else sources[0]]
        if all(self.alike(op) for op in sources):
            self.uniform.add(dst.name)

    def alike(self, op) -> bool:
        """Operand `op` holds one value in every lane of the warp."""
        if isinstance(op, (pir.Imm, pir.Sym)):
            return True
        if isinstance(op, pir.SpecialReg):
            return op.name in _ALIKE_SPECIAL or op.name == "tid" and op.component in ("y", "z")
        if isinstance(op, pir.Reg):
            shape = self.shapes.get(op.name)
            return op.name in self.uniform or shape is not None and shape.stride == 0 and shape.exact is None
        return False

    def _none(self):
        return ir.Constant(ir.VectorType(I1, self.lanes), None)

    # -------------------------------------------------------------- registers (warpruns' interface)
    def _vec(self, elem):
        return ir.VectorType(elem, self.lanes)

    def _reg_type(self, name):
        if name not in self.types:
            raise NotVectorisable(f"undeclared register {name}")
        return llvm_type(self.types[name])

    def reg_value(self, name):
        if name not in self.values:
            self.values[name] = ir.Constant(self._vec(self._reg_type(name)), None)
        return self.values[name]

    splat = WarpCode.splat

    def lane_constant(self, values, elem=I32):
        return ir.Constant(self._vec(elem), [ir.Constant(elem, v) for v in values])

    def special(self, op):
        return self.shaped_special(op)[0]

    def shaped_special(self, op):
        """A special register's lanes in the current warp, and its Affine shape."""
        name, comp = op.name, op.component
        if name == "tid" and comp in ("x", "y", "z"):
            return self._thread_index(comp)
        if name == "ntid" and comp in ("x", "y", "z"):
            n = self.block["xyz".index(comp)]
            return self.splat(i32(n)), constant_shape(i32(n))
        if name == "ctaid" and comp in ("x", "y", "z"):
            v = self.block_x() if comp == "x" else self.ctaid["xyz".index(comp)]
            return self.splat(v), Affine(v, 0)
        if name == "nctaid" and comp in ("x", "y", "z"):
            v = load_field(self.b, self.launch, abi.LAUNCH["grid_" + comp], I32)
            return self.splat(v), Affine(v, 0)
        if name in ("laneid", "warpid"):
            self.need_warps(f"%{name}")
        if name == "laneid":
            return self.lane_constant(range(WARP)), constant_shape(i32(0), 1)
        if name == "warpid":
            w = self.warp_in_block()
            return self.splat(w), Affine(w, 0)
        raise NotVectorisable(f"%{name}")

    def need_warps(self, what):
        """NotVectorisable unless the program's vectors are whole warps (`what` needs them)."""
        if self.lanes != WARP:
            raise NotVectorisable(f"{what} in blocks {self.block[0]} threads wide")

    def _thread_index(self, comp):
        """%tid.x, .y or .z in the current warp: x a ramp from the warp's first column, y and
        z its row's, alike in every lane."""
        b, (_, y, z) = self.b, self.block
        warp = self.warp_in_block()
        if comp == "x":
            column = warp if y * z == 1 else b.urem(warp, i32(self.row_warps))
            first = b.mul(column, i32(self.lanes))
            return b.add(self.splat(first), self.lane_constant(range(self.lanes))), Affine(first, 1, None, self.lanes)
        if (y if comp == "y" else z) == 1:
            return self.splat(i32(0)), constant_shape(i32(0))
        row = b.udiv(warp, i32(self.row_warps))
        v = b.urem(row, i32(y)) if comp == "y" else b.udiv(row, i32(y))
        return self.splat(v), Affine(v, 0)

    def read(self, op, t):
        """An operand's lanes (warpruns.WarpCode.read, and shared variables' window offsets)."""
        if isinstance(op, pir.Sym):
            return self.splat(convert_bits(self.b, self._symbol(op.name), llvm_type(t)))
        return WarpCode.read(self, op, t)

    def _symbol(self, name) -> ir.Value:
        """i64: what `mov r, name` gives: a shared variable's window offset, a module variable's address."""
        return self._shared_offset(name) if name in self.shared else self.variable_address(name)

    immediate = WarpCode.immediate

    def write(self, op, value, t):
        """A register's new lanes; under a mask the others keep their values, but for a
        register no lane has written yet (nvcc's PTX writes most registers once): its other
        lanes are undefined, so they may take these values too, and the register its shape."""
        if not isinstance(op, pir.Reg):
            raise NotVectorisable(f"destination {op}")
        value = convert_bits(self.b, value, self._reg_type(op.name), t.startswith("s"))
        whole = self.mask is None or self.mask is self.frame or op.name not in self.values
        if not whole:
            value = self.b.select(self.mask, value, self.reg_value(op.name))
        self.values[op.name] = value
        self.whole[op.name] = whole
        self.note_write(op.name)
        self.shapes.pop(op.name, None)
        self.uniform.discard(op.name)

    def _shared_offset(self, name) -> ir.Value:
        """A shared variable's i64 offset in the block's shared window: an extern one's is
        where the launch's dynamic part starts (ModuleLowering.extern_shared_offset)."""
        if name not in self.shared:
            raise NotVectorisable(f"symbol {name}")
        if self.shared[name] is not None:
            return i64(self.shared[name])
        if self._dynamic is None:
            with at_function_start(self.b):
                total, dyn = (load_field(self.b, self.launch, abi.LAUNCH[k], I32) for k in ("shared_total", "dyn_shared"))
                self._dynamic = dynamic_shared_start(self.b, total, dyn)
        return self._dynamic

    # -------------------------------------------------------------- shapes
    def shape(self, op, t):
        """The Affine shape of an operand read at type t (integers only), or None."""
        if isinstance(op, pir.Imm) and not op.is_float and t[0] in "bus":
            return constant_shape(ir.Constant(llvm_type(t), op.value & ((1 << width(t)) - 1)))
        if isinstance(op, pir.SpecialReg):
            shape = self.shaped_special(op)[1]
            return shape if shape is not None and width(t) == 32 else None
        if isinstance(op, pir.Sym) and t[0] in "bus":
            return Affine(convert_bits(self.b, self._symbol(op.name), llvm_type(t)), 0)
        if isinstance(op, pir.Reg):
            shape = self.shapes.get(op.name)
            if shape is not None and shape.base.type == llvm_type(t):
                return shape
        return None

    def set_shape(self, op, shape):
        """After an instruction wrote register `op`: its shape, if the write was whole; if it
        was under a mask over lanes that kept other values, the shape holds where every lane
        is in the mask at run time (a branch nvcc cannot know all lanes take alike, as
        `((C - 1 - lane) / 32 + 1) & 3`, its remainder loop's count before a loop unrolled
        by four, which is alike in a warp when C is a multiple of 32)."""
        if shape is None or not isinstance(op, pir.Reg):
            return
        if self.whole.get(op.name):
            self.shapes[op.name] = shape
        elif self.mask is not None:
            self.shapes[op.name] = holding_if(self.b, shape, self._every_lane(self.mask))

    def widened(self, shape, t, to_bits):
        """The shape of an integer of type t widened to `to_bits`: exact where no lane's value
        leaves t's range on the way from lane 0 (checked here, at run time)."""
        b = self.b
        signed = t.startswith("s")
        wide = ir.IntType(to_bits)
        base = b.sext(shape.base, wide) if signed else b.zext(shape.base, wide)
        if shape.stride == 0:           # every lane's value is lane 0's, one of t
            return Affine(base, 0, shape.exact, shape.align)
        last = b.add(base, ir.Constant(wide, shape.stride * (self.lanes - 1)))
        bits = width(t)
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        # lane 0's value is in range (it is one of t); the lanes' values are monotone in the lane
        inside = b.and_(b.icmp_signed(">=", last, ir.Constant(wide, lo)), b.icmp_signed("<=", last, ir.Constant(wide, hi)))
        return Affine(base, shape.stride, and_scalar(b, shape.exact, inside), shape.align)
