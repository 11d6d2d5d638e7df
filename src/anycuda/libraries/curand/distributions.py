"""cuRAND's conversions from generator words to distributions, as curand_uniform.h,
curand_normal.h and curand_globals.h define them, on whole arrays.

Uniform results lie in (0, 1]: 32-bit words x give x * 2^-32 + 2^-33 in float arithmetic (so
the largest words round to 1.0f) or x * 2^-32 + 2^-32 in double; two words give the
"high-quality" double (x ^ (y << 21)) * 2^-53 + 2^-54; 64-bit words (x >> 11) * 2^-53 + 2^-54;
MRG32k3a scales its raw result r in (0, m1] by 2.3283065498378288e-10. Normals of pseudorandom
generators come in Box-Muller pairs (sin first, then cos); normals of quasirandom ones are the
inverse normal CDF of the uniform, which keeps each point in its dimension (a point above the
middle is mirrored before it becomes a float or double: inverse_normal_float, and Sobol64's
doubles inverse_normal_double_64). Log-normals are
exp of those normals. float results are computed in float32 as the GPU does; the GPU's logf,
sinf and cosf are not IEEE-exact, so normals can differ from a GPU's in the last bits.

Poisson results here are the inverse CDF of one uniform double per result, exact in
distribution for every lambda cuRAND accepts. For Sobol that is NVIDIA's result too (its
published runs agree); for pseudorandom generators NVIDIA uses another method and the integers
differ from a GPU's.
"""
from __future__ import annotations

import functools
import math

import numpy as np

F32 = np.float32
INV32_F = F32(2.0 ** -32)
HALF_INV32_F = F32(2.0 ** -33)
INV32_2PI_F = F32(F32(2.3283064e-10) * F32(6.2831855))       # CURAND_2POW32_INV_2PI, as float
TWO_PI_F = F32(6.2831855)
INV53 = 2.0 ** -53
MRG_NORM = 2.3283065498378288e-10


def uniform_float(words: np.ndarray) -> np.ndarray:
    return words.astype(F32) * INV32_F + HALF_INV32_F


def uniform_float_64(words: np.ndarray) -> np.ndarray:
    return uniform_float((words >> np.uint64(32)).astype(np.uint32))


def uniform_float_mrg(raw: np.ndarray) -> np.ndarray:
    return (raw * MRG_NORM).astype(F32)


def uniform_double(words: np.ndarray) -> np.ndarray:
    return words * 2.0 ** -32 + 2.0 ** -32


def uniform_double_centred(words: np.ndarray) -> np.ndarray:
    return words * 2.0 ** -32 + 2.0 ** -33


