"""Uniform rounds: one loop over a block's threads, each calling the step function from the same
resume point, each round a function of its own that the block function calls.

Why functions of their own: a round is a loop nest over the threads with the step function's
code from its site inlined, and a kernel has a round per barrier and grid-stride yield. Inside
the block function every round's loops nest in the one loop of its dispatch, and LLVM's loop
passes then cost (loops x function size): the 700 loops of a generated 2,000-instruction
kernel took O3 40 s. In functions of their own each round is optimised alone. A round finds
the block's shape, parameters and workspace arrays from `L` and `ws` as the block function
does (a few loads per round, not per thread), so that LLVM proves the same facts about them
(the arrays' bounds, invariant loads); the header is the block function's own stack copy,
which nothing else reaches (noalias).
"""
from __future__ import annotations

from contextlib import contextmanager

from llvmlite import ir

from .. import abi
from ..analysis import guards
from ..irutil import (for_range, for_range_counting, i32, i64, in_thread_group, load_field, load_invariant,
                      load_invariant_field, set_loop_hints, store_field, thread_parallel_group)
from ..types import I1, I32, I64, PTR
from .workspace import frame_at, workspace_layout

ROUND_TYPE = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, I32, I32])     # (L, ws, header, stays, site)


@contextmanager
def each_thread(b, nx, ny, nz, tag="", counted_from=None, after_row=None):
    """Loops over a block's threads in x-fastest order, giving (x, y, z, linear index, counter).
    Nested loops keep the thread index free of divisions, so the optimiser sees the innermost
    loop as a simple counted loop over threadIdx.x. With `counted_from` (i64), the counter is
    counted_from + linear index, a second induction variable of the innermost loop; else None.
    `after_row()`, where given, makes its code after each row of threads (x's loop)."""
    with for_range(b, i32(0), nz, tag + "z") as z:
        with for_range(b, i32(0), ny, tag + "y") as y:
            row = b.mul(b.add(b.mul(z, ny), y), nx)
            if counted_from is None:
                with for_range(b, i32(0), nx, tag + "x") as x:
                    yield x, y, z, b.add(row, x), None
                    latch = b.block
            else:
                with for_range_counting(b, i32(0), nx, b.add(counted_from, b.zext(row, I64)), tag + "x") as (x, count):
                    yield x, y, z, b.add(row, x), count
                    latch = b.block
            # the threads' own accesses carry nothing from one thread to the next; a loop with
            # any other memory access stays a plain loop to the vectoriser
            set_loop_hints(b.module, latch.terminator, {"llvm.loop.parallel_accesses": thread_parallel_group(b.module)})
            if after_row is not None:
                after_row()


@contextmanager
def each_thread_by_column(b, nx, ny, nz, tag=""):
    """each_thread's loops with y innermost (x, y, z, linear index): for a kernel whose
    stores run along threadIdx.y (analysis.memory.stores_run_along_y), whose threads are
    independent (a block without sites), so that their order is free."""
    with for_range(b, i32(0), nz, tag + "z") as z:
        with for_range(b, i32(0), nx, tag + "x") as x:
            with for_range(b, i32(0), ny, tag + "y") as y:
                yield x, y, z, b.add(b.mul(b.add(b.mul(z, ny), y), nx), x)
                latch = b.block
            set_loop_hints(b.module, latch.terminator, {"llvm.loop.parallel_accesses": thread_parallel_group(b.module)})


def block_shape(b, L):
    """(nx, ny, nz) of the launch's block, read from the launch record `L`."""
    return tuple(load_invariant_field(b, L, abi.LAUNCH["block_" + k], I32) for k in "xyz")


def bounded_shape(b, nx, ny, nz):
    """(nx, ny, nz, n), each bounded by MAX_BLOCK_THREADS. The runtime refuses larger blocks;
    saying so here lets LLVM prove that the per-thread arrays of the workspace (spills,
    collective operands, stop codes), MAX_BLOCK_THREADS elements apart, do not overlap in a
    loop over threads, instead of guarding each vectorised loop with run-time overlap checks."""
    most = i32(abi.MAX_BLOCK_THREADS)
    nx, ny, nz = (b.select(b.icmp_unsigned("<", v, most), v, most) for v in (nx, ny, nz))
    return nx, ny, nz, b.mul(b.mul(nx, ny), nz)


def scalar_params(b, params, plan):
    """The kernel's scalar parameters that step takes as arguments (plan.scalar_params)."""
    return [load_invariant(b, b.bitcast(b.gep(params, [i64(info.offset)]), ty.as_pointer()), align=info.size)
            for info, ty in plan.scalar_params]


