"""Blocks run in bands: a row of the grid's blocks at a time, a row of threads of each in turn.

A kernel without sites (its blocks are loops over their threads, blockfunction.py) runs its
blocks one after another; where a block has several rows of threads, each block then reads
and writes as many short runs of memory, rows apart: a 16 x 16 block of a 5-point stencil
reads 18 runs of 64 bytes and writes 16, 16 KB apart. On a Zen 3 that order took a C model of
the stencil twice the time of the same work row by row, its stores four times (benchmarks/
NOTES.md, "Bands"). A band runs the blocks cx .. cx + count - 1 of one row of the grid row by
row: for each row of threads, that row of each block in turn, so that a band's rows run
along memory as a loop over the whole row would.

Only where nothing could tell: the kernel reaches no shared memory (one frame and one window
serve the whole band) and its blocks may run in any order (analysis.memory.any_block_order:
no atomic, fence, ordered access, call or trap), nor does it loop its threads by column,
combine atomics or take turns at grid-stride loops. The run of a chunk's blocks
(cpu/launch.py, emit_run_blocks) calls the band where the launch's blocks have more than one
row of threads: for one-row blocks a band's order is the block function's own.
"""
from __future__ import annotations

from contextlib import contextmanager

from llvmlite import ir

from .. import abi
from ..analysis import guards
from ..irutil import at_function_start, for_range, i32, set_loop_hints, store_field, thread_parallel_group
from ..types import I1, I32, I64, PTR
from .blockfunction import BlockFunction, BlockPlan, block_stays, init_block_fields
from .workspace import C


def add_band(module, plan: BlockPlan, block_fn: ir.Function) -> None:
    """Give `block_fn` (emit_block_function's for `plan`) its band function, `block_fn.band`,
    where the plan allows one (the module docstring)."""
    # (a block function without warp regions never gives way: gives_way needs regions[0])
    if plan.bands and not plan.regions and plan.combined_init is None and not plan.by_column:
        block_fn.band = _BandFunction(module, plan, block_fn.probe).emit()


@contextmanager
def each_thread_in_band(b, nx, ny, nz, first, last, enter_block, tag="band."):
    """each_thread's loops over the threads of blocks `first` .. `last` - 1 (i32) of a band
    (consecutive blocks of one row of the grid, which need not wait for each other): a row
    of threads of each block in turn, `enter_block(k)` called before block k's row; yields
    (x, y, z, linear index). The band's rows then run along memory as a C loop over the
    whole row would, where block after block made a 16 x 16 block's 16 rows as many streams
    (a 5-point stencil 2.1x slower on a Zen 3 in a C model, benchmarks/NOTES.md)."""
    with each_row(b, nx, ny, nz, tag) as (y, z, row):
        with each_thread_of_row(b, nx, y, z, row, first, last, enter_block, tag) as index:
            yield index


@contextmanager
def each_row(b, nx, ny, nz, tag="band."):
    """The loops over a band's rows of threads: yields (y, z, the row's first linear index)."""
    with for_range(b, i32(0), nz, tag + "z") as z:
        with for_range(b, i32(0), ny, tag + "y") as y:
            yield y, z, b.mul(b.add(b.mul(z, ny), y), nx)


@contextmanager
def each_thread_of_row(b, nx, y, z, row, first, last, enter_block, tag="band."):
    """The threads of one row (each_row's) of blocks `first` .. `last` - 1: (x, y, z, linear)."""
    with for_range(b, first, last, tag + "k") as k:
        enter_block(k)
        with for_range(b, i32(0), nx, tag + "x") as x:
            yield x, y, z, b.add(row, x)
            latch = b.block
        # one vector of a row at a time: the row is a block's width, often 16 threads,
        # which the vectoriser's main loop, interleaved, never ran (it took 32 a turn)
        # and its 4-wide remainder loop ran instead (a 5-point stencil 2.3x C's time)
        set_loop_hints(b.module, latch.terminator,
                       {"llvm.loop.parallel_accesses": thread_parallel_group(b.module),
                        "llvm.loop.interleave.count": 1})


