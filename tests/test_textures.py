"""CUDA arrays, texture objects and surface objects at the driver API (ctypes through
`anycuda run`, so the shim's struct marshalling is exercised), and the PTX forms of tex, tld4,
txq, suld, sust and suq through the compiler: supported forms compile, unsupported ones fail
at launch with an error naming the form. (tests/test_binaries.py runs tests/programs/textures.cu,
which checks the sampled values.)"""
import os
import subprocess
import sys

import pytest

from anycuda.compiler import compile_kernel, texdesc
from anycuda.ptx.index import ModuleIndex

DRIVER_PROGRAM = r'''
import ctypes, struct, sys
import numpy as np
cuda = ctypes.CDLL("libcuda.so.1")
c = ctypes
def check(r, what=""):
    assert r == 0, f"CUDA error {r} {what}"

class ARRAY3D(c.Structure):
    _fields_ = [("Width", c.c_size_t), ("Height", c.c_size_t), ("Depth", c.c_size_t), ("Format", c.c_int),
                ("NumChannels", c.c_uint), ("Flags", c.c_uint)]
class ARRAY2D(c.Structure):
    _fields_ = [("Width", c.c_size_t), ("Height", c.c_size_t), ("Format", c.c_int), ("NumChannels", c.c_uint)]
class LINEAR(c.Structure):
    _fields_ = [("devPtr", c.c_uint64), ("format", c.c_int), ("numChannels", c.c_uint), ("sizeInBytes", c.c_size_t)]
class PITCH2D(c.Structure):
    _fields_ = [("devPtr", c.c_uint64), ("format", c.c_int), ("numChannels", c.c_uint), ("width", c.c_size_t),
                ("height", c.c_size_t), ("pitchInBytes", c.c_size_t)]
class RES(c.Union):
    _fields_ = [("hArray", c.c_void_p), ("linear", LINEAR), ("pitch2D", PITCH2D), ("reserved", c.c_int * 32)]
class RESOURCE(c.Structure):
    _fields_ = [("resType", c.c_int), ("res", RES), ("flags", c.c_uint)]
class TEXTURE(c.Structure):
    _fields_ = [("addressMode", c.c_int * 3), ("filterMode", c.c_int), ("flags", c.c_uint), ("maxAnisotropy", c.c_uint),
                ("mipmapFilterMode", c.c_int), ("mipmapLevelBias", c.c_float), ("minMipmapLevelClamp", c.c_float),
                ("maxMipmapLevelClamp", c.c_float), ("borderColor", c.c_float * 4), ("reserved", c.c_int * 12)]
class VIEW(c.Structure):
    _fields_ = [("format", c.c_int), ("width", c.c_size_t), ("height", c.c_size_t), ("depth", c.c_size_t),
                ("firstMipmapLevel", c.c_uint), ("lastMipmapLevel", c.c_uint), ("firstLayer", c.c_uint),
                ("lastLayer", c.c_uint), ("reserved", c.c_uint * 16)]
assert c.sizeof(RESOURCE) == 144 and c.sizeof(TEXTURE) == 104 and c.sizeof(VIEW) == 112

check(cuda.cuInit(0))
ctx = c.c_void_p()
check(cuda.cuDevicePrimaryCtxRetain(c.byref(ctx), 0))
check(cuda.cuCtxSetCurrent(ctx))

def array3d(w, h, d, fmt=0x20, ch=1, flags=0):
    a = c.c_void_p()
    r = cuda.cuArray3DCreate_v2(c.byref(a), c.byref(ARRAY3D(w, h, d, fmt, ch, flags)))
    return r, a

# descriptors round trip; bad descriptors are CUDA_ERROR_INVALID_VALUE, unsupported kinds NOT_SUPPORTED
r, a = array3d(10, 6, 3, 0x08, 2, 0x01 | 0x02)
check(r)
got = ARRAY3D()
check(cuda.cuArray3DGetDescriptor_v2(c.byref(got), a))
print("3d", got.Width, got.Height, got.Depth, got.Format, got.NumChannels, got.Flags)
print("2d of layered", cuda.cuArrayGetDescriptor_v2(c.byref(ARRAY2D()), a))
b = c.c_void_p()
check(cuda.cuArrayCreate_v2(c.byref(b), c.byref(ARRAY2D(7, 5, 0x02, 4))))
g2 = ARRAY2D()
check(cuda.cuArrayGetDescriptor_v2(c.byref(g2), b))
print("2d", g2.Width, g2.Height, g2.Format, g2.NumChannels)
print("bad", array3d(8, 8, 0, 0x55)[0], array3d(8, 8, 0, 0x20, 3)[0], array3d(0, 8, 0)[0], array3d(8, 0, 4)[0],
      array3d(8, 8, 6, 0x20, 1, 0x04)[0], array3d(8, 8, 0, 0x20, 1, 0x40)[0])
check(cuda.cuArrayDestroy(a))
print("destroyed", cuda.cuArrayDestroy(a), cuda.cuArray3DGetDescriptor_v2(c.byref(got), a), cuda.cuArrayDestroy(None))

# copies: host -> array -> array -> device -> host through the linear forms, rows laid end to end
data = np.arange(7 * 5 * 4, dtype=np.uint16)          # 7 x 5 elements of 4 x u16
check(cuda.cuMemcpyHtoA_v2(b, c.c_size_t(0), data.ctypes.data_as(c.c_void_p), c.c_size_t(data.nbytes)))
e = c.c_void_p()
check(cuda.cuArrayCreate_v2(c.byref(e), c.byref(ARRAY2D(7, 5, 0x02, 4))))
check(cuda.cuMemcpyAtoA_v2(e, c.c_size_t(16), b, c.c_size_t(8), c.c_size_t(200)))
dev = c.c_uint64()
check(cuda.cuMemAlloc_v2(c.byref(dev), c.c_size_t(data.nbytes)))
check(cuda.cuMemsetD8_v2(dev, 0xAB, c.c_size_t(data.nbytes)))
check(cuda.cuMemcpyAtoD_v2(dev, e, c.c_size_t(0), c.c_size_t(data.nbytes)))
back = np.zeros_like(data)
check(cuda.cuMemcpyDtoH_v2(back.ctypes.data_as(c.c_void_p), dev, c.c_size_t(data.nbytes)))
raw = data.view(np.uint8)
expect = np.zeros_like(raw)
expect[16:216] = raw[8:208]
print("linear copies", int(np.array_equal(back.view(np.uint8), expect)),
      "past the end", cuda.cuMemcpyHtoA_v2(b, c.c_size_t(8), data.ctypes.data_as(c.c_void_p), c.c_size_t(data.nbytes)))
check(cuda.cuMemcpyDtoA_v2(e, c.c_size_t(0), dev, c.c_size_t(data.nbytes)))
back2 = np.zeros_like(data)
check(cuda.cuMemcpyAtoH_v2(back2.ctypes.data_as(c.c_void_p), e, c.c_size_t(0), c.c_size_t(data.nbytes)))
print("round trip", int(np.array_equal(back2, back)))

# texture objects on pitched memory: what was given comes back
pitch = c.c_size_t()
p2 = c.c_uint64()
check(cuda.cuMemAllocPitch_v2(c.byref(p2), c.byref(pitch), c.c_size_t(64 * 4), c.c_size_t(16), 4))
res = RESOURCE()
res.resType = 3
res.res.pitch2D = PITCH2D(p2.value, 0x20, 1, 64, 16, pitch.value)
tex = TEXTURE()
tex.addressMode[:] = [3, 1, 0]
tex.filterMode, tex.flags = 1, 0x02
tex.borderColor[:] = [0.5, -1.0, 2.0, 4.0]
t = c.c_uint64()
check(cuda.cuTexObjectCreate(c.byref(t), c.byref(res), c.byref(tex), None))
rb, tb, vb = RESOURCE(), TEXTURE(), VIEW()
check(cuda.cuTexObjectGetResourceDesc(c.byref(rb), t))
check(cuda.cuTexObjectGetTextureDesc(c.byref(tb), t))
check(cuda.cuTexObjectGetResourceViewDesc(c.byref(vb), t))
q = rb.res.pitch2D
print("resource", rb.resType, int(q.devPtr == p2.value), q.format, q.numChannels, q.width, q.height,
      int(q.pitchInBytes == pitch.value))
print("texture", list(tb.addressMode), tb.filterMode, tb.flags, list(tb.borderColor))
print("view", vb.width, vb.height, vb.depth)
print("descriptor at", int(t.value != 0), "destroy", cuda.cuTexObjectDestroy(t), "again", cuda.cuTexObjectDestroy(t),
      "get", cuda.cuTexObjectGetResourceDesc(c.byref(rb), t))

def create(res, tex=tex, view=None):
    o = c.c_uint64()
    return cuda.cuTexObjectCreate(c.byref(o), c.byref(res), c.byref(tex) if tex is not None else None,
                                  c.byref(view) if view is not None else None)
mip = RESOURCE(); mip.resType = 1
lin = RESOURCE(); lin.resType = 2; lin.res.linear = LINEAR(p2.value + 4, 0x20, 1, 64)
ints = RESOURCE(); ints.resType = 3; ints.res.pitch2D = PITCH2D(p2.value, 0x03, 1, 64, 16, pitch.value)
flagged = RESOURCE(); flagged.resType = 3; flagged.res.pitch2D = res.res.pitch2D; flagged.flags = 1
narrow = RESOURCE(); narrow.resType = 3; narrow.res.pitch2D = PITCH2D(p2.value, 0x20, 4, 64, 16, 64)
print("bad textures", create(mip), create(res, None), create(lin), create(ints), create(flagged), create(narrow),
      create(RESOURCE(7)))

# surfaces need a CUDA array made for load/store
r, plain = array3d(8, 8, 0)
sres = RESOURCE(); sres.resType = 0; sres.res.hArray = plain
s = c.c_uint64()
print("surface of a plain array", cuda.cuSurfObjectCreate(c.byref(s), c.byref(sres)),
      "of pitched memory", cuda.cuSurfObjectCreate(c.byref(s), c.byref(res)))
r, ldst = array3d(8, 8, 0, 0x20, 1, 0x02)
sres.res.hArray = ldst
check(cuda.cuSurfObjectCreate(c.byref(s), c.byref(sres)))
back = RESOURCE()
check(cuda.cuSurfObjectGetResourceDesc(c.byref(back), s))
print("surface", back.resType, int(back.res.hArray == ldst.value), cuda.cuSurfObjectDestroy(s),
      cuda.cuSurfObjectDestroy(s))
print("null pointers", cuda.cuArrayCreate_v2(None, None), cuda.cuArray3DCreate_v2(c.byref(c.c_void_p()), None),
      cuda.cuArray3DGetDescriptor_v2(None, ldst), cuda.cuTexObjectCreate(None, c.byref(res), c.byref(tex), None),
      cuda.cuTexObjectGetTextureDesc(None, c.c_uint64(1)), cuda.cuSurfObjectCreate(c.byref(s), None))
mm, lv = c.c_void_p(), c.c_void_p()
check(cuda.cuMipmappedArrayCreate(c.byref(mm), c.byref(ARRAY3D(37, 23, 0, 0x20, 1, 0)), 4))
sizes = []
for k in range(4):
    check(cuda.cuMipmappedArrayGetLevel(c.byref(lv), mm, k))
    check(cuda.cuArray3DGetDescriptor_v2(c.byref(got), lv))
    sizes.append((got.Width, got.Height, got.Depth))
print("mipmap levels", sizes, "past the last", cuda.cuMipmappedArrayGetLevel(c.byref(lv), mm, 4),
      "destroy a level", cuda.cuArrayDestroy(lv),
      "too many", cuda.cuMipmappedArrayCreate(c.byref(c.c_void_p()), c.byref(ARRAY3D(37, 23, 0, 0x20, 1, 0)), 7))
mres = RESOURCE(); mres.resType = 1; mres.res.hArray = mm
tex.mipmapFilterMode, tex.maxMipmapLevelClamp = 1, 3.0
mt = c.c_uint64()
check(cuda.cuTexObjectCreate(c.byref(mt), c.byref(mres), c.byref(tex), None))
back = RESOURCE()
check(cuda.cuTexObjectGetResourceDesc(c.byref(back), mt))
print("mipmapped texture", back.resType, int(back.res.hArray == mm.value), "view",
      create(mres, tex, VIEW(0, 37, 23)), "destroy", cuda.cuTexObjectDestroy(mt), cuda.cuMipmappedArrayDestroy(mm),
      "again", cuda.cuMipmappedArrayDestroy(mm))
v = c.c_int()
check(cuda.cuDeviceGetAttribute(c.byref(v), 22, 0))            # CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH
print("limits", v.value, "too big", array3d(131073, 0, 0)[0], array3d(16385, 8, 8)[0], array3d(64, 0, 4096, flags=1)[0])
print("done")
'''


