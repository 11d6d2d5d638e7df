"""cufftXt's memory descriptors (cudaLibXtDesc, cudalibxt.h): where a plan's data lives on each
of its GPUs, and in which order.

A descriptor is two C structures that the program reads: cudaLibXtDesc {version, descriptor,
library, subFormat, libDescriptor} and the cudaXtDesc it points to {version, nGPUs, GPUs[64],
data[64], size[64], cudaXtState}; anycuda keeps both in memory of its own until cufftXtFree.

On one GPU the descriptor holds one buffer, of the size of the plan's input (subformat INPUT),
output (OUTPUT) or in-place data (INPLACE, INPLACE_SHUFFLED), in cuFFT's basic layout or the
plan's advanced one. On several GPUs (in-place only, as cuFFT's multi-GPU transforms) the data
are the plan's in-place array, seen as cells: one cell is a complex element, so that a real
row padded to 2 (n // 2 + 1) reals is n // 2 + 1 cells, and the array is (batch, X, Y[, Z])
cells. cuFFT's documentation defines how the cells are shared out:

- batched plans: whole transforms, the first batch % n GPUs one more than batch // n; the
  order is the same before and after a transform;
- single 2-D and 3-D transforms: natural order (INPUT, INPLACE) in slabs of X, the first
  X % n GPUs one row more; permuted order (OUTPUT, INPLACE_SHUFFLED) in slabs of Y, each GPU
  holding its cells in (X, its Y, Z) order. A transform of data in natural order leaves them in
  permuted order and the other way round, so a forward transform, a point-wise step and an
  inverse need no reordering in between; cufftXtMemcpy to the host always gives natural order.

Each GPU's part is contiguous in its own buffer, allocated on that device.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...runtime import memory
from ...runtime.device import work_device
from ...runtime.stream import release_after_queued_work
from ..memory import array
from . import execute
from .plan import Plan
from .status import Result, require

MAX_GPUS = 64                                  # MAX_CUDA_DESCRIPTOR_GPUS
VERSION = 0x01000000 + 12050                   # CUDA_XT_DESCRIPTOR_VERSION + the CUDA version of cuFFT 12.5
LIB_FORMAT_CUFFT = 0

INPUT, OUTPUT, INPLACE, INPLACE_SHUFFLED, INPUT_1D_SHUFFLED, DISTRIBUTED_INPUT, DISTRIBUTED_OUTPUT = range(7)
NATURAL = (INPUT, INPLACE)
PERMUTED = (OUTPUT, INPLACE_SHUFFLED)

XT_DESC = np.dtype([("version", "<i4"), ("nGPUs", "<i4"), ("GPUs", "<i4", MAX_GPUS), ("data", "<u8", MAX_GPUS),
                    ("size", "<u8", MAX_GPUS), ("cudaXtState", "<u8")], align=True)
LIB_XT_DESC = np.dtype([("version", "<i4"), ("descriptor", "<u8"), ("library", "<i4"), ("subFormat", "<i4"),
                        ("libDescriptor", "<u8")], align=True)


@dataclass
class Descriptor:
    plan: Plan
    head: np.ndarray          # the cudaLibXtDesc (one record)
    body: np.ndarray          # the cudaXtDesc (one record)
    parts: list               # the runtime allocations, one per GPU

    @property
    def address(self) -> int:
        return self.head.ctypes.data

    @property
    def format(self) -> int:
        return int(self.head["subFormat"][0])

    @format.setter
    def format(self, value: int) -> None:
        self.head["subFormat"][0] = value

    def pointer(self, gpu_index: int) -> int:
        return int(self.body["data"][0][gpu_index])


_descriptors = {}             # address of the cudaLibXtDesc -> Descriptor


def _cells(p: Plan) -> tuple:
    """(shape in cells, bytes per cell) of a multi-GPU plan's in-place data."""
    t = p.transform
    complex_type = t.dest if t.real_in else t.source
    last = p.half_sizes[-1] if (t.real_in or t.real_out) else p.sizes[-1]
    return (p.batch, *p.sizes[:-1], last), complex_type.itemsize


def _split_axis(p: Plan, subformat: int) -> int:
    """The axis of the cell array the GPUs share: batches, else X (natural) or Y (permuted)."""
    if p.batch > 1:
        return 0
    return 2 if subformat in PERMUTED else 1


def _shares(count: int, parts: int) -> list:
    """(start, stop) of each part: the first count % parts one longer."""
    bounds, start = [], 0
    for i in range(parts):
        stop = start + count // parts + (1 if i < count % parts else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def _pieces(p: Plan, subformat: int) -> list:
    """The index of each GPU's share of the cell array."""
    shape, _ = _cells(p)
    axis = _split_axis(p, subformat)
    return [(slice(None),) * axis + (slice(a, b),) for a, b in _shares(shape[axis], len(p.gpus))]


