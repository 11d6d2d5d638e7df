"""Where each call of a host generator takes its words (XORWOW, MRG32k3a, Philox4_32_10).

NVIDIA's library keeps every thread's place in its own subsequence between calls, plus the
thread the next call starts at (read from its host library, tests/test_curand_nvidia.py).
Threads advance in steps (one word for XORWOW and MRG32k3a, one curand4 block for Philox). A
call makes units of `group` steps and `per_unit` results each (a word or a float: one word; an
XORWOW double: two words, one result; a Box-Muller pair: two words, two results; a Philox block:
four results; four Philox doubles: two blocks). Unit i goes to thread (cursor + i) mod T, which
takes the next `group` steps of its subsequence; afterwards the cursor is on the thread of the
first unit not finished. A call that ends inside a unit (a Philox call of 5 words) leaves that
thread on the unit's start with `done` of its results taken, and the next call goes on inside
that unit. So after one XORWOW Box-Muller pair the next call starts at thread 1 and thread 0's
next word is its third, and after one Philox double the next curandGenerate gives word 1 of
thread 0 (results count, whatever they are made of).

An offset of n results puts the threads where n results of the plain layout (result p from
thread (p // r) mod T, one-step units of r results) would leave them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Claim:
    """The units one call takes: a snapshot of the threads' steps when it was made."""
    steps: np.ndarray         # (T,) steps every thread had taken before the call
    cursor: int               # the thread of unit 0
    done: int                 # results of unit 0 taken by earlier calls
    count: int                # results this call makes
    per_unit: int
    group: int                # steps per unit

    @property
    def units(self) -> int:
        return -(-(self.done + self.count) // self.per_unit)

    def placement(self, first: int = 0, last: int = None):
        """(thread, first step) of units [first, last) (default: all), in memory order."""
        t_count = len(self.steps)
        j = self.cursor + np.arange(first, self.units if last is None else last, dtype=np.int64)
        threads = j % t_count
        turn = j // t_count - (threads < self.cursor)        # the unit's place among its thread's units
        return threads, self.steps[threads] + self.group * turn

    def unit_words(self, engine) -> np.ndarray:
        """Every unit's steps in memory order, from an engine's `rows(first, last)` ((steps, T)
        words of every thread)."""
        threads, starts = self.placement()
        if len(starts) == 0:
            return engine.rows(0, 0).reshape(-1)
        first = int(starts.min())
        block = engine.rows(first, int(starts.max()) + self.group)
        rows = (starts - first)[:, None] + np.arange(self.group)[None, :]
        return block[rows, threads[:, None]].reshape(-1)

    def aligned_after(self) -> tuple:
        """(units, step): after its first `units` units the call goes on in whole rows from
        thread 0 with every thread on `step`; step None when it never does."""
        t_count = len(self.steps)
        if self.cursor == 0 and self.done == 0:
            head, after = 0, self.steps
        else:
            head = t_count - self.cursor
            after = self.steps.copy()
            after[self.cursor:] += self.group
        if head >= self.units or not (after == after[0]).all():
            return head, None
        return head, int(after[0])

    def results(self, converted: np.ndarray) -> np.ndarray:
        """This call's results out of the converted results of its whole units."""
        return converted[self.done:self.done + self.count]


@dataclass(frozen=True)
class SpreadClaim:
    """Results one to a thread in turn, each thread pairing up its own: its results take both
    elements of its Box-Muller pairs (units of `group` steps) in order, starting with the second
    of a pair an earlier such call left unused (XORWOW's and MRG32k3a's Poisson from normals)."""
    steps: np.ndarray
    spare: np.ndarray         # (T,) the first step of a pair whose second result is unused, or -1
    cursor: int
    count: int
    group: int

    def placement(self):
        """(thread, first step of the pair, element) of every result, in memory order."""
        t_count = len(self.steps)
        j = self.cursor + np.arange(self.count, dtype=np.int64)
        threads = j % t_count
        turn = j // t_count - (threads < self.cursor) - (self.spare[threads] >= 0)
        fresh = turn >= 0
        starts = np.where(fresh, self.steps[threads] + self.group * (turn // 2), self.spare[threads])
        return threads, starts, np.where(fresh, turn % 2, 1)

    def pair_words(self, engine) -> tuple:
        """(first words, second words, element) of every result's pair, from `engine.rows`."""
        threads, starts, element = self.placement()
        first = int(starts.min())
        block = engine.rows(first, int(starts.max()) + self.group)
        return block[starts - first, threads], block[starts - first + 1, threads], element


class ThreadCursor:
    def __init__(self, threads: int, offset: int, per_unit: int = 1):
        base, rest = divmod(offset // per_unit, threads)
        self.steps = base + (np.arange(threads) < rest).astype(np.int64)
        self.cursor = rest
        self.done = offset % per_unit
        self.spare = np.full(threads, -1, np.int64)   # see SpreadClaim

    def take(self, count: int, per_unit: int, group: int) -> Claim:
        """Claim `count` results made `per_unit` to a unit of `group` steps."""
        claim = Claim(self.steps.copy(), self.cursor, self.done, count, per_unit, group)
        finished, self.done = divmod(self.done + count, per_unit)
        t_count = len(self.steps)
        full, rest = divmod(finished, t_count)
        self.steps += group * full
        if rest:
            self.steps[(self.cursor + np.arange(rest)) % t_count] += group
        self.cursor = (self.cursor + finished) % t_count
        return claim

    def take_spread(self, count: int, group: int) -> SpreadClaim:
        """Claim `count` results spread one to a thread, pairs of them made from `group` steps."""
        claim = SpreadClaim(self.steps.copy(), self.spare.copy(), self.cursor, count, group)
        t_count = len(self.steps)
        full, rest = divmod(count, t_count)
        made = np.full(t_count, full, np.int64)
        made[(self.cursor + np.arange(rest)) % t_count] += 1
        fresh = np.maximum(made - (self.spare >= 0), 0)       # results from new pairs
        pairs = (fresh + 1) // 2
        taking = made > 0
        self.spare = np.where(taking, np.where(fresh % 2 == 1, self.steps + group * (pairs - 1), -1), self.spare)
        self.steps += group * pairs
        self.cursor = (self.cursor + count) % t_count
        return claim
