"""Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3") as cuRAND
defines it.

Counter-based: the output block for a 128-bit counter c and 64-bit key k is ten rounds of
    (c0, c1, c2, c3) -> (hi(M1*c2) ^ c1 ^ k0, lo(M1*c2), hi(M0*c0) ^ c3 ^ k1, lo(M0*c0))
with M0 = 0xD2511F53, M1 = 0xCD9E8D57 and the key bumped by the Weyl constants (0x9E3779B9,
0xBB67AE85) between rounds. curand_init(seed, subsequence, offset) sets the key to the seed's
low and high words and the counter to subsequence * 2^64 + offset // 4 (the subsequence in the
counter's high 64 bits), and curand() hands out the block's four words in order, x first. So
result p of subsequence s is word p % 4 of block(counter = s*2^64 + p // 4).

Whole ranges of counters are computed at once on uint64 arrays; nothing is sequential.
"""
from __future__ import annotations

import numpy as np

from .. import distributions, native
from .layout import Layout

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = 0x9E3779B9, 0xBB67AE85
_LO = np.uint64(0xFFFFFFFF)
_SHIFT = 16                      # the host API's 65536 threads (NVIDIA's host library)
_32 = np.uint64(32)


def blocks(key: int, counters_lo: np.ndarray, counters_hi=0) -> np.ndarray:
    """Philox4x32-10 of counters (low 64 bits per block as uint64; high 64 bits one number or
    one per block) → (n, 4) uint32, columns x, y, z, w."""
    c0 = counters_lo & _LO
    c1 = counters_lo >> _32
    hi = np.broadcast_to(np.asarray(counters_hi, np.uint64), c0.shape)
    c2 = hi & _LO
    c3 = hi >> _32
    k0, k1 = key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF
    for r in range(10):
        p0 = M0 * c0                    # 32x32 → 64-bit products, exact in uint64
        p1 = M1 * c2
        ka, kb = np.uint64((k0 + r * W0) & 0xFFFFFFFF), np.uint64((k1 + r * W1) & 0xFFFFFFFF)
        c0, c1, c2, c3 = (p1 >> _32) ^ c1 ^ ka, p1 & _LO, (p0 >> _32) ^ c3 ^ kb, p0 & _LO
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def sequence(seed: int, subsequence: int, start: int, count: int) -> np.ndarray:
    """Results [start, start+count) of subsequence `subsequence` for `seed`."""
    if count <= 0:
        return np.empty(0, np.uint32)
    first, last = start // 4, (start + count + 3) // 4
    total = (subsequence << 64) + first
    lo, hi = total & 0xFFFFFFFFFFFFFFFF, total >> 64
    n = last - first
    counters = np.arange(n, dtype=np.uint64) + np.uint64(lo)       # wraps mod 2^64 as uint64 does
    out = np.empty((n, 4), np.uint32)
    wrap = (1 << 64) - lo                                            # blocks before the low half wraps
    if wrap >= n:
        out[:] = blocks(seed, counters, hi)
    else:
        out[:wrap] = blocks(seed, counters[:wrap], hi)
        out[wrap:] = blocks(seed, counters[wrap:], (hi + 1) & ((1 << 64) - 1))
    return out.reshape(-1)[start - first * 4:start - first * 4 + count]


def device_sequence(seed: int, subsequence: int, offset: int, count: int) -> np.ndarray:
    """What curand() returns `count` times after curand_init(seed, subsequence, offset)."""
    return sequence(seed, subsequence, offset, count)


class Engine:
    """Philox4_32_10 for the host API: 65536 threads, thread t on subsequence t. Words, floats
    and float normals: units of one curand4 block (4 results), unit m of memory is block m // T of
    subsequence m mod T (layout.py). Doubles: see `double_words`. Read from NVIDIA's host library."""
    layout = Layout(streams=1 << _SHIFT, group=4)
    word = "bits"
    unit_results, step_words = 4, 4            # threads take blocks; every unit makes four results
    RUNS = {1: 0, 2: 0, 4: 0, 8: 1}        # words per unit -> log2 of the blocks a unit takes

    def __init__(self, seed: int, ordering: int):
        self.seed = seed

    def _blocks(self, first: int, last: int, run: int = 0) -> np.ndarray:
        """Blocks first..last-1 in memory order, (n, 4), with units of 2^run blocks."""
        m = np.arange(first, last, dtype=np.uint64)
        unit, within = m >> np.uint64(run), m & np.uint64((1 << run) - 1)
        t = np.uint64(self.layout.streams)
        return blocks(self.seed, ((unit // t) << np.uint64(run)) | within, unit % t)

    def words(self, start: int, count: int, group: int = 1) -> np.ndarray:
        """Words [start, start+count) in memory order for units of `group` words."""
        if count <= 0:
            return np.empty(0, np.uint32)
        first, last = start // 4, (start + count + 3) // 4
        return self._blocks(first, last, self.RUNS[group]).reshape(-1)[start - 4 * first:start - 4 * first + count]

    # ---- calls: units of one block (four words, floats or normals) or two (four doubles) ---
    def claim_words(self, claim) -> np.ndarray:
        """Every unit's words of a call (threads.py), in memory order."""
        return self._unit_words(*claim.placement(), claim.group)

    def _unit_words(self, threads: np.ndarray, starts: np.ndarray, group: int) -> np.ndarray:
        counters = (starts[:, None] + np.arange(group)[None, :]).reshape(-1).astype(np.uint64)
        return blocks(self.seed, counters, np.repeat(threads, group).astype(np.uint64)).reshape(-1)

    # what fill() writes: the native function, words per result, and the same conversion in numpy
    KINDS = {"bits": ("philox_bits", 1, lambda w: w),
             "uniform": ("philox_uniform", 1, distributions.uniform_float),
             "uniform_double": ("philox_uniform_double", 2,
                                lambda w: distributions.uniform_double_hq(w[0::2], w[1::2]))}

    def fill(self, kind: str, out: np.ndarray, claim) -> None:
        """Write a call's results (`claim`, threads.py), converted as `kind`, straight into `out`:
        the units before the call reaches thread 0 with every thread on one step through numpy,
        the whole rows from there in machine code (numpy throughout when it never does)."""
        native_kind, per, convert = self.KINDS[kind]
        head, step = claim.aligned_after()
        if step is None or not native.available():
            out[:] = claim.results(convert(self.claim_words(claim)))
            return
        start = 4 * head - claim.done if head else 0
        if head:
            out[:start] = convert(self._unit_words(*claim.placement(0, head), claim.group))[claim.done:]
        self._fill_rows(native_kind, per, convert, out[start:], self.RUNS[4 * claim.group], step)

    def _fill_rows(self, native_kind: str, per: int, convert, out: np.ndarray, run: int, step: int) -> None:
        """Results from the start of a row where every thread is on block `step`."""
        count = len(out)
        body = count * per // 4                       # whole blocks of memory
        if body:
            native.fill(native_kind, out.ctypes.data, body, 0, _SHIFT, self.seed, run, step)
        done = body * 4 // per
        if done < count:                              # the results of one more block
            m = np.array([body], np.int64)
            unit, within = m >> run, m & ((1 << run) - 1)
            t = np.int64(self.layout.streams)
            block = step + ((unit // t) << run) + within
            words = blocks(self.seed, block.astype(np.uint64), (unit % t).astype(np.uint64)).reshape(-1)
            out[done:] = convert(words)[:count - done]
