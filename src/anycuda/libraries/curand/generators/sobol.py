"""Sobol sequences (32- and 64-bit, plain and scrambled) as cuRAND's device API defines them.

Point i of a dimension is the XOR of the direction vectors v[b] over the set bits b of the
Gray code i ^ (i >> 1) (curand_init(direction_vectors, offset) then curand() steps in Gray-code
order); a scrambled dimension XORs a scramble constant c into every point. Results are the
32-bit (or 64-bit) integers; the uniform conversions are in distributions.py.

Direction vectors: cuRAND's JOEKUO6 sets are "generated from polynomials recommended by S. Joe
and F. Y. Kuo" (new-joe-kuo-6.21201). We derive them with Bratley and Fox's recurrence
    m_k = m_{k-s} ^ (m_{k-s} << s) ^ XOR_{i=1..s-1} a_i (m_{k-i} << i),   v_k = m_k << (B - k)
from the published primitive polynomials and initial m values, which SciPy ships as data
(scipy/stats/_sobol_direction_numbers.npz, read without importing SciPy). Dimension 1 is van der
Corput's (all m_k = 1) and needs no data; without SciPy only one dimension is offered.

Verified against NVIDIA's published runs: one dimension starts at Gray-code point 0 (0, 1/2,
3/4, 1/4, ...) for both 32 and 64 bits. Unverified until golden files from a GPU: that NVIDIA's
tables for dimensions 2 and up are exactly Joe–Kuo's. Known to differ: scrambled Sobol, whose
direction vectors (the SCRAMBLED_DIRECTION_VECTORS sets) and scramble constants are fixed tables
of NVIDIA's that nothing derives; ours XOR constants from Philox4x32-10 with a fixed key into the
plain points, which keeps the statistics but not NVIDIA's numbers.
"""
from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np

from . import philox

_SCRAMBLE_KEY = 0x5C0B01D1EC7A5EED


@functools.lru_cache(maxsize=1)
def _joe_kuo():
    """(poly, vinit) from SciPy's copy of Joe and Kuo's new-joe-kuo-6.21201, or None."""
    spec = importlib.util.find_spec("scipy")
    if spec is None or spec.origin is None:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "stats", "_sobol_direction_numbers.npz")
    if not os.path.exists(path):
        return None
    data = np.load(path)
    return data["poly"].astype(np.uint64), data["vinit"].astype(np.uint64)


def available_dimensions() -> int:
    data = _joe_kuo()
    return 1 if data is None else len(data[0])


@functools.lru_cache(maxsize=8)
def direction_vectors(dimensions: int, bits: int) -> np.ndarray:
    """(dimensions, bits) direction vectors v_1..v_bits as uint64 (uint32 range for bits=32)."""
    m = np.ones((dimensions, bits + 1), np.uint64)                 # m[:, k], k = 1..bits
    if dimensions > 1:
        poly, vinit = _joe_kuo()
        poly, vinit = poly[:dimensions], vinit[:dimensions]
        degree = np.array([int(p).bit_length() - 1 for p in poly])
        for k in range(1, bits + 1):
            given = k <= degree
            col = vinit[:, k - 1] if k - 1 < vinit.shape[1] else np.zeros(dimensions, np.uint64)
            rec = np.zeros(dimensions, np.uint64)
            rows = ~given & (degree > 0)
            if rows.any():
                s = degree[rows].astype(np.uint64)
                base = m[rows, k - degree[rows]]
                rec_rows = base ^ (base << s)
                for i in range(1, int(degree[rows].max())):
                    a_i = (poly[rows] >> (s - np.uint64(i))) & np.uint64(1)
                    use = (a_i == 1) & (np.uint64(i) < s)
                    prev = m[rows, np.maximum(k - i, 0)]
                    rec_rows ^= np.where(use, prev << np.uint64(i), np.uint64(0))
                rec[rows] = rec_rows
            m[:, k] = np.where(given, col, rec)
        m[0, :] = 1                                                  # dimension 1: van der Corput
    shifts = np.array([bits - k for k in range(1, bits + 1)], np.uint64)
    v = m[:, 1:] << shifts
    return v


def scramble_constants(dimensions: int, bits: int) -> np.ndarray:
    words = philox.sequence(_SCRAMBLE_KEY, 0, 0, 2 * dimensions).astype(np.uint64)
    c = words[0::2] | (words[1::2] << np.uint64(32))
    return c if bits == 64 else c & np.uint64(0xFFFFFFFF)


def points(vectors: np.ndarray, start: int, count: int, scramble=None) -> np.ndarray:
    """Points start .. start+count-1 of every dimension: (dimensions, count) uint64."""
    index = np.arange(count, dtype=np.uint64) + np.uint64(start)
    gray = index ^ (index >> np.uint64(1))
    out = np.zeros((vectors.shape[0], count), np.uint64)
    for b in range(vectors.shape[1]):
        bit = ((gray >> np.uint64(b)) & np.uint64(1)).astype(bool)
        if bit.any():
            out ^= np.where(bit[None, :], vectors[:, b:b + 1], np.uint64(0))
    if scramble is not None:
        out ^= scramble[:, None]
    return out


def device_sequence(dimension: int, offset: int, count: int, bits: int = 32, scrambled: bool = False):
    """What curand() returns for one dimension's state after curand_init at `offset`."""
    v = direction_vectors(dimension + 1, bits)[dimension:dimension + 1]
    c = scramble_constants(dimension + 1, bits)[dimension:dimension + 1] if scrambled else None
    return points(v, offset, count, c)[0]


class Engine:
    """Sobol for the host API (QUASI_DEFAULT): a call of n results in d dimensions writes the
    n/d next points of dimension 1, then those of dimension 2, and so on."""

    def __init__(self, bits: int, scrambled: bool, dimensions: int):
        self.bits, self.dimensions = bits, dimensions
        self.vectors = direction_vectors(dimensions, bits)
        self.scramble = scramble_constants(dimensions, bits) if scrambled else None

    def block(self, start: int, count: int) -> np.ndarray:
        """(dimensions, count) points start.. of every dimension, as uint32 or uint64."""
        p = points(self.vectors, start, count, self.scramble)
        return p if self.bits == 64 else p.astype(np.uint32)
