"""How the host API lays out results from many subsequences in memory.

A pseudorandom host generator runs T independent streams ("threads", each one subsequence of
the generator's sequence, or one block for MTGP32). Each thread turns g consecutive words of its
own stream into one unit of results (g = 1 for 32-bit words and float uniforms; 2 for a
Box-Muller pair or XORWOW's two-word double; 4 for a Philox curand4 block or a double normal
pair), and units are interleaved across threads: the word at flat position p comes from thread
(p // g) mod T at index (p // (g*T))*g + p mod g of that thread's stream. T = 1 is a single
sequence. A generator's position counts words; a call of k-word units starts at the next
multiple of k, so a second call continues the first and an offset of n skips n words.

XORWOW, MRG32k3a and Philox place each call's units by their threads' own places
(threads.py); this plain layout is where an offset puts them and how MTGP32 lays out results
(MT19937's own layout is in mt19937.py). Checked against NVIDIA's own library, whose host generators run on any CPU
(tests/test_curand_nvidia.py): XORWOW with T = 4096; MRG32k3a with T = 81920 (4096 under
PSEUDO_LEGACY); Philox4_32_10 with T = 65536 and units of one curand4 block. Not yet matched:
MTGP32's layout (NOTES.md, "cuRAND against NVIDIA's host library").
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Layout:
    streams: int = 1         # T
    group: int = 1           # g

    def steps(self, start: int, count: int):
        """(first, last, skip): the steps of every thread (indices in its stream) that cover
        positions [start, start+count), and where `start` falls in the first row."""
        row = self.group * self.streams
        first = start // row
        last = (start + count + row - 1) // row
        return first * self.group, last * self.group, start - first * row

    def gather(self, block: np.ndarray, start: int, count: int) -> np.ndarray:
        """Flatten per-thread results into memory order. `block` has shape (steps, T): words of
        steps first.. of every thread; returns positions [start, start+count)."""
        g, t = self.group, self.streams
        rows = block.shape[0] // g
        flat = block.reshape(rows, g, t).transpose(0, 2, 1).reshape(-1)
        _, _, skip = self.steps(start, count)
        return flat[skip:skip + count]

    def grouped(self, group: int) -> "Layout":
        """The layout for units of `group` words (at least the generator's own group)."""
        return Layout(self.streams, max(self.group, group))


class RowsEngine:
    """An engine that makes whole rows (every thread's next words): `_start(step)` gives every
    thread's state at a step, `_run(*state, count)` the next `count` words of each and the
    states after them. Calls take their words through a claim (threads.py); `words` reads
    this plain layout."""
    unit_results, step_words = 0, 1                   # threads take words (threads.py)

    def rows(self, first: int, last: int) -> np.ndarray:
        """Words [first, last) of every thread's stream, (last - first, T)."""
        block, *state = self._run(*self._start(first), last - first)
        self._row = (last, *state)                    # where the next call most often goes on
        return block

    def claim_words(self, claim) -> np.ndarray:
        return claim.unit_words(self)

    def words(self, start: int, count: int, group: int = 1) -> np.ndarray:
        layout = self.layout.grouped(group)
        first, last, _ = layout.steps(start, count)
        return layout.gather(self.rows(first, last), start, count)
