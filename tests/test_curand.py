"""anycuda's cuRAND, called as the C library calls it (anycuda.libraries.curand.functions): bit
sequences against plain, one-step-at-a-time references of cuRAND's device-API algorithms written
here (seeding, offsets, a second call continuing the first), a statistical battery for every
generator and distribution (moments, chi-square, Kolmogorov-Smirnov), Sobol points against
scipy's, poisoned outputs, stream order and the argument rules with their statuses."""
import threading

import numpy as np
import pytest
from scipy import stats

import anycuda as ac
from anycuda.libraries.curand import functions
from anycuda.libraries.curand.status import CurandError, Status
from library_calls import caller, device, read

call = caller(functions.table())
XORWOW, MRG32K3A, MTGP32, MT19937, PHILOX, DEFAULT = 101, 121, 141, 142, 161, 100
SOBOL32, SCRAMBLED32, SOBOL64 = 201, 202, 203
PSEUDO = [DEFAULT, XORWOW, MRG32K3A, MT19937, PHILOX]
MASK = 0xFFFFFFFF


def make(kind, seed=None, offset=None):
    out = np.zeros(1, np.uint64)
    call("curandCreateGenerator", out.ctypes.data, kind)
    g = int(out[0])
    if seed is not None:
        call("curandSetPseudoRandomGeneratorSeed", g, seed)
    if offset is not None:
        call("curandSetGeneratorOffset", g, offset)
    return g


def generate(g, name, n, dtype, *args, poison=True):
    buf = device(np.full(n + 4, 0xAB if np.dtype(dtype).kind == "u" else np.nan, dtype))
    call(name, g, buf, n, *args)
    got = read(buf, n + 4, dtype)
    assert np.all(got[n:] == 0xAB) or np.all(np.isnan(got[n:])), "written past the output"
    return got[:n]


# ---------------------------------------------------------------- references, one step at a time

def xorwow_reference(seed, n, offset=0):
    s0, s1 = (seed & MASK) ^ 0xAAD26B49, ((seed >> 32) & MASK) ^ 0xF7DCEFDD
    t0, t1 = (1099087573 * s0) & MASK, (2591861531 * s1) & MASK
    d = (6615241 + t1 + t0) & MASK
    v = [(123456789 + t0) & MASK, 362436069 ^ t0, (521288629 + t1) & MASK, 88675123 ^ t1, (5783321 + t0) & MASK]
    out = []
    for _ in range(offset + n):
        t = v[0] ^ (v[0] >> 2)
        v = v[1:] + [(v[4] ^ ((v[4] << 4) & MASK)) ^ (t ^ ((t << 1) & MASK))]
        d = (d + 362437) & MASK
        out.append((v[4] + d) & MASK)
    return out[offset:]


