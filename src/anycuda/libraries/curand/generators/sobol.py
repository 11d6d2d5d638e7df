"""Sobol sequences (32- and 64-bit, plain and scrambled) as cuRAND's device API defines them.

Point i of a dimension is the XOR of the direction vectors v[b] over the set bits b of the
Gray code i ^ (i >> 1) (curand_init(direction_vectors, offset) then curand() steps in Gray-code
order); a scrambled dimension XORs a scramble constant c into every point of its scrambled
direction vectors. Results are the 32-bit (or 64-bit) integers; the uniform conversions are in
distributions.py.

Direction vectors: cuRAND's JOEKUO6 sets are "generated from polynomials recommended by S. Joe
and F. Y. Kuo" (new-joe-kuo-6.21201). We derive them with Bratley and Fox's recurrence
    m_k = m_{k-s} ^ (m_{k-s} << s) ^ XOR_{i=1..s-1} a_i (m_{k-i} << i),   v_k = m_k << (B - k)
from the published primitive polynomials and initial m values, which SciPy ships as data
(scipy/stats/_sobol_direction_numbers.npz, read without importing SciPy). Dimension 1 is van der
Corput's (all m_k = 1) and needs no data; without SciPy only one dimension is offered.

Scrambled sets and scramble constants: NVIDIA's cuRAND documents that the scrambled sets are Joe
and Kuo's, scrambled; the scrambling matrices and the constants are words of cuRAND's host XORWOW
generator at seed 0 (default ordering, W[p] its p-th 32-bit result), found and checked against
NVIDIA's host library for all 20,000 dimensions. Read as little-endian 64-bit numbers (low word
first), W[1 .. 2,560,000] are R[d, i] (20,000 dimensions x 64) and W[2,560,001 .. 2,600,000] the
64-bit constants, one a dimension; W[0] is not used, and the layout is that of 20,000 dimensions
however few are asked for. Dimension d's scrambling is a unit lower-triangular matrix L_d over
GF(2): output bit b of L_d x is parity(row_b & x), row_b = (R[d, 63 - b] & ~(2^b - 1)) | 2^b, and
the scrambled 64-bit vectors are v'_k = L_d v_k. The 32-bit sets are the top halves: the
scrambled 32-bit vectors are the high words of the 64-bit set's first 32, the 32-bit constants
the high words of the 64-bit ones. Nothing is copied from NVIDIA: the words come from our XORWOW
engine when first asked for, one pass up to the last constant (its cost is starting the 4096
subsequences, not the 2.6 million words); only the dimensions asked for are scrambled, and
dimension 1 needs no Joe-Kuo data here either.

Checked against NVIDIA's host library (tests/test_curand_nvidia.py): the direction vectors and
scramble constants it hands out, and Sobol32/64 plain and scrambled at offsets in 1 to 100
dimensions; one dimension starts at Gray-code point 0 (0, 1/2, 3/4, 1/4, ...).
"""
from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np

from . import xorwow
from ..kinds import MAX_DIMENSIONS, Ordering

_U = np.uint64
_SCRAMBLE_SEED = 0                                      # the XORWOW seed of the scrambling words
_ROWS_START = 1                                         # W[0] is not used
_CONSTANTS_START = _ROWS_START + 2 * 64 * MAX_DIMENSIONS   # 2,560,001: after every dimension's R


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


def _little_endian(words: np.ndarray) -> np.ndarray:
    """Pairs of 32-bit words as 64-bit numbers, the low word first."""
    words = words.astype(np.uint64)
    return words[0::2] | (words[1::2] << _U(32))


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)                 # cached and shared: nobody may write into it
    return a


@functools.lru_cache(maxsize=4)
def _scrambling_words(dimensions: int):
    """(R, 64-bit constants) of the first `dimensions` dimensions: R[d, i] as (dimensions, 64).
    One pass of the host XORWOW engine up to the last constant whatever `dimensions` is: its
    4096 interleaved subsequences cost their start (skip-ahead), not their words, so reaching the
    constants by a second skip-ahead would cost more than the words in between."""
    engine = xorwow.Engine(_SCRAMBLE_SEED, Ordering.PSEUDO_DEFAULT)
    w = engine.words(0, _CONSTANTS_START + 2 * MAX_DIMENSIONS)
    r = _little_endian(w[_ROWS_START:_ROWS_START + 2 * 64 * dimensions]).reshape(dimensions, 64)
    c = _little_endian(w[_CONSTANTS_START:_CONSTANTS_START + 2 * dimensions])
    return _frozen(r), _frozen(c)


def scramble_constants(dimensions: int, bits: int) -> np.ndarray:
    """The scramble constants of the first `dimensions` dimensions as uint64 (uint32 range for
    bits=32: the high words of the 64-bit ones)."""
    c = _scrambling_words(dimensions)[1]
    return c if bits == 64 else c >> _U(32)


def scrambling_rows(dimensions: int) -> np.ndarray:
    """(dimensions, 64) rows of every L_d: rows[d, b] & x has odd parity iff bit b of L_d x is set.
    Bits below b are cleared and bit b set, so L_d is unit lower-triangular (invertible, and each
    output bit depends only on the input bits at and above it)."""
    r = _scrambling_words(dimensions)[0]
    b = np.arange(64, dtype=np.uint64)
    return (r[:, ::-1] & ~((_U(1) << b) - _U(1))) | (_U(1) << b)


def _parity(x: np.ndarray) -> np.ndarray:
    """Parity of each uint64 (0 or 1); x is overwritten."""
    for shift in (32, 16, 8, 4, 2, 1):
        x ^= x >> _U(shift)
    return x & _U(1)


@functools.lru_cache(maxsize=8)
def scrambled_direction_vectors(dimensions: int, bits: int) -> np.ndarray:
    """(dimensions, bits) scrambled direction vectors (sets 102 and 104) as uint64, as
    direction_vectors gives the plain ones."""
    if bits == 32:
        return _frozen(scrambled_direction_vectors(dimensions, 64)[:, :32] >> _U(32))
    rows = scrambling_rows(dimensions)
    v = direction_vectors(dimensions, 64)
    out = np.zeros_like(v)
    for b in range(64):
        out |= _parity(rows[:, b:b + 1] & v) << _U(b)
    return _frozen(out)


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
    vectors = scrambled_direction_vectors if scrambled else direction_vectors
    v = vectors(dimension + 1, bits)[dimension:dimension + 1]
    c = scramble_constants(dimension + 1, bits)[dimension:dimension + 1] if scrambled else None
    return points(v, offset, count, c)[0]


class Engine:
    """Sobol for the host API (QUASI_DEFAULT): a call of n results in d dimensions writes the
    n/d next points of dimension 1, then those of dimension 2, and so on."""

    def __init__(self, bits: int, scrambled: bool, dimensions: int):
        self.bits, self.dimensions = bits, dimensions
        self.vectors = (scrambled_direction_vectors if scrambled else direction_vectors)(dimensions, bits)
        self.scramble = scramble_constants(dimensions, bits) if scrambled else None

    def block(self, start: int, count: int) -> np.ndarray:
        """(dimensions, count) points start.. of every dimension, as uint32 or uint64."""
        p = points(self.vectors, start, count, self.scramble)
        return p if self.bits == 64 else p.astype(np.uint32)
