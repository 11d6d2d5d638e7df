"""Device memory on the CPU target: one address space.

A device pointer is a host virtual address, so copies are memmove and unified, pinned and
device memory are the same thing. Every allocation is recorded in a table of sorted
intervals that answers "which allocation holds this pointer?" for pointer attributes and
bounds checks.

Memory is zero-filled and aligned to 256 bytes, as `cudaMalloc` guarantees, and comes from
mappings of its own, away from the host's heap (arena.py), so a kernel's overrun cannot
corrupt the process. The table holds each allocation, and so its memory, until `free`;
objects that still refer to an `Allocation` after it was freed keep the memory itself
alive, so a stale pointer never reaches memory that was reused while Python code can
still see it.

Under initcheck a device allocation also carries a shadow of the bytes written (shadow.py),
which the copies and fills here keep up to date.
"""
from __future__ import annotations

import bisect
import ctypes
import threading
from dataclasses import dataclass, field

import numpy as np

from . import arena, shadow
from .errors import CudaError, CUresult

ALIGNMENT = arena.SLOT_MIN          # what cudaMalloc guarantees


@dataclass(eq=False)
class Allocation:
    """`size` bytes at device (= host) address `ptr`."""
    ptr: int
    size: int
    buffer: object = field(default=None, repr=False)     # keeps the backing memory alive
    kind: str = "device"                                  # device, host, managed, module
    shadow: object = field(default=None, repr=False)     # initcheck: 1 per byte written (shadow.py)

    def contains(self, p: int) -> bool:
        """True when `p` points into this allocation (a zero-size one holds its start only)."""
        return self.ptr <= p < self.ptr + max(self.size, 1)

    @property
    def end(self) -> int:
        return self.ptr + self.size


class AllocationTable:
    """Live allocations as sorted, non-overlapping intervals; safe to use from any thread."""

    def __init__(self):
        # reentrant: an owner's finaliser (Memory.__del__ frees its allocation) may run in the
        # middle of a table call of the same thread, whenever that call allocates an object
        self._lock = threading.RLock()
        self._starts = []        # sorted start addresses
        self._allocs = {}        # start address -> Allocation
        self.version = 0         # changes with every add and remove (copies of the table know they are old)

    def add(self, a: Allocation) -> None:
        with self._lock:
            if a.ptr in self._allocs:
                raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"0x{a.ptr:x} is already allocated")
            bisect.insort(self._starts, a.ptr)
            self._allocs[a.ptr] = a
            self.version += 1

    def remove(self, ptr: int, expected: Allocation = None) -> Allocation:
        """Take the allocation starting at `ptr` out of the table (only if it is `expected`,
        when that is given)."""
        with self._lock:
            a = self._allocs.get(ptr)
            if a is None or (expected is not None and a is not expected):
                raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE,
                                f"0x{ptr:x} is not the start of a live allocation (double free?)")
            del self._allocs[ptr]
            del self._starts[bisect.bisect_left(self._starts, ptr)]
            self.version += 1
            return a

    def lookup(self, p: int):
        """The allocation containing address `p`, or None."""
        with self._lock:
            i = bisect.bisect_right(self._starts, p) - 1
            if i < 0:
                return None
            a = self._allocs[self._starts[i]]
            return a if a.contains(p) else None

    def allocations(self) -> list:
        """The live allocations, by address."""
        with self._lock:
            return [self._allocs[p] for p in self._starts]

    def __contains__(self, a: Allocation) -> bool:
        with self._lock:
            return self._allocs.get(a.ptr) is a

    def __len__(self) -> int:
        with self._lock:
            return len(self._allocs)

    def total(self) -> int:
        """Bytes held by live allocations."""
        with self._lock:
            return sum(a.size for a in list(self._allocs.values()))     # a finaliser may free one meanwhile


table = AllocationTable()


def allocate(nbytes: int, kind: str = "device") -> Allocation:
    """`nbytes` of zero-filled memory aligned to 256 bytes, recorded in the table.
    Zero bytes are allowed: the allocation then has a unique address and holds nothing."""
    nbytes = int(nbytes)
    if nbytes < 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"cannot allocate {nbytes} bytes")
    try:
        backing = arena.Backing(nbytes)
    except (arena.OutOfMemory, ctypes.ArgumentError, OverflowError) as e:
        raise CudaError(CUresult.CUDA_ERROR_OUT_OF_MEMORY, f"cannot allocate {nbytes} bytes: {e}") from None
    a = Allocation(backing.ptr, nbytes, backing, kind)
    if shadow.wanted(kind):
        a.shadow = shadow.new(nbytes)
    table.add(a)
    return a


def free(ptr: int) -> None:
    """Release the allocation that starts at `ptr`. Freeing an unknown pointer, or one twice,
    raises CudaError(CUDA_ERROR_INVALID_VALUE)."""
    table.remove(int(ptr))


def release(a: Allocation) -> bool:
    """Free `a` if it is still live (for owners that clean up when they are collected);
    False when it was freed already."""
    try:
        table.remove(a.ptr, expected=a)
        return True
    except CudaError:
        return False


