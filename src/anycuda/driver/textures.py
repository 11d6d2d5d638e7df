"""Texture and surface objects: cuTexObjectCreate/Destroy/Get*, cuSurfObjectCreate/Destroy/Get*.

A CUtexObject (or CUsurfObject) is the address of a descriptor in the layout of
compiler/texdesc.py, which generated code reads directly when a kernel samples the texture
(`tex`, `tld4`, `txq`) or reads and writes the surface (`suld`, `sust`, `suq`). What the
program gave at creation is kept beside it, for the Get* calls to answer.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ..compiler import texdesc
from ..runtime.device import TEXTURE_LIMITS
from ..runtime.errors import CudaError, CUresult
from . import api, arrays
from .handles import _current_handle

TEXTURE_ALIGNMENT = 256              # CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT as the device reports it
TEXTURE_PITCH_ALIGNMENT = TEXTURE_LIMITS[51]

# CU_TRSF_* flags a texture descriptor may carry
TRSF_READ_AS_INTEGER, TRSF_NORMALIZED, TRSF_SRGB = 0x01, 0x02, 0x10
TRSF_DISABLE_TRILINEAR, TRSF_SEAMLESS_CUBEMAP = 0x20, 0x40
_TRSF_KNOWN = TRSF_READ_AS_INTEGER | TRSF_NORMALIZED | TRSF_SRGB | TRSF_DISABLE_TRILINEAR | TRSF_SEAMLESS_CUBEMAP


def _invalid(msg):
    return CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, msg)


@dataclass(frozen=True)
class Resource:
    """CUDA_RESOURCE_DESC: `kind` (texdesc.RES_*) and the fields of its union member:
    array: (handle,); mipmap: (handle,); linear: (devPtr, format, numChannels, sizeInBytes);
    pitch2d: (devPtr, format, numChannels, width, height, pitchInBytes)."""
    kind: int
    fields: tuple
    flags: int = 0


@dataclass(frozen=True)
class TextureDesc:
    """CUDA_TEXTURE_DESC."""
    address_modes: tuple = (0, 0, 0)
    filter_mode: int = 0
    flags: int = 0
    max_anisotropy: int = 0
    mipmap_filter_mode: int = 0
    mipmap_level_bias: float = 0.0
    min_mipmap_level_clamp: float = 0.0
    max_mipmap_level_clamp: float = 0.0
    border_color: tuple = (0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class ViewDesc:
    """CUDA_RESOURCE_VIEW_DESC."""
    format: int = 0
    width: int = 0
    height: int = 0
    depth: int = 0
    first_mipmap_level: int = 0
    last_mipmap_level: int = 0
    first_layer: int = 0
    last_layer: int = 0


class _Object:
    def __init__(self, magic, resource, texture=None, view=None, fields=None):
        self.resource, self.texture, self.view = resource, texture, view
        fields = dict(fields)
        levels = fields.pop("mip_levels", None)
        if levels is not None:
            # one complete descriptor per level: the level's image with the texture's sampling
            sampling = {k: v for k, v in fields.items() if k not in levels[0]}
            table = b"".join(texdesc.pack(magic=magic, **{**level, **sampling}) for level in levels)
            self.table = ctypes.create_string_buffer(table, len(table))
            fields.update(levels=ctypes.addressof(self.table), num_levels=len(levels))
        self.buffer = ctypes.create_string_buffer(texdesc.pack(magic=magic, **fields), texdesc.SIZE)
        self.magic = magic
        self.context = _current_handle()     # it goes with that context (_tear_down)

    @property
    def address(self) -> int:
        return ctypes.addressof(self.buffer)


_objects = {}          # descriptor address -> _Object


def _image(resource: Resource, view: ViewDesc = None, surface: bool = False) -> dict:
    """The descriptor fields that say where the texels are and what they hold."""
    kind, f = resource.kind, resource.fields
    if kind not in (texdesc.RES_ARRAY, texdesc.RES_MIPMAPPED_ARRAY, texdesc.RES_LINEAR, texdesc.RES_PITCH2D):
        raise _invalid(f"resource type {kind}")
    if surface and kind != texdesc.RES_ARRAY:
        raise _invalid("a surface object needs a CUDA array resource")
    if resource.flags:
        raise _invalid(f"resource flags {resource.flags} (must be 0)")
    if kind == texdesc.RES_ARRAY:
        a = arrays.get(f[0])
        if surface and not a.flags & arrays.SURFACE_LDST:
            raise _invalid("the array was not created with CUDA_ARRAY3D_SURFACE_LDST")
        out = _array_image(a)
    elif kind == texdesc.RES_MIPMAPPED_ARRAY:
        m = arrays.get_mipmapped(f[0])
        out = _array_image(m.levels[0])
        out["mip_levels"] = [_array_image(level) for level in m.levels]
    else:
        ptr, fmt, channels = f[0], f[1], f[2]
        arrays._check_format(fmt, channels)
        if not ptr or ptr % TEXTURE_ALIGNMENT:
            raise _invalid(f"device pointer 0x{ptr:x} is not aligned to {TEXTURE_ALIGNMENT} bytes")
        chan = texdesc.FORMATS[fmt][1]
        element = chan * channels
        if kind == texdesc.RES_LINEAR:
            width = f[3] // element
            if width == 0:
                raise _invalid(f"a linear resource of {f[3]} bytes holds no element")
            out = dict(base=ptr, pitch=f[3], slice=f[3], width=width, height=1, depth=1, layers=1, dims=1,
                       q_width=width)
        else:
            width, height, pitch = f[3], f[4], f[5]
            if width == 0 or height == 0 or pitch < width * element or pitch % TEXTURE_PITCH_ALIGNMENT:
                raise _invalid(f"pitched resource {width} x {height} with pitch {pitch} (a multiple of "
                               f"{TEXTURE_PITCH_ALIGNMENT} bytes, at least a row)")
            out = dict(base=ptr, pitch=pitch, slice=pitch * height, width=width, height=height, depth=1,
                       layers=1, dims=2, q_width=width, q_height=height)
        out.update(format=fmt, channels=channels, element=element, chan_size=chan)
    out["kind"] = kind
    if view is not None:
        _apply_view(out, view)
    return out


def _array_image(a) -> dict:
    layered = a.layered
    return dict(base=a.base, pitch=a.pitch, slice=a.slice, format=a.format, channels=a.channels,
                element=a.element, chan_size=a.chan_size, dims=a.dims,
                width=a.width, height=max(a.height, 1), depth=a.depth if a.dims == 3 else 1,
                layers=max(a.depth, 1) if layered else 1,
                q_width=a.width, q_height=a.height, q_depth=a.depth if a.dims == 3 else 0,
                q_layers=a.depth if layered else 0)


def _apply_view(out: dict, view: ViewDesc) -> None:
    if view.format:
        raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED,
                        f"resource view format {view.format} (anycuda reads the resource's own format)")
    if "mip_levels" in out:
        raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED, "resource views of mipmapped arrays")
    if view.first_mipmap_level or view.last_mipmap_level:
        raise _invalid("mipmap levels in a resource view of a resource without mipmaps")
    for name, value in (("width", view.width), ("height", view.height), ("depth", view.depth)):
        if value > max(out["q_" + name], 1):
            raise _invalid(f"resource view {name} {value} exceeds the resource's")
        if value:
            out[name] = out["q_" + name] = value
    if out["q_layers"]:
        last = view.last_layer or (out["layers"] - 1 if not view.first_layer else view.first_layer)
        if view.first_layer > last or last >= out["layers"]:
            raise _invalid(f"resource view layers {view.first_layer}..{last} of {out['layers']}")
        out["base"] += view.first_layer * out["slice"]
        out["layers"] = out["q_layers"] = last - view.first_layer + 1
    elif view.first_layer or view.last_layer:
        raise _invalid("resource view layers of a resource without layers")


def _sampling(texture: TextureDesc, image: dict) -> dict:
    if texture.flags & ~_TRSF_KNOWN:
        raise _invalid(f"texture flags 0x{texture.flags:x}")
    if texture.flags & TRSF_SRGB:
        raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED, "sRGB textures (CU_TRSF_SRGB) are not supported yet")
    modes = list(texture.address_modes)
    if any(m not in (texdesc.WRAP, texdesc.CLAMP, texdesc.MIRROR, texdesc.BORDER) for m in modes):
        raise _invalid(f"address modes {modes}")
    if texture.filter_mode not in (texdesc.FILTER_POINT, texdesc.FILTER_LINEAR):
        raise _invalid(f"filter mode {texture.filter_mode}")
    normalized = bool(texture.flags & TRSF_NORMALIZED)
    integer_format = image["format"] not in (texdesc.FMT_F16, texdesc.FMT_F32)
    reads_integers = integer_format and (texture.flags & TRSF_READ_AS_INTEGER or image["chan_size"] == 4)
    if texture.filter_mode == texdesc.FILTER_LINEAR and reads_integers:
        raise _invalid("linear filtering of a texture read as integers (only float results can be filtered)")
    if not normalized:
        # wrap and mirror need normalised coordinates (Programming Guide); otherwise they clamp
        modes = [texdesc.CLAMP if m in (texdesc.WRAP, texdesc.MIRROR) else m for m in modes]
    filt, border = texture.filter_mode, texture.border_color
    if image["kind"] == texdesc.RES_LINEAR:
        # tex1Dfetch: no filtering or addressing; out of range reads zero
        modes, filt, border = [texdesc.BORDER] * 3, texdesc.FILTER_POINT, (0.0, 0.0, 0.0, 0.0)
    out = dict(mode_x=modes[0], mode_y=modes[1], mode_z=modes[2], filter=filt, border=tuple(border),
               flags=texture.flags & (texdesc.READ_AS_INTEGER | texdesc.NORMALIZED_COORDINATES))
    if "mip_levels" in image:
        if texture.mipmap_filter_mode not in (texdesc.FILTER_POINT, texdesc.FILTER_LINEAR):
            raise _invalid(f"mipmap filter mode {texture.mipmap_filter_mode}")
        if texture.mipmap_filter_mode == texdesc.FILTER_LINEAR and reads_integers:
            raise _invalid("linear filtering between mipmap levels of a texture read as integers")
        out.update(mip_filter=texture.mipmap_filter_mode, lod_bias=texture.mipmap_level_bias,
                   lod_min=texture.min_mipmap_level_clamp, lod_max=texture.max_mipmap_level_clamp)
    return out


def cuTexObjectCreate(resource: Resource, texture: TextureDesc, view: ViewDesc = None) -> int:
    api._require_context()
    if texture is None:
        raise _invalid("NULL texture descriptor")
    image = _image(resource, view)
    fields = {**image, **_sampling(texture, image)}
    obj = _Object(texdesc.MAGIC_TEXTURE, resource, texture, view, fields)
    _objects[obj.address] = obj
    return obj.address


def cuSurfObjectCreate(resource: Resource) -> int:
    api._require_context()
    image = _image(resource, surface=True)
    obj = _Object(texdesc.MAGIC_SURFACE, resource, fields=image)
    _objects[obj.address] = obj
    return obj.address


def _get(handle: int, magic: int) -> _Object:
    obj = _objects.get(handle)
    if obj is None or obj.magic != magic:
        what = "texture" if magic == texdesc.MAGIC_TEXTURE else "surface"
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"0x{handle:x} is not a live {what} object")
    return obj


def _destroy(handle: int, magic: int) -> None:
    obj = _get(handle, magic)
    ctypes.memset(ctypes.addressof(obj.buffer) + texdesc.OFFSET["magic"], 0, 4)
    # a kernel still running may read the descriptor: it stays allocated (it is small) until
    # its context's teardown, and is only dropped from the table
    del _objects[handle]
    _retired.append(obj)


_retired = []


def _tear_down(ctx: int) -> None:
    """A context's texture and surface objects go with it (its device is idle by now), and
    the descriptors of those destroyed before with them: a program that made and destroyed
    objects in a loop, resetting its device now and then, kept every descriptor."""
    for handle, obj in list(_objects.items()):
        if obj.context == ctx:
            _destroy(handle, obj.magic)
    _retired[:] = [obj for obj in _retired if obj.context != ctx]


api.context_teardown_hooks.append(_tear_down)


def cuTexObjectDestroy(handle: int) -> None:
    _destroy(handle, texdesc.MAGIC_TEXTURE)


def cuSurfObjectDestroy(handle: int) -> None:
    _destroy(handle, texdesc.MAGIC_SURFACE)


def cuTexObjectGetResourceDesc(handle: int) -> Resource:
    return _get(handle, texdesc.MAGIC_TEXTURE).resource


def cuTexObjectGetTextureDesc(handle: int) -> TextureDesc:
    return _get(handle, texdesc.MAGIC_TEXTURE).texture


def cuTexObjectGetResourceViewDesc(handle: int) -> ViewDesc:
    obj = _get(handle, texdesc.MAGIC_TEXTURE)
    if obj.view is not None:
        return obj.view
    d = texdesc.unpack(bytes(obj.buffer))
    return ViewDesc(width=d["q_width"], height=d["q_height"], depth=d["q_depth"],
                    last_layer=max(d["q_layers"] - 1, 0))


def cuSurfObjectGetResourceDesc(handle: int) -> Resource:
    return _get(handle, texdesc.MAGIC_SURFACE).resource


def descriptor(handle: int) -> dict:
    """The fields of a live texture or surface object's descriptor (for tests and tools)."""
    obj = _objects.get(handle)
    if obj is None:
        raise _invalid(f"0x{handle:x} is not a live texture or surface object")
    return texdesc.unpack(bytes(obj.buffer))
