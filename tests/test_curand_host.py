"""cuRAND's host API in anycuda: layouts of the generators' subsequences in memory, seeds,
offsets and continuation, argument rules with their statuses, stream order, and that a call
writes exactly its results (output buffers poisoned first)."""
import ctypes
import threading

import numpy as np
import pytest

import anycuda as ac
from anycuda.libraries.curand import functions, generator as generators
from anycuda.libraries.curand.generators import mrg32k3a, philox, sobol, xorwow
from anycuda.libraries.curand.kinds import Ordering, RngType
from anycuda.libraries.curand.status import CurandError, Status
from library_calls import stream_handle

TABLE = functions.table()
PSEUDO = [RngType.PSEUDO_XORWOW, RngType.PSEUDO_MRG32K3A, RngType.PSEUDO_MTGP32, RngType.PSEUDO_MT19937,
          RngType.PSEUDO_PHILOX4_32_10]
QUASI32 = [RngType.QUASI_SOBOL32, RngType.QUASI_SCRAMBLED_SOBOL32]
QUASI64 = [RngType.QUASI_SOBOL64, RngType.QUASI_SCRAMBLED_SOBOL64]
PAD = 64                                   # sentinel elements past the end that must stay untouched
_kept = []


def call(name, *args):
    return TABLE[name][1](*args)


def new(rng_type, seed=None):
    out = ctypes.c_uint64()
    call("curandCreateGenerator", ctypes.addressof(out), int(rng_type))
    if seed is not None:
        call("curandSetPseudoRandomGeneratorSeed", out.value, seed)
    return out.value


class Buffer:
    """Device memory of `count` elements plus PAD, all poisoned."""
    SENTINEL = {np.uint32: 0xDEADBEEF, np.uint64: 0xDEADBEEFDEADBEEF, np.float32: np.nan, np.float64: np.nan}

    def __init__(self, count, dtype):
        self.count, self.dtype = count, np.dtype(dtype)
        self.mem = ac.Memory((count + PAD) * self.dtype.itemsize)
        _kept.append(self.mem)
        self.ptr = self.mem.ptr
        self.all()[:] = self.SENTINEL[self.dtype.type]

    def all(self):
        return np.frombuffer((ctypes.c_char * ((self.count + PAD) * self.dtype.itemsize)).from_address(self.ptr),
                             self.dtype)

    def values(self):
        ac.synchronize()
        data = self.all()
        tail = data[self.count:]
        if self.dtype.kind == "f":
            assert np.isnan(tail).all(), "written past the end"
            assert not np.isnan(data[:self.count]).any(), "an element was not written"
        else:
            assert (tail == self.SENTINEL[self.dtype.type]).all(), "written past the end"
        return data[:self.count].copy()


def bits(gen, count):
    b = Buffer(count, np.uint32)
    call("curandGenerate", gen, b.ptr, count)
    return b.values()


# ---- layouts -----------------------------------------------------------------------------------
# subsequences interleaved (NVIDIA's host library shows them: tests/test_curand_nvidia.py)
@pytest.mark.parametrize("rng_type,device,ordering,threads", [
    (RngType.PSEUDO_XORWOW, xorwow.device_sequence, 101, 4096),
    (RngType.PSEUDO_MRG32K3A, mrg32k3a.device_sequence, 101, 81920),
    (RngType.PSEUDO_MRG32K3A, mrg32k3a.device_sequence, 103, 4096)])
