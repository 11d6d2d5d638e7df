"""synccheck's reports: the misuses of barriers and warp collectives a launch recorded.

A kernel built for synccheck (compiler/simt/synccheck.py) writes an entry into the launch's
record of failed checks for each barrier reached by part of a block or of a warp and for each
warp collective whose member masks do not fit the lanes that take part. After the launch each
entry is printed in compute-sanitizer's manner, the error's kind first, then the instruction
(function, offset, source line: the `.loc` with nvcc -lineinfo, else the PTX line), the thread
and block, and a line of our own naming the other thread involved:

    ========= Barrier error detected. Divergent thread(s) in block
    =========     at reduce+0x90 in reduce.cu:17
    =========     by thread (0,0,0) in block (3,0,0)
    =========     thread (100,0,0) exited without reaching this barrier

Each entry counts as one error of the ERROR SUMMARY (runtime/sanitizer.py). A misuse does not
end the launch: threads that wait where no barrier can complete still fail it with the barrier
deadlock (CUDA_ERROR_LAUNCH_FAILED), after their report.
"""
from __future__ import annotations

import os

from ..compiler import abi
from ..compiler.simt.synccheck import NO_THREAD
from . import sanitizer
from .names import readable

HEADLINES = {
    abi.SYNC_BLOCK_DIVERGENT: "Barrier error detected. Divergent thread(s) in block",
    abi.SYNC_WARP_DIVERGENT: "Barrier error detected. Divergent thread(s) in warp",
    abi.SYNC_BAD_COUNT: "Barrier error detected. Invalid arguments",
    abi.SYNC_NOT_IN_MASK: "Barrier error detected. Invalid arguments",
    abi.SYNC_MASKS_DIFFER: "Barrier error detected. Invalid arguments",
    abi.SYNC_LANE_MISSING: "Barrier error detected. Invalid arguments",
    abi.SYNC_COUNT_DIFFERS: "Barrier error detected. Invalid arguments",
}


class SyncCheckedLaunch(sanitizer.CheckedLaunch):
    """A synccheck launch: memcheck's record (its table unused), reported after the launch;
    its entries fail nothing (failures() is 0), so a deadlock is raised as unchecked."""

    def failures(self) -> int:
        return 0

    def report(self, kernel: str, sites, sync_sites: dict, source_name: str, L) -> int:
        entries = [e for e in self.entries() if e["what"] in abi.SYNC_KINDS]
        if not entries:
            return 0
        total = int(self.log[0])
        limit = int(os.environ.get("ANYCUDA_SANITIZE_PRINT_LIMIT", sanitizer.DEFAULT_PRINT_LIMIT))
        lines = []
        for e in entries[:limit]:
            lines += entry_report(kernel, sites, sync_sites, e, source_name, L)
        if total > len(entries[:limit]):
            lines.append(f"({total - len(entries[:limit])} more errors of kernel {readable(kernel)} not printed)")
        sanitizer.count_errors(total)
        sanitizer.print_lines(lines)
        return total


def _thread(linear: int, L) -> str:
    x, rest = linear % L.block_x, linear // L.block_x
    return f"({x},{rest % L.block_y},{rest // L.block_y})"


def _place(kernel, sites, sync_sites, resume, source_name) -> str:
    """'function+0x.. in file:line' of the instruction at resume code `resume`."""
    site = sites[sync_sites[resume]]
    where = f"{site.source[0]}:{site.source[1]}" if site.source else f"{source_name}:{site.ptx_line}"
    function = readable(site.function)
    if site.function != kernel:
        function += f" (called from {readable(kernel)})"
    return f"{function}+0x{16 * site.position:x} in {where}"


def entry_report(kernel: str, sites, sync_sites: dict, e: dict, source_name: str, L) -> list:
    """compute-sanitizer's lines for one entry, then what the other thread involved did."""
    what = e["what"]
    lines = [HEADLINES[what]] + sanitizer.code_and_thread(kernel, sites[sync_sites[e["site"]]], e, source_name)
    mask, second = e["address"] & 0xFFFFFFFF, e["address"] >> 32
    other = _thread(e["size"], L) if e["size"] != NO_THREAD else ""
    elsewhere = "" if e["size"] == NO_THREAD or e["other"] == 0 else \
        _place(kernel, sites, sync_sites, e["other"], source_name)
    if what in (abi.SYNC_BLOCK_DIVERGENT, abi.SYNC_WARP_DIVERGENT):
        same = " of the same warp" if what == abi.SYNC_WARP_DIVERGENT else ""
        doing = f"waits at {elsewhere}" if elsewhere else "exited without reaching this barrier"
        lines.append(f"    thread {other}{same} {doing}")
    elif what == abi.SYNC_BAD_COUNT:
        lines.append("    the barrier's thread count can never be reached by the threads still running")
    elif what == abi.SYNC_NOT_IN_MASK:
        lines.append(f"    the calling lane {_lane(e, L)} is not in its member mask 0x{mask:08x}")
    elif what == abi.SYNC_MASKS_DIFFER:
        lines.append(f"    member mask 0x{mask:08x} differs from mask 0x{second:08x} of thread {other} "
                     "at the same instruction")
    elif what == abi.SYNC_COUNT_DIFFERS:
        mine, theirs = (str(c) if c else "none (the whole block)" for c in (mask, second))
        lines.append(f"    thread count {mine} differs from {theirs}, given by the warps that arrived before")
    elif what == abi.SYNC_LANE_MISSING:
        doing = f"waits at {elsewhere} instead" if elsewhere else "has exited"
        lines.append(f"    member mask 0x{mask:08x} names lane {e['size'] % 32} (thread {other}), which {doing}; "
                     f"lanes not taking part: 0x{second:08x}")
    return lines + [""]


def _lane(e: dict, L) -> int:
    linear = e["tid_x"] + L.block_x * (e["tid_y"] + L.block_y * e["tid_z"])
    return linear % 32
