"""MT19937 as cuRAND's host generator lays it out (generators/mt19937.py): the jump-ahead against
plain stepping of the sequence, and the layout's pieces against each other. NVIDIA's own results
are compared in test_curand_nvidia.py and test_curand_golden.py."""
import numpy as np
import pytest

from anycuda.libraries.curand.generators import mt19937, mt19937_jump
from anycuda.libraries.curand.generators.mt19937 import LANES, ROW, ROWS, Engine
from anycuda.libraries.curand.generators.mt19937_jump import N, extend, init_genrand

CHARACTERISTIC = mt19937_jump.characteristic_polynomial()


def first_window(seed):
    return extend(init_genrand(seed), N)[N:]


@pytest.mark.parametrize("distance", [1, 1000, 25_000, 1 << 15])
def test_a_jump_lands_where_stepping_does(distance):
    window = first_window(int(np.random.default_rng().integers(0, 2 ** 32)))
    words = mt19937_jump.polynomial_words(mt19937_jump.power_of_x(distance, CHARACTERISTIC))
    assert np.array_equal(mt19937_jump.jump(window, words), extend(window, distance)[distance:distance + N])


def test_numpy_jump_equals_machine_code(monkeypatch):
    window = first_window(7)
    words = mt19937_jump.polynomial_words(mt19937_jump.power_of_x(3000, CHARACTERISTIC))
    machine = mt19937_jump.jump(window, words)
    monkeypatch.setattr(mt19937_jump, "_machine_jump", lambda: None)
    assert np.array_equal(mt19937_jump.jump(window, words), machine)


@pytest.mark.slow
def test_the_stored_jump_polynomial_is_x_to_the_2_to_the_2048():
    assert mt19937_jump.jump_polynomial(2048, CHARACTERISTIC) == mt19937_jump.JUMP_2048


def test_generator_zero_lanes_write_the_plain_sequence():
    seed = int(np.random.default_rng().integers(0, 2 ** 32))
    plain = mt19937.temper(extend(first_window(seed), N)[:2 * N])          # two generations
    words = Engine(seed, 101).words(0, 2 * ROWS * ROW)
    rows = words.reshape(2 * ROWS, ROW)[:, :LANES]                         # generator 0's lanes
    expected = np.concatenate([plain[mt19937.LANE_WORDS], plain[N + mt19937.LANE_WORDS]])
    assert np.array_equal(rows, expected)
    assert sorted(mt19937.LANE_WORDS.reshape(-1)) == list(range(N))        # each word once


def test_generator_one_starts_2_to_the_2048_on():
    seed = 99
    words = Engine(seed, 101).words(0, 2 * LANES)             # two generators: no others made
    start = mt19937_jump.jump(first_window(seed), mt19937_jump.polynomial_words(mt19937_jump.JUMP_2048))
    assert np.array_equal(words[LANES:2 * LANES], mt19937.temper(start[mt19937.LANE_WORDS[0]]))


def test_small_calls_large_calls_and_generations_agree():
    seed = int(np.random.default_rng().integers(0, 2 ** 32))
    whole = Engine(seed, 101).words(0, 80 * ROW)                # past the first generation's 78 rows
    engine = Engine(seed, 101)
    pieces, start = [], 0
    for count in (5, 40, ROW - 45, 3, 77 * ROW - 3, 2 * ROW):   # inside a row, to its end, across generations
        pieces.append(engine.words(start, count))
        start += count
    assert np.array_equal(np.concatenate(pieces), whole)
    assert np.array_equal(Engine(seed, 101).words(79 * ROW + 17, 100), whole[79 * ROW + 17:79 * ROW + 117])


def test_chains_of_jumps_in_threads_equal_one_chain(monkeypatch):
    monkeypatch.setattr(mt19937, "worker_count", lambda: 8)       # eight chains striding 8 generators
    seed = int(np.random.default_rng().integers(0, 2 ** 32))
    starts = mt19937._Starts(seed)
    starts.first(3)
    parallel = starts.first(200).copy()
    one = mt19937_jump.polynomial_words(mt19937_jump.JUMP_2048)
    expected = [first_window(seed)]
    for _ in range(199):
        expected.append(mt19937_jump.jump(expected[-1], one))
    assert np.array_equal(parallel, np.array(expected))