def _run_through_shim(tmp_path, source):
    script = tmp_path / "script.py"
    script.write_text(source)
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", sys.executable, str(script)],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def test_arrays_textures_and_surfaces_at_the_driver_api(tmp_path):
    r = _run_through_shim(tmp_path, DRIVER_PROGRAM)
    assert r.stdout.splitlines() == [
        "3d 10 6 3 8 2 3",
        "2d of layered 1",                           # cuArrayGetDescriptor of a layered array: INVALID_VALUE
        "2d 7 5 2 4",
        "bad 1 1 1 1 801 801",                       # format, channels, width 0, (W, 0, D) unlayered; cube, sparse
        "destroyed 400 400 400",                     # INVALID_HANDLE
        "linear copies 1 past the end 1",
        "round trip 1",
        "resource 3 1 32 1 64 16 1",
        "texture [3, 1, 0] 1 2 [0.5, -1.0, 2.0, 4.0]",
        "view 64 16 0",
        "descriptor at 1 destroy 0 again 1 get 1",
        # a NULL mipmapped array: INVALID_HANDLE; no texture descriptor, a misaligned linear
        # pointer, linear filtering of 32-bit integers, resource flags, a pitch narrower than a
        # row, a bad type
        "bad textures 400 1 1 1 1 1 1",
        "surface of a plain array 1 of pitched memory 1",
        "surface 0 1 0 1",
        "null pointers 1 1 1 1 1 1",                 # INVALID_VALUE, never a crash
        "mipmap levels [(37, 23, 0), (18, 11, 0), (9, 5, 0), (4, 2, 0)] past the last 1 destroy a level 1 too many 1",
        "mipmapped texture 1 1 view 801 destroy 0 0 again 400",
        "limits 131072 too big 1 1 1",
        "done",
    ]


