"""racecheck's reports: the hazards a racechecked launch recorded, grouped as compute-sanitizer does.

A racechecked kernel (compiler/ops/racecheck.py) writes one entry per hazard of an access into
the launch's record of failed checks, beside memcheck's. After the launch the entries are
grouped by their two accesses (the earlier one's kind and site, the later one's) and printed in
compute-sanitizer's "analysis" form, with the first pair of threads that met there:

    ========= Error: Race reported between Write access at sum+0x40 in reduce.cu:12
    =========     and Read access at sum+0x60 in reduce.cu:14 [31 hazards]
    =========     first: Write by thread (1,0,0) and Read by thread (0,0,0) in block (0,0,0) at __shared__ 0x4

(`at __global__ 0x7f...` for a byte of global memory: its address, where shared memory's is an
offset in the block's window.)

A hazard between threads of one warp (no __syncwarp between) is a Warning, between warps an
Error. At the process's end `summary` gives the line "RACECHECK SUMMARY: N hazards displayed
(E errors, W warnings)". A race does not end the launch.
"""
from __future__ import annotations

import os
import sys
import threading

from ..compiler.ops import racecheck
from .names import readable

PREFIX = "========="
_KIND_WORDS = {racecheck.RAW: ("Write", "Read"), racecheck.WAW: ("Write", "Write"),
               racecheck.WAR: ("Read", "Write")}
_lock = threading.Lock()
_shown = {"errors": 0, "warnings": 0}


def hazards_found() -> int:
    return _shown["errors"] + _shown["warnings"]


def summary() -> str:
    n = hazards_found()
    return (f"RACECHECK SUMMARY: {n} hazard{'s' if n != 1 else ''} displayed "
            f"({_shown['errors']} error{'s' if _shown['errors'] != 1 else ''}, "
            f"{_shown['warnings']} warning{'s' if _shown['warnings'] != 1 else ''})")


def _where(kernel, site, source_name) -> str:
    where = f"{site.source[0]}:{site.source[1]}" if site.source else f"{source_name}:{site.ptx_line}"
    function = readable(site.function)
    if site.function != kernel:
        function += f" (called from {readable(kernel)})"
    return f"{function}+0x{16 * site.position:x} in {where}"


def _thread(linear: int, L) -> str:
    x, rest = linear % L.block_x, linear // L.block_x
    return f"({x},{rest % L.block_y},{rest // L.block_y})"


def groups(entries) -> dict:
    """{(hazard, intra-warp, global, earlier site, later site): [entries]} of the hazard entries."""
    out = {}
    for e in entries:
        if racecheck.is_race(e["what"]):
            hazard, intra, in_global = racecheck.hazard_of(e["what"])
            out.setdefault((hazard, intra, in_global, e["other"], e["site"]), []).append(e)
    return out


def report_launch(kernel: str, sites, entries, source_name: str, L) -> int:
    """Print the hazards among a launch's recorded `entries`; how many groups were shown."""
    found = groups(entries)
    if not found:
        return 0
    limit = int(os.environ.get("ANYCUDA_SANITIZE_PRINT_LIMIT", 100))
    lines = []
    for (hazard, intra, in_global, earlier, later), group in list(found.items())[:limit]:
        first, second = _KIND_WORDS[hazard]
        e = group[0]
        me = f"({e['tid_x']},{e['tid_y']},{e['tid_z']})"
        lines += [f"{'Warning' if intra else 'Error'}: Race reported between {first} access at "
                  f"{_where(kernel, sites[earlier], source_name)}",
                  f"    and {second} access at {_where(kernel, sites[later], source_name)} "
                  f"[{len(group)} hazard{'s' if len(group) != 1 else ''}]",
                  f"    first: {first} by thread {_thread(e['size'], L)} and {second} by thread {me} "
                  f"in block ({e['ctaid_x']},{e['ctaid_y']},{e['ctaid_z']}) at "
                  f"{'__global__' if in_global else '__shared__'} 0x{e['address']:x}"
                  f"{' (one warp, no __syncwarp between)' if intra else ''}", ""]
        with _lock:
            _shown["warnings" if intra else "errors"] += 1
    sys.stderr.write("".join(f"{PREFIX} {line}\n" if line else f"{PREFIX}\n" for line in lines))
    sys.stderr.flush()
    return min(len(found), limit)
