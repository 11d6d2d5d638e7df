"""How a block program (blockprograms.py) reaches memory: each access of the block's lanes as
the widest form its addresses' shape allows (one vector access where they are consecutive, an
interleaved one for k elements apart, one uniform access where all lanes read one address, a
gather or scatter otherwise, lane by lane where only a few lanes take part), stores held
back to be written together with their neighbours (flush_stores), loads prefetched for the
worker's next blocks (_prefetch_next_blocks: in kernels whose blocks pass few barriers, the
first load only), and in memory-bound loops, accesses prefetched for their next rounds
(_prefetch_next_rounds).

BlockMemory is a part of BlockProgram, which inherits it: its methods read the program's state
(its builder, the lanes' mask, the registers' shapes).
"""
from __future__ import annotations

from typing import NamedTuple

from llvmlite import ir

from ...ptx import ir as pir
from ..cpu import streamstores
from .. import abi
from ..analysis.dataflow import computed_by, definition_positions, loaded_from_memory
from ..irutil import (at_function_start, convert_bits, declare, either, field_ptr, for_each_set_bit, i32, i64,
                      intrinsic_suffix, load_field, masked_gather, masked_load, masked_store, masked_stores_slow,
                      narrow_gathers_as_words, prefetch_into_l2, private_store, register_address, some_lane,
                      span_inside, steps_far, vector_constant, words_holding)
from ..types import I1, I32, I64, llvm_width, space_of, width
from .blockloops import grid_strided, memory_bound, uniform_registers
from .blockops import Affine, and_scalar, register_part
from .warpruns import NotVectorisable

SPARSE = 8                # a gather or scatter for at most this many lanes goes lane by lane
MOST_RUNS = 4             # ... for at most this many runs of consecutive elements, run by run
ROUNDS_AHEAD = 4          # rounds of a loop ahead of which its accesses of global memory are prefetched
PREFETCH_SITES = 8        # loads of global memory per kernel prefetched for the worker's next blocks
                          # (and accesses prefetching their loops' next rounds)
ROUND_COUNTS = abi.FRAME_HEADER + 8 * PREFETCH_SITES   # the worker frame's two slots each of those loops' rounds
SHORT_BLOCK_SITES = 1     # ... in a kernel whose blocks pass few barriers
BLOCKS_AHEAD = 2          # ... that many blocks ahead
SAMPLE_LANES = 8          # ... where a load has no shape, every this many lanes' addresses


def _prefetch_span(b, address, nbytes, write=False):
    """A prefetch into L2 of every line of the `nbytes` from `address`: one each 64 bytes from
    its start, and its last byte's."""
    prefetch_into_l2(b, address, sorted(set(range(0, nbytes, 64)) | {nbytes - 1}), write)


def _reads_ctaid(st) -> bool:
    return any(isinstance(op, pir.SpecialReg) and op.name == "ctaid" for op in st.operands)


def _address_part(st):
    """(register, offset) of an instruction's address `[%r + offset]`, else None."""
    return register_part(next((op for op in st.operands if isinstance(op, pir.Addr)), None))


def elements_apart(shape, size) -> int:
    """How many elements of `size` bytes one lane's address is from the next's (0: not a
    whole number, or no shape)."""
    return shape.stride // size if shape is not None and shape.stride % size == 0 else 0


def concat(b, a, c):
    """a's elements, then c's (c as wide as a, or a multiple of 32 narrower: padded)."""
    n, m = a.type.count, c.type.count
    if m < n:
        c = b.shuffle_vector(c, ir.Constant(c.type, None), ir.Constant(ir.VectorType(I32, n), list(range(m)) + [m] * (n - m)))
    return b.shuffle_vector(a, c, ir.Constant(ir.VectorType(I32, n + m), list(range(n)) + [n + j for j in range(m)]))


class WaitingStores(NamedTuple):
    """Interleaved stores waiting for the rest of their group (BlockMemory._store)."""
    key: tuple             # _group_key's: the address register at its definition, stride, size
    parts: dict            # {offset: (addresses, shape, value, mask)}
    shape: Affine          # the register's shape, held while the group lives (its id is in the key)
    space: str             # the state space the stores name ('' generic)


class RoundSite(NamedTuple):
    """An access prefetching its loop's next rounds (BlockMemory._prefetch_next_rounds): its
    stack slots, and where the worker's frame counts its loop's rounds."""
    last: ir.Value         # i64*: its address in the last round (0: none yet in this pass)
    step: ir.Value         # i64*: how far its address moved from round to round
    frame_offset: int      # the worker frame's i64 slots: rounds of this pass so far, then the last pass's