# ---------------------------------------------------------------------- PTX forms

PTX_HEAD = """
.version 8.0
.target sm_80
.address_size 64
"""


def _kernel(body, params=".param .u64 t, .param .u64 out"):
    return PTX_HEAD + f"""
.visible .entry k({params}) {{
  .reg .u64 %rd<8>; .reg .f32 %f<16>; .reg .b32 %r<16>; .reg .b16 %rs<8>; .reg .pred %p<2>;
  ld.param.u64 %rd1, [t];
  ld.param.u64 %rd2, [out];
  mov.f32 %f1, 0f3F000000; mov.f32 %f2, 0f3F800000; mov.f32 %f3, 0f40000000;
  mov.b32 %r1, 1; mov.b32 %r2, 2; mov.b32 %r3, 0;
{body}
  ret;
}}
"""


SUPPORTED = [
    "tex.1d.v4.f32.s32 {%f4, %f5, %f6, %f7}, [%rd1, {%r1}];",
    "tex.1d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1}];",
    "tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}];",
    "tex.2d.v4.s32.f32 {%r4, %r5, %r6, %r7}, [%rd1, {%f1, %f2}];",
    "tex.2d.v4.u32.s32 {%r4, %r5, %r6, %r7}, [%rd1, {%r1, %r2}];",
    "tex.3d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2, %f3, %f3}];",
    "tex.a1d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%r1, %f1}];",
    "tex.a2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%r1, %f1, %f2, %f2}];",
    "tex.2d.v4.f32.f32 {%f4, _, _, _}, [t, {%f1, %f2}];",
    "tld4.r.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}];",
    "tld4.a.2d.v4.u32.f32 {%r4, %r5, %r6, %r7}, [%rd1, {%f1, %f2}];",
    "txq.width.b32 %r4, [%rd1];",
    "txq.normalized_coords.b32 %r4, [%rd1];",
    "suq.height.b32 %r4, [%rd1];",
    "suld.b.1d.b16.trap {%rs1}, [%rd1, {%r1}];",
    "suld.b.2d.v4.b8.clamp {%rs1, %rs2, %rs3, %rs4}, [%rd1, {%r1, %r2}];",
    "suld.b.3d.v2.b32.zero {%r4, %r5}, [%rd1, {%r1, %r2, %r3, %r3}];",
    "suld.b.a2d.b64.trap {%rd3}, [%rd1, {%r3, %r1, %r2, %r3}];",
    "sust.b.a1d.b32.trap [%rd1, {%r3, %r1}], {%r2};",
    "sust.b.2d.v4.b8.zero [%rd1, {%r1, %r2}], {%rs1, %rs2, %rs3, %rs4};",
    "sust.b.3d.v2.b32.clamp [%rd1, {%r1, %r2, %r3, %r3}], {%r4, %r5};",
    "tex.level.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}], %f3;",
    "tex.level.a1d.v4.s32.f32 {%r4, %r5, %r6, %r7}, [%rd1, {%r1, %f1}], %f3;",
    "tex.grad.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}], {%f1, %f2}, {%f1, %f2};",
    "tex.grad.3d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2, %f3, %f3}], {%f1, %f2, %f3, %f3}, "
    "{%f1, %f2, %f3, %f3};",
    "tex.base.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}];",
    "txq.num_mipmap_levels.b32 %r4, [%rd1];",
]

