"""C entry points for CUDA arrays, texture objects and surface objects: marshalling only
(semantics in anycuda.driver.arrays and anycuda.driver.textures). Called from entry.define()."""
from __future__ import annotations

from ..compiler import texdesc
from ..driver import arrays, textures
from ..runtime.errors import CudaError, CUresult


def _resource_in(ffi, ptr, p):
    if p == ffi.NULL:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "NULL resource descriptor")
    kind, r = p.resType, p.res
    if kind == texdesc.RES_ARRAY:
        fields = (ptr(r.array.hArray),)
    elif kind == texdesc.RES_MIPMAPPED_ARRAY:
        fields = (ptr(r.mipmap.hMipmappedArray),)
    elif kind == texdesc.RES_LINEAR:
        fields = (r.linear.devPtr, r.linear.format, r.linear.numChannels, r.linear.sizeInBytes)
    elif kind == texdesc.RES_PITCH2D:
        q = r.pitch2D
        fields = (q.devPtr, q.format, q.numChannels, q.width, q.height, q.pitchInBytes)
    else:
        fields = ()
    return textures.Resource(kind, fields, p.flags)


def _resource_out(ffi, handle, out, resource):
    ffi.memmove(out, bytes(ffi.sizeof("CUDA_RESOURCE_DESC")), ffi.sizeof("CUDA_RESOURCE_DESC"))
    out.resType = resource.kind
    out.flags = resource.flags
    f, r = resource.fields, out.res
    if resource.kind == texdesc.RES_ARRAY:
        r.array.hArray = handle(f[0])
    elif resource.kind == texdesc.RES_MIPMAPPED_ARRAY:
        r.mipmap.hMipmappedArray = handle(f[0])
    elif resource.kind == texdesc.RES_LINEAR:
        r.linear.devPtr, r.linear.format, r.linear.numChannels, r.linear.sizeInBytes = f
    elif resource.kind == texdesc.RES_PITCH2D:
        q = r.pitch2D
        q.devPtr, q.format, q.numChannels, q.width, q.height, q.pitchInBytes = f


def _required(ffi, *pointers):
    """CUDA_ERROR_INVALID_VALUE for a NULL descriptor or answer pointer (cffi would read
    through it)."""
    if any(p == ffi.NULL for p in pointers):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "a NULL descriptor or result pointer")


