"""The allocation table: one address space, 256-byte alignment, lookups, frees, threads."""
import ctypes
import random
import threading

import numpy as np
import pytest

import anycuda as ac
from anycuda.runtime import memory


def test_allocate_is_aligned_and_zeroed():
    for n in (0, 1, 100, 256, 4097, 1 << 22):
        a = memory.allocate(n)
        try:
            assert a.ptr % memory.ALIGNMENT == 0 and a.size == n
            if n:
                assert ctypes.string_at(a.ptr, min(n, 4096)) == b"\0" * min(n, 4096)
                ctypes.memset(a.ptr + n - 1, 7, 1)          # the last byte is writable
        finally:
            memory.free(a.ptr)


def test_lookup_inside_and_outside():
    a = memory.allocate(1000)
    b = memory.allocate(1000)
    try:
        for p in (a.ptr, a.ptr + 1, a.ptr + 999):
            assert memory.lookup(p) is a
        assert memory.lookup(b.ptr + 500) is b
        assert memory.lookup(a.ptr + 1000) is not a
        assert memory.lookup(a.ptr - 1) is not a
        assert memory.lookup(0) is None and memory.lookup(8) is None
        assert a.contains(a.ptr + 999) and not a.contains(a.ptr + 1000)
    finally:
        memory.free(a.ptr)
        memory.free(b.ptr)
    assert memory.lookup(a.ptr) is None and memory.lookup(b.ptr + 10) is None


def test_zero_size_allocation_has_its_own_address():
    a, b = memory.allocate(0), memory.allocate(0)
    try:
        assert a.ptr != b.ptr
        assert memory.lookup(a.ptr) is a
    finally:
        memory.free(a.ptr)
        memory.free(b.ptr)


def test_double_free_and_unknown_pointers():
    a = memory.allocate(64)
    memory.free(a.ptr)
    with pytest.raises(ac.CudaError) as e:
        memory.free(a.ptr)
    assert e.value.code == ac.CUresult.CUDA_ERROR_INVALID_VALUE
    b = memory.allocate(64)
    try:
        with pytest.raises(ac.CudaError) as e:
            memory.free(b.ptr + 8)                  # inside, but not the start
        assert e.value.code == ac.CUresult.CUDA_ERROR_INVALID_VALUE
    finally:
        memory.free(b.ptr)
    with pytest.raises(ac.CudaError):
        memory.free(12345)
    with pytest.raises(ac.CudaError) as e:
        memory.allocate(-1)
    assert e.value.code == ac.CUresult.CUDA_ERROR_INVALID_VALUE


def test_release_only_frees_its_own_allocation():
    a = memory.allocate(10)
    assert memory.release(a) is True
    assert memory.release(a) is False


def test_huge_allocation_is_out_of_memory():
    with pytest.raises(ac.CudaError) as e:
        memory.allocate(1 << 62)
    assert e.value.code == ac.CUresult.CUDA_ERROR_OUT_OF_MEMORY


def test_memcpy_and_memset():
    a, b = memory.allocate(256), memory.allocate(256)
    try:
        memory.memset(a.ptr, 0x1FF, 100)            # the low byte counts
        memory.memcpy(b.ptr + 10, a.ptr, 50)
        raw = ctypes.string_at(b.ptr, 70)
        assert raw == b"\0" * 10 + b"\xff" * 50 + b"\0" * 10
        memory.memcpy(b.ptr, a.ptr, 0)
        memory.memset(b.ptr, 1, 0)
        with pytest.raises(ac.CudaError):
            memory.memcpy(b.ptr, a.ptr, -1)
    finally:
        memory.free(a.ptr)
        memory.free(b.ptr)


@pytest.mark.parametrize("element", [1, 2, 4])
@pytest.mark.parametrize("value", [0, 0x12345678, 0xABABABAB, -1, 0x100])
def test_fill_sets_elements_and_nothing_else(element, value):
    """cuMemsetD8/D16/D32: the value's low bytes in each element, poisoned bytes around kept."""
    count = 1001
    a = memory.allocate(count * element + 64)
    try:
        ctypes.memset(a.ptr, 0xCD, count * element + 64)
        memory.fill(a.ptr + 32, value, count, element)
        raw = np.frombuffer(ctypes.string_at(a.ptr, count * element + 64), np.uint8)
        kind = {1: np.uint8, 2: np.uint16, 4: np.uint32}[element]
        want = np.full(count, value & ((1 << (8 * element)) - 1), kind).view(np.uint8)
        assert (raw[:32] == 0xCD).all() and (raw[32 + count * element:] == 0xCD).all()
        np.testing.assert_array_equal(raw[32:32 + count * element], want)
        memory.fill(a.ptr, value, 0, element)             # nothing
    finally:
        memory.free(a.ptr)


