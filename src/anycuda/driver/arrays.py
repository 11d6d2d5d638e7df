"""CUDA arrays: cuArrayCreate, cuArray3DCreate, their descriptors, and copies to and from them.

A CUDA array is opaque to a program, so anycuda lays it out plainly: one pitched allocation
of device memory (rows of `width * element` bytes padded to ROW_ALIGN, `height` rows per
slice, `depth` slices or layers), in the one address space. Texture and surface objects made
from an array read its base, pitch and slice (driver/textures.py); copies with an array
endpoint are pitched copies over those addresses.
"""
from __future__ import annotations

from ..compiler import texdesc
from ..runtime import memory
from ..runtime.device import TEXTURE_LIMITS
from ..runtime.errors import CudaError, CUresult
from . import api
from .handles import _current_handle

ROW_ALIGN = 128            # bytes; rows of an array start on cache-line pairs

# CUDA_ARRAY3D_* flags
LAYERED, SURFACE_LDST, CUBEMAP, TEXTURE_GATHER = 0x01, 0x02, 0x04, 0x08
DEPTH_TEXTURE, COLOR_ATTACHMENT, SPARSE, DEFERRED_MAPPING = 0x10, 0x20, 0x40, 0x80
_UNSUPPORTED_FLAGS = {CUBEMAP: "cube map", SPARSE: "sparse", DEFERRED_MAPPING: "deferred-mapping"}
_KNOWN_FLAGS = LAYERED | SURFACE_LDST | CUBEMAP | TEXTURE_GATHER | DEPTH_TEXTURE | COLOR_ATTACHMENT | SPARSE \
    | DEFERRED_MAPPING




def _check_extent(width, height, depth, flags):
    """CUDA_ERROR_INVALID_VALUE for an array larger than the device's texture limits."""
    A = TEXTURE_LIMITS
    if flags & LAYERED:
        limits = (A[42], 0, A[43]) if height == 0 else (A[27], A[28], A[29])
    elif depth:
        limits = (A[24], A[25], A[26])
    elif height:
        limits = (A[22], A[23], 0)
    else:
        limits = (A[21], 0, 0)
    if width > limits[0] or height > limits[1] or depth > limits[2]:
        raise _invalid(f"array extent {width} x {height} x {depth} exceeds the device's limits {limits}")


def _invalid(msg):
    return CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, msg)


class CudaArray:
    """A CUDA array: its descriptor as created (Width, Height, Depth as the caller gave them,
    0 for a dimension it does not have) and where its elements are."""

    def __init__(self, width, height, depth, fmt, channels, flags):
        self.width, self.height, self.depth = width, height, depth
        self.format, self.channels, self.flags = fmt, channels, flags
        self.chan_size = texdesc.FORMATS[fmt][1]
        self.element = self.chan_size * channels
        self.row_bytes = width * self.element
        self.pitch = (self.row_bytes + ROW_ALIGN - 1) // ROW_ALIGN * ROW_ALIGN
        self.rows = max(height, 1)                     # rows per slice (a 1-D array has one)
        self.slices = max(depth, 1)                    # slices of a 3-D array, layers of a layered one
        self.slice = self.pitch * self.rows
        self.base = api._allocate(self.slice * self.slices)
        self.context = _current_handle()     # it goes with its context, as its memory (contexts._tear_down)

    @property
    def layered(self) -> bool:
        return bool(self.flags & LAYERED)

    @property
    def dims(self) -> int:
        """Dimensions of the array's elements (layers not counted)."""
        if self.height == 0:
            return 1
        return 2 if self.depth == 0 or self.layered else 3


def _check_format(fmt, channels):
    if fmt not in texdesc.FORMATS:
        raise _invalid(f"array format 0x{fmt:x} (anycuda has the 8-, 16- and 32-bit integer, half and float formats)")
    if channels not in (1, 2, 4):
        raise _invalid(f"{channels} channels (1, 2 or 4)")


def _check_array(width: int, height: int, depth: int, fmt: int, channels: int, flags: int) -> None:
    """What a CUDA array (mipmapped or not) may be: a format and channel count anycuda has,
    flags it honours, extents within the device's limits."""
    api._require_context()
    _check_format(fmt, channels)
    for flag, what in _UNSUPPORTED_FLAGS.items():
        if flags & flag:
            raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED, f"{what} CUDA arrays (CUDA_ARRAY3D flag 0x{flag:x})")
    if flags & ~_KNOWN_FLAGS:
        raise _invalid(f"array flags 0x{flags:x}")
    if width == 0 or (height == 0 and depth and not flags & LAYERED):
        raise _invalid(f"array extent {width} x {height} x {depth}")
    _check_extent(width, height, depth, flags)


def cuArray3DCreate(width: int, height: int, depth: int, fmt: int, channels: int, flags: int) -> int:
    _check_array(width, height, depth, fmt, channels, flags)
    return api._new_handle(CudaArray(width, height, depth, fmt, channels, flags))


def cuArrayCreate(width: int, height: int, fmt: int, channels: int) -> int:
    return cuArray3DCreate(width, height, 0, fmt, channels, 0)


def get(handle: int) -> CudaArray:
    if not handle:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE, "NULL CUDA array")
    return api._get(handle, CudaArray)


