"""Block-aggregated atomics: `atomicAdd(total, x)` from every thread as one atomic per block.

A kernel without sites runs a block as one loop over its threads (simt/blockfunction.py), each
thread's atomic a locked read-modify-write of the same cache line, which the other workers'
blocks contend for: `if (i < n) atomicAdd(out, in[i])` took 50-120x the time of an OpenMP
reduction. A GPU's compiler combines such atomics within a warp (warp-aggregated atomics); here
a block's threads combine theirs into one value in the thread's frame, and the block performs
one atomic with it after its last thread.

That is one of the orders a GPU may give, if nothing can tell the difference:
- the operation is associative and commutative (add, and, or, xor, min, max; integers and
  float add/min/max: CUDA gives atomics no order, so float sums may reassociate);
- the old value is not used (`red`, or an `atom` whose destination no instruction reads);
- every thread of the block targets one address (its base block-uniform, analysis/uniformity.py)
  in global memory, without acquire/release semantics;
- after the atomic a thread touches no memory (no load, store, atomic, fence, call or barrier
  is reachable from it): its atomics are then its last accesses, and performing all the
  block's atomics after all its threads' other accesses is an interleaving of the threads.
The kernel must have no sites (its block is the plain thread loop) and not be checked.
Where the address differs between threads (a histogram's bins), or memory is touched after
the atomic, ops/atomictable.py holds the atomics per address instead; its Table answers the
same hooks (init, flush, merge, atoms) as Combined here.

`add.f32` in global memory flushes subnormal inputs and results (ops/atomics.py): each input
is flushed as it is combined, and the block's atomic flushes the total and the result; sums
of a block between the two are not (a reassociated sum has other partial sums anyway).

Frame slots (after the lowering's own): the address (i64), the combined value (8 bytes) and
a flag (any thread of the block contributed). The block function calls `init` before its
threads and `flush` after them (emitted here, so that simt/ need not know atomics).

Across blocks (`carries_across_blocks`): where nothing else in the kernel lets a block see how
far the others have got (every atom/red of it combined; no fence, ordered access or cluster
memory: analysis.memory's block-order conditions), a worker carries the totals from block to
block (`merge`: into the same slots in its workspace, performed when the next block's address
differs) and performs them once at the end of its run of blocks. One atomic per block had two
workers' blocks take turns owning one cache line: reduce_atomic_f32 3.5x the time of an
OpenMP reduction.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir

from ...ptx import ir as pir
from ..analysis import cfg, dataflow, memory
from ..irutil import field_ptr
from ..types import I8, I64, PTR, llvm_type, space_of, type_mods
from . import atomics, floatops

SLOT_BYTES = 24

# operations a block may combine -> identity of a (bits, float?) type
IDENTITY = {
    "add": lambda bits: 0, "or": lambda bits: 0, "xor": lambda bits: 0, "umax": lambda bits: 0,
    "and": lambda bits: (1 << bits) - 1, "umin": lambda bits: (1 << bits) - 1,
    "max": lambda bits: -(1 << (bits - 1)), "min": lambda bits: (1 << (bits - 1)) - 1,
    "fadd": lambda bits: -0.0,                 # x + -0.0 == x, for x == -0.0 too
    "fmin": lambda bits: math.nan, "fmax": lambda bits: math.nan,   # minnum/maxnum ignore NaN
}

# opcodes that never touch memory nor wait for other threads (what may follow a combined atomic)
_QUIET = frozenset(("mov", "add", "sub", "mul", "mad", "mad24", "mul24", "sad", "div", "rem", "abs", "neg", "min",
                    "max", "shl", "shr", "and", "or", "xor", "not", "cnot", "cvt", "cvta", "setp", "set", "selp",
                    "slct", "bra", "ret", "exit", "fma", "rcp", "sqrt", "rsqrt", "sin", "cos", "lg2", "ex2", "tanh",
                    "copysign", "testp", "popc", "clz", "bfind", "brev", "bfe", "bfi", "prmt", "shf", "lop3",
                    "addc", "subc", "madc", "mul.wide", "dp4a", "dp2a"))


@dataclass(frozen=True)
class Combined:
    """One atomic a block combines: its frame slot, atomicrmw kind and element type."""
    offset: int
    kind: str
    ptx_type: str

    @property
    def lt(self):
        return llvm_type(self.ptx_type)

    @property
    def atoms(self) -> int:
        """The atom/red instructions it stands for."""
        return 1

    def init(self, b, fr):
        """Before a block's (or a worker's run's) first thread: the identity, unused."""
        b.store(_identity(self), field_ptr(b, fr, self.offset + 8, self.lt))
        b.store(ir.Constant(I8, 0), field_ptr(b, fr, self.offset + 16, I8))

    def flush(self, b, fr):
        """After the last thread: the one atomic, where a thread contributed."""
        with b.if_then(self._used(b, fr), likely=True):
            perform(b, b.load(field_ptr(b, fr, self.offset, I64)),
                    b.load(field_ptr(b, fr, self.offset + 8, self.lt)), self.kind, self.ptx_type)

    def merge(self, b, fr, carried):
        """A block's total into the one its worker carries (same offsets in `carried`),
        the carried one performed first where the block's address differs."""
        with b.if_then(self._used(b, fr), likely=True):
            addr = b.load(field_ptr(b, fr, self.offset, I64))
            held = self._used(b, carried)
            elsewhere = b.and_(held, b.icmp_unsigned("!=", b.load(field_ptr(b, carried, self.offset, I64)), addr))
            with b.if_then(elsewhere, likely=False):
                self.flush(b, carried)
                b.store(_identity(self), field_ptr(b, carried, self.offset + 8, self.lt))
            total_p = field_ptr(b, carried, self.offset + 8, self.lt)
            b.store(combine(b, self.kind, b.load(total_p), b.load(field_ptr(b, fr, self.offset + 8, self.lt))),
                    total_p)
            b.store(addr, field_ptr(b, carried, self.offset, I64))
            b.store(ir.Constant(I8, 1), field_ptr(b, carried, self.offset + 16, I8))

    def _used(self, b, fr):
        return b.icmp_unsigned("!=", b.load(field_ptr(b, fr, self.offset + 16, I8)), ir.Constant(I8, 0))


