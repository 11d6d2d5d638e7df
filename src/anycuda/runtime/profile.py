"""Profile mode (ANYCUDA_PROFILE=1, `anycuda run --profile`): where a program's time went, per
kernel and per library call, printed on stderr when the process ends, as nsys's kernel summary.

Per kernel: its launches, the time they ran on anycuda's workers (from the first block taken to
the last block done, not the time queued on a stream), blocks per second, what compiling it took
(the quick tier in the launching thread; the optimised tier, made in the background, as the
time from the start of the compile until it arrived), whether the code came from the disk cache,
and the ways its launches ran (execution strategies). Per library function (cuBLAS, cuFFT,
cuRAND...): calls and the time their work ran on the stream.

Off, it costs nothing on the launch path: `ENABLED` is read once, at import, and the launch
path tests that one module-level bool before taking any time.
ANYCUDA_PROFILE_OUTPUT=FILE also writes the table as CSV to FILE.
"""
from __future__ import annotations

import atexit
import csv
import importlib
import os
import sys
import threading
import time

ENABLED = os.environ.get("ANYCUDA_PROFILE", "").strip().lower() not in ("", "0", "no", "off")

now = time.perf_counter_ns

_lock = threading.Lock()
_kernels = {}            # (source name, kernel name) -> _KernelStats
_calls = {}              # library function name -> _CallStats
_local = threading.local()      # .call: the library function whose work is being queued
_reported = []


class _KernelStats:
    def __init__(self):
        self.durations = []         # ns per launch, in the order they ended
        self.blocks = 0
        self.strategies = {}        # description -> launches
        self.quick_ns = None        # the quick code's compile, in the launching thread
        # optimised code: made in the background, from the compile's start until it arrived;
        # made (or loaded from the disk cache) in the launching thread, the time that took
        self.optimised_ns = None
        self.optimised_job = None   # that code's job (tiers.OptimisedCode), never queued where block programs ran all
        self.cached = None          # True, False, or None where it cannot be told
        self.block_programs = {}    # block shape -> its block program's compile (or load) time
        self.unit = None            # the kernel's PTX unit, to describe its launch function at exit


class _CallStats:
    def __init__(self):
        self.durations = []


def _kernel(source_name: str, name: str) -> _KernelStats:
    key = (source_name, name)
    stats = _kernels.get(key)
    if stats is None:
        stats = _kernels.setdefault(key, _KernelStats())
    return stats


def record_launch(source_name: str, name: str, nanoseconds: int, blocks: int, strategy: str) -> None:
    """One launch of kernel `name` ran `nanoseconds` on the workers."""
    with _lock:
        stats = _kernel(source_name, name)
        stats.durations.append(nanoseconds)
        stats.blocks += blocks
        stats.strategies[strategy] = stats.strategies.get(strategy, 0) + 1


def record_compile(source_name: str, name: str, started: int, nanoseconds: int, tier: str,
                   cached, optimised, unit) -> None:
    """Kernel `name` was compiled in `nanoseconds` (from `started`, a `now()`); `optimised`: the
    tiers.OptimisedCode on its way, or None."""
    with _lock:
        stats = _kernel(source_name, name)
        stats.cached, stats.unit = cached, unit
        if tier == "quick":
            stats.quick_ns = nanoseconds
        else:
            stats.optimised_ns = nanoseconds
    if optimised is not None:
        optimised_on_its_way(source_name, name, started, optimised)


def optimised_on_its_way(source_name: str, name: str, started: int, optimised) -> None:
    """Kernel `name`'s optimised code is made in the background (tiers.OptimisedCode) from
    `started`: its time is kept when it arrives."""
    stats = _kernel(source_name, name)

    def arrived(object_code):
        with _lock:         # (where optimising failed, the quick code ran on; a compile the
            # program's exit cut short ends without an object or an error: not ready)
            if object_code is not None:
                stats.optimised_ns = now() - started
            elif optimised.error is not None:
                stats.optimised_ns = "failed"
    with _lock:
        stats.optimised_ns, stats.optimised_job = NOT_READY, optimised
    optimised.subscribe(arrived)