def uniform_double_hq(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    z = x.astype(np.uint64) ^ (y.astype(np.uint64) << np.uint64(21))
    return z * INV53 + INV53 / 2


def uniform_double_64(words: np.ndarray) -> np.ndarray:
    return (words >> np.uint64(11)) * INV53 + INV53 / 2


def uniform_double_mrg(raw: np.ndarray) -> np.ndarray:
    return raw * MRG_NORM


def _pairs(s, angle, sin, cos):
    out = np.empty(2 * len(s), s.dtype)
    out[0::2] = s * sin(angle)
    out[1::2] = s * cos(angle)
    return out


def box_muller_float(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """_curand_box_muller on word pairs → 2n standard normals (float32)."""
    u = uniform_float(x)
    v = y.astype(F32) * INV32_2PI_F + INV32_2PI_F / F32(2)
    s = np.sqrt(F32(-2.0) * np.log(u))
    return _pairs(s, v, np.sin, np.cos)


def box_muller_float_mrg(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    u = uniform_float_mrg(x)
    v = uniform_float_mrg(y) * TWO_PI_F
    s = np.sqrt(F32(-2.0) * np.log(u))
    return _pairs(s, v, np.sin, np.cos)


def box_muller_double(x0, x1, y0, y1) -> np.ndarray:
    """_curand_box_muller_double on four words per pair."""
    u = uniform_double_hq(x0, x1)
    zy = y0.astype(np.uint64) ^ (y1.astype(np.uint64) << np.uint64(21))
    v = zy * (INV53 * 2.0) + INV53
    s = np.sqrt(-2.0 * np.log(u))
    return _pairs(s, v * math.pi, np.sin, np.cos)


def box_muller_double_mrg(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    u = uniform_double_mrg(x)
    v = uniform_double_mrg(y) * 2.0
    s = np.sqrt(-2.0 * np.log(u))
    return _pairs(s, v * math.pi, np.sin, np.cos)


def inverse_normal(u: np.ndarray) -> np.ndarray:
    """The standard normal quantile of u in (0, 1] (1 gives +inf, as erfcinv(2) does on a GPU):
    Acklam's rational approximation of the lower tail, refined by one Halley step on erfc, about
    1e-15 relative. The upper half is the mirror of 1 - u, which is exact there."""
    u = np.asarray(u, np.float64)
    upper = u > 0.5
    t = np.where(upper, 1.0 - u, u)                 # in [0, 0.5]
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
         4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01)
    z = np.full_like(t, -np.inf)
    tail, mid = (t > 0) & (t < 0.02425), t >= 0.02425
    q = np.sqrt(-2 * np.log(t[tail]))
    z[tail] = ((((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1))
    q = t[mid] - 0.5
    r = q * q
    z[mid] = ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
              (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1))
    finite = np.isfinite(z)
    zf = z[finite]
    erfc = np.frompyfunc(math.erfc, 1, 1)
    e = 0.5 * erfc(-zf / math.sqrt(2)).astype(np.float64) - t[finite]
    step = e * math.sqrt(2 * math.pi) * np.exp(zf * zf / 2)
    z[finite] = zf - step / (1 + zf * step / 2)
    return np.where(upper, -z, z)


def inverse_normal_float(words: np.ndarray) -> np.ndarray:
    """The standard normals curand_normal makes of 32-bit quasirandom words (_curand_normal_icdf),
    before the cast to float: a word x above 0x80000000 is mirrored to 0xFFFFFFFF - x *before*
    it becomes the float uniform p = x' * 2^-32 + 2^-33, and gives -inverse_normal(p). Mirroring
    the float uniform instead (1 - u) would lose the low bits that rounding x to float drops near 1."""
    words = np.asarray(words, np.uint32)
    upper = words > np.uint32(0x80000000)
    z = inverse_normal(uniform_float(np.where(upper, np.uint32(0xFFFFFFFF) - words, words)))
    return np.where(upper, -z, z)


def inverse_normal_float_64(words: np.ndarray) -> np.ndarray:
    """inverse_normal_float of the top 32-bit words of 64-bit quasirandom points."""
    return inverse_normal_float((words >> np.uint64(32)).astype(np.uint32))


def inverse_normal_double_64(words: np.ndarray) -> np.ndarray:
    """The double normals of 64-bit quasirandom points (_curand_normal_icdf_double): their top 53
    bits k, mirrored to 2^53 - 1 - k above 2^52 before p = k' * 2^-53 + 2^-54 (exact below 1/2,
    where uniform_double_64 rounds above it), and -inverse_normal(p) for the mirrored ones."""
    k = np.asarray(words, np.uint64) >> np.uint64(11)
    upper = k > np.uint64(1 << 52)
    z = inverse_normal(np.where(upper, np.uint64((1 << 53) - 1) - k, k) * INV53 + INV53 / 2)
    return np.where(upper, -z, z)


_lgamma = np.frompyfunc(math.lgamma, 1, 1)


def _log_factorial(k: np.ndarray) -> np.ndarray:
    return _lgamma(k + 1.0).astype(np.float64)


def _quantile(u: np.ndarray, low: int, logp: np.ndarray) -> np.ndarray:
    """The smallest k >= low with CDF(k) >= u, given log P(k) for k = low, low + 1, ...: the
    probabilities past the table's ends are below 1e-30, so its last entry counts as 1."""
    cdf = np.cumsum(np.exp(logp))
    cdf[-1] = 1.0
    return (low + np.searchsorted(cdf, u, side="left")).astype(np.uint32)


def poisson(u: np.ndarray, lam: float) -> np.ndarray:
    """The Poisson(lam) quantile of uniforms u in (0, 1]: the smallest k with CDF(k) >= u."""
    spread = 12 * math.sqrt(lam) + 20
    low, high = max(0, int(lam - spread)), int(lam + spread) + 1
    k = np.arange(low, high + 1)
    return _quantile(u, low, k * math.log(lam) - lam - _log_factorial(k))


def binomial(u: np.ndarray, trials: int, p: float) -> np.ndarray:
    """The Binomial(trials, p) quantile of uniforms u in (0, 1]: the smallest k with CDF(k) >= u,
    over the k whose probability is not negligible (12 deviations and 20 either side)."""
    if p <= 0.0 or trials == 0:
        return np.zeros(u.shape, np.uint32)
    if p >= 1.0:
        return np.full(u.shape, trials, np.uint32)
    mean, spread = trials * p, 12 * math.sqrt(trials * p * (1 - p)) + 20
    low, high = max(0, int(mean - spread)), min(trials, int(mean + spread) + 1)
    k = np.arange(low, high + 1, dtype=np.float64)
    log_choose = math.lgamma(trials + 1.0) - _log_factorial(k) - _log_factorial(trials - k)
    return _quantile(u, low, log_choose + k * math.log(p) + (trials - k) * math.log1p(-p))


# ---- Poisson from pseudorandom words, as NVIDIA's library makes it --------------------------
# Read from NVIDIA's host library (tests/test_curand_nvidia.py): below GAUSS_FROM its table
# method (Marsaglia, Tsang and Wang's square histogram, built as below, over every k whose
# probability is not zero in double precision) on one word per result; from GAUSS_FROM on,
# lambda + sqrt(lambda) * z rounded, with z the generator's float normals.
GAUSS_FROM = 2000.0


@functools.lru_cache(maxsize=16)
def square_histogram(lam: float):
    """(shift, V, K): result shift + j where u < V[j] for j = floor(L * u), else shift + K[j].
    Robin Hood in ascending passes: each bin short of 1/L, in index order, takes the rest from the
    richest remaining bin of highest index; a donor that falls short waits for its index to come
    round (in this pass or the next)."""
    top = int(lam + 40 * math.sqrt(lam) + 800)
    k = np.arange(top)
    lgamma = np.frompyfunc(math.lgamma, 1, 1)
    p = np.exp(k * math.log(lam) - lam - lgamma(k + 1.0).astype(np.float64))
    present = np.nonzero(p > 0)[0]
    shift = int(present[0])
    p = p[shift:present[-1] + 1].copy()
    size = len(p)
    share = 1.0 / size
    alias, limit = np.arange(size), (np.arange(size) + 1.0) / size
    rich = [i for i in range(size) if p[i] >= share]
    changed = True
    while rich and changed:
        changed = False
        for j in range(size):
            if p[j] < share and rich:
                donor = rich[-1]
                alias[j], limit[j] = donor, j * share + p[j]
                p[donor] -= share - p[j]
                p[j] = share
                if p[donor] < share:
                    rich.pop()
                changed = True
    return shift, limit, alias


def poisson_from_words(words: np.ndarray, lam: float) -> np.ndarray:
    shift, limit, alias = square_histogram(float(lam))
    u = words.astype(np.float64) * 2.0 ** -32 + 2.0 ** -32
    j = np.minimum((len(limit) * u).astype(np.int64), len(limit) - 1)
    return (shift + np.where(u < limit[j], j, alias[j])).astype(np.uint32)


def poisson_from_normals(z: np.ndarray, lam: float, single: bool = False) -> np.ndarray:
    """floor(lambda + sqrt(lambda) z + 1/2), in double, or in float where NVIDIA's library
    computes it so (MT19937's host generator)."""
    if single:
        return (F32(math.sqrt(lam)) * z.astype(F32) + F32(lam) + F32(0.5)).astype(np.uint32)
    return (math.sqrt(lam) * z.astype(np.float64) + lam + 0.5).astype(np.uint32)