class BlockMemory:
    """A block program's memory accesses (see the module docstring): a part of BlockProgram."""

    def access(self, st, addr):
        """(i64 address vector, Affine of it or None) of a memory operand."""
        b = self.b
        space = "shared" if "shared" in st.mods else "global"
        self.in_shared = space == "shared"
        self.access_space = space_of(st)
        self._window_key = None
        if not isinstance(addr, pir.Addr):
            addr = pir.Addr(addr, 0)
        if isinstance(addr.base, pir.Sym):
            if space == "shared" or addr.base.name in self.shared:
                base = b.add(self.shared_base, self._shared_offset(addr.base.name))
            else:
                base = self.variable_address(addr.base.name)
            scalar = b.add(base, i64(addr.offset))
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
            shape = self._widened_address(shape, vec, bits)
        if space == "shared":
            self.window_access(addr)
            vec = b.add(vec, self.splat(self.shared_base))
            if shape is not None:
                shape = Affine(b.add(shape.base, self.shared_base), shape.stride, shape.exact)
        return vec, shape

    def _widened_address(self, shape, vec, bits):
        """The shape of a `bits`-wide address register widened to 64 bits as a GPU does (zero-
        extended): exact where no lane's value wraps past 2^bits on the way from lane 0's.
        Where the ramp does cross 0 (the lanes below it hold offsets a GPU would read 4 GB
        away), lane 0's value sign-extended is the base of the lanes past the crossing, the
        shape of every lane the mask runs where it runs none below it: Hillis and Steele's
        `buf[t - offset]` under `t >= offset`, whose warp 0 went through gathers at every
        other step (where the buffer read is the first, at offset 0), 40% of the scan's time.
        `vec`: the lanes' addresses, each zero-extended."""
        unsigned = self.widened(shape, "u" + str(bits), 64)
        if unsigned.exact is None or shape.stride <= 0 or self.mask is None:
            return unsigned
        b = self.b
        signed = self.widened(shape, "s" + str(bits), 64)
        below = b.icmp_unsigned(">=", vec, self.splat(i64(1 << (bits - 1))))
        lanes = ir.IntType(self.lanes)
        none_below = b.icmp_unsigned("==", b.bitcast(b.and_(below, self.mask), lanes), ir.Constant(lanes, 0))
        past = b.and_(signed.exact, none_below)
        return Affine(b.select(unsigned.exact, unsigned.base, signed.base), shape.stride,
                      b.or_(unsigned.exact, past), shape.align)

    def variable_address(self, name) -> ir.Value:
        """i64: the address of module variable `name` (a `__constant__` filter, a `__device__`
        table), declared in the program's module under the name the kernel's object gives
        it; the runtime links both to the module's copy (LoadedObject's symbols)."""
        g = self.layout.globals.get(name)
        if g is None:
            raise NotVectorisable(f"symbol {name}")
        declared = self.mod.globals.get(g.name)
        if declared is None:
            declared = ir.GlobalVariable(self.mod, g.value_type, name=g.name)     # no initialiser: a declaration
            declared.align = g.align
        return self.b.ptrtoint(declared, I64)

    def load(self, addrs, shape, elem, size, part=None):
        """The lanes' elements of type `elem` at `addrs` (under self.mask); one of a group of
        interleaved loads from one register (`part`: the register and the offset) takes its
        elements from the group's span, loaded once (_load_group)."""
        k = elements_apart(shape, size)
        if self.in_shared and k == 1:
            return self.window_load(shape, elem, size, lambda: self._memory(addrs, shape, elem, size, None))
        if not self.in_shared and shape is not None:
            span = self._span_bytes(shape, size)
            self._prefetch_next_blocks(shape.base, span)
            self._prefetch_next_rounds(shape.base, span)
        elif not self.in_shared:
            self._prefetch_lanes_next_blocks(addrs)
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

    def _prefetch_next_blocks(self, base, nbytes):
        """Where a load of global memory runs once per warp and block (not in a loop), a
        prefetch of where it will read BLOCKS_AHEAD blocks later, by the step its warp 0's
        address took since the worker's last block (kept in the worker's frame). A worker
        runs a chunk of consecutive blocks, whose loads step alike (reduce_tree's 1 KB per
        block), but each block's tree of barriers between its loads left the hardware's
        prefetchers behind: its loads waited for memory, half of its time. A step measured
        across a chunk's end or another launch is wrong once: a prefetch does not fault.
        In kernels whose blocks pass few barriers (not long_blocks) only the first such load
        is prefetched (SHORT_BLOCK_SITES): a 2-D stencil's tile with its halo reads the first
        line of the next block's rows, which no hardware prefetcher had fetched on a Zen 3
        (each row a stream of its own, a line a block): stencil5_smem_16x16 3.5-6.9 ->
        2.4-3.3x C in two A/Bs, the 32x8 one 2.1-3.3 -> 1.7-2.3x, with one prefetch per warp
        (all its loads prefetched: no faster). An earlier machine's hardware kept up there,
        and the prefetches of every load, a few instructions per warp and load, had cost
        that stencil 20-30%: one load's cost less."""
        pos = self.position
        if pos is None or self._in_loop(pos):
            return
        step = self._block_step(pos, base, "shaped", PREFETCH_SITES if self.long_blocks else SHORT_BLOCK_SITES)
        if step is not None:
            _prefetch_span(self.b, self.b.add(base, self.b.mul(step, i64(BLOCKS_AHEAD))), nbytes)

    def _prefetch_lanes_next_blocks(self, addrs):
        """Where a load of global memory has no shape (a tile and its halo loaded through `t /
        W`, `t % W` in a loop: two or three runs of a row each) in a kernel whose blocks pass
        few barriers, a prefetch of where every SAMPLE_LANES-th lane and the last will read
        BLOCKS_AHEAD blocks later, by the step warp 0's lane 0 took at its first pass in the
        worker's last block: a 2-D convolution's tile rows, each a stream of a line a block,
        were read cold on a Zen 3 as the 2-D stencil's were (_prefetch_next_blocks). Lanes a
        sample apart are at most 64 bytes apart in a run of consecutive elements, so every
        line of the run is prefetched; a step that is no block's (a loop whose rounds differ
        from block to block) only prefetches lines the block does not read: no fault. Not
        where the address comes from loaded values (_indexed_by_loads)."""
        pos = self.position
        if pos is None or self.long_blocks or self._indexed_by_loads(pos):
            return
        b = self.b
        step = self._block_step(pos, b.extract_element(addrs, i32(0)), "lanes", PREFETCH_SITES)
        if step is None:
            return
        ahead = b.mul(step, i64(BLOCKS_AHEAD))
        for lane in sorted(set(range(0, self.lanes, SAMPLE_LANES)) | {self.lanes - 1}):
            prefetch_into_l2(b, b.add(b.extract_element(addrs, i32(lane)), ahead), [0])

    def _indexed_by_loads(self, pos) -> bool:
        """Whether the address of the access at body position `pos` is computed from values
        loaded from memory (CSR's `x[cols[j]]`): where it will be in the next blocks is no step
        from where it is."""
        if pos not in self._indexed:          # (asked by the prefetch and by the access, once each)
            register = self._address_register(pos)
            self._indexed[pos] = register is not None and loaded_from_memory(register, self.pfn.body,
                                                                             self._definitions())
        return self._indexed[pos]

    def _address_register(self, pos):
        """The name of the register the access at body position `pos` addresses through, else None."""
        addr = next((op for op in self.pfn.body[pos].operands if isinstance(op, pir.Addr)), None)
        return addr.base.name if addr is not None and isinstance(addr.base, pir.Reg) else None

    def _definitions(self) -> dict:
        """dataflow.definition_positions of the body, made once."""
        if self._definition_positions is None:
            self._definition_positions = definition_positions(self.pfn.body)
        return self._definition_positions

    def _block_step(self, pos, address, kind, sites):
        """i64: how far the access at body position `pos` moved since the worker's last block,
        measured where warp 0 first reaches it in each block (kept in the worker's frame, a
        slot for each of the first `sites` positions of this `kind` asking, PREFETCH_SITES
        in all); None past them."""
        if pos not in self._prefetched:
            taken = sum(entry[0] == kind for entry in self._prefetched.values())
            if taken >= sites or len(self._prefetched) >= PREFETCH_SITES:
                return None
            with at_function_start(self.b):
                step = self.b.alloca(I64, name=f"block.step{pos}")
                self.b.store(i64(0), step)
                seen = self.b.alloca(I1, name=f"block.seen{pos}")
                self.b.store(ir.Constant(I1, 0), seen)
            self._prefetched[pos] = (kind, abi.FRAME_HEADER + 8 * len(self._prefetched), step, seen)
        _, offset, step, seen = self._prefetched[pos]
        b = self.b
        first = b.not_(b.load(seen))
        if self.warp is not None:
            first = b.and_(first, b.icmp_unsigned("==", self.warp, i32(0)))
        with b.if_then(first):
            last = field_ptr(b, self.ws, offset, I64)
            b.store(b.sub(address, b.load(last)), step)
            b.store(address, last)
            b.store(ir.Constant(I1, 1), seen)
        return b.load(step)

    def _prefetch_next_rounds(self, base, nbytes, write=False):
        """Where an access of global memory is in a memory-bound loop, a prefetch of where it
        will be ROUNDS_AHEAD rounds later (for writing where it is a store), by the step its
        address took since the last round (stack slots per access). A loop within a stretch
        runs one warp's rounds one after another, so each pass measures it; a loop around
        barriers runs every warp in each round, so warp 0 measures it for all. A 3-D stencil's
        march along z steps by a plane (256 KB), which no hardware prefetcher follows:
        stencil7_smem_zloop 8.6-8.9 -> 4.0-5.2x C (layernorm_block's rows 1.6-2x faster on one
        worker; with two, within the noise).

        Not where every block reads the same addresses (the address does not come from
        %ctaid: layernorm's `weight[i]`): after the first block they are in the caches, and
        ahead of the loop's last rounds lies past the array. And where the rounds step
        irutil.FAR_STEP bytes or more (a grid's row, a plane), only while the loop will still run
        ROUNDS_AHEAD more rounds by the count of its last pass (_rounds_left): such a loop
        sweeps its array in each pass, so ahead of its last rounds lies past the array's end;
        a loop of shorter steps covers a part, past which its neighbours (the next warps and
        blocks) read (scan's adding of the block totals, two rounds a warp, 25% slower
        without those prefetches). Past an array, pages are often not present (the rest of a
        small allocation's slab, a guard), and a prefetch of an address no page maps walks
        the page tables every time, the walk never cached. On a Zen (1) in a virtual machine,
        a walk each: layernorm_block's rows of three rounds spent two thirds of their time on
        the prefetches of its 3 KB weight and bias (41 ms; none of those loops' prefetches:
        14), reduce_shfl half of its on the four rounds of its grid-stride loop that
        prefetched past its 64 MB input."""
        pos = self.position
        if pos is None or not self._memory_bound_loop(pos) or not self._block_dependent(pos):
            return
        if pos not in self._round_steps and self._near_a_prefetched_site(pos):
            return
        in_lane_loop = any(head <= pos <= back for head, back in self.loops.items())
        if pos not in self._round_steps:
            if len(self._round_steps) >= PREFETCH_SITES:
                return
            with at_function_start(self.b):
                last, step = (self.b.alloca(I64, name=f"round.{what}{pos}") for what in ("last", "step"))
                for slot in (last, step):
                    self.b.store(i64(0), slot)
            site = RoundSite(last, step, ROUND_COUNTS + 16 * len(self._round_steps))
            self._round_steps[pos] = site
            if not in_lane_loop:           # a loop around barriers: a pass a block
                with at_function_start(self.b):
                    self._close_pass(site)
        site = self._round_steps[pos]
        b = self.b
        measures = (ir.Constant(I1, 1) if in_lane_loop or self.warp is None
                    else b.icmp_unsigned("==", self.warp, i32(0)))
        rounds = field_ptr(b, self.ws, site.frame_offset, I64)
        with b.if_then(measures):
            before = b.load(site.last)
            b.store(b.select(b.icmp_unsigned("==", before, i64(0)), b.load(site.step), b.sub(base, before)), site.step)
            b.store(base, site.last)
            b.store(b.add(b.load(rounds), i64(1)), rounds)
        round_step = b.load(site.step)
        ahead = b.add(base, b.mul(round_step, i64(ROUNDS_AHEAD)))
        with b.if_then(b.or_(b.not_(steps_far(b, round_step)), self._rounds_left(site))):
            _prefetch_span(b, ahead, nbytes, write)
            if not write and self.group == 1:      # (a group's turns read the rows whole: blockgroups.py)
                self._prefetch_next_block_round(pos, base, ahead, round_step, nbytes)

    def _rounds_left(self, site):
        """i1: whether the loop of a prefetching `site` will run ROUNDS_AHEAD rounds past this
        one, were this pass as long as the worker's last (_close_pass; 0, none counted yet,
        answers yes)."""
        b = self.b
        last_pass = b.load(field_ptr(b, self.ws, site.frame_offset + 8, I64))
        rounds = b.load(field_ptr(b, self.ws, site.frame_offset, I64))
        reaches = b.icmp_unsigned("<=", b.add(rounds, i64(ROUNDS_AHEAD)), last_pass)
        return b.or_(reaches, b.icmp_unsigned("==", last_pass, i64(0)))

    def _block_dependent(self, pos) -> bool:
        """Whether the address of the access at body position `pos` is computed from %ctaid
        (each block reads its own addresses)."""
        register = self._address_register(pos)
        return register is not None and computed_by(register, _reads_ctaid, self.pfn.body, self._definitions())

    def _close_pass(self, site):
        """Here, where a pass of a prefetching site's loop starts (a loop within a stretch: its
        entry, each warp's pass; a loop around barriers: the block's start): the rounds the
        worker counted since the last start become its last pass's (where it counted any),
        and the count starts again."""
        b = self.b
        rounds = field_ptr(b, self.ws, site.frame_offset, I64)
        last_pass = field_ptr(b, self.ws, site.frame_offset + 8, I64)
        counted = b.load(rounds)
        b.store(b.select(b.icmp_unsigned("==", counted, i64(0)), b.load(last_pass), counted), last_pass)
        b.store(i64(0), rounds)

    def _near_a_prefetched_site(self, pos) -> bool:
        """Whether the access at `pos` reads through a register written once in the kernel
        that an access prefetching its next rounds reads too, less than a line from it: that
        access's prefetches fetch its lines (but for a line at the edge of the span, which the
        neighbouring warps' prefetch). A stencil's `in[i - 1]`, `in[i]`, `in[i + 1]` (nvcc's
        `[%rd20+-4]`, `[%rd20]`, `[%rd20+4]`) took three of the PREFETCH_SITES with the same
        lines, and the planes above and below went without: stencil7_zloop 7.4-8.8 -> 5.6-7.2
        ms, stencil7_smem_zloop 8.9-9.6 -> 7.9-8.5, layernorm_block 1.9-2.4 -> 1.5-2.0 (two
        workers, two A/B pairs each)."""
        here = _address_part(self.pfn.body[pos])
        if here is None:
            return False
        if len(self._definitions().get(here[0], ())) != 1:
            return False
        return any(there is not None and there[0] == here[0] and abs(there[1] - here[1]) < 64
                   for there in (_address_part(self.pfn.body[p]) for p in self._round_steps))

    def forget_round_addresses(self, entry, head, back):
        """At the entry (`entry`, a block ending in its branch to the loop) of the loop within
        a stretch from `head` to `back`: its accesses' last addresses forgotten, their steps
        kept. A warp's first round then steps as the warp before it did, not from where that
        warp's last round was: a block-stride loop of two rounds (scan's adding of the block
        totals) prefetched half its rounds behind itself, a block back."""
        sites = [site for pos, site in self._round_steps.items() if head <= pos <= back]
        if not sites:
            return
        b = self.b
        with b.goto_block(entry):
            b.position_before(entry.terminator)
            for site in sites:
                b.store(i64(0), site.last)
                self._close_pass(site)

    def _prefetch_next_block_round(self, pos, base, ahead, step, nbytes):
        """Where a load's rounds step FAR_STEP bytes or more (a 3-D stencil's march along z, a
        plane a round; a grid-stride loop, the grid's row), a prefetch of where the worker's
        next block will read in that round as well, by the step warp 0's first pass took from
        block to block (_block_step). A block's part of a row is a few lines (a 32-wide block's,
        128 bytes of a 1 KB row), each round a new row: the memory serves rows of such
        fragments far slower than a stream, and a C model of the GPU's order (warp after warp,
        block after block) ran 3-3.5x the time of the plane-by-plane loop on a Zen 5. Fetching
        the next block's fragment with this one's leaves it in the caches for the next block:
        the model 56-65 -> 28-32 ms; stencil7_zloop 2.57-2.72 -> 2.00-2.55x C in two A B B A
        runs, stencil7_smem_zloop 2.30-2.61 -> 1.83-2.52x. Where rounds step less, the hardware's
        prefetchers follow (softmax_warp's rows ran 15-25% slower with it). Not in a program of
        blocks in groups, whose turns read the rows' fragments together (blockgroups.py): there
        the next group's rows, read hundreds of rounds later, cost stencil7_zloop 10-25% on one
        worker."""
        b = self.b
        block_step = self._block_step(pos, base, "rounds", PREFETCH_SITES)
        if block_step is None:
            return
        with b.if_then(steps_far(b, step)):
            _prefetch_span(b, b.add(ahead, block_step), nbytes)

    def _memory_bound_loop(self, pos) -> bool:
        """Whether `pos` is in a memory-bound loop (blockloops.memory_bound, counted in its
        outermost loop: a tiled GEMM, whose loop over tiles holds a loop loading them, ran 13%
        slower with them prefetched) that is not a grid-stride loop run by each warp to its
        end: there the block's next warps read the lines beside a warp's, which the hardware
        fetches with them (a warp-shuffle reduction ran 15-20% slower). A grid-stride loop in
        turns (blockloops.turned_loops) is prefetched: its warps read a row together, and the
        next rows are a grid apart (reduce_shfl 2.9 -> 1.9 ms; in turns without prefetches, or
        prefetched without turns, no faster)."""
        spans = [(head, back) for loops in (self.loops, self.barrier_loops) for head, back in loops.items()
                 if head <= pos <= back]
        if not spans:
            return False
        if self._bound_loops is None:         # (once per program: an access asks for each of its loops)
            strided, uniform = grid_strided(self.pfn), uniform_registers(self.pfn)
            self._bound_loops = {(head, back): (back not in strided or head in self.turned)
                                 and memory_bound(self.pfn.body, head, back, uniform)
                                 for loops in (self.loops, self.barrier_loops) for head, back in loops.items()}
        return self._bound_loops[max(spans, key=lambda span: span[1] - span[0])]

    def _span_bytes(self, shape, size) -> int:
        """The bytes a warp's access of `size`-byte elements spans (at most 512 prefetched)."""
        return min(max(abs(shape.stride) * self.lanes, size), 512)

    def _in_loop(self, pos) -> bool:
        return any(head <= pos <= back for loops in (self.loops, self.barrier_loops) for head, back in loops.items())

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
        ok = and_scalar(b, shape.exact, ok)
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
        """A store (_store), and a window of shared memory it writes with it (sharedwindows.py)."""
        window = self.window_store_target(shape, size)
        self._store(addrs, shape, value, size, part)
        if window is not None:
            self.window_stored(window, shape, value)

    def _store(self, addrs, shape, value, size, part=None):
        """A store; one of a group of interleaved stores waits for the others (`part`: the
        address register and the instruction's offset) so that the whole group is one
        store of consecutive elements: four masked stores each writing every fourth element
        (scan's `out[4 * t + k]`) were a fifth of its time."""
        self._spans_loaded = {}          # (what the group loaded may change)
        k = elements_apart(shape, size)
        # (not a store that may stream past the caches: fetching its line to own it is the
        # transfer a streaming store saves; layernorm_block's output 1.47-1.85 -> 1.33-1.37 ms)
        if not self.in_shared and shape is not None and not self.streaming:
            self._prefetch_next_rounds(shape.base, self._span_bytes(shape, size), write=True)
        if part is None or not 2 <= k <= 8:
            self.flush_stores()
            return self._memory(addrs, shape, value.type.element, size, value)
        register, offset = part
        key, defined = self._group_key(register, shape, size)
        if self._pending is not None and (self._pending.key != key or offset in self._pending.parts):
            self.flush_stores()
        if self._pending is None:
            self._pending = WaitingStores(key, {}, defined, self.access_space)
        parts = self._pending.parts
        parts[offset] = (addrs, shape, value, self.mask)
        low = min(parts)
        if sorted(parts) == [low + j * size for j in range(k)]:
            self._store_group(parts, k, size)
            self._pending = None
        return None

    def passes_waiting_stores(self, st) -> bool:
        """Whether `st` may go before the stores waiting for their group: a load of one state
        space named beside stores of another, which it cannot read (scan's `out[a]`, `out[b]`
        under guards of their own, a shared load between them, were two masked stores each
        writing every other element: a fifth of the block program's time)."""
        if self._pending is None:
            return True
        waiting, space = self._pending.space, space_of(st)
        return st.opcode == "ld" and "" not in (waiting, space) and space != waiting

    def prepare_store(self):
        """Before a store made outside _store (a warp matrix instruction's rows, warpmatrix.py):
        the stores waiting for their group made, and what groups of loads and windows hold
        of memory forgotten."""
        self._spans_loaded = {}
        self.flush_stores()
        self.drop_windows()

    def flush_stores(self):
        """Make the stores that wait for the rest of their group, one by one."""
        if self._pending is None:
            return
        parts, self._pending = self._pending.parts, None
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
        # (parts of one size may differ in type: a float beside a ballot's bits, as bits)
        values = [convert_bits(b, v, order[0][2].type.element) for _, _, v, _ in order]
        joined = values[0]
        for v in values[1:]:             # <32 x T> ... -> <32k x T>
            joined = concat(b, joined, v)
        interleaved = b.shuffle_vector(joined, ir.Constant(joined.type, None), ir.Constant(
            ir.VectorType(I32, k * self.lanes), [(p % k) * self.lanes + p // k for p in range(k * self.lanes)]))
        base = order[0][1].base
        masks = [m for _, _, _, m in order if m is not None]

        def whole():
            self._whole_store(interleaved, base, size)

        # (the parts' addresses come from one register: one shape, one `exact`)
        every = order[0][1].exact
        if not masks and every is None:
            return whole()
        for m in masks:
            every = and_scalar(b, every, self._every_lane(m))
        with b.if_else(every) as (then, otherwise):
            with then:
                whole()
            with otherwise:
                for addrs, shape, value, mask in order:
                    self.mask = mask
                    self._memory(addrs, shape, value.type.element, size, value)
        self.mask = kept

    def _memory(self, addrs, shape, elem, size, value):
        k = elements_apart(shape, size)
        if shape is None or not (shape.stride == 0 or 1 <= k <= 8):
            # (addresses of a known stride are not consecutive: not looked at, as scan's
            # tree steps, lanes 16 to 256 elements apart, were at each of its 18 steps; nor
            # are addresses from loaded indices, as CSR's `x[cols[j]]`)
            look = shape is None and (self.position is None or not self._indexed_by_loads(self.position))
            return self._lanes_apart(addrs, elem, size, value, look=look)
        fast = (lambda: self._uniform(shape.base, elem, size, value)) if shape.stride == 0 else \
            (lambda: self._interleaved(shape.base, k, elem, size, value))
        if shape.exact is None:
            return fast()
        # (where the shape fails, seldom: a widened index that wraps, the lanes as they are;
        # looking at them there too made sgemm_tiled_32x8's unrolled loop 20% slower)
        return self._either(shape.exact, fast, lambda: self._lanes_apart(addrs, elem, size, value, look=False))

    def _all_lanes(self):
        return ir.Constant(ir.VectorType(I1, self.lanes), [1] * self.lanes)

    def _either(self, cond, then, otherwise):
        """then() where `cond` holds, else otherwise(): the value they give (a load's), or
        None (a store's)."""
        return either(self.b, cond, then, otherwise)

    def _every_lane(self, mask=None):
        """i1: every lane is in `mask` (by default self.mask, which is not None)."""
        bits = self.b.bitcast(self.mask if mask is None else mask, ir.IntType(self.lanes))
        return self.b.icmp_unsigned("==", bits, ir.Constant(bits.type, (1 << self.lanes) - 1))

    def _some_lane(self, mask):
        """i1: some lane is in `mask`."""
        return some_lane(self.b, mask)

    def _on_mask(self, whole, part):
        """whole() where every lane runs (at once when self.mask is None), else part(); a
        load's value either way. The common case is a full block, where a bounds check holds
        in every lane: `whole` takes constant masks, which cost nothing to make."""
        if self.mask is None:
            return whole()
        return self._either(self._every_lane(), whole, part)

    def _lanes_apart(self, addrs, elem, size, value, look=True):
        """A gather or scatter, or where at most SPARSE lanes run (a lane per warp: `lane ==
        31`, `warp == 0`), those lanes one by one: a gather or scatter costs as much for one
        lane as for all of its register's. Where more lanes run, the addresses are first
        looked at (_runs_or_gathered), if `look`."""
        def gathered():
            return self.gather_scatter(addrs, elem, size, value)

        def looked():
            return self._runs_or_gathered(addrs, elem, size, value)
        if self.mask is None:
            return looked() if look else gathered()
        many = looked if look else gathered
        b = self.b
        bits = b.bitcast(self.mask, ir.IntType(self.lanes))
        popcount = declare(b.module, f"llvm.ctpop.i{self.lanes}", bits.type, [bits.type])
        few = b.icmp_unsigned("<=", b.call(popcount, [bits]), ir.Constant(bits.type, SPARSE))
        return self._either(few, lambda: self._one_by_one(bits, addrs, elem, size, value), many)

    def _runs_or_gathered(self, addrs, elem, size, value):
        """The lanes' accesses as the runs of consecutive elements their addresses turn out to
        be when it runs: one vector access where they are one run and every lane takes part,
        a masked one per run where they are at most MOST_RUNS, else a gather or scatter. An
        index chosen by a select (a stencil's `x > 0 ? i - 1 : i`, or nvcc's `i + (x < nx -
        1)`) has no shape, but only a block at the grid's edge makes it anything but
        consecutive: gathered, such a z-march ran 7-9x the time of its warp regions', which
        look at the addresses so (regionmemory.gather). A tile's rows with their halo (`t /
        W`, `t % W`) or a padded matrix's lie in a vector of lanes as two or three runs."""
        b = self.b
        lanes = ir.IntType(self.lanes)
        every = ir.Constant(lanes, (1 << self.lanes) - 1)
        active = every if self.mask is None else b.bitcast(self.mask, lanes)
        behind = b.shuffle_vector(addrs, ir.Constant(addrs.type, None),
                                  ir.Constant(ir.VectorType(I32, self.lanes), [0] + list(range(self.lanes - 1))))
        follows = b.bitcast(b.icmp_unsigned("==", addrs, b.add(behind, self.splat(i64(size)))), lanes)
        # a lane starts a run unless the lane below it takes part and its element is just below
        starts = b.and_(active, b.not_(b.and_(follows, b.shl(active, ir.Constant(lanes, 1)))))
        every_lane = None if self.mask is None else self._every_lane()

        def with_every_lane(cond):          # (cond, and every lane takes part)
            return cond if every_lane is None else b.and_(cond, every_lane)
        one_run = with_every_lane(b.icmp_unsigned("==", starts, ir.Constant(lanes, 1)))
        count = b.call(declare(b.module, f"llvm.ctpop.i{self.lanes}", lanes, [lanes]), [starts])
        few = b.icmp_unsigned("<=", count, ir.Constant(lanes, self._most_runs(value)))

        def whole():
            first = b.extract_element(addrs, i32(0))
            if value is None:
                return self._span_load(first, 1, elem, size)
            self._whole_store(value, first, size)
            return None

        def by_runs():
            two = with_every_lane(b.icmp_unsigned("==", count, ir.Constant(lanes, 2)))
            return self._either(two, lambda: self._two_runs(addrs, starts, elem, size, value),
                                lambda: self._run_by_run(addrs, starts, active, elem, size, value))
        return self._either(one_run, whole, lambda: self._either(
            few, by_runs, lambda: self.gather_scatter(addrs, elem, size, value)))

    def _two_runs(self, addrs, starts, elem, size, value):
        """Every lane's access where they are two runs of consecutive elements (`starts`: lane
        0 and the second run's first lane), as two masked accesses without a loop: each run's
        base (where lane 0's element would be if the run began there) is alike in its lanes,
        so lane 0 gives the first's and the last lane the second's. A tile's rows with their
        halo (W = 18, 20, 34 for 16 or 32 lanes) are mostly two runs a vector; run by run, the
        loop took each base out of the vector through the stack, and conv2d_tiled's tile load
        waited on it (one worker: 44-48 -> 33 ms, env-switched)."""
        b = self.b
        lanes = starts.type
        second = b.and_(starts, b.sub(starts, ir.Constant(lanes, 1)))     # the second run's first lane
        before = b.bitcast(b.sub(second, ir.Constant(lanes, 1)), ir.VectorType(I1, self.lanes))
        after = b.not_(before)
        bases = b.sub(addrs, ir.Constant(addrs.type, [t * size for t in range(self.lanes)]))
        low = self._spread_access(b.extract_element(bases, i32(0)), 1, elem, size, value, before)
        high = self._spread_access(b.extract_element(bases, i32(self.lanes - 1)), 1, elem, size, value, after)
        return None if value is not None else b.select(before, low, high)

    def _most_runs(self, value) -> int:
        """How many runs of consecutive elements are accessed run by run rather than gathered
        or scattered: a masked access costs several plain ones where masked stores are slow
        (a Zen 3's: a store to global memory, the shared memory's blended instead)."""
        return 2 if value is not None and not self.in_shared and masked_stores_slow() else MOST_RUNS

    def _run_by_run(self, addrs, starts, active, elem, size, value):
        """One masked access per run of consecutive elements, each from where lane 0's element
        would be if its run began there; the lanes of `starts` begin the runs."""
        b = self.b
        lanes = starts.type
        got = None if value is not None else self.scratch(self._vec(elem), "runs.data")
        with for_each_set_bit(b, starts, "run") as lane:
            at = b.zext(lane, lanes) if lanes.width > 32 else b.trunc(lane, lanes) if lanes.width < 32 else lane
            first = b.shl(ir.Constant(lanes, 1), at)
            later = b.and_(starts, b.neg(b.shl(first, ir.Constant(lanes, 1))))
            # the run reaches up to the next run's first lane (lowest of `later`), or the top
            run = b.and_(b.sub(b.and_(later, b.neg(later)), first), active)
            mask = b.bitcast(run, ir.VectorType(I1, self.lanes))
            base = b.sub(b.extract_element(addrs, lane), b.mul(b.zext(lane, I64), i64(size)))
            part = self._spread_access(base, 1, elem, size, value, mask)
            if got is not None:
                b.store(b.select(mask, part, b.load(got)), got)
        return None if got is None else b.load(got)

    def _one_by_one(self, bits, addrs, elem, size, value):
        """The lanes of `bits` one at a time, their addresses (and a store's values) through
        arrays on the stack. A load's elements are blended into a vector, not stored beside
        each other and read back as one: that wide read of narrow stores waits for them to
        reach the cache (no store forwarding), ~15 cycles, which made a Blelloch scan's steps
        of four lanes or fewer as costly as its steps of 256."""
        b = self.b
        vec = self._vec(elem)
        where = self.scratch(ir.ArrayType(I64, self.lanes), "lane.addrs")
        b.store(addrs, b.bitcast(where, addrs.type.as_pointer()))
        if value is not None:
            data = self.scratch(ir.ArrayType(elem, self.lanes), "lane.data")
            b.store(value, b.bitcast(data, vec.as_pointer()))
        else:
            got = self.scratch(vec, "lane.got")          # (a vector slot: promoted to a register)
            b.store(ir.Constant(vec, None), got)
            ramp = ir.Constant(ir.VectorType(I32, self.lanes), list(range(self.lanes)))
        with for_each_set_bit(b, bits, "lane") as lane:
            ptr = b.inttoptr(b.load(b.gep(where, [i32(0), lane])), elem.as_pointer())
            if value is None:
                this = b.icmp_unsigned("==", ramp, self.splat(lane))
                b.store(b.select(this, self.splat(b.load(ptr, align=size)), b.load(got)), got)
            else:
                b.store(b.load(b.gep(data, [i32(0), lane])), ptr, align=size)
        return b.load(got) if value is None else None

    def forget_loaded(self):
        """What groups of loads took may have changed (a fence: other blocks' stores)."""
        self._spans_loaded = {}

    def each_lane_update(self, addrs, elem, values, update):
        """For each lane of self.mask, lowest first: update(pointer to its element, [its
        values]) -> the element's old value (an atomic of the block's shared memory, which
        only this worker touches, as a plain read and write); the lanes' old values."""
        b = self.b
        self._spans_loaded = {}          # (what a group of loads took may change, as at a store)
        vec = self._vec(elem)
        where = self.scratch(ir.ArrayType(I64, self.lanes), "atom.addrs")
        b.store(addrs, b.bitcast(where, addrs.type.as_pointer()))
        operands = []
        for k, v in enumerate(values):
            slot = self.scratch(ir.ArrayType(elem, self.lanes), f"atom.operand{k}")
            b.store(v, b.bitcast(slot, vec.as_pointer()))
            operands.append(slot)
        olds = self.scratch(ir.ArrayType(elem, self.lanes), "atom.old")
        mask = self._all_lanes() if self.mask is None else self.mask
        with for_each_set_bit(b, b.bitcast(mask, ir.IntType(self.lanes)), "atom.lane") as lane:
            ptr = b.inttoptr(b.load(b.gep(where, [i32(0), lane])), elem.as_pointer())
            old = update(ptr, [b.load(b.gep(slot, [i32(0), lane])) for slot in operands])
            b.store(old, b.gep(olds, [i32(0), lane]))
        return b.load(b.bitcast(olds, vec.as_pointer()))

    def scratch(self, ty, name):
        with at_function_start(self.b):
            slot = self.b.alloca(ty, name=name)
        slot.align = 64
        return slot

    def gather_scatter(self, addrs, elem, size, value):
        b = self.b
        mask = self.mask if self.mask is not None else self._all_lanes()
        if value is None:
            return masked_gather(b, self._off_lanes_elsewhere(addrs), elem, size, self._all_lanes())
        if self.in_shared and narrow_gathers_as_words(elem) and self.lanes & (self.lanes - 1) == 0:
            return self._either(self._own_words(addrs, size, mask),
                                lambda: self._merge_into_words(addrs, elem, value, mask),
                                lambda: self._scatter(addrs, elem, size, value, mask))
        return self._scatter(addrs, elem, size, value, mask)

    def _scatter(self, addrs, elem, size, value, mask):
        b = self.b
        vec = self._vec(elem)
        ptrs = b.inttoptr(addrs, ir.VectorType(elem.as_pointer(), self.lanes))
        suffix = intrinsic_suffix(elem)
        fn = declare(b.module, f"llvm.masked.scatter.v{self.lanes}{suffix}.v{self.lanes}p0", ir.VoidType(),
                     [vec, ptrs.type, I32, mask.type])
        b.call(fn, [value, ptrs, i32(size), mask])
        return None

    def _own_words(self, addrs, size, mask):
        """i1: each lane of `mask` stores a naturally aligned element to a 32-bit word no
        other lane's element is in. Tested as a GPU's shared memory is laid out to be fast:
        lane t's word in bank (t + c) mod W (banks of one word, W the lanes), so the words
        differ; cub's radix ranking keeps each thread's u16 digit counters in a word of its
        own that way."""
        b = self.b
        n = self.lanes
        ramp = vector_constant(I64, tuple(range(n)))
        banks = b.and_(b.sub(b.lshr(addrs, self.splat(i64(2))), ramp), self.splat(i64(n - 1)))
        bits = b.bitcast(mask, ir.IntType(n))
        cttz = declare(b.module, f"llvm.cttz.i{n}", bits.type, [bits.type, I1])
        lowest = b.and_(b.call(cttz, [bits, ir.Constant(I1, 0)]), ir.Constant(bits.type, n - 1))   # (no lane: 0)
        first = b.extract_element(banks, convert_bits(b, lowest, I32))
        apart = b.icmp_unsigned("==", banks, self.splat(first))
        aligned = b.icmp_unsigned("==", b.and_(addrs, self.splat(i64(size - 1))), self.splat(i64(0)))
        fine = b.or_(b.and_(apart, aligned), b.not_(mask))
        return self._every_lane(fine)

    def _merge_into_words(self, addrs, elem, value, mask):
        """A store of narrow elements as a read, a merge and a write of the words holding them
        (x86 scatters nothing narrower than 32 bits: LLVM made it an address taken out of the
        vector and a store per lane), where each lane's word is its own (_own_words). Only
        for shared memory, which this worker alone uses while the block runs: the neighbours
        the write puts back cannot have changed since the read."""
        b = self.b
        starts, shifts = words_holding(b, addrs, elem.width)
        words = self.gather_scatter(starts, I32, 4, None)
        wide = ir.VectorType(I32, self.lanes)
        ones = vector_constant(I32, ((1 << elem.width) - 1,) * self.lanes)
        merged = b.or_(b.and_(words, b.not_(b.shl(ones, shifts))), b.shl(b.zext(value, wide), shifts))
        self._scatter(starts, I32, 4, merged, mask)

    def _off_lanes_elsewhere(self, addrs):
        """`addrs` with the lanes outside self.mask pointed at a slot of the stack, so that a
        gather reads every lane: LLVM makes a masked gather on a CPU without fast gathers
        (AVX2 on Zen 3) a test and a branch per lane, which a gather of CSR's `x[cols[j]]`,
        its rows of 16 to 64 elements masking the lanes past each row's end, mispredicted."""
        if self.mask is None:
            return addrs
        if self._elsewhere is None:           # (one slot for every gather of the program)
            self._elsewhere = self.scratch(ir.ArrayType(I64, 2), "gather.elsewhere")
        return self.b.select(self.mask, addrs, self.splat(self.b.ptrtoint(self._elsewhere, I64)))

    def _uniform(self, address, elem, size, value):
        """Every lane at one address: one scalar load (where some lane is there) or, for a
        store, the value of the last lane there, as a GPU lets one of them win."""
        b = self.b
        ptr = b.inttoptr(address, elem.as_pointer())
        if value is None:
            if self.mask is None:
                return self.splat(self._scalar_load(ptr, size))
            return self.splat(self._either(self._some_lane(self.mask), lambda: self._scalar_load(ptr, size),
                                           lambda: ir.Constant(elem, None)))
        if self.mask is None:
            b.store(b.extract_element(value, i32(self.lanes - 1)), ptr, align=size)
            return None
        bits = b.bitcast(self.mask, ir.IntType(self.lanes))
        with b.if_then(self._some_lane(self.mask)):
            ctlz = declare(b.module, f"llvm.ctlz.i{self.lanes}", bits.type, [bits.type, I1])
            last = b.sub(ir.Constant(bits.type, self.lanes - 1), b.call(ctlz, [bits, ir.Constant(I1, 1)]))
            b.store(b.extract_element(value, convert_bits(b, last, I32)), ptr, align=size)
        return None

    def _scalar_load(self, ptr, size):
        """A load of one element; of constant memory, which no kernel writes, marked
        invariant, so that LLVM keeps a filter's coefficients out of the loop over the
        block's rows (conv2d_tiled loaded its 25 each row) whatever the loop stores."""
        v = self.b.load(ptr, align=size)
        if self.access_space == "const":
            v.set_metadata("invariant.load", self.b.module.add_metadata([]))
        return v

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
        wide = ir.VectorType(elem, self.lanes * k)
        if value is None:
            got = masked_load(b, base, wide, size, mask)
            if k == 1:
                return got
            return b.shuffle_vector(got, ir.Constant(wide, None),
                                    ir.Constant(ir.VectorType(I32, self.lanes), [t * k for t in range(self.lanes)]))
        if k > 1:
            value = b.shuffle_vector(value, ir.Constant(value.type, None), self._spread_indices(k))
        if self.in_shared:
            private_store(b, value, base, size, mask, self._in_shared_memory(base, size * self.lanes * k))
        else:
            masked_store(b, value, base, size, mask)
        return None

    def _in_shared_memory(self, base, nbytes):
        """i1: the `nbytes` from i64 address `base` lie in the block's shared memory."""
        total = self.b.zext(load_field(self.b, self.launch, abi.LAUNCH["shared_total"], I32), I64)
        return span_inside(self.b, base, nbytes, self.shared_base, self.b.add(self.shared_base, total))