def lookup(ptr: int):
    """The live allocation that contains `ptr`, or None."""
    return table.lookup(int(ptr))


# x86-64 and AArch64 give user space the addresses below 2**47 (2**48 with 5-level paging
# off by default); a range past that, or in the NULL page, is no memory of the process
USER_SPACE_END = 1 << 48
_PAGE = 4096
_PROBE_PAGES = 1 << 16
# (called holding the GIL: a call that lets it go makes the stream's worker take it, and a small
# copy then waits for it to come back)
_libc = ctypes.PyDLL(None, use_errno=True)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)


def check_span(ptr: int, nbytes: int, what: str) -> None:
    """CUDA_ERROR_INVALID_VALUE unless `nbytes` at `ptr` is memory a copy or memset may touch:
    inside one live allocation when it starts in one, else mapped host memory (a wild pointer
    would take the process down where a GPU's driver returns an error)."""
    ptr, nbytes = int(ptr), int(nbytes)
    if nbytes <= 0:
        return
    a = lookup(ptr)
    if a is not None:
        if ptr + nbytes > a.end:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE,
                            f"{what} of {nbytes} bytes at 0x{ptr:x} runs {ptr + nbytes - a.end} bytes past the end "
                            f"of its {a.size}-byte allocation at 0x{a.ptr:x}")
        return
    if arena.in_device_space(ptr, nbytes):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE,
                        f"{what} of {nbytes} bytes at 0x{ptr:x}: device memory outside any live allocation "
                        "(freed, or past an allocation's end)")
    if ptr < _PAGE or ptr + nbytes > USER_SPACE_END or not _mapped(ptr, nbytes):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE,
                        f"{what} of {nbytes} bytes at 0x{ptr:x}: neither an allocation nor mapped host memory")


# mincore's answer, a byte a page, which nothing reads: one buffer serves every probe (threads
# that write it at once write bytes nobody looks at)
_ANSWER = ctypes.create_string_buffer(_PROBE_PAGES)


def _mapped(ptr: int, nbytes: int) -> bool:
    """Whether every page of the range is mapped (mincore fails with ENOMEM on a hole); probed
    a slice at a time, so that a huge range needs no huge answer buffer."""
    start = ptr // _PAGE * _PAGE
    end = ptr + nbytes
    while start < end:
        length = min(end - start, _PROBE_PAGES * _PAGE)
        if _libc.mincore(start, length, _ANSWER) != 0:
            return False
        start += length
    return True


def memcpy(dst: int, src: int, nbytes: int) -> None:
    """Copy `nbytes` between any two addresses (host or device: they are the same)."""
    if nbytes < 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"cannot copy {nbytes} bytes")
    if nbytes:
        check_span(src, nbytes, "copy source")
        check_span(dst, nbytes, "copy destination")
        ctypes.memmove(int(dst), int(src), int(nbytes))
        written(dst, nbytes)


def copy_from_host_array(dst: int, host: np.ndarray) -> None:
    """memcpy of a C-contiguous numpy array's bytes to `dst`, checked on `dst`'s side only:
    the array's own buffer is memory the process holds (a 4-byte copy spent a third of its
    ~17 us probing it)."""
    if host.nbytes:
        check_span(dst, host.nbytes, "copy destination")
        ctypes.memmove(int(dst), host.ctypes.data, host.nbytes)
        written(dst, host.nbytes)


def copy_to_host_array(host: np.ndarray, src: int) -> None:
    """memcpy of `host.nbytes` from `src` into a C-contiguous numpy array, checked on `src`'s
    side only (copy_from_host_array's reason)."""
    if host.nbytes:
        check_span(src, host.nbytes, "copy source")
        ctypes.memmove(host.ctypes.data, int(src), host.nbytes)


def written(dst: int, nbytes: int) -> None:
    """Bytes [dst, dst + nbytes) were written from the host side: their shadow says so
    (initcheck; nothing to do otherwise)."""
    if shadow.tracking:
        a = table.lookup(int(dst))
        if a is not None and a.shadow is not None:
            shadow.mark(a, dst, nbytes)


_ELEMENT_TYPES = {1: "<u1", 2: "<u2", 4: "<u4"}


def fill(dst: int, value: int, count: int, element: int) -> None:
    """Set `count` elements of `element` bytes (1, 2 or 4) at `dst` to `value`'s low bytes,
    with no buffer of the fill's size (a 4 GB memset must not need 4 GB more)."""
    if count <= 0:
        return
    check_span(dst, count * element, "memset")
    written(dst, count * element)
    value = int(value) & ((1 << (8 * element)) - 1)
    if value == int.from_bytes(bytes([value & 0xFF]) * element, "little"):
        ctypes.memset(int(dst), value & 0xFF, count * element)       # one byte repeated
        return
    np.frombuffer((ctypes.c_char * (count * element)).from_address(int(dst)), _ELEMENT_TYPES[element]).fill(value)


def memset(dst: int, value: int, nbytes: int) -> None:
    """Set `nbytes` bytes at `dst` to the low byte of `value`."""
    if nbytes < 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"cannot set {nbytes} bytes")
    fill(dst, value, int(nbytes), 1)