def test_fill_needs_no_buffer_of_its_size():
    """A 16-bit fill of 128 MB allocates no Python or numpy buffer of that size (a 4 GB memset,
    CuPy's zeros of a huge array, had failed with MemoryError)."""
    import tracemalloc
    n = 1 << 26
    a = memory.allocate(n * 2)
    try:
        tracemalloc.start()
        try:
            memory.fill(a.ptr, 0x1234, n, 2)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < (1 << 20), peak
        assert ctypes.string_at(a.ptr + 2 * (n - 2), 4) == bytes.fromhex("34123412")
    finally:
        memory.free(a.ptr)


def test_table_is_thread_safe():
    errors = []

    def churn(seed):
        r = random.Random(seed)
        live = []
        try:
            for _ in range(300):
                if live and r.random() < 0.5:
                    a = live.pop(r.randrange(len(live)))
                    assert memory.lookup(a.ptr + a.size // 2) is a
                    memory.free(a.ptr)
                else:
                    live.append(memory.allocate(r.randrange(0, 5000)))
            for a in live:
                memory.free(a.ptr)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=churn, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_table_total_counts_live_bytes():
    before = memory.table.total()
    a = memory.allocate(12345)
    assert memory.table.total() == before + 12345
    memory.free(a.ptr)
    assert memory.table.total() == before


def test_an_owner_finaliser_inside_a_table_call_does_not_deadlock(monkeypatch):
    # Memory.__del__ frees its allocation; the collector may run it while the same thread is
    # inside a table call (any call that allocates an object). A table of its own keeps a
    # failure here from stopping every later test.
    table = memory.AllocationTable()
    monkeypatch.setattr(memory, "table", table)
    mem = ac.Memory(64)
    ptr = mem.ptr
    finished = threading.Event()

    def collect_inside_a_table_call():
        with table._lock:
            mem.__del__()
        finished.set()

    threading.Thread(target=collect_inside_a_table_call, daemon=True).start()
    assert finished.wait(5.0), "a finaliser inside a table call waited for the table's lock"
    assert memory.lookup(ptr) is None


def test_device_pointer_is_a_host_address():
    d = ac.asarray(np.arange(4, dtype=np.int32))
    view = np.frombuffer((ctypes.c_int32 * 4).from_address(d.data.ptr), dtype=np.int32)
    assert view.tolist() == [0, 1, 2, 3]


def test_empty_memset_at_an_allocations_end_succeeds_and_a_bad_one_fails(context):
    """cuMemsetD32Async of 0 elements at the end of an allocation (a range [n, n) of an
    n-element array) fills nothing and succeeds; one element there is outside and refused."""
    from anycuda.driver import api
    from anycuda.runtime.errors import CudaError
    p = api.cuMemAlloc(16)
    ctypes.memset(p, 0xCD, 16)
    api.cuMemsetAsync(p + 16, 7, 0, 4, 0)
    api.cuStreamSynchronize(0)
    assert ctypes.string_at(p, 16) == b"\xcd" * 16
    with pytest.raises(CudaError):
        api.cuMemsetAsync(p + 16, 7, 1, 4, 0)
    api.cuMemFree(p)


def test_memory_dropped_while_queued_work_uses_it_is_freed_after_that_work():
    """A Memory collected (or freed) while work queued before still writes into it stays live
    until that work has finished, as cudaFree waits for the device; it was freed at once, and
    the work wrote into unmapped memory (a segfault)."""
    import gc
    gate = threading.Event()
    stream = ac.Stream()
    mem = ac.Memory(1 << 20)
    ptr, wrote = mem.ptr, []
    stream.launch_host_func(lambda _: gate.wait(30))
    stream.launch_host_func(lambda _: wrote.append(ctypes.memset(ptr, 7, 1 << 20)))
    del mem
    gc.collect()
    assert memory.lookup(ptr) is not None            # the queued write still needs it
    other = ac.Memory(64)                            # nothing pending on it: freed at once
    other_ptr = other.ptr
    gate.set()
    stream.synchronize()
    assert wrote and memory.lookup(ptr) is None      # written, then released
    other.free()
    assert memory.lookup(other_ptr) is None
