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
taken: those need a warp's lanes in one vector. The kernel's code must be acyclic (nvcc unrolls short loops, unrolling.py the
ones the block shape fixes): it is *if-converted* into straight-line code over the
lanes. Each basic block runs under a mask, the lanes whose path goes through it (a branch
`@p bra L` gives L's mask `m & p` and leaves `m & !p` to the code after it; `ret` takes
lanes out); a register write under a mask is a `select`. Lanes thus go through the code in
program order together, so a barrier is a point that every lane reaches at once: the
program runs from barrier to barrier, each stretch a loop over the block's warps in which
a register is one `<32 x T>` value (see "the program" below), and a fixed shuffle
(warpruns.fixed_shuffle) a permutation of a warp's lanes.

Loads and stores: a register is also tracked as `base + stride * lane` where it is one (a
scalar base and a constant stride: the thread index, times and plus constants and uniform
values), with a run-time check where widening an index could wrap in some lane. An access
whose address has stride 0 is one scalar access; stride the element size, one vector
access; stride 2-8 elements, one load of the span and a permutation (or, for stores, the
group of k stores that together cover the span as one store); any other a gather or
scatter, or for a few lanes a loop over them. Where every lane of the mask runs (a full
block, where the bounds check holds everywhere), accesses take constant masks or none.

A kernel with anything else (loops, atomics, calls, votes, local memory, module
variables, ...) raises NotVectorisable and keeps the rounds; so does one without barriers
or shuffles, which the plain loop over its threads vectorises as it is.

