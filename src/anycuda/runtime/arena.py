"""Where device memory lives: pages mapped for it alone, fenced off from the host's heap.

A kernel that writes past its buffer must damage device memory at worst, as on a GPU: if
device memory came from malloc (numpy arrays), a write a few kilobytes past a small buffer
would overwrite malloc's own records and the process would die later in unrelated code. So
every piece of device memory here sits in a mapping of its own, with inaccessible guard
pages on both sides: an overrun lands in other device memory of the same mapping or faults
in a guard, and a fault inside a kernel is turned into CUDA_ERROR_ILLEGAL_ADDRESS.

Small requests share mappings ("slabs") cut into equal slots of a power-of-two size, so that
many small buffers do not cost one mapping each (a process may hold only ~65,000 mappings);
larger ones get a mapping each, unmapped when their last holder lets go, their buffers
starting at different offsets in the mappings' first pages (next_colour). A `Backing` is what
an allocation holds: its memory goes back (slot to its free list, mapping to the system) only
when the Backing is collected, so Python code that still refers to a freed allocation never
reaches memory that was reused.
"""
from __future__ import annotations

import bisect
import ctypes
import itertools
import mmap
import threading

PAGE = mmap.PAGESIZE
SLOT_MIN = 256                     # cudaMalloc's alignment, and the smallest slot
SLOT_MAX = 64 * 1024               # above this, a mapping per allocation
SLAB_BYTES = 1 << 20               # each slab: 4096 slots of 256 bytes ... 16 of 64 KiB
GUARD = 1 << 20                    # inaccessible bytes on each side of every mapping
HUGE = 2 << 20                     # a huge page (x86-64, AArch64 with 4 KiB pages): mappings
                                   # this large start on one and ask for them (_huge)
_MADV_HUGEPAGE = 14
COLOUR_STEP = 5 * SLOT_MIN         # next_colour: 16 starts in a page, neighbours >= 1 KB apart

_PROT_NONE, _PROT_RW = 0, mmap.PROT_READ | mmap.PROT_WRITE
_MAP_FAILED = ctypes.c_void_p(-1).value

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


class OutOfMemory(Exception):
    """The system refused the pages (the caller turns it into CUDA_ERROR_OUT_OF_MEMORY)."""


# every fenced mapping, guards included: start -> end, and the starts in order. A copy or
# memset into them outside a live allocation (a freed pointer, a guard) is refused by
# memory.check_span, where a host address would only be checked for being mapped: the
# guards are mapped, inaccessible, and the copy took the process down (fuzz_api_plain)
_fenced = {}
_fenced_starts = []
_fenced_lock = threading.RLock()     # (re-entered by a finaliser unmapping in the same thread)


def _note_fenced(base: int, end: int) -> None:
    with _fenced_lock:
        _fenced[base] = end
        bisect.insort(_fenced_starts, base)


def _forget_fenced(base: int) -> None:
    with _fenced_lock:
        if _fenced.pop(base, None) is not None:
            del _fenced_starts[bisect.bisect_left(_fenced_starts, base)]


def in_device_space(ptr: int, nbytes: int) -> bool:
    """Whether [ptr, ptr + nbytes) touches a mapping of device memory or its guards."""
    with _fenced_lock:
        i = bisect.bisect_right(_fenced_starts, ptr + nbytes - 1) - 1
        # mappings never overlap: the last one starting at or before the range's last byte
        # is the only one that can reach into it
        return i >= 0 and _fenced[_fenced_starts[i]] > ptr


