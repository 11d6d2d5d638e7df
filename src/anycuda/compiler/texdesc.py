"""The descriptor behind a CUtexObject or CUsurfObject: one layout, written by the driver
(anycuda.driver.textures) and read directly by generated code (compiler.ops.textures).

A texture or surface object handed to a kernel is the address of one of these (host memory,
the one address space). Every field a fetch needs is here, so a `tex`, `suld` or `sust` is a
few loads from the descriptor and from the texels it points at; nothing is looked up at run
time in Python.

The image is addressed as   base + (z + layer) * slice + y * pitch + x * element
(a layered 2-D resource keeps its layers where a 3-D one keeps its slices; a 1-D layered one
has one row per layer).

A mipmapped texture's descriptor describes level 0 and points at a table of descriptors, one
per level (each complete, with its level's base, pitches and extents), so sampling a level is
sampling through that level's descriptor.
"""
from __future__ import annotations

import struct

# (name, byte offset, struct code): all little-endian, natural alignment
FIELDS = [
    ("base", 0, "Q"),           # address of texel (0, 0, 0) of layer 0
    ("pitch", 8, "Q"),          # bytes from one row to the next
    ("slice", 16, "Q"),         # bytes from one 2-D slice (or layer) to the next
    ("width", 24, "I"),         # extents in elements, each at least 1 (used for addressing)
    ("height", 28, "I"),
    ("depth", 32, "I"),
    ("layers", 36, "I"),        # layers of a layered resource, at least 1
    ("format", 40, "I"),        # CUarray_format of a channel (FORMATS)
    ("channels", 44, "I"),      # 1, 2 or 4
    ("element", 48, "I"),       # bytes per element (channels * channel size)
    ("chan_size", 52, "I"),     # bytes per channel
    ("mode_x", 56, "I"),        # address modes per dimension (WRAP, CLAMP, MIRROR, BORDER)
    ("mode_y", 60, "I"),
    ("mode_z", 64, "I"),
    ("filter", 68, "I"),        # FILTER_POINT or FILTER_LINEAR
    ("flags", 72, "I"),         # READ_AS_INTEGER | NORMALIZED_COORDINATES (CU_TRSF_*)
    ("kind", 76, "I"),          # the resource type (RES_ARRAY, RES_LINEAR, RES_PITCH2D)
    ("border", 80, "4f"),       # border colour (x, y, z, w)
    ("q_width", 96, "I"),       # extents as txq/suq answer them (0 for a dimension not there)
    ("q_height", 100, "I"),
    ("q_depth", 104, "I"),
    ("q_layers", 108, "I"),
    ("dims", 112, "I"),         # 1, 2 or 3: the dimensions of the resource (layers not counted)
    ("magic", 116, "I"),        # MAGIC_TEXTURE or MAGIC_SURFACE while alive, 0 once destroyed
    ("levels", 120, "Q"),       # mipmaps: address of a table of descriptors, one per level (0: none)
    ("num_levels", 128, "I"),   # mipmap levels in that table
    ("mip_filter", 132, "I"),   # FILTER_POINT or FILTER_LINEAR between levels
    ("lod_bias", 136, "f"),     # added to the level of detail, then clamped to [lod_min, lod_max]
    ("lod_min", 140, "f"),
    ("lod_max", 144, "f"),
]
SIZE = 160
OFFSET = {name: off for name, off, _ in FIELDS}
CODE = {name: code for name, _, code in FIELDS}

MAGIC_TEXTURE = 0x54584F42      # 'TXOB'
MAGIC_SURFACE = 0x53464F42      # 'SFOB'

# CUarray_format: the channel formats a texture or surface reads and writes
FORMATS = {0x01: ("u8", 1), 0x02: ("u16", 2), 0x03: ("u32", 4), 0x08: ("s8", 1), 0x09: ("s16", 2),
           0x0A: ("s32", 4), 0x10: ("f16", 2), 0x20: ("f32", 4)}
FMT_U8, FMT_U16, FMT_U32, FMT_S8, FMT_S16, FMT_S32, FMT_F16, FMT_F32 = 0x01, 0x02, 0x03, 0x08, 0x09, 0x0A, 0x10, 0x20

# CUaddress_mode, CUfilter_mode, CU_TRSF_* flags, CUresourcetype
WRAP, CLAMP, MIRROR, BORDER = 0, 1, 2, 3
FILTER_POINT, FILTER_LINEAR = 0, 1
READ_AS_INTEGER = 0x01
NORMALIZED_COORDINATES = 0x02
RES_ARRAY, RES_MIPMAPPED_ARRAY, RES_LINEAR, RES_PITCH2D = 0, 1, 2, 3

# Linear filtering weights are 9-bit fixed point with 8 fractional bits (CUDA C++ Programming
# Guide, texture fetching appendix).
WEIGHT_SCALE = 256


def pack(**values) -> bytes:
    """The descriptor's bytes from field values (missing fields are 0)."""
    out = bytearray(SIZE)
    for name, off, code in FIELDS:
        v = values.get(name, 0 if code != "4f" else (0.0, 0.0, 0.0, 0.0))
        if code == "4f":
            struct.pack_into("<4f", out, off, *v)
        else:
            struct.pack_into("<" + code, out, off, v)
    return bytes(out)


def unpack(data: bytes) -> dict:
    values = {}
    for name, off, code in FIELDS:
        if code == "4f":
            values[name] = struct.unpack_from("<4f", data, off)
        else:
            values[name] = struct.unpack_from("<" + code, data, off)[0]
    return values
