"""Device memory away from the host's heap (runtime/arena.py): overruns damage device memory
or fault, never the process; slots are reused zeroed, and only once nothing refers to them."""
import ctypes
import gc

import numpy as np
import pytest

import anycuda as ac
from anycuda.runtime import arena, memory
from anycuda.runtime.errors import CudaError, CUresult

SOURCE = r"""
extern "C" __global__ void fill_from(unsigned char *p, long long first, long long count) {
  long long i = first + (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < first + count) p[i] = 0x5a;
}
"""


@pytest.fixture(scope="module")
def fill_from():
    return ac.RawModule(code=SOURCE).get_function("fill_from")


def _launch(kernel, ptr, first, count):
    blocks = (count + 255) // 256
    kernel((blocks,), (256,), (np.uint64(ptr), np.int64(first), np.int64(count)))
    ac.synchronize()


def _heap_still_works():
    junk = [np.zeros(n) for n in range(1, 300)] + [bytearray(64) for _ in range(2000)]
    return sum(len(j) for j in junk) > 0


@pytest.mark.parametrize("size", [4, 256, 3000, 40_000])
def test_writing_64_kb_past_a_small_buffer_leaves_the_process_whole(fill_from, size):
    target = memory.allocate(size)
    try:
        try:
            _launch(fill_from, target.ptr, size, 64 * 1024)
        except CudaError as e:              # reaching a guard is an illegal address, as on a GPU
            assert e.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
        assert _heap_still_works()
    finally:
        memory.free(target.ptr)


@pytest.mark.parametrize("direction", ["past the end", "before the start"])
def test_an_overrun_of_a_large_buffer_is_an_illegal_address(fill_from, direction):
    size = 1 << 20                                 # its own mapping, ending on a page: the guard follows
    target = memory.allocate(size)
    try:
        first = size if direction == "past the end" else -4096
        with pytest.raises(CudaError) as e:
            _launch(fill_from, target.ptr, first, 4096)
        assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
        assert _heap_still_works()
        _launch(fill_from, target.ptr, 0, size)       # the device still works after the fault
        assert ctypes.string_at(target.ptr + size - 8, 8) == b"\x5a" * 8
    finally:
        memory.free(target.ptr)


@pytest.mark.parametrize("size", [1, 200, 256, 1000, 65536, 65537, 300_000])
def test_memory_handed_out_again_is_zero(size):
    for _ in range(3):
        a = memory.allocate(size)
        assert ctypes.string_at(a.ptr, size) == b"\0" * size
        ctypes.memset(a.ptr, 0xEE, size)           # poison for the next owner of this memory
        memory.free(a.ptr)
        del a


def test_a_slot_is_not_reused_while_an_allocation_still_refers_to_it():
    kept = memory.allocate(100)
    memory.free(kept.ptr)                          # freed, but `kept` still holds its backing
    ctypes.memset(kept.ptr, 0x33, 100)
    others = [memory.allocate(100) for _ in range(64)]
    try:
        assert all(o.ptr != kept.ptr for o in others)
        assert ctypes.string_at(kept.ptr, 100) == b"\x33" * 100
    finally:
        for o in others:
            memory.free(o.ptr)
    address = kept.ptr
    del kept
    gc.collect()
    again = [memory.allocate(100) for _ in range(64)]
    try:
        assert address in {a.ptr for a in again}       # collected: its slot is free again
    finally:
        for a in again:
            memory.free(a.ptr)


def test_many_small_allocations_share_mappings():
    before = _mappings()
    held = [memory.allocate(256) for _ in range(20_000)]
    try:
        assert len({a.ptr for a in held}) == len(held)
        assert all(a.ptr % memory.ALIGNMENT == 0 for a in held)
        assert _mappings() - before < 100          # 20,000 buffers in a few slabs, not 20,000 mappings
    finally:
        for a in held:
            memory.free(a.ptr)


def _mappings() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def test_slot_sizes():
    assert [arena.slot_size(n) for n in (0, 1, 256, 257, 4096, 4097, 65536)] == \
        [256, 256, 256, 512, 4096, 8192, 65536]


def test_more_memory_than_the_system_has_is_out_of_memory():
    with pytest.raises(CudaError) as e:
        memory.allocate(1 << 50)
    assert e.value.code == CUresult.CUDA_ERROR_OUT_OF_MEMORY
    small = memory.allocate(1 << 20)                # and allocation goes on working
    memory.free(small.ptr)


def _smaps_entry(address) -> dict:
    """The /proc/self/smaps fields of the mapping holding `address`."""
    fields, inside = {}, False
    with open("/proc/self/smaps") as fh:
        for line in fh:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(v, 16) for v in head.split("-"))
                inside = lo <= address < hi
            elif inside:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
    return fields


@pytest.mark.parametrize("size", [2 << 20, (5 << 20) + 12345, 64 << 20])
def test_large_buffers_start_on_a_huge_page_and_ask_for_huge_pages(size):
    """As numpy does for its large arrays: a buffer of 2 MiB or more starts in the first page
    of a 2 MiB boundary (at its colour, arena.next_colour) and its mapping is marked for
    transparent huge pages; the guard after it still faults."""
    target = memory.allocate(size)
    try:
        assert target.ptr % arena.HUGE < arena.PAGE and target.ptr % memory.ALIGNMENT == 0
        entry = _smaps_entry(target.ptr)
        assert "hg" in entry.get("VmFlags", "").split()           # madvise(MADV_HUGEPAGE)
        end = (target.ptr + size + arena.PAGE - 1) // arena.PAGE * arena.PAGE
        assert _smaps_entry(end).get("VmFlags", "").split()[:2] != ["rd", "wr"]     # the guard
        ctypes.memset(target.ptr, 0x11, size)
    finally:
        memory.free(target.ptr)


def test_large_buffers_start_at_colours_a_kilobyte_apart():
    """Sixteen large buffers allocated one after another start at sixteen offsets in their
    pages, each on cudaMalloc's alignment, neighbours at least 1 KB apart (arena.next_colour:
    in[i] and out[i] at one offset made loads wait behind stores); each holds its bytes."""
    held = [memory.allocate((1 << 20) + 4096 * k) for k in range(16)]
    try:
        offsets = [a.ptr % arena.PAGE for a in held]
        assert len(set(offsets)) == 16 and all(o % memory.ALIGNMENT == 0 for o in offsets)
        assert all(min((a - b) % arena.PAGE, (b - a) % arena.PAGE) >= 1024 for a, b in zip(offsets, offsets[1:]))
        for k, a in enumerate(held):
            ctypes.memset(a.ptr, k, a.size)
        for k, a in enumerate(held):
            got = (ctypes.c_ubyte * a.size).from_address(a.ptr)
            assert got[0] == got[a.size - 1] == k
    finally:
        for a in held:
            memory.free(a.ptr)
