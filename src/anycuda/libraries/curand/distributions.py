"""cuRAND's distributions over a generator's 32-bit outputs, as its device API computes them
(curand_uniform.h, curand_normal.h): uniform floats x 2^-32 + 2^-33 in (0, 1]; uniform doubles
from two outputs (53 bits) for XORWOW and MT19937, from one for Philox and Sobol32, from the
generator's own double for MRG32k3a; normals by Box-Muller on pairs (results in pairs, the sine
one first) for pseudorandom generators and by the inverse normal CDF for quasirandom ones;
log-normals as exp of a normal; Poisson counts by numpy's Poisson sampler seeded from the
generator's next outputs (the distribution is Poisson's; the sequence is not NVIDIA's)."""
from __future__ import annotations

import numpy as np

TWO_POW32_INV = np.float32(2.3283064e-10)
TWO_POW32_INV_DOUBLE = 2.3283064365386963e-10
TWO_POW53_INV_DOUBLE = 1.1102230246251565e-16
TWO_POW32_INV_2PI = np.float32(2.3283064e-10) * np.float32(6.2831855)


def uniform_float(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) * TWO_POW32_INV + TWO_POW32_INV / np.float32(2)


def uniform_double_one(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64) * TWO_POW32_INV_DOUBLE + TWO_POW32_INV_DOUBLE


def uniform_double_two(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    z = x.astype(np.uint64) ^ (y.astype(np.uint64) << np.uint64(21))
    return z.astype(np.float64) * TWO_POW53_INV_DOUBLE + TWO_POW53_INV_DOUBLE / 2


def box_muller_float(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pairs (s sin v, s cos v), interleaved."""
    u = x.astype(np.float32) * TWO_POW32_INV + TWO_POW32_INV / np.float32(2)
    v = y.astype(np.float32) * TWO_POW32_INV_2PI + TWO_POW32_INV_2PI / np.float32(2)
    s = np.sqrt(np.float32(-2.0) * np.log(u))
    return np.stack([s * np.sin(v), s * np.cos(v)], axis=1).reshape(-1)


def box_muller_double(x0, x1, y0, y1) -> np.ndarray:
    u = uniform_double_two(x0, x1)
    zy = y0.astype(np.uint64) ^ (y1.astype(np.uint64) << np.uint64(21))
    v = zy.astype(np.float64) * (TWO_POW53_INV_DOUBLE * 2.0) + TWO_POW53_INV_DOUBLE
    s = np.sqrt(-2.0 * np.log(u))
    return np.stack([s * np.sin(v * np.pi), s * np.cos(v * np.pi)], axis=1).reshape(-1)


def inverse_normal(u: np.ndarray) -> np.ndarray:
    from scipy.special import ndtri
    return ndtri(u).astype(u.dtype)
