"""Philox in machine code (libraries/curand/native.py) writes the same results as the numpy path
and the reference counter arithmetic, at every alignment, across rows of the 65536 threads and
across the counter's 2^64 carry."""
import numpy as np
import pytest

from anycuda.libraries.curand import distributions, native
from anycuda.libraries.curand.generators import philox
from anycuda.libraries.curand.generators.threads import ThreadCursor

pytestmark = pytest.mark.skipif(not native.available(), reason="no LLVM JIT in this process")
THREADS = 1 << 16
ROW = 4 * THREADS                   # words in one row: a curand4 block of every thread
SEED = 0xFEEDFACE12345678


def hq(w):
    return distributions.uniform_double_hq(w[0::2], w[1::2])


@pytest.mark.parametrize("rows,count", [(0, 4096), (0, 7), (1, 1), (2, 1001), (3, 2 * ROW + 9), ((1 << 40), 30)])
@pytest.mark.parametrize("kind,dtype,per,convert", [("bits", np.uint32, 1, lambda w: w),
                                                    ("uniform", np.float32, 1, distributions.uniform_float),
                                                    ("uniform_double", np.float64, 2, hq)])
def test_fill_equals_numpy(rows, count, kind, dtype, per, convert):
    """A call that starts a row with every thread on one step (here after `rows` whole rows):
    machine code writes it; it equals the numpy path's results of the same claim."""
    engine = philox.Engine(SEED, 101)
    claim = ThreadCursor(THREADS, rows * ROW, 4).take(count, 4, per)
    out = np.full(count + 8, 7, dtype)
    engine.fill(kind, out[:count], claim)
    assert np.array_equal(out[:count], claim.results(convert(engine.claim_words(claim))))
    assert (out[count:] == 7).all()


def test_a_call_inside_a_row_goes_through_numpy():
    engine = philox.Engine(SEED, 101)
    cursor = ThreadCursor(THREADS, 0, 4)
    cursor.take(5, 4, 1)                                  # thread 1 stops inside its block
    claim = cursor.take(9, 4, 1)
    out = np.empty(9, np.uint32)
    engine.fill("bits", out, claim)
    assert np.array_equal(out[:3], philox.sequence(SEED, 1, 1, 3))
    assert np.array_equal(out[3:7], philox.sequence(SEED, 2, 0, 4))
    assert np.array_equal(out[7:], philox.sequence(SEED, 3, 0, 2))


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


@pytest.mark.parametrize("kind,dtype,per,convert", [("bits", np.uint32, 1, lambda w: w),
                                                    ("uniform_double", np.float64, 2, hq)])
@pytest.mark.parametrize("before", [5, 3 * ROW + 4 * 1001 + 2])
def test_a_call_from_inside_a_row_goes_on_in_machine_code(kind, dtype, per, convert, before):
    """The units up to thread 0 through numpy, whole rows from there natively: equal to numpy."""
    engine = philox.Engine(SEED, 101)
    cursor = ThreadCursor(THREADS, 0, 4)
    cursor.take(before, 4, per)
    claim = cursor.take(2 * ROW + 11, 4, per)
    assert claim.aligned_after()[1] is not None
    out = np.full(claim.count + 4, 7, dtype)
    engine.fill(kind, out[:claim.count], claim)
    assert np.array_equal(out[:claim.count], claim.results(convert(engine.claim_words(claim))))
    assert (out[claim.count:] == 7).all()
