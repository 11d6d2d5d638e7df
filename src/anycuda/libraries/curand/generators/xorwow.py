"""XORWOW (Marsaglia's xorshift with a Weyl sequence) as cuRAND defines it.

State: five 32-bit words v[0..4] and a counter d. One step:
    t = v0 ^ (v0 >> 2); v0..v3 = v1..v4; v4 = (v4 ^ (v4 << 4)) ^ (t ^ (t << 1)); d += 362437
and the result is v4 + d. Seeding (curand_init) splits the 64-bit seed into halves, salts and
multiplies them, and adds them to Marsaglia's published initial words, so seed 0 is not the
published start. Skip-ahead is linear over GF(2) on the 160 bits of v: skipping n steps is
M^n v with M the one-step matrix, and d += 362437*n. A subsequence is 2^67 steps (d needs no
update there: 362437 * 2^67 is 0 mod 2^32).

NVIDIA ships precomputed powers of M; we build M here by stepping each of the 160 unit states
once, and get M^(2^k) by repeated squaring, so no table is copied.

The host engine's PSEUDO_SEEDED ordering ("a specific seeding pattern for fast lower quality
results") gives stream t the seed seed + t * SEEDED_STRIDE and no skip-ahead. NVIDIA does not
publish the pattern; the stride was found by asking its host library (thread t's first word
equals curand_init's first word for exactly that seed) and is checked against it in the tests.
"""
from __future__ import annotations

import functools

import numpy as np

from .layout import Layout, RowsEngine

WEYL = 362437
SUBSEQUENCE_BITS = 67
_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
SEEDED_STRIDE = 0x2FD111               # what NVIDIA's SEEDED ordering adds to the seed per stream


def seeded(seed: int):
    """curand_init's state before any skip: (v as 5 ints, d)."""
    s0 = (seed & _M32) ^ 0xAAD26B49
    s1 = ((seed >> 32) & _M32) ^ 0xF7DCEFDD
    t0 = (1099087573 * s0) & _M32
    t1 = (2591861531 * s1) & _M32
    v = [(123456789 + t0) & _M32, 362436069 ^ t0, (521288629 + t1) & _M32, 88675123 ^ t1, (5783321 + t0) & _M32]
    return v, (6615241 + t1 + t0) & _M32


def step_words(v):
    """One step of the xorshift part on numpy uint32 arrays v[0..4] (any shape, in place)."""
    t = v[0] ^ (v[0] >> np.uint32(2))
    v[0], v[1], v[2], v[3] = v[1], v[2], v[3], v[4]
    v[4] = (v[4] ^ (v[4] << np.uint32(4))) ^ (t ^ (t << np.uint32(1)))
    return v


def _bits(words: np.ndarray) -> np.ndarray:
    """(..., 5) uint32 → (..., 160) bits, bit i = word i//32, bit i%32."""
    shifts = np.arange(32, dtype=np.uint32)
    return ((words[..., :, None] >> shifts) & 1).reshape(*words.shape[:-1], 160).astype(np.uint8)


def _words(bits: np.ndarray) -> np.ndarray:
    weights = (np.uint64(1) << np.arange(32, dtype=np.uint64))
    b = bits.reshape(*bits.shape[:-1], 5, 32).astype(np.uint64)
    return (b * weights).sum(axis=-1).astype(np.uint32)


@functools.lru_cache(maxsize=None)
def _power_of_two(k: int) -> np.ndarray:
    """M^(2^k) as a 160x160 0/1 matrix (column j = image of unit state j)."""
    if k == 0:
        unit = np.eye(160, dtype=np.uint8)
        v = list(_words(unit).T.copy())               # 5 arrays of 160 unit states
        step_words(v)
        return _bits(np.stack(v, axis=-1)).T.copy()
    m = _power_of_two(k - 1).astype(np.int32)
    return ((m @ m) & 1).astype(np.uint8)


def skip_matrix(n: int) -> np.ndarray:
    """M^n (n >= 0) from the squarings."""
    result = np.eye(160, dtype=np.int32)
    k = 0
    while n:
        if n & 1:
            result = (_power_of_two(k).astype(np.int32) @ result) & 1
        n >>= 1
        k += 1
    return result.astype(np.uint8)


def apply(matrix: np.ndarray, words: np.ndarray) -> np.ndarray:
    """matrix applied to states (..., 5) uint32."""
    return _words((_bits(words).astype(np.int32) @ matrix.T.astype(np.int32)) & 1)


def init(seed: int, subsequence: int = 0, offset: int = 0):
    """curand_init(seed, subsequence, offset): (v as uint32[5], d)."""
    v, d = seeded(seed)
    words = apply(skip_matrix((subsequence << SUBSEQUENCE_BITS) + offset), np.array(v, np.uint32))
    return words, (d + WEYL * offset) & _M32


def run(words: np.ndarray, d: np.ndarray, count: int):
    """`count` results of each of many states: words (T, 5), d (T,) → (results (count, T),
    words and d after them)."""
    v = [words[:, i].copy() for i in range(5)]
    d = d.astype(np.uint32).copy()
    out = np.empty((count, words.shape[0]), np.uint32)
    weyl = np.uint32(WEYL)
    for i in range(count):
        step_words(v)
        d += weyl
        out[i] = v[4] + d
    return out, np.stack(v, axis=-1), d


def device_sequence(seed: int, subsequence: int, offset: int, count: int) -> np.ndarray:
    """What curand() returns `count` times after curand_init(seed, subsequence, offset)."""
    words, d = init(seed, subsequence, offset)
    return run(words[None, :], np.array([d], np.uint32), count)[0][:, 0]


class Engine(RowsEngine):
    """XORWOW for the host API: 4096 subsequences interleaved one result at a time (every
    ordering but SEEDED; SEEDED gives stream t its own seed instead of a skip-ahead)."""
    layout = Layout(streams=4096)
    word = "bits"
    _run = staticmethod(run)

    def __init__(self, seed: int, ordering: int):
        self.seed, self.seeded_ordering = seed, ordering == 102
        self._row = None                              # (row, words, d) the last call left off at

    def _start(self, step: int):
        """Every thread's state at `step` of its stream (the last call's end is kept)."""
        t = self.layout.streams
        if self._row is not None and self._row[0] == step:
            return self._row[1], self._row[2]
        if self.seeded_ordering:
            states = [seeded((self.seed + i * SEEDED_STRIDE) & _M64) for i in range(t)]
            base = np.array([s[0] for s in states], np.uint32)
            d0 = np.array([s[1] for s in states], np.uint32)
        else:
            v, d = seeded(self.seed)
            base = np.array([v], np.uint32)
            while len(base) < t:                       # subsequences [k, 2k) = M^(2^67 k) on [0, k)
                base = np.concatenate([base, apply(skip_matrix(len(base) << SUBSEQUENCE_BITS), base)])
            d0 = np.full(t, d, np.uint32)
        words = apply(skip_matrix(step), base) if step else base
        return words, (d0 + np.uint32((WEYL * step) & _M32)).astype(np.uint32)
