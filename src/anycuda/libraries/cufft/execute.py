"""Executing a cuFFT plan: the batch gathered from its layout, transformed by pocketfft (scipy.fft,
with anycuda's worker count as its threads; numpy.fft where scipy is missing), and written to
the output layout. Single precision stays single precision.

Layouts, as cuFFT's documentation defines them: in the basic layout each batch is contiguous
with its logical sizes, except that an in-place real transform's real side has its last
dimension padded to 2 (n // 2 + 1) reals; in an advanced layout element (b, x, y, z) is at
b * dist + ((x * embed[1] + y) * embed[2] + z) * stride. Forward transforms use exp(-2 pi i jk/n)
and no transform is normalised (an inverse after a forward multiplies by the product of sizes).
The input of a C2R transform is left as it was (cuFFT may overwrite it). Half and bfloat16
transforms (cufftXt) are computed in single precision and rounded once to their output type.
"""
from __future__ import annotations

import numpy as np

from ...driver import api
from ...runtime.device import worker_count
from .. import halves
from ..memory import array
from . import plan as plans
from .plan import Layout
from .status import Result, require

try:
    import scipy.fft as _fft
    _THREADED = True
except ImportError:           # numpy.fft: pocketfft too, on one thread
    import numpy.fft as _fft
    _THREADED = False
try:                          # scipy's binding of pocketfft itself, which writes where it is told
    from scipy.fft._pocketfft import pypocketfft as _pocket
except ImportError:
    _pocket = None

FORWARD, INVERSE = -1, 1


def _basic(shape: tuple, padded_last: int | None = None) -> Layout:
    """The basic layout of `shape`, the last dimension stored `padded_last` long if given."""
    stored = shape[:-1] + ((padded_last,) if padded_last else shape[-1:])
    return Layout(embed=(0,) + stored[1:], stride=1, dist=int(np.prod(stored)))


def _strides(layout: Layout, rank: int) -> list:
    """Element strides of each dimension of a layout."""
    strides = [layout.stride]
    for e in reversed(layout.embed[1:]):
        strides.insert(0, strides[0] * e)
    return strides[-rank:]


def extent(layout: Layout, shape: tuple, batch: int) -> int:
    """How many elements from the first to the last a layout reaches, both included."""
    strides = _strides(layout, len(shape))
    return (batch - 1) * layout.dist + sum((s - 1) * st for s, st in zip(shape, strides)) + 1


def view(address: int, layout: Layout, shape: tuple, batch: int, dtype: np.dtype) -> np.ndarray:
    """The (batch, *shape) elements a layout places at `address`, as a numpy view."""
    strides = _strides(layout, len(shape))
    flat = array(address, extent(layout, shape, batch), dtype)
    size = dtype.itemsize
    return np.lib.stride_tricks.as_strided(flat, shape=(batch, *shape),
                                           strides=(layout.dist * size, *(st * size for st in strides)))


def layouts(p: plans.Plan, in_place: bool):
    """(input layout, output layout) of an execution."""
    if p.inner is not None:
        return p.inner, p.outer
    t = p.transform
    if t.real_in:
        return _basic(p.sizes, 2 * p.half_sizes[-1] if in_place else None), _basic(p.half_sizes)
    if t.real_out:
        return _basic(p.half_sizes), _basic(p.sizes, 2 * p.half_sizes[-1] if in_place else None)
    return _basic(p.sizes), _basic(p.sizes)


def _transform(p: plans.Plan, data: np.ndarray, direction: int, scratch: bool) -> np.ndarray:
    """The transform of `data` (which pocketfft may overwrite when it is our own `scratch` copy)."""
    axes = tuple(range(1, data.ndim))
    threads = {"workers": worker_count(), "overwrite_x": scratch} if _THREADED else {}
    t = p.transform
    if t.real_in:
        return _fft.rfftn(data, axes=axes, **threads)
    if t.real_out:
        return _fft.irfftn(data, s=p.sizes, axes=axes, norm="forward", **threads)
    if direction == FORWARD:
        return _fft.fftn(data, axes=axes, **threads)
    return _fft.ifftn(data, axes=axes, norm="forward", **threads)


