"""The bit generators behind cuRAND's generator types, each one sequence as cuRAND's device API
defines it for one state (`curand_init(seed, subsequence, offset)` then `curand()` over and
over), made fast on a CPU by running many lanes of the same sequence at once.

- XORWOW (Marsaglia's xorshift with a Weyl sequence, cuRAND's seeding): the xorshift part is
  linear over GF(2), so lane j starts at M^(j m) times the state (M the 160x160 step matrix,
  its powers by squaring) and every lane steps in lockstep; the Weyl part is closed-form.
- Philox4x32-10: counter-based; output i is word i % 4 of the block with counter i // 4.
- MRG32k3a (L'Ecuyer): two linear recurrences mod m1, m2, jumped with their 3x3 matrices.
- MT19937: the reference algorithm with init_genrand seeding (numpy's, legacy-seeded).

`take(n)` returns the next n 32-bit outputs and moves the position on; `skip(n)` moves it only.
"""
from __future__ import annotations

import functools

import numpy as np

MASK32 = 0xFFFFFFFF
LANES_MAX = 16384


def _lanes(n: int) -> int:
    return max(1, min(LANES_MAX, n // 64))


# ---------------------------------------------------------------- XORWOW

def _xorwow_step_words(v):
    t = v[0] ^ (v[0] >> 2)
    new = (v[4] ^ ((v[4] << 4) & MASK32)) ^ (t ^ ((t << 1) & MASK32))
    return [v[1], v[2], v[3], v[4], new & MASK32]


@functools.lru_cache(maxsize=1)
def _xorwow_matrix() -> np.ndarray:
    """M (160 x 160 over GF(2)): column i is the step applied to the state with only bit i set."""
    m = np.zeros((160, 160), np.uint8)
    for i in range(160):
        words = [0] * 5
        words[i // 32] = 1 << (i % 32)
        stepped = _xorwow_step_words(words)
        for w, value in enumerate(stepped):
            for b in range(32):
                if value >> b & 1:
                    m[w * 32 + b, i] = 1
    return m


def _gf2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a b over GF(2) (sums of at most 160 ones are exact in f32, so BLAS does the work)."""
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(np.int64).astype(np.uint8) & 1


@functools.lru_cache(maxsize=None)
def _xorwow_power_of_two(k: int) -> np.ndarray:
    """M^(2^k)."""
    return _xorwow_matrix() if k == 0 else _gf2(_xorwow_power_of_two(k - 1), _xorwow_power_of_two(k - 1))


def _xorwow_power(n: int) -> np.ndarray:
    result = np.eye(160, dtype=np.uint8)
    k = 0
    while n:
        if n & 1:
            result = _gf2(_xorwow_power_of_two(k), result)
        n >>= 1
        k += 1
    return result


def _to_bits(words) -> np.ndarray:
    return np.unpackbits(np.array(words, np.uint32).view(np.uint8), bitorder="little")


def _to_words(bits: np.ndarray) -> np.ndarray:
    """(160, lanes) bits -> (5, lanes) uint32 words."""
    packed = np.packbits(bits.reshape(5, 32, -1), axis=1, bitorder="little")      # (5, 4, lanes)
    return np.ascontiguousarray(packed.transpose(0, 2, 1)).view(np.uint32).reshape(5, -1)


class Xorwow:
    WEYL = 362437
    SUBSEQUENCE = 1 << 67          # outputs between the starts of two subsequences

    def __init__(self, seed: int, offset: int = 0, subsequence: int = 0):
        s0 = (seed & MASK32) ^ 0xAAD26B49
        s1 = ((seed >> 32) & MASK32) ^ 0xF7DCEFDD
        t0 = (1099087573 * s0) & MASK32
        t1 = (2591861531 * s1) & MASK32
        self.d = (6615241 + t1 + t0) & MASK32
        self.bits = _to_bits([(123456789 + t0) & MASK32, 362436069 ^ t0, (521288629 + t1) & MASK32,
                              88675123 ^ t1, (5783321 + t0) & MASK32])
        self.skip(subsequence * self.SUBSEQUENCE + offset)

    def skip(self, n: int) -> None:
        if n:
            self.bits = _gf2(_xorwow_power(n), self.bits[:, None])[:, 0]
            self.d = (self.d + self.WEYL * n) & MASK32

    def take(self, n: int) -> np.ndarray:
        if n <= 0:
            return np.empty(0, np.uint32)
        lanes = _lanes(n)
        steps = -(-n // lanes)
        starts = self._lane_starts(lanes, steps)                 # (160, lanes)
        v = list(_to_words(starts))
        out = np.empty((steps, lanes), np.uint32)
        for t in range(steps):
            x = v[0] ^ (v[0] >> np.uint32(2))
            new = (v[4] ^ (v[4] << np.uint32(4))) ^ (x ^ (x << np.uint32(1)))
            v = [v[1], v[2], v[3], v[4], new]
            out[t] = new
        # output i of the sequence adds d + (i + 1) * WEYL; lane j's step t is output j * steps + t
        index = (np.arange(lanes, dtype=np.uint64)[None, :] * np.uint64(steps)
                 + np.arange(steps, dtype=np.uint64)[:, None] + np.uint64(1))
        weyl = (np.uint64(self.d) + index * np.uint64(self.WEYL)) & np.uint64(MASK32)
        result = (out.astype(np.uint64) + weyl).astype(np.uint32).T.reshape(-1)[:n]
        self.skip(n)
        return result

    def _lane_starts(self, lanes: int, steps: int) -> np.ndarray:
        """Lane j's starting state, M^(j steps) times the current one: doubling the lanes
        known with M^(steps block), squared as the block doubles."""
        starts = np.empty((160, lanes), np.uint8)
        starts[:, 0] = self.bits
        jump = _xorwow_power(steps)
        block = 1
        while block < lanes:
            count = min(block, lanes - block)
            starts[:, block:block + count] = _gf2(jump, starts[:, :count])
            block += count
            if block < lanes:
                jump = _gf2(jump, jump)
        return starts


# ---------------------------------------------------------------- Philox4x32-10

_PHILOX_M0, _PHILOX_M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_PHILOX_W0, _PHILOX_W1 = 0x9E3779B9, 0xBB67AE85


def philox_blocks(counters: np.ndarray, key: int, high: int = 0) -> np.ndarray:
    """Philox4x32-10 of 128-bit counters whose low 64 bits are `counters` and high 64 bits
    `high` (the subsequence): (n, 4)."""
    c0 = (counters & np.uint64(MASK32)).astype(np.uint64)
    c1 = (counters >> np.uint64(32)).astype(np.uint64)
    c2 = np.full_like(c0, high & MASK32)
    c3 = np.full_like(c0, (high >> 32) & MASK32)
    k0, k1 = key & MASK32, (key >> 32) & MASK32
    mask = np.uint64(MASK32)
    for _ in range(10):
        p0 = _PHILOX_M0 * c0
        p1 = _PHILOX_M1 * c2
        hi0, lo0 = p0 >> np.uint64(32), p0 & mask
        hi1, lo1 = p1 >> np.uint64(32), p1 & mask
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint64(k0), lo1, hi0 ^ c3 ^ np.uint64(k1), lo0
        k0, k1 = (k0 + _PHILOX_W0) & MASK32, (k1 + _PHILOX_W1) & MASK32
    return np.stack([c0, c1, c2, c3], axis=1).astype(np.uint32)


class Philox:
    def __init__(self, seed: int, offset: int = 0, subsequence: int = 0):
        self.key = seed & 0xFFFFFFFFFFFFFFFF
        self.position = offset
        self.subsequence = subsequence

    def skip(self, n: int) -> None:
        self.position += n

    def take(self, n: int) -> np.ndarray:
        if n <= 0:
            return np.empty(0, np.uint32)
        first, last = self.position // 4, (self.position + n - 1) // 4
        counters = np.arange(first, last + 1, dtype=np.uint64)
        chunk = 1 << 15                  # blocks a round's arrays keep in cache
        blocks = np.concatenate([philox_blocks(counters[i:i + chunk], self.key, self.subsequence)
                                 for i in range(0, counters.size, chunk)]).reshape(-1)
        start = self.position - 4 * first
        self.position += n
        return blocks[start:start + n]


# ---------------------------------------------------------------- MRG32k3a

M1, M2 = 4294967087, 4294944443
_A1 = ((0, 1, 0), (0, 0, 1), (M1 - 810728, 1403580, 0))
_A2 = ((0, 1, 0), (0, 0, 1), (M2 - 1370589, 0, 527612))
MRG_NORM = 2.3283065498378288e-10
MRG_BITS_NORM = 1.000000048662


def _matmul_mod(a, b, m):
    return tuple(tuple(sum(a[i][k] * b[k][j] for k in range(3)) % m for j in range(3)) for i in range(3))


def _matpow_mod(a, n, m):
    result = ((1, 0, 0), (0, 1, 0), (0, 0, 1))
    while n:
        if n & 1:
            result = _matmul_mod(a, result, m)
        a = _matmul_mod(a, a, m)
        n >>= 1
    return result


def _apply(a, v, m):
    return tuple(sum(a[i][k] * v[k] for k in range(3)) % m for i in range(3))


class Mrg32k3a:
    def __init__(self, seed: int, offset: int = 0):
        self.s1, self.s2 = (12345,) * 3, (12345,) * 3
        if seed:
            x1 = (seed & MASK32) ^ 0x55555555
            x2 = ((seed >> 32) & MASK32) ^ 0xAAAAAAAA
            self.s1 = ((x1 * 12345) % M1, (x2 * 12345) % M1, (x1 * 12345) % M1)
            self.s2 = ((x2 * 12345) % M2, (x1 * 12345) % M2, (x2 * 12345) % M2)
        self.skip(offset)

    def skip(self, n: int) -> None:
        if n:
            self.s1 = _apply(_matpow_mod(_A1, n, M1), self.s1, M1)
            self.s2 = _apply(_matpow_mod(_A2, n, M2), self.s2, M2)

    def take_doubles(self, n: int) -> np.ndarray:
        """The generator's own output, in (0, m1]: what curand_uniform scales by MRG_NORM."""
        if n <= 0:
            return np.empty(0, np.float64)
        lanes = _lanes(n)
        steps = -(-n // lanes)
        s1, s2 = self._lane_starts(lanes, steps)
        out = np.empty((steps, lanes), np.float64)
        for t in range(steps):
            p1 = (1403580 * s1[1] - 810728 * s1[0]) % M1
            s1 = (s1[1], s1[2], p1)
            p2 = (527612 * s2[2] - 1370589 * s2[0]) % M2
            s2 = (s2[1], s2[2], p2)
            out[t] = np.where(p1 <= p2, p1 - p2 + M1, p1 - p2)
        self.skip(n)
        return out.T.reshape(-1)[:n]

    def take(self, n: int) -> np.ndarray:
        return (self.take_doubles(n) * MRG_BITS_NORM).astype(np.uint32)

    def _lane_starts(self, lanes: int, steps: int):
        s1 = np.empty((3, lanes), np.int64)
        s2 = np.empty((3, lanes), np.int64)
        j1, j2 = _matpow_mod(_A1, steps, M1), _matpow_mod(_A2, steps, M2)
        a, b = self.s1, self.s2
        for lane in range(lanes):
            s1[:, lane], s2[:, lane] = a, b
            a, b = _apply(j1, a, M1), _apply(j2, b, M2)
        return list(s1), list(s2)


# ---------------------------------------------------------------- MT19937

class Mt19937:
    def __init__(self, seed: int, offset: int = 0):
        self.generator = np.random.MT19937()
        self.generator._legacy_seeding(seed & MASK32)
        self.skip(offset)

    def skip(self, n: int) -> None:
        while n > 0:
            chunk = min(n, 1 << 24)
            self.generator.random_raw(chunk)
            n -= chunk

    def take(self, n: int) -> np.ndarray:
        if n <= 0:
            return np.empty(0, np.uint32)
        return self.generator.random_raw(n).astype(np.uint32)
