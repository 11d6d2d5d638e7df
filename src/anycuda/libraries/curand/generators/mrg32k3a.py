"""MRG32k3a (L'Ecuyer's combined multiple recursive generator) as cuRAND defines it.

Two recurrences modulo m1 = 2^32 - 209 and m2 = 2^32 - 22853:
    x1[n] = (1403580 x1[n-2] - 810728 x1[n-3]) mod m1
    x2[n] = (527612 x2[n-1] - 1370589 x2[n-3]) mod m2
and the result r = (x1 - x2) mod m1 in (0, m1] (r = m1 where they are equal). curand() gives
(unsigned)(r * 1.000000048662) (cuRAND's MRG32K3A_BITS_NORM), curand_uniform r * 2.3283065498378288e-10.
curand_init(seed, subsequence, offset): both states start at 12345; a nonzero seed multiplies
them by the salted seed halves (x1 = low ^ 0x55555555, x2 = high ^ 0xAAAAAAAA) mod m; then the
state skips subsequence * 2^76 + offset steps (subsequence masked to 51 bits, as the header says).
Skipping is a 3x3 matrix power mod m per recurrence, computed here with Python integers.
"""
from __future__ import annotations

import numpy as np

from ..kinds import Ordering
from .layout import Layout, RowsEngine

M1, M2 = 4294967087, 4294944443
A1 = ((0, 1, 0), (0, 0, 1), (M1 - 810728, 1403580, 0))
A2 = ((0, 1, 0), (0, 0, 1), (M2 - 1370589, 0, 527612))
BITS_NORM = 1.000000048662
NORM = 2.3283065498378288e-10
SUBSEQUENCE_BITS = 76


def _matmul(a, b, m):
    return tuple(tuple(sum(a[i][k] * b[k][j] for k in range(3)) % m for j in range(3)) for i in range(3))


def _matpow(a, n, m):
    result = ((1, 0, 0), (0, 1, 0), (0, 0, 1))
    while n:
        if n & 1:
            result = _matmul(a, result, m)
        a = _matmul(a, a, m)
        n >>= 1
    return result


def _matvec(a, v, m):
    return [sum(a[i][k] * v[k] for k in range(3)) % m for i in range(3)]


def seeded(seed: int):
    s1, s2 = [12345] * 3, [12345] * 3
    if seed:
        x1 = (seed & 0xFFFFFFFF) ^ 0x55555555
        x2 = ((seed >> 32) ^ 0xAAAAAAAA) & 0xFFFFFFFF
        s1 = [x1 * 12345 % M1, x2 * 12345 % M1, x1 * 12345 % M1]
        s2 = [x2 * 12345 % M2, x1 * 12345 % M2, x2 * 12345 % M2]
    return s1, s2


def init(seed: int, subsequence: int = 0, offset: int = 0):
    s1, s2 = seeded(seed)
    n = ((subsequence & ((1 << 51) - 1)) << SUBSEQUENCE_BITS) + offset
    return _matvec(_matpow(A1, n, M1), s1, M1), _matvec(_matpow(A2, n, M2), s2, M2)


def skip(states1: np.ndarray, states2: np.ndarray, n: int):
    """Skip n steps on many states ((T, 3) int64 each, values < 2^32) at once."""
    return _apply(_matpow(A1, n, M1), states1, M1), _apply(_matpow(A2, n, M2), states2, M2)


def _apply(a, s, m):
    """Matrix (Python ints < 2^32) times many states, exactly: split each entry into 16-bit halves
    so every product fits in uint64."""
    s = s.astype(np.uint64)
    out = np.zeros_like(s)
    mm = np.uint64(m)
    for i in range(3):
        acc = np.zeros(s.shape[0], np.uint64)
        for k in range(3):
            hi, lo = np.uint64(a[i][k] >> 16), np.uint64(a[i][k] & 0xFFFF)
            acc = (acc + ((hi * s[:, k]) % mm) * np.uint64(65536) % mm + lo * s[:, k] % mm) % mm
        out[:, i] = acc
    return out.astype(np.int64)


def run(s1: np.ndarray, s2: np.ndarray, count: int):
    """`count` raw results r in (0, m1] of each state ((T, 3) int64 each) → ((count, T) uint32,
    states after them). int64 is exact: every product is below 2^53."""
    a, b, c = (s1[:, i].copy() for i in range(3))
    d, e, f = (s2[:, i].copy() for i in range(3))
    out = np.empty((count, s1.shape[0]), np.uint32)
    for i in range(count):
        p1 = (1403580 * b - 810728 * a) % M1
        a, b, c = b, c, p1
        p2 = (527612 * f - 1370589 * d) % M2
        d, e, f = e, f, p2
        r = p1 - p2
        out[i] = np.where(r <= 0, r + M1, r)
    return out, np.stack([a, b, c], -1), np.stack([d, e, f], -1)


def to_bits(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.float64) * BITS_NORM).astype(np.uint32)


def device_raw(seed: int, subsequence: int, offset: int, count: int) -> np.ndarray:
    s1, s2 = init(seed, subsequence, offset)
    return run(np.array([s1], np.int64), np.array([s2], np.int64), count)[0][:, 0]


def device_sequence(seed: int, subsequence: int, offset: int, count: int) -> np.ndarray:
    """What curand() returns `count` times after curand_init(seed, subsequence, offset)."""
    return to_bits(device_raw(seed, subsequence, offset, count))


# subsequences the host API interleaves, by ordering (read from NVIDIA's host library):
# PSEUDO_LEGACY keeps the 4096 of early releases, the other orderings use 81920
LEGACY_STREAMS, STREAMS = 4096, 81920


class Engine(RowsEngine):
    """MRG32k3a for the host API: subsequences of 2^76 interleaved one result at a time.
    Its words are the raw results r (distributions scale r, not the 32-bit bits)."""
    word = "mrg"
    _run = staticmethod(run)

    def __init__(self, seed: int, ordering: int):
        self.seed = seed
        self.layout = Layout(streams=LEGACY_STREAMS if ordering == Ordering.PSEUDO_LEGACY else STREAMS)
        self._row = None

    def _start(self, step: int):
        if self._row is not None and self._row[0] == step:
            return self._row[1], self._row[2]
        s1, s2 = seeded(self.seed)
        b1, b2 = np.array([s1], np.int64), np.array([s2], np.int64)
        while len(b1) < self.layout.streams:
            n1, n2 = skip(b1, b2, len(b1) << SUBSEQUENCE_BITS)
            b1, b2 = np.concatenate([b1, n1]), np.concatenate([b2, n2])
        b1, b2 = b1[:self.layout.streams], b2[:self.layout.streams]
        return skip(b1, b2, step) if step else (b1, b2)
