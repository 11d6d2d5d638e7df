"""The device API's sequences: what `curand()` returns, call after call, from one state set up
with `curand_init(seed, subsequence, offset, &state)`. Unlike the host API's memory layouts
these are fully specified by curand_kernel.h, so they are exact (tests/test_curand_sequences.py
checks them against reference loops and published answers).

Subsequence lengths: XORWOW 2^67 results, Philox4_32_10 2^66 (the counter's high 64 bits),
MRG32k3a 2^76 (the subsequence masked to 51 bits).
"""
from __future__ import annotations

import numpy as np

from .generators import mrg32k3a, philox, xorwow
from .kinds import RngType

SEQUENCES = {RngType.PSEUDO_XORWOW: xorwow.device_sequence,
             RngType.PSEUDO_PHILOX4_32_10: philox.device_sequence,
             RngType.PSEUDO_MRG32K3A: mrg32k3a.device_sequence}


def sequence(rng_type: int, seed: int, subsequence: int, offset: int, count: int) -> np.ndarray:
    """`count` successive curand() words (uint32) of the device state of `rng_type`."""
    return SEQUENCES[RngType(rng_type)](seed, subsequence, offset, count)