The instructions (blockops.py: OPS) and the memory accesses (blockmemory.py: BlockMemory, a
part BlockProgram inherits) are modules of their own; this one makes the program.
"""
from __future__ import annotations

from types import SimpleNamespace

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..analysis import dataflow, fusion, memory, shapevalues, uniformity
from ..analysis.spans import SpanFacts
from ..cpu import launch
from ..irutil import at_function_start, convert_bits, for_range, i32, i64, load_field, store_field
from ..ops.table import takes
from ..types import I1, I32, I64, PTR, llvm_type, width
from . import idlewarps
from .blockloops import LoopParts, LoopShapeLost, loop_regions
from .blockmemory import BlockMemory
from .blockops import OPS, TAKES, WARP, Affine, and_scalar, constant_shape, load_bases
from .warpruns import NotVectorisable, WarpCode

SKIP_AT_LEAST = 8          # instructions a branch jumps over before a test that some lane runs them pays
ACCESS_WEIGHT = 3          # a memory access under a mask counts as this many (a masked load or store
                           # is several instructions; a tree reduction's `if (tid < s)` step, 6
                           # instructions, 3 of them accesses, ran ~1.5-2x faster with the test)
EXPORT = "anycuda.blockprogram.launch"
_NAME = "ptx.blockprogram"
_BARRIERS = frozenset(("bar", "barrier"))
_TOUCHES_MEMORY = frozenset(("ld", "st", "bar", "barrier"))    # what a waiting store must not pass
_ACCESSES = frozenset(("ld", "st", "atom", "red"))
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
    """NotVectorisable unless a block program is worth making for kernel `pfn`."""
    if not any(isinstance(st, pir.Instruction) and (st.opcode in _BARRIERS or st.opcode == "shfl") for st in pfn.body):
        # the plain loop over a block's threads vectorises such a kernel as it is (a block
        # program made vector_add 3x slower: a loop per warp, its checks per access)
        raise NotVectorisable("no barrier or shuffle")


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
    launch.emit_launch(program.mod, _NAME, block_fn, False, abi.FRAME_HEADER, EXPORT, chunk_calls=False)
    return str(program.mod)


class BlockProgram(BlockMemory, LoopParts):
    """`i32 (i8* L, i8* ws, i8* shared, i32 cx, i32 cy, i32 cz, i32 worker, i32 start)`, the
    signature of a block function (blockfunction.emit_block_function), for blocks of shape `block`.
    `layout` is the ModuleLowering of the kernel's unit (its parameters and shared memory)."""

    def __init__(self, layout, pfn: pir.Function, block: tuple, shapeless=frozenset()):
        self.layout, self.pfn, self.block = layout, pfn, tuple(block)
        self.shapeless = shapeless     # registers whose shapes do not hold round a loop (blockloops.py)
        self.frame = None              # a loop's mask, under which a write sets every lane
        self._open_loops = []          # the loops being made, innermost last
        threads = block[0] * block[1] * block[2]
        lanes = lane_width(block)
        if lanes is None:
            raise NotVectorisable(f"block {block} is not rows of whole vectors")
        # a "warp" of the program is `lanes` consecutive threads of one row: a real warp where
        # lanes is 32, else a part of one, which warp instructions cannot see as theirs
        self.threads, self.lanes, self.warps = threads, lanes, threads // lanes
        self.row_warps = block[0] // lanes          # warps in one row of x
        self.read_memory = memory.read_memory(pfn.body, layout.kernel_params(pfn))
        self.streaming = False        # the store being made may bypass the caches (_st)
        self.mod = ir.Module(name=f"{pfn.name}.block{'x'.join(map(str, block))}")
        self.fn = ir.Function(self.mod, ir.FunctionType(I32, [PTR, PTR, PTR, I32, I32, I32, I32, I32]),
                              name=_NAME + ".block")
        self.fn.linkage = "internal"
        self.launch, ws, shared, *self.ctaid, _, _ = self.fn.args
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        # a memory fault names the block; the faulting thread is not known (launch.emit_launch)
        store_field(self.b, ws, abi.CTX["linear"], i32(-1))
        self.params = self.b.inttoptr(load_field(self.b, self.launch, abi.LAUNCH["params"], I64), PTR)
        self.shared_base = self.b.ptrtoint(shared, I64)
        self.constants = uniformity.constant_registers(pfn.body)
        self.f = SimpleNamespace(fused_products=fusion.fused_products(pfn.body))
        self.values, self.shapes, self.types = {}, {}, {}
        self.whole = {}           # register -> whether its last write set every lane
        self.mask = None          # the lanes the current instruction runs for (None: all of them)
        self.warp = None          # the warp being emitted (i32, the loop's counter)
        self.here = None          # the lanes at the current position (None: all)
        self.reach = {}           # label -> the mask of the lanes that branched there
        self._splits = {}         # label -> (mask before, mask branched, mask going on) of its one branch
        self._dynamic = None      # where the dynamic shared memory starts in the window
        self._slots = {}          # what a warp keeps from stretch to stretch -> its stack array
        self._pending = None      # (group, {offset: store}, shape) of interleaved stores not yet made
        self._spans_loaded = {}   # a group of interleaved loads -> its span, loaded once (_load_group)
        self._liveness = None     # dataflow.LiveBefore of the body, made at the first barrier
        self._shape_values = None  # shapevalues.BlockValues of the body, made at the second (idle warps)
        self.shared = self._shared_layout()

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
        cuts = [pos + 1 for pos, st in enumerate(body) if isinstance(st, pir.Instruction) and st.opcode in _BARRIERS]
        self.loops = loop_regions(body, self.labels, cuts)
        bounds = [0] + cuts + [len(body)]
        kept = None
        for s, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
            # (every warp starts the first stretch: nothing is kept for any before it)
            busy = None if kept is None else self._busy_warps(lo, hi)
            count = i32(self.warps) if busy is None else b.load(busy[0])
            with for_range(b, i32(0), count, f"stretch{s}.warp") as w:
                self.warp = w
                self._spans_loaded = {}
                if kept is not None:
                    self._resume(kept)
                self._run(lo, hi)
                self.flush_stores()
                if hi < len(body):
                    kept = self._keep(self._live_across(hi))
            if busy is not None:
                self._set_busy(busy, kept)
        if self.reach:
            raise NotVectorisable("a branch to the end")
        b.ret(i32(abi.BLOCK_DONE))
        return self.fn

    def _busy_warps(self, lo, hi):
        """(a stack slot for the number of warps the stretch lo..hi runs, idlewarps.Busy) where
        only its first warps have lanes in its work; None where every warp has some."""
        if self._shape_values is None:
            self._shape_values = shapevalues.BlockValues(self.pfn.body, self.block)
        busy = idlewarps.busy_warps(self.pfn.body, lo, hi, self.block, self._shape_values, self._live_across(hi),
                                       self.lanes)
        if busy is None or busy.warps >= self.warps:
            return None
        return self._scratch(I32, "busy.warps"), busy

    def _set_busy(self, busy, kept):
        """The count of warps a stretch runs, now that what it keeps is known: the busy ones
        where the registers it writes and keeps are constants (kept alike for every warp, the
        idle ones included), else all (a write under a partial mask, say)."""
        slot, found = busy
        constant = all(kept["values"].get(r, ("constant",))[0] == "constant"
                       and all(how[0] == "constant" for how in _shape_kept(kept, r)) for r in found.written)
        with self.b.goto_block(self.fn.entry_basic_block):
            self.b.position_after(slot)
            self.b.store(i32(found.warps if constant else self.warps), slot)

    def _run(self, lo, hi):
        """Body positions lo..hi-1; a span a branch jumps over is skipped where no lane of
        the warp runs it (scan's `if (warp == 0)`: seven of eight warps went through its
        shuffles with an empty mask)."""
        pos = lo
        while pos < hi:
            self._step(pos, self.pfn.body[pos])
            if pos in self.loops:
                pos = self.loops[pos] + 1 if _is_none(self.here) else self._loop(pos, self.loops[pos])
                continue
            end = self.spans.get(pos)
            if end is not None and self.here is not None and not _is_none(self.here):
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
        """Positions lo..hi-1 behind a test that some lane is here; after them, each register,
        shape and mask they changed is a phi of their value and the one before."""
        b = self.b
        self.flush_stores()
        before = (dict(self.values), dict(self.shapes), dict(self.whole), self.here, dict(self.reach))
        pre = b.block
        span, join = self.fn.append_basic_block("span"), self.fn.append_basic_block("span.join")
        some = b.icmp_unsigned("!=", b.bitcast(self.here, ir.IntType(self.lanes)), ir.Constant(ir.IntType(self.lanes), 0))
        b.cbranch(some, span, join)
        b.position_at_end(span)
        self._run(lo, hi)
        self.flush_stores()
        self._spans_loaded = {}
        end = b.block
        b.branch(join)
        b.position_at_end(join)
        self._merge(before, pre, end)

    def _merge(self, before, pre, end):
        b = self.b
        values, shapes, whole, here, reach = before

        def phi(now, then):
            if now is then:
                return now
            node = b.phi(now.type)
            node.add_incoming(now, end)
            node.add_incoming(ir.Constant(now.type, None) if then is None else then, pre)
            return node

        for r, v in list(self.values.items()):
            if values.get(r) is not v:
                self.values[r] = phi(v, values.get(r))
                self.whole[r] = self.whole.get(r, False) and (r not in values or whole.get(r, False))
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
        self.here = phi(self._all_lanes() if self.here is None else self.here, here)
        for label in set(self.reach) | set(reach):
            self.reach[label] = phi(self.reach.get(label, self._none()), reach.get(label, self._none()))

    def _joined(self, label, arriving):
        """The lanes at `label`: those going on and those `arriving` by branches. Where the
        one branch to it split the lanes and neither part changed on the way (an if without
        an else, no lane leaving in it), that is exactly the mask before the branch, all lanes
        most often: writes after it are then whole, and registers keep their shapes (the tree
        reduction's `if (tid < s) ...` left its stride register masked, its accesses gathers)."""
        split = self._splits.pop(label, None)
        if split is not None and split[1] is arriving and split[2] is self.here:
            return split[0]
        return _or(self.b, self.here, arriving)

    def _step(self, pos, st):
        b = self.b
        if isinstance(st, pir.Label):
            self.here = self._joined(st.name, self.reach.pop(st.name, self._none()))
            return
        if not isinstance(st, pir.Instruction) or _is_none(self.here):
            return                    # (no lane comes here after an unconditional branch)
        guard = None
        if st.guard is not None:
            guard = self.read(st.guard.reg, "pred")
            if st.guard.negated:
                guard = b.not_(guard)
        if st.opcode == "bra":
            target = st.operands[0]
            if not isinstance(target, pir.Sym) or self.labels.get(target.name, -1) <= pos:
                raise NotVectorisable("a loop or an indirect branch")
            first = target.name not in self.reach
            before = self.here
            taken = _and(b, self.here, guard)
            self._note_branch(self.labels[target.name], taken)
            self.reach[target.name] = _or(b, self.reach.get(target.name, self._none()), taken)
            self.here = self._none() if guard is None else _and(b, self.here, b.not_(guard))
            if first:
                self._splits[target.name] = (before, self.reach[target.name], self.here)
            return
        if st.opcode in ("ret", "exit"):
            self.here = self._none() if guard is None else _and(b, self.here, b.not_(guard))
            return
        if st.opcode in _TOUCHES_MEMORY and st.opcode != "st":
            self.flush_stores()
        self.mask = _and(b, self.here, guard)
        if not takes(TAKES, st):
            raise NotVectorisable(f"'{st.opcode}' with {st.mods}")
        OPS[st.opcode](self, st)
        self.mask = None

    def _live_across(self, cut) -> set:
        """Registers to keep at body position `cut` (just after a barrier), by each thread's
        own paths: those live at the cut for the lanes going on there, and those live at each
        label some lanes branched to and wait for, further on (the lanes of an else wait
        through the barriers of its then). A register every lane writes again before reading
        needs no keeping: the tree reduction written out by unrolling.py rewrote its step's
        registers in every copy, and 5 vectors a warp were stored and reloaded at each of 8
        barriers for nothing."""
        live = set(self._live_at(cut))
        for label in self.reach:
            live |= self._live_at(self.labels[label])
        return live

    def _live_at(self, pos) -> frozenset:
        """The registers live (dataflow.live_before) at the first instruction from `pos` on."""
        if self._liveness is None:
            self._liveness = dataflow.live_before(self.pfn.body, {})
        body = self.pfn.body
        first = next((q for q in range(pos, len(body)) if isinstance(body[q], pir.Instruction)), None)
        return frozenset() if first is None else self._liveness[first]

    def _slot(self, key, ty):
        """The stack array of `key`, one `ty` per warp."""
        if key not in self._slots:
            self._slots[key] = self._scratch(ir.ArrayType(ty, self.warps), "kept")
        return self.b.gep(self._slots[key], [i32(0), self.warp])

    def _keep_value(self, key, v):
        """Store v (an i1 or <32 x i1> as bytes) for this warp; what _resume needs to load it."""
        if v is None or _is_none(v) or isinstance(v, ir.Constant):
            return ("constant", v)
        stored = self.b.zext(v, ir.VectorType(ir.IntType(8), v.type.count) if isinstance(v.type, ir.VectorType)
                             else ir.IntType(8)) if _is_bool(v.type) else v
        self.b.store(stored, self._slot(key, stored.type))
        return ("slot", key, stored.type, v.type)

    def _load_kept(self, how):
        if how[0] == "constant":
            return how[1]
        _, key, stored, ty = how
        v = self.b.load(self._slot(key, stored))
        return self.b.trunc(v, ty) if _is_bool(ty) else v

    def _keep(self, live) -> dict:
        """At the end of a stretch: this warp's registers live after it, their shapes, and its
        masks, each in its array; the description _resume restores them from."""
        kept = {"values": {}, "shapes": {}, "whole": {}, "reach": {}}
        for r in sorted(live):
            shape = self.shapes.get(r)
            if r in self.values:
                kept["values"][r] = self._keep_register(r, shape)
                kept["whole"][r] = self.whole.get(r, False)
            if shape is not None:
                kept["shapes"][r] = (self._keep_value(("base", r), shape.base), shape.stride,
                                     self._keep_value(("exact", r), shape.exact), shape.align)
        kept["here"] = self._keep_value(("here",), self.here)
        for label, mask in self.reach.items():
            kept["reach"][label] = self._keep_value(("reach", label), mask)
        return kept

    def _keep_register(self, r, shape):
        """A register's lanes are rebuilt from its shape where that is exact (a broadcast and an
        add cost less than storing and loading up to four vectors per warp: scan kept eight
        address vectors); where exactness is checked at run time, they are stored only when
        the check fails."""
        if shape is None or shape.base.type != self.values[r].type.element:
            return self._keep_value(("v", r), self.values[r])
        if shape.exact is None:
            return ("ramp",)
        with self.b.if_then(self.b.not_(shape.exact), likely=False):
            kept = self._keep_value(("v", r), self.values[r])
        return ("ramp unless", kept)

    def _ramp(self, shape):
        """base + stride * t in lane t, in the base's width."""
        mask = (1 << shape.base.type.width) - 1
        return self.b.add(self.splat(shape.base), self.lane_constant([(shape.stride * t) & mask for t in range(self.lanes)],
                                                                     shape.base.type))

    def _resume(self, kept):
        self.whole = dict(kept["whole"])
        self.shapes = {r: Affine(self._load_kept(base), stride, self._load_kept(exact), align)
                       for r, (base, stride, exact, align) in kept["shapes"].items()}
        self.values = {}
        for r, how in kept["values"].items():
            if how[0] == "ramp":
                self.values[r] = self._ramp(self.shapes[r])
            elif how[0] == "ramp unless":
                shape = self.shapes[r]
                self.values[r] = self.b.select(shape.exact, self._ramp(shape), self._load_kept(how[1]))
            else:
                self.values[r] = self._load_kept(how)
        self.here = self._load_kept(kept["here"])
        self.reach = {label: self._load_kept(how) for label, how in kept["reach"].items()}

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
            v = self.ctaid["xyz".index(comp)]
            return self.splat(v), Affine(v, 0)
        if name == "nctaid" and comp in ("x", "y", "z"):
            v = load_field(self.b, self.launch, abi.LAUNCH["grid_" + comp], I32)
            return self.splat(v), Affine(v, 0)
        if name in ("laneid", "warpid"):
            self.need_warps(f"%{name}")
        if name == "laneid":
            return self.lane_constant(range(WARP)), constant_shape(i32(0), 1)
        if name == "warpid":
            return self.splat(self.warp), Affine(self.warp, 0)
        raise NotVectorisable(f"%{name}")

    def need_warps(self, what):
        """NotVectorisable unless the program's vectors are whole warps (`what` needs them)."""
        if self.lanes != WARP:
            raise NotVectorisable(f"{what} in blocks {self.block[0]} threads wide")

    def _thread_index(self, comp):
        """%tid.x, .y or .z in the current warp: x a ramp from the warp's first column, y and
        z its row's, alike in every lane."""
        b, (_, y, z) = self.b, self.block
        if comp == "x":
            column = self.warp if y * z == 1 else b.urem(self.warp, i32(self.row_warps))
            first = b.mul(column, i32(self.lanes))
            return b.add(self.splat(first), self.lane_constant(range(self.lanes))), Affine(first, 1, None, self.lanes)
        if (y if comp == "y" else z) == 1:
            return self.splat(i32(0)), constant_shape(i32(0))
        row = b.udiv(self.warp, i32(self.row_warps))
        v = b.urem(row, i32(y)) if comp == "y" else b.udiv(row, i32(y))
        return self.splat(v), Affine(v, 0)

    def read(self, op, t):
        """An operand's lanes (warpruns.WarpCode.read, and shared variables' window offsets)."""
        if isinstance(op, pir.Sym):
            return self.splat(convert_bits(self.b, self._shared_offset(op.name), llvm_type(t)))
        return WarpCode.read(self, op, t)

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
        self.shapes.pop(op.name, None)

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
                self._dynamic = self.b.sub(self.b.zext(total, I64), self.b.zext(dyn, I64))
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
            return Affine(convert_bits(self.b, self._shared_offset(op.name), llvm_type(t)), 0)
        if isinstance(op, pir.Reg):
            shape = self.shapes.get(op.name)
            if shape is not None and shape.base.type == llvm_type(t):
                return shape
        return None

    def set_shape(self, op, shape):
        """After an instruction wrote register `op`: its shape, if the write was whole."""
        if shape is not None and isinstance(op, pir.Reg) and self.whole.get(op.name):
            self.shapes[op.name] = shape

    def widened(self, shape, t, to_bits):
        """The shape of an integer of type t widened to `to_bits`: exact where no lane's value
        leaves t's range on the way from lane 0 (checked here, at run time)."""
        b = self.b
        signed = t.startswith("s")
        wide = ir.IntType(to_bits)
        base = b.sext(shape.base, wide) if signed else b.zext(shape.base, wide)
        last = b.add(base, ir.Constant(wide, shape.stride * (self.lanes - 1)))
        bits = width(t)
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        # lane 0's value is in range (it is one of t); the lanes' values are monotone in the lane
        inside = b.and_(b.icmp_signed(">=", last, ir.Constant(wide, lo)), b.icmp_signed("<=", last, ir.Constant(wide, hi)))
        return Affine(base, shape.stride, and_scalar(b, shape.exact, inside), shape.align)


def _is_bool(ty) -> bool:
    return (ty.element if isinstance(ty, ir.VectorType) else ty) == I1


def _shape_kept(kept, r) -> tuple:
    """How a kept register's shape is restored: its base's and exactness's (none: no shape)."""
    shape = kept["shapes"].get(r)
    return () if shape is None else (shape[0], shape[2])


def _is_none(mask) -> bool:
    return isinstance(mask, ir.Constant) and mask.constant is None


def _and(b, a, c):
    """Masks (None: every lane) and-ed."""
    if a is None:
        return c
    if c is None:
        return a
    if _is_none(a) or _is_none(c):
        return a if _is_none(a) else c
    return b.and_(a, c)


def _or(b, a, c):
    if a is None or c is None:
        return None
    if _is_none(a):
        return c
    if _is_none(c):
        return a
    return b.or_(a, c)

