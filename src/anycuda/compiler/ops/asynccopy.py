"""Asynchronous copies (PTX ISA 9.7.9.25): cp.async and its groups, cp.async.mbarrier.arrive,
and the non-tensor cp.async.bulk with its bulk groups.

On a GPU these copies run in the background: a thread may read their destination only after
it waited for them (cp.async.wait_group / wait_all, an mbarrier phase they complete, a bulk
group's wait). Here each copy is done when it is issued, a plain copy: every read the ISA
allows sees the same bytes, so the waits and commits have nothing left to do, and an
mbarrier that a copy signals (cp.async.mbarrier.arrive, .mbarrier::complete_tx::bytes) is
signalled at once (ops/mbarrier.py). Cache levels, cache policies and prefetch sizes are
hints, and so is cp.async.bulk.prefetch.

cp.async copies 4, 8 or 16 bytes (.cg: 16) from global to shared memory; with a src-size
operand only that many are read and the rest of the destination is zero-filled, and with an
ignore-src predicate that is true none are read. The tensor forms (cp.async.bulk.tensor,
which read a CUtensorMap) are refused by name (no handler: ops/table.refusal); so are the
multicast and masked bulk forms.
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from ...ptx.modifiers import CACHE_HINT, COMPLETE_TX, PREFETCH_SIZES
from ..irutil import declare, i64
from ..types import I1, I8, I64, PTR
from . import mbarrier, memcheck
from .table import handles

_MEMCPY = "llvm.memcpy.p0i8.p0i8.i64"
_MEMSET = "llvm.memset.p0i8.i64"


def copy_bytes(b, dst, src, size):
    """Copy `size` (i64) bytes (i8* `dst`, `src`); the ISA's copies never overlap their source."""
    fn = declare(b.module, _MEMCPY, ir.VoidType(), [PTR, PTR, I64, I1])
    b.call(fn, [dst, src, size, ir.Constant(I1, 0)])


def _zero(f, dst, size):
    fn = declare(f.b.module, _MEMSET, ir.VoidType(), [PTR, I8, I64, I1])
    f.b.call(fn, [dst, ir.Constant(I8, 0), size, ir.Constant(I1, 0)])


def _operands(f, inst, least, most):
    n = len(inst.operands)
    if not least <= n <= most:
        raise f.error(f"'{inst.opcode}' takes {least} to {most} operands, got {n}")


@handles("cp.async", mods=("ca cg shared shared::cta global", CACHE_HINT, PREFETCH_SIZES))
def cp_async(f, inst):
    """`[dst], [src], cp-size{, src-size | ignore-src}{, cache-policy}`."""
    policy = "L2::cache_hint" in inst.mods
    _operands(f, inst, 3, 4 + policy)
    ops = inst.operands
    size = ops[2]
    sizes = (16,) if "cg" in inst.mods else (4, 8, 16)
    if not isinstance(size, pir.Imm) or size.value not in sizes:
        raise f.error(f"cp.async{'.cg' if 'cg' in inst.mods else ''}: the copy size must be "
                      f"{' or '.join(map(str, sizes))}")
    if not ({"shared", "shared::cta"} & set(inst.mods) and "global" in inst.mods):
        raise f.error("cp.async copies from .global to .shared")
    b = f.b
    cp = i64(size.value)
    dst, src = f.address(ops[0], "shared"), f.address(ops[1], "global")
    memcheck.check(f, src, size.value, "read", "global")
    memcheck.check(f, dst, size.value, "write", "shared")
    extra = ops[3:len(ops) - policy]
    if not extra:
        copy_bytes(f.b, dst, src, cp)
        return
    op = extra[0]
    if isinstance(op, pir.Not) or (isinstance(op, pir.Reg) and f.reg(op.name)[1] == "pred"):
        read = b.select(f.read(op, "pred"), i64(0), cp)           # ignore-src
    else:
        n = b.zext(f.read(op, "u32"), I64)
        read = b.select(b.icmp_unsigned("<", n, cp), n, cp)
    copy_bytes(f.b, dst, src, read)
    _zero(f, b.gep(dst, [read]), b.sub(cp, read))


@handles("cp.async.commit_group", "cp.async.wait_group", "cp.async.wait_all", "cp.async.bulk.commit_group",
         "cp.async.bulk.wait_group", mods="read")
def groups(f, inst):
    """Every copy is complete when it is issued: a group holds nothing to wait for."""


@handles("cp.async.mbarrier.arrive", mods="noinc shared shared::cta b64")
def mbarrier_arrive(f, inst):
    """An arrive-on the object once this thread's earlier cp.async copies complete: at once.
    Without .noinc the ISA first adds one pending arrival, which that arrival takes back:
    the object does not change."""
    ptr = mbarrier.object_pointer(f, inst, inst.operands[0])
    if "noinc" in inst.mods:
        mbarrier.arrive_on(f, ptr, i64(1))


@handles("cp.async.bulk", mods=("shared::cluster shared::cta global bulk_group", COMPLETE_TX, CACHE_HINT))
def bulk(f, inst):
    """`[dst], [src], size, [mbar]{, cache-policy}` into shared memory (the mbarrier's
    tx-count falls by size), or `[dst], [src], size{, cache-policy}` from shared to global
    memory in a bulk group. The first space modifier is the destination's (a cluster is one
    CTA here: .shared::cluster is the block's own shared memory)."""
    spaces = [m.split("::")[0] for m in inst.mods if m.split("::")[0] in ("shared", "global")]
    signals = "mbarrier::complete_tx::bytes" in inst.mods
    policy = "L2::cache_hint" in inst.mods
    want = 3 + signals + policy
    _operands(f, inst, want, want)
    if len(spaces) != 2 or spaces[0] == spaces[1] == "global" or signals == ("bulk_group" in inst.mods) \
            or signals != (spaces[0] == "shared"):
        raise f.error("cp.async.bulk: a copy into shared memory completes an mbarrier's bytes; one into global "
                      "memory is in a bulk group")
    ops = inst.operands
    b = f.b
    size = b.zext(f.read(ops[2], "u32"), I64)
    dst, src = f.address(ops[0], spaces[0]), f.address(ops[1], spaces[1])
    memcheck.check(f, src, size, "read", spaces[1], align=16)
    memcheck.check(f, dst, size, "write", spaces[0], align=16)
    if signals:
        ptr = mbarrier.object_pointer(f, inst, ops[3])
        copy_bytes(f.b, dst, src, size)
        b.store(mbarrier.update(b, b.load(ptr, align=8), tx_add=b.neg(size)), ptr, align=8)
    else:
        copy_bytes(f.b, dst, src, size)


@handles("cp.async.bulk.prefetch", mods=("L2 global", CACHE_HINT))
def bulk_prefetch(f, inst):
    """`[src], size{, cache-policy}`: a prefetch into the L2 cache, a hint."""
