"""The sanitizer's runtime side: what a checked launch is handed, and compute-sanitizer's report.

A checked kernel (compiler/ops/memcheck.py) tests its accesses against a flat copy of the
allocation table, made here once per change of the table (the device allocations, the
modules' variables and what earlier launches' device-side malloc gave, as sorted [start, end)
pairs), and writes each failed test into a record that the launch hands it. A launch is
checked when its kernel was compiled checked, whatever the environment says by then. After
the launch `report_launch` prints the record on stderr in compute-sanitizer's format
("========= Invalid __global__ write of size 4 bytes" ...), then the launching host code's
frames, and gives the error the launch ends with. A `cuMemFree` of a pointer that is not an
allocation's start is reported as the driver call's error; at the process's end `finish`
reports the allocations still live (with --leak-check full) and the summary ("=========
ERROR SUMMARY: N errors"), and ends the process with --error-exitcode's status when errors
were found. initcheck's launches and reports are initcheck.py's, on top of CheckedLaunch;
racecheck's hazards are reported by racereport.py, and its summary is a "RACECHECK SUMMARY" line;
synccheck's barrier and warp-collective errors by syncreport.py, counted in the ERROR SUMMARY.

Settings come from the environment, so that `anycuda run` hands them to the program's process:
ANYCUDA_SANITIZE (the tool), ANYCUDA_SANITIZE_LEAK_CHECK (full or no),
ANYCUDA_SANITIZE_ERROR_EXITCODE (a status), ANYCUDA_SANITIZE_PRINT_LIMIT (reports printed per
launch; every error is counted).

A report's "at kernel+0x..": the offset counts PTX instructions in the function's body (16
bytes each, as SASS's), since no machine code of NVIDIA's exists here; the file and line are
the `.loc` in force (nvcc -lineinfo or -G), else the PTX module's name and line.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading

import numpy as np

from ..compiler import abi
from ..compiler.ops import memcheck, racecheck
from . import memory, racereport
from .names import readable
from .errors import CudaError, CUresult

PREFIX = "========="
DEFAULT_PRINT_LIMIT = 100
_SPACE_NAMES = {"global": "__global__", "shared": "__shared__", "local": "__local__", "const": "__constant__",
                "": "__global__"}
_KINDS = {"read": "read", "write": "write", "atomic": "atomic"}

_lock = threading.Lock()
_state = {"errors": 0, "finished": False}
_variables = {}                  # start -> end of the modules' variables (addressable, not allocations)
_device_heap = {}                # start -> end of what kernels' malloc gave (device-side free is not seen)
_flat = {"version": None, "pairs": np.zeros(2, dtype=np.uint64), "count": 0}


def tool() -> str:
    """The tool in force ('' when none): memcheck.mode, read once per question."""
    return memcheck.mode()


def errors_found() -> int:
    return _state["errors"]


def count_errors(n: int = 1) -> None:
    with _lock:
        _state["errors"] += n


def print_lines(lines) -> None:
    sys.stderr.write("".join(f"{PREFIX} {line}\n" if line else f"{PREFIX}\n" for line in lines))
    sys.stderr.flush()


# ---------------------------------------------------------------- what a checked launch reads

def add_variables(ranges) -> None:
    """A module's variables, (address, size) each: accesses to them are in bounds."""
    with _lock:
        for start, size in ranges:
            if size > 0:
                _variables[int(start)] = int(start) + int(size)
        _flat["version"] = None


def _flat_table() -> np.ndarray:
    """The live allocations and the modules' variables as sorted [start, end) u64 pairs."""
    version = (memory.table.version, len(_variables), len(_device_heap))
    with _lock:
        if _flat["version"] != version:
            spans = [(a.ptr, a.end) for a in memory.table.allocations()] + list(_variables.items())
            spans += [span for span in _device_heap.items() if memory.table.lookup(span[0]) is None]
            spans.sort()
            _flat["pairs"] = np.array(spans or [(0, 0)], dtype=np.uint64).reshape(-1)
            _flat["count"] = len(spans)
            _flat["version"] = version
        return _flat["pairs"], _flat["count"]


_records = threading.local()      # each launching thread's records, emptied for each of its launches
LOG_ENTRIES = 4096
HEAP_ENTRIES = 4096


