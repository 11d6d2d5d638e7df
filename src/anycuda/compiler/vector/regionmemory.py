"""How a warp region's lanes reach memory: the addresses of a memory operand as a vector, and
the ways a region reads and writes them, cheapest first: one vector access where the lanes'
addresses are consecutive (or strided from lane 0's in lockstep), a masked window permuted by
lane ^ u where an xor computes them, a gather or scatter otherwise; loads prefetched ahead in a
loop, reloads of values a lane loop can read again (lanereloads.py), and element arrays for
what goes lane by lane.

RegionMemory is a part of WarpRegion (warpregions.py), which inherits it: its methods read
the region's state (the builder, the lanes' mask, lockstep, the strided registers), and the
region's instruction handlers (regionops.py) call them.
"""
from __future__ import annotations

from contextlib import contextmanager

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..analysis import dataflow
from ..irutil import (FAR_STEP, at_function_start, field_ptr, for_range, i32, i64, load_field, masked_gather,
                      masked_load, masked_store, prefetch_into_l2, register_address, set_loop_hints, steps_far,
                      vector_constant)
from ..types import I1, I32, I64, llvm_type, llvm_width, space_of
from . import lanereloads
from .regionops import access_elements
from .warpruns import LANES, NotVectorisable


# iterations a loop's strided loads are prefetched ahead: one turn of a grid-stride loop
# over one buffer (warpregions.TURN_ROWS). The rows of a grid-stride loop lie a power of two apart and
# share the cache's sets: lines fetched further ahead evicted those in use (one worker:
# saxpy_f32_stride 6.8 -> 5.7 ms, reduce 3.3 -> 2.6, copy_f16_stride 2.8 -> 2.3 from 16 to
# 4 iterations; 2 was slower again, row loops' kernels (softmax, layernorm) level)
PREFETCH_AHEAD = 4
# A loop whose rounds step irutil.FAR_STEP bytes or more (a grid-stride loop's row) sweeps its
# array in each pass: PREFETCH_AHEAD rounds past its last lies past the array's end, often where
# no page is (the allocation's guard), and a prefetch there walks the page tables every time.
# Such prefetches stop ahead of the pass's end by the count of the warp's last pass, kept for
# up to ROUND_SITES accesses in the warp's turn area (from byte ROUND_COUNTS on: rounds so far
# and the last pass's, an i64 each per access).
ROUND_SITES = 8
ROUND_COUNTS = 8
ROUND_SITE_BYTES = 16


SAME_SPACE = object()       # lane_addresses' loop writes the memory it addresses


