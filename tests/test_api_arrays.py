"""Device arrays: creation, round trips, views, ownership of memory."""
import gc

import numpy as np
import pytest

import anycuda as ac
from anycuda.runtime import memory

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
          np.int64, np.uint64, np.complex64, np.complex128, np.bool_]
SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 3, 4), (1, 1, 1), (4, 0, 2)]


def random_array(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return (rng.standard_normal(shape) * 1000).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip(rng, dtype, shape):
    host = random_array(rng, shape, dtype)
    d = ac.asarray(host)
    assert isinstance(d, ac.ndarray)
    assert d.shape == host.shape and d.dtype == host.dtype
    assert d.size == host.size and d.nbytes == host.nbytes and d.ndim == host.ndim
    assert d.strides == np.empty(shape, dtype).strides and d.itemsize == host.itemsize
    back = d.get()
    assert isinstance(back, np.ndarray) and back.dtype == host.dtype
    assert back.tobytes() == host.tobytes()
    other = random_array(rng, shape, dtype)
    d.set(other)
    assert d.get().tobytes() == other.tobytes()
    assert back.tobytes() == host.tobytes()          # get() returned a copy


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.complex64])
def test_creation_functions(dtype):
    assert np.array_equal(ac.zeros((4, 3), dtype).get(), np.zeros((4, 3), dtype))
    assert np.array_equal(ac.ones(5, dtype).get(), np.ones(5, dtype))
    assert np.array_equal(ac.full((2, 2), 7, dtype).get(), np.full((2, 2), 7, dtype))
    e = ac.empty((2, 5), dtype)
    assert e.shape == (2, 5) and e.dtype == dtype and e.get().shape == (2, 5)
    src = ac.asarray(np.arange(6, dtype=dtype).reshape(2, 3))
    for like in (ac.empty_like(src), ac.zeros_like(src), ac.ones_like(src), ac.full_like(src, 3)):
        assert like.shape == src.shape and like.dtype == src.dtype
        assert like.data.ptr != src.data.ptr
    assert not ac.zeros_like(src).get().any()
    assert ac.zeros_like(src, dtype=np.int8).dtype == np.int8


def test_defaults_follow_cupy():
    assert ac.zeros(3).dtype == np.float64 and ac.empty(3).dtype == np.float64
    assert ac.full(2, 3).dtype == np.asarray(3).dtype
    assert ac.zeros(4).shape == (4,) and ac.zeros(()).shape == ()


def test_pointers_are_aligned_and_distinct():
    arrays = [ac.empty(n, np.uint8) for n in (0, 1, 3, 255, 256, 257, 4096, 1 << 20)]
    ptrs = [a.data.ptr for a in arrays]
    assert all(p % 256 == 0 for p in ptrs)
    assert len(set(ptrs)) == len(ptrs)
    for a in arrays:
        assert memory.lookup(a.data.ptr) is a.data.allocation
    assert isinstance(arrays[0].data.ptr, int)


def test_copy_fill_reshape_view_astype(rng):
    host = rng.standard_normal((4, 6)).astype(np.float32)
    d = ac.asarray(host)
    c = d.copy()
    assert c.data.ptr != d.data.ptr and np.array_equal(c.get(), host)
    c.fill(2.5)
    assert (c.get() == 2.5).all() and np.array_equal(d.get(), host)
    r = d.reshape(3, -1)
    assert r.shape == (3, 8) and r.data.ptr == d.data.ptr and np.array_equal(r.get(), host.reshape(3, 8))
    assert d.reshape((24,)).shape == (24,) and d.ravel().shape == (24,)
    with pytest.raises(ValueError):
        d.reshape(5, 5)
    v = d.view(np.uint32)
    assert np.array_equal(v.get(), host.view(np.uint32))
    assert np.array_equal(d.astype(np.float64).get(), host.astype(np.float64))
    assert ac.asarray(d) is d
    assert ac.array(d).data.ptr != d.data.ptr
    assert np.array_equal(ac.asnumpy(d), host)


