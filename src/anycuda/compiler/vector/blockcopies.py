"""Asynchronous copies in block programs (blockprograms.py): cp.async and its groups.

Here a copy is complete when it is issued (ops/asynccopy.py: every read the ISA allows sees the
same bytes, and the waits have nothing left to wait for), so in a block program cp.async is a
plain copy of each lane's 4, 8 or 16 bytes from global to shared memory: where the lanes'
sources and destinations are each one run of consecutive pieces (a tile's rows copied 16 bytes
a lane, as the samples' async-copy GEMMs and `cuda::memcpy_async` write it), one load and one
store of the warp's whole span, else lane after lane. commit_group, wait_group and wait_all
are nothing. Left to the rounds: a source size that is a register or below the copy's size,
an ignore-src predicate (zero fills), a cache policy, and cp.async.mbarrier.arrive (block
programs take no mbarrier).
"""
from __future__ import annotations

from dataclasses import replace

from llvmlite import ir

from ...ptx import ir as pir
from ...ptx.modifiers import PREFETCH_SIZES, words
from ..irutil import either, i32
from ..ops.asynccopy import copy_bytes
from ..types import I32, I64, PTR
from .warpruns import NotVectorisable

SIZES = (4, 8, 16)
TAKES = {
    "cp.async": words("ca cg shared global", PREFETCH_SIZES),
    **dict.fromkeys(("cp.async.commit_group", "cp.async.wait_group", "cp.async.wait_all"), frozenset()),
}


def _cp_async(w, st):
    size = st.operands[2] if len(st.operands) in (3, 4) else None
    if not isinstance(size, pir.Imm) or size.value not in SIZES or not _reads_all(st.operands[3:], size.value):
        raise NotVectorisable("cp.async with a source size below its size or an ignore-src predicate")
    size = size.value
    w.prepare_store()
    # (each operand in its own space: the instruction names both)
    srcs, src_shape = w.access(replace(st, mods=("global",)), st.operands[1])
    dsts, dst_shape = w.access(replace(st, mods=("shared",)), st.operands[0])
    b = w.b
    if any(s is None or s.stride != size for s in (src_shape, dst_shape)):
        return _lane_by_lane(w, srcs, dsts, size)
    cond = None
    for s in (src_shape, dst_shape):
        if s.exact is not None:
            cond = s.exact if cond is None else b.and_(cond, s.exact)
    if w.mask is not None:
        every = w._every_lane()
        cond = every if cond is None else b.and_(cond, every)
    span = ir.VectorType(I32, w.lanes * size // 4)

    def whole():
        value = b.load(b.inttoptr(src_shape.base, span.as_pointer()), align=4)
        b.store(value, b.inttoptr(dst_shape.base, span.as_pointer()), align=4)
    if cond is None:
        return whole()
    either(b, cond, whole, lambda: _lane_by_lane(w, srcs, dsts, size))


def _reads_all(extra, size) -> bool:
    """Whether a copy's operands after its size read the whole piece: none, or a source size
    that is a number at least the copy's (nvcc writes `cp.async.cg.shared.global [d], [s], 16,
    16;` for `__pipeline_memcpy_async` of 16 bytes)."""
    return not extra or isinstance(extra[0], pir.Imm) and extra[0].value >= size


def _lane_by_lane(w, srcs, dsts, size):
    """Each lane of the mask copies its own piece."""
    b = w.b
    for lane in range(w.lanes):
        def copy(lane=lane):
            dst, src = (b.inttoptr(b.extract_element(v, i32(lane)), PTR) for v in (dsts, srcs))
            copy_bytes(b, dst, src, ir.Constant(I64, size))
        if w.mask is None:
            copy()
        else:
            with b.if_then(b.extract_element(w.mask, i32(lane))):
                copy()


def _nothing(w, st):
    """A group's copies are complete already."""


OPS = {"cp.async": _cp_async, **dict.fromkeys(("cp.async.commit_group", "cp.async.wait_group",
                                                "cp.async.wait_all"), _nothing)}
assert set(OPS) == set(TAKES)
