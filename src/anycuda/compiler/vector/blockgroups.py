"""Blocks in groups: a block program (blockprograms.py) that runs several neighbouring blocks of a
row of the grid at once, their warps together, so that the rounds of a loop run in turns over
all of them (blockstretches.py, "loops in turns").

A kernel whose threads each march along a long loop (a 3-D stencil's walk along z, a plane a
round) reads, in each round, a fragment of a row per warp: 128 bytes of a 1 KB row for a block
32 threads wide. A GPU runs the row's blocks side by side and its memory sees the whole row;
a worker that runs the blocks one after another, each to its loop's end, reads the row's
fragments hundreds of rounds apart, and the memory serves such scattered fragments far more
slowly than a stream. A C model of that order on a Zen 5 (one thread, 256^3 floats): block
after block 50-60 ms, the eight blocks of a row in turns 15-22 ms, C's plane-by-plane loop
14-18 ms (NOTES "Blocks in groups").

A group is GROUP_ROW_THREADS threads of x (eight blocks 32 wide, four 64 wide; none where one
block is that wide): the program is called for every block of the grid as before, and the
block whose x index is a multiple of the group's size runs its group (those of the group that
the grid has); the others return at once. Within the program a warp is one of the group's
(block-major: a block's warps, then the next block's): %ctaid.x is its block's, alike in its
lanes as %tid.y is, and %tid its place in that block.

Kernels without barriers, warp instructions and shared memory are grouped: their blocks share
nothing but the grid, so running them together changes no result, and what is per block (the
block's index, its threads' indices) is per warp here. So are kernels of one-row blocks that
meet at barriers after a grid-stride loop (a sum's `for (i = gid; i < n; i += stride)`, then
shuffles and the warps' sums through shared memory), GROUP_STRIDE_THREADS threads of x a group:
each block of 256 threads read 1 KB a round, rounds 256 KB apart, where the group's turn reads
4 KB (a C model of the two orders, benchmarks/models/grid_stride_order.c: 2.03 against 1.49
ms). A barrier ends a stretch for the group's blocks together, which waits no less than each
block's own; a warp's collectives are its own; each block has a window of shared memory of its
own (warp_shared_base: the launch makes a workspace slot's shared memory the group's, each
window the block's size rounded to 16 bytes), and idle warps and windows in registers, which
reckon with one block's warps, stand aside. One process, alternating, GROUP_STRIDE_THREADS 1 ->
1024: reduce 0.77-0.79 of its time, reduce_cub 0.92-0.93, reduce_shfl (blocks of 512, groups
of two) 0.97-0.98. A memory fault names the block of the warp that made it (each warp of
a group notes its block where the launch noted the leader's; the block programs do not name the
faulting thread), and the block's next-block prefetches step by a group.

Measured (NOTES "Blocks in groups"): stencil7_zloop, one worker, 26-34 -> 23-27 ms; two
workers 15.7-16.8 -> 13.3-13.7 ms in an A B B A run. The model's 3x is not reached: the
loads of a turn still wait (perf: 59% of the program's samples on its loads).
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..cpu import faults
from ..analysis.suspensions import is_block_barrier, is_warp_collective
from ..irutil import at_function_start, i32, i64, load_field
from ..types import I32, I64
from ..simt.workspace import shared_window_stride
from .blockloops import grid_strided

GROUP_ROW_THREADS = 256        # threads of x a group of blocks spans (a row of 1 KB of floats)
GROUP_STRIDE_THREADS = 1024    # ... where the blocks meet at barriers after a grid-stride loop (4 KB)


def group_size(pfn, block: tuple, shared: dict) -> int:
    """How many neighbouring blocks of a row the block program of kernel `pfn` runs at once
    for blocks of shape `block` (1: each alone). `shared`: the kernel's shared variables."""
    meets = bool(shared) or any(isinstance(st, pir.Instruction) and (
        is_block_barrier(st) or is_warp_collective(st) or "shared" in st.mods) for st in pfn.body)
    if not meets:
        span = GROUP_ROW_THREADS
    elif block[1] == block[2] == 1 and grid_strided(pfn):
        span = GROUP_STRIDE_THREADS
    else:
        return 1
    if block[0] >= span or span % block[0]:
        return 1
    return span // block[0]


class GroupParts:
    """A block program's group of blocks (see the module docstring): a part of BlockProgram."""

    def _enter_group(self):
        """At the program's start: the blocks that are not their group's first return; the
        first counts the warps of its group's blocks the grid has (self.group_warps)."""
        if self.group == 1:
            self.group_warps = i32(self.warps)
            return
        b = self.b
        cx = self.ctaid[0]
        leads = b.icmp_unsigned("==", b.urem(cx, i32(self.group)), i32(0))
        with b.if_then(b.not_(leads)):
            b.ret(i32(abi.BLOCK_DONE))
        grid_x = load_field(b, self.launch, abi.LAUNCH["grid_x"], I32)
        blocks = b.sub(grid_x, cx)
        blocks = b.select(b.icmp_unsigned("<", blocks, i32(self.group)), blocks, i32(self.group))
        self.group_warps = b.mul(blocks, i32(self.block_warps))
        # a fault names the block of the warp that made it: the launch noted the leader's (where
        # no trap is set, a slot of the program's own takes the stores)
        with at_function_start(b):
            own = b.alloca(I64, name="fault.block")
            # (in the entry block: recompute.py may copy what a warp's shared base goes into)
            total = b.zext(load_field(b, self.launch, abi.LAUNCH["shared_total"], I32), I64)
            self._window_stride = shared_window_stride(b, total)
        b.store(i64(0), own)
        self._fault_block = faults.block_slot(b, load_field(b, self.launch, abi.LAUNCH["fault_key"], I64), own)
        self._leader_index = b.load(self._fault_block)

    def note_warp_block(self):
        """As a warp of a group starts its part of a stretch: its block is the one a fault
        names (the leader's index plus the warp's block in the group)."""
        if self.group == 1:
            return
        self.b.store(self.b.add(self._leader_index, self._block_in_group()), self._fault_block)

    def warp_shared_base(self) -> ir.Value:
        """i64: where the current warp's block's shared memory starts: each block of a group
        has a window of its own, shared_total rounded to 16 bytes apart (launch.emit_launch)."""
        if self.group == 1 or not self.shared:
            return self.group_shared
        return self.b.add(self.group_shared, self.b.mul(self._block_in_group(), self._window_stride))

    def _block_in_group(self) -> ir.Value:
        """i64: the current warp's block's place in its group."""
        return self.b.zext(self.b.udiv(self.warp, i32(self.block_warps)), I64)

    def warp_in_block(self) -> ir.Value:
        """i32: the current warp's place among its block's warps."""
        return self.warp if self.group == 1 else self.b.urem(self.warp, i32(self.block_warps))

    def block_x(self) -> ir.Value:
        """i32: the current warp's block's x index (%ctaid.x)."""
        if self.group == 1:
            return self.ctaid[0]
        return self.b.add(self.ctaid[0], self.b.udiv(self.warp, i32(self.block_warps)))