def combinable_kind(inst):
    """The atomicrmw kind of an atom/red whose form a block may combine, else None."""
    ts = type_mods(inst.mods)
    if not ts or {"v2", "v4", "v8", "acquire", "release", "acq_rel", "noftz"} & set(inst.mods):
        return None
    t = ts[-1]
    if t not in ("u32", "s32", "u64", "s64", "b32", "b64", "f32", "f64") or space_of(inst) != "global":
        return None
    kind = atomics.rmw_kind(atomics.operation(inst), t)
    return kind if kind in IDENTITY else None


def combinable(f, inst, pos) -> bool:
    """May the block combine this atom/red (the module docstring's conditions)?"""
    if not f.is_kernel or f.site_live or f.mc.checked or getattr(f.mc, "tool", None):
        return False
    body = f.pfn.body
    if not 0 <= pos < len(body) or body[pos] is not inst:     # lowered elsewhere than the body's pass
        return False
    if combinable_kind(inst) is None:
        return False
    ops = inst.operands
    addr = ops[1] if inst.opcode == "atom" else ops[0]
    if not isinstance(addr, pir.Addr) or not _uniform_base(f, addr.base):
        return False
    if inst.opcode == "atom" and isinstance(ops[0], pir.Reg) and ops[0].name in read_registers(f):
        return False
    return not _memory_after(f, pos)


def _uniform_base(f, base) -> bool:
    if isinstance(base, pir.Sym):
        return True
    if not isinstance(base, pir.Reg):
        return False
    return base.name in f.registers_alike()


def read_registers(f) -> set:
    def make():
        read = set()
        for st in f.pfn.body:
            if isinstance(st, pir.Instruction):
                read.update(dataflow.defs_uses(st)[1])
        return read
    return f.analysed("aggregation.read", make)


def touches_memory(st) -> bool:
    if st.opcode == "ld":
        return "param" not in st.mods       # a kernel parameter does not change
    return st.opcode not in _QUIET


def _memory_after(f, pos) -> bool:
    """Is any instruction that touches memory reachable from the one at `pos` (after it)?"""
    blocks = f.analysed("aggregation.cfg", lambda: cfg.build_cfg(f.pfn.body, f.branch_targets))
    home = next((b for b in blocks if any(p == pos for p, _ in b.instructions)), None)
    if home is None:
        return True
    if any(touches_memory(st) for p, st in home.instructions if p > pos):
        return True
    seen, todo = set(), list(home.succs)
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        blk = blocks[i]
        # (back in the atomic's own block through a loop: all of it is reached, the atomic
        # itself may repeat)
        if any(touches_memory(st) and p != pos for p, st in blk.instructions):
            return True
        todo.extend(blk.succs)
    return False


