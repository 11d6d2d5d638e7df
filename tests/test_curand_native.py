"""Philox in machine code (libraries/curand/native.py) writes the same results as the numpy path
and the reference counter arithmetic, at every alignment, across rows of the 4096 threads and
across the counter's 2^64 carry."""
import numpy as np
import pytest

from anycuda.libraries.curand import distributions, native
from anycuda.libraries.curand.generators import philox

pytestmark = pytest.mark.skipif(not native.available(), reason="no LLVM JIT in this process")
THREADS = 1 << 16
ROW = 4 * THREADS                   # words in one row: a curand4 block of every thread
SEED = 0xFEEDFACE12345678


def hq(w):
    return distributions.uniform_double_hq(w[0::2], w[1::2])


@pytest.mark.parametrize("start,count", [(0, 4096), (1, 7), (3, 1), (2, 1001), (5, 4), (ROW - 6, 20),
                                         (3 * ROW + 2, 2 * ROW + 9), (ROW * (1 << 40) - 2, 30)])
@pytest.mark.parametrize("kind,dtype,per,convert", [("bits", np.uint32, 1, lambda w: w),
                                                    ("uniform", np.float32, 1, distributions.uniform_float),
                                                    ("uniform_double", np.float64, 2, hq)])
def test_fill_equals_numpy(start, count, kind, dtype, per, convert):
    start -= start % per                     # a double starts on an even word
    unit = 8 if kind == "uniform_double" else 4
    engine = philox.Engine(SEED, 101)
    out = np.full(count + 8, 7, dtype)
    engine.fill(kind, out[:count], start)
    assert np.array_equal(out[:count], convert(engine.words(start, count * per, unit)))
    assert (out[count:] == 7).all()


def test_engine_words_are_blocks_of_successive_subsequences():
    engine = philox.Engine(SEED, 101)
    w = engine.words(ROW - 4, 8)
    assert np.array_equal(w[:4], philox.sequence(SEED, THREADS - 1, 0, 4))
    assert np.array_equal(w[4:], philox.sequence(SEED, 0, 4, 4))


def test_engine_units_of_eight_words_are_two_blocks_of_one_thread():
    engine = philox.Engine(SEED, 101)
    w = engine.words(2 * 8 * THREADS - 8, 24, 8)            # the last unit of row 1, two of row 2
    assert np.array_equal(w[:8], philox.sequence(SEED, THREADS - 1, 8, 8))
    assert np.array_equal(w[8:16], philox.sequence(SEED, 0, 16, 8))
    assert np.array_equal(w[16:], philox.sequence(SEED, 1, 16, 8))


def test_native_runs_of_two_blocks():
    out = np.empty(16, np.uint32)
    first = 2 * (3 << 16) + 2 * ((1 << 16) - 1)            # thread 65535's third unit, then thread 0's fourth
    native.fill("philox_bits", out.ctypes.data, 4, first, 16, 9, 1)
    counters = [(6, 65535), (7, 65535), (8, 0), (9, 0)]
    expected = np.concatenate([philox.blocks(9, np.array([lo], np.uint64), hi)[0] for lo, hi in counters])
    assert np.array_equal(out, expected)


@pytest.mark.parametrize("shift", [0, 12])
def test_native_counters(shift):
    out = np.empty(8, np.uint32)
    first = ((1 << 64) - 1) << shift if shift == 0 else (5 << shift) + 4095
    native.fill("philox_bits", out.ctypes.data, 2, first & ((1 << 64) - 1), shift, 3)
    if shift == 0:                          # subsequence 0, blocks 2^64 - 1 and 0 (no carry out)
        counters = [((1 << 64) - 1, 0), (0, 0)]
    else:                                   # thread 4095 block 5, then thread 0 block 6
        counters = [(5, 4095), (6, 0)]
    expected = np.concatenate([philox.blocks(3, np.array([lo], np.uint64), hi)[0] for lo, hi in counters])
    assert np.array_equal(out, expected)
