"""A block's rows of threads in segments over which its divisions' quotients stay one value.

Where a kernel without sites divides a flat index (`bt = i / C`, `c = i % C`:
analysis/quotients.py), each row of the block's threads runs as a series of segments: at a
segment's first thread x0, the step function's SEGMENT case leaves each division's dividend
and divisor in the frame, for x0 and again for x0 + 1 (the dividend is c + k * x along the
row, so that gives k); from those, each division's quotient at x0 and how many threads on it
stays the same, the least of which ends the segment. The segment's threads then run with the
resume bit SEGMENTED, each division reading its quotient from the frame: invariant in the
loop that the vectoriser makes of them, so that `tokens[i / C]` is one load and `wte[tok * C +
i % C]` a run of them.

A segment is taken only where the arithmetic is exact over it: a non-negative dividend (for a
signed division) that grows (k >= 1) without wrapping, a positive divisor, and runs of at
least quotients.MIN_RUN threads (divisor / k). Otherwise the rest of the row runs as before,
dividing per thread.
"""
from __future__ import annotations

from llvmlite import ir

from ..analysis import quotients
from ..irutil import for_range, i32, i64, load_field, set_loop_hints, store_field, thread_parallel_group
from ..types import I1, I32, I64

# threads a segment's end inside a row is rounded down to: a vector of floats on AVX-512
SEGMENT_ALIGN = 16


def run_rows_in_segments(block, mode, thread):
    """The loops over the threads of `block` (a BlockFunction without sites), x fastest, each
    row in segments; `thread(index, mode)` makes one thread's call of the step function
    ((x, y, z, linear index), its resume argument)."""
    b, fn, nx = block.b, block.fn, block.nx
    with for_range(b, i32(0), block.nz, "seg.z") as z:
        with for_range(b, i32(0), block.ny, "seg.y") as y:
            row = b.mul(b.add(b.mul(z, block.ny), y), nx)
            before = b.block
            head, segment, done = (fn.append_basic_block("seg." + k) for k in ("head", "next", "done"))
            b.branch(head)
            b.position_at_end(head)
            x0 = b.phi(I32, name="seg.x0")
            x0.add_incoming(i32(0), before)
            b.cbranch(b.icmp_signed("<", x0, nx), segment, done)
            b.position_at_end(segment)
            taken, end = _segment(block, x0, y, z, row)
            # a segment that ends inside the row ends at a multiple of SEGMENT_ALIGN threads,
            # the vector of threads across the quotient's change divides, and the next segment
            # starts aligned: segments at any thread made the rows' stores straddle cache lines
            # (a streaming store in two halves)
            inside = b.icmp_signed("<", end, nx)
            cut = b.select(inside, b.and_(end, i32(-SEGMENT_ALIGN)), end)
            cut = b.select(b.icmp_signed("<", cut, x0), x0, cut)
            after = b.select(inside, _least_signed(b, b.add(cut, i32(SEGMENT_ALIGN)), nx), end)
            with b.if_else(taken) as (in_segment, dividing):
                with in_segment:
                    _threads(b, x0, cut, y, z, row, lambda index: thread(index, mode | quotients.SEGMENTED))
                    _threads(b, cut, after, y, z, row, lambda index: thread(index, mode))
                with dividing:
                    _threads(b, x0, nx, y, z, row, lambda index: thread(index, mode))
            x0.add_incoming(b.select(taken, after, nx), b.block)
            b.branch(head)
            b.position_at_end(done)


def _threads(b, lo, hi, y, z, row, thread):
    """Threads lo .. hi - 1 of a row, in a loop the vectoriser may take as parallel."""
    with for_range(b, lo, hi, "seg.x") as x:
        thread((x, y, z, b.add(row, x)))
        latch = b.block
    set_loop_hints(b.module, latch.terminator, {"llvm.loop.parallel_accesses": thread_parallel_group(b.module)})


def _operands(block, x, y, z, row):
    """[(dividend, divisor)] of each division for thread x of the row (the step's SEGMENT case)."""
    b, ws, plan = block.b, block.ws, block.plan
    block.call_step((x, y, z, b.add(row, x)), quotients.SEGMENT)
    return [(load_field(b, ws, a, I32), load_field(b, ws, d, I32)) for a, d, _, _ in plan.segments]


def _segment(block, x0, y, z, row):
    """(i1: the threads from x0 on run as a segment, i32: the segment's end), each division's
    quotient left in its frame slot."""
    b, nx = block.b, block.nx
    first = _operands(block, x0, y, z, row)
    second = _operands(block, b.add(x0, i32(1)), y, z, row)
    taken, length = ir.Constant(I1, 1), b.zext(b.sub(nx, x0), I64)
    for (a0, d), (a1, _), (_, _, quotient, signed) in zip(first, second, block.plan.segments):
        step = b.sub(a1, a0)
        if signed:
            exact = b.and_(b.icmp_signed(">=", a0, i32(0)),
                           b.and_(b.icmp_signed(">=", step, i32(1)), b.icmp_signed(">=", d, i32(1))))
            top = (1 << 31) - 1
        else:
            exact = b.and_(b.icmp_unsigned(">=", step, i32(1)),
                           b.and_(b.icmp_unsigned("<=", step, i32(1 << 31)), b.icmp_unsigned(">=", d, i32(1))))
            top = (1 << 32) - 1
        # in 64 bits, with a divisor and step of one where the segment is not taken
        a, k, dv = (b.zext(v, I64) for v in (a0, step, d))
        k, dv = b.select(exact, k, i64(1)), b.select(exact, dv, i64(1))
        q = b.udiv(a, dv)
        within = b.sub(b.sub(dv, i64(1)), b.sub(a, b.mul(q, dv)))     # how far the remainder may grow
        run = b.add(b.udiv(within, k), i64(1))
        unwrapped = b.add(b.udiv(b.sub(i64(top), a), k), i64(1))
        long_enough = b.icmp_unsigned(">=", b.udiv(dv, k), i64(quotients.MIN_RUN))
        taken = b.and_(taken, b.and_(exact, long_enough))
        length = _least(b, length, _least(b, run, unwrapped))
        store_field(b, block.ws, quotient, b.trunc(q, I32))
    return taken, b.add(x0, b.trunc(length, I32))


def _least_signed(b, u, v):
    return b.select(b.icmp_signed("<", u, v), u, v)


def _least(b, u, v):
    return b.select(b.icmp_unsigned("<", u, v), u, v)
