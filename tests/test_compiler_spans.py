"""compiler/analysis/spans.py against a walk of the whole body per span (what block programs
did before: O(n) a span), on random bodies of labels, branches (to known labels, unknown
ones and registers), barriers, exits and arithmetic, for every range [lo, hi)."""
from __future__ import annotations

import pytest

from anycuda.compiler.analysis.spans import SpanFacts
from anycuda.ptx import ir as pir

STOPS = frozenset(("bar", "barrier", "ret", "exit"))
LOC = pir.Loc(1, 1)


def _walked(body, labels, lo, hi) -> bool:
    """Self-contained by definition: nothing in [lo, hi) stops or leaves but to hi, nothing
    outside enters it."""
    inside = {body[p].name for p in range(lo, hi) if isinstance(body[p], pir.Label)}
    for p, st in enumerate(body):
        if not isinstance(st, pir.Instruction):
            continue
        within = lo <= p < hi
        if within and st.opcode in STOPS:
            return False
        if st.opcode == "bra":
            target = st.operands[0].name if isinstance(st.operands[0], pir.Sym) else None
            if within and target not in inside and labels.get(target) != hi:
                return False
            if not within and target in inside:
                return False
    return True


def _body(rng, n):
    names = [f"L{i}" for i in range(max(n // 5, 1))]
    body = []
    for _ in range(n):
        kind = rng.integers(0, 10)
        if kind < 2:
            body.append(pir.Label(str(rng.choice(names)) + f"_{len(body)}", LOC))
        elif kind < 5:
            body.append(None)       # a branch, its target chosen once the labels are known
        elif kind == 5:
            body.append(pir.Instruction(str(rng.choice(sorted(STOPS))), (), (), LOC))
        else:
            body.append(pir.Instruction("add", ("u32",), (), LOC))
    labels = {st.name: p for p, st in enumerate(body) if isinstance(st, pir.Label)}
    names = sorted(labels) + ["nowhere"]
    for p, st in enumerate(body):
        if st is None:
            target = pir.Reg("%rd1") if rng.integers(0, 12) == 0 else pir.Sym(str(rng.choice(names)))
            guard = pir.Guard(pir.Reg("%p1")) if rng.integers(0, 2) else None
            body[p] = pir.Instruction("bra", (), (target,), LOC, guard)
    return body, labels


@pytest.mark.parametrize("n", [1, 2, 7, 40, 90])
def test_self_contained_spans_are_those_a_walk_finds(n, rng):
    for _ in range(6):
        body, labels = _body(rng, n)
        facts = SpanFacts(body, labels, STOPS)
        for lo in range(n):
            for hi in range(lo + 1, n + 1):
                assert facts.self_contained(lo, hi) == _walked(body, labels, lo, hi), (lo, hi)
                assert facts.instructions(lo, hi) == sum(isinstance(st, pir.Instruction) for st in body[lo:hi])


def test_a_span_skipped_by_its_branch():
    body = [pir.Instruction("bra", (), (pir.Sym("END"),), LOC, pir.Guard(pir.Reg("%p1"))),
            pir.Instruction("add", (), (), LOC), pir.Label("MID", LOC), pir.Instruction("add", (), (), LOC),
            pir.Instruction("bra", (), (pir.Sym("MID"),), LOC), pir.Label("END", LOC),
            pir.Instruction("bra", (), (pir.Sym("MID"),), LOC)]
    labels = {"MID": 2, "END": 5}
    facts = SpanFacts(body, labels, STOPS)
    assert not facts.self_contained(1, 5)       # the last branch enters it at MID
    assert facts.self_contained(1, 2) and facts.self_contained(2, 5) is False