def define(ffi, entry, ptr, handle):
    """Register the entry points with the shim's `entry` decorator."""

    @entry
    def cuArrayCreate_v2(out, desc):
        _required(ffi, out, desc)
        out[0] = handle(arrays.cuArrayCreate(desc.Width, desc.Height, desc.Format, desc.NumChannels))

    @entry
    def cuArray3DCreate_v2(out, desc):
        _required(ffi, out, desc)
        out[0] = handle(arrays.cuArray3DCreate(desc.Width, desc.Height, desc.Depth, desc.Format,
                                               desc.NumChannels, desc.Flags))

    @entry
    def cuArrayDestroy(array):
        arrays.cuArrayDestroy(ptr(array))

    @entry
    def cuArrayGetDescriptor_v2(out, array):
        _required(ffi, out)
        out.Width, out.Height, out.Format, out.NumChannels = arrays.cuArrayGetDescriptor(ptr(array))

    @entry
    def cuArray3DGetDescriptor_v2(out, array):
        _required(ffi, out)
        (out.Width, out.Height, out.Depth, out.Format, out.NumChannels,
         out.Flags) = arrays.cuArray3DGetDescriptor(ptr(array))

    @entry
    def cuMipmappedArrayCreate(out, desc, levels):
        _required(ffi, out, desc)
        out[0] = handle(arrays.cuMipmappedArrayCreate(desc.Width, desc.Height, desc.Depth, desc.Format,
                                                      desc.NumChannels, desc.Flags, levels))

    @entry
    def cuMipmappedArrayGetLevel(out, mipmap, level):
        _required(ffi, out)
        out[0] = handle(arrays.cuMipmappedArrayGetLevel(ptr(mipmap), level))

    @entry
    def cuMipmappedArrayDestroy(mipmap):
        arrays.cuMipmappedArrayDestroy(ptr(mipmap))

    @entry
    def cuMemcpyHtoA_v2(dst, offset, src, n):
        arrays.linear_copy((ptr(dst), offset), ptr(src), n)

    @entry
    def cuMemcpyAtoH_v2(dst, src, offset, n):
        arrays.linear_copy(ptr(dst), (ptr(src), offset), n)

    @entry
    def cuMemcpyDtoA_v2(dst, offset, src, n):
        arrays.linear_copy((ptr(dst), offset), src, n)

    @entry
    def cuMemcpyAtoD_v2(dst, src, offset, n):
        arrays.linear_copy(dst, (ptr(src), offset), n)

    @entry
    def cuMemcpyAtoA_v2(dst, dst_offset, src, src_offset, n):
        arrays.linear_copy((ptr(dst), dst_offset), (ptr(src), src_offset), n)

    @entry
    def cuMemcpyHtoAAsync_v2(dst, offset, src, n, stream):
        arrays.linear_copy((ptr(dst), offset), ptr(src), n, ptr(stream))

    @entry
    def cuMemcpyAtoHAsync_v2(dst, src, offset, n, stream):
        arrays.linear_copy(ptr(dst), (ptr(src), offset), n, ptr(stream))

    @entry
    def cuTexObjectCreate(out, res, tex, view):
        _required(ffi, out, res, tex)
        texture = textures.TextureDesc(tuple(tex.addressMode), tex.filterMode, tex.flags, tex.maxAnisotropy,
                                       tex.mipmapFilterMode, tex.mipmapLevelBias, tex.minMipmapLevelClamp,
                                       tex.maxMipmapLevelClamp, tuple(tex.borderColor))
        v = None
        if view != ffi.NULL:
            v = textures.ViewDesc(view.format, view.width, view.height, view.depth, view.firstMipmapLevel,
                                  view.lastMipmapLevel, view.firstLayer, view.lastLayer)
        out[0] = textures.cuTexObjectCreate(_resource_in(ffi, ptr, res), texture, v)

    @entry
    def cuTexObjectDestroy(obj):
        textures.cuTexObjectDestroy(obj)

    @entry
    def cuTexObjectGetResourceDesc(out, obj):
        _required(ffi, out)
        _resource_out(ffi, handle, out, textures.cuTexObjectGetResourceDesc(obj))

    @entry
    def cuTexObjectGetTextureDesc(out, obj):
        _required(ffi, out)
        t = textures.cuTexObjectGetTextureDesc(obj)
        ffi.memmove(out, bytes(ffi.sizeof("CUDA_TEXTURE_DESC")), ffi.sizeof("CUDA_TEXTURE_DESC"))
        out.addressMode = list(t.address_modes)
        out.filterMode, out.flags, out.maxAnisotropy, out.mipmapFilterMode = \
            t.filter_mode, t.flags, t.max_anisotropy, t.mipmap_filter_mode
        out.mipmapLevelBias, out.minMipmapLevelClamp, out.maxMipmapLevelClamp = \
            t.mipmap_level_bias, t.min_mipmap_level_clamp, t.max_mipmap_level_clamp
        out.borderColor = list(t.border_color)

    @entry
    def cuTexObjectGetResourceViewDesc(out, obj):
        _required(ffi, out)
        v = textures.cuTexObjectGetResourceViewDesc(obj)
        ffi.memmove(out, bytes(ffi.sizeof("CUDA_RESOURCE_VIEW_DESC")), ffi.sizeof("CUDA_RESOURCE_VIEW_DESC"))
        (out.format, out.width, out.height, out.depth, out.firstMipmapLevel, out.lastMipmapLevel,
         out.firstLayer, out.lastLayer) = (v.format, v.width, v.height, v.depth, v.first_mipmap_level,
                                           v.last_mipmap_level, v.first_layer, v.last_layer)

    @entry
    def cuSurfObjectCreate(out, res):
        _required(ffi, out, res)
        out[0] = textures.cuSurfObjectCreate(_resource_in(ffi, ptr, res))

    @entry
    def cuSurfObjectDestroy(obj):
        textures.cuSurfObjectDestroy(obj)

    @entry
    def cuSurfObjectGetResourceDesc(out, obj):
        _required(ffi, out)
        _resource_out(ffi, handle, out, textures.cuSurfObjectGetResourceDesc(obj))


def array_side(ffi, ptr, array, x_bytes, y, z, width, height, depth):
    """(address, pitch, slice) of a copy's CUDA array endpoint (CU_MEMORYTYPE_ARRAY)."""
    return arrays.copy_side(ptr(array), x_bytes, y, z, width, height, depth)
