"""Loops entered in their middle, peeled so that a block program can take them.

nvcc lays out a loop whose test sits in its middle (`for (;;) { B; if (done) break; A; }`:
cub's block radix sort, one pass a few bits, or a `while` that LLVM rotated) as A then B,
entered by a jump over A:

        bra.uni  Lb;
    La: A
    Lb: B
        @%q bra La;

A block program takes a loop entered at its label only (blockloops.loop_regions: "a branch
into a loop"), and the rounds ran such a kernel instead: cub's radix scatter took ~29 ms a
launch of 2,048 blocks. Peeled, the loop's first B comes before it, and the loop is entered
at its head:

        B'               a copy of B, its labels renamed
        @!%q bra Lexit;  the first test: no round at all
    La: A
    Lb: B
        @%q bra La;
    Lexit:

Taken only where nothing else enters the loop: the jump to Lb stands just before La, which
only the back branch reaches, and no other branch from outside lands inside. A loop whose
B is longer than MAX_COPY statements stays as it is.
"""
from __future__ import annotations

import dataclasses
import itertools

from ...ptx import ir
from ..analysis.cfg import branch_target
from .unrolling import renamed

MAX_COPY = 2000             # statements of B copied at most (the program grows by as many)
MAX_GROWTH = 4000           # statements all the copies of a function add at most (a copy holds the
                            # loops nested in B, which are peeled in turn)


def peel_middle_entries(pfn: ir.Function) -> ir.Function:
    """`pfn` with every loop entered in its middle that can be peeled peeled (see the module
    docstring); the same function where there is none."""
    body, serial = pfn.body, itertools.count()
    if any(isinstance(st, ir.Instruction) and st.opcode == "brx" for st in body):
        return pfn                 # (an indirect branch may land anywhere)
    while True:
        peeled = _peel_one(body, serial)
        if peeled is None or len(peeled) > len(pfn.body) + MAX_GROWTH:
            break
        body = peeled
    return pfn if body is pfn.body else dataclasses.replace(pfn, body=body)


def _peel_one(body: list, serial) -> list | None:
    labels = {st.name: pos for pos, st in enumerate(body) if isinstance(st, ir.Label)}
    branches = [(pos, target) for pos, st in enumerate(body) if (target := branch_target(st, labels)) is not None]
    for back, head in branches:
        if head >= back:
            continue
        entry = _jump_before(body, head, labels)
        if entry is None or not _entered_only_there(branches, head, back, entry):
            continue
        jump, middle = entry
        if back - middle > MAX_COPY or any(isinstance(st, ir.VarDecl) and st.space != "reg" for st in body[middle:back]):
            continue
        n = next(serial)
        exit_label = ir.Label(f"$peel{n}_exit", body[back].loc)
        copy = _copy(body[middle:back], n)
        test = body[back]
        leave = []
        if test.guard is not None:        # (an unconditional back branch: the copy falls into the loop)
            leave = [dataclasses.replace(test, guard=dataclasses.replace(test.guard, negated=not test.guard.negated),
                                         operands=(ir.Sym(exit_label.name),) + test.operands[1:])]
        return body[:jump] + copy + leave + body[jump + 1:back + 1] + [exit_label] + body[back + 1:]
    return None


def _jump_before(body: list, head: int, labels: dict):
    """(position, target) of the unconditional branch just before the label at `head` (pragmas
    may stand between), where it jumps forward past it; else None."""
    pos = head - 1
    while pos >= 0 and isinstance(body[pos], ir.Pragma):
        pos -= 1
    if pos < 0:
        return None
    st = body[pos]
    target = branch_target(st, labels)
    if target is None or st.guard is not None or target <= head:
        return None
    return pos, target


def _entered_only_there(branches: list, head: int, back: int, entry: tuple) -> bool:
    """Whether the loop head..back, entered by the jump `entry` to its middle, has no other
    way in, and its head no branch to it but the back branch."""
    jump, middle = entry
    if not head < middle <= back:
        return False
    for pos, target in branches:
        inside = head <= pos <= back
        if target == head and pos != back:
            return False           # a second way to the head (another back branch, or from before)
        if head < target <= back and not inside and pos != jump:
            return False
        if inside and pos >= middle and head < target < middle:
            return False           # B branches back into A: a second loop the copy would break
    return True


def _copy(text: list, n: int) -> list:
    """`text` with its labels, and the branches to them within it, renamed for copy `n`; its
    register declarations (an inline `{ .reg ... }` block's, named apart by the parser) stay
    with the original only: the copy writes the same registers."""
    names = {st.name: f"{st.name}$peel{n}" for st in text if isinstance(st, ir.Label)}
    return [renamed(st, names) for st in text if not isinstance(st, ir.VarDecl)]