def test_asarray_from_python_objects_and_dtype():
    assert np.array_equal(ac.asarray([1, 2, 3], dtype=np.int16).get(), np.array([1, 2, 3], np.int16))
    assert ac.asarray(3.5).shape == () and ac.asarray(3.5).get() == 3.5
    f = np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4))
    assert np.array_equal(ac.asarray(f).get(), f)          # made C-contiguous on the way in
    structured = np.zeros(3, dtype=[("a", np.int32), ("b", np.float64)])
    structured["a"] = [1, 2, 3]
    assert ac.asarray(structured).get()["a"].tolist() == [1, 2, 3]
    with pytest.raises(TypeError):
        ac.asarray(np.array([object()]))


def test_get_into_out_and_set_checks():
    d = ac.asarray(np.arange(5, dtype=np.int32))
    out = np.empty(5, np.int32)
    assert d.get(out=out) is out and out.tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        d.get(out=np.empty(4, np.int32))
    with pytest.raises(ValueError):
        d.set(np.zeros(6))
    d.set(np.full(5, 9.0))                   # converted to the array's dtype
    assert d.get().tolist() == [9] * 5
    frozen = np.empty(5, np.int32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        d.get(out=frozen)                    # (nothing may write a read-only buffer)


def test_copies_with_host_arrays_check_the_device_side(rng):
    from anycuda.runtime import memory
    from anycuda.runtime.errors import CudaError
    x = rng.integers(0, 1 << 30, 257).astype(np.int64)
    d = ac.empty(257, np.int64)
    memory.copy_from_host_array(d.data.ptr, x)
    back = np.full(257, -1, np.int64)
    memory.copy_to_host_array(back, d.data.ptr)
    np.testing.assert_array_equal(back, x)
    with pytest.raises(CudaError, match="past the end"):
        memory.copy_from_host_array(d.data.ptr + 8, x)
    with pytest.raises(CudaError, match="past the end"):
        memory.copy_to_host_array(back, d.data.ptr + 8)
    freed = ac.empty(16, np.int64)
    ptr = freed.data.ptr
    del freed
    import gc
    gc.collect()
    with pytest.raises(CudaError):
        memory.copy_from_host_array(ptr, x[:16])


def test_no_implicit_host_conversion():
    d = ac.zeros(3, np.float32)
    with pytest.raises(TypeError):
        np.asarray(d)
    with pytest.raises(TypeError):
        bool(d)
    with pytest.raises(ValueError):
        ac.zeros(-1)
    with pytest.raises(ValueError):
        ac.zeros(3, order="F")


def test_repr_and_array_interface():
    d = ac.zeros((2, 3), np.float32)
    assert "shape=(2, 3)" in repr(d) and "float32" in repr(d)
    cai = d.__cuda_array_interface__
    assert cai["data"] == (d.data.ptr, False) and cai["shape"] == (2, 3) and cai["typestr"] == "<f4"
    assert len(d) == 2
    with pytest.raises(TypeError):
        len(ac.zeros(()))


def test_memory_is_freed_when_the_last_user_goes():
    a = ac.zeros(1000, np.float32)
    alloc = a.data.allocation
    view = a.reshape(10, 100)
    del a
    gc.collect()
    assert alloc in memory.table                    # the view still uses it
    del view
    gc.collect()
    assert alloc not in memory.table
    before = len(memory.table)
    for _ in range(50):
        ac.empty(1 << 20, np.uint8)
    gc.collect()
    assert len(memory.table) <= before


def test_memory_pointer_arithmetic_and_copies():
    d = ac.zeros(16, np.uint8)
    p = d.data + 4
    assert p.ptr == d.data.ptr + 4 and p.size == 12 and int(p) == p.ptr
    p.copy_from_host(np.arange(1, 5, dtype=np.uint8))
    out = np.empty(16, np.uint8)
    d.data.copy_to_host(out)
    assert out[4:8].tolist() == [1, 2, 3, 4] and out[:4].tolist() == [0] * 4
    (d.data + 10).memset(0xAB, 3)
    assert d.get()[10:13].tolist() == [0xAB] * 3 and d.get()[13] == 0
    e = ac.zeros(16, np.uint8)
    e.data.copy_from_device(d.data, 16)
    assert np.array_equal(e.get(), d.get())
    with pytest.raises(ac.CudaError):
        p.copy_from_host(np.zeros(13, np.uint8))