def philox_reference(seed, n, offset=0):
    def block(counter):
        c = [counter & MASK, counter >> 32, 0, 0]
        k = [seed & MASK, (seed >> 32) & MASK]
        for _ in range(10):
            p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
            c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & MASK, (p0 >> 32) ^ c[3] ^ k[1], p0 & MASK]
            k = [(k[0] + 0x9E3779B9) & MASK, (k[1] + 0xBB67AE85) & MASK]
        return c
    return [block(i // 4)[i % 4] for i in range(offset, offset + n)]


def mrg32k3a_reference(seed, n, offset=0):
    m1, m2 = 4294967087, 4294944443
    x1, x2 = (seed & MASK) ^ 0x55555555, ((seed >> 32) & MASK) ^ 0xAAAAAAAA
    s1 = [(x1 * 12345) % m1, (x2 * 12345) % m1, (x1 * 12345) % m1]
    s2 = [(x2 * 12345) % m2, (x1 * 12345) % m2, (x2 * 12345) % m2]
    out = []
    for _ in range(offset + n):
        p1 = (1403580 * s1[1] - 810728 * s1[0]) % m1
        s1 = s1[1:] + [p1]
        p2 = (527612 * s2[2] - 1370589 * s2[0]) % m2
        s2 = s2[1:] + [p2]
        r = p1 - p2 + (m1 if p1 <= p2 else 0)
        out.append(int(r * 1.000000048662))
    return out[offset:]


@pytest.mark.parametrize("kind,reference", [(XORWOW, xorwow_reference), (DEFAULT, xorwow_reference),
                                            (PHILOX, philox_reference), (MRG32K3A, mrg32k3a_reference)])
def test_bits_follow_the_device_api_sequence(rng, kind, reference):
    seed = int(rng.integers(1, 2**63))
    offset = int(rng.integers(0, 100))
    g = make(kind, seed, offset)
    first = generate(g, "curandGenerate", 3001, np.uint32)             # many lanes
    second = generate(g, "curandGenerate", 37, np.uint32)              # continues the first
    want = reference(seed, 3038, offset)
    assert list(first) == want[:3001] and list(second) == want[3001:]


def test_mt19937_is_the_reference_generator():
    g = make(MT19937, 5489)
    got = generate(g, "curandGenerate", 5, np.uint32)
    # the first outputs of MT19937 seeded by init_genrand(5489), as its authors publish them
    assert list(got) == [3499211612, 581869302, 3890346734, 3586334585, 545404204]


# ---------------------------------------------------------------- statistics

def _uniform_ok(u):
    assert 0 < u.min() and u.max() <= 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    counts, _ = np.histogram(u, bins=50, range=(0, 1))
    assert stats.chisquare(counts).pvalue > 1e-4
    assert stats.kstest(u, "uniform").pvalue > 1e-4


@pytest.mark.parametrize("kind", PSEUDO + [SOBOL32, SOBOL64])
def test_uniform_floats_and_doubles(kind):
    g = make(kind)
    _uniform_ok(generate(g, "curandGenerateUniform", 40000, np.float32).astype(np.float64))
    _uniform_ok(generate(g, "curandGenerateUniformDouble", 40000, np.float64))


@pytest.mark.parametrize("kind", PSEUDO + [SOBOL32])
def test_normal_and_log_normal(kind):
    g = make(kind)
    for name, dtype in (("curandGenerateNormal", np.float32), ("curandGenerateNormalDouble", np.float64)):
        x = generate(g, name, 40000, dtype, 1.5, 2.0).astype(np.float64)
        assert abs(x.mean() - 1.5) < 0.05 and abs(x.std() - 2.0) < 0.05, name
        assert stats.kstest((x - 1.5) / 2.0, "norm").pvalue > 1e-4, name
    y = generate(g, "curandGenerateLogNormal", 40000, np.float32, 0.5, 0.25).astype(np.float64)
    assert y.min() > 0 and stats.kstest((np.log(y) - 0.5) / 0.25, "norm").pvalue > 1e-4


@pytest.mark.parametrize("kind", PSEUDO)
def test_poisson(kind):
    g = make(kind)
    for lam in (0.5, 7.0, 300.0):
        k = generate(g, "curandGeneratePoisson", 40000, np.uint32, lam).astype(np.float64)
        assert abs(k.mean() - lam) < 0.05 * lam + 0.02 and abs(k.var() - lam) < 0.1 * lam + 0.05, lam


def test_sobol_points_and_their_layout():
    out = np.zeros(1, np.uint64)
    call("curandCreateGenerator", out.ctypes.data, SOBOL32)
    g = int(out[0])
    call("curandSetQuasiRandomGeneratorDimensions", g, 3)
    got = generate(g, "curandGenerate", 3 * 64, np.uint32)
    from scipy.stats import qmc
    want = (qmc.Sobol(d=3, scramble=False, bits=32).random(64) * 2.0 ** 32).astype(np.uint64)
    # dimension after dimension: 64 results of the first, then the second, then the third
    assert np.array_equal(got.reshape(3, 64).T, want)
    with pytest.raises(CurandError) as e:
        generate(g, "curandGenerate", 100, np.uint32)
    assert e.value.status == Status.LENGTH_NOT_MULTIPLE


# ---------------------------------------------------------------- options, rules, streams

def test_seed_and_offset_restart_the_sequence():
    g = make(PHILOX, 99)
    a = generate(g, "curandGenerate", 100, np.uint32)
    call("curandSetPseudoRandomGeneratorSeed", g, 99)
    assert np.array_equal(generate(g, "curandGenerate", 100, np.uint32), a)
    call("curandSetGeneratorOffset", g, 10)
    assert np.array_equal(generate(g, "curandGenerate", 90, np.uint32), a[10:])


def test_rules_and_their_statuses():
    out = np.zeros(1, np.uint64)
    for kind, status in ((MTGP32, Status.TYPE_ERROR), (SCRAMBLED32, Status.TYPE_ERROR), (7, Status.TYPE_ERROR)):
        with pytest.raises(CurandError) as e:
            call("curandCreateGenerator", out.ctypes.data, kind)
        assert e.value.status == status
    g = make(XORWOW)
    buf = device(np.zeros(16, np.float32))
    cases = [(("curandGenerateNormal", g, buf, 7, 0.0, 1.0), Status.LENGTH_NOT_MULTIPLE),
             (("curandSetQuasiRandomGeneratorDimensions", g, 2), Status.TYPE_ERROR),
             (("curandSetGeneratorOrdering", g, 201), Status.OUT_OF_RANGE),
             (("curandGenerateLongLong", g, buf, 4), Status.TYPE_ERROR),
             (("curandGenerate", 12345, buf, 4), Status.NOT_INITIALIZED)]
    q = np.zeros(1, np.uint64)
    call("curandCreateGenerator", q.ctypes.data, SOBOL32)
    cases += [(("curandSetPseudoRandomGeneratorSeed", int(q[0]), 1), Status.TYPE_ERROR),
              (("curandSetQuasiRandomGeneratorDimensions", int(q[0]), 20001), Status.OUT_OF_RANGE)]
    for args, status in cases:
        with pytest.raises(CurandError) as e:
            call(*args)
        assert e.value.status == status, args[0]
    call("curandDestroyGenerator", g)
    with pytest.raises(CurandError) as e:
        call("curandDestroyGenerator", g)
    assert e.value.status == Status.NOT_INITIALIZED


def test_generation_keeps_stream_order():
    from anycuda.driver import api
    api.cuInit(0)
    if not getattr(api._current, "ctx", None):
        api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
    stream = ac.Stream()
    sid = api.cuStreamCreate(0)
    api._get(sid, api.StreamHandle).stream = stream
    g = make(PHILOX, 3)
    call("curandSetStream", g, sid)
    gate = threading.Event()
    stream.enqueue(gate.wait, 5.0)
    buf = device(np.zeros(64, np.uint32))
    call("curandGenerate", g, buf, 64)
    assert not read(buf, 64, np.uint32).any()         # queued behind the gate
    gate.set()
    stream.synchronize()
    assert list(read(buf, 64, np.uint32)) == philox_reference(3, 64)
