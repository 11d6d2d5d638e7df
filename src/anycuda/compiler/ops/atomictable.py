"""Scattered atomics held in a table: `atomicAdd(&bins[data[i]], 1)` once per address per block.

A histogram's threads add to a few hundred addresses. As locked read-modify-writes, each on a
cache line the other workers' blocks contend for, `histogram_global_atomics` took 23-60x the
time of an OpenMP loop with private bins (benchmarks/NOTES.md); a GPU performs such atomics in
its L2 at a rate no CPU core's locked instructions reach. Here a block's threads add theirs
into a table in the frame, an entry per address (direct-mapped by element index, so that a
histogram's bins never meet; an entry another address wants is performed and handed over),
and the block performs each entry once after its last thread. Where the kernel's blocks may
run in any order unseen (aggregation.carries_across_blocks), its worker carries the table on
to its next block and performs it after the last of its run.

The conditions are aggregation's (add, and, or, xor, min, max of integers, float add/min/max;
global memory; the old value unused; no ordering semantics; no sites; not checked), but the
address may be anything and memory may be touched after the atomic:
- every atom/red of the kernel is such, all of one operation and type (one table);
- the kernel touches memory otherwise only by plain ld/st (no fence, call, texture, ordered
  or volatile access, which could let another thread wait for an atomic).
A thread sees its own atomics: each global or generic ld/st first asks whether it overlaps
the addresses the table holds (`lo <= a < hi`, two compares) and performs the whole table if
so. Another thread's load may find the old value: with no barrier, fence or ordered access
between them (the kernel has none), a GPU does not order the two either (a data race in the
PTX memory model), and every atomic is performed before the kernel ends.

An atomic on a bad address faults where its entry is performed: at the end of the block (or
of the worker's run of blocks), which is the block the failed launch names. Address 0 is the
empty entry's key, so an atomic on it is performed at once (and faults there).

Dense tables. While the addresses held span at most ENTRIES elements (and are aligned to
theirs), no two of them share an entry; the table then keeps an entry for every element of
that span (`lo..hi`), those no thread added to (filled) holding the operation's identity. A
warp region's lanes whose addresses all fall in the span need no key compared, no entry
taken and no hand-over: each adds into its element's entry (`dense_span`, `entry_total`),
as a loop over a block's shared-memory bins does. A filled entry still at its identity is not
performed (an atomic of the identity would change nothing, and the element may be none of
the program's).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

from llvmlite import ir

from ...ptx import ir as pir
from ..irutil import field_ptr, for_range, i32, i64, intrinsic, internal_function, store_field
from ..types import I32, I64, ORDERED_MODS, PTR, llvm_type, type_mods
from . import aggregation, floatops

ENTRIES = 256                         # a power of two: a byte histogram's bins, one entry each
_LO, _HI, _COUNT = 0, 8, 16           # lowest address held, end of the highest, entries taken
_SPAN = 24                            # i64 hi - lo while dense (never 0 then unless empty), else 0
_KEYS = 64                            # i64 address per entry (0: empty)
_TOTALS = _KEYS + 8 * ENTRIES         # the entry's combined value, 8 bytes per entry
_TAKEN = _TOTALS + 8 * ENTRIES        # i32 entries in the order they were taken (flush walks these)
_FILLED = ENTRIES                     # set in a taken entry's number where it was filled
TABLE_BYTES = _TAKEN + 4 * ENTRIES

_WIDTHS = {"u32": 4, "s32": 4, "b32": 4, "f32": 4, "u64": 8, "s64": 8, "b64": 8, "f64": 8}


@dataclass
class Table:
    """The table of a kernel's scattered atomics: its frame offset, atomicrmw kind, element
    type, the step function it serves (its helpers' names) and which atom/red instructions
    were lowered into it (by the step or a warp region). `init`, `flush` and `merge` are aggregation.Combined's hooks."""
    offset: int
    kind: str
    ptx_type: str
    owner: str
    held: set = field(default_factory=set)     # body positions of the atom/red lowered into it
    held_in_place = True      # carried from block to block, the worker's table is the blocks' own (aggregation.in_place)

    @property
    def lt(self):
        return llvm_type(self.ptx_type)

    @property
    def atoms(self) -> int:
        return len(self.held)

    @property
    def flushes_inputs(self) -> bool:
        """A global add.f32 flushes its subnormal inputs (ops/atomics.py): so do those held."""
        return self.kind == "fadd" and self.ptx_type == "f32"

    def init(self, b, fr):
        base = self._at(b, fr, 0)
        intrinsic(b, "llvm.memset.p0i8.i64", ir.VoidType(),
                  [b.gep(base, [i64(_KEYS)]), ir.Constant(ir.IntType(8), 0), i64(8 * ENTRIES),
                   ir.Constant(ir.IntType(1), 0)])
        _set_empty(b, base)

    def flush(self, b, fr):
        b.call(self.flush_function(b.module), [fr])

    def merge(self, b, fr, carried):
        add = self.add_function(b.module)
        base = self._at(b, fr, 0)
        with self._each_taken(b, base) as (slot, total, idle):
            with b.if_then(b.not_(idle)):
                b.call(add, [carried, b.load(_key(b, base, slot)), total])

    # ------------------------------------------------------------------ helpers
    def _at(self, b, fr, offset):
        return b.gep(fr, [i64(self.offset + offset)])

    def _total(self, b, base, slot):
        return b.bitcast(b.gep(base, [b.add(i64(_TOTALS), b.shl(slot, i64(3)))]), self.lt.as_pointer())

    def add_function(self, module) -> ir.Function:
        """`void (i8* frame, i64 address, T value)`: the value into the address's entry."""
        return internal_function(module, f"{self.owner}.table.add",
                                 ir.FunctionType(ir.VoidType(), [PTR, I64, self.lt]), self._emit_add)

    def flush_function(self, module) -> ir.Function:
        """`void (i8* frame)`: every entry held performed, the table left empty."""
        return internal_function(module, f"{self.owner}.table.flush", ir.FunctionType(ir.VoidType(), [PTR]),
                                 self._emit_flush)

    def _emit_add(self, fn):
        fn.attributes.add("alwaysinline")
        fr, addr, v = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        base = self._at(b, fr, 0)
        size = self.size
        with b.if_then(b.icmp_unsigned("==", addr, i64(0)), likely=False):
            aggregation.perform(b, addr, v, self.kind, self.ptx_type)      # faults, as on a GPU
            b.ret_void()
        slot = _slot(b, addr, size)
        key_p, total_p = _key(b, base, slot), self._total(b, base, slot)
        key = b.load(key_p)
        with b.if_else(b.icmp_unsigned("==", key, addr), likely=True) as (same, other):
            with same:
                b.store(aggregation.combine(b, self.kind, b.load(total_p), v), total_p)
            with other:
                with b.if_else(b.icmp_unsigned("!=", key, i64(0))) as (taken, empty):
                    with taken:                         # handed over: the old address's total performed
                        aggregation.perform(b, key, b.load(total_p), self.kind, self.ptx_type)
                    with empty:
                        _take(b, base, b.trunc(slot, I32))
                b.store(addr, key_p)
                b.store(v, total_p)
                lo_p, hi_p = field_ptr(b, base, _LO, I64), field_ptr(b, base, _HI, I64)
                lo, hi, end = b.load(lo_p), b.load(hi_p), b.add(addr, i64(size))
                new_lo = b.select(b.icmp_unsigned("<", addr, lo), addr, lo)
                new_hi = b.select(b.icmp_unsigned(">", end, hi), end, hi)
                b.store(new_lo, lo_p)
                b.store(new_hi, hi_p)
                self._keep_dense(b, base, addr, (lo, hi), (new_lo, new_hi))
        b.ret_void()

    def _keep_dense(self, b, base, addr, old, new):
        """After `addr` took an entry, the span held grew from `old` to `new` (lo, hi): still
        dense where it spans at most ENTRIES aligned elements (the entries it gained filled),
        else no longer (until the table is emptied)."""
        size = self.size
        span_p = field_ptr(b, base, _SPAN, I64)
        span = b.sub(*reversed(new))
        was_empty = b.icmp_unsigned(">", *old)          # (lo -1, hi 0)
        # (dense before: empty, or a span held; one that stopped being dense holds none)
        was_dense = b.or_(was_empty, b.icmp_unsigned("!=", b.load(span_p), i64(0)))
        fits = b.and_(was_dense, b.and_(b.icmp_unsigned("<=", span, i64(ENTRIES * size)),
                                        b.icmp_unsigned("==", b.and_(addr, i64(size - 1)), i64(0))))
        with b.if_else(fits, likely=True) as (dense, sparse):
            with dense:
                with b.if_then(b.not_(was_empty)):
                    self._fill(b, base, new[0], old[0])
                    self._fill(b, base, old[1], new[1])
                b.store(span, span_p)
            with sparse:
                b.store(i64(0), span_p)

    def _fill(self, b, base, first, end):
        """An entry at its identity for every element of first..end-1 that has none."""
        size = self.size
        count = b.lshr(b.sub(end, first), i64(size.bit_length() - 1))
        with for_range(b, i64(0), count, "fill") as k:
            addr = b.add(first, b.mul(k, i64(size)))
            slot = _slot(b, addr, size)
            key_p = _key(b, base, slot)
            with b.if_then(b.icmp_unsigned("==", b.load(key_p), i64(0))):
                b.store(addr, key_p)
                b.store(aggregation.identity(self.kind, self.lt), self._total(b, base, slot))
                _take(b, base, b.or_(b.trunc(slot, I32), i32(_FILLED)))

    @contextmanager
    def _each_taken(self, b, base):
        """A loop over the entries taken: each one's slot (i64), total and whether it is a
        filled entry still at its identity (i1: one not to perform)."""
        with for_range(b, i32(0), b.load(field_ptr(b, base, _COUNT, I32)), "held") as k:
            taken = b.load(_taken(b, base, k))
            slot = b.zext(b.and_(taken, i32(ENTRIES - 1)), I64)
            total = b.load(self._total(b, base, slot))
            filled = b.icmp_unsigned("!=", b.and_(taken, i32(_FILLED)), i32(0))
            bits = ir.IntType(8 * self.size)
            same = b.icmp_unsigned("==", b.bitcast(total, bits),
                                   b.bitcast(aggregation.identity(self.kind, self.lt), bits))
            yield slot, total, b.and_(filled, same)

    @property
    def size(self) -> int:
        """Bytes of an element."""
        return _WIDTHS[self.ptx_type]

    def dense_span(self, b, frame):
        """(lo, span), i64s: while the table in `frame` is dense, an aligned address `a` has
        its entry where a - lo < span (unsigned), and its value may go straight into it
        (entry_total; the module docstring); span is 0 while it is not."""
        base = self._at(b, frame, 0)
        return b.load(field_ptr(b, base, _LO, I64)), b.load(field_ptr(b, base, _SPAN, I64))

    def entry_total(self, b, frame, addr):
        """i64: the address of the total of i64 address `addr`'s entry in the table in `frame`."""
        base = self._at(b, frame, 0)
        return b.ptrtoint(self._total(b, base, _slot(b, addr, self.size)), I64)

    def _emit_flush(self, fn):
        fn.attributes.add("noinline")          # the guard's rare path and the block's end
        (fr,) = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        base = self._at(b, fr, 0)
        with self._each_taken(b, base) as (slot, total, idle):
            key_p = _key(b, base, slot)
            with b.if_then(b.not_(idle)):
                aggregation.perform(b, b.load(key_p), total, self.kind, self.ptx_type)
            b.store(i64(0), key_p)
        _set_empty(b, base)
        b.ret_void()


def _slot(b, addr, size):
    """The entry of i64 address `addr` (elements of `size` bytes): its element index, modulo."""
    return b.and_(b.lshr(addr, i64(size.bit_length() - 1)), i64(ENTRIES - 1))


def _taken(b, base, index):
    """Pointer to the index-th entry of those taken, in the order taken."""
    return b.gep(b.bitcast(b.gep(base, [i64(_TAKEN)]), I32.as_pointer()), [index])


def _take(b, base, number):
    """Entry `number` (i32: its slot, | _FILLED where filled) listed after those taken."""
    count_p = field_ptr(b, base, _COUNT, I32)
    count = b.load(count_p)
    b.store(number, _taken(b, base, count))
    b.store(b.add(count, i32(1)), count_p)


def _key(b, base, slot):
    return b.gep(b.bitcast(b.gep(base, [i64(_KEYS)]), I64.as_pointer()), [slot])


def _set_empty(b, base):
    store_field(b, base, _LO, i64(-1))
    store_field(b, base, _HI, i64(0))
    store_field(b, base, _COUNT, i32(0))
    store_field(b, base, _SPAN, i64(0))


# ---------------------------------------------------------------------- planning and lowering

def plan(f):
    """The table for kernel lowering `f` where its atomics may be held in one (the module
    docstring's conditions), its bytes reserved in the frame and it listed among the
    lowering's combined atomics; else None. Called before the body is lowered: every ld/st
    of the body is guarded once there is a table."""
    if not f.is_kernel or f.site_live or f.mc.checked or getattr(f.mc, "tool", None):
        return None
    forms, read, scattered = set(), aggregation.read_registers(f), False
    for pos, st in enumerate(f.pfn.body):
        if not isinstance(st, pir.Instruction):
            continue
        if st.opcode in ("atom", "red"):
            scattered = scattered or not aggregation.combinable(f, st, pos)
            kind = aggregation.combinable_kind(st)
            addr = st.operands[1 if st.opcode == "atom" else 0]
            dest = st.operands[0]
            if kind is None or not isinstance(addr, pir.Addr) \
                    or (st.opcode == "atom" and isinstance(dest, pir.Reg) and dest.name in read):
                return None
            forms.add((kind, type_mods(st.mods)[-1]))
        elif st.opcode in ("ld", "ldu", "st"):
            if ORDERED_MODS.intersection(st.mods):
                return None
        elif aggregation.touches_memory(st):
            return None
    if len(forms) != 1 or not scattered:         # (one address per block: aggregation's, cheaper)
        return None
    (kind, t), = forms
    offset = (f.frame_size + 63) // 64 * 64
    f.frame_size = offset + TABLE_BYTES
    table = Table(offset, kind, t, f.fn.name)
    f.combined.append(table)
    return table


def lower(f, inst) -> None:
    """This thread's atom/red (of the planned table's form) into the table."""
    table = f.atomic_table
    ops = inst.operands if inst.opcode == "atom" else (None,) + tuple(inst.operands)
    b = f.b
    addr = b.ptrtoint(f.address(ops[1], "global"), I64)
    add_held(b, table, f.ctx, addr, f.read(ops[2], table.ptx_type))
    table.held.add(f.inst_pos)


def add_held(b, table, frame, addr, v) -> None:
    """Value `v` for i64 address `addr` into the table in `frame` (a global add.f32's
    subnormal input flushed, as the atomic would)."""
    b.call(table.add_function(b.module), [frame, addr, _input(b, table, v)])


def add_dense(b, table, total_p, v) -> None:
    """Value `v` into the entry whose total is at `total_p` (entry_total's address, as a pointer)."""
    b.store(aggregation.combine(b, table.kind, b.load(total_p), _input(b, table, v)), total_p)


def _input(b, table, v):
    return floatops.flush_denormal(b, v) if table.flushes_inputs else v


def guard(f, ptr, nbytes: int) -> None:
    """Before a global or generic access of `nbytes` at `ptr`: the table performed where the
    access overlaps an address it holds (a thread sees its own atomics)."""
    a = f.b.ptrtoint(ptr, I64)
    guard_span(f.b, f.atomic_table, f.ctx, a, f.b.add(a, i64(nbytes)))


def guard_span(b, table, frame, first, end) -> None:
    """guard for the bytes first..end-1 (i64s), the table in `frame`."""
    base = table._at(b, frame, 0)
    overlaps = b.and_(b.icmp_unsigned("<", first, b.load(field_ptr(b, base, _HI, I64))),
                      b.icmp_unsigned(">", end, b.load(field_ptr(b, base, _LO, I64))))
    with b.if_then(overlaps, likely=False):
        b.call(table.flush_function(b.module), [frame])
