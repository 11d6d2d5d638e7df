"""Marshalling that entry points of several groups share (shim/entry_*.py): a launch's
parameter bytes, a CUDA_MEMCPY3D's fields, and what must stay alive for C (strings handed out,
the images of the driver's linker)."""
from __future__ import annotations

from types import SimpleNamespace

from ..driver import api
from ..runtime.errors import CudaError, CUresult
from . import entry_textures

kept = {}          # what C may still point to: strings handed out, linked images


def c_string(ffi, text: str):
    """A NUL-terminated string that lives as long as the process."""
    if text not in kept:
        kept[text] = ffi.new("char[]", text.encode())
    return kept[text]


def helpers(ffi, ptr) -> SimpleNamespace:
    """launch_params(f, params, extra) and copy_3d_args(p), bound to this library's ffi."""

    def launch_params(f, params, extra):
        """The kernel's parameter bytes from kernelParams (an array of pointers, one per
        parameter) or from extra (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE)."""
        layout = api.kernel_param_layout(ptr(f))
        size = max((off + n for off, n in layout), default=0)
        if params == ffi.NULL and extra != ffi.NULL:
            values, i = {}, 0
            while ptr(extra[i]) != 0:                     # CU_LAUNCH_PARAM_END
                values[ptr(extra[i])] = extra[i + 1]
                i += 2
            if 1 not in values or 2 not in values:
                raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "extra lacks the parameter buffer or its size")
            given = ffi.cast("size_t *", values[2])[0]
            if given < size:
                raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"parameter buffer of {given} bytes, kernel takes {size}")
            return bytes(ffi.buffer(ffi.cast("char *", values[1]), size))
        if layout and params == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "kernelParams is NULL")
        buf = ffi.new("char[]", size)          # (zeroed: the padding between parameters)
        for i, (off, n) in enumerate(layout):
            ffi.memmove(buf + off, params[i], n)     # (half the time of slicing ffi.buffers)
        return ffi.unpack(buf, size)

    def copy_3d_args(p):
        """(src, src pitch, src slice, dst, dst pitch, dst slice, width, height, depth) of a
        CUDA_MEMCPY3D (memory types: 1 host, 2 device, 3 CUDA array, 4 unified)."""
        def side(kind, host, device, array, x, y, z, pitch, rows, name):
            if kind == 3:
                return entry_textures.array_side(ffi, ptr, array, x, y, z, p.WidthInBytes, p.Height, p.Depth)
            slice_ = pitch * (rows or p.Height)
            return (ptr(host) if kind == 1 else device) + z * slice_ + y * pitch + x, pitch, slice_
        src = side(p.srcMemoryType, p.srcHost, p.srcDevice, p.srcArray, p.srcXInBytes, p.srcY, p.srcZ,
                   p.srcPitch, p.srcHeight, "source")
        dst = side(p.dstMemoryType, p.dstHost, p.dstDevice, p.dstArray, p.dstXInBytes, p.dstY, p.dstZ,
                   p.dstPitch, p.dstHeight, "destination")
        return (*src, *dst, p.WidthInBytes, p.Height, p.Depth)
    return SimpleNamespace(launch_params=launch_params, copy_3d_args=copy_3d_args)