def _map_fenced(nbytes: int) -> int:
    """`nbytes` (a multiple of the page) of zeroed read-write memory between two guards.
    Reserved inaccessible first and opened afterwards, so the system charges the open part
    only, and refuses it when it cannot be had (rather than killing the process on touch).
    From HUGE bytes on, it starts on a HUGE boundary and asks for huge pages (_huge)."""
    slack = HUGE if nbytes >= HUGE else 0
    total = GUARD + nbytes + GUARD + slack
    base = _libc.mmap(None, total, _PROT_NONE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if base is None or base == _MAP_FAILED:
        raise OutOfMemory(f"no address space for {nbytes} bytes (errno {ctypes.get_errno()})")
    start = base + GUARD
    if slack:
        # the reservation cut down to [start - GUARD, start + nbytes + GUARD), start aligned
        start = (start + HUGE - 1) // HUGE * HUGE
        head, end = start - GUARD - base, start + nbytes + GUARD
        if head:
            _libc.munmap(base, head)
        if base + total > end:
            _libc.munmap(end, base + total - end)
        base, total = start - GUARD, GUARD + nbytes + GUARD
    if _libc.mprotect(start, nbytes, _PROT_RW) != 0:
        errno = ctypes.get_errno()
        _libc.munmap(base, total)
        raise OutOfMemory(f"the system will not commit {nbytes} bytes (errno {errno})")
    if slack:
        _huge(start, nbytes)
    _note_fenced(start - GUARD, start + nbytes + GUARD)
    return start


def _huge(start: int, nbytes: int) -> None:
    """Ask for transparent huge pages (madvise MADV_HUGEPAGE), as numpy does for its arrays
    of 4 MiB and more: a kernel striding through a large buffer (a transpose's column, a
    grid-stride loop's rows) missed the TLB on every 4 KiB page, where an OpenMP loop over a
    numpy array did not. Where the system has none to give, the pages stay small."""
    _libc.madvise(start, nbytes, _MADV_HUGEPAGE)


def _unmap_fenced(ptr: int, nbytes: int) -> None:
    _forget_fenced(ptr - GUARD)
    _libc.munmap(ptr - GUARD, GUARD + nbytes + GUARD)


def _pages(nbytes: int) -> int:
    return max(PAGE, (nbytes + PAGE - 1) // PAGE * PAGE)


def slot_size(nbytes: int) -> int:
    """The slot a small request gets: the least power of two ≥ nbytes and ≥ SLOT_MIN."""
    return max(SLOT_MIN, 1 << (max(nbytes, 1) - 1).bit_length())


class _SlotClass:
    """Free slots of one size; slabs added as needed and kept for the process's life (as
    malloc keeps its arenas). The free list is a plain list: append and pop are atomic, so
    a Backing collected in the middle of an allocation may hand its slot back safely."""

    def __init__(self, size: int):
        self.size = size
        self.free = []
        self._grow = threading.Lock()

    def take(self) -> int:
        while True:
            try:
                return self.free.pop()
            except IndexError:
                with self._grow:
                    if not self.free:
                        base = _map_fenced(SLAB_BYTES)
                        # handed out from the slab's start upwards, as the list pops from its end
                        self.free.extend(range(base + SLAB_BYTES - self.size, base - 1, -self.size))


_classes = {}
_classes_lock = threading.Lock()


def _slot_class(size: int) -> _SlotClass:
    c = _classes.get(size)
    if c is None:
        with _classes_lock:
            c = _classes.setdefault(size, _SlotClass(size))
    return c


_colours = itertools.count()


def next_colour() -> int:
    """Where in its first page the next mapping's buffer starts: COLOUR_STEP bytes on from the
    last one's, modulo the page (16 places a multiple of SLOT_MIN apart). Two buffers that
    both start on a page put `in[i]` and `out[i]` at the same offset in their pages, and a
    load there waits behind a store to the other (the CPU compares the low 12 bits of the
    addresses first): with non-temporal stores on a Zen 1, a 5-point stencil took twice C's
    time, and 0.7 of it with its output 1 KB further on (benchmarks/NOTES.md, "Colours")."""
    return next(_colours) * COLOUR_STEP % PAGE


class Backing:
    """`nbytes` of zeroed device memory at `ptr`, aligned to SLOT_MIN; handed back when
    collected. A mapping of its own starts its buffer at a colour (next_colour)."""
    __slots__ = ("ptr", "nbytes", "_slots", "__weakref__")

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        if nbytes <= SLOT_MAX:
            self._slots = _slot_class(slot_size(nbytes))
            self.ptr = self._slots.take()
            ctypes.memset(self.ptr, 0, nbytes)             # a reused slot holds its last owner's bytes
        else:
            self._slots = None
            colour = next_colour()
            self.ptr = _map_fenced(_pages(colour + nbytes)) + colour

    def __del__(self, _unmap=_unmap_fenced, _pages=_pages, _page=PAGE):
        # (what it calls is bound here: at interpreter exit the module's names may be gone)
        ptr, self.ptr = getattr(self, "ptr", None), None
        if ptr is None:
            return
        if self._slots is not None:
            self._slots.free.append(ptr)
        else:
            colour = ptr % _page          # (the mapping starts on a page)
            _unmap(ptr - colour, _pages(colour + self.nbytes))