def test_interleaved_layout_takes_result_n_from_subsequence_n_mod_threads(rng_type, device, ordering, threads):
    gen = new(rng_type, 77)
    call("curandSetGeneratorOrdering", gen, ordering)
    out = bits(gen, threads * 2 + 9)
    for n in (0, 1, threads - 1, threads, threads + 1, 2 * threads - 1, 2 * threads, 2 * threads + 8):
        assert out[n] == device(77, n % threads, n // threads, 1)[0], n


def test_philox_layout_takes_curand4_blocks_of_subsequence_m_mod_65536():
    threads = 1 << 16
    gen = new(RngType.PSEUDO_PHILOX4_32_10, 5)
    out = bits(gen, 4 * threads * 2 + 6)
    for m in (0, 1, threads - 1, threads, threads + 1, 2 * threads):
        assert np.array_equal(out[4 * m:4 * m + 4], philox.device_sequence(5, m % threads, 4 * (m // threads), 4)), m


@pytest.mark.parametrize("dims", [1, 3])
@pytest.mark.parametrize("rng_type", QUASI32)
def test_quasi_results_are_dimension_major(rng_type, dims):
    gen = new(rng_type)
    call("curandSetQuasiRandomGeneratorDimensions", gen, dims)
    first = bits(gen, 8 * dims).reshape(dims, 8)
    second = bits(gen, 4 * dims).reshape(dims, 4)
    scrambled = rng_type == RngType.QUASI_SCRAMBLED_SOBOL32
    for d in range(dims):
        assert np.array_equal(first[d], sobol.device_sequence(d, 0, 8, scrambled=scrambled))
        assert np.array_equal(second[d], sobol.device_sequence(d, 8, 4, scrambled=scrambled))


def test_sobol64_long_long():
    gen = new(RngType.QUASI_SOBOL64)
    b = Buffer(100, np.uint64)
    call("curandGenerateLongLong", gen, b.ptr, 100)
    assert np.array_equal(b.values(), sobol.device_sequence(0, 0, 100, bits=64))


# ---- seeds, offsets, continuation ------------------------------------------------------------------
ALL = PSEUDO + QUASI32


@pytest.mark.parametrize("rng_type", ALL)
def test_same_seed_same_bits_and_second_call_continues(rng_type):
    seed = None if rng_type in QUASI32 else 2024
    a, b = new(rng_type, seed), new(rng_type, seed)
    whole = bits(a, 20000)
    assert np.array_equal(bits(b, 7000), whole[:7000])
    assert np.array_equal(bits(b, 13000), whole[7000:])


OFFSET_TAKERS = [t for t in ALL if t not in (RngType.PSEUDO_MT19937, RngType.PSEUDO_MTGP32)]


@pytest.mark.parametrize("rng_type", OFFSET_TAKERS)
def test_offset_n_equals_skipping_n(rng_type):
    seed = None if rng_type in QUASI32 else 31
    whole = bits(new(rng_type, seed), 30000)
    gen = new(rng_type, seed)
    call("curandSetGeneratorOffset", gen, 12345)
    assert np.array_equal(bits(gen, 30000 - 12345), whole[12345:])


@pytest.mark.parametrize("rng_type", [RngType.PSEUDO_MT19937, RngType.PSEUDO_MTGP32])
def test_mersenne_twisters_refuse_offsets_as_nvidia_does(rng_type):
    gen = new(rng_type, 31)
    for offset in (0, 12345):
        with pytest.raises(CurandError) as e:
            call("curandSetGeneratorOffset", gen, offset)
        assert e.value.status == Status.TYPE_ERROR
    assert np.array_equal(bits(gen, 100), bits(new(rng_type, 31), 100))     # nothing changed


@pytest.mark.parametrize("rng_type", PSEUDO)
def test_different_seeds_differ_and_reseeding_restarts(rng_type):
    gen = new(rng_type, 1)
    first = bits(gen, 1000)
    call("curandSetPseudoRandomGeneratorSeed", gen, 2)
    other = bits(gen, 1000)
    assert np.mean(first == other) < 0.01
    call("curandSetPseudoRandomGeneratorSeed", gen, 1)
    assert np.array_equal(bits(gen, 1000), first)


def test_double_uniforms_take_two_words_of_one_thread():
    # XORWOW: thread t's two consecutive words; Philox: four doubles from two blocks of thread t
    gen = new(RngType.PSEUDO_XORWOW, 3)
    b = Buffer(10, np.float64)
    call("curandGenerateUniformDouble", gen, b.ptr, 10)
    w = np.array([xorwow.device_sequence(3, t, 0, 2) for t in range(10)], np.uint64)
    assert np.array_equal(b.values(), ((w[:, 0] ^ (w[:, 1] << np.uint64(21))) * 2.0**-53 + 2.0**-54))
    gen = new(RngType.PSEUDO_PHILOX4_32_10, 3)
    b = Buffer(10, np.float64)
    call("curandGenerateUniformDouble", gen, b.ptr, 10)
    w = np.concatenate([philox.device_sequence(3, t, 0, 8) for t in range(3)])[:20].astype(np.uint64)
    assert np.array_equal(b.values(), ((w[0::2] ^ (w[1::2] << np.uint64(21))) * 2.0**-53 + 2.0**-54))


def test_float_uniforms_are_in_0_1_closed_above():
    gen = new(RngType.PSEUDO_PHILOX4_32_10, 3)
    b = Buffer(1 << 16, np.float32)
    call("curandGenerateUniform", gen, b.ptr, 1 << 16)
    u = b.values()
    w = bits(new(RngType.PSEUDO_PHILOX4_32_10, 3), 1 << 16)
    assert np.array_equal(u, (w.astype(np.float32) * np.float32(2**-32) + np.float32(2**-33)))
    b = Buffer(5, np.float32)
    call("curandGenerateUniform", gen, b.ptr, 5)           # continues mid-row through numpy and JIT
    assert np.array_equal(b.values(), distributions_uniform(bits_after(RngType.PSEUDO_PHILOX4_32_10, 3, 1 << 16, 5)))
    assert (u > 0).all() and (u <= 1).all()
    assert distributions_uniform(np.array([0xFFFFFFFF], np.uint32))[0] == 1.0


def distributions_uniform(words):
    from anycuda.libraries.curand import distributions
    return distributions.uniform_float(words)


def bits_after(rng_type, seed, skip, count):
    return bits(new(rng_type, seed), skip + count)[skip:]


# ---- argument rules ----------------------------------------------------------------------------------
def status_of(name, *args):
    with pytest.raises(CurandError) as e:
        call(name, *args)
    return e.value.status


def test_argument_rules_and_their_statuses():
    out = ctypes.c_uint64()
    assert status_of("curandCreateGenerator", ctypes.addressof(out), 999) == Status.TYPE_ERROR
    assert status_of("curandCreateGenerator", ctypes.addressof(out), 0) == Status.TYPE_ERROR
    xw, sob, sob64 = new(RngType.PSEUDO_DEFAULT), new(RngType.QUASI_DEFAULT), new(RngType.QUASI_SOBOL64)
    assert generators.get(xw).rng_type == RngType.PSEUDO_XORWOW
    assert generators.get(sob).rng_type == RngType.QUASI_SOBOL32
    b = Buffer(8, np.float32)
    assert status_of("curandGenerateNormal", xw, b.ptr, 7, 0.0, 1.0) == Status.LENGTH_NOT_MULTIPLE
    assert status_of("curandGenerateLogNormalDouble", xw, b.ptr, 3, 0.0, 1.0) == Status.LENGTH_NOT_MULTIPLE
    call("curandSetQuasiRandomGeneratorDimensions", sob, 3)
    assert status_of("curandGenerateUniform", sob, b.ptr, 8) == Status.LENGTH_NOT_MULTIPLE
    assert status_of("curandGenerate", sob64, b.ptr, 8) == Status.TYPE_ERROR
    assert status_of("curandGenerateLongLong", xw, b.ptr, 8) == Status.TYPE_ERROR
    assert status_of("curandGenerateLongLong", sob, b.ptr, 3) == Status.TYPE_ERROR
    assert status_of("curandSetPseudoRandomGeneratorSeed", sob, 1) == Status.TYPE_ERROR
    assert status_of("curandSetQuasiRandomGeneratorDimensions", xw, 2) == Status.TYPE_ERROR
    assert status_of("curandSetQuasiRandomGeneratorDimensions", sob, 0) == Status.OUT_OF_RANGE
    assert status_of("curandSetQuasiRandomGeneratorDimensions", sob, 20001) == Status.OUT_OF_RANGE
    assert status_of("curandSetGeneratorOrdering", xw, Ordering.QUASI_DEFAULT) == Status.OUT_OF_RANGE
    assert status_of("curandSetGeneratorOrdering", sob, Ordering.PSEUDO_BEST) == Status.OUT_OF_RANGE
    assert status_of("curandSetGeneratorOrdering", xw, 7) == Status.OUT_OF_RANGE
    for o in (Ordering.PSEUDO_BEST, Ordering.PSEUDO_DEFAULT, Ordering.PSEUDO_SEEDED, Ordering.PSEUDO_LEGACY):
        call("curandSetGeneratorOrdering", xw, o)
    call("curandSetGeneratorOrdering", sob, Ordering.QUASI_DEFAULT)
    assert status_of("curandGeneratePoisson", xw, b.ptr, 8, 0.0) == Status.OUT_OF_RANGE
    assert status_of("curandGeneratePoisson", xw, b.ptr, 8, 400001.0) == Status.OUT_OF_RANGE
    assert status_of("curandSetStream", 12345, 0) == Status.NOT_INITIALIZED
    call("curandDestroyGenerator", xw)
    assert status_of("curandGenerate", xw, b.ptr, 8) == Status.NOT_INITIALIZED
    assert status_of("curandDestroyGenerator", xw) == Status.NOT_INITIALIZED
    # a refused call wrote nothing
    assert np.isnan(b.all()).all()


def test_a_refused_call_does_not_advance_the_sequence():
    a, b = new(RngType.PSEUDO_PHILOX4_32_10, 8), new(RngType.PSEUDO_PHILOX4_32_10, 8)
    buf = Buffer(4, np.float32)
    with pytest.raises(CurandError):
        call("curandGenerateNormal", a, buf.ptr, 3, 0.0, 1.0)
    assert np.array_equal(bits(a, 10), bits(b, 10))


def test_version_and_properties():
    v, p = ctypes.c_int(), ctypes.c_int()
    call("curandGetVersion", ctypes.addressof(v))
    call("curandGetProperty", 0, ctypes.addressof(p))
    assert v.value == 10405 and p.value == 10
    assert status_of("curandGetProperty", 3, ctypes.addressof(p)) == Status.OUT_OF_RANGE


def test_direction_vectors_table():
    addr = ctypes.c_uint64()
    call("curandGetDirectionVectors32", ctypes.addressof(addr), 101)
    first = np.ctypeslib.as_array((ctypes.c_uint32 * 32).from_address(addr.value))
    assert list(first[:3]) == [1 << 31, 1 << 30, 1 << 29]
    call("curandGetDirectionVectors32", ctypes.addressof(addr), 102)          # the scrambled set
    scrambled = np.ctypeslib.as_array((ctypes.c_uint32 * 32).from_address(addr.value))
    assert np.array_equal(scrambled, sobol.scrambled_direction_vectors(1, 32)[0])
    assert status_of("curandGetDirectionVectors32", ctypes.addressof(addr), 103) == Status.OUT_OF_RANGE


# ---- streams -----------------------------------------------------------------------------------------
def test_generation_is_queued_behind_stream_work_and_state_advances_at_the_call():
    stream = ac.Stream()
    gen = new(RngType.PSEUDO_PHILOX4_32_10, 11)
    call("curandSetStream", gen, stream_handle(stream))
    gate = threading.Event()
    stream.enqueue(gate.wait, 5.0)
    first, second = Buffer(1000, np.uint32), Buffer(1000, np.uint32)
    call("curandGenerate", gen, first.ptr, 1000)
    call("curandGenerate", gen, second.ptr, 1000)     # continues the first, though nothing ran yet
    assert (first.all() == 0xDEADBEEF).all()           # queued behind the gate: not written yet
    gate.set()
    stream.synchronize()
    expected = bits(new(RngType.PSEUDO_PHILOX4_32_10, 11), 2000)
    assert np.array_equal(first.values(), expected[:1000])
    assert np.array_equal(second.values(), expected[1000:])


def test_work_runs_in_order_with_other_stream_work():
    stream = ac.Stream()
    gen = new(RngType.PSEUDO_XORWOW, 4)
    call("curandSetStream", gen, stream_handle(stream))
    b = Buffer(4096, np.uint32)
    seen = []
    stream.enqueue(lambda: seen.append(int(b.all()[0])))           # before: still poisoned
    call("curandGenerate", gen, b.ptr, 4096)
    stream.enqueue(lambda: seen.append(int(b.all()[0])))           # after: written
    stream.synchronize()
    assert seen == [0xDEADBEEF, int(xorwow.device_sequence(4, 0, 0, 1)[0])]


# ---- every generation call writes exactly its results ------------------------------------------------
CALLS = [("curandGenerate", np.uint32, ()), ("curandGenerateUniform", np.float32, ()),
         ("curandGenerateUniformDouble", np.float64, ()), ("curandGenerateNormal", np.float32, (1.0, 2.0)),
         ("curandGenerateNormalDouble", np.float64, (1.0, 2.0)), ("curandGenerateLogNormal", np.float32, (0.0, 0.5)),
         ("curandGenerateLogNormalDouble", np.float64, (0.0, 0.5)), ("curandGeneratePoisson", np.uint32, (3.5,)),
         ("curandGenerateBinomial", np.uint32, (30, 0.25))]


@pytest.mark.parametrize("rng_type", PSEUDO + QUASI32 + QUASI64)
def test_poisoned_buffers_are_written_exactly(rng_type):
    gen = new(rng_type)
    if rng_type in QUASI32 + QUASI64:
        call("curandSetQuasiRandomGeneratorDimensions", gen, 2)
    for name, dtype, extra in CALLS:
        if name == "curandGenerate" and rng_type in QUASI64:
            name, dtype = "curandGenerateLongLong", np.uint64
        b = Buffer(4098, dtype)
        call(name, gen, b.ptr, 4098, *extra)
        values = b.values()
        if name == "curandGenerate" and rng_type in PSEUDO:
            assert len(np.unique(values)) > 4000


def test_mtgp32_without_nvidias_parameter_sets_is_a_stand_in_that_still_continues(monkeypatch):
    from anycuda.libraries.curand.generators import mtgp32
    monkeypatch.setattr(mtgp32, "parameter_sets", lambda: None)
    whole = bits(new(RngType.PSEUDO_MTGP32, 5), 60000)
    gen = new(RngType.PSEUDO_MTGP32, 5)
    assert np.array_equal(np.concatenate([bits(gen, 123), bits(gen, 60000 - 123)]), whole)
    assert abs(whole.astype(np.float64).mean() / 2**32 - 0.5) < 0.01
    assert not np.array_equal(whole, bits(new(RngType.PSEUDO_MTGP32, 6), 60000))


def test_binomial_rules_and_edges():
    gen = new(RngType.PSEUDO_PHILOX4_32_10, 3)
    b = Buffer(100, np.uint32)
    for p in (-0.1, 1.5, float("nan")):
        assert status_of("curandGenerateBinomial", gen, b.ptr, 100, 10, p) == Status.OUT_OF_RANGE
    assert status_of("curandGenerateBinomialMethod", gen, b.ptr, 100, 10, 0.5, 1) == Status.OUT_OF_RANGE
    for trials, p, value in ((10, 0.0, 0), (10, 1.0, 10), (0, 0.5, 0)):
        call("curandGenerateBinomial", gen, b.ptr, 100, trials, p)
        assert (b.values() == value).all()
    # the same draw from the same words: one word per result, its quantile
    words = bits(new(RngType.PSEUDO_PHILOX4_32_10, 9), 1000)
    call("curandGenerateBinomialMethod", new(RngType.PSEUDO_PHILOX4_32_10, 9), b.ptr, 100, 40, 0.3, 0)
    u = words[:100] * 2.0 ** -32 + 2.0 ** -33
    from scipy.stats import binom
    assert np.array_equal(b.values(), binom.ppf(u, 40, 0.3).astype(np.uint32))
