"""State spaces and parameters: widths and vector loads, __ldg, shared (static and dynamic),
local arrays, __constant__ and __device__ variables with initialisers, struct, large and
many parameters, generic pointers into shared memory."""
import ctypes

import numpy as np
import pytest

import anycuda as ac
from conformance import load_cuda, poison


def _k(name):
    return load_cuda("memory").get_function(name)


def test_access_widths_and_vectors(rng):
    n = 500
    c8 = rng.integers(-128, 128, n).astype(np.int8)
    s16 = rng.integers(-2 ** 15, 2 ** 15, n).astype(np.int16)
    i64 = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    v4 = rng.standard_normal((n, 4)).astype(np.float32)
    d2 = rng.standard_normal((n, 2))
    i4 = rng.integers(-2 ** 31, 2 ** 31, (n, 4), dtype=np.int64).astype(np.int32)
    out, fout = poison((n, 6), np.int64), poison((n, 2), np.float32)
    _k("widths")((4,), (128,), (ac.asarray(c8), ac.asarray(s16), ac.asarray(i64), ac.asarray(v4), ac.asarray(d2),
                                ac.asarray(i4), out, fout, np.int32(n)))
    g = out.get()
    assert np.array_equal(g[:, 0], c8) and np.array_equal(g[:, 1], s16) and np.array_equal(g[:, 2], i64)
    assert np.array_equal(g[:, 3], i4.astype(np.int64).sum(1))
    assert np.array_equal(g[:, 4], c8.view(np.uint8)) and np.array_equal(g[:, 5], s16.view(np.uint16))
    f = fout.get()
    assert np.allclose(f[:, 0], v4 @ np.array([1, 2, 3, 4], np.float32), rtol=1e-6, atol=1e-6)
    assert np.array_equal(f[:, 1], (d2[:, 0] - d2[:, 1]).astype(np.float32))


def test_state_spaces_and_module_variables(rng):
    block, grid = 64, 3
    n = block * grid
    idx = rng.integers(0, 1000, n).astype(np.int32)
    out = poison(n, np.float32)
    _k("spaces")((grid,), (block,), (ac.asarray(idx), out, np.int32(n)), shared_mem=4 * block)
    t = np.arange(n) % block
    table = np.array([1.5, -2.0, 3.25, 0.0, 8.0, -0.5, 7.0, 100.0], np.float32)
    want = (idx & 15) * 0.5 + t + table[((t + 1) % block) % 8] + np.float32(42 * 0.25)
    assert np.array_equal(out.get(), want.astype(np.float32))


def test_struct_parameter():
    mixed = np.dtype([("f", "<f4"), ("i", "<i4"), ("d", "<f8"), ("s", "<i2"), ("c", "i1"), ("pad", "V5")])
    m = np.array([(1.25, -7, 3.5e100, -300, -5, b"")], mixed)[0]
    out = poison(5, np.float64)
    _k("struct_param")((1,), (1,), (m, out))
    assert list(out.get()) == [1.25, -7, 3.5e100, -300, -5]
    with pytest.raises(TypeError):
        _k("struct_param")((1,), (1,), (b"\0" * 8, out))     # wrong size is refused, not misread


def test_large_parameter(rng):
    v = rng.integers(-1000, 1000, 1000).astype(np.int32)
    out = ac.zeros(1, np.int32)
    _k("big_param")((3,), (128,), (v.tobytes(), out))
    assert out.get()[0] == 3 * int((v.astype(np.int64) * (np.arange(1000) % 7)).sum())


def test_many_parameters():
    out, dout = poison(3, np.int32), poison(1, np.float64)
    args = [np.int32(v) for v in range(1, 11)] + [np.float64(1.5), np.float64(-2.0), np.float32(0.5), np.float32(4.0),
                                                   np.int8(-3), np.int16(-1234), np.int64(-(2 ** 40)), np.uint64(2 ** 63)]
    _k("many_params")((1,), (1,), tuple(args) + (out, dout))
    assert list(out.get()) == [sum(k * k for k in range(1, 11)), -3, -1234]
    assert dout.get()[0] == 1.5 * -2.0 + 2.0 - 2.0 ** 40 + 2.0 ** 63


def test_device_variable_is_shared_and_visible_from_the_host():
    mod = load_cuda("memory")
    ptr = mod.get_global("counter")
    start = ctypes.c_int.from_address(ptr.ptr).value
    before = poison(1, np.int32)
    mod.get_function("bump_counter")((10,), (100,), (before,))
    ac.synchronize()
    assert ctypes.c_int.from_address(ptr.ptr).value == start + 1000
    assert start <= before.get()[0] < start + 1000
    scale = mod.get_global("scale")
    assert ctypes.c_double.from_address(scale.ptr).value == 0.25


def test_generic_pointer_into_shared_memory():
    out = poison(128, np.float32)
    _k("generic_shared")((1,), (128,), (out,))
    t = np.arange(128)
    assert np.array_equal(out.get(), (t * (t + 1) / 2).astype(np.float32))


def test_wrong_arguments_are_refused():
    out = poison(3, np.int32)
    k = _k("many_params")
    with pytest.raises(TypeError):
        k((1,), (1,), (out,))                                      # wrong count
    with pytest.raises(TypeError):
        _k("bump_counter")((1,), (1,), (np.zeros(1, np.int32),))   # a host array
    with pytest.raises(TypeError):
        _k("widths")((1,), (1,), (out,) * 8 + (np.float64(1),))     # 8-byte scalar for a 4-byte int
