"""Lockstep: a warp region's code while every lane runs together.

In lockstep there are no masks, and each register whose lanes hold base + lane * stride
(laneshapes.py) is one scalar, lane 0's value: an instruction whose results are all strided
computes lane 0 alone, another computes vectors, reading strided registers as base + lane *
stride. A warp enters lockstep where it starts and where its lanes meet again at a loop's
head, if the strided registers live there check out (`_enter`); it leaves (their vectors
rebuilt) where its lanes part or where a strided form's condition fails (`_checked`).
Straight pieces of code that lanes part around and that branch only forward to where they
meet run under masks without leaving lockstep (`_convertible`, at most MAX_CONVERTED pieces).

Lockstep is a part of WarpRegion (warpregions.py), which inherits it: its methods read and
write the region's state (the builder, the lanes' mask, the strided registers' slots).
"""
from __future__ import annotations

from contextlib import contextmanager

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..analysis import dataflow
from ..irutil import i32, load_field, vector_constant
from ..ops import bitops
from ..types import I1, I32, MEMORY_WRITES, llvm_width
from . import laneshapes
from .warpruns import LANES

MAX_CONVERTED = 4                   # the most pieces a parted warp runs under masks in lockstep


class Lockstep:
    """A warp region's lockstep (see the module docstring): a part of WarpRegion."""

    def _alone(self, st) -> bool:
        """Whether every register st writes is strided: lockstep computes their lane 0 alone."""
        dsts = dataflow.defs_uses(st)[0]
        return bool(dsts) and all(r in self.scalars for r in dsts)

    def _checked(self, st, start):
        """Where computing st's lane 0 alone relies on a condition (laneshapes' checked
        forms; st begins the piece at `start`), the lanes leave lockstep when it fails and
        run the piece outside lockstep."""
        check = self._check_of(st)
        if check is None:
            return
        b = self.b
        go_on, fails = self.fn.append_basic_block("strided"), self.fn.append_basic_block("strided.not")
        b.cbranch(self._check(check), go_on, fails)
        b.position_at_end(fails)
        if self.bails and start in self._untouched():
            # nothing done yet that the threads cannot do again: they run the warp instead,
            # or the region made for partners in the same warp (EntryRegion.partners)
            b.ret(i32(abi.REGION_NOT_RUN) if self.partners is None else b.call(self.partners, self.fn.args))
        else:
            self._leave_lockstep(self._live_at(start))
            b.store(self._all_lanes(), self.some_mask)
            b.branch(self.some[start])
        b.position_at_end(go_on)

    def _untouched(self) -> set:
        """The pieces a warp reaches in lockstep only before it has stored anything: reached
        from the start without a store, and not again after one (a grid-stride loop's
        pieces before its store run again after it, where the threads redoing the warp
        would apply an in-place update twice)."""
        pieces = self.pieces()
        before = self._reached([self.first + 1])
        writers = [start for start in before if self._writes(pieces[start])]
        after = self._reached([n for start in writers for n in self._successors(pieces[start])], through=True)
        return before - after

    def _writes(self, piece) -> bool:
        body = self.f.pfn.body
        return piece.stop or any(body[p].opcode in MEMORY_WRITES for p in piece.positions)

    def _successors(self, piece) -> list:
        body = self.f.pfn.body
        return [self._target(body[p]) for p in piece.positions if body[p].opcode == "bra"] + [piece.next]

    def _reached(self, starts, through=False) -> set:
        """The pieces reached from `starts` up to (and with) the first that stores, or
        `through` those."""
        pieces, seen, todo = self.pieces(), set(), list(starts)
        while todo:
            start = todo.pop()
            if start in seen or start not in pieces:
                continue
            seen.add(start)
            if through or not self._writes(pieces[start]):
                todo.extend(self._successors(pieces[start]))
        return seen

    def _lockstep_instruction(self, st):
        """Instruction `st` for the whole warp. One whose results are all strided computes
        their lane-0 values alone (each form laneshapes keeps a stride for computes lane 0
        from lane 0); another computes vectors, reading strided registers as
        base + lane * stride, masked by its guard where that differs between lanes and by
        the lanes of an if-converted piece (self.converted)."""
        alone = self._alone(st)
        mask = None if alone else self.converted
        if st.guard is not None and st.guard.reg.name not in self.scalars:
            mask = self._guard(st) if mask is None else self.b.and_(mask, self._guard(st))
        elif st.guard is not None:
            with self.b.if_then(self._guard(st)):
                return self._run_masked(st, mask, alone)
        self._run_masked(st, mask, alone)

    def _run_masked(self, st, mask, alone):
        self.mask = mask
        self.guarded = st.guard is not None
        try:
            if alone:
                with self._lane_zero():
                    return self.op(st.opcode)(self, st)
            self.op(st.opcode)(self, st)
        finally:
            self.mask, self.guarded = None, False

    def _convertible(self, fall, target) -> list:
        """The pieces from `fall` on where lanes that part at a forward branch may stay in
        lockstep, the code they skip run for the others under a mask (`if (lane == 0)
        mean[row] = m;`), or []: straight pieces that each go on to the next or branch
        forward to the branch's `target` (bitonic sort's `if (l > i) { ...; if (swap) {...} }`),
        the last one falling through into it, and what they leave live there is no strided
        register (those are one value for every lane). Their other registers are computed for
        every lane alike, which reads only registers of every lane and so is harmless; their
        loads and stores are for their lanes alone."""
        body, pieces, chain = self.f.pfn.body, self.pieces(), []
        if target is None or target < fall:
            return []
        written = set()
        while fall != target:
            piece = pieces.get(fall)
            if piece is None or piece.stop or piece.next is None or len(chain) == MAX_CONVERTED:
                return []
            for p in piece.positions:
                st = body[p]
                if st.opcode in ("ret", "exit") or st.opcode == "bra" and (st.guard is None or self._target(st) != target):
                    return []
                check = self._check_of(st)
                if check is not None and written & {op.name for op in check[1:] if isinstance(op, pir.Reg)}:
                    return []              # (its check is made before the chain runs)
                written |= set(dataflow.defs_uses(st)[0])
            chain.append(piece)
            fall = piece.next
        return [] if written & self._live_at(target) & set(self.scalars) else chain

    def _chain_checks(self, chain) -> list:
        """The conditions of the strided forms in `chain`: made before it runs, where the
        registers they read hold what they will hold there (_convertible)."""
        body = self.f.pfn.body
        return [c for piece in chain for p in piece.positions if (c := self._check_of(body[p])) is not None]

    def _run_converted(self, chain, lanes, target):
        """The pieces of `chain` (_convertible) for `lanes`, a branch forward to `target` taking
        the lanes it takes out of those that run the rest; then the whole warp at target.
        A register no lane reads after the chain is written in every lane, as computed: its
        lanes keep a partner's index whole (bitonic sort's `data + 4 * (i ^ j)`, where the
        masked lanes' old values made gather's window check fail)."""
        b, body, outer = self.b, self.f.pfn.body, self.piece
        written = {r for piece in chain for p in piece.positions for r in dataflow.defs_uses(body[p])[0]}
        self.unmasked = frozenset(written - self._live_at(target))
        for piece in chain:
            self.piece = piece
            for pos in piece.positions:
                st = body[pos]
                self.position = pos
                if st.opcode == "bra":
                    taken = self._guard(st)
                    if taken.type == I1:
                        taken = self.splat(taken)
                    lanes = b.and_(lanes, b.not_(taken))
                    continue
                self.converted = lanes
                self._lockstep_instruction(st)
        self.converted, self.piece, self.unmasked = None, outer, frozenset()
        return b.branch(self.whole[target])

    def _lane_zero(self):
        """Values are <1 x T> (lane 0's) while inside."""
        return self._holding(1)

    @contextmanager
    def _holding(self, lanes):
        saved = self.lanes
        self.lanes = lanes
        try:
            yield
        finally:
            self.lanes = saved

    def _lane0(self, v):
        """Lane 0 of vector v as a <1 x T>."""
        return self.b.shuffle_vector(v, ir.Constant(v.type, None), ir.Constant(ir.VectorType(I32, 1), [0]))

    def _lane0_scalar(self, op, t):
        """Operand op's lane-0 value as type t, a scalar (op strided or alike in every lane)."""
        with self._lane_zero():
            return self.b.extract_element(self.read(op, t), i32(0))

    def _check(self, check):
        """i1: the condition of a strided form (laneshapes.instruction_stride) holds."""
        b = self.b
        kind = check[0]
        if kind == laneshapes.THREAD_INDEX:
            nx = load_field(b, self.header, abi.CTX["ntid_x"], I32)
            return b.icmp_unsigned("==", b.and_(nx, i32(LANES - 1)), i32(0))
        if kind == laneshapes.QUOTIENT:
            return self._no_multiple_passed(*check[1:])
        op, k = check[1], check[-1]
        bits = self._bits(op.name) if isinstance(op, pir.Reg) else 32
        v = self._lane0_scalar(op, f"b{bits}")
        t = v.type
        if kind == laneshapes.LOW_BITS:
            mask = check[2]
            return b.icmp_unsigned("<=", b.and_(v, ir.Constant(t, mask)), ir.Constant(t, mask - (LANES - 1) * k))
        if kind == laneshapes.FLIPPED:
            # the bits below the other value's lowest set one (all of them for 0) take the
            # lanes' steps without a carry out of them: the xor leaves those bits alone
            u = self._lane0_scalar(check[2], f"b{bits}")
            low = b.sub(b.and_(u, b.neg(u)), ir.Constant(t, 1))
            span = ir.Constant(t, (LANES - 1) * k)
            return b.and_(b.icmp_unsigned(">=", low, span), b.icmp_unsigned("<=", b.and_(v, low), b.sub(low, span)))
        signed, span = check[2], (LANES - 1) * abs(k)
        if signed:
            cmp, top, low = b.icmp_signed, (1 << (bits - 1)) - 1, -(1 << (bits - 1))
        else:
            cmp, top, low = b.icmp_unsigned, (1 << bits) - 1, 0
        return cmp("<=", v, ir.Constant(t, top - span)) if k > 0 else cmp(">=", v, ir.Constant(t, low + span))

    def _no_multiple_passed(self, dividend, divisor, t, k):
        """i1: lane 0's dividend u and the divisor d of a QUOTIENT form leave the lanes' u + lane
        * k on one quotient: d > 31 k, and u % d < d - 31 k (signed: u >= 0 as well). The
        remainder is bitops' multiplication by the divisor's reciprocal for 32 bits (the
        region's remembered_reciprocal), one division for 64."""
        b, signed = self.b, t.startswith("s")
        u, d = (self._lane0_scalar(op, t) for op in (dividend, divisor))
        span = ir.Constant(u.type, (LANES - 1) * k)
        wide = (b.icmp_signed if signed else b.icmp_unsigned)(">", d, span)
        if signed:
            wide = b.and_(wide, b.icmp_signed(">=", u, ir.Constant(u.type, 0)))
        if u.type.width == 32:
            r = bitops.uniform_remainder(b, u, d, False, self.remembered_reciprocal(divisor))
        else:
            r = b.urem(u, b.select(wide, d, ir.Constant(u.type, 1)))
        return b.and_(wide, b.icmp_unsigned("<", r, b.sub(d, span)))

    def _enter(self, start):
        """The block that takes the whole warp, all of its lanes at `start`, into lockstep:
        the strided registers live there must hold base + lane * stride (else the lanes run
        the piece outside lockstep)."""
        if start in self.entries:
            return self.entries[start]
        b = self.b
        blk = self.fn.append_basic_block(f"enter{start}")
        self.entries[start] = blk
        with b.goto_block(blk):
            live = sorted(r for r in self._live_at(start) if r in self.scalars)
            holds = self._strides_hold(live)
            inside, outside = self.fn.append_basic_block(f"enter{start}.yes"), \
                self.fn.append_basic_block(f"enter{start}.no")
            b.cbranch(holds, inside, outside)
            b.position_at_end(inside)
            for r in live:
                b.store(self._lane0(b.load(self.slots[r])), self.scalars[r])
            b.branch(self.whole[start])
            b.position_at_end(outside)
            b.store(self._all_lanes(), self.some_mask)
            b.branch(self.some[start])
        return blk

    def _strides_hold(self, registers):
        """i1: each of the strided `registers` holds base + lane * stride in its vector slot."""
        b = self.b
        holds = ir.Constant(I1, 1)
        for r in registers:
            v = b.load(self.slots[r])
            alike = b.icmp_unsigned("==", _bits_of(b, v), _bits_of(b, self._strided_vector(r, v)))
            holds = b.and_(holds, self._reduce("and", alike, I1))
        return holds

    def _strided_vector(self, r, v):
        """base + lane * stride of r, from lane 0 of vector or <1 x T> value v."""
        b = self.b
        base = self.splat(b.extract_element(v, i32(0)))
        k = self.strides[r]
        if not k:
            return base
        return b.add(base, vector_constant(base.type.element, tuple(lane * k for lane in range(LANES))))

    def _leave_lockstep(self, live):
        """Before the lanes go their own ways: the strided registers of `live` as vectors."""
        b = self.b
        for r in sorted(live):
            if r in self.scalars:
                b.store(self._strided_vector(r, b.load(self.scalars[r])), self.slots[r])


def _bits_of(b, v):
    """An integer view of vector v, to compare bit patterns (floats, NaNs included)."""
    if isinstance(v.type.element, ir.IntType):
        return v
    return b.bitcast(v, ir.VectorType(ir.IntType(llvm_width(v.type.element)), v.type.count))
