"""Runs of warp shuffles as vector code: a warp's 32 lanes as one <32 x T> value.

nvcc writes a warp reduction or scan as straight-line code: a shfl.sync with constant
operands, an instruction or two of arithmetic, the next shfl.sync, five times for 32 lanes.
Each shuffle is a site of the step function, so a collective round runs the warp's lanes
through the step function once per shuffle, each lane reloading and saving its registers
every time (a third of layernorm's time and more of scan's went there).

When all lanes of a warp wait at the first shuffle of such a run, the scheduler resolves
it and calls the run's *advance* function instead: it reads the registers the run needs
as vectors of the warp's 32 lanes (from the spill arrays, or recomputed as the step
function would), computes the arithmetic and the inner shuffles (a shufflevector by the
fixed permutation) and leaves the warp as if every lane had run to the run's last
shuffle: the registers live there saved, that shuffle's operand in the collective
array. The scheduler then resolves the last shuffle and the lanes resume after it.

The general rounds still go shuffle by shuffle, so a run is only a shortcut: an
instruction the vector code does not handle ends a run, and a run whose registers it
cannot reach (a kernel parameter in a recomputed chain, say) gets no advance function.
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..analysis import affine, uniformity
from ..irutil import convert_bits, declare, i32, i64, load_field, split_index, vector_constant
from ...ptx.modifiers import COMPARISONS, SHUFFLES
from ..ops import bitops, floatops, instructions
from ..ops.instructions import compare, compare_op
from ..ops.table import takes
from ..simt.collectives import shfl_source
from ..simt.workspace import COLL_ARRAYS
from ..types import I1, I8, I32, I64, PTR, llvm_type, llvm_width, type_mods, width

LANES = 32
FULL_MASK = 0xFFFFFFFF
INT_TYPES = frozenset(t + str(w) for t in "bus" for w in (16, 32, 64))
FLOAT_TYPES = frozenset(("f32", "f64"))
# Half precision and its packed pairs: computed as the step function does (floatops.half_arith:
# in f64, rounded once), lane by lane in vectors
HALF_TYPES = frozenset(("f16", "bf16", "f16x2", "bf16x2"))
_ARITHMETIC = INT_TYPES | FLOAT_TYPES
_SPECIAL_FIELDS = ("ntid", "nctaid", "ctaid")


class NotVectorisable(Exception):
    """The run needs something the vector code does not handle: it gets no advance function."""


def fixed_shuffle(st, constants, any_mask=False):
    """(mode, lane operand, clamp operand) of an unguarded shfl.b32 of the whole warp whose
    operands are compile-time constants (immediates or uniformity.constant_registers), else None.
    With `any_mask`, the member mask may be any value, known or not."""
    if not isinstance(st, pir.Instruction) or st.opcode != "shfl" or st.guard is not None:
        return None
    if "b32" not in st.mods or len(st.operands) not in (4, 5):
        return None
    values = [_constant_operand(op, constants) for op in st.operands[2:4 if any_mask else 5]]
    if any(v is None for v in values):
        return None
    if len(values) == 3 and values[2] & FULL_MASK != FULL_MASK:
        return None
    mode = next((m for m in st.mods if m in ("up", "down", "bfly", "idx")), None)
    return None if mode is None else (mode, values[0] & FULL_MASK, values[1] & FULL_MASK)


def _constant_operand(op, constants):
    if isinstance(op, pir.Imm) and not op.is_float:
        return op.value
    if isinstance(op, pir.Reg):
        return constants.get(op.name)
    return None


def _in_vector_form(st) -> bool:
    """Whether the run's vector code may take instruction `st`: all its modifiers are on its
    form's list (VECTOR_MODS; its operands are checked when the code is made)."""
    return isinstance(st, pir.Instruction) and takes(VECTOR_MODS, st)


def find_runs(body, constants) -> list:
    """[[position of the first shuffle, ..., position of the last]] of the straight-line runs
    of at least two fixed shuffles (fixed_shuffle) with only instructions in vector form
    between them. Labels inside a run do not matter: the run is the path from its first
    shuffle, whatever else joins it."""
    runs, current, last_shuffle = [], [], 0

    def close():
        if sum(1 for p in current[:last_shuffle] if body[p].opcode == "shfl") >= 2:
            runs.append(current[:last_shuffle])
    for pos, st in enumerate(body):
        if isinstance(st, (pir.Label, pir.DebugLoc, pir.Pragma)):
            continue
        if fixed_shuffle(st, constants):
            current.append(pos)
            last_shuffle = len(current)
        elif current and _in_vector_form(st) and st.opcode != "shfl":
            current.append(pos)
        else:
            close()
            current, last_shuffle = [], 0
    close()
    return runs


