"""Block programs: all threads of a block as one vector program, for one block shape.

The rounds (compiler/simt/blockfunction.py) run a block stretch by stretch, from one barrier or
shuffle to the next, each stretch a loop over the threads that reloads and respills their
registers; scan's first kernel spends ~1.4 us per block of 1024 ints that way, where the
same computation with the block's values kept in vector registers takes 0.2-0.4 us
(benchmarks/models/block_program_scan*, NOTES "Block-wide programs").

A block program is made for a kernel with barriers or shuffles and a block of W threads (W
x 1 x 1, W a multiple of 32) at the first launch of that shape. The kernel's code must be
acyclic (nvcc unrolls short loops): it is *if-converted* into straight-line code over the
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
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..analysis import dataflow, fusion, memory, uniformity
from ..cpu import launch, streamstores
from ..irutil import (at_function_start, convert_bits, declare, for_each_set_bit, for_range, i32, i64, intrinsic_suffix,
                      load_field, register_address, store_field)
from ..ops import bitops
from ..simt.collectives import shfl_source
from ..types import I1, I32, I64, ORDERED_MODS, PTR, llvm_type, llvm_width, type_mods, width
from .regionops import REGION_OPS
from .warpruns import _UNHANDLED_MODS, VECTOR_OPS, NotVectorisable, WarpCode, fixed_shuffle

WARP = 32
SKIP_AT_LEAST = 8          # instructions a branch jumps over before a test that some lane runs them pays
SPARSE = 8                # a gather or scatter for at most this many lanes goes lane by lane
EXPORT = "anycuda.blockprogram.launch"
_NAME = "ptx.blockprogram"
# cache hints and the like that do not change what an access does
_MEMORY_MODS = frozenset(("global", "shared", "param", "const", "nc", "ca", "cg", "cs", "lu", "cv", "wb", "wt"))
_BARRIERS = frozenset(("bar", "barrier"))
_TOUCHES_MEMORY = frozenset(("ld", "st", "bar", "barrier"))    # what a waiting store must not pass


def supported_shape(block) -> bool:
    """Whether a block shape can have a block program: one row of whole warps."""
    x, y, z = block
    return y == 1 and z == 1 and x % WARP == 0 and WARP <= x <= abi.MAX_BLOCK_THREADS


def check_takes(pfn) -> None:
    """NotVectorisable unless a block program is worth making for kernel `pfn`."""
    if not any(isinstance(st, pir.Instruction) and (st.opcode in _BARRIERS or st.opcode == "shfl") for st in pfn.body):
        # the plain loop over a block's threads vectorises such a kernel as it is (a block
        # program made vector_add 3x slower: a loop per warp, its checks per access)
        raise NotVectorisable("no barrier or shuffle")


def emit_module(layout, pfn, lanes: int) -> str:
    """LLVM IR of a module with the block program of kernel `pfn` for blocks of `lanes`
    threads and its launch function EXPORT (`void (Launch*)`, as a kernel's); `layout` is a
    ModuleLowering of its unit with its variables declared (the shared-memory layout).
    Raises NotVectorisable for a kernel the block program does not take."""
    program = BlockProgram(layout, pfn, lanes)
    block_fn = program.emit()
    # a block program called once per block: inlined into the loop over a chunk's blocks,
    # scan (1.28-1.47x C) went to 1.68-1.85x (NOTES "One call per chunk")
    launch.emit_launch(program.mod, _NAME, block_fn, False, abi.FRAME_HEADER, EXPORT, chunk_calls=False)
    return str(program.mod)


MAX_STRIDE = 1 << 30       # a larger stride is not worth tracking (and may not fit an i64 product)


@dataclass
class Affine:
    """A register whose lane t holds base + stride * t (in its own width, wrapping), where
    `exact` (an i1, or None for always) holds."""
    base: ir.Value
    stride: int
    exact: ir.Value | None = None
    align: int = 1            # a power of two that divides base (32 for a warp's first thread)


class BlockProgram:
    """`i32 (i8* L, i8* ws, i8* shared, i32 cx, i32 cy, i32 cz, i32 worker, i32 start)`, the
    signature of a block function (blockfunction.emit_block_function), for blocks of `lanes`.
    `layout` is the ModuleLowering of the kernel's unit (its parameters and shared memory)."""

    def __init__(self, layout, pfn: pir.Function, threads: int):
        self.layout, self.pfn = layout, pfn
        self.threads, self.lanes, self.warps = threads, WARP, threads // WARP
        self.read_memory = memory.read_memory(pfn.body, layout.kernel_params(pfn))
        self.streaming = False        # the store being made may bypass the caches (_st)
        self.mod = ir.Module(name=f"{pfn.name}.block{threads}")
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
        self._dynamic = None      # where the dynamic shared memory starts in the window
        self._slots = {}          # what a warp keeps from stretch to stretch -> its stack array
        self._pending = None      # (group, {offset: store}, shape) of interleaved stores not yet made
        self._spans_loaded = {}   # a group of interleaved loads -> its span, loaded once (_load_group)
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
        self.load_bases = _load_bases(body)
        cuts = [pos + 1 for pos, st in enumerate(body) if isinstance(st, pir.Instruction) and st.opcode in _BARRIERS]
        bounds = [0] + cuts + [len(body)]
        kept = None
        for s, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
            with for_range(b, i32(0), i32(self.warps), f"stretch{s}.warp") as w:
                self.warp = w
                self._spans_loaded = {}
                if kept is not None:
                    self._resume(kept)
                self._run(lo, hi)
                self.flush_stores()
                if hi < len(body):
                    kept = self._keep(self._live_across(hi))
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
            self._step(pos, self.pfn.body[pos])
            end = self.spans.get(pos)
            if end is not None and self.here is not None and not _is_none(self.here):
                self._only_if_some_lane(pos + 1, end)
                pos = end
            else:
                pos += 1

    def _skippable_spans(self) -> dict:
        """{position of a conditional forward branch: its target's position} where what lies
        between is worth a test (SKIP_AT_LEAST instructions) and self-contained: no barrier,
        no exit, no branch out of it but to its end, no branch into it from outside."""
        body, spans = self.pfn.body, {}
        for pos, st in enumerate(body):
            if not (isinstance(st, pir.Instruction) and st.opcode == "bra" and st.guard is not None
                    and isinstance(st.operands[0], pir.Sym)):
                continue
            end = self.labels.get(st.operands[0].name, -1)
            if end > pos and self._self_contained(pos + 1, end) and \
                    sum(isinstance(x, pir.Instruction) for x in body[pos + 1:end]) >= SKIP_AT_LEAST:
                spans[pos] = end
        return spans

    def _self_contained(self, lo, hi) -> bool:
        body = self.pfn.body
        inside = {body[p].name for p in range(lo, hi) if isinstance(body[p], pir.Label)}
        for p, st in enumerate(body):
            if not isinstance(st, pir.Instruction):
                continue
            within = lo <= p < hi
            if within and st.opcode in _BARRIERS | {"ret", "exit"}:
                return False
            if st.opcode == "bra":
                target = st.operands[0].name if isinstance(st.operands[0], pir.Sym) else None
                if within and target not in inside and self.labels.get(target) != hi:
                    return False
                if not within and target in inside:
                    return False
        return True

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

    def _step(self, pos, st):
        b = self.b
        if isinstance(st, pir.Label):
            self.here = _or(b, self.here, self.reach.pop(st.name, self._none()))
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
            self.reach[target.name] = _or(b, self.reach.get(target.name, self._none()), _and(b, self.here, guard))
            self.here = self._none() if guard is None else _and(b, self.here, b.not_(guard))
            return
        if st.opcode in ("ret", "exit"):
            self.here = self._none() if guard is None else _and(b, self.here, b.not_(guard))
            return
        if st.opcode in _TOUCHES_MEMORY and st.opcode != "st":
            self.flush_stores()
        self.mask = _and(b, self.here, guard)
        handler = OPS.get(st.opcode)
        if handler is None or set(st.mods) & _UNHANDLED.get(st.opcode, _DEFAULT_UNHANDLED):
            raise NotVectorisable(f"'{st.opcode}' with {st.mods}")
        handler(self, st)
        self.mask = None

    def _live_across(self, cut) -> set:
        """Registers written before body position `cut` and read after it."""
        written, read = set(), set()
        for pos, st in enumerate(self.pfn.body):
            if not isinstance(st, pir.Instruction):
                continue
            defs, uses = dataflow.defs_uses(st)
            if pos < cut:
                written |= set(defs)
            else:
                read |= set(uses) | ({st.guard.reg.name} if st.guard is not None else set())
        return written & read

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
        if name == "tid":
            if comp == "x":
                first = self.b.mul(self.warp, i32(WARP))
                return self.b.add(self.splat(first), self.lane_constant(range(WARP))), Affine(first, 1, None, WARP)
            return self.splat(i32(0)), _constant_shape(i32(0))
        if name == "ntid":
            n = self.threads if comp == "x" else 1
            return self.splat(i32(n)), _constant_shape(i32(n))
        if name == "ctaid" and comp in ("x", "y", "z"):
            v = self.ctaid["xyz".index(comp)]
            return self.splat(v), Affine(v, 0)
        if name == "nctaid" and comp in ("x", "y", "z"):
            v = load_field(self.b, self.launch, abi.LAUNCH["grid_" + comp], I32)
            return self.splat(v), Affine(v, 0)
        if name == "laneid":
            return self.lane_constant(range(WARP)), _constant_shape(i32(0), 1)
        if name == "warpid":
            return self.splat(self.warp), Affine(self.warp, 0)
        raise NotVectorisable(f"%{name}")

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
        whole = self.mask is None or op.name not in self.values
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
            return _constant_shape(ir.Constant(llvm_type(t), op.value & ((1 << width(t)) - 1)))
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
        return Affine(base, shape.stride, _and_scalar(b, shape.exact, inside), shape.align)

    # -------------------------------------------------------------- memory
    def access(self, st, addr):
        """(i64 address vector, Affine of it or None) of a memory operand."""
        b = self.b
        space = "shared" if "shared" in st.mods else "global"
        if not isinstance(addr, pir.Addr):
            addr = pir.Addr(addr, 0)
        if isinstance(addr.base, pir.Sym):
            if space != "shared":
                raise NotVectorisable(f"a module variable {addr.base.name}")
            scalar = b.add(b.add(self.shared_base, self._shared_offset(addr.base.name)), i64(addr.offset))
            return self.splat(scalar), Affine(scalar, 0)
        if not isinstance(addr.base, pir.Reg):
            raise NotVectorisable("an absolute address")
        name = addr.base.name
        t = self.types.get(name, "b64")
        bits = width(t)
        # the offset is added in the register's width (irutil.register_address), before the
        # shape is widened, so that a 32-bit address wraps as on a GPU
        vec = register_address(b, self.reg_value(name), addr.offset)
        shape = self.shapes.get(name)
        if shape is not None and addr.offset:
            step = ir.Constant(shape.base.type, addr.offset & ((1 << shape.base.type.width) - 1))
            shape = Affine(b.add(shape.base, step), shape.stride, shape.exact)
        if shape is not None and bits < 64:
            shape = self.widened(shape, "u" + str(bits), 64)
        if space == "shared":
            vec = b.add(vec, self.splat(self.shared_base))
            if shape is not None:
                shape = Affine(b.add(shape.base, self.shared_base), shape.stride, shape.exact)
        return vec, shape

    def load(self, addrs, shape, elem, size, part=None):
        """The lanes' elements of type `elem` at `addrs` (under self.mask); one of a group of
        interleaved loads from one register (`part`: the register and the offset) takes its
        elements from the group's span, loaded once (_load_group)."""
        k = _elements_apart(shape, size)
        if part is None or not 2 <= k <= 8 or part[0] not in self.load_bases:
            return self._memory(addrs, shape, elem, size, None)
        register, offset = part
        key, defined = self._group_key(register, shape, str(elem))
        group = self._spans_loaded.get(key)
        j = None if group is None else (offset - group[0]) // size
        if group is None or (offset - group[0]) % size or not 0 <= j < k:
            group = self._spans_loaded[key] = (offset, *self._load_group(shape, elem, size, k), defined)
            j = 0
        _, span, ok, _ = group
        if self.mask is not None:
            ok = self.b.and_(ok, self._every_lane())
        pick = ir.Constant(ir.VectorType(I32, self.lanes), [t * k + j for t in range(self.lanes)])
        return self._either(ok, lambda: self.b.shuffle_vector(span, ir.Constant(span.type, None), pick),
                            lambda: self._memory(addrs, shape, elem, size, None))

    def _group_key(self, register, shape, what):
        """(key, the register's shape) of a group of interleaved accesses through `register`
        at its current definition: the group holds the shape while it lives, so that its id
        stays its own (a register defined again gets a new shape object)."""
        defined = self.shapes.get(register)
        return (register, id(defined), shape.stride, what), defined

    def _load_group(self, shape, elem, size, k):
        """(span, ok): the k * lanes elements from this load's lane 0 on, loaded where `ok`:
        every lane of this load runs, its ramp is exact, and the k - 1 elements past lane W-1's
        lie in its page (so every page the span touches holds an element a lane reads). The
        group's other loads pick their elements from it: scan's four loads of `in[4t + j]`
        each read and permuted a span of their own."""
        b = self.b
        last = b.add(shape.base, i64(shape.stride * (self.lanes - 1)))
        end = b.add(shape.base, i64(shape.stride * self.lanes - 1))
        ok = b.icmp_unsigned("==", b.lshr(last, i64(12)), b.lshr(end, i64(12)))
        ok = _and_scalar(b, shape.exact, ok)
        if self.mask is not None:
            ok = b.and_(ok, self._every_lane())
        wide = ir.VectorType(elem, self.lanes * k)
        before = b.block
        with b.if_then(ok):
            got = b.load(b.inttoptr(shape.base, wide.as_pointer()), align=size)
            loaded = b.block
        span = b.phi(wide)
        span.add_incoming(got, loaded)
        span.add_incoming(ir.Constant(wide, None), before)
        return span, ok

    def store(self, addrs, shape, value, size, part=None):
        """A store; one of a group of interleaved stores waits for the others (`part`: the
        address register and the instruction's offset) so that the whole group is one
        store of consecutive elements: four masked stores each writing every fourth element
        (scan's `out[4 * t + k]`) were a fifth of its time."""
        self._spans_loaded = {}          # (what the group loaded may change)
        k = _elements_apart(shape, size)
        if part is None or not 2 <= k <= 8:
            self.flush_stores()
            return self._memory(addrs, shape, value.type.element, size, value)
        register, offset = part
        key, defined = self._group_key(register, shape, size)
        if self._pending is not None and self._pending[0] != key:
            self.flush_stores()
        if self._pending is None:
            self._pending = (key, {}, defined)
        parts = self._pending[1]
        if offset in parts:
            self.flush_stores()
            self._pending = (key, {}, defined)
            parts = self._pending[1]
        parts[offset] = (addrs, shape, value, self.mask)
        low = min(parts)
        if sorted(parts) == [low + j * size for j in range(k)]:
            self._store_group(parts, k, size)
            self._pending = None
        return None

    def flush_stores(self):
        """Make the stores that wait for the rest of their group, one by one."""
        if self._pending is None:
            return
        parts, self._pending = self._pending[1], None
        kept = self.mask
        for addrs, shape, value, mask in parts.values():
            self.mask = mask
            self._memory(addrs, shape, value.type.element, llvm_width(value.type.element) // 8, value)
        self.mask = kept

    def _whole_store(self, value, base, size):
        """One vector store of consecutive elements from `base` (i64)."""
        store = self.b.store(value, self.b.inttoptr(base, value.type.as_pointer()), align=size)
        if self.streaming:
            streamstores.mark(self.mod, store)

    def _store_group(self, parts, k, size):
        """k interleaved stores covering every element from the lowest's base: one plain
        store where every lane of every part runs, else each as it was."""
        b, kept = self.b, self.mask
        order = [parts[o] for o in sorted(parts)]
        values = [v for _, _, v, _ in order]
        joined = values[0]
        for v in values[1:]:             # <32 x T> ... -> <32k x T>
            joined = _concat(b, joined, v)
        interleaved = b.shuffle_vector(joined, ir.Constant(joined.type, None), ir.Constant(
            ir.VectorType(I32, k * WARP), [(p % k) * WARP + p // k for p in range(k * WARP)]))
        base = order[0][1].base
        masks = [m for _, _, _, m in order if m is not None]

        def whole():
            self._whole_store(interleaved, base, size)

        # (the parts' addresses come from one register: one shape, one `exact`)
        every = order[0][1].exact
        if not masks and every is None:
            return whole()
        for m in masks:
            every = _and_scalar(b, every, self._every_lane(m))
        with b.if_else(every) as (then, otherwise):
            with then:
                whole()
            with otherwise:
                for addrs, shape, value, mask in order:
                    self.mask = mask
                    self._memory(addrs, shape, value.type.element, size, value)
        self.mask = kept

    def _memory(self, addrs, shape, elem, size, value):
        k = _elements_apart(shape, size)
        if shape is None or not (shape.stride == 0 or 1 <= k <= 8):
            return self._lanes_apart(addrs, elem, size, value)
        fast = (lambda: self._uniform(shape.base, elem, size, value)) if shape.stride == 0 else \
            (lambda: self._interleaved(shape.base, k, elem, size, value))
        if shape.exact is None:
            return fast()
        return self._either(shape.exact, fast, lambda: self._lanes_apart(addrs, elem, size, value))

    def _all_lanes(self):
        return ir.Constant(ir.VectorType(I1, self.lanes), [1] * self.lanes)

    def _either(self, cond, then, otherwise):
        """then() where `cond` holds, else otherwise(): the value they give (a load's), or
        None (a store's)."""
        b = self.b
        with b.if_else(cond) as (yes, no):
            with yes:
                x = then()
                then_block = b.block
            with no:
                y = otherwise()
                else_block = b.block
        if x is None:
            return None
        phi = b.phi(x.type)
        phi.add_incoming(x, then_block)
        phi.add_incoming(y, else_block)
        return phi

    def _every_lane(self, mask=None):
        """i1: every lane is in `mask` (by default self.mask, which is not None)."""
        bits = self.b.bitcast(self.mask if mask is None else mask, ir.IntType(self.lanes))
        return self.b.icmp_unsigned("==", bits, ir.Constant(bits.type, (1 << self.lanes) - 1))

    def _on_mask(self, whole, part):
        """whole() where every lane runs (at once when self.mask is None), else part(); a
        load's value either way. The common case is a full block, where a bounds check holds
        in every lane: `whole` takes constant masks, which cost nothing to make."""
        if self.mask is None:
            return whole()
        return self._either(self._every_lane(), whole, part)

    def _lanes_apart(self, addrs, elem, size, value):
        """A gather or scatter, or where at most SPARSE lanes run (a lane per warp: `lane ==
        31`, `warp == 0`), those lanes one by one: a gather or scatter costs as much for one
        lane as for all of its register's."""
        if self.mask is None:
            return self._gather_scatter(addrs, elem, size, value)
        b = self.b
        bits = b.bitcast(self.mask, ir.IntType(self.lanes))
        popcount = declare(b.module, f"llvm.ctpop.i{self.lanes}", bits.type, [bits.type])
        few = b.icmp_unsigned("<=", b.call(popcount, [bits]), ir.Constant(bits.type, SPARSE))
        return self._either(few, lambda: self._one_by_one(bits, addrs, elem, size, value),
                            lambda: self._gather_scatter(addrs, elem, size, value))

    def _one_by_one(self, bits, addrs, elem, size, value):
        """The lanes of `bits` one at a time, through arrays on the stack."""
        b = self.b
        vec = self._vec(elem)
        where = self._scratch(ir.ArrayType(I64, self.lanes), "lane.addrs")
        b.store(addrs, b.bitcast(where, addrs.type.as_pointer()))
        data = self._scratch(ir.ArrayType(elem, self.lanes), "lane.data")
        if value is not None:
            b.store(value, b.bitcast(data, vec.as_pointer()))
        with for_each_set_bit(b, bits, "lane") as lane:
            ptr = b.inttoptr(b.load(b.gep(where, [i32(0), lane])), elem.as_pointer())
            slot = b.gep(data, [i32(0), lane])
            if value is None:
                b.store(b.load(ptr, align=size), slot)
            else:
                b.store(b.load(slot), ptr, align=size)
        if value is None:
            return b.load(b.bitcast(data, vec.as_pointer()))
        return None

    def _scratch(self, ty, name):
        with at_function_start(self.b):
            slot = self.b.alloca(ty, name=name)
        slot.align = 64
        return slot

    def _gather_scatter(self, addrs, elem, size, value):
        b = self.b
        vec = self._vec(elem)
        ptrs = b.inttoptr(addrs, ir.VectorType(elem.as_pointer(), self.lanes))
        mask = self.mask if self.mask is not None else self._all_lanes()
        suffix = intrinsic_suffix(elem)
        if value is None:
            fn = declare(b.module, f"llvm.masked.gather.v{self.lanes}{suffix}.v{self.lanes}p0", vec,
                         [ptrs.type, I32, mask.type, vec])
            return b.call(fn, [ptrs, i32(size), mask, ir.Constant(vec, None)])
        fn = declare(b.module, f"llvm.masked.scatter.v{self.lanes}{suffix}.v{self.lanes}p0", ir.VoidType(),
                     [vec, ptrs.type, I32, mask.type])
        b.call(fn, [value, ptrs, i32(size), mask])
        return None

    def _uniform(self, address, elem, size, value):
        """Every lane at one address: one scalar load (where some lane is there) or, for a
        store, the value of the last lane there, as a GPU lets one of them win."""
        b = self.b
        ptr = b.inttoptr(address, elem.as_pointer())
        if value is None:
            if self.mask is None:
                return self.splat(b.load(ptr, align=size))
            some = b.icmp_unsigned("!=", b.bitcast(self.mask, ir.IntType(self.lanes)), ir.Constant(ir.IntType(self.lanes), 0))
            before = b.block
            with b.if_then(some):
                loaded = b.load(ptr, align=size)
                then_block = b.block
            phi = b.phi(elem)
            phi.add_incoming(loaded, then_block)
            phi.add_incoming(ir.Constant(elem, None), before)
            return self.splat(phi)
        if self.mask is None:
            b.store(b.extract_element(value, i32(self.lanes - 1)), ptr, align=size)
            return None
        bits = b.bitcast(self.mask, ir.IntType(self.lanes))
        with b.if_then(b.icmp_unsigned("!=", bits, ir.Constant(bits.type, 0))):
            ctlz = declare(b.module, f"llvm.ctlz.i{self.lanes}", bits.type, [bits.type, I1])
            last = b.sub(ir.Constant(bits.type, self.lanes - 1), b.call(ctlz, [bits, ir.Constant(I1, 1)]))
            b.store(b.extract_element(value, b.trunc(last, I32)), ptr, align=size)
        return None

    def _interleaved(self, base, k, elem, size, value):
        """Lane t at base + t * k * size: one masked access of the k * lanes elements from
        base, the mask leaving the others alone."""
        def whole():
            if value is None:
                return self._span_load(base, k, elem, size)
            if k == 1:
                self._whole_store(value, base, size)
                return None
            every = ir.Constant(ir.VectorType(I1, self.lanes * k), [int(p % k == 0) for p in range(self.lanes * k)])
            return self._spread_access(base, k, elem, size, value, every)
        return self._on_mask(whole, lambda: self._spread_access(base, k, elem, size, value, self._spread(k)))

    def _span_load(self, base, k, elem, size):
        """Every lane's element, lane t's at base + t * k * size: one plain load from lane 0's
        element to lane W-1's and a permutation. What lies between the lanes' elements is
        read too, which is safe: no lane is more than 8 elements from the next, so every page
        of that span holds some lane's element."""
        b = self.b
        if k == 1:
            return b.load(b.inttoptr(base, self._vec(elem).as_pointer()), align=size)
        span = ir.VectorType(elem, (self.lanes - 1) * k + 1)
        got = b.load(b.inttoptr(base, span.as_pointer()), align=size)
        return b.shuffle_vector(got, ir.Constant(span, None),
                                ir.Constant(ir.VectorType(I32, self.lanes), [t * k for t in range(self.lanes)]))

    def _spread(self, k):
        """self.mask at every k-th of k * lanes elements."""
        none = ir.Constant(ir.VectorType(I1, self.lanes), None)
        return self.b.shuffle_vector(self.mask, none, self._spread_indices(k))

    def _spread_indices(self, k):
        """Lane t's element at position t * k of k * lanes (the others from the second operand)."""
        n = self.lanes * k
        return ir.Constant(ir.VectorType(I32, n), [t // k if t % k == 0 else self.lanes for t in range(n)])

    def _spread_access(self, base, k, elem, size, value, mask):
        b = self.b
        n = self.lanes * k
        wide = ir.VectorType(elem, n)
        ptr = b.inttoptr(base, wide.as_pointer())
        suffix = f"v{n}{intrinsic_suffix(elem)}"
        if value is None:
            fn = declare(b.module, f"llvm.masked.load.{suffix}.p0", wide, [wide.as_pointer(), I32, mask.type, wide])
            got = b.call(fn, [ptr, i32(size), mask, ir.Constant(wide, None)])
            if k == 1:
                return got
            return b.shuffle_vector(got, ir.Constant(wide, None),
                                    ir.Constant(ir.VectorType(I32, self.lanes), [t * k for t in range(self.lanes)]))
        if k > 1:
            value = b.shuffle_vector(value, ir.Constant(value.type, None), self._spread_indices(k))
        fn = declare(b.module, f"llvm.masked.store.{suffix}.p0", ir.VoidType(), [wide, wide.as_pointer(), I32, mask.type])
        b.call(fn, [value, ptr, i32(size), mask])
        return None


def _elements_apart(shape, size) -> int:
    """How many elements of `size` bytes one lane's address is from the next's (0: not a
    whole number, or no shape)."""
    return shape.stride // size if shape is not None and shape.stride % size == 0 else 0


def _concat(b, a, c):
    """a's elements, then c's (c as wide as a, or a multiple of 32 narrower: padded)."""
    n, m = a.type.count, c.type.count
    if m < n:
        c = b.shuffle_vector(c, ir.Constant(c.type, None), ir.Constant(ir.VectorType(I32, n), list(range(m)) + [m] * (n - m)))
    return b.shuffle_vector(a, c, ir.Constant(ir.VectorType(I32, n + m), list(range(n)) + [n + j for j in range(m)]))


def _is_bool(ty) -> bool:
    return (ty.element if isinstance(ty, ir.VectorType) else ty) == I1


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


def _and_scalar(b, a, c):
    return c if a is None else b.and_(a, c)


# ---------------------------------------------------------------------- instructions
# warpruns' vector forms do the arithmetic; these keep the shapes of what they compute and
# add what a whole block does (memory, barriers, shuffles within each warp).

def _shaped(kind):
    """A warpruns vector form that also derives the Affine shape of its result."""
    def run(w, st):
        shape = _shape_of(w, st, kind)          # (from the operands before the write: `add %r, %r, 8`)
        VECTOR_OPS[st.opcode](w, st)
        w.set_shape(st.operands[0], shape)
    return run


def _affine(base, stride, exact, align=1):
    return Affine(base, stride, exact, min(align, MAX_STRIDE)) if abs(stride) < MAX_STRIDE else None


def _constant_shape(value, stride=0):
    """The shape of a constant (its alignment: the lowest bit set)."""
    v = value.constant
    return Affine(value, stride, None, (v & -v) if v else MAX_STRIDE)


def _within_warp(b, st, t, kind, a, c, exact):
    """`a >> n` and `a & (2^n - 1)` of a ramp whose warp's lanes stay within one aligned
    run of 2^n values (`tid.x >> 5` is the warp's index, alike in its lanes; `tid.x & 31`
    the lane): uniform, and the lane's own ramp."""
    if not (isinstance(c.base, ir.Constant) and c.stride == 0):
        return None
    m = c.base.constant
    if a.stride == 0:
        op = b.and_ if kind == "and" else (b.ashr if t[0] == "s" else b.lshr)
        return Affine(op(a.base, c.base), 0, exact)
    n = m if kind == "shr" else (m + 1).bit_length() - 1
    fits = 0 < a.stride and a.stride * (WARP - 1) < (1 << n) <= a.align
    if not fits or kind == "and" and m != (1 << n) - 1:
        return None
    if kind == "shr":
        return Affine((b.ashr if t[0] == "s" else b.lshr)(a.base, c.base), 0, exact, max(a.align >> n, 1))
    return Affine(ir.Constant(a.base.type, 0), a.stride, exact, MAX_STRIDE)


def _shape_of(w, st, kind):
    ts = type_mods(st.mods)
    if not ts or ts[-1][0] not in "bus" or isinstance(st.operands[0], pir.Pair):
        return None
    t = ts[-1]
    b = w.b
    if kind == "mov":
        return w.shape(st.operands[1], t)
    a = w.shape(st.operands[1], t)
    c = w.shape(st.operands[2], t)
    if a is None or c is None:
        return None
    exact = a.exact if c.exact is None else _and_scalar(b, a.exact, c.exact)
    if kind == "add":
        return _affine(b.add(a.base, c.base), a.stride + c.stride, exact, min(a.align, c.align))
    if kind == "sub":
        return _affine(b.sub(a.base, c.base), a.stride - c.stride, exact, min(a.align, c.align))
    if kind in ("shr", "and"):
        return _within_warp(b, st, t, kind, a, c, exact)
    if kind in ("mul", "mad") and "hi" not in st.mods:
        product = _product(b, a, c, exact)
        if product is None or kind == "mul":
            return product
        d = w.shape(st.operands[3], t)
        if d is None:
            return None
        exact = product.exact if d.exact is None else _and_scalar(b, product.exact, d.exact)
        return _affine(b.add(product.base, d.base), product.stride + d.stride, exact, min(product.align, d.align))
    if not (isinstance(c.base, ir.Constant) and c.stride == 0):
        return None
    n = c.base.constant
    if kind == "shl" and n < width(t):
        return _affine(b.shl(a.base, c.base), a.stride << n, exact, a.align << n)
    return None


def _product(b, a, c, exact):
    """The shape of a * c: uniform times uniform, or a ramp times a constant."""
    if a.stride == 0 and c.stride == 0:
        return _affine(b.mul(a.base, c.base), 0, exact, a.align * c.align)
    for ramp, k in ((a, c), (c, a)):
        if k.stride == 0 and isinstance(k.base, ir.Constant):
            return _affine(b.mul(ramp.base, k.base), ramp.stride * k.base.constant, exact, ramp.align * k.align)
    return None


def _mul(w, st):
    """mul.lo (warpruns) and mul.wide: the product of two values of type t in twice its width."""
    if "wide" not in st.mods:
        return _SHAPED["mul"](w, st)
    t = type_mods(st.mods)[-1]
    if t not in ("s16", "u16", "s32", "u32"):
        raise NotVectorisable(f"mul.wide.{t}")
    b = w.b
    wide_t = t[0] + str(2 * width(t))
    wide = llvm_type(wide_t)
    ext = b.sext if t[0] == "s" else b.zext
    a, c = (ext(w.read(op, t), w._vec(wide)) for op in st.operands[1:3])
    sa, sc = w.shape(st.operands[1], t), w.shape(st.operands[2], t)
    w.write(st.operands[0], b.mul(a, c), wide_t)
    if sa is not None and sc is not None and sc.stride == 0 and isinstance(sc.base, ir.Constant):
        widened = w.widened(sa, t, 2 * width(t))
        n = sc.base.constant if t[0] == "u" else _signed(sc.base.constant, width(t))
        w.set_shape(st.operands[0], _affine(b.mul(widened.base, ir.Constant(wide, n & ((1 << (2 * width(t))) - 1))),
                                            widened.stride * n, widened.exact))


def _signed(v, bits):
    return v - (1 << bits) if v >> (bits - 1) else v


def _mov(w, st):
    src = st.operands[1]
    if isinstance(src, pir.SpecialReg):
        t = type_mods(st.mods)[-1]
        value, shape = w.shaped_special(src)
        w.write(st.operands[0], convert_bits(w.b, value, llvm_type(t), False), t)
        if shape is not None and width(t) == 32:
            w.set_shape(st.operands[0], shape)
        return
    _SHAPED["mov"](w, st)


def _ld(w, st):
    if set(st.mods) - _MEMORY_MODS - set(type_mods(st.mods)):
        raise NotVectorisable(f"ld with {st.mods}")
    t = type_mods(st.mods)[-1]
    if t[0] not in "bsuf" or width(t) < 8 or t in ("f16", "bf16"):
        raise NotVectorisable(f"ld.{t}")
    elem = llvm_type(t)
    if "param" in st.mods:
        return _ld_param(w, st, t, elem)
    addr = st.operands[1]
    addrs, shape = w.access(st, addr)
    w.write(st.operands[0], w.load(addrs, shape, elem, width(t) // 8, _register_part(addr)), t)


def _ld_param(w, st, t, elem):
    op = st.operands[1]
    params = w.layout.kernel_params(w.pfn)
    if not isinstance(op, pir.Addr) or not isinstance(op.base, pir.Sym) or op.base.name not in params:
        raise NotVectorisable("ld.param of something else than a kernel parameter")
    b = w.b
    ptr = b.bitcast(b.gep(w.params, [i64(params[op.base.name].offset + op.offset)]), elem.as_pointer())
    value = b.load(ptr, align=max(width(t) // 8, 1))
    w.write(st.operands[0], w.splat(value), t)
    if t[0] in "bus":
        w.set_shape(st.operands[0], Affine(value, 0))


def _st(w, st):
    if set(st.mods) - _MEMORY_MODS - set(type_mods(st.mods)) or "param" in st.mods:
        raise NotVectorisable(f"st with {st.mods}")
    t = type_mods(st.mods)[-1]
    if t[0] not in "bsuf" or width(t) < 8 or t in ("f16", "bf16"):
        raise NotVectorisable(f"st.{t}")
    addr = st.operands[0]
    addrs, shape = w.access(st, addr)
    # (a group of interleaved stores is made at its last part: that part decides)
    w.streaming = memory.streams(st, w.read_memory)
    w.store(addrs, shape, w.read(st.operands[1], t), width(t) // 8, _register_part(addr))
    w.streaming = False


def _register_part(addr):
    """(register, offset) of an address `[%r + offset]`, else None."""
    return (addr.base.name, addr.offset) if isinstance(addr, pir.Addr) and isinstance(addr.base, pir.Reg) else None


def _load_bases(body) -> set:
    """Registers that loads read at two or more offsets: a group of interleaved loads."""
    offsets = {}
    for st in body:
        if isinstance(st, pir.Instruction) and st.opcode == "ld":
            part = _register_part(st.operands[1])
            if part is not None:
                offsets.setdefault(part[0], set()).add(part[1])
    return {r for r, seen in offsets.items() if len(seen) > 1}


def _cvta(w, st):
    """Generic addresses of global memory are the addresses; shared memory's are its
    window's base plus the offset (FunctionLowering.symbol_address)."""
    t = type_mods(st.mods)[-1]
    b = w.b
    value = convert_bits(b, w.read(st.operands[1], t), I64, False)
    shape = w.shape(st.operands[1], t)
    if "shared" in st.mods:
        step = b.sub if "to" in st.mods else b.add
        value = step(value, w.splat(w.shared_base))
        shape = Affine(step(shape.base, w.shared_base), shape.stride, shape.exact) if shape and width(t) == 64 else None
    elif "global" not in st.mods:
        raise NotVectorisable(f"cvta with {st.mods}")
    w.write(st.operands[0], value, t)
    w.set_shape(st.operands[0], shape)


def _cvt(w, st):
    """Between integer types: extended by the source's signedness, or truncated (a
    truncation keeps the shape: it is the same ramp, modulo the narrower width). To and
    between floats: warp regions' forms (integer to float to nearest, f32 <-> f64)."""
    ts = type_mods(st.mods)
    if len(ts) != 2 or any(t[0] not in "bus" or t == "b128" for t in ts) or set(st.mods) - set(ts):
        return REGION_OPS["cvt"](w, st)
    to, frm = ts
    b = w.b
    v = w.read(st.operands[1], frm)
    shape = w.shape(st.operands[1], frm)
    if width(to) > width(frm):
        v = (b.sext if frm[0] == "s" else b.zext)(v, w._vec(llvm_type(to)))
        shape = w.widened(shape, frm, width(to)) if shape is not None else None
    elif width(to) < width(frm):
        v = b.trunc(v, w._vec(llvm_type(to)))
        shape = Affine(b.trunc(shape.base, llvm_type(to)), shape.stride, shape.exact) if shape is not None else None
    w.write(st.operands[0], v, to)
    w.set_shape(st.operands[0], shape)


def _div(w, st):
    """Floats' division as warp regions make it; integers' division and remainder lane by
    lane as bitops makes them (never a trap: x / 0 all ones, INT_MIN / -1 INT_MIN)."""
    t = type_mods(st.mods)[-1] if type_mods(st.mods) else None
    if st.opcode == "div" and t in ("f32", "f64"):
        return REGION_OPS["div"](w, st)
    if t is None or t[0] not in "bus" or width(t) not in (16, 32, 64) or set(st.mods) - {t}:
        raise NotVectorisable(f"{st.opcode} with {st.mods}")
    a, c = (w.read(op, t) for op in st.operands[1:3])
    form = bitops.int_div if st.opcode == "div" else bitops.int_rem
    w.write(st.operands[0], form(w.b, a, c, t.startswith("s")), t)


def _barrier(w, st):
    """Every lane is at the same point of the program: a barrier of the whole block is nothing."""
    if set(st.mods) - {"sync", "aligned"} or len(st.operands) != 1 or not isinstance(st.operands[0], pir.Imm) \
            or st.operands[0].value != 0 or st.guard is not None:
        raise NotVectorisable(f"{st.opcode} with {st.mods}")


def _shuffle(w, st):
    """A fixed shuffle: within each warp, each lane takes its source lane's value."""
    fixed = fixed_shuffle(st, w.constants)
    if fixed is None:
        raise NotVectorisable("a shuffle with operands known only at run time")
    mode, lane_op, clamp = fixed
    srcs = [shfl_source(mode, lane, lane_op, clamp) for lane in range(WARP)]
    index = [t - t % WARP + srcs[t % WARP][0] for t in range(w.lanes)]
    a = w.read(st.operands[1], "b32")
    moved = w.b.shuffle_vector(a, ir.Constant(a.type, None), ir.Constant(ir.VectorType(I32, w.lanes), index))
    dst = st.operands[0]
    if isinstance(dst, pir.Pair):
        w.write(dst.first, moved, "b32")
        w.write(dst.second, w.lane_constant((int(srcs[t % WARP][1]) for t in range(w.lanes)), I1), "pred")
    else:
        w.write(dst, moved, "b32")


_SHAPED = {kind: _shaped(kind) for kind in ("mov", "add", "sub", "shl", "shr", "and", "mul", "mad")}
OPS = {**VECTOR_OPS, **_SHAPED, "mul": _mul, "mov": _mov, "ld": _ld, "st": _st, "cvta": _cvta, "cvt": _cvt,
       "bar": _barrier, "barrier": _barrier, "shfl": _shuffle,
       "div": _div, "rem": _div,
       # floats' roots and reciprocals, negation and absolute values as warp regions make them
       **{op: REGION_OPS[op] for op in ("rcp", "sqrt", "rsqrt", "neg", "abs")}}
# modifiers that change what an instruction does beyond what these forms read (warpruns'),
# and memory orders and vector accesses, which they do not take
_DEFAULT_UNHANDLED = _UNHANDLED_MODS | ORDERED_MODS | {"v2", "v4", "v8"}
_UNHANDLED = {"mul": _DEFAULT_UNHANDLED - {"wide"}}
