"""Device memory on the CPU target: one address space.

A device pointer is a host virtual address, so copies are memmove and unified, pinned and
device memory are the same thing. Every allocation is recorded in a table of sorted
intervals that answers "which allocation holds this pointer?" for pointer attributes and
bounds checks.
"""
from __future__ import annotations

import bisect
import ctypes
import mmap
import threading
from dataclasses import dataclass

from .errors import CudaError, CUresult

ALIGNMENT = 256


@dataclass
class Allocation:
    ptr: int
    size: int
    buffer: object          # keeps the backing memory alive
    kind: str = "device"    # device, host, managed

    def contains(self, p: int) -> bool:
        return self.ptr <= p < self.ptr + max(self.size, 1)


class AllocationTable:
    def __init__(self):
        self._lock = threading.Lock()
        self._starts = []
        self._allocs = {}

    def add(self, a: Allocation):
        with self._lock:
            bisect.insort(self._starts, a.ptr)
            self._allocs[a.ptr] = a

    def remove(self, ptr: int) -> Allocation:
        with self._lock:
            a = self._allocs.pop(ptr, None)
            if a is None:
                raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE,
                                f"0x{ptr:x} is not the start of a live allocation")
            i = bisect.bisect_left(self._starts, ptr)
            del self._starts[i]
            return a

    def lookup(self, p: int):
        """The allocation containing address p, or None."""
        with self._lock:
            i = bisect.bisect_right(self._starts, p) - 1
            if i < 0:
                return None
            a = self._allocs[self._starts[i]]
            return a if a.contains(p) else None

    def total(self) -> int:
        with self._lock:
            return sum(a.size for a in self._allocs.values())


table = AllocationTable()


def allocate(nbytes: int, kind: str = "device") -> Allocation:
    """`nbytes` of zero-filled memory aligned to 256 bytes (an anonymous mapping, so large
    allocations cost nothing until touched)."""
    if nbytes < 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"cannot allocate {nbytes} bytes")
    length = max(nbytes, 1)
    try:
        buf = mmap.mmap(-1, length + ALIGNMENT)
    except (OSError, ValueError, OverflowError) as e:
        raise CudaError(CUresult.CUDA_ERROR_OUT_OF_MEMORY, f"cannot allocate {nbytes} bytes: {e}") from None
    base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    ptr = (base + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    a = Allocation(ptr, nbytes, buf, kind)
    table.add(a)
    return a


def free(ptr: int) -> None:
    table.remove(ptr)
    # the mapping is released when the last reference (arrays, views) goes away


def lookup(ptr: int):
    return table.lookup(ptr)


def memcpy(dst: int, src: int, nbytes: int) -> None:
    if nbytes:
        ctypes.memmove(dst, src, nbytes)


def memset(dst: int, value: int, nbytes: int) -> None:
    if nbytes:
        ctypes.memset(dst, value & 0xFF, nbytes)