class WarpCode:
    """The advance function of one run: `void (i8* spill, i8* header, i8* ws, i64 fsize, i32 lo)`
    for the warp whose first thread is `lo`. `f` is the kernel's FunctionLowering, after its
    step function was lowered (spill plan and site numbers known)."""

    ARG_TYPES = (PTR, PTR, PTR, I64, I32)      # spill, header, ws, fsize, lo
    RETURNS = ir.VoidType()

    def __init__(self, f, run, name, constants):
        self.f, self.run, self.constants = f, run, constants
        self.first, self.last = run[0], run[-1]
        self.fn = ir.Function(f.fn.module, ir.FunctionType(self.RETURNS, self.ARG_TYPES), name=name)
        self.fn.linkage = "internal"
        self.spill, self.header, self.ws, self.fsize, self.lo = self.fn.args[:5]
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.values = {}          # register -> its vector, as the run has left it so far
        self.at_first = {}        # register -> its vector when the lanes stopped at the first shuffle
        self.lane_index = {}      # "x", "y", "z" -> vector of the lanes' thread indices
        self.mask = None          # a guarded instruction's predicate vector while it runs
        self.lanes = LANES        # the lanes a value holds: 1 where a region computes lane 0 alone

    # -------------------------------------------------------------- the run
    def emit(self):
        f, b = self.f, self.b
        body = f.pfn.body
        self._resolved_first_shuffle(body[self.first])
        for pos in self.run[1:-1]:
            st = body[pos]
            self.mask = self.read(st.guard.reg, "pred") if st.guard is not None else None
            if st.guard is not None and st.guard.negated:
                self.mask = b.not_(self.mask)
            self.op(st.opcode)(self, st)
            self.mask = None
        last = body[self.last]
        operand = self.read(last.operands[1], "b32")
        b.store(b.zext(operand, ir.VectorType(I64, LANES)), self._coll_vector("a", I64), align=8)
        self._save_live_at_last()
        b.ret_void()
        return self.fn

    def _resolved_first_shuffle(self, st):
        """The first shuffle's results, which the scheduler has put in the collective arrays."""
        b = self.b
        res = b.trunc(b.load(self._coll_vector("res", I64), align=8), self._vec(I32))
        dst = st.operands[0]
        if isinstance(dst, pir.Pair):
            pred = b.load(self._coll_vector("res_pred", I32), align=4)
            self.write(dst.first, res, "b32")
            self.write(dst.second, b.icmp_unsigned("!=", pred, ir.Constant(self._vec(I32), None)), "pred")
        else:
            self.write(dst, res, "b32")

    def _save_live_at_last(self):
        """Store what the step function reloads when it resumes at the last shuffle: each
        saved register live there whose array does not already hold its value."""
        f = self.f
        here = f.remat_at.get(self.last, {})
        valid = self._arrays_hold_at_first()
        for r in f.site_live.get(self.last, []):
            if r not in f.spill_slots or r in here:
                continue
            if r in self.values:
                self._store_spill(r, self.values[r])
            elif r not in valid:
                self._store_spill(r, self._value_at_first(r))

    def _arrays_hold_at_first(self):
        f = self.f
        here = f.remat_at.get(self.first, {})
        return {r for r in f.site_live.get(self.first, []) if r in f.spill_slots and r not in here}

    def takes(self, st) -> bool:
        """Whether this code may take instruction `st` (its operands are checked when made)."""
        return _in_vector_form(st)

    def op(self, opcode):
        """The vector form of `opcode` (looked up when used, so that a test may replace one)."""
        return VECTOR_OPS[opcode]

    # -------------------------------------------------------------- registers
    def _vec(self, elem):
        return ir.VectorType(elem, self.lanes)

    def _reg_type(self, name):
        slot, _ = self.f.reg(name)
        return slot.type.pointee

    def reg_value(self, name):
        if name in self.values:
            return self.values[name]
        return self._value_at_first(name)

    def _value_at_first(self, r):
        """Register r's vector when the lanes stopped at the first shuffle, found as the step
        function's resume there finds it: recomputed at that site, reloaded, or recomputed
        everywhere."""
        if r in self.at_first:
            return self.at_first[r]
        f = self.f
        here = f.remat_at.get(self.first, {})
        if r in here:
            v = self._recompute(r, here[r])
        elif r in f.spill_slots and r in f.site_live.get(self.first, []):
            v = self._load_spill(r)
        elif r in f.remat:
            # (also what a recomputed register's definition reads, live or not)
            v = self._recompute(r, f.remat[r])
        else:
            raise NotVectorisable(f"{r} is neither saved nor recomputed at the run's start")
        self.at_first[r] = v
        return v

    def _recompute(self, r, pos):
        """Run register r's definition again, in vector form, over the values at the start."""
        st = self.f.pfn.body[pos]
        if not self.takes(st) or st.guard is not None:
            raise NotVectorisable(f"{r} is recomputed by '{st.opcode}'")
        saved = self.values, self.mask
        self.values, self.mask = _StartValues(self), None
        try:
            self.op(st.opcode)(self, st)
            return self.values.written[r]
        finally:
            self.values, self.mask = saved

    def _lanes_at(self, offset, elem, size):
        """Pointer to the warp's 32 elements of the per-thread array at `offset` after the
        spill base (elements of `size` bytes, one per thread)."""
        b = self.b
        index = b.add(i64(offset), b.mul(b.zext(self.lo, I64), i64(size)))
        return b.bitcast(b.gep(self.spill, [index]), self._vec(elem).as_pointer())

    def _spill_vector(self, r):
        off, size = self.f.spill_slots[r]
        elem = I8 if self._reg_type(r) == I1 else self._reg_type(r)
        return self._lanes_at(abi.MAX_BLOCK_THREADS * off, elem, size), size

    def _load_spill(self, r):
        b = self.b
        ptr, size = self._spill_vector(r)
        v = b.load(ptr, align=size)
        if self._reg_type(r) == I1:
            v = b.trunc(v, self._vec(I1))
        if r in self.f.linear_forms:
            v = b.add(v, self._linear_part(r))
        return v

    def _store_spill(self, r, v):
        b = self.b
        ptr, size = self._spill_vector(r)
        if self._reg_type(r) == I1:
            v = b.zext(v, self._vec(I8))
        if r in self.f.linear_forms:
            v = b.sub(v, self._linear_part(r))
        b.store(v, ptr, align=size)

    def _linear_part(self, r):
        """FunctionLowering._linear_part for the warp's lanes."""
        b = self.b
        total = ir.Constant(self._vec(I32), None)
        for axis, factor, k in affine.linear_terms(self.f.linear_forms[r]):
            term = b.mul(self.thread_index(axis), self.splat(i32(k)))
            if factor is not None and factor.startswith("%"):
                name, comp = factor[1:].split(".")
                term = b.mul(term, self.special(pir.SpecialReg(name, comp)))
            elif factor is not None:
                raise NotVectorisable(f"{r} is saved without a multiple of a kernel parameter")
            total = b.add(total, term)
        return total

    def _coll_vector(self, name, elem):
        off, _ = COLL_ARRAYS[name]
        return self._lanes_at(abi.MAX_BLOCK_THREADS * self.f.spill_bytes + off, elem, elem.width // 8)

    # -------------------------------------------------------------- operands
    def splat(self, scalar):
        # constants are given as one element, not a list of them: llvmlite wraps each element
        # of a list in a Constant of its own, and splats are the commonest vectors (a third of
        # a 12,500-instruction kernel's lowering went to making their 32-element lists)
        b = self.b
        if isinstance(scalar, ir.Constant):
            return ir.Constant(self._vec(scalar.type), scalar)
        one = b.insert_element(ir.Constant(self._vec(scalar.type), None), scalar, i32(0))
        return b.shuffle_vector(one, ir.Constant(self._vec(scalar.type), None), ir.Constant(self._vec(I32), i32(0)))

    def thread_index(self, axis):
        """The lanes' %tid.<axis>, from the warp's first linear index (the code runs for full
        warps only): reading each lane's from its frame was 32 scalar loads per axis, and a
        block without sites keeps no frame per thread. The first lane's index costs
        divisions; in a block at least 32 threads wide the others' x wraps at most once (a
        vector division by a block dimension would be 32 scalar ones per axis)."""
        if axis not in self.lane_index:
            b = self.b
            nx, ny = (load_field(b, self.header, abi.CTX[f"ntid_{a}"], I32) for a in "xy")
            lanes = vector_constant(I32, tuple(range(LANES)))
            x0, y0, z0 = self._first_lane_index(nx, ny)
            x, y, z = b.add(self.splat(x0), lanes), self.splat(y0), self.splat(z0)
            wrap_x = b.icmp_unsigned(">=", x, self.splat(nx))
            x = b.select(wrap_x, b.sub(x, self.splat(nx)), x)
            y = b.add(y, b.zext(wrap_x, self._vec(I32)))
            wrap_y = b.icmp_unsigned(">=", y, self.splat(ny))
            y = b.select(wrap_y, b.sub(y, self.splat(ny)), y)
            z = b.add(z, b.zext(wrap_y, self._vec(I32)))
            wrapped = (x, y, z)
            wide = b.icmp_unsigned(">=", nx, i32(LANES))
            with b.if_else(wide) as (once, narrow):
                with once:
                    wide_end = b.block
                with narrow:
                    divided = split_index(b, b.add(self.splat(self.lo), lanes), self.splat(nx), self.splat(ny))
                    narrow_end = b.block
            for name, fast, slow in zip("xyz", wrapped, divided):
                v = b.phi(fast.type)
                v.add_incoming(fast, wide_end)
                v.add_incoming(slow, narrow_end)
                self.lane_index[name] = v
        return self.lane_index[axis]

    def _first_lane_index(self, nx, ny):
        """(x, y, z) of the warp's first thread (i32). In the block's first row (every warp
        of a one-row block) they cost no divisions: a region computes them at each call, once
        per turn of a grid-stride loop."""
        b = self.b
        with b.if_else(b.icmp_unsigned("<", self.lo, nx)) as (first_row, later_row):
            with first_row:
                first_end = b.block
            with later_row:
                divided = split_index(b, self.lo, nx, ny)
                later_end = b.block
        index = []
        for fast, slow in zip((self.lo, i32(0), i32(0)), divided):
            v = b.phi(I32)
            v.add_incoming(fast, first_end)
            v.add_incoming(slow, later_end)
            index.append(v)
        return index

    def special(self, op):
        b = self.b
        if op.name == "tid" and op.component in ("x", "y", "z"):
            return self.thread_index(op.component)
        if op.name in _SPECIAL_FIELDS and op.component in ("x", "y", "z"):
            return self.splat(load_field(b, self.header, abi.CTX[f"{op.name}_{op.component}"], I32))
        if op.name == "laneid":
            return ir.Constant(self._vec(I32), list(range(self.lanes)))
        if op.name == "warpid":
            return self.splat(b.lshr(self.lo, i32(5)))
        raise NotVectorisable(f"%{op.name}")

    def read(self, op, t):
        lt = llvm_type(t)
        if isinstance(op, pir.Reg):
            return convert_bits(self.b, self.reg_value(op.name), lt, t.startswith("s"))
        if isinstance(op, pir.Imm):
            return self.immediate(op, t, lt)
        if isinstance(op, pir.SpecialReg):
            return convert_bits(self.b, self.special(op), lt, False)
        if isinstance(op, pir.Not):
            return self.b.not_(self.read(op.operand, "pred"))
        raise NotVectorisable(f"operand {op}")

    def immediate(self, op, t, lt):
        """FunctionLowering.immediate, splat over the lanes."""
        if t == "pred":
            return self.splat(ir.Constant(I1, 1 if op.value else 0))
        if isinstance(lt, ir.IntType):
            if op.is_float and op.bits is None:
                raise NotVectorisable(f"float immediate {op.value} used as .{t}")
            value = op.bits if op.is_float else op.value
            return self.splat(ir.Constant(lt, value & ((1 << lt.width) - 1)))
        if op.is_float and op.bits is not None and op.width == llvm_width(lt):
            bits = self.splat(ir.Constant(ir.IntType(op.width), op.bits))
            return self.b.bitcast(bits, self._vec(lt))
        return self.splat(ir.Constant(lt, float(op.value)))

    def write(self, op, value, t):
        if not isinstance(op, pir.Reg):
            raise NotVectorisable(f"destination {op}")
        value = convert_bits(self.b, value, self._reg_type(op.name), t.startswith("s"))
        if self.mask is not None:
            value = self.b.select(self.mask, value, self.reg_value(op.name))
        self.values[op.name] = value


class _StartValues(dict):
    """The register values a recomputed definition reads (those at the run's start) and the
    one it writes."""

    def __init__(self, code):
        super().__init__()
        self.code, self.written = code, {}

    def __contains__(self, name):
        return True

    def __getitem__(self, name):
        return self.written[name] if name in self.written else self.code._value_at_first(name)

    def __setitem__(self, name, value):
        self.written[name] = value


# ---------------------------------------------------------------------- instructions in vector form
# Each mirrors the step function's handler (compiler/ops/instructions.py) for the forms it
# accepts and raises NotVectorisable for the others.

def form_type(st, allowed):
    """The type a vector form computes `st` in, one of `allowed`, else NotVectorisable."""
    ts = type_mods(st.mods)
    if not ts or ts[-1] not in allowed:
        raise NotVectorisable(f"{st.opcode} on {ts}")
    return ts[-1]


def _sources(w, st, t):
    return [w.read(op, t) for op in st.operands[1:]]


def _mov(w, st):
    t = form_type(st, INT_TYPES | FLOAT_TYPES | HALF_TYPES | {"pred"})
    w.write(st.operands[0], w.read(st.operands[1], t), t)


_DIRECTED = ("rz", "rm", "rp")


def _directed_rounding(st):
    """The directed rounding (.rz, .rm, .rp) a float instruction names, else None."""
    rnd = instructions.rounding(st)
    return rnd if rnd in _DIRECTED else None


def _half(w, st, t, op, vals):
    """A half-precision form, as instructions._half_op computes it (no .ftz, .sat or .relu here)."""
    w.write(st.operands[0], floatops.half_arith(w.b, op, vals, t, instructions.rounding(st), False, False, False), t)


def _flushes(st, t) -> bool:
    """Whether .ftz flushes this form's subnormal f32 inputs and result to zero, as the step
    function does (instructions._float_inputs, _float_result); nvcc's -use_fast_math (llm.c's
    build) puts it on every f32 operation. A half form with .ftz keeps to the step function."""
    if "ftz" not in st.mods:
        return False
    if t in HALF_TYPES:
        raise NotVectorisable(f"{st.opcode}.ftz of halves")
    return t == "f32"


def flushed(w, vals) -> list:
    """`vals` with subnormals flushed to zero (.ftz's inputs). A value that this code flushed
    already, as the result of an .ftz operation that the next one reads (-use_fast_math's
    chains of them), is not flushed again: the flushes were most of the vector code."""
    known = _flushed_values(w)
    out = []
    for v in vals:
        if id(v) not in known:
            v = floatops.flush_denormal(w.b, v)
            known[id(v)] = v
        out.append(v)
    return out


def flushed_result(w, v):
    """An .ftz operation's result `v`, flushed (and known as flushed: `flushed`)."""
    v = floatops.flush_denormal(w.b, v)
    _flushed_values(w)[id(v)] = v
    return v


def _flushed_values(w) -> dict:
    """{id: value} of the values `w` made flushed (holding them: an id stays theirs)."""
    known = getattr(w, "flushed_values", None)
    if known is None:
        known = w.flushed_values = {}
    return known


def _arith(w, st):
    t = form_type(st, INT_TYPES | FLOAT_TYPES | HALF_TYPES)
    ftz = _flushes(st, t)
    a, c = flushed(w, _sources(w, st, t)) if ftz else _sources(w, st, t)
    if t in HALF_TYPES:
        return _half(w, st, t, st.opcode, [a, c])
    b = w.b
    floats = t in FLOAT_TYPES
    rnd = _directed_rounding(st)
    product = w.f.fused_products.get(id(st)) if floats else None
    if rnd is not None:
        v = floatops.arith_rnd(b, st.opcode, [a, c], rnd)
    elif product is not None:       # a mul fused into this add/sub, as the step function does
        x, y = _sources(w, product, t)
        if _flushes(product, t):
            x, y = flushed(w, [x, y])
        v = _vector_fma(b, t, *instructions.fused_operands(b, st, product, x, y, a, c))
    else:
        op = {("add", False): b.add, ("sub", False): b.sub, ("mul", False): b.mul,
              ("add", True): b.fadd, ("sub", True): b.fsub, ("mul", True): b.fmul}[(st.opcode, floats)]
        v = op(a, c)
    w.write(st.operands[0], flushed_result(w, v) if ftz else v, t)


def _vector_fma(b, t, a, c, d):
    """a * c + d, rounded once, lane by lane (float type `t`)."""
    fn = declare(b.module, f"llvm.fma.v{a.type.count}{t}", a.type, [a.type] * 3)
    return b.call(fn, [a, c, d])


def _fma(w, st):
    t = form_type(st, INT_TYPES | FLOAT_TYPES | (HALF_TYPES if st.opcode == "fma" else frozenset()))
    ftz = _flushes(st, t)
    a, c, d = flushed(w, _sources(w, st, t)) if ftz else _sources(w, st, t)
    if t in HALF_TYPES:
        return _half(w, st, t, "fma", [a, c, d])
    b = w.b
    rnd = _directed_rounding(st)
    if t in FLOAT_TYPES:
        v = floatops.arith_rnd(b, "fma", [a, c, d], rnd) if rnd is not None else _vector_fma(b, t, a, c, d)
        return w.write(st.operands[0], flushed_result(w, v) if ftz else v, t)
    if rnd is not None:
        return w.write(st.operands[0], floatops.arith_rnd(b, "fma", [a, c, d], rnd), t)
    if st.opcode != "mad":
        raise NotVectorisable("fma on integers")
    w.write(st.operands[0], b.add(b.mul(a, c), d), t)


def _min_max(w, st):
    t = form_type(st, INT_TYPES | FLOAT_TYPES | HALF_TYPES)
    vals = flushed(w, _sources(w, st, t)) if _flushes(st, t) else _sources(w, st, t)    # (inputs only)
    if t in HALF_TYPES:
        if len(vals) != 2:
            raise NotVectorisable(f"{st.opcode} of three halves")
        return _half(w, st, t, st.opcode, vals)
    b = w.b
    v = vals[0]
    for other in vals[1:]:
        if t in FLOAT_TYPES:
            name = f"llvm.{'minimum' if st.opcode == 'min' else 'maximum'}num.v{v.type.count}{t}"
            v = b.call(declare(b.module, name, v.type, [v.type, v.type]), [v, other])
        else:
            cmp = b.icmp_signed if t.startswith("s") else b.icmp_unsigned
            v = b.select(cmp("<" if st.opcode == "min" else ">", v, other), v, other)
    if t == "f32":
        # PTX's canonical NaN, as floatops._canonical_nan
        nan = b.bitcast(w.splat(ir.Constant(I32, 0x7FFFFFFF)), v.type)
        v = b.select(b.fcmp_unordered("uno", v, v), nan, v)
    w.write(st.operands[0], v, t)


def _logic(w, st):
    t = form_type(st, INT_TYPES | {"pred"})
    vals = _sources(w, st, t)
    b = w.b
    if st.opcode == "not":
        return w.write(st.operands[0], b.not_(vals[0]), t)
    w.write(st.operands[0], {"and": b.and_, "or": b.or_, "xor": b.xor}[st.opcode](*vals), t)


def _shift(w, st):
    t = form_type(st, INT_TYPES)
    amount = st.operands[2]
    a = w.read(st.operands[1], t)
    if not isinstance(amount, pir.Imm):         # each lane's own amount, clamped as the GPU does
        return w.write(st.operands[0], bitops.shift(w.b, a, w.read(amount, "u32"), bitops.shift_kind(st.opcode, t)), t)
    if amount.is_float:
        raise NotVectorisable("a shift by a float")
    n, bits = amount.value & FULL_MASK, width(t)
    b = w.b
    if n >= bits:
        v = b.ashr(a, w.splat(ir.Constant(a.type.element, bits - 1))) if st.opcode == "shr" and t.startswith("s") \
            else ir.Constant(a.type, None)
    else:
        op = b.shl if st.opcode == "shl" else (b.ashr if t.startswith("s") else b.lshr)
        v = op(a, w.splat(ir.Constant(a.type.element, n)))
    w.write(st.operands[0], v, t)


def _setp(w, st):
    t = form_type(st, INT_TYPES | FLOAT_TYPES | {"f16", "bf16"})
    if len(st.operands) != 3 or isinstance(st.operands[0], pir.Pair):
        raise NotVectorisable("setp with a boolean operation")
    a, c = _sources(w, st, t)
    if "ftz" in st.mods and t in ("f32", "f16"):          # (inputs, as the step function's setp)
        a, c = flushed(w, [a, c])
    w.write(st.operands[0], compare(w, compare_op(st), t, a, c), "pred")


def _selp(w, st):
    t = form_type(st, INT_TYPES | FLOAT_TYPES)
    a, c = w.read(st.operands[1], t), w.read(st.operands[2], t)
    w.write(st.operands[0], w.b.select(w.read(st.operands[3], "pred"), a, c), t)


def _shuffle(w, st):
    """An inner shuffle of a run: every lane of the warp is there (the run started with all of
    them), so it is the fixed permutation of collectives.shfl_source."""
    mode, lane_op, clamp = fixed_shuffle(st, w.constants)
    srcs = [shfl_source(mode, lane, lane_op, clamp) for lane in range(LANES)]
    a = w.read(st.operands[1], "b32")
    b = w.b
    moved = b.shuffle_vector(a, ir.Constant(a.type, None), ir.Constant(ir.VectorType(I32, LANES), [j for j, _ in srcs]))
    dst = st.operands[0]
    if isinstance(dst, pir.Pair):
        w.write(dst.first, moved, "b32")
        w.write(dst.second, ir.Constant(ir.VectorType(I1, LANES), [int(ok) for _, ok in srcs]), "pred")
    else:
        w.write(dst, moved, "b32")


VECTOR_OPS = {"mov": _mov, "add": _arith, "sub": _arith, "mul": _arith, "mad": _fma, "fma": _fma,
              "min": _min_max, "max": _min_max, "and": _logic, "or": _logic, "xor": _logic, "not": _logic,
              "shl": _shift, "shr": _shift, "setp": _setp, "selp": _selp, "shfl": _shuffle}
# The modifiers each form handles (an allow-list, ops.table.takes): the types it computes in
# (halves and their pairs in add, sub, mul, fma, min, max; single halves in setp) and what it
# reads. A float form rounds to nearest (.rn) or in a direction (.rz, .rm, .rp:
# floatops.arith_rnd, which takes vectors; nvcc's expf has an fma.rm), mul and mad keep the
# low half (.lo), setp takes a comparison but no boolean operation; f32 arithmetic, min, max
# and setp take .ftz (_flushes); an instruction with any other modifier (.sat, .hi, .wide, .cc,
# .relu, .NaN, ...) keeps to the step function.
VECTOR_MODS = {
    "mov": _ARITHMETIC | HALF_TYPES | {"pred"},
    **dict.fromkeys(("add", "sub"), _ARITHMETIC | HALF_TYPES | {"rn", "ftz", *_DIRECTED}),
    "mul": _ARITHMETIC | HALF_TYPES | {"rn", "lo", "ftz", *_DIRECTED},
    "mad": _ARITHMETIC | {"rn", "lo", "ftz", *_DIRECTED},
    "fma": FLOAT_TYPES | HALF_TYPES | {"rn", "ftz", *_DIRECTED},
    **dict.fromkeys(("min", "max"), _ARITHMETIC | HALF_TYPES | {"ftz"}),
    **dict.fromkeys(("and", "or", "xor", "not"), INT_TYPES | {"pred"}),
    **dict.fromkeys(("shl", "shr"), INT_TYPES),
    "setp": _ARITHMETIC | {"f16", "bf16", "ftz"} | COMPARISONS,
    "selp": _ARITHMETIC,
    "shfl": SHUFFLES | {"sync", "b32"},
}
assert set(VECTOR_MODS) == set(VECTOR_OPS)


def emit_advances(f) -> dict:
    """{site of a run's first shuffle: (advance function, site of its last shuffle)} for the
    kernel lowered by `f` (f.site_at: {position of a suspending instruction: its site})."""
    body = f.pfn.body
    constants = uniformity.constant_registers(body)
    advances = {}
    for run in find_runs(body, constants):
        first, last = f.site_at.get(run[0]), f.site_at.get(run[-1])
        if first is None or last is None:
            continue
        code = WarpCode(f, run, f"{f.fn.name}.advance{first}", constants)
        try:
            advances[first] = (code.emit(), last)
        except NotVectorisable:
            # internal and never called: LLVM deletes it
            code.fn.blocks.clear()
            ir.IRBuilder(code.fn.append_basic_block("unused")).ret_void()
    return advances