def add_compile_time(source_name: str, name: str, nanoseconds: int, tier: str = "optimised") -> None:
    """Kernel `name`'s object of `tier`, left for the first launch that needs it
    (pipeline.kernel_object), took `nanoseconds` more."""
    with _lock:
        stats = _kernel(source_name, name)
        field = "quick_ns" if tier == "quick" else "optimised_ns"
        before = getattr(stats, field)
        if isinstance(before, int) or before is None:
            setattr(stats, field, (before or 0) + nanoseconds)


def timed_block_program(source_name: str, name: str, block: tuple, link):
    """`link` (called with the block program's object for blocks of shape `block`, or None
    where the kernel has none, or while the background compile makes it) that also keeps the
    time from now until it is called with the object."""
    started = now()

    def timed_link(code):
        if code is not None:
            with _lock:
                _kernel(source_name, name).block_programs[block] = now() - started
        link(code)
    return timed_link


class library_call:
    """Around a library function's C entry point: work it queues (driver.api.submit) is timed
    under its name (`timed`)."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.outer = getattr(_local, "call", None)
        _local.call = self.name

    def __exit__(self, *exc):
        _local.call = self.outer


def timed(fn):
    """`fn` timed as work of the library call being made, when one is being made; else `fn`."""
    name = getattr(_local, "call", None)
    if name is None:
        return fn

    def run(*args):
        start = now()
        try:
            return fn(*args)
        finally:
            elapsed = now() - start
            with _lock:
                _calls.setdefault(name, _CallStats()).durations.append(elapsed)
    return run


# ---------------------------------------------------------------- the summary

COLUMNS = ("Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Min (ns)", "Max (ns)", "Blocks/s",
           "Quick compile (ms)", "Optimised compile (ms)", "Cached", "Block programs (ms)", "Strategy", "Name")


LAUNCH_FUNCTION = "launch function"      # a launch that ran the kernel's own (not a block program)
IN_BANDS = ", in bands of a grid row"    # ... whose blocks ran a grid row at a time (compiler/simt/bands.py)
SPECIALISED = " specialised to its parameter values"      # ... a variant of it (runtime/specialisation.py)
NOT_READY = "not ready at exit"
NOT_NEEDED = "not needed"                # block programs ran every launch: its optimised code was never asked for


def in_warp_regions(loaded, export: str) -> str:
    """What a launch function's blocks of whole warps run as warp regions (the kernel from its
    start, or after some of its barriers and warp collectives: compiler/vector/warpregions.py),
    read from the functions of its linked object `loaded` (`ptx.kN.step.regionS`, N the
    kernel's index in its module, as in its launch function `export`, S a site, 0 its start):
    the quick tier's lean code has none, the optimised code that takes over has those made,
    whichever lowering the kernel's info came from."""
    prefix = f"ptx.k{export.rsplit('.', 1)[-1]}.step.region"
    sites = [int(name[len(prefix):]) for name in loaded.function_names()
             if name.startswith(prefix) and name[len(prefix):].isdigit()]
    after = len([s for s in sites if s != 0])
    parts = (["from the start"] if 0 in sites else []) + ([f"after {after} of its stops"] if after else [])
    return f", warp regions {' and '.join(parts)}" if parts else ""


def _optimised_time(stats: _KernelStats) -> str:
    job = stats.optimised_job
    if stats.optimised_ns == NOT_READY and job is not None and not job.queued:
        return NOT_NEEDED
    return _ms(stats.optimised_ns)


def _ms(ns) -> str:
    return "-" if ns is None else ns if isinstance(ns, str) else f"{ns / 1e6:.1f}"


def _cached(flag) -> str:
    return {True: "yes", False: "no"}.get(flag, "?")


def launch_function_kind(unit) -> str:
    """How a kernel's own launch function runs its blocks, told from its PTX: in rounds between
    the barriers and warp collectives it (or a function it calls) holds, else as a loop over
    the threads (in chunk calls; grid-stride loops the lowering splits into turns)."""
    from ..compiler.analysis.suspensions import has_suspensions
    from ..ptx.parser import parse
    try:
        module = parse(unit.text)
    except Exception:          # noqa: BLE001 - a kernel that compiled parses; said rather than raised at exit
        return "launch function"
    bodies = [f.body for f in module.functions if f.body]
    if any(has_suspensions(body) for body in bodies):
        return "rounds at barriers/warp collectives"
    return "thread loop (chunk calls or grid-stride turns)"


def _block_program_times(stats: _KernelStats) -> str:
    """Per block shape that has a block program, its compile time: "256 threads: 31.0",
    "32x8 threads: 40.2"."""
    return "; ".join(f"{_shape(block)} threads: {_ms(ns)}" for block, ns in sorted(stats.block_programs.items())) or "-"


def _shape(block: tuple) -> str:
    return str(block[0]) if block[1:] == (1, 1) else "x".join(map(str, block))


def _strategies(stats: _KernelStats) -> str:
    parts = []
    for strategy, count in stats.strategies.items():
        if LAUNCH_FUNCTION in strategy and stats.unit is not None:
            strategy = strategy.replace(LAUNCH_FUNCTION, launch_function_kind(stats.unit))
        parts.append(strategy if len(stats.strategies) == 1 else f"{strategy} x{count}")
    return "; ".join(parts)


def rows() -> list:
    """The summary's rows (one tuple of COLUMNS' values per kernel or library function), by
    total time, longest first."""
    from .names import readable
    with _lock:
        kernels = [(k, s, list(s.durations)) for k, s in _kernels.items() if s.durations]
        calls = [(n, list(s.durations)) for n, s in _calls.items()]
    grand = sum(sum(d) for _, _, d in kernels) + sum(sum(d) for _, d in calls) or 1
    out = []
    for (_, name), stats, durations in kernels:
        total = sum(durations)
        rate = f"{stats.blocks / (total / 1e9):.0f}" if total else "-"
        out.append((total, [f"{100 * total / grand:.1f}", total, len(durations), total // len(durations),
                            min(durations), max(durations), rate, _ms(stats.quick_ns), _optimised_time(stats),
                            _cached(stats.cached), _block_program_times(stats), _strategies(stats),
                            readable(name)]))
    for name, durations in calls:
        total = sum(durations)
        out.append((total, [f"{100 * total / grand:.1f}", total, len(durations), total // len(durations),
                            min(durations), max(durations), "-", "-", "-", "-", "-", "library call", name]))
    out.sort(key=lambda r: -r[0])
    return [tuple(r) for _, r in out]


def format_table(table: list) -> str:
    cells = [COLUMNS] + [tuple(str(v) for v in r) for r in table]
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS) - 1)]
    lines = ["  ".join(c.rjust(w) if i < 7 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
             + "  " + r[-1] for r in cells]
    return "\n".join(line.rstrip() for line in lines)


def report(stream=None) -> None:
    """Print the summary on stderr (and the CSV file ANYCUDA_PROFILE_OUTPUT names), once."""
    if not ENABLED or _reported:
        return
    _reported.append(True)
    table = rows()
    stream = stream or sys.stderr
    stream.write("\nanycuda profile: kernels and library calls, by the time they ran on the workers\n")
    stream.write((format_table(table) if table else "(no kernel ran and no library call was made)") + "\n")
    stream.flush()
    path = os.environ.get("ANYCUDA_PROFILE_OUTPUT", "").strip()
    if path:
        try:
            with open(path, "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(COLUMNS)
                writer.writerows(table)
        except OSError as e:
            stream.write(f"anycuda profile: cannot write {path}: {e}\n")


def finish_process() -> None:
    """At the process's end, after the streams are drained (a Python program's atexit; a C
    program's is libcuda.so.1's exit hook)."""
    report()


if ENABLED:
    # atexit runs its handlers last registered first: this one after the sanitizer's (imported
    # first), which may end the process with its error status, and before any stream's worker
    # starts, whose drain then runs before it (as in libcuda.so.1's exit hook)
    importlib.import_module(".sanitizer", __package__)
    atexit.register(finish_process)