# runs of blocks alike (_BandFunction._runs_alike) whose rows are taken together: a band has
# three where its row of the grid has a border (its first block, those between, its last)
RUNS_TOGETHER = 8


class _BandFunction(BlockFunction):
    """i32 run_band(i8* L, i8* ws, i8* shared, i32 cx, i32 cy, i32 cz, i32 worker, i32 count,
    i64* at_block, i64 blk): the blocks cx .. cx + count - 1 of one row of the grid, `blk` the
    first's index, for a kernel without sites whose blocks may run in any order and share no
    memory (BlockPlan.bands): a row of threads of each block in turn (each_thread_in_band),
    one frame for all, its block index set as each block's row begins (and `*at_block`, which
    names the block a fault happened in). abi.BLOCK_DONE or BLOCK_FAILED, as the block
    function's. Where the kernel has known branches (guards.py), each run of the band's blocks
    that pass them alike runs in rows of its own: those that do without the branches (a run
    that passes grows by spans of blocks the bounds pass at once, _lengthen_by_spans)."""

    def __init__(self, module, plan, probe):
        self.probe = probe
        super().__init__(module, plan)

    @staticmethod
    def _function(module, plan):
        return ir.Function(module, ir.FunctionType(I32, [PTR, PTR, PTR, I32, I32, I32, I32, I32, I64.as_pointer(),
                                                         I64]), name=plan.name + ".band")

    def emit(self) -> ir.Function:
        b, fn, ws = self.b, self.fn, self.ws
        self.count, self.at_block, self.first = fn.args[7:]
        ws.add_attribute("noalias")         # (as the block function's, _without_sites)
        init_block_fields(b, ws, self.L, (self.cx, self.cy, self.cz), self.shared, self.worker)
        store_field(b, ws, C["linear"], i32(-1))
        if 0 in self.guarded_rounds:
            self._runs_alike()
        else:
            self._rows()
        b.ret(i32(abi.BLOCK_DONE))
        b.position_at_end(self.fail)
        b.ret(i32(abi.BLOCK_FAILED))
        return fn

    def _set_block_x(self, k):
        """The frame's %ctaid.x: the band's block k (i32, counted from cx)."""
        store_field(self.b, self.ws, C["ctaid_x"], self.b.add(self.cx, k))

    def _enter_block(self, k):
        self._set_block_x(k)
        self.b.store(self.b.add(self.first, self.b.zext(k, I64)), self.at_block)

    def _rows(self):
        """The threads of all the band's blocks (a kernel without known branches)."""
        with each_thread_in_band(self.b, self.nx, self.ny, self.nz, i32(0), self.count, self._enter_block) as index:
            self._thread(index)

    def _rows_of_runs(self, taken, firsts, ends, passes):
        """Each row of threads of each of the `taken` runs recorded (their first and end
        blocks, whether their blocks pass the known branches) in turn."""
        b = self.b
        with each_row(b, self.nx, self.ny, self.nz) as (y, z, row):
            with for_range(b, i32(0), taken, "run") as r:
                lo, hi, stays = (b.load(b.gep(array, [i32(0), r])) for array in (firsts, ends, passes))
                with b.if_else(stays) as (unguarded, guarded):
                    for branch, mode in ((unguarded, guards.PASSED), (guarded, 0)):
                        with branch:
                            with each_thread_of_row(b, self.nx, y, z, row, lo, hi, self._enter_block) as index:
                                self._thread(index, mode)

    def _stays(self, k):
        """i1: no thread of the band's block k takes the kernel's known branches."""
        self._set_block_x(k)
        return block_stays(self.b, self.fn, self.probe, self.plan.probe_bounds, self.L, self.ws, self.guarded_rounds[0])

    def _lengthen_by_spans(self, stays, end):
        """Where a run's first block stays, lengthen the run (`*end`, the block after it) by
        spans of blocks the bounds pass at once (probebounds.py: bounds over a span hold in
        each of its blocks): spans of 1, 2, 4, ... blocks while they pass, then of halving
        length, so a row's inner blocks take ~2 log2 n tests rather than n (a 5x5
        convolution spent a fifth of its time testing its 16 x 16 blocks one by one). The
        block the spans stop at is tested alone after them, the probe too."""
        b, fn = self.b, self.fn
        with at_function_start(b):
            length, growing = b.alloca(I32, name="span.length"), b.alloca(I1, name="span.growing")
        head, test, done = (fn.append_basic_block("span." + k) for k in ("head", "test", "done"))
        b.store(i32(1), length)
        b.store(ir.Constant(I1, 1), growing)
        b.cbranch(stays, head, done)
        b.position_at_end(head)
        first, n = b.load(end), b.load(length)
        b.cbranch(b.and_(b.icmp_signed("<", first, self.count), b.icmp_signed(">", n, i32(0))), test, done)
        b.position_at_end(test)
        last = b.sub(b.add(first, n), i32(1))
        last = b.select(b.icmp_signed("<", last, self.count), last, b.sub(self.count, i32(1)))
        self._set_block_x(first)
        passed = b.call(self.plan.probe_bounds, [self.L, self.ws, b.sub(last, first)])
        grow = b.load(growing)
        b.store(b.select(passed, b.add(last, i32(1)), first), end)
        b.store(b.select(b.and_(passed, grow), b.shl(n, i32(1)), b.lshr(n, i32(1))), length)
        b.store(b.and_(passed, grow), growing)
        b.branch(head)
        b.position_at_end(done)

    def _runs_alike(self):
        """The band as runs of blocks whose probes agree (a grid's first and last blocks of a
        row take a border test that those between do not), up to RUNS_TOGETHER of them at a
        time taken row by row together: each row of threads of each run in turn
        (_rows_of_runs). Each run in rows of its own read a row of memory in as many pieces,
        each at its own time: stencil7_3d_block's edge blocks read their 128 bytes of each
        of 36 rows apart from the 768 of the blocks between, which no hardware prefetcher
        follows (a C model of that order: 10.9-14.3 ms against 7.5 for whole rows)."""
        b, fn = self.b, self.fn
        with at_function_start(b):
            pos, end = b.alloca(I32, name="run.first"), b.alloca(I32, name="run.end")
            count = b.alloca(I32, name="runs")
            firsts, ends = (b.alloca(ir.ArrayType(I32, RUNS_TOGETHER), name=n) for n in ("runs.first", "runs.end"))
            passes = b.alloca(ir.ArrayType(I1, RUNS_TOGETHER), name="runs.stay")
        head, start, scan, test, record, flush, out = (
            fn.append_basic_block("run." + k) for k in ("head", "start", "scan", "test", "record", "rows", "out"))
        b.store(i32(0), pos)
        b.store(i32(0), count)
        b.branch(head)
        b.position_at_end(head)
        here = b.load(pos)
        b.cbranch(b.and_(b.icmp_signed("<", here, self.count), b.icmp_signed("<", b.load(count), i32(RUNS_TOGETHER))),
                  start, flush)
        b.position_at_end(start)
        stays = self._stays(here)
        b.store(b.add(here, i32(1)), end)
        if self.plan.probe_bounds is not None:
            self._lengthen_by_spans(stays, end)
        b.branch(scan)
        b.position_at_end(scan)
        e = b.load(end)
        b.cbranch(b.icmp_signed("<", e, self.count), test, record)
        b.position_at_end(test)
        alike = b.icmp_unsigned("==", self._stays(e), stays)
        b.store(b.select(alike, b.add(e, i32(1)), e), end)
        b.cbranch(alike, scan, record)
        b.position_at_end(record)
        k = b.load(count)
        for array, value in ((firsts, b.load(pos)), (ends, b.load(end)), (passes, stays)):
            b.store(value, b.gep(array, [i32(0), k]))
        b.store(b.add(k, i32(1)), count)
        b.store(b.load(end), pos)
        b.branch(head)
        b.position_at_end(flush)
        taken = b.load(count)
        with b.if_then(b.icmp_signed("==", taken, i32(0))):
            b.branch(out)
        self._rows_of_runs(taken, firsts, ends, passes)
        b.store(i32(0), count)
        b.branch(head)
        b.position_at_end(out)
