"""bfloat16 as the libraries store it: the top 16 bits of an IEEE single (numpy has no bfloat16,
so a stored element is a uint16). Widening is exact; narrowing rounds to nearest even, as
NVIDIA's libraries write bfloat16 results, and keeps a NaN a NaN (rounding its bits could
carry it into infinity)."""
from __future__ import annotations

import numpy as np

QUIET_NAN = 0x7FC0


def widen(bits: np.ndarray) -> np.ndarray:
    """Stored bfloat16 bits as float32 (exact)."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def narrow(values) -> np.ndarray:
    """float values as bfloat16 bits, rounded to nearest even."""
    f = np.ascontiguousarray(values, dtype=np.float32)
    bits = f.view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(f), np.uint16(QUIET_NAN), rounded)
