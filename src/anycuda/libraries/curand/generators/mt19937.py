"""MT19937 (Matsumoto and Nishimura's Mersenne Twister) laid out as cuRAND's host generator
lays it out, found by asking NVIDIA's host library (NOTES.md, "cuRAND against NVIDIA's host
library") and checked against it (tests/test_curand_nvidia.py):

- 8192 generators, generator j starting 2^2048 * j words into the one sequence of
  init_genrand(seed mod 2^32) (mt19937_jump.py makes the jumps);
- each generator is run by 8 lanes that make its 624 words of a generation together; a lane
  writes 78 of them, one to a row: lane i's row 0 is word (0, 113, 170, 283, 340, 397, 510,
  567)[i] of the generation, its rows 1 + 7b + k word BLOCKS[b] + 7i + k (k < 7, b < 11);
- memory holds rows of 65536 results, one from every lane: position p is row p // 65536 of
  lane p mod 8 of generator (p mod 65536) // 8.

Every distribution reads this flat stream a word per result (uniforms; normals by the inverse
CDF of a uniform, generator.py). A call continues where the last one ended; a generator's start
costs a jump, so a call within the first row starts only the generators it reaches.
"""
from __future__ import annotations

import threading
from functools import lru_cache

import numpy as np

from . import mt19937_jump
from .layout import Layout
from .mt19937_jump import N, extend
from ....runtime.device import worker_count

GENERATORS, LANES = 8192, 8
ROW = GENERATORS * LANES                  # results in a row of memory
ROWS = N // LANES                          # rows one generation of every generator fills
FIRST_WORDS = (0, 113, 170, 283, 340, 397, 510, 567)
BLOCKS = (1, 57, 114, 171, 227, 284, 341, 398, 454, 511, 568)


def _lane_words() -> np.ndarray:
    """(ROWS, LANES): which word of a generation each lane writes to each row."""
    table = np.empty((ROWS, LANES), np.int64)
    table[0] = FIRST_WORDS
    for r in range(1, ROWS):
        block, k = divmod(r - 1, 7)
        table[r] = [BLOCKS[block] + 7 * lane + k for lane in range(LANES)]
    return table


LANE_WORDS = _lane_words()


def temper(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> 11)
    x ^= (x << 7) & np.uint32(0x9D2C5680)
    x ^= (x << 15) & np.uint32(0xEFC60000)
    return x ^ (x >> 18)


class _Starts:
    """The first generation of each of a seed's generators, made as far as calls reach (a
    generator's start costs a jump): shared by the engines of one seed, the last few seeds kept."""

    def __init__(self, seed: int):
        self.windows = np.empty((GENERATORS, N), np.uint32)
        self.windows[0] = extend(mt19937_jump.init_genrand(seed)[None], N)[0, N:]
        self.ready = 1
        self.lock = threading.Lock()

    def first(self, count: int) -> np.ndarray:
        with self.lock:
            if count > self.ready:
                _jump_chains(self.windows, self.ready, count)
                self.ready = count
            return self.windows[:count]


def _jump_chains(windows: np.ndarray, ready: int, count: int) -> None:
    """windows[ready:count] from windows[ready - 1]: C chains (C a power of two up to the worker
    count) of jumps over C generators each, in threads (the machine code releases the GIL),
    after the chains' first members one jump apart."""
    chains = 1
    while chains * 2 <= min(worker_count(), (count - ready) // 16):
        chains *= 2
    one = mt19937_jump.stride_words(0)
    for j in range(ready, min(ready + chains, count)):
        mt19937_jump.jump(windows[j - 1], one, windows[j])
    stride = mt19937_jump.stride_words(chains.bit_length() - 1)

    def chain(first: int) -> None:
        for j in range(first + chains, count, chains):
            mt19937_jump.jump(windows[j - chains], stride, windows[j])
    threads = [threading.Thread(target=chain, args=(ready + c,)) for c in range(1, chains)]
    for t in threads:
        t.start()
    chain(ready)
    for t in threads:
        t.join()


@lru_cache(maxsize=2)
def _starts(seed: int) -> _Starts:
    return _Starts(seed)


class Engine:
    layout = Layout(streams=ROW)
    word = "bits"

    def __init__(self, seed: int, ordering: int):
        self._starts = _starts(seed & 0xFFFFFFFF)
        self._current = None                                   # (generation, windows) last made

    def _started(self, count: int) -> np.ndarray:
        return self._starts.first(count)

    def _generation(self, generation: int, count: int) -> np.ndarray:
        """(count, 624): generation `generation` of generators [0, count)."""
        if self._current is not None:
            at, windows = self._current
            if at <= generation and windows.shape[0] >= count:
                windows = windows[:count]
                if at < generation:
                    windows = extend(windows, (generation - at) * N)[:, -N:]
                self._current = (generation, windows)
                return windows
        windows = self._started(count)
        if generation:
            windows = extend(windows, generation * N)[:, -N:]
        self._current = (generation, windows)
        return windows

    def words(self, start: int, count: int, group: int = 1) -> np.ndarray:
        first_row, last_row = start // ROW, (start + count - 1) // ROW
        # a call inside one row needs only the generators it reaches
        generators = GENERATORS if last_row > first_row else ((start + count - 1) % ROW) // LANES + 1
        pieces = []
        for generation in range(first_row // ROWS, last_row // ROWS + 1):
            windows = self._generation(generation, generators)
            rows = temper(windows[:, LANE_WORDS])                         # (generators, ROWS, LANES)
            rows = rows.transpose(1, 0, 2).reshape(ROWS, generators * LANES)
            low = max(first_row - generation * ROWS, 0)
            high = min(last_row - generation * ROWS, ROWS - 1)
            pieces.append(rows[low:high + 1].reshape(-1))
        flat = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        skip = start - first_row * ROW
        return flat[skip:skip + count]
