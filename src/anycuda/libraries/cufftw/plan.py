"""cuFFTW's plans: what FFTW's planners describe, reduced to one form, FFTW's guru form: the
transform's dimensions and the batch's, each (size, input stride, output stride) in elements of
the arrays' own types, and the arrays the plan was made for.

Every planner comes down to that form (`basic`, `many`, the guru dimensions as given), so one
`execute` serves all: numpy views of the strided input and output (any strides, negative ones
too), pocketfft's transform over the transform axes (scipy.fft, with anycuda's worker count as
its threads) and one copy into the output, so in-place plans need nothing of their own.
FFTW's semantics are kept: no transform is normalised (the inverse's `norm="forward"` leaves it
unscaled), FFTW_FORWARD is -1, and planning never reads or writes the arrays, whatever the
flags (FFTW_ESTIMATE requires it; anycuda does no measuring that would need them). The input
of a c2r transform is left as it was (FFTW may overwrite it).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...runtime.device import worker_count
from ..memory import array
from ..registry import Registry
from .status import CufftwError, Failure, require

try:
    import scipy.fft as _fft
    _THREADED = True
except ImportError:          # numpy.fft: pocketfft too, on one thread
    import numpy.fft as _fft
    _THREADED = False

FORWARD, BACKWARD = -1, 1
KINDS = ("c2c", "r2c", "c2r")


@dataclass(frozen=True)
class Plan:
    kind: str              # c2c, r2c or c2r
    single: bool           # fftwf_ (complex64, float32) or fftw_ (complex128, float64)
    dims: tuple            # ((n, input stride, output stride), ...): the transform, its last dimension last
    batch: tuple           # the same for the batch's dimensions (none: one transform)
    sign: int
    source: int            # the arrays it was planned for (fftw_execute's)
    dest: int

    @property
    def sizes(self) -> tuple:
        return tuple(n for n, _, _ in self.dims)

    def dtypes(self):
        """(input dtype, output dtype)."""
        complex_, real = (np.complex64, np.float32) if self.single else (np.complex128, np.float64)
        return {"c2c": (complex_, complex_), "r2c": (real, complex_), "c2r": (complex_, real)}[self.kind]

    def shapes(self):
        """(input shape, output shape) of one transform: a real side has the logical sizes, a
        complex side of a real transform n // 2 + 1 in its last dimension."""
        sizes = self.sizes
        half = sizes[:-1] + (sizes[-1] // 2 + 1,)
        return {"c2c": (sizes, sizes), "r2c": (sizes, half), "c2r": (half, sizes)}[self.kind]


def half(sizes) -> tuple:
    return tuple(sizes[:-1]) + (sizes[-1] // 2 + 1,)


def row_major(shape) -> list:
    """Element strides of a contiguous row-major array of `shape`."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.insert(0, step)
        step *= n
    return strides


def make(kind, single, sizes, input_strides, output_strides, batch, sign, source, dest) -> Plan:
    """A plan, its arguments checked as FFTW's planners check them (None from a planner then)."""
    sizes = tuple(int(n) for n in sizes)
    require(1 <= len(sizes) <= 3, Failure.INVALID, f"rank {len(sizes)} (cuFFTW plans rank 1 to 3)")
    require(all(n >= 1 for n in sizes), Failure.INVALID, f"sizes {sizes}")
    require(all(count >= 0 for count, _, _ in batch), Failure.INVALID, f"batch {batch}")
    require(kind != "c2c" or sign in (FORWARD, BACKWARD), Failure.INVALID, f"sign {sign}")
    dims = tuple(zip(sizes, (int(s) for s in input_strides), (int(s) for s in output_strides)))
    return Plan(kind, single, dims, tuple(batch), sign if kind == "c2c" else (FORWARD if kind == "r2c" else BACKWARD),
                source, dest)


def basic(kind, single, sizes, sign, source, dest) -> Plan:
    """fftw_plan_dft* and the r2c/c2r forms: contiguous row-major arrays; an in-place real
    transform's real array has its last dimension padded to 2 (n // 2 + 1), as FFTW lays it out."""
    sizes = tuple(sizes)
    require(len(sizes) >= 1 and all(n >= 1 for n in sizes), Failure.INVALID, f"sizes {sizes}")
    complex_shape = half(sizes) if kind != "c2c" else sizes
    real_shape = sizes[:-1] + (2 * (sizes[-1] // 2 + 1),) if source == dest else sizes
    in_shape, out_shape = {"c2c": (sizes, sizes), "r2c": (real_shape, complex_shape),
                           "c2r": (complex_shape, real_shape)}[kind]
    return make(kind, single, sizes, row_major(in_shape), row_major(out_shape), (), sign, source, dest)


def many(kind, single, sizes, howmany, inembed, istride, idist, onembed, ostride, odist, sign, source, dest):
    """fftw_plan_many_dft*: `howmany` transforms `idist`/`odist` apart, each element `istride`/
    `ostride` apart in arrays of shape `inembed`/`onembed` (None: the transform's own shape,
    n // 2 + 1 in the last dimension of a real transform's complex side)."""
    sizes = tuple(sizes)
    in_shape, out_shape = Plan(kind, single, tuple((n, 0, 0) for n in sizes), (), sign, 0, 0).shapes()
    inembed, onembed = inembed or in_shape, onembed or out_shape
    require(len(inembed) == len(sizes) == len(onembed), Failure.INVALID, "embed ranks")
    return make(kind, single, sizes, [istride * s for s in row_major(inembed)],
                [ostride * s for s in row_major(onembed)], ((howmany, idist, odist),), sign, source, dest)


def strided_view(address: int, shape, strides, dtype) -> np.ndarray:
    """The elements of `shape` at `strides` (in elements, any sign) from `address`."""
    dtype = np.dtype(dtype)
    if any(n == 0 for n in shape):
        return np.empty(shape, dtype)
    low = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    high = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides))
    require(address != 0, Failure.INVALID, "a NULL array")
    flat = array(address + low * dtype.itemsize, high - low + 1, dtype)
    return np.lib.stride_tricks.as_strided(flat[-low:], shape=tuple(shape),
                                           strides=tuple(s * dtype.itemsize for s in strides))


def execute(plan: Plan, source: int, dest: int) -> None:
    in_dtype, out_dtype = plan.dtypes()
    in_shape, out_shape = plan.shapes()
    counts = tuple(n for n, _, _ in plan.batch)
    x = strided_view(source, counts + in_shape, [s for _, s, _ in plan.batch] + [s for _, s, _ in plan.dims],
                     in_dtype)
    y = strided_view(dest, counts + out_shape, [s for _, _, s in plan.batch] + [s for _, _, s in plan.dims],
                     out_dtype)
    axes = tuple(range(len(counts), len(counts) + len(plan.dims)))
    threads = {"workers": worker_count()} if _THREADED else {}
    if plan.kind == "c2c":
        transform = _fft.fftn if plan.sign == FORWARD else _fft.ifftn
        norm = "backward" if plan.sign == FORWARD else "forward"         # neither direction scaled
        result = transform(x, axes=axes, norm=norm, **threads)
    elif plan.kind == "r2c":
        result = _fft.rfftn(x, axes=axes, **threads)
    else:
        result = _fft.irfftn(x, s=plan.sizes, axes=axes, norm="forward", **threads)
    y[...] = result


_plans = Registry(0x5F7E0000, 16, lambda number: CufftwError(Failure.INVALID, f"0x{number:x} is not a live cuFFTW plan"))


def add(plan: Plan) -> int:
    return _plans.add(plan)


def get(number: int) -> Plan:
    return _plans.get(number)


def destroy(number: int) -> None:
    _plans.remove(number)
