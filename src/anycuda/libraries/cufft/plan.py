"""cuFFT plans: what a cufftHandle names (rank, sizes, batch, transform type, data layout),
made once and executed many times, each execution queued on the plan's stream.

A handle is a small integer, as cuFFT's are. `make` checks cuFFT's rules (rank 1-3, sizes and
batch at least 1, a known type, strides and distances at least 1 in an advanced layout) and
reports the work area anycuda needs: none (pocketfft allocates its own scratch), so 0 bytes;
a work area a program sets anyway is accepted and left alone.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..registry import Registry
from .status import CufftError, Result, require


@dataclass(frozen=True)
class Transform:
    name: str
    source: np.dtype        # element type read
    dest: np.dtype          # element type written
    real_in: bool           # R2C/D2Z: the input is real, the output half-complex
    real_out: bool          # C2R/Z2D: the input is half-complex, the output real


TRANSFORMS = {
    0x29: Transform("C2C", np.dtype(np.complex64), np.dtype(np.complex64), False, False),
    0x2a: Transform("R2C", np.dtype(np.float32), np.dtype(np.complex64), True, False),
    0x2c: Transform("C2R", np.dtype(np.complex64), np.dtype(np.float32), False, True),
    0x69: Transform("Z2Z", np.dtype(np.complex128), np.dtype(np.complex128), False, False),
    0x6a: Transform("D2Z", np.dtype(np.float64), np.dtype(np.complex128), True, False),
    0x6c: Transform("Z2D", np.dtype(np.complex128), np.dtype(np.float64), False, True),
}


@dataclass
class Layout:
    """An advanced data layout: embed (the storage's sizes; its first entry is not used),
    stride between elements and distance between batches, in elements."""
    embed: tuple
    stride: int
    dist: int


class Plan:
    def __init__(self):
        self.made = False
        self.stream = 0
        self.auto_allocation = True
        self.work_area = 0
        self.properties = {}

    def make(self, sizes, kind: int, batch: int, inner: Layout | None, outer: Layout | None) -> int:
        """Set the plan up; returns the work area size in bytes."""
        require(1 <= len(sizes) <= 3, Result.INVALID_SIZE, f"rank {len(sizes)} (cuFFT plans ranks 1 to 3)")
        require(all(s >= 1 for s in sizes), Result.INVALID_SIZE, f"sizes {list(sizes)}")
        require(batch >= 1, Result.INVALID_SIZE, f"batch {batch}")
        require(kind in TRANSFORMS, Result.INVALID_TYPE, f"transform type 0x{kind:x}")
        for lay in (inner, outer):
            if lay is not None:
                require(lay.stride >= 1 and lay.dist >= 1, Result.INVALID_VALUE,
                        f"stride {lay.stride} and distance {lay.dist} must be at least 1")
                require(all(e >= 1 for e in lay.embed[1:]), Result.INVALID_SIZE, f"embed {list(lay.embed)}")
        self.sizes, self.kind, self.batch = tuple(int(s) for s in sizes), kind, int(batch)
        self.transform = TRANSFORMS[kind]
        # cuFFT ignores both advanced layouts unless both are given
        self.inner, self.outer = (inner, outer) if inner is not None and outer is not None else (None, None)
        self.made = True
        return 0

    @property
    def half_sizes(self) -> tuple:
        """The complex side of a real transform: the last dimension n // 2 + 1."""
        return self.sizes[:-1] + (self.sizes[-1] // 2 + 1,)


_plans = Registry(1, 1, lambda handle: CufftError(Result.INVALID_PLAN, f"{handle} is not a cuFFT plan"))


def create() -> int:
    return _plans.add(Plan())


def get(handle: int, made: bool = True) -> Plan:
    plan = _plans.get(handle)
    if made and not plan.made:
        raise CufftError(Result.INVALID_PLAN, f"plan {handle} was created but never made")
    return plan


def destroy(handle: int) -> None:
    _plans.remove(handle)
