"""A statistical battery for every cuRAND generator anycuda answers: moments, chi-square on
binned uniforms, Kolmogorov-Smirnov for uniforms and normals, log-normal and Poisson moments.

Thresholds sit at about one failure in 10^5 for a good pseudorandom generator, so the tests are
deterministic in practice (fixed seeds) yet catch a broken conversion or layout. Quasirandom
(Sobol) results are far more even than random ones: they must pass the same upper bounds.
"""
import ctypes
import math

import numpy as np
import pytest

import anycuda as ac
from anycuda.libraries.curand import functions
from anycuda.libraries.curand.kinds import RngType

TABLE = functions.table()
GENERATORS = [RngType.PSEUDO_XORWOW, RngType.PSEUDO_MRG32K3A, RngType.PSEUDO_MTGP32, RngType.PSEUDO_MT19937,
              RngType.PSEUDO_PHILOX4_32_10, RngType.QUASI_SOBOL32, RngType.QUASI_SCRAMBLED_SOBOL32,
              RngType.QUASI_SOBOL64, RngType.QUASI_SCRAMBLED_SOBOL64]
N = 1 << 16
Z = 4.5                                     # standard errors allowed for a moment
_erfc = np.frompyfunc(math.erfc, 1, 1)


def generate(rng_type, name, dtype, *extra, count=N):
    out = ctypes.c_uint64()
    TABLE["curandCreateGenerator"][1](ctypes.addressof(out), int(rng_type))
    if rng_type < 200:
        TABLE["curandSetPseudoRandomGeneratorSeed"][1](out.value, 987654321)
    mem = ac.Memory(count * np.dtype(dtype).itemsize)
    TABLE[name][1](out.value, mem.ptr, count, *extra)
    ac.synchronize()
    values = np.frombuffer((ctypes.c_char * (count * np.dtype(dtype).itemsize)).from_address(mem.ptr), dtype).copy()
    TABLE["curandDestroyGenerator"][1](out.value)
    return values


def ks_statistic(sample, cdf):
    x = np.sort(sample)
    f = cdf(x)
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


KS_LIMIT = 2.3 / math.sqrt(N)               # Kolmogorov's distribution: P(D sqrt(n) > 2.3) ~ 1e-4


def normal_cdf(x):
    return 0.5 * _erfc(-x / math.sqrt(2)).astype(np.float64)


@pytest.mark.parametrize("rng_type", GENERATORS)
@pytest.mark.parametrize("name,dtype", [("curandGenerateUniform", np.float32),
                                        ("curandGenerateUniformDouble", np.float64)])
def test_uniform_moments_chi_square_and_ks(rng_type, name, dtype):
    u = generate(rng_type, name, dtype).astype(np.float64)
    assert (u > 0).all() and (u <= 1).all()
    assert abs(u.mean() - 0.5) < Z * math.sqrt(1 / 12 / N)
    assert abs(u.var() - 1 / 12) < Z * math.sqrt(1 / 180 / N)
    counts = np.histogram(u, bins=64, range=(0, 1))[0]
    chi2 = np.sum((counts - N / 64) ** 2 / (N / 64))
    assert chi2 < 120                       # 63 degrees of freedom: P(chi2 > 120) ~ 2e-5
    assert ks_statistic(u, lambda x: x) < KS_LIMIT


@pytest.mark.parametrize("rng_type", GENERATORS)
def test_raw_words_have_balanced_bits(rng_type):
    if rng_type in (RngType.QUASI_SOBOL64, RngType.QUASI_SCRAMBLED_SOBOL64):
        w = generate(rng_type, "curandGenerateLongLong", np.uint64)
        width = 64
    else:
        w = generate(rng_type, "curandGenerate", np.uint32).astype(np.uint64)
        width = 32
    top = 32 if rng_type < 200 else 16        # a Sobol point's low bits stay 0 until 2^k points
    for b in range(width - top, width):
        ones = ((w >> np.uint64(b)) & np.uint64(1)).mean()
        assert abs(ones - 0.5) < Z * 0.5 / math.sqrt(N), b


@pytest.mark.parametrize("rng_type", GENERATORS)
@pytest.mark.parametrize("name,dtype", [("curandGenerateNormal", np.float32),
                                        ("curandGenerateNormalDouble", np.float64)])
def test_normal_moments_and_ks(rng_type, name, dtype):
    x = generate(rng_type, name, dtype, 2.0, 3.0).astype(np.float64)
    z = (x - 2.0) / 3.0
    assert abs(z.mean()) < Z / math.sqrt(N)
    assert abs(z.var() - 1) < Z * math.sqrt(2 / N)
    assert abs(np.mean(z ** 3)) < Z * math.sqrt(15 / N)
    assert abs(np.mean(z ** 4) - 3) < Z * math.sqrt(96 / N)
    assert ks_statistic(z, normal_cdf) < KS_LIMIT


@pytest.mark.parametrize("rng_type", GENERATORS)
def test_log_normal(rng_type):
    x = generate(rng_type, "curandGenerateLogNormalDouble", np.float64, 0.5, 0.25)
    assert (x > 0).all()
    z = (np.log(x) - 0.5) / 0.25
    assert ks_statistic(z, normal_cdf) < KS_LIMIT
    x = generate(rng_type, "curandGenerateLogNormal", np.float32, 0.5, 0.25).astype(np.float64)
    assert abs(x.mean() - math.exp(0.5 + 0.25 ** 2 / 2)) < Z * math.sqrt((math.exp(0.0625) - 1) * math.exp(1.0625) / N)


@pytest.mark.parametrize("rng_type", GENERATORS)
@pytest.mark.parametrize("lam", [0.7, 12.0, 4000.0])
def test_poisson_mean_and_variance(rng_type, lam):
    k = generate(rng_type, "curandGeneratePoisson", np.uint32, lam).astype(np.float64)
    assert abs(k.mean() - lam) < Z * math.sqrt(lam / N)
    assert abs(k.var() / lam - 1) < Z * math.sqrt((2 + 1 / lam) / N)


@pytest.mark.parametrize("rng_type", [RngType.PSEUDO_XORWOW, RngType.PSEUDO_MRG32K3A, RngType.PSEUDO_PHILOX4_32_10,
                                      RngType.PSEUDO_MT19937, RngType.QUASI_SOBOL32])
@pytest.mark.parametrize("trials,p", [(1, 0.5), (20, 0.3), (5000, 0.01)])
def test_binomial_chi_square(rng_type, trials, p):
    """curandGenerateBinomial against the binomial probabilities (bins of expected count >= 20,
    the rest pooled into the tails): chi-square at about one failure in 10^5."""
    k = generate(rng_type, "curandGenerateBinomial", np.uint32, trials, p)
    assert k.max() <= trials
    support = np.arange(trials + 1)
    log_choose = np.array([math.lgamma(trials + 1) - math.lgamma(j + 1) - math.lgamma(trials - j + 1) for j in support])
    pmf = np.exp(log_choose + support * math.log(p) + (trials - support) * math.log1p(-p))
    keep = np.nonzero(pmf * N >= 20)[0]
    lo, hi = keep[0], keep[-1]
    expected = np.concatenate([[pmf[:lo + 1].sum()], pmf[lo + 1:hi], [pmf[hi:].sum()]]) * N
    counts = np.bincount(np.clip(k, lo, hi) - lo, minlength=hi - lo + 1).astype(np.float64)
    chi2 = np.sum((counts - expected) ** 2 / expected)
    dof = len(expected) - 1
    assert chi2 < dof + 6 * math.sqrt(2 * dof) + 10, (chi2, dof)
