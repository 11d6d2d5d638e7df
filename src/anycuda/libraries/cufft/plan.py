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
    source: np.dtype        # element type read (as stored)
    dest: np.dtype          # element type written (as stored)
    real_in: bool           # R2C/D2Z: the input is real, the output half-complex
    real_out: bool          # C2R/Z2D: the input is half-complex, the output real
    precision: str = ""     # "16F" or "16BF" for cufftXt's half precisions (computed in single)

    @property
    def half(self) -> bool:
        return bool(self.precision)


def _transforms(real, complex_, names, precision=""):
    """The C2C, R2C and C2R transforms of one precision (element types as stored)."""
    c2c, r2c, c2r = names
    return (Transform(c2c, complex_, complex_, False, False, precision),
            Transform(r2c, real, complex_, True, False, precision),
            Transform(c2r, complex_, real, False, True, precision))


_F32 = _transforms(np.dtype(np.float32), np.dtype(np.complex64), ("C2C", "R2C", "C2R"))
_F64 = _transforms(np.dtype(np.float64), np.dtype(np.complex128), ("Z2Z", "D2Z", "Z2D"))
# numpy has no 16-bit complex or bfloat16: pairs of halves, and bfloat16 as its bits
_F16 = _transforms(np.dtype(np.float16), np.dtype([("re", np.float16), ("im", np.float16)]),
                   ("C2C 16F", "R2C 16F", "C2R 16F"), "16F")
_BF16 = _transforms(np.dtype(np.uint16), np.dtype([("re", np.uint16), ("im", np.uint16)]),
                    ("C2C 16BF", "R2C 16BF", "C2R 16BF"), "16BF")

# cufftType -> transform
TRANSFORMS = dict(zip((0x29, 0x2a, 0x2c, 0x69, 0x6a, 0x6c), _F32 + _F64))

# cudaDataType codes (library_types.h) of each precision's (real, complex) elements
_DATA_TYPES = {"32F": (0, 4), "64F": (1, 5), "16F": (2, 6), "16BF": (14, 15)}


def _xt_transforms() -> dict:
    """(input type, output type, execution type) -> transform, as cufftXtMakePlanMany names
    them: the execution type is the complex type of the precision."""
    table = {}
    for precision, transforms in (("32F", _F32), ("64F", _F64), ("16F", _F16), ("16BF", _BF16)):
        real, complex_ = _DATA_TYPES[precision]
        for (source, dest), t in zip(((complex_, complex_), (real, complex_), (complex_, real)), transforms):
            table[(source, dest, complex_)] = t
    return table


XT_TRANSFORMS = _xt_transforms()


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
        self.gpus = ()            # cufftXtSetGPUs: the devices the plan spans (none named: one)

    def make(self, sizes, kind, batch: int, inner: Layout | None, outer: Layout | None) -> int:
        """Set the plan up for a cufftType `kind` (or a Transform: cufftXtMakePlanMany's types);
        returns the work area size in bytes."""
        require(1 <= len(sizes) <= 3, Result.INVALID_SIZE, f"rank {len(sizes)} (cuFFT plans ranks 1 to 3)")
        require(all(s >= 1 for s in sizes), Result.INVALID_SIZE, f"sizes {list(sizes)}")
        require(batch >= 1, Result.INVALID_SIZE, f"batch {batch}")
        transform = kind if isinstance(kind, Transform) else TRANSFORMS.get(kind)
        if transform is None:
            raise CufftError(Result.INVALID_TYPE, f"transform type 0x{kind:x}")
        for lay in (inner, outer):
            if lay is not None:
                require(lay.stride >= 1 and lay.dist >= 1, Result.INVALID_VALUE,
                        f"stride {lay.stride} and distance {lay.dist} must be at least 1")
                require(all(e >= 1 for e in lay.embed[1:]), Result.INVALID_SIZE, f"embed {list(lay.embed)}")
        sizes = tuple(int(s) for s in sizes)
        if transform.half:
            # cuFFT's documented limits of half and bfloat16 transforms
            require(all(s & (s - 1) == 0 for s in sizes), Result.NOT_SUPPORTED,
                    f"{transform.precision} transforms take sizes that are powers of two, not {list(sizes)}")
            require(len(self.gpus) <= 1, Result.NOT_SUPPORTED, f"{transform.precision} transforms run on one GPU")
        # cuFFT ignores both advanced layouts unless both are given
        inner, outer = (inner, outer) if inner is not None and outer is not None else (None, None)
        if len(self.gpus) > 1:
            _check_multi_gpu(sizes, int(batch), inner)
        self.sizes, self.kind, self.batch = sizes, kind, int(batch)
        self.transform = transform
        self.inner, self.outer = inner, outer
        self.made = True
        return 0

    @property
    def distributed(self) -> bool:
        """True when the plan spans several GPUs (its data lives in cufftXt descriptors)."""
        return len(self.gpus) > 1

    @property
    def half_sizes(self) -> tuple:
        """The complex side of a real transform: the last dimension n // 2 + 1."""
        return self.sizes[:-1] + (self.sizes[-1] // 2 + 1,)


def _check_multi_gpu(sizes: tuple, batch: int, layout) -> None:
    """What anycuda's multi-GPU plans cover: batches of any rank spread over the GPUs, and
    single 2-D and 3-D transforms in slabs (see descriptors.py), in the basic layout."""
    require(layout is None, Result.NOT_SUPPORTED, "a plan on several GPUs takes the basic data layout")
    # a single 1-D transform's multi-GPU output order is cuFFT's own permutation, published
    # only through cufftXtQueryPlan's factors, which anycuda cannot reproduce faithfully
    require(batch > 1 or len(sizes) > 1, Result.NOT_SUPPORTED,
            "a single 1-D transform on several GPUs (its permuted output order is cuFFT's own)")


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
