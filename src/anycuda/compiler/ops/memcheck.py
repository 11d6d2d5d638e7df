"""memcheck: every memory access of a checked kernel is tested before it is made.

Under ANYCUDA_SANITIZE=memcheck (`anycuda run --sanitize=memcheck`) each load, store, atomic,
reduction, asynchronous copy (cp.async, cp.async.bulk), ldmatrix/stmatrix row (of the lanes
that name one) and wmma.load/store matrix (from its first element to its last, with the
stride) is lowered with a test in front of it:

  - .shared: the address lies in the block's shared window (static + dynamic bytes; the
    static bytes rounded up to 16, so up to 15 bytes of padding after them pass);
  - .local: in the thread's own .local window (its frame, or its stack slot and those of the
    device functions it called);
  - .const: in one of the module's constant variables;
  - .global: in a live allocation: the runtime hands the launch a flat, sorted copy of the
    allocation table (and of the modules' variables and earlier launches' device-side malloc
    blocks, and a cooperative launch's grid workspace), searched here by bisection; else in a
    block this launch's malloc gave (a record the launch's threads append to, searched in order);
  - generic: in any of the windows above or in the table;
  - and for every space: the address is a multiple of the access's size (a vector's whole
    size, as the ISA requires).

A failed test writes an entry (address, size, which access, thread and block) into the launch's
record of failed checks (abi.CHECK_LOG), marks the launch failed (CUDA_ERROR_ILLEGAL_ADDRESS, or
CUDA_ERROR_MISALIGNED_ADDRESS) and ends the thread before the access is made: nothing is read or
written, no fault is taken. The block's other threads run on and report their own failures;
the workers start no more blocks once a launch has failed. `Site`s say which access an entry
names; the runtime turns the record into compute-sanitizer's report (runtime/sanitizer.py).

Checked kernels run on the general path only (simt/ rounds over the step function): the
vector paths (warp regions, warp runs, known-branch probes, block programs) are not made for
them, so the step function's handlers are the one place that is instrumented. The mode is part
of the compile cache's key (pipeline.compile_kernel). A kernel compiled for another tool
(ANYCUDA_SANITIZE=initcheck) is built the same way, and `check` hands each access to that
tool's check instead (TOOL_CHECKS); under synccheck accesses are not tested (its checks are
the block scheduler's: compiler/simt/synccheck.py).

Not checked: .param accesses (kernel parameters are read-only values for the launch; a device
function's parameter buffers are its own stack slots), texture and surface instructions,
tensor copies (cp.async.bulk.tensor), prefetches (which access nothing); mbarrier objects are
tested by mbarrier.py itself, in every mode. The modules' variables are one interval each and
lie side by side: an access past one variable into the next is not caught. Device-side free
is not seen: a malloc block stays addressable after it (use after free is not caught).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..irutil import field_ptr, i32, i64, internal_function, load_field, span_inside, upper_bound
from ..types import I1, I32, I64, PTR

TOOLS = ("memcheck", "initcheck", "racecheck", "synccheck")
# the accesses of a kernel compiled for another tool go to that tool's check (same arguments
# as `check`), which its module registers here (initcheck.py)
TOOL_CHECKS = {}
# a tool whose check follows memcheck's (racecheck.py) registers it here: it gets the access's
# i64 address and size once they passed memcheck's test, and the access's site number
AFTER_BOUNDS = {}

FOUND = "anycuda.memcheck.found"
IN_TABLE = "anycuda.memcheck.in_table"
IN_ALLOCATIONS = "anycuda.memcheck.in_allocations"
IN_HEAP = "anycuda.memcheck.in_heap"
HEAP_ADD = "anycuda.memcheck.heap_add"


def mode(asked: str = None) -> str:
    """The sanitizer tool asked for (by ANYCUDA_SANITIZE unless `asked`; '' when none).
    ValueError for a tool anycuda does not have, so that a misspelt request never runs unchecked."""
    tool = (os.environ.get("ANYCUDA_SANITIZE", "") if asked is None else asked).strip().lower()
    if tool in ("", "0", "none", "off"):
        return ""
    if tool in TOOLS:
        return tool
    raise ValueError(f"ANYCUDA_SANITIZE={tool}: unknown tool (anycuda's sanitizer has {', '.join(TOOLS)})")


@dataclass(frozen=True)
class Site:
    """One checked access of a unit: its kind (read, write, atomic), state space ('' generic),
    the function it is in, its instruction's index in that function's body, the PTX line, and
    the source line a `.loc` put in force (file, line), when there is one."""
    kind: str
    space: str
    function: str
    position: int
    ptx_line: int
    source: Optional[tuple] = None


def check(f, ptr, size, kind: str, space: str, align: int = None):
    """Test the access of `size` bytes (an int or an i64 value) at i8* `ptr` before it is made,
    where the module is checked; the failing thread ends here (see the module docstring)."""
    if not f.mc.checked or space == "param":
        return
    if f.mc.tool in TOOL_CHECKS:
        return TOOL_CHECKS[f.mc.tool](f, ptr, size, kind, space)
    if f.mc.tool == "synccheck":        # its checks are the scheduler's (compiler/simt/synccheck.py)
        return
    b = f.b
    a = b.ptrtoint(ptr, I64)
    n = i64(size) if isinstance(size, int) else size
    end = b.add(a, n)
    inside = in_windows(b, a, n, _windows(f, space))
    if space in ("", "global"):
        # (the tables compare ends: an end past 2**64 wraps to a small one, which is in none)
        in_table = b.call(_in_table_fn(b.module), [f.launch_ptr(), a, end])
        inside = b.or_(inside, b.and_(in_table, b.icmp_unsigned(">=", end, a)))
    align = align or (size if isinstance(size, int) else 1)
    aligned = b.icmp_unsigned("==", b.and_(a, i64(align - 1)), i64(0)) if align > 1 else ir.Constant(I1, 1)
    good = f.fn.append_basic_block("checked")
    bad = f.fn.append_basic_block("check.failed")
    branch = b.cbranch(b.and_(inside, aligned), good, bad)
    branch.set_weights([1000, 1])
    b.position_at_end(bad)
    # a misaligned access is reported as misaligned even where it also leaves its allocation,
    # as a GPU faults on it (cudaErrorMisalignedAddress) and compute-sanitizer names it
    what = b.select(aligned, i32(abi.CHECK_OUT_OF_BOUNDS), i32(abi.CHECK_MISALIGNED))
    site = record_site(f, kind, space)
    indices = [f.special(pir.SpecialReg(name, c)) for name in ("tid", "ctaid") for c in "xyz"]
    b.call(_found_fn(b.module), [f.launch_ptr(), a, b.trunc(n, I32), i32(site), what] + indices)
    f.emit_exit()
    b.position_at_end(good)
    if f.mc.tool in AFTER_BOUNDS:
        AFTER_BOUNDS[f.mc.tool](f, a, n, kind, space, record_site(f, kind, space))


def _windows(f, space: str) -> list:
    if space == "global":
        return []
    if space in ("shared", "local", "const"):
        return f.space_windows(space)
    return [w for s in ("shared", "local", "const", "param") for w in f.space_windows(s)]


def in_windows(b, a, n, windows):
    """i1: the `n` bytes (an int or an i64) at i64 `a` lie inside one of the [lo, hi) windows."""
    inside = ir.Constant(I1, 0)
    for lo, hi in windows:
        inside = b.or_(inside, span_inside(b, a, n, lo, hi))
    return inside


def record_site(f, kind: str, space: str, caller: bool = False) -> int:
    """The number of a new Site for the instruction being lowered (what its log entries name);
    with `caller`, code inlined from CUDA's own headers (a warp intrinsic's line there says
    nothing of the program) is named by the line of its call."""
    inst = f.inst
    debug = getattr(inst, "debug", None)
    source = None
    if debug is not None:
        file, line = debug.file, debug.line
        if caller and debug.inlined_at and toolkit_header(f.mc.ptx.files.get(file, "")):
            file, line = debug.inlined_at[:2]
        source = (f.mc.ptx.files.get(file, f"<file {file}>"), line)
    f.mc.check_sites.append(Site(kind, space, f.pfn.name, f.inst_pos, inst.loc.line, source))
    return len(f.mc.check_sites) - 1


def toolkit_header(path: str) -> bool:
    """Whether a `.file` is one of the CUDA toolkit's headers (where nvcc's intrinsics live)."""
    return "/include/" in path and ("cuda" in path.lower() or "/targets/" in path)


def note_malloc(f, p, size) -> None:
    """In a checked kernel, record the block device-side malloc gave (i8* `p`, i64 `size`):
    its accesses are then in bounds, in this launch and (the runtime keeps it) later ones."""
    if f.mc.checked:
        f.b.call(_heap_add_fn(f.b.module), [f.launch_ptr(), f.b.ptrtoint(p, I64), size])


def made_once(name: str, function_type: ir.FunctionType):
    """The decorated function emits the body of an internal helper of the checked code; the
    result gives that helper of a module, made at its first use there."""
    def made(emit):
        return lambda module: internal_function(module, name, function_type, emit)
    return made


@made_once(IN_TABLE, ir.FunctionType(I1, [PTR, I64, I64]))
def _in_table_fn(fn):
    """i1 in_table(i8* launch, i64 start, i64 end): whether [start, end) lies inside an
    allocation (in_allocations) or a block device-side malloc gave in this launch (in_heap)."""
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    heap = fn.append_basic_block("heap")
    b.cbranch(b.call(_in_allocations_fn(fn.module), fn.args), _answer(fn, 1), heap)
    b.position_at_end(heap)
    b.ret(b.call(_in_heap_fn(fn.module), fn.args))


@made_once(IN_ALLOCATIONS, ir.FunctionType(I1, [PTR, I64, I64]))
def _in_allocations_fn(fn):
    """i1 in_allocations(i8* launch, i64 start, i64 end): whether [start, end) lies inside one
    interval of the launch's table (sorted, disjoint [lo, hi) pairs), found by bisection."""
    launch, start, end = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    pairs = b.bitcast(b.inttoptr(load_field(b, launch, abi.LAUNCH["check_table"], I64), PTR), I64.as_pointer())
    lo = upper_bound(b, pairs, load_field(b, launch, abi.LAUNCH["check_count"], I64), start, 2)
    found = fn.append_basic_block("found")
    b.cbranch(b.icmp_unsigned("==", lo, i64(0)), _answer(fn, 0), found)
    b.position_at_end(found)
    last = b.mul(b.sub(lo, i64(1)), i64(2))
    a_lo = b.load(b.gep(pairs, [last]))
    a_hi = b.load(b.gep(pairs, [b.add(last, i64(1))]))
    b.ret(b.and_(b.icmp_unsigned("<=", a_lo, start), b.icmp_unsigned("<=", end, a_hi)))