def identity(kind, lt):
    """The identity of operation `kind` on LLVM type `lt` (x op identity == x), a constant."""
    bits = lt.width if isinstance(lt, ir.IntType) else {"float": 32, "double": 64}[str(lt)]
    return ir.Constant(lt, IDENTITY[kind](bits))


def _identity(c: Combined):
    return identity(c.kind, c.lt)


def combine(b, kind, acc, v):
    """acc (op) v, reassociable where it is a float add (so that a loop over threads vectorises)."""
    got = atomics.PLAIN_RMW[kind](b, acc, v)
    if kind == "fadd":
        got.flags.append("reassoc")
    return got


def lower_combined(f, inst) -> None:
    """This thread's part of a combined atomic (combinable said yes): into the block's slot."""
    kind = combinable_kind(inst)
    t = type_mods(inst.mods)[-1]
    ops = inst.operands if inst.opcode == "atom" else (None,) + tuple(inst.operands)
    b = f.b
    ptr = f.address(ops[1], "global")
    v = f.read(ops[2], t)
    p = b.bitcast(ptr, llvm_type(t).as_pointer())
    offset = (f.frame_size + 7) // 8 * 8
    f.frame_size = offset + SLOT_BYTES
    f.combined.append(Combined(offset, kind, t))
    if kind == "fadd" and t == "f32":
        v = floatops.flush_denormal(b, v)
    b.store(b.ptrtoint(p, I64), field_ptr(b, f.ctx, offset, I64))
    acc_p = field_ptr(b, f.ctx, offset + 8, v.type)
    b.store(combine(b, kind, b.load(acc_p), v), acc_p)
    b.store(ir.Constant(I8, 1), field_ptr(b, f.ctx, offset + 16, I8))


def carries_across_blocks(body, combined) -> bool:
    """Whether a worker may carry a kernel's combined totals from block to block (the module
    docstring): every atom/red of the body was combined, and without them its blocks may run
    in any order unseen."""
    atomics_in_body = [st for st in body if isinstance(st, pir.Instruction) and st.opcode in ("atom", "red")]
    if len(atomics_in_body) != sum(c.atoms for c in combined):
        return False
    return memory.any_block_order([st for st in body if not (isinstance(st, pir.Instruction)
                                                             and st.opcode in ("atom", "red"))])


def in_place(combined) -> bool:
    """Whether the blocks of a kernel whose worker carries its combined atomics may hold them
    in the carried slots themselves (every one a table of atomics held per address: a
    block's own table, merged entry by entry into the worker's at its end, cost more than
    its threads' atomics where a block has a few hundred: a histogram of one byte per
    thread took ~18x the time of the same kernel as a grid-stride loop). A Combined slot
    keeps its block's total in registers, and its merge performs the carried one where the
    next block's address differs: it stays per block."""
    return bool(combined) and all(getattr(c, "held_in_place", False) for c in combined)


def emit_merge(module, name, combined) -> ir.Function:
    """`void (i8* frame, i8* carried)`: a block's combined totals into those its worker
    carries (slots at the same offsets: each one's `merge`)."""
    merge = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR]), name=f"{name}.combined.merge")
    merge.linkage = "internal"
    merge.attributes.add("alwaysinline")
    b = ir.IRBuilder(merge.append_basic_block("entry"))
    for c in combined:
        c.merge(b, *merge.args)
    b.ret_void()
    return merge


def perform(b, addr, total, kind, ptx_type):
    """The atomic `kind` of `total` at i64 `addr` (global memory), flushing subnormals where
    a global add.f32 does."""
    lt = llvm_type(ptx_type)
    flush_subnormals = ir.Constant(ir.IntType(1), 1) if kind == "fadd" and ptx_type == "f32" else None
    atomics.rmw(b, False, kind, b.inttoptr(addr, lt.as_pointer()), total, flush_subnormals)


def emit_block_hooks(module, name, combined) -> tuple:
    """(init, flush): `void (i8* frame)` functions that set a block's slots up before its
    threads run and perform its combined atomics after them; (None, None) without any."""
    if not combined:
        return None, None
    fnty = ir.FunctionType(ir.VoidType(), [PTR])
    hooks = []
    for part in ("init", "flush"):
        fn = ir.Function(module, fnty, name=f"{name}.combined.{part}")
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        for c in combined:
            getattr(c, part)(b, fn.args[0])
        b.ret_void()
        hooks.append(fn)
    return tuple(hooks)
