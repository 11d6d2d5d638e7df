"""initcheck: a kernel's reads of global memory that nothing ever wrote.

Under ANYCUDA_SANITIZE=initcheck (`anycuda run --sanitize=initcheck`) kernels are built as for
memcheck (the general path, the mode in the cache key) and every access that memcheck would
test comes here instead (memcheck.TOOL_CHECKS). Device allocations carry a shadow: one byte
per byte of memory, 1 once the byte was written (runtime/shadow.py; copies, memsets and
library calls set it on the host side). The launch hands its code the tracked allocations as
sorted [start, end, shadow] triples (abi.LAUNCH "shadow_table"); for a global or generic access:

  - a store or an asynchronous copy's destination sets the shadow bytes of what it writes;
  - a load, an atomic or a reduction (both read the old value) or an asynchronous copy's
    source tests them first, and where one of them is 0 writes an entry into the launch's
    record of failed checks (memcheck's CHECK_LOG, `what` CHECK_UNINITIALISED) and goes on: as
    compute-sanitizer's initcheck, a report does not end the thread or fail the launch. An
    atomic or a reduction then sets them.

Addresses outside every tracked allocation (shared, local and constant memory, the modules'
variables, managed and host memory, device-side malloc blocks) count as written. Shadow bytes
are read and written with unordered atomics: threads may set the same byte at once.

Not seen: `wmma.load` and a `cp.async` with a source size operand are not tested (a strided
matrix's span holds bytes between its rows that it does not read; a copy may read fewer bytes
than it names); a `wmma.store` sets its whole span, the bytes between rows included. Texture
and surface accesses, and tensor copies, neither test nor set.
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..irutil import for_range, i32, i64, load_field, upper_bound
from ..types import I1, I8, I32, I64, PTR
from . import memcheck

FIND = "anycuda.initcheck.find"
UNWRITTEN = "anycuda.initcheck.unwritten"
WRITTEN = "anycuda.initcheck.written"
FOUND = "anycuda.initcheck.found"
TRIPLE = 3            # u64 start, end, shadow address


def check(f, ptr, size, kind: str, space: str):
    """Set (a write) or test (a read or an atomic) the shadow of the `size` bytes (an int or an
    i64 value) at i8* `ptr`; see the module docstring."""
    if space not in ("", "global"):
        return
    b = f.b
    a = b.ptrtoint(ptr, I64)
    n = i64(size) if isinstance(size, int) else size
    if kind != "write" and _reads_all_it_names(f.inst):
        unwritten = b.call(_unwritten_fn(b.module), [f.launch_ptr(), a, n])
        with b.if_then(unwritten, likely=False):
            site = memcheck.record_site(f, kind, space)
            indices = [f.special(pir.SpecialReg(name, c)) for name in ("tid", "ctaid") for c in "xyz"]
            b.call(_found_fn(b.module), [f.launch_ptr(), a, b.trunc(n, I32), i32(site),
                                         i32(abi.CHECK_UNINITIALISED)] + indices)
    if kind != "read":
        b.call(_written_fn(b.module), [f.launch_ptr(), a, n])


memcheck.TOOL_CHECKS["initcheck"] = check


def _reads_all_it_names(inst) -> bool:
    """Whether the instruction reads every byte of the span its check names (see the module
    docstring for those that do not)."""
    if inst.opcode == "wmma.load":
        return False
    if inst.opcode == "cp.async":
        return len(inst.operands) - ("L2::cache_hint" in inst.mods) <= 3
    return True


@memcheck.made_once(FIND, ir.FunctionType(I64.as_pointer(), [PTR, I64]))
def _find_fn(fn):
    """i64* find(i8* launch, i64 address): the triple of the tracked allocation holding
    `address` (found by bisection over the sorted starts), or null."""
    launch, address = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    table = b.inttoptr(load_field(b, launch, abi.LAUNCH["shadow_table"], I64), I64.as_pointer())
    lo = upper_bound(b, table, load_field(b, launch, abi.LAUNCH["shadow_count"], I64), address, TRIPLE)
    null = ir.Constant(I64.as_pointer(), None)
    found = fn.append_basic_block("found")
    b.cbranch(b.icmp_unsigned("==", lo, i64(0)), _returning(fn, null), found)
    b.position_at_end(found)
    triple = b.gep(table, [b.mul(b.sub(lo, i64(1)), i64(TRIPLE))])
    inside = b.icmp_unsigned("<", address, b.load(b.gep(triple, [i64(1)])))
    b.ret(b.select(inside, triple, null))


def _returning(fn, value):
    block = fn.append_basic_block("answer")
    ir.IRBuilder(block).ret(value)
    return block


def _shadow_span(b, fn):
    """(i8* shadow of the first byte, i64 bytes inside the allocation) of fn's (launch, start,
    size), branching to a `void`/`0` answer where `start` is in no tracked allocation."""
    launch, start, size = fn.args
    triple = b.call(_find_fn(fn.module), [launch, start])
    tracked, untracked = fn.append_basic_block("tracked"), fn.append_basic_block("untracked")
    returns = fn.function_type.return_type
    if returns == ir.VoidType():
        ir.IRBuilder(untracked).ret_void()
    else:
        ir.IRBuilder(untracked).ret(ir.Constant(returns, 0))
    b.cbranch(b.icmp_unsigned("==", b.ptrtoint(triple, I64), i64(0)), untracked, tracked)
    b.position_at_end(tracked)
    lo, hi, shadow = (b.load(b.gep(triple, [i64(k)])) for k in range(TRIPLE))
    end = b.add(start, size)
    end = b.select(b.icmp_unsigned("<", end, hi), end, hi)      # past the end is memcheck's to report
    return b.inttoptr(b.add(shadow, b.sub(start, lo)), PTR), b.sub(end, start)


@memcheck.made_once(UNWRITTEN, ir.FunctionType(I1, [PTR, I64, I64]))
def _unwritten_fn(fn):
    """i1 unwritten(i8* launch, i64 start, i64 size): whether a byte of [start, start + size)
    inside a tracked allocation was never written."""
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    shadow, count = _shadow_span(b, fn)
    yes = _returning(fn, ir.Constant(I1, 1))

    with for_range(b, i64(0), count) as i:
        byte = b.load_atomic(b.gep(shadow, [i]), "unordered", 1)
        go_on = fn.append_basic_block("written")
        b.cbranch(b.icmp_unsigned("==", byte, ir.Constant(I8, 0)), yes, go_on)
        b.position_at_end(go_on)
    b.ret(ir.Constant(I1, 0))


@memcheck.made_once(WRITTEN, ir.FunctionType(ir.VoidType(), [PTR, I64, I64]))
def _written_fn(fn):
    """void written(i8* launch, i64 start, i64 size): the bytes of [start, start + size) inside
    a tracked allocation are written."""
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    shadow, count = _shadow_span(b, fn)
    with for_range(b, i64(0), count) as i:
        b.store_atomic(ir.Constant(I8, 1), b.gep(shadow, [i]), "unordered", 1)
    b.ret_void()


@memcheck.made_once(FOUND, ir.FunctionType(ir.VoidType(), [PTR, I64, I32, I32, I32] + [I32] * 6))
def _found_fn(fn):
    """void found(i8* launch, i64 address, i32 size, i32 site, i32 what, i32 tid x y z, i32 ctaid x y z):
    the entry of an uninitialised read, into the launch's record; the launch goes on."""
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    memcheck.log_entry(b, *fn.args)
    b.ret_void()