def _transform_into(p: plans.Plan, data: np.ndarray, out: np.ndarray, direction: int) -> bool:
    """The transform of `data` written by pocketfft straight into `out` (the destination's view,
    which must not overlap `data` unless they are one array of a complex transform): True, or
    False where scipy's binding is missing or the types do not fit (half and bfloat16 go through
    single precision, widened and narrowed around scipy.fft). scipy.fft's functions return
    a new array, which took a copy into the destination: an R2C of 1024 x 1024 ran 1.6x
    scipy.fft's own time, a C2C 1.3x."""
    if _pocket is None or p.transform.half:
        return False
    t, axes, threads = p.transform, list(range(1, data.ndim)), worker_count()
    complex_type = np.result_type(data.dtype, np.complex64)
    wanted = complex_type.type(0).real.dtype if t.real_out else complex_type
    if out.dtype != wanted:
        return False
    if t.real_in:
        _pocket.r2c(data, axes=axes, forward=True, inorm=0, out=out, nthreads=threads)
    elif t.real_out:
        _pocket.c2r(data, axes=axes, lastsize=p.sizes[-1], forward=False, inorm=0, out=out, nthreads=threads)
    else:
        _pocket.c2c(data, axes=axes, forward=direction == FORWARD, inorm=0, out=out, nthreads=threads)
    return True


def _widen(stored: np.ndarray, t: plans.Transform) -> np.ndarray:
    """Half or bfloat16 elements (real, or pairs of parts) in single precision."""
    bf16 = t.precision == "16BF"
    if stored.dtype.names:
        return halves.widen(stored["re"], bf16) + 1j * halves.widen(stored["im"], bf16)
    return halves.widen(stored, bf16)


def _narrow(dest: np.ndarray, values: np.ndarray, t: plans.Transform) -> None:
    """Write single-precision `values` into half or bfloat16 elements, each part rounded once."""
    bf16 = t.precision == "16BF"
    if dest.dtype.names:
        halves.narrow(dest["re"], values.real, bf16)
        halves.narrow(dest["im"], values.imag, bf16)
    else:
        halves.narrow(dest, values, bf16)


def run(p: plans.Plan, source: int, dest: int, direction: int) -> None:
    """The plan's transform of the data at `source` into `dest` (the same address: in place)."""
    t = p.transform
    in_layout, out_layout = layouts(p, source == dest)
    in_shape = p.half_sizes if t.real_out else p.sizes
    out_shape = p.half_sizes if t.real_in else p.sizes
    data = view(source, in_layout, in_shape, p.batch, t.source)
    out = view(dest, out_layout, out_shape, p.batch, t.dest)
    # a complex transform in place where both sides are laid out alike: pocketfft's own
    if source == dest and in_layout == out_layout and in_shape == out_shape \
            and not (t.real_in or t.real_out) and _transform_into(p, out, out, direction):
        return
    # read straight from device memory when that is contiguous and not also the output
    scratch = source == dest or not data.flags.c_contiguous or t.half
    if t.half:
        data = _widen(data, t)
    elif scratch:
        data = np.array(data)
    if _transform_into(p, data, out, direction):
        return
    result = _transform(p, data, direction, scratch)
    if t.half:
        _narrow(out, result, t)
    else:
        out[...] = result.astype(t.dest, copy=False)


def checked_direction(p: plans.Plan, direction: int | None) -> int:
    """The direction of an execution: real transforms have their own, complex ones are told."""
    if p.transform.real_in:
        return FORWARD
    if p.transform.real_out:
        return INVERSE
    require(direction in (FORWARD, INVERSE), Result.INVALID_VALUE, f"direction {direction}")
    return direction


def execute(handle: int, name: str, source: int, dest: int, direction: int | None = None) -> None:
    """cufftExec<name>: the plan's transform must be `name`'s, queued on the plan's stream."""
    p = plans.get(handle)
    require(p.transform.name == name, Result.INVALID_VALUE,
            f"cufftExec{name} on a {p.transform.name} plan")
    submit(p, source, dest, direction)


def submit(p: plans.Plan, source: int, dest: int, direction: int | None) -> None:
    """Queue an execution of a plan on one GPU on the plan's stream."""
    require(not p.distributed, Result.INVALID_VALUE,
            f"a plan on GPUs {list(p.gpus)} executes on cufftXt descriptors (cufftXtExecDescriptor)")
    require(source != 0 and dest != 0, Result.INVALID_VALUE, "a data pointer is NULL")
    api.submit(p.stream, run, p, source, dest, checked_direction(p, direction))