def _empty_record(name: str, header: int, entries: int, entry_bytes: int) -> np.ndarray:
    record = getattr(_records, name, None)
    if record is None:
        record = np.zeros((header + entries * entry_bytes) // 8, np.uint64)
        record[1] = entries
        setattr(_records, name, record)
    record[0] = 0         # (the entries past the count are never read)
    return record


class CheckedLaunch:
    """The table and the record of failed checks of one launch (kept alive while it runs; a
    launch runs to its end on the thread that made it, so each thread needs one record)."""

    host_frames = None          # the launching host code's frames, taken when it was queued

    def __init__(self, L):
        self.pairs, count = _flat_table()
        L.check_table = self.pairs.ctypes.data
        L.check_count = count
        self.log = _empty_record("log", abi.CHECK_LOG_HEADER, LOG_ENTRIES, abi.CHECK_ENTRY_BYTES)
        L.check_log = self.log.ctypes.data
        self.heap = _empty_record("heap", abi.CHECK_HEAP_HEADER, HEAP_ENTRIES, 16)
        L.check_heap = self.heap.ctypes.data

    def keep_heap(self) -> None:
        """After the launch: what its threads' malloc gave stays addressable for later launches."""
        n = min(int(self.heap[0]), HEAP_ENTRIES)
        if n:
            spans = self.heap[abi.CHECK_HEAP_HEADER // 8:abi.CHECK_HEAP_HEADER // 8 + 2 * n].reshape(-1, 2)
            with _lock:
                _device_heap.update((int(lo), int(hi)) for lo, hi in spans)

    def allow(self, L, start: int, size: int) -> None:
        """Memory of this launch alone that its code may access (a cooperative launch's grid
        workspace): added to its copy of the table."""
        spans = self.pairs[:2 * int(L.check_count)].reshape(-1, 2)
        at = int(np.searchsorted(spans[:, 0], start))
        self.pairs = np.insert(spans, at, (start, start + size), axis=0).reshape(-1)
        L.check_table = self.pairs.ctypes.data
        L.check_count = int(L.check_count) + 1

    def failures(self) -> int:
        """How many failed checks the launch recorded (racecheck's hazards not counted)."""
        return int(self.log[0]) - self.hazards

    hazards = 0

    def report_races(self, kernel: str, sites, source_name: str, L) -> None:
        """After a racechecked launch: its hazards, reported (runtime/racereport.py)."""
        entries = self.entries()
        self.hazards = sum(1 for e in entries if racecheck.is_race(e["what"]))
        if self.hazards:
            racereport.report_launch(kernel, sites, entries, source_name, L)

    def entries(self) -> list:
        """The recorded failures as dicts of abi.CHECK_ENTRY's fields."""
        n = min(int(self.log[0]), int(self.log[1]))
        raw = self.log.view(np.uint8)[abi.CHECK_LOG_HEADER:abi.CHECK_LOG_HEADER + n * abi.CHECK_ENTRY_BYTES]
        out = []
        for i in range(n):
            e = raw[i * abi.CHECK_ENTRY_BYTES:(i + 1) * abi.CHECK_ENTRY_BYTES]
            fields = {name: int.from_bytes(e[off:off + (8 if name == "address" else 4)].tobytes(), "little")
                      for name, off in abi.CHECK_ENTRY.items()}
            out.append(fields)
        return out


# ---------------------------------------------------------------- reports

def _nearest(address: int, variables=()):
    """(allocation, distance, 'before' or 'after') of the allocation (or module variable)
    nearest to `address`, or None."""
    best = None
    for a in list(memory.table.allocations()) + list(variables):
        if address < a.ptr:
            d, side = a.ptr - address, "before"
        else:
            d, side = address - a.end, "after"
        if best is None or d < best[1]:
            best = (a, d, side)
    return best


def code_and_thread(kernel: str, site: memcheck.Site, entry: dict, source_name: str) -> list:
    """A report's lines naming the access's code (function, offset, line) and its thread."""
    where = f"{site.source[0]}:{site.source[1]}" if site.source else f"{source_name}:{site.ptx_line}"
    function = readable(site.function)
    if site.function != kernel:
        function += f" (called from {readable(kernel)})"
    return [f"    at {function}+0x{16 * site.position:x} in {where}",
            f"    by thread ({entry['tid_x']},{entry['tid_y']},{entry['tid_z']}) "
            f"in block ({entry['ctaid_x']},{entry['ctaid_y']},{entry['ctaid_z']})"]


def access_report(kernel: str, site: memcheck.Site, entry: dict, source_name: str, variables=()) -> list:
    """compute-sanitizer's lines for one failed check (`variables`: the module's, as
    memory.Allocation of kind "module")."""
    space = _SPACE_NAMES[site.space]
    address, size = entry["address"], entry["size"]
    misaligned = entry["what"] == abi.CHECK_MISALIGNED
    lines = [f"Invalid {space} {_KINDS[site.kind]} of size {size} bytes"] + \
        code_and_thread(kernel, site, entry, source_name)
    if misaligned:
        lines.append(f"    Address 0x{address:x} is misaligned")
    else:
        lines.append(f"    Address 0x{address:x} is out of bounds")
        near = _nearest(address, variables) if site.space in ("", "global") else None
        if near is not None:
            a, d, side = near
            lines.append(f"    and is {d:,} bytes {side} the nearest allocation at 0x{a.ptr:x} of size {a.size:,} bytes")
    return lines + [""]


SHIM_NAME = "libcuda.so.1"
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def host_backtrace(limit: int = 16) -> list:
    """The launching host code's frames, innermost first: a native program's below anycuda's
    libcuda.so.1 (glibc's backtrace; names where the program was linked with -rdynamic), else
    the Python program's outside anycuda."""
    libc = ctypes.CDLL(None)
    libc.backtrace_symbols.restype = ctypes.POINTER(ctypes.c_char_p)
    frames = (ctypes.c_void_p * 128)()
    n = libc.backtrace(frames, len(frames))
    names = libc.backtrace_symbols(frames, n)
    native = [names[i].decode("utf-8", "replace") for i in range(n)] if names else []
    if names:
        libc.free(names)
    below = [i for i, name in enumerate(native) if SHIM_NAME in name]
    if below:
        return native[below[-1] + 1:][:limit]
    import traceback
    python = [f for f in reversed(traceback.extract_stack()) if not f.filename.startswith(_PACKAGE)]
    return [f"{f.filename}:{f.lineno} ({f.name})" for f in python[:limit]]


class QueuedRecord(bytes):
    """A checked launch's record as it was queued, with the host frames that queued it: the
    launch itself runs later on a stream's worker, whose stack says nothing of the program."""
    host_frames = None


def queued_record(record: bytes) -> QueuedRecord:
    out = QueuedRecord(record)
    out.host_frames = host_backtrace()
    return out


def launch_frames(checked: CheckedLaunch) -> list:
    """The host frames a report of `checked` names: those saved when the launch was queued."""
    return checked.host_frames if checked.host_frames is not None else host_backtrace()


def report_launch(kernel: str, sites, checked: CheckedLaunch, source_name: str, L, variables=()) -> CudaError:
    """Print the failed checks of launch `L`; the error the launch ends with. `variables`:
    the kernel's module variables (memory.Allocation), which an access may have meant too."""
    entries = [e for e in checked.entries() if not racecheck.is_race(e["what"])]
    limit = int(os.environ.get("ANYCUDA_SANITIZE_PRINT_LIMIT", DEFAULT_PRINT_LIMIT))
    lines = []
    for entry in entries[:limit]:
        lines += access_report(kernel, sites[entry["site"]], entry, source_name, variables)
    total = checked.failures()
    if total > len(entries[:limit]):
        lines.append(f"({total - len(entries[:limit])} more errors of kernel {readable(kernel)} not printed)")
    misaligned = bool(entries) and entries[0]["what"] == abi.CHECK_MISALIGNED
    code = CUresult.CUDA_ERROR_MISALIGNED_ADDRESS if misaligned else CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    lines.append(f"Program hit {code.name} (error {int(code)}) in kernel {readable(kernel)}")
    lines.append("    Saved host backtrace up to driver entry point at kernel launch time")
    lines += [f"        Host Frame: {frame}" for frame in launch_frames(checked)]
    lines.append("")
    count_errors(total)
    print_lines(lines)
    what = f"{total} invalid memory access{'es' if total > 1 else ''} found by memcheck"
    if not entries:
        return CudaError(code, f"kernel {kernel}: {what}")
    e = entries[0]        # named as an unchecked launch names its fault: linear block and thread
    block = e["ctaid_x"] + L.grid_x * (e["ctaid_y"] + L.grid_y * e["ctaid_z"])
    thread = e["tid_x"] + L.block_x * (e["tid_y"] + L.block_y * e["tid_z"])
    return CudaError(code, f"kernel {kernel}, block {block}, thread {thread}: "
                           f"{'misaligned' if misaligned else 'invalid'} memory access at address "
                           f"0x{e['address']:x} ({what})")


def report_api_error(call: str, error: CudaError) -> None:
    """A driver call that failed on a bad pointer (cuMemFree of one that is not an allocation's start)."""
    if not tool():
        return
    count_errors()
    print_lines([f"Program hit {error.code.name} (error {int(error.code)}) due to \"{error}\" "
            f"on CUDA API call to {call}.", ""])


def leaks() -> list:
    """The device allocations still live (what --leak-check full reports)."""
    return [a for a in memory.table.allocations() if a.kind in ("device", "managed")]


def finish() -> int:
    """At the process's end: the leak report (--leak-check full) and the summary, once. Returns
    the status the process should end with when errors were found and --error-exitcode asks
    for one, else None."""
    with _lock:
        if _state["finished"] or not tool():
            return None
        _state["finished"] = True
    lines = []
    if os.environ.get("ANYCUDA_SANITIZE_LEAK_CHECK", "no") == "full":
        found = leaks()
        for a in found:
            lines += [f"Leaked {a.size:,} bytes at 0x{a.ptr:x}", ""]
        if found:
            lines.append(f"LEAK SUMMARY: {sum(a.size for a in found):,} bytes leaked in {len(found)} allocations")
        count_errors(len(found))
    n = errors_found() + racereport.hazards_found()
    if tool() == "racecheck":
        lines.append(racereport.summary())
    else:
        lines.append(f"ERROR SUMMARY: {n} error{'s' if n != 1 else ''}")
    print_lines(lines)
    status = os.environ.get("ANYCUDA_SANITIZE_ERROR_EXITCODE")
    return int(status) if n and status else None


def finish_process() -> None:
    """`finish`, then end the process with --error-exitcode's status where it applies (the
    program's buffered output is written first)."""
    status = finish()
    if status is not None:
        sys.stdout.flush()
        ctypes.CDLL(None).fflush(None)
        os._exit(status)


atexit.register(finish_process)      # a Python program's end (the library's is shim/build.py's exit hook)
