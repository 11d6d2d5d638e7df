"""Runs of warp matrix instructions as one collective.

A tiled GEMM's inner step is a straight run of matrix instructions: between two barriers of
a typical ldmatrix + mma.sync kernel, nvcc writes four ldmatrix, eight mma, four ldmatrix and
eight mma, with nothing in between. Each one alone is a site (matrix.py): every lane of the
block saves its live registers, stops, the warp is resolved, every lane reloads them; a
round of the whole block per instruction.

`grouped` makes each run of two or more consecutive, unguarded matrix instructions one
instruction of the body, MATRIX_RUN, which suspends once. Its operands say what the run
writes and what it reads from before it (a Vec each), so every analysis sees it as one
instruction with many registers; the members themselves are kept beside the body
(FunctionLowering.matrix_runs).

`lower_run` lowers the members with their own handlers while a MatrixRun collects what
each would have stored and written (matrix._suspend hands it over instead of suspending):
member i gets its own part of the lane's matrix area. A lane stores only the inputs whose
registers no earlier member writes; the run's resolver calls the members' resolvers in
program order and, before each, copies within every lane's area the results of earlier
members that it reads (`forwards`); on resume each lane writes every register the run
writes, from the last member that wrote it. The results are those of the instructions one by
one: each member is resolved for all lanes of the warp before the next, as a GPU's warp
runs them, and shared memory is read and written in the same order.

A run stops before a member whose address register an earlier member writes (the lane
computes every address before the run starts) and at MOST_SLOTS slots of area per lane.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from llvmlite import ir

from ...ptx import ir as pir
from ..analysis.dataflow import defs_uses
from ..analysis.suspensions import MATRIX_RUN
from ..irutil import i32, i64
from ..types import I64
from .matrix import SLOT, _area, _resolver, _slot, _Warp

GROUPED = frozenset(("mma", "mma.sp", "wmma.mma", "ldmatrix", "stmatrix", "movmatrix"))
MOST_SLOTS = 512          # area per lane of one run: 4 KB, the rest of a long run is the next run


# ---------------------------------------------------------------- the body
def _slots(inst) -> int:
    """Area slots the member takes (matrix._suspend: one per register operand, one per address)."""
    return sum(len(op.items) if isinstance(op, pir.Vec) else 1 for op in inst.operands)


def _address_registers(inst) -> set:
    return {op.base.name for op in inst.operands if isinstance(op, pir.Addr) and isinstance(op.base, pir.Reg)}


def _runs(body):
    """The body's statements, with each run of consecutive groupable instructions as a list."""
    run, written, slots = [], set(), 0
    for st in body:
        joins = isinstance(st, pir.Instruction) and st.opcode in GROUPED and st.guard is None
        if run and (not joins or written & _address_registers(st) or slots + _slots(st) > MOST_SLOTS):
            yield run
            run, written, slots = [], set(), 0
        if not joins:
            yield st
            continue
        run.append(st)
        written |= set(defs_uses(st)[0])
        slots += _slots(st)
    if run:
        yield run


def _run_instruction(members) -> pir.Instruction:
    """MATRIX_RUN writing what the members write and reading what they read from before it."""
    writes, reads = {}, {}
    for m in members:
        defs, uses = defs_uses(m)
        for r in uses:
            if r not in writes:
                reads.setdefault(r, None)
        for r in defs:
            writes.setdefault(r, None)
    operands = (pir.Vec(tuple(map(pir.Reg, writes))), pir.Vec(tuple(map(pir.Reg, reads))))
    first = members[0]
    return pir.Instruction(MATRIX_RUN, (), operands, first.loc, debug=first.debug,
                           text="; ".join(m.text for m in members))


def grouped(body: list) -> tuple:
    """(body with its runs of matrix instructions as MATRIX_RUN instructions, {id(run
    instruction): its members}). O(n)."""
    out, members = [], {}
    for item in _runs(body):
        if not isinstance(item, list):
            out.append(item)
        elif len(item) == 1:
            out.append(item[0])
        else:
            inst = _run_instruction(item)
            members[id(inst)] = tuple(item)
            out.append(inst)
    return out, members


# ---------------------------------------------------------------- lowering
@dataclass
class _Member:
    resolver: object            # its MATRIX_RESOLVER function
    words: list                 # i64 values the lane stores, slot by slot from `base`
    sources: list               # the register (pir item) each word was read from, or None
    results: list               # (register, slot, bits) it writes, slots from `base`
    base: int                   # its first slot in the run's area


@dataclass
class MatrixRun:
    """What the members of a run would have stored, resolved and written (matrix._suspend)."""
    members: list = field(default_factory=list)
    slots: int = 0

    def add(self, resolver, words, sources, results):
        size = max([len(words)] + [slot + 1 for _, slot, _ in results])
        self.members.append(_Member(resolver, list(words), list(sources), list(results), self.slots))
        self.slots += size


def _plan(run: MatrixRun):
    """(stores, forwards, finals): (slot, value) the lane stores; per member, the (from, to)
    slots copied before it is resolved; {register name: (register, slot, bits)} written on resume."""
    latest, stores, forwards = {}, [], []
    for m in run.members:
        copies = []
        for s, (value, source) in enumerate(zip(m.words, m.sources)):
            name = source.name if isinstance(source, pir.Reg) else None
            if name in latest:
                copies.append((latest[name][1], m.base + s))
            else:
                stores.append((m.base + s, value))
        forwards.append(tuple(copies))
        for reg, slot, bits in m.results:
            latest[getattr(reg, "name", id(reg))] = (reg, m.base + slot, bits)
    return stores, forwards, latest


def lower_run(f, inst, handlers):
    """Lower MATRIX_RUN `inst` of FunctionLowering `f`: its members through `handlers`
    (opcode -> handler), then one suspension for all of them."""
    run = MatrixRun()
    f.matrix_run = run
    try:
        for member in f.matrix_runs[id(inst)]:
            f.inst = member
            handlers[member.opcode](f, member)
    finally:
        f.matrix_run = None
        f.inst = inst
    b = f.b
    stores, forwards, finals = _plan(run)
    area = _area(f, run.slots)
    for slot, value in stores:
        b.store(value, _slot(b, f.ctx, area, slot))

    def write(bb):
        for reg, slot, bits in finals.values():
            v = bb.load(_slot(bb, f.ctx, area, slot))
            f.write(reg, bb.trunc(v, ir.IntType(bits)) if bits < 64 else v, f"b{bits}")
    resolver = _run_resolver(b.module, run.members, forwards)
    f.suspend("matrix", {"op_a": b.ptrtoint(resolver, I64), "op_b": i32(area), "op_mask": i32(-1)}, write)


def _run_resolver(module, members, forwards):
    """The resolver of a run: per member, its forwards lane by lane, then its own resolver on
    its part of the area. One per distinct run of a module."""
    key = repr([(m.resolver.name, m.base, copies) for m, copies in zip(members, forwards)])
    name = "run." + hashlib.sha1(key.encode()).hexdigest()[:16]

    def emit(fn):
        w = _Warp(fn)
        b = w.b
        for m, copies in zip(members, forwards):
            if copies:
                with w.lanes("forward") as lane:
                    for source, target in copies:
                        b.store(b.load(w.slot(lane, source)), w.slot(lane, target))
            b.call(m.resolver, [w.ws, w.fsize, w.lo, w.group, b.add(w.area, i64(SLOT * m.base))])
        b.ret_void()
    return _resolver(module, name, emit)