def step_tail(b, header, spill, n, induction=None):
    """step()'s last arguments (abi.STEP_TAIL) in a block with sites."""
    return [header, spill, b.zext(n, I64), induction if induction is not None else i64(0)]


def all_stay(b, stays, bits):
    """i1: the probe's answer has every bit of `bits` (a round's known branches)."""
    return b.icmp_unsigned("==", b.and_(stays, i32(bits)), i32(bits))


class RangeReduction:
    """The least and greatest of the values a loop over threads adds (signed), kept in stack
    slots that the optimiser turns into vectorisable min and max reductions."""

    def __init__(self, b, ty):
        self.b = b
        bits = ty.width
        here = b.block
        b.position_at_start(b.function.entry_basic_block)     # once per call, not per round
        self.lo = b.alloca(ty)
        self.hi = b.alloca(ty)
        b.position_at_end(here)
        b.store(ir.Constant(ty, (1 << (bits - 1)) - 1), self.lo)
        b.store(ir.Constant(ty, -(1 << (bits - 1))), self.hi)

    def add(self, v):
        b = self.b
        lo, hi = b.load(self.lo), b.load(self.hi)
        b.store(b.select(b.icmp_signed("<", v, lo), v, lo), self.lo)
        b.store(b.select(b.icmp_signed(">", v, hi), v, hi), self.hi)

    def low(self):
        return self.b.load(self.lo)

    def single(self):
        """i1: every value added was the same (and one was added)."""
        return self.b.icmp_signed("==", self.b.load(self.lo), self.b.load(self.hi))


def spill_element(b, spill, off, size, t):
    """Pointer to thread t's element of the spill array at `off` (elements of `size` bytes)."""
    ty = ir.IntType(8 * size)
    base = b.bitcast(b.gep(spill, [i64(abi.MAX_BLOCK_THREADS * off)]), ty.as_pointer())
    return b.gep(base, [t])


def widen(b, t, size):
    """The i32 thread index t in a spill element's integer type."""
    return b.sext(t, I64) if size == 8 else t


def affine_spills(b, spill, header, n, slots, holds):
    """i1: each spill array of `slots` ([(header slot, spill offset, element size, stride,
    known)]) holds first + stride * t for thread t, `first` being thread 0's element, which
    goes to the header slot (FunctionLowering._reload: the resume that rebuilds those
    registers from it rather than reloading them). A `known` slot is not compared: the
    lowering proved its form (FunctionLowering._proven_affine). `holds`: an i1 stack slot."""
    ok = ir.Constant(I1, 1)
    for slot, off, size, stride, known in slots:
        first = b.load(spill_element(b, spill, off, size, i32(0)))
        store_field(b, header, abi.FRAME_HEADER + 8 * slot, first)
        if known:
            continue
        b.store(ir.Constant(I1, 1), holds)
        with for_range(b, i32(0), n, "affine") as t:
            expect = b.add(first, widen(b, t, size)) if stride else first
            value = b.load(spill_element(b, spill, off, size, t))
            b.store(b.and_(b.load(holds), b.icmp_unsigned("==", value, expect)), holds)
        ok = b.and_(ok, b.load(holds))
    return ok


