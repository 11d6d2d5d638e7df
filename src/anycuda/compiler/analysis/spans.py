"""Self-contained spans of a function body: a run of positions [lo, hi) that control enters
only at its start and leaves only at its end, so that a branch to hi can skip it as a whole
(vector/blockprograms.py skips a span no lane of a warp runs).

A span is self-contained when it holds no barrier, `ret` or `exit`, each branch in it goes to
a label in it or to position hi, and no branch outside it goes to a label in it. SpanFacts
answers that for any [lo, hi) in O(1), after O(n log n) work on a body of n statements
(prefix counts, and sparse tables of the least and greatest branch target and branch source
over any range), where a walk of the body per span cost O(n) each: a generated kernel of
50,000 instructions had ~2,400 candidate spans, 15 s.
"""
from __future__ import annotations

import numpy as np

from ...ptx import ir as pir

_NONE_LOW, _NONE_HIGH = np.iinfo(np.int64).max, np.iinfo(np.int64).min


class _RangeExtremes:
    """The least element of one integer array and the greatest of another over any range
    [lo, hi), lo < hi (sparse tables: level j holds the extremes of each run of 2**j)."""

    def __init__(self, low: np.ndarray, high: np.ndarray):
        self._low, self._high = [low], [high]
        k = 1
        while 2 * k <= len(low):
            low, high = self._low[-1], self._high[-1]
            self._low.append(np.minimum(low[:-k], low[k:]))
            self._high.append(np.maximum(high[:-k], high[k:]))
            k *= 2

    def least(self, lo: int, hi: int) -> int:
        j = (hi - lo).bit_length() - 1
        return int(min(self._low[j][lo], self._low[j][hi - (1 << j)]))

    def greatest(self, lo: int, hi: int) -> int:
        j = (hi - lo).bit_length() - 1
        return int(max(self._high[j][lo], self._high[j][hi - (1 << j)]))


class SpanFacts:
    """What self_contained and instructions need of one body, computed once."""

    def __init__(self, body: list, labels: dict, stops: frozenset):
        """`labels`: {label name: its position in body}; `stops`: opcodes a span may not hold
        (barriers, the thread's end)."""
        n = len(body)
        stop_at = np.zeros(n + 1, np.int64)
        instruction_at = np.zeros(n + 1, np.int64)
        target_low = np.full(n, _NONE_LOW, np.int64)     # at a branch: its target's position
        target_high = np.full(n, _NONE_HIGH, np.int64)
        source_low = np.full(n, _NONE_LOW, np.int64)     # at a label: where branches to it are
        source_high = np.full(n, _NONE_HIGH, np.int64)
        for pos, st in enumerate(body):
            if not isinstance(st, pir.Instruction):
                continue
            instruction_at[pos + 1] = 1
            stop_at[pos + 1] = st.opcode in stops
            if st.opcode != "bra":
                continue
            # a branch to no known label (an address in a register, a label elsewhere) leaves any span
            target = labels.get(st.operands[0].name, -1) if isinstance(st.operands[0], pir.Sym) else -1
            target_low[pos] = target_high[pos] = target
            if target >= 0:
                source_low[target] = min(source_low[target], pos)
                source_high[target] = max(source_high[target], pos)
        self._stops = np.cumsum(stop_at)
        self._instructions = np.cumsum(instruction_at)
        self._targets = _RangeExtremes(target_low, target_high) if n else None
        self._sources = _RangeExtremes(source_low, source_high) if n else None

    def instructions(self, lo: int, hi: int) -> int:
        """Instructions at positions lo..hi-1."""
        return int(self._instructions[hi] - self._instructions[lo])

    def self_contained(self, lo: int, hi: int) -> bool:
        """Whether [lo, hi) (lo < hi) is entered only at lo and left only at hi (module docstring)."""
        if self._stops[hi] != self._stops[lo]:
            return False
        if self._targets.least(lo, hi) < lo or self._targets.greatest(lo, hi) > hi:
            return False
        return self._sources.least(lo, hi) >= lo and self._sources.greatest(lo, hi) < hi
