"""The enumerations of NVIDIA's curand.h (generator types, orderings, direction-vector sets),
numbered as curand.h numbers them, and the table of which ordering each generator accepts.

The table is the rule curandSetGeneratorOrdering documents (pseudorandom generators take the
PSEUDO_* orderings, quasirandom generators take QUASI_DEFAULT; anything else is
CURAND_STATUS_OUT_OF_RANGE) narrowed as NVIDIA's library narrows it: SEEDED for XORWOW only,
no BEST for MT19937. PSEUDO_DYNAMIC (added in CUDA 11.5, absent from the header's list)
is accepted for the pseudorandom generators as NVIDIA's library accepts it; it lays results
out as PSEUDO_BEST does here, which its documentation allows ("may differ per device").
"""
from __future__ import annotations

import enum


class RngType(enum.IntEnum):
    TEST = 0
    PSEUDO_DEFAULT = 100
    PSEUDO_XORWOW = 101
    PSEUDO_MRG32K3A = 121
    PSEUDO_MTGP32 = 141
    PSEUDO_MT19937 = 142
    PSEUDO_PHILOX4_32_10 = 161
    QUASI_DEFAULT = 200
    QUASI_SOBOL32 = 201
    QUASI_SCRAMBLED_SOBOL32 = 202
    QUASI_SOBOL64 = 203
    QUASI_SCRAMBLED_SOBOL64 = 204


class Ordering(enum.IntEnum):
    PSEUDO_BEST = 100
    PSEUDO_DEFAULT = 101
    PSEUDO_SEEDED = 102
    PSEUDO_LEGACY = 103
    PSEUDO_DYNAMIC = 104
    QUASI_DEFAULT = 201


class DirectionVectorSet(enum.IntEnum):
    VECTORS_32_JOEKUO6 = 101
    SCRAMBLED_VECTORS_32_JOEKUO6 = 102
    VECTORS_64_JOEKUO6 = 103
    SCRAMBLED_VECTORS_64_JOEKUO6 = 104


# what a *_DEFAULT type stands for (curandCreateGenerator's documentation)
RESOLVED = {RngType.PSEUDO_DEFAULT: RngType.PSEUDO_XORWOW, RngType.QUASI_DEFAULT: RngType.QUASI_SOBOL32}

PSEUDO = frozenset({RngType.PSEUDO_XORWOW, RngType.PSEUDO_MRG32K3A, RngType.PSEUDO_MTGP32,
                    RngType.PSEUDO_MT19937, RngType.PSEUDO_PHILOX4_32_10})
QUASI = frozenset({RngType.QUASI_SOBOL32, RngType.QUASI_SCRAMBLED_SOBOL32,
                   RngType.QUASI_SOBOL64, RngType.QUASI_SCRAMBLED_SOBOL64})
QUASI64 = frozenset({RngType.QUASI_SOBOL64, RngType.QUASI_SCRAMBLED_SOBOL64})
SCRAMBLED = frozenset({RngType.QUASI_SCRAMBLED_SOBOL32, RngType.QUASI_SCRAMBLED_SOBOL64})

_PSEUDO_ORDERINGS = frozenset({Ordering.PSEUDO_BEST, Ordering.PSEUDO_DEFAULT, Ordering.PSEUDO_LEGACY,
                               Ordering.PSEUDO_DYNAMIC})
# NVIDIA's library takes SEEDED for XORWOW alone and refuses BEST for MT19937 (asked of its host
# generators: tests/test_curand_nvidia.py)
_REFUSED = {RngType.PSEUDO_MT19937: {Ordering.PSEUDO_BEST}}
_ALSO = {RngType.PSEUDO_XORWOW: {Ordering.PSEUDO_SEEDED}}
VALID_ORDERINGS = {**{t: (_PSEUDO_ORDERINGS | _ALSO.get(t, set())) - _REFUSED.get(t, set()) for t in PSEUDO},
                   **{t: frozenset({Ordering.QUASI_DEFAULT}) for t in QUASI}}
DEFAULT_ORDERING = {**{t: Ordering.PSEUDO_DEFAULT for t in PSEUDO}, **{t: Ordering.QUASI_DEFAULT for t in QUASI}}

MAX_DIMENSIONS = 20000