@made_once(IN_HEAP, ir.FunctionType(I1, [PTR, I64, I64]))
def _in_heap_fn(fn):
    """i1 in_heap(i8* launch, i64 start, i64 end): whether [start, end) lies inside a block of
    the launch's malloc record (searched in order: device-side malloc is rare)."""
    launch, start, end = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    heap = b.bitcast(b.inttoptr(load_field(b, launch, abi.LAUNCH["check_heap"], I64), PTR), I64.as_pointer())
    count = b.load_atomic(heap, "monotonic", 8)
    room = b.load(b.gep(heap, [i64(1)]))
    count = b.select(b.icmp_unsigned("<", count, room), count, room)
    entry = b.block
    loop, probe = fn.append_basic_block("loop"), fn.append_basic_block("probe")
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(I64, "i")
    i.add_incoming(i64(0), entry)
    b.cbranch(b.icmp_unsigned("<", i, count), probe, _answer(fn, 0))
    b.position_at_end(probe)
    at = b.add(i64(abi.CHECK_HEAP_HEADER // 8), b.mul(i, i64(2)))
    lo, hi = b.load(b.gep(heap, [at])), b.load(b.gep(heap, [b.add(at, i64(1))]))
    inside = b.and_(b.icmp_unsigned("<=", lo, start), b.icmp_unsigned("<=", end, hi))
    i.add_incoming(b.add(i, i64(1)), probe)
    b.cbranch(inside, _answer(fn, 1), loop)


@made_once(HEAP_ADD, ir.FunctionType(ir.VoidType(), [PTR, I64, I64]))
def _heap_add_fn(fn):
    """void heap_add(i8* launch, i64 start, i64 size): a block device-side malloc gave, into
    the launch's record while it has room (a null block is not recorded)."""
    launch, start, size = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    heap = b.bitcast(b.inttoptr(load_field(b, launch, abi.LAUNCH["check_heap"], I64), PTR), I64.as_pointer())
    with b.if_then(b.icmp_unsigned("!=", start, i64(0))):
        index = b.atomic_rmw("add", heap, i64(1), "monotonic")
        with b.if_then(b.icmp_unsigned("<", index, b.load(b.gep(heap, [i64(1)])))):
            at = b.add(i64(abi.CHECK_HEAP_HEADER // 8), b.mul(index, i64(2)))
            b.store(start, b.gep(heap, [at]))
            b.store(b.add(start, size), b.gep(heap, [b.add(at, i64(1))]))
    b.ret_void()


def _answer(fn, value: int):
    block = fn.append_basic_block(f"answer{value}")
    ir.IRBuilder(block).ret(ir.Constant(I1, value))
    return block


@made_once(FOUND, ir.FunctionType(ir.VoidType(), [PTR, I64, I32, I32, I32] + [I32] * 6))
def _found_fn(fn):
    """void found(i8* launch, i64 address, i32 size, i32 site, i32 what, i32 tid x y z, i32 ctaid x y z):
    count the failure, write its entry while the record has room, fail the launch (the first
    failure's code wins)."""
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    launch, what = fn.args[0], fn.args[4]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    code = b.select(b.icmp_unsigned("==", what, i32(abi.CHECK_MISALIGNED)),
                    i32(abi.LAUNCH_ERR_MISALIGNED), i32(abi.LAUNCH_ERR_ILLEGAL_ADDRESS))
    b.cmpxchg(field_ptr(b, launch, abi.LAUNCH["error"], I32), i32(0), code, "seq_cst", "seq_cst")
    log_entry(b, *fn.args)
    b.ret_void()


def log_entry(b, launch, address, size, site, what, *indices) -> None:
    """Count a failed check in the launch's record and write its entry while there is room
    (the arguments as `found`'s)."""
    log = b.inttoptr(load_field(b, launch, abi.LAUNCH["check_log"], I64), PTR)
    with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(log, I64), i64(0))):
        index = b.atomic_rmw("add", b.bitcast(log, I64.as_pointer()), i64(1), "monotonic")
        with b.if_then(b.icmp_unsigned("<", index, load_field(b, log, 8, I64))):
            entry = b.gep(log, [b.add(i64(abi.CHECK_LOG_HEADER), b.mul(index, i64(abi.CHECK_ENTRY_BYTES)))])
            values = [("address", address), ("size", size), ("site", site), ("what", what)] + \
                list(zip(("tid_x", "tid_y", "tid_z", "ctaid_x", "ctaid_y", "ctaid_z"), indices))
            for name, v in values:
                b.store(v, field_ptr(b, entry, abi.CHECK_ENTRY[name], v.type))
