"""Which bytes of device memory were ever written: the shadow initcheck reads.

Under ANYCUDA_SANITIZE=initcheck each device allocation (cuMemAlloc, cudaMalloc and their
pitched, asynchronous and pool forms, the Python API's arrays) gets a shadow: one byte per byte
of memory, 0 until the byte is written, then 1. A byte rather than a bit, so that the threads
of a kernel set their bytes with plain stores, none needing an atomic read-modify-write of a
neighbour's bit. Written means: the destination of a copy (host to device, device to device,
2-D and 3-D), a memset, a library call's views (libraries/memory.py), or a kernel's store
(compiler/ops/initcheck.py). Managed, host (pinned, mapped, registered) memory and the modules'
variables get none: they count as initialised, being the host's or PTX-initialised memory.

The flag `tracking` turns on with the first shadow made, so that copies outside initcheck cost
one test of a global.
"""
from __future__ import annotations

import os

import numpy as np

TRACKED_KINDS = ("device",)
tracking = False


def wanted(kind: str) -> bool:
    """Whether a new allocation of `kind` gets a shadow (initcheck is the tool in force; a
    misspelt tool is refused where kernels are compiled, not by every allocation)."""
    return kind in TRACKED_KINDS and os.environ.get("ANYCUDA_SANITIZE", "").strip().lower() == "initcheck"


def new(nbytes: int) -> np.ndarray:
    """The shadow of `nbytes` of fresh memory: nothing written yet."""
    global tracking
    tracking = True
    return np.zeros(max(int(nbytes), 1), np.uint8)


def mark(allocation, start: int, nbytes: int) -> None:
    """Bytes [start, start + nbytes) of `allocation` (those inside it) are written."""
    lo = max(int(start) - allocation.ptr, 0)
    hi = min(int(start) + int(nbytes) - allocation.ptr, allocation.size)
    if hi > lo:
        allocation.shadow[lo:hi] = 1

