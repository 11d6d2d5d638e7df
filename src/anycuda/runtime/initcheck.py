"""initcheck's runtime side: what an initcheck launch is handed, and compute-sanitizer's report.

A kernel built for initcheck (compiler/ops/initcheck.py) sets and tests the shadows of the
device allocations (shadow.py) through a flat table of [start, end, shadow] triples, made here
once per change of the allocation table, and writes each read of unwritten bytes into the
launch's record of failed checks (sanitizer.CheckedLaunch's). After the launch, whether or not
it failed otherwise, `ShadowedLaunch.report` prints each as compute-sanitizer's initcheck does:

    ========= Uninitialized __global__ memory read of size 4 bytes
    =========     at kernel+0x30 in file.cu:12
    =========     by thread (3,0,0) in block (0,0,0)
    =========     Address 0x7f...
    =========     Saved host backtrace up to driver entry point at kernel launch time
    =========         Host Frame: ...

The reads are counted in the ERROR SUMMARY; they fail nothing (the launch succeeds, as on a
GPU under compute-sanitizer). An atomic on unwritten bytes is reported as a read: it reads them.
"""
from __future__ import annotations

import os
import threading

import numpy as np

from . import memory, sanitizer
from .names import readable

_lock = threading.Lock()
_flat = {"version": None, "triples": np.zeros(3, dtype=np.uint64), "count": 0}


def _triples():
    """The tracked allocations as sorted [start, end, shadow address] u64 triples, and how many."""
    with _lock:
        if _flat["version"] != memory.table.version:
            rows = [(a.ptr, a.end, a.shadow.ctypes.data) for a in memory.table.allocations() if a.shadow is not None]
            _flat["triples"] = np.array(rows or [(0, 0, 0)], dtype=np.uint64).reshape(-1)
            _flat["count"] = len(rows)
            _flat["version"] = memory.table.version
        return _flat["triples"], _flat["count"]


class ShadowedLaunch(sanitizer.CheckedLaunch):
    """A checked launch of a kernel built for initcheck: memcheck's records, and the shadows."""

    def __init__(self, L):
        super().__init__(L)
        self.triples, L.shadow_count = _triples()      # kept alive while the launch runs
        L.shadow_table = self.triples.ctypes.data

    def report(self, kernel: str, sites, source_name: str) -> None:
        """Print the launch's uninitialised reads (up to the print limit; all are counted), then
        empty its record: what is left there is memcheck's alone."""
        total = self.failures()
        if not total:
            return
        limit = int(os.environ.get("ANYCUDA_SANITIZE_PRINT_LIMIT", sanitizer.DEFAULT_PRINT_LIMIT))
        frames = [f"        Host Frame: {frame}" for frame in sanitizer.launch_frames(self)]
        lines = []
        for entry in self.entries()[:limit]:
            lines += read_report(kernel, sites[entry["site"]], entry, source_name)
            lines += ["    Saved host backtrace up to driver entry point at kernel launch time"] + frames + [""]
        if total > limit:
            lines.append(f"({total - limit} more errors of kernel {readable(kernel)} not printed)")
        sanitizer.count_errors(total)
        sanitizer.print_lines(lines)
        self.log[0] = 0


def read_report(kernel: str, site, entry: dict, source_name: str) -> list:
    """compute-sanitizer's lines for one read of unwritten global memory."""
    return [f"Uninitialized __global__ memory read of size {entry['size']} bytes"] + \
        sanitizer.code_and_thread(kernel, site, entry, source_name) + [
        f"    Address 0x{entry['address']:x}"]
