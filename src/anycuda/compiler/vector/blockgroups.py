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

Only kernels without barriers, warp instructions and shared memory are grouped: their blocks
share nothing but the grid, so running them together changes no result, and what is per block
(the block's index, its threads' indices) is per warp here. A memory fault in a group is
reported in its first block (the launch records the block it called; the block programs do
not name the faulting thread either), and the block's next-block prefetches step by a group.

Measured (NOTES "Blocks in groups"): stencil7_zloop, one worker, 26-34 -> 23-27 ms; two
workers 15.7-16.8 -> 13.3-13.7 ms in an A B B A run. The model's 3x is not reached: the
loads of a turn still wait (perf: 59% of the program's samples on its loads).
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..analysis.suspensions import is_block_barrier, is_warp_collective
from ..irutil import i32, load_field
from ..types import I32

GROUP_ROW_THREADS = 256        # threads of x a group of blocks spans (a row of 1 KB of floats)


def group_size(pfn, block: tuple, shared: dict) -> int:
    """How many neighbouring blocks of a row the block program of kernel `pfn` runs at once
    for blocks of shape `block` (1: each alone). `shared`: the kernel's shared variables."""
    if shared or block[0] >= GROUP_ROW_THREADS or GROUP_ROW_THREADS % block[0]:
        return 1
    for st in pfn.body:
        if isinstance(st, pir.Instruction):
            if is_block_barrier(st) or is_warp_collective(st) or "shared" in st.mods:
                return 1
    return GROUP_ROW_THREADS // block[0]


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

    def warp_in_block(self) -> ir.Value:
        """i32: the current warp's place among its block's warps."""
        return self.warp if self.group == 1 else self.b.urem(self.warp, i32(self.block_warps))

    def block_x(self) -> ir.Value:
        """i32: the current warp's block's x index (%ctaid.x)."""
        if self.group == 1:
            return self.ctaid[0]
        return self.b.add(self.ctaid[0], self.b.udiv(self.warp, i32(self.block_warps)))