UNSUPPORTED = [
    ("tld4.r.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}], {%r1, %r2};", "texel offsets"),
    ("txq.level.width.b32 %r4, [%rd1], %r1;", "mipmap level"),
    ("tex.cube.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2, %f3, %f3}];", "cube map"),
    ("tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}|%p1, [%rd1, {%f1, %f2}];", "sparse"),
    ("tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, %rd2, {%f1, %f2}];", "explicit sampler"),
    ("sust.p.2d.b32.trap [%rd1, {%r1, %r2}], {%r4};", "formatted"),
    ("sured.b.add.2d.trap.u32 [%rd1, {%r1, %r2}], %r4;", "sured"),
]


def _kernel_error(ptx, name):
    """The error that keeps kernel k of `ptx` from running, or None."""
    return compile_kernel(ModuleIndex(ptx, name).kernel_unit("k"), "k", name).info.error


@pytest.mark.parametrize("line", SUPPORTED)
def test_supported_texture_and_surface_forms_compile(line):
    error = _kernel_error(_kernel("  " + line), "forms.ptx")
    assert error is None, error


@pytest.mark.parametrize("line, words", UNSUPPORTED)
def test_unsupported_forms_are_named(line, words):
    err = _kernel_error(_kernel("  " + line), "forms.ptx")
    assert words in str(err) and "not supported" in str(err), str(err)


def test_texture_references_are_refused_by_name():
    ptx = PTX_HEAD + """
.global .texref tref;
.visible .entry k(.param .u64 out) {
  .reg .f32 %f<8>;
  tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [tref, {%f1, %f2}];
  ret;
}
"""
    err = _kernel_error(ptx, "texref.ptx")
    assert "texture references" in str(err), str(err)


def test_descriptor_layout_is_one_definition():
    """Every field lies inside the descriptor, naturally aligned, without overlaps."""
    spans = []
    for name, off, code in texdesc.FIELDS:
        size = 16 if code == "4f" else {"Q": 8, "I": 4, "f": 4}[code]
        assert off % min(size, 8) == 0, name
        spans.append((off, off + size))
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])) and spans[-1][1] <= texdesc.SIZE
    values = texdesc.unpack(texdesc.pack(width=7, border=(1.0, 2.0, 3.0, 4.0), base=2 ** 40))
    assert values["width"] == 7 and values["border"] == (1.0, 2.0, 3.0, 4.0) and values["base"] == 2 ** 40