def _piece_cells(p: Plan, subformat: int) -> list:
    """How many cells each GPU's share holds."""
    shape, _ = _cells(p)
    axis = _split_axis(p, subformat)
    across = int(np.prod(shape)) // shape[axis]
    return [across * (b - a) for a, b in _shares(shape[axis], len(p.gpus))]


def _one_gpu_bytes(p: Plan, subformat: int) -> int:
    """A one-GPU descriptor's size: the plan's input, output or in-place data."""
    t = p.transform
    in_place = subformat not in (INPUT, OUTPUT)
    in_layout, out_layout = execute.layouts(p, in_place)
    inputs = execute.extent(in_layout, p.half_sizes if t.real_out else p.sizes, p.batch) * t.source.itemsize
    outputs = execute.extent(out_layout, p.half_sizes if t.real_in else p.sizes, p.batch) * t.dest.itemsize
    return {INPUT: inputs, OUTPUT: outputs}.get(subformat, max(inputs, outputs))


def part_sizes(p: Plan, subformat: int) -> list:
    """Bytes of each GPU's part: on several GPUs, room for its share in either order, since a
    transform turns one into the other in place."""
    if not p.distributed:
        return [_one_gpu_bytes(p, subformat)]
    _, cell = _cells(p)
    return [max(n, m) * cell for n, m in zip(_piece_cells(p, INPLACE), _piece_cells(p, INPLACE_SHUFFLED))]


def allocate(p: Plan, subformat: int) -> Descriptor:
    require(subformat in NATURAL + PERMUTED, Result.NOT_SUPPORTED if 0 <= subformat <= DISTRIBUTED_OUTPUT
            else Result.INVALID_VALUE, f"descriptor subformat {subformat} (anycuda allocates INPUT, OUTPUT, "
            "INPLACE and INPLACE_SHUFFLED; the 1-D shuffled and distributed ones belong to plans it does not make)")
    gpus = p.gpus or (work_device(),)
    sizes = part_sizes(p, subformat)
    parts = []
    for gpu, size in zip(gpus, sizes):
        part = memory.allocate(size)
        part.device = gpu                  # counted against that device's memory
        parts.append(part)
    head, body = np.zeros(1, LIB_XT_DESC), np.zeros(1, XT_DESC)
    body["version"], body["nGPUs"] = VERSION, len(gpus)
    body["GPUs"][0][:len(gpus)] = gpus
    body["data"][0][:len(gpus)] = [part.ptr for part in parts]
    body["size"][0][:len(gpus)] = sizes
    head["version"], head["descriptor"], head["library"] = VERSION, body.ctypes.data, LIB_FORMAT_CUFFT
    head["subFormat"] = subformat
    d = Descriptor(p, head, body, parts)
    _descriptors[d.address] = d
    return d


def get(address: int) -> Descriptor:
    d = _descriptors.get(address)
    require(d is not None, Result.INVALID_VALUE, f"0x{address:x} is not a descriptor cufftXtMalloc made")
    return d


def free(address: int) -> None:
    """cufftXtFree: the parts are released once the work queued before has finished (as
    cudaFree waits for the device: a queued transform may still use them)."""
    d = get(address)
    for part in d.parts:
        release_after_queued_work(lambda part=part: memory.release(part))
    del _descriptors[address]


def _cell_array(address: int, shape: tuple, cell: int) -> np.ndarray:
    """The cells at `address` as bytes: (*shape, cell)."""
    return array(address, int(np.prod(shape)) * cell, np.uint8).reshape(*shape, cell)


def gather(d: Descriptor, host: int, subformat: int) -> None:
    """Write the descriptor's data, held in `subformat`'s order, to `host` in natural order."""
    p = d.plan
    if not p.distributed:
        memory.memcpy(host, d.pointer(0), int(d.body["size"][0][0]))
        return
    shape, cell = _cells(p)
    whole = _cell_array(host, shape, cell)
    for i, index in enumerate(_pieces(p, subformat)):
        whole[index] = _cell_array(d.pointer(i), whole[index].shape[:-1], cell)


def scatter(d: Descriptor, host: int, subformat: int) -> None:
    """Fill the descriptor from data in natural order at `host`, in `subformat`'s order."""
    p = d.plan
    if not p.distributed:
        memory.memcpy(d.pointer(0), host, int(d.body["size"][0][0]))
        return
    shape, cell = _cells(p)
    whole = _cell_array(host, shape, cell)
    for i, index in enumerate(_pieces(p, subformat)):
        _cell_array(d.pointer(i), whole[index].shape[:-1], cell)[...] = whole[index]


def natural_bytes(p: Plan) -> int:
    """Bytes of a multi-GPU plan's whole in-place array."""
    shape, cell = _cells(p)
    return int(np.prod(shape)) * cell
