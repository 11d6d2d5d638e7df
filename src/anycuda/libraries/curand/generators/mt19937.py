"""MT19937 (Matsumoto and Nishimura's Mersenne Twister), through numpy's maintained
implementation rather than a loop of ours.

The sequence is the reference one: init_genrand(seed mod 2^32) then genrand_int32 (the
state numpy's MT19937 takes from `_legacy_seeding`). NVIDIA's published run (seed 1234) starts
with that sequence's first word, but its following results come from elsewhere in the sequence
(its second to eighth float uniforms are words 113, 170, 283, 340, 397, 510 and 567 of it, the
next ones none of its first 624): NVIDIA's threads share the state in a way not published. So past the
first result this layout (one sequence, every ordering) differs from NVIDIA's.

An offset or a backwards jump regenerates from the seed and discards (MT19937 has no cheap
arbitrary skip-ahead); a call that continues the last one costs nothing extra.
"""
from __future__ import annotations

import numpy as np

from .layout import Layout

_CHUNK = 1 << 22


def _fresh(seed: int) -> np.random.MT19937:
    bits = np.random.MT19937()
    bits._legacy_seeding(seed & 0xFFFFFFFF)
    return bits


def sequence(seed: int, start: int, count: int) -> np.ndarray:
    bits = _fresh(seed)
    _discard(bits, start)
    return bits.random_raw(count).astype(np.uint32)


def _discard(bits, n: int) -> None:
    while n > 0:
        bits.random_raw(min(n, _CHUNK))
        n -= _CHUNK


class Engine:
    layout = Layout(streams=1)
    word = "bits"

    def __init__(self, seed: int, ordering: int):
        self.seed = seed
        self._bits, self._at = _fresh(seed), 0

    def words(self, start: int, count: int, group: int = 1) -> np.ndarray:
        if start < self._at:
            self._bits, self._at = _fresh(self.seed), 0
        _discard(self._bits, start - self._at)
        out = self._bits.random_raw(count).astype(np.uint32)
        self._at = start + count
        return out