class RoundFunction:
    """`void round(i8* L, i8* ws, i8* header, i32 stays, i32 site)`: the uniform round from
    `site` of the block function `block` (blockfunction.BlockFunction: its plan, affine sites
    and guarded rounds), from the rebuilt registers where they check out when `from_rebuilt`.
    With `site` None, the round from whichever site its caller passes (BlockPlan.one_round);
    otherwise the argument is unused."""

    def __init__(self, block, name, site, from_rebuilt=True):
        self.block, self.name, self.site, self.from_rebuilt = block, name, site, from_rebuilt

    def emit(self) -> ir.Function:
        block, plan = self.block, self.block.plan
        fn = self.fn = ir.Function(block.module, ROUND_TYPE, name=f"{plan.name}.{self.name}")
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        L, self.ws, self.header, stays, self.site_arg = fn.args
        self.header.add_attribute("noalias")
        self.stays = stays if block.stays is not None else None
        b = self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.nx, self.ny, self.nz, self.n = bounded_shape(b, *block_shape(b, L))
        self.params = b.inttoptr(load_invariant_field(b, L, abi.LAUNCH["params"], I64), PTR)
        self.scalars = scalar_params(b, self.params, plan)
        spill_off, _, codes_off, _, _ = workspace_layout(b, self.n, plan.frame_size, plan.spill_bytes,
                                                         block.fn.turn_stride)
        self.spill = b.gep(self.ws, [spill_off])
        self.codes = b.bitcast(b.gep(self.ws, [codes_off]), I32.as_pointer())
        self.done = fn.append_basic_block("done")
        self._body()
        b.branch(self.done)
        b.position_at_end(self.done)
        b.ret_void()
        return fn

    def _body(self):
        """The round: from the rebuilt registers where they check out (`from_rebuilt`), else
        only where a round that checked itself goes on (affine_entry)."""
        b, fn, site, block = self.b, self.fn, self.site, self.block
        if site is None:
            self._uniform_round(self.site_arg)
            return
        if site in block.affine_again:
            affine = self.affine_entry = fn.append_basic_block(f"uniform{site}.affine")
            if self.from_rebuilt:
                holds = affine_spills(b, self.spill, self.header, self.n, block.affine_sites[site],
                                      b.alloca(I1, name="affine.holds"))
                general = fn.append_basic_block(f"uniform{site}.general")
                b.cbranch(holds, affine, general)
            with b.goto_block(affine):
                self._uniform_round(site + abi.AFFINE_RESUME)
                b.branch(self.done)
            if self.from_rebuilt:
                b.position_at_end(general)
        self._uniform_round(site)

    def _induction_first(self):
        """i64: the `first` of the site's induction register (stride 1), which
        affine_spills put in the header; None when the site has none."""
        b = self.b
        for slot, _, size, stride, _ in self.block.affine_sites[self.site]:
            if stride:
                first = load_field(b, self.header, abi.FRAME_HEADER + 8 * slot, ir.IntType(8 * size))
                return first if size == 8 else b.sext(first, I64)
        return None

    def _uniform_round(self, resume):
        """One loop over the threads, each calling step from `resume` (a constant, or the round's site
        argument), stop codes to `codes`. A round from a grid-stride loop's back-edge yield in
        `self_checked_sites` checks for itself whether every thread stopped at that yield again with
        the site's rebuilt registers in their form (min and max reductions over the threads: the
        stop codes, and each register's saved value less stride * t) and then runs the next round at
        once: one loop over the threads per iteration instead of three (the round, the scan of the
        stop codes, the form's check: a third of reduce's time went to the last two). Rounds from
        barriers were tried the same way, checking for the one site their threads could reach next:
        sgemm did not get faster."""
        b, fn, module, spill, header, site = self.b, self.fn, self.block.module, self.spill, self.header, self.site
        # a yield with rebuilt registers (affine_entry)
        checked = site is not None and site in self.block.plan.self_checked_sites
        slots = self.block.affine_sites[site] if checked else []
        if checked:
            code_range = RangeReduction(b, I32)
            # (a slot of a proven form needs no reduction: thread 0's element is the value)
            slot_ranges = [None if known else RangeReduction(b, ir.IntType(8 * size))
                           for _, _, size, _, known in slots]
        counted_from = self._induction_first() if site is not None and resume != site else None

        def run_threads(resume):
            with each_thread(b, self.nx, self.ny, self.nz, "u", counted_from) as (x, y, z, linear, induction):
                fr = frame_at(b, self.ws, self.block.fsize, linear)
                code = b.call(self.block.plan.step, [fr, resume if isinstance(resume, ir.Value) else i32(resume),
                                                     self.params, x, y, z, linear] + self.scalars
                              + step_tail(b, header, spill, self.n, induction),
                              attrs=self.block.plan.step_call_attrs)
                in_thread_group(module, b.store(code, b.gep(self.codes, [linear])))
                if checked:
                    code_range.add(code)
                    for (_, off, size, stride, _), rng in zip(slots, slot_ranges):
                        if rng is None:
                            continue
                        value = in_thread_group(module, b.load(spill_element(b, spill, off, size, linear)))
                        rng.add(b.sub(value, widen(b, linear, size)) if stride else value)
        if site is not None and site in self.block.guarded_rounds:
            with b.if_else(all_stay(b, self.stays, self.block.guarded_rounds[site])) as (settled, as_written):
                with settled:
                    run_threads(resume | guards.PASSED)
                with as_written:
                    run_threads(resume)
        else:
            run_threads(resume)
        if not checked:
            return
        same = b.and_(code_range.single(), b.icmp_signed("==", code_range.low(), i32(site)))
        for rng in slot_ranges:
            if rng is not None:
                same = b.and_(same, rng.single())
        go_on = fn.append_basic_block(f"uniform{site}.again")
        leave = fn.append_basic_block(f"uniform{site}.scan")
        b.cbranch(same, go_on, leave)
        b.position_at_end(go_on)
        for (slot, off, size, _, _), rng in zip(slots, slot_ranges):
            first = b.load(spill_element(b, spill, off, size, i32(0))) if rng is None else rng.low()
            store_field(b, header, abi.FRAME_HEADER + 8 * slot, first)
        b.branch(self.affine_entry)
        b.position_at_end(leave)