def cuArrayDestroy(handle: int) -> None:
    api._require_context()
    a = get(handle)
    if getattr(a, "owner", None) is not None:
        raise _invalid("a level of a mipmapped array is freed with the mipmapped array")
    with api._lock:
        api._handles.pop(handle, None)
    memory.free(a.base)


def cuArray3DGetDescriptor(handle: int) -> tuple:
    """(Width, Height, Depth, Format, NumChannels, Flags)."""
    a = get(handle)
    return a.width, a.height, a.depth, a.format, a.channels, a.flags


def cuArrayGetDescriptor(handle: int) -> tuple:
    """(Width, Height, Format, NumChannels) of a 1-D or 2-D array."""
    a = get(handle)
    if a.depth:
        raise _invalid("cuArrayGetDescriptor of a 3-D or layered array (use cuArray3DGetDescriptor)")
    return a.width, a.height, a.format, a.channels


# ---------------------------------------------------------------- mipmapped arrays

class MipmappedArray:
    """Levels 0..n-1, each a CudaArray of half the extent of the one before (at least 1);
    the layers of a layered array are not halved."""

    def __init__(self, width, height, depth, fmt, channels, flags, levels):
        self.width, self.height, self.depth = width, height, depth
        self.format, self.channels, self.flags = fmt, channels, flags
        self.levels = []
        for k in range(levels):
            h = max(height >> k, 1) if height else 0
            d = depth if flags & LAYERED else (max(depth >> k, 1) if depth else 0)
            level = CudaArray(max(width >> k, 1), h, d, fmt, channels, flags)
            level.owner = self
            self.levels.append(level)
        self.handles = [api._new_handle(level) for level in self.levels]
        self.context = self.levels[0].context


def cuMipmappedArrayCreate(width: int, height: int, depth: int, fmt: int, channels: int, flags: int,
                           levels: int) -> int:
    _check_array(width, height, depth, fmt, channels, flags)
    largest = max(width, height, 0 if flags & LAYERED else depth)
    if not 1 <= levels <= largest.bit_length():
        raise _invalid(f"{levels} mipmap levels for an extent of {largest} (1 to {largest.bit_length()})")
    return api._new_handle(MipmappedArray(width, height, depth, fmt, channels, flags, levels))


def get_mipmapped(handle: int) -> MipmappedArray:
    if not handle:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE, "NULL mipmapped array")
    return api._get(handle, MipmappedArray)


def cuMipmappedArrayGetLevel(handle: int, level: int) -> int:
    m = get_mipmapped(handle)
    if level >= len(m.levels):
        raise _invalid(f"level {level} of a mipmapped array of {len(m.levels)}")
    return m.handles[level]


def cuMipmappedArrayDestroy(handle: int) -> None:
    api._require_context()
    m = get_mipmapped(handle)
    with api._lock:
        api._handles.pop(handle, None)
        for h in m.handles:
            api._handles.pop(h, None)
    for level in m.levels:
        memory.free(level.base)


# ---------------------------------------------------------------- copies

def copy_side(handle: int, x_bytes: int, y: int, z: int, width_bytes: int, height: int, depth: int) -> tuple:
    """(address, pitch, slice) of the box at byte column `x_bytes`, row `y`, slice `z` of an
    array, for a pitched copy of width_bytes x height x depth (which must fit in the array)."""
    a = get(handle)
    if x_bytes + width_bytes > a.row_bytes or y + height > a.rows or z + depth > a.slices:
        raise _invalid(f"a copy of {width_bytes} B x {height} x {depth} at ({x_bytes} B, {y}, {z}) does not fit "
                       f"in a {a.row_bytes} B x {a.rows} x {a.slices} array")
    return a.base + z * a.slice + y * a.pitch + x_bytes, a.pitch, a.slice


def _chunks(a: CudaArray, offset: int, n: int) -> list:
    """The (address, length) pieces of bytes [offset, offset + n) of an array seen as its rows
    laid end to end (as cuMemcpyHtoA and friends address it)."""
    total = a.row_bytes * a.rows * a.slices
    if offset + n > total:
        raise _invalid(f"{n} bytes at offset {offset} of an array of {total} bytes")
    out = []
    while n:
        row, col = divmod(offset, a.row_bytes)
        length = min(n, a.row_bytes - col)
        out.append((a.base + row * a.pitch + col, length))
        offset += length
        n -= length
    return out


def _linear_work(dst_chunks, src_chunks):
    """Stream work copying the bytes of one list of pieces onto another (same total)."""
    def copy():
        di, si, doff, soff = 0, 0, 0, 0
        while di < len(dst_chunks) and si < len(src_chunks):
            (d, dn), (s, sn) = dst_chunks[di], src_chunks[si]
            step = min(dn - doff, sn - soff)
            memory.memcpy(d + doff, s + soff, step)
            doff += step
            soff += step
            if doff == dn:
                di, doff = di + 1, 0
            if soff == sn:
                si, soff = si + 1, 0
    return copy


@api._faults_are_sticky
def linear_copy(dst, src, n: int, stream=None) -> None:
    """Copy `n` bytes; each side is an address (int) or (array handle, byte offset)."""
    api._require_context()

    def pieces(side):
        if isinstance(side, tuple):
            return _chunks(get(side[0]), side[1], n)
        return [(side, n)]
    work = _linear_work(pieces(dst), pieces(src))
    api.submit(stream, work)      # None: a blocking copy
