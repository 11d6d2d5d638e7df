"""MTGP32 (Saito and Matsumoto's Mersenne Twister for graphics processors): a STAND-IN.

NVIDIA's MTGP32 runs 200 parameter sets of period 2^11213-1 (mtgp32dc_p_11213), which the
authors found with their dynamic creator, a long search rather than a formula; they cannot be
derived here and NVIDIA's copy is not ours to take. So this engine is not NVIDIA's sequence:
it keeps MTGP32's host shape (64 blocks, each producing 256 results at a time, the result at
position n coming from block (n // 256) mod 64 at index (n // 16384) * 256 + n mod 256) and
fills each block from an MT19937 stream of its own (numpy's, seeded from the generator's seed
and the block number). Statistics are MT19937's; bit equality with a GPU is not claimed.
What closing the gap needs: the 200 parameter sets (pos, sh1, sh2, mask, tbl[16],
tmp_tbl[16] per set) as data, and golden files of curandGenerate for a few seeds.
"""
from __future__ import annotations

import numpy as np

from .layout import Layout

BLOCKS, BLOCK_RESULTS = 64, 256


class Engine:
    layout = Layout(streams=BLOCKS, group=BLOCK_RESULTS)
    word = "bits"

    def __init__(self, seed: int, ordering: int):
        self.seed = seed
        self._streams, self._row = None, None

    def _start(self, step: int):
        if self._row != step:
            self._streams = [np.random.MT19937(np.random.SeedSequence([self.seed & 0xFFFFFFFF, self.seed >> 32, b]))
                             for b in range(BLOCKS)]
            for s in self._streams:
                s.random_raw(step)
        return self._streams

    def words(self, start: int, count: int, group: int = 1) -> np.ndarray:
        # a block's 256 results already hold every unit (groups of 1, 2 or 4 words) whole
        first, last, _ = self.layout.steps(start, count)
        streams = self._start(first)
        block = np.stack([s.random_raw(last - first).astype(np.uint32) for s in streams], axis=-1)
        self._row = last
        return self.layout.gather(block, start, count)