class RegionMemory:
    """A warp region's memory accesses (see the module docstring): a part of WarpRegion."""

    def addresses(self, op, space):
        """<32 x i64> addresses of a memory operand in state space `space` ('' = generic)."""
        b, f = self.b, self.f
        if not isinstance(op, pir.Addr):
            raise NotVectorisable(f"memory operand {op}")
        if op.base is None:
            addr = self.splat(i64(op.offset))
        elif isinstance(op.base, pir.Sym):
            name = op.base.name
            shared = isinstance(f.mc.shared_offset(f.pfn, name), int)
            addr = self.splat(b.add(self._symbol(name), i64(op.offset)))
            if shared and space != "shared":
                addr = b.add(addr, self.splat(self._shared_base()))     # its generic address
            elif not shared and space not in ("global", "const", ""):
                raise NotVectorisable(f"symbol {name} in .{space}")
        else:
            addr = register_address(b, self.read(op.base, f"b{self._bits(op.base.name)}"), op.offset)
        if space == "shared":
            addr = b.add(addr, self.splat(self._shared_base()))
        return addr

    def _shared_base(self):
        """i64: the block's shared window, loaded once per call: loaded where it is used, in a
        loop whose stores LLVM cannot tell apart from the header's (histogram's loop over the
        lanes' atomics) the load stayed in the loop, a third load per element."""
        if self._window is None:
            with at_function_start(self.b):
                self._window = load_field(self.b, self.header, abi.CTX["shared_base"], I64)
        return self._window

    def strided_address(self, op, space):
        """(lane 0's address, stride) of a memory operand in lockstep whose base register is
        strided; else None."""
        if not self.lockstep or self.lanes != LANES or not isinstance(op, pir.Addr):
            return None
        stride = 0
        if isinstance(op.base, pir.Reg):
            stride = self.strides.get(op.base.name) if op.base.name in self.scalars else None
            if stride is None or stride and self._bits(op.base.name) != 64:
                return None
        with self._lane_zero():
            return self.b.extract_element(self.addresses(op, space), i32(0)), stride

    def load_lanes(self, base, elem, size, count):
        """`count` vectors of the lanes' elements, lane l's `count` consecutive ones at base +
        l * count * size (ld.v2 / ld.v4 of consecutive lanes as one load); with a mask, one
        element each (the other lanes' are undefined and not read)."""
        b = self.b
        if self.mask is not None:
            return [masked_load(self.b, base, ir.VectorType(elem, LANES), size, self.mask)]
        wide = b.load(b.inttoptr(base, ir.VectorType(elem, LANES * count).as_pointer()), align=size)
        if count == 1:
            return [wide]
        return [b.shuffle_vector(wide, ir.Constant(wide.type, None),
                                 vector_constant(I32, tuple(lane * count + i for lane in range(LANES))))
                for i in range(count)]

    def prefetch_ahead(self, address, nbytes, pos, write=False):
        """Where the access of `nbytes` from `address` (i64) at body position `pos` is in a loop
        of the region: a prefetch of where it will be PREFETCH_AHEAD iterations later, by the
        step its address took since the last one. A grid-stride loop's warp steps by the
        grid's width (64 KB in histogram), which no hardware prefetcher follows, and the
        warp waits for memory each iteration: histogram 71 -> 34-39 ms (NOTES.md).
        A store (`write`) is prefetched for writing, so that its line is owned before the
        store needs it (layernorm's output row: 0.89-0.91x the time), and only where its step
        is a constant: measuring a store's step cost scan 1.16x and softmax 1.05x its time."""
        if pos is None:
            return
        spans = [(head, back) for head, back in self._loop_spans() if head <= pos <= back]
        if not spans:
            return
        b = self.b
        constant = self._constant_step(pos, min(spans, key=lambda span: span[1] - span[0]))
        if write and constant is None:
            return
        if constant is not None:
            step = i64(constant)
        else:
            with at_function_start(b):
                slot = b.alloca(I64, name=f"last{pos}")
                b.store(i64(0), slot)
            self._step_slots.append(slot)
            last = b.load(slot)
            b.store(address, slot)
            step = b.select(b.icmp_unsigned("==", last, i64(0)), i64(0), b.sub(address, last))
        ahead = b.add(address, b.mul(step, i64(PREFETCH_AHEAD)))
        gate = None if constant is not None and abs(constant) < FAR_STEP else self._rounds_left(pos, step)
        if gate is None:
            prefetch_into_l2(b, ahead, range(0, nbytes, 64), write)
            return
        with b.if_then(gate):
            prefetch_into_l2(b, ahead, range(0, nbytes, 64), write)

    def _rounds_left(self, pos, step):
        """i1: whether a prefetch PREFETCH_AHEAD rounds ahead of the access at `pos` is made
        this round: where its rounds step less than FAR_STEP, always; else while the warp's
        pass will run that far, were it as long as the warp's last pass (the one before it
        in its turn area: the same warp of the block its slot ran before, whose grid-stride
        loop ran as many rounds, give or take one). The counts live in stack slots while the
        region runs (registers) and in the turn area between its calls (_round_site,
        save_round_counts); a region that never gives way has no area (its caller passes
        none) and prefetches every round. Accesses past the first ROUND_SITES: None (every
        round)."""
        site = self._round_site(pos)
        if site is None:
            return None
        b = self.b
        rounds_slot, last_slot, _ = site
        rounds = b.add(b.load(rounds_slot), i64(1))
        b.store(rounds, rounds_slot)
        last = b.load(last_slot)
        near = b.not_(steps_far(b, step))
        reaches = b.icmp_unsigned("<=", b.add(rounds, i64(PREFETCH_AHEAD)), last)
        unknown = b.icmp_unsigned("==", last, i64(0))
        _, own, _ = self._pass_counts()
        # (select, not or: without an area the counts are a scratch slot's)
        return b.select(own, b.or_(near, b.or_(reaches, unknown)), ir.Constant(I1, 1))

    def _round_site(self, pos):
        """(rounds slot, last pass slot, offset in the turn area) of the access at `pos`, its
        slots set in the region's entry block from the area: where the call starts the warp's
        pass, the rounds its last pass counted become the last pass's (where it counted any)
        and the count starts at 0; where it resumes a turn, both go on. None past ROUND_SITES."""
        if pos not in self._round_sites:
            if len(self._round_sites) >= ROUND_SITES:
                return None
            b = self.b
            with at_function_start(b):
                slots = [b.alloca(I64, name=f"round.{what}{pos}") for what in ("count", "last")]
            at = ROUND_COUNTS + ROUND_SITE_BYTES * len(self._round_sites)
            counts, _, starts = self._pass_counts()
            entry = self.fn.entry_basic_block
            with b.goto_block(entry):
                b.position_before(entry.terminator)
                rounds, last = (b.load(field_ptr(b, counts, at + 8 * k, I64)) for k in range(2))
                ended = b.select(b.icmp_unsigned("!=", rounds, i64(0)), rounds, last)
                b.store(b.select(starts, i64(0), rounds), slots[0])
                b.store(b.select(starts, ended, last), slots[1])
            self._round_sites[pos] = (*slots, at)
        return self._round_sites[pos]

    def save_round_counts(self):
        """Where the region returns (its warp done, or giving way): the rounds' counts back
        to the turn area."""
        if not self._round_sites:
            return
        b = self.b
        counts, _, _ = self._pass_counts()
        for rounds_slot, last_slot, at in self._round_sites.values():
            b.store(b.load(rounds_slot), field_ptr(b, counts, at, I64))
            b.store(b.load(last_slot), field_ptr(b, counts, at + 8, I64))

    def _pass_counts(self):
        """(i8* where the rounds are counted between calls, i1 whether that is the warp's turn
        area, i1 whether this call starts the warp: 0 where the turn area says where it
        resumes), made once in the region's entry block."""
        if self._counts is None:
            b = self.b
            with at_function_start(b):
                scratch = b.alloca(ir.ArrayType(ir.IntType(8), ROUND_COUNTS + ROUND_SITE_BYTES * ROUND_SITES),
                                   name="round.scratch")
                scratch.align = 8
                b.store(ir.Constant(scratch.type.pointee, None), scratch)
            entry = self.fn.entry_basic_block
            with b.goto_block(entry):
                b.position_before(entry.terminator)
                own = b.icmp_unsigned("!=", self.turn, ir.Constant(self.turn.type, None))
                counts = b.select(own, self.turn, b.bitcast(scratch, self.turn.type))
                starts = b.icmp_unsigned("==", b.load(b.bitcast(counts, I32.as_pointer())), i32(0))
            self._counts = (counts, own, starts)
        return self._counts

    def round_counts_bytes(self) -> int:
        """Where a warp's turn state may start in its turn area: past its rounds' counts."""
        if not self._round_sites:
            return 0
        return ROUND_COUNTS + ROUND_SITE_BYTES * len(self._round_sites)

    def _constant_step(self, pos, span):
        """The bytes by which the address of the access at `pos` steps per iteration of the
        loop `span` (head, back edge), where the loop moves its base register by one
        unguarded `add`/`sub` of an immediate (layernorm's row loops: 128 or 512); else
        None, and the step is measured as the region runs. Measured, it cost six
        instructions and a stack slot per load and iteration (layernorm's last row loop
        loads three rows: three times the loop's own work)."""
        body = self.f.pfn.body
        addr = next((op for op in body[pos].operands if isinstance(op, pir.Addr)), None)
        if addr is None or not isinstance(addr.base, pir.Reg):
            return None
        base = addr.base.name
        head, back = span
        writes = [body[p] for p in range(head, back + 1) if isinstance(body[p], pir.Instruction)
                  and base in dataflow.defs_uses(body[p])[0]]
        if len(writes) != 1:
            return None
        st = writes[0]
        if st.opcode not in ("add", "sub") or st.guard is not None or len(st.operands) != 3:
            return None
        _, src, amount = st.operands
        if not (isinstance(src, pir.Reg) and src.name == base and isinstance(amount, pir.Imm)
                and isinstance(amount.value, int)):
            return None
        return amount.value if st.opcode == "add" else -amount.value

    def gather(self, addrs, elem, size, flipped=False):
        """The lanes' elements at `addrs` (for the lanes in self.mask; others undefined): one
        vector load where they are consecutive, one element where they are alike (a block's
        total, a row's scale), else lane by lane. `flipped`: the addresses come from an xor,
        and may be a window's elements in the order lane ^ u (_xor_window), tried first."""
        b = self.b
        if self.lanes == 1:
            # (lockstep, an address alike in every lane)
            return self.splat(b.load(b.inttoptr(b.extract_element(addrs, i32(0)), elem.as_pointer()), align=size))
        vec = self._vec(elem)
        first = b.extract_element(addrs, i32(0))
        ways = [(lambda: self._consecutive(addrs, size), lambda: b.load(b.inttoptr(first, vec.as_pointer()), align=size)),
                (lambda: self._alike(addrs), lambda: self.splat(b.load(b.inttoptr(first, elem.as_pointer()), align=size)))]
        if flipped:
            holds, start, u = self._xor_window(addrs, size)
            ways.insert(0, (lambda: holds, lambda: self._permute_lanes(
                masked_load(self.b, start, vec, size, self._permute_lanes(self._lanes(), u)), u)))

        def by_lane():
            # one masked gather (vgather where the CPU has it) rather than a loop over the
            # lanes: a thread per CSR row reads vals[j], cols[j] and x[cols[j]] of 32 rows
            # apart each turn of its loop
            return masked_gather(b, addrs, elem, size, self._lanes())
        return self._first_way(ways, by_lane, "ld")

    def scatter(self, addrs, value, size, flipped=False):
        """Store the lanes' elements of `value` at `addrs`, for the lanes in self.mask (as
        gather: `flipped`, the addresses come from an xor)."""
        b = self.b
        elem = value.type.element
        first = b.extract_element(addrs, i32(0))
        ways = [(lambda: self._consecutive(addrs, size),
                 lambda: b.store(value, b.inttoptr(first, value.type.as_pointer()), align=size))]
        if flipped:
            holds, start, u = self._xor_window(addrs, size)
            ways.insert(0, (lambda: holds, lambda: masked_store(self.b, 
                self._permute_lanes(value, u), start, size, self._permute_lanes(self._lanes(), u))))

        def by_lane():
            values = self.lane_array(value)
            with self._each_lane_here(self._from_lane_array(addrs), elem, "st.lane") as (lane, p):
                b.store(b.load(b.gep(values, [lane])), p, align=size)
        self._first_way(ways, by_lane, "st", loads=False)

    def _first_way(self, ways, otherwise, name, loads=True):
        """The first of `ways` ([(test, access)]: i1 and the access's code, each made when
        called) whose test holds, else `otherwise()`; for `loads`, the value of the access
        that ran."""
        b = self.b
        done = self.fn.append_basic_block(f"{name}.done")
        results = []
        for test, access in ways:
            yes, no = self.fn.append_basic_block(f"{name}.way"), self.fn.append_basic_block(f"{name}.other")
            b.cbranch(test(), yes, no)
            b.position_at_end(yes)
            results.append((access(), b.block))
            b.branch(done)
            b.position_at_end(no)
        results.append((otherwise(), b.block))
        b.branch(done)
        b.position_at_end(done)
        if not loads:
            return None
        v = b.phi(results[0][0].type)
        for value, blk in results:
            v.add_incoming(value, blk)
        return v

    def lane_addresses(self, op, space, writes=SAME_SPACE):
        """lane -> i64: that lane's address of memory operand `op` in state space `space`, for a
        loop over the lanes (_each_lane_here) that writes memory there (or in `writes`: None
        where it writes none): computed again in the loop where the lanes' values come from a
        vector load (lanereloads), else from a stack copy of the lanes' addresses."""
        b = self.b
        writes = space if writes is SAME_SPACE else writes
        reload = self._reload(op.base, writes) if isinstance(op, pir.Addr) else None
        if reload is not None:
            return lambda lane: self._reloaded(reload, lane, lambda: self.addresses(op, space))
        offsets = self._shared_offsets(op, space)
        if offsets is None:
            return self._from_lane_array(self.addresses(op, space))
        base, offset_of = self._shared_base(), self._from_lane_array(offsets)
        return lambda lane: b.add(base, b.zext(offset_of(lane), I64))

    def lane_operand(self, op, t, writes):
        """lane -> that lane's value of operand `op` as type t, for a loop over the lanes that
        writes memory in state space `writes` (None: none): one scalar where it is alike in
        every lane (histogram's `atomicAdd(&h[b], 1)`, where a load per lane from a stack copy
        was a third of the loop's loads), computed again in the loop where it comes from a
        vector load, else from a stack copy."""
        reload = self._reload(op, writes)
        if reload is not None:
            return lambda lane: self._reloaded(reload, lane, lambda: self.read(op, t))
        v = self.read(op, t)
        if isinstance(v, ir.Constant) and isinstance(v.constant, (list, tuple)) and len({str(c) for c in v.constant}) == 1:
            return lambda lane: v.constant[0]
        return self._from_lane_array(v)

    def _reload(self, op, space):
        """The lanereloads.Reload of register operand `op` as the instruction being emitted
        reads it, in lockstep with every lane's register vectors (else None)."""
        if not (self.lockstep and self.lanes == LANES and isinstance(op, pir.Reg) and self.piece is not None):
            return None
        positions = self.piece.positions
        return lanereloads.find_reload(self.f.pfn.body, positions, positions.index(self.position), op.name,
                                       self.strides, space)

    def _reloaded(self, reload, lane, value):
        """The scalar of value() (a <1 x T> of registers read) where the registers of `reload`
        hold lane `lane`'s values, computed from its elements in memory."""
        body = self.f.pfn.body
        saved, self.mask, self.reloading = self.mask, None, {}
        try:
            with self._lane_zero():
                for pos in reload.positions:
                    if pos in reload.loads:
                        self._reload_element(body[pos], lane)
                    else:
                        self.op(body[pos].opcode)(self, body[pos])
                return self.b.extract_element(value(), i32(0))
        finally:
            self.mask, self.reloading = saved, None

    def _reload_element(self, st, lane):
        """Lane `lane`'s element of a load of one element per lane at lane 0's address + lane *
        size (lanereloads), into its register (the reload's values)."""
        b = self.b
        t, items, size = access_elements(st, st.operands[0])
        first = b.extract_element(self.addresses(st.operands[1], space_of(st)), i32(0))
        at = b.add(first, b.mul(b.zext(lane, I64), i64(size)))
        self.write(items[0], self.splat(b.load(b.inttoptr(at, llvm_type(t).as_pointer()), align=size)), t)

    def _shared_offsets(self, op, space):
        """The lanes' <32 x i32> offsets in the shared window where a 32-bit register holds the
        address with no displacement (histogram's `atom.shared.add.u32 [%r22], 1`), else None.
        A loop over the lanes reads 4-byte offsets and adds the window's base: 7% less time per
        lane than 8-byte addresses in a C model of histogram's loop (0.48 against 0.52 ns)."""
        if space != "shared" or not isinstance(op, pir.Addr) or not isinstance(op.base, pir.Reg) or op.offset:
            return None
        if llvm_width(self._reg_type(op.base.name)) != 32:
            return None
        return self.read(op.base, "u32")

    def _from_lane_array(self, v):
        """lane -> that lane's element of vector v, from a stack copy."""
        elements = self.lane_array(v)
        return lambda lane: self.b.load(self.b.gep(elements, [lane]))

    @contextmanager
    def _each_lane_here(self, address_of, elem, name, unroll=None):
        """A loop over the lanes an access is for (_lanes), giving (lane, its element pointer
        address_of(lane)). It stays a loop: unrolled 32 times over, the slow paths of every
        access made most of a region's code (and compile time); `unroll` copies of a small
        body (an atomic's update) pay (histogram_shared_atomics 18.5-21 -> 16.3-18 ms at 4:
        the loop's count and test were half its instructions). And a scalar loop:
        vectorised, it became four masked scatters of eight lanes for layernorm's store of
        one lane (`if (lane == 0) mean[row] = m`); a loop over the mask's set bits instead
        made histogram's atomics, where every lane runs, 8% slower (the counted loop's lane
        test folds away there)."""
        b = self.b
        here = b.bitcast(self._lanes(), I32)
        with for_range(b, i32(0), i32(LANES), name) as lane:
            with b.if_then(b.trunc(b.lshr(here, lane), I1)):
                yield lane, b.inttoptr(address_of(lane), elem.as_pointer())
            latch = b.block
        copies = {"llvm.loop.unroll.count": unroll} if unroll else {"llvm.loop.unroll.disable": None}
        set_loop_hints(b.module, latch.terminator, {**copies, "llvm.loop.vectorize.enable": False})

    def lane_array(self, v):
        """Pointer to the elements of vector v in a stack slot, for a loop over the lanes: an
        element taken by a varying index is a store of the whole vector each time (eight
        256-bit stores per lane in histogram's atomics)."""
        slot = self._scratch(v.type)
        self.b.store(v, slot)
        return self.b.bitcast(slot, v.type.element.as_pointer())

    def _consecutive(self, addrs, size):
        """i1: every lane is here and lane l's address is lane 0's plus l * size."""
        b = self.b
        start = self.splat(b.extract_element(addrs, i32(0)))
        steps = vector_constant(I64, tuple(lane * size for lane in range(LANES)))
        return self._every_lane(b.icmp_unsigned("==", addrs, b.add(start, steps)))

    def flipped(self, op) -> bool:
        """Whether memory operand `op`'s address is computed from an xor (gather's `flipped`)."""
        if not isinstance(op, pir.Addr) or not isinstance(op.base, pir.Reg):
            return False
        return dataflow.computed_by(op.base.name, "xor", self.f.pfn.body, self._definitions())

    def _definitions(self) -> dict:
        """dataflow.definition_positions of the kernel's body, found once."""
        if self._defs is None:
            self._defs = self.f.analysed("definition_positions", lambda: dataflow.definition_positions(self.f.pfn.body))
        return self._defs

    def _xor_window(self, addrs, size):
        """(i1 holds, i64 start, i64 u): the 32 addresses are the elements of one window of 32
        from `start`, lane l's the window's element l ^ u (a butterfly's partners in one warp,
        bitonic sort's `data[i ^ j]` for j < 32, an xor-swizzled tile). The window is the
        aligned one around lane 0's address (an array from cudaMalloc is aligned, and a
        warp's indices start at a multiple of 32; the least of the 32 addresses, a reduction,
        cost as much as the access), u lane 0's element in it; the check is over every lane,
        so that a lane outside the mask holding another address sends the access lane by
        lane."""
        b = self.b
        shift = size.bit_length() - 1
        first = b.extract_element(addrs, i32(0))
        start = b.and_(first, i64(-LANES * size))
        u = b.lshr(b.sub(first, start), i64(shift))
        lanes = vector_constant(I64, tuple(range(LANES)))
        expected = b.add(self.splat(start), b.shl(b.xor(lanes, self.splat(u)), self.splat(i64(shift))))
        return self._reduce("and", b.icmp_unsigned("==", addrs, expected), I1), start, u

    def _permute_lanes(self, v, u):
        """Vector v with lane l holding v's lane l ^ u (u < 32): a fixed swap of lanes for each
        bit of u, chosen by that bit. (The permutation is its own inverse: a store permutes
        its values and mask by it too.)"""
        b = self.b
        for bit in range(LANES.bit_length() - 1):
            swapped = b.shuffle_vector(v, ir.Constant(v.type, None),
                                       vector_constant(I32, tuple(lane ^ (1 << bit) for lane in range(LANES))))
            on = b.icmp_unsigned("!=", b.and_(u, i64(1 << bit)), i64(0))
            v = b.select(on, swapped, v)
        return v

    def _alike(self, addrs):
        """i1: every lane is here and has lane 0's address."""
        b = self.b
        return self._every_lane(b.icmp_unsigned("==", addrs, self.splat(b.extract_element(addrs, i32(0)))))

    def _every_lane(self, holds):
        """i1: every lane is here (an access for all of them) and `holds` (<32 x i1>) for each."""
        b = self.b
        return b.and_(self._reduce("and", holds, I1), self._reduce("and", self._lanes(), I1))

    def _lanes(self):
        """The lanes an access is for: self.mask, or all of them (a recomputed definition)."""
        return self.mask if self.mask is not None else self._all_lanes()

    def _all_lanes(self):
        return ir.Constant(self._vec(I1), [1] * LANES)

    def _scratch(self, ty):
        with at_function_start(self.b):
            return self.b.alloca(ty)

