"""Textures and surfaces in unified texture mode: tex, tld4, txq, suld.b, sust.b, suq.

The texture (or surface) operand is a 64-bit value, the address of a descriptor laid out as
compiler/texdesc.py says; generated code reads its fields directly. Sampling follows the
CUDA C++ Programming Guide's texture-fetching appendix:

- coordinates are scaled by the extent when normalised (x * N);
- point sampling reads texel floor(x); linear filtering reads floor(x - 0.5) and the next
  texel with weights 1 - a and a, a = frac(x - 0.5) held in 9-bit fixed point with 8
  fractional bits (rounded to a multiple of 1/256);
- address modes apply to each texel index: wrap (i mod N), mirror (period 2N, reflected),
  clamp (to [0, N-1]) or border (the border colour for an index out of range); the driver
  turns wrap and mirror into clamp for unnormalised coordinates;
- 8- and 16-bit integer formats read as floats in [0, 1] ([-1, 1] signed) unless the
  texture reads integers (CU_TRSF_READ_AS_INTEGER); half formats read as float; channels
  the format lacks read as 0 (and 1 for the fourth).

Mipmapped textures (the appendix does not describe levels of detail; this follows the usual
GPU rules): tex.level takes the level of detail given, tex.grad log2 of the longer gradient
in texels of level 0; the texture's bias is added and the result clamped to its level clamps
and to the levels there are; point filtering between levels takes the nearest level, linear
filtering blends the two around it (weight not quantised). A plain tex or tex.base reads
level 0.

Sampling lives in a few internal helper functions per module (one per geometry and result
kind), called once per thread; surfaces are inline loads and stores with a bounds check.
Forms anycuda does not implement are rejected with UnsupportedPtx naming them (the kernel
then fails at launch): cube maps, multisample geometries, txq.level, sparse results (d|p),
texel offsets and depth compare operands, explicit samplers (independent texture mode), f16x2
results, texture and surface references (.texref, .surfref), formatted surface stores
(sust.p) and surface reductions (sured). So each handler takes every modifier the ISA gives
its instruction (table.HANDLED): it refuses by name those it lacks.
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from ...ptx.errors import UnsupportedPtx
from ...ptx.modifiers import MODIFIERS
from .. import abi, texdesc
from ..irutil import field_ptr, i32, i64
from ..types import F16, F32, I1, I8, I16, I32, I64, PTR
from .table import OPERAND_COUNTS, handles

# operand counts (instructions.OPERAND_COUNTS): `d, [a, c]` plus, for tex and tld4, the texel
# offset and depth compare operands that the handlers refuse by name
OPERAND_COUNTS.update({"tex": (2, 3, 4), "tld4": (2, 3, 4), "txq": (2, 3), "suq": (2,), "suld": (2,), "sust": (2,),
                       "sured": (2, 3)})

V4I32 = ir.VectorType(I32, 4)
V4F32 = ir.VectorType(F32, 4)
OFF = texdesc.OFFSET

GEOMETRIES = {"1d": (1, False), "2d": (2, False), "3d": (3, False), "a1d": (1, True), "a2d": (2, True)}
UNSUPPORTED_GEOMETRIES = ("cube", "acube", "2dms", "a2dms")
MIPMAP_FORMS = ("base", "level", "grad")


def _f32(v):
    return ir.Constant(F32, v)


def _field(b, desc, name, typ=I32):
    return b.load(field_ptr(b, desc, OFF[name], typ))


def _internal(mod, name, ret, args):
    fn = ir.Function(mod, ir.FunctionType(ret, args), name=name)
    fn.linkage = "internal"
    return fn


# ---------------------------------------------------------------------- texel reads (helpers)

def _channel_fn(mod):
    """i32 anycuda.tex.channel(i8* p, i32 format): one channel's raw value, sign- or
    zero-extended; a half channel as the bits of the float it reads as."""
    name = "anycuda.tex.channel"
    fn = mod.globals.get(name)
    if fn is not None:
        return fn
    fn = _internal(mod, name, I32, [PTR, I32])
    p, fmt = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    blocks = {}
    for key in ("u8", "s8", "u16", "s16", "f16", "b32"):
        blocks[key] = fn.append_basic_block(key)
    sw = b.switch(fmt, blocks["b32"])
    for code, (kind, _) in texdesc.FORMATS.items():
        if kind in blocks:
            sw.add_case(i32(code), blocks[kind])
    for kind, bb in blocks.items():
        b.position_at_end(bb)
        if kind == "b32":
            b.ret(b.load(b.bitcast(p, I32.as_pointer()), align=1))
        elif kind == "f16":
            h = b.load(b.bitcast(p, F16.as_pointer()), align=1)
            b.ret(b.bitcast(b.fpext(h, F32), I32))
        else:
            t = I8 if kind.endswith("8") else I16
            v = b.load(b.bitcast(p, t.as_pointer()), align=1)
            b.ret(b.sext(v, I32) if kind[0] == "s" else b.zext(v, I32))
    return fn


def _to_float(b, raw, fmt, flags):
    """A channel's raw value as the float a texture read returns."""
    def is_(*codes):
        res = ir.Constant(I1, 0)
        for c in codes:
            res = b.or_(res, b.icmp_unsigned("==", fmt, i32(c)))
        return res
    signed = is_(texdesc.FMT_S8, texdesc.FMT_S16, texdesc.FMT_S32)
    value = b.select(signed, b.sitofp(raw, F32), b.uitofp(raw, F32))
    scale = b.select(is_(texdesc.FMT_U8), _f32(255.0),
                     b.select(is_(texdesc.FMT_U16), _f32(65535.0),
                              b.select(is_(texdesc.FMT_S8), _f32(127.0), _f32(32767.0))))
    scaled = b.fdiv(value, scale)
    scaled = b.select(signed, b.call(_fmax(b.module), [scaled, _f32(-1.0)]), scaled)
    as_int = b.icmp_unsigned("!=", b.and_(flags, i32(texdesc.READ_AS_INTEGER)), i32(0))
    normalise = b.and_(b.not_(as_int), is_(texdesc.FMT_U8, texdesc.FMT_U16, texdesc.FMT_S8, texdesc.FMT_S16))
    isfloat = is_(texdesc.FMT_F32, texdesc.FMT_F16)
    return b.select(isfloat, b.bitcast(raw, F32), b.select(normalise, scaled, value))


def _fmax(mod):
    return _decl(mod, "llvm.maxnum.f32", F32, [F32, F32])


def _fmin(mod):
    return _decl(mod, "llvm.minnum.f32", F32, [F32, F32])


def _decl(mod, name, ret, args):
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(ret, args), name=name)
    return fn


def _texel_fn(mod, want_float: bool):
    """<4 x float|i32> anycuda.tex.texel_{f,i}(i8* desc, i64 offset, i1 inside): the element at
    byte `offset` from the base, converted for a float or integer read, or the border colour
    when the texel is outside the image."""
    name = "anycuda.tex.texel_" + ("f" if want_float else "i")
    fn = mod.globals.get(name)
    if fn is not None:
        return fn
    vt = V4F32 if want_float else V4I32
    fn = _internal(mod, name, vt, [PTR, I64, I1])
    desc, off, inside = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    fetch, border = fn.append_basic_block("fetch"), fn.append_basic_block("border")
    b.cbranch(inside, fetch, border)

    b.position_at_end(border)
    colour = b.load(b.bitcast(b.gep(desc, [i64(OFF["border"])]), V4F32.as_pointer()), align=4)
    b.ret(colour if want_float else b.fptosi(colour, V4I32))

    b.position_at_end(fetch)
    fmt, flags = _field(b, desc, "format"), _field(b, desc, "flags")
    chan = b.zext(_field(b, desc, "chan_size"), I64)
    p = b.gep(b.inttoptr(_field(b, desc, "base", I64), PTR), [off])
    channel = _channel_fn(mod)
    isfloat = b.or_(b.icmp_unsigned("==", fmt, i32(texdesc.FMT_F32)), b.icmp_unsigned("==", fmt, i32(texdesc.FMT_F16)))
    one = _f32(1.0) if want_float else b.select(isfloat, i32(0x3F800000), i32(1))
    zero = _f32(0.0) if want_float else i32(0)
    cases = {n: fn.append_basic_block(f"ch{n}") for n in (1, 2, 4)}
    sw = b.switch(_field(b, desc, "channels"), cases[4])
    sw.add_case(i32(1), cases[1])
    sw.add_case(i32(2), cases[2])
    for n, bb in cases.items():
        b.position_at_end(bb)
        vec = ir.Constant(vt, None)
        for c in range(4):
            if c < n:
                raw = b.call(channel, [b.gep(p, [b.mul(chan, i64(c))]) if c else p, fmt])
                v = _to_float(b, raw, fmt, flags) if want_float else raw
            else:
                v = one if c == 3 else zero
            vec = b.insert_element(vec, v, i32(c))
        b.ret(vec)
    return fn


def _address(b, idx, n, mode):
    """(index, inside) of texel index `idx` in an extent of `n` under an address mode."""
    zero = i32(0)
    wrapped = b.srem(idx, n)
    wrapped = b.select(b.icmp_signed("<", wrapped, zero), b.add(wrapped, n), wrapped)
    period = b.add(n, n)
    m = b.srem(idx, period)
    m = b.select(b.icmp_signed("<", m, zero), b.add(m, period), m)
    mirrored = b.select(b.icmp_signed(">=", m, n), b.sub(b.sub(period, i32(1)), m), m)
    clamped = b.select(b.icmp_signed("<", idx, zero), zero,
                       b.select(b.icmp_signed(">=", idx, n), b.sub(n, i32(1)), idx))
    r = b.select(b.icmp_unsigned("==", mode, i32(texdesc.WRAP)), wrapped,
                 b.select(b.icmp_unsigned("==", mode, i32(texdesc.MIRROR)), mirrored, clamped))
    in_range = b.and_(b.icmp_signed(">=", idx, zero), b.icmp_signed("<", idx, n))
    inside = b.or_(b.icmp_unsigned("!=", mode, i32(texdesc.BORDER)), in_range)
    return r, inside


class _Image:
    """Descriptor fields a helper reads once."""

    def __init__(self, b, desc, dims):
        self.desc = desc
        self.extent = [_field(b, desc, n) for n in ("width", "height", "depth")][:dims]
        self.mode = [_field(b, desc, n) for n in ("mode_x", "mode_y", "mode_z")][:dims]
        self.pitch, self.slice = _field(b, desc, "pitch", I64), _field(b, desc, "slice", I64)
        self.element = b.zext(_field(b, desc, "element"), I64)
        self.flags, self.filter = _field(b, desc, "flags"), _field(b, desc, "filter")

    def texel(self, b, idx, layer, texel_fn):
        """The texel at integer indices `idx` (one per dimension) of a layer (i64 or None)."""
        inside = ir.Constant(I1, 1)
        fixed = []
        for d, i in enumerate(idx):
            r, ok = _address(b, i, self.extent[d], self.mode[d])
            fixed.append(r)
            inside = b.and_(inside, ok)
        off = b.mul(b.sext(fixed[0], I64), self.element)
        if len(fixed) > 1:
            off = b.add(off, b.mul(b.sext(fixed[1], I64), self.pitch))
        plane = b.sext(fixed[2], I64) if len(fixed) > 2 else None
        if layer is not None:
            plane = layer if plane is None else b.add(plane, layer)
        if plane is not None:
            off = b.add(off, b.mul(plane, self.slice))
        return b.call(texel_fn, [self.desc, off, inside])


def _layer_index(b, desc, layer):
    """A layer coordinate clamped to the layers there are, as i64."""
    last = b.sub(_field(b, desc, "layers"), i32(1))
    layer = b.select(b.icmp_signed("<", layer, i32(0)), i32(0), layer)
    layer = b.select(b.icmp_signed(">", layer, last), last, layer)
    return b.zext(layer, I64)


def _coordinate(b, img, d, c, linear):
    """(floor index, fraction) of float coordinate `c` in dimension d (scaled when the texture
    uses normalised coordinates, shifted by half a texel when `linear`)."""
    mod = b.module
    normalized = b.icmp_unsigned("!=", b.and_(img.flags, i32(texdesc.NORMALIZED_COORDINATES)), i32(0))
    c = b.select(normalized, b.fmul(c, b.uitofp(img.extent[d], F32)), c)
    if linear is not None:
        c = b.select(linear, b.fsub(c, _f32(0.5)), c)
    fl = b.call(_decl(mod, "llvm.floor.f32", F32, [F32]), [c])
    frac = b.fsub(c, fl)
    # NaN and huge coordinates: an index far outside any image, never poison
    bounded = b.call(_fmin(mod), [b.call(_fmax(mod), [fl, _f32(-(2.0 ** 30))]), _f32(2.0 ** 30)])
    bounded = b.select(b.fcmp_unordered("uno", fl, fl), _f32(0.0), bounded)
    return b.fptosi(bounded, I32), frac


def _weight(b, frac):
    """The 1.8 fixed-point weight of a fraction: a multiple of 1/256 (1.0 included)."""
    scale = _f32(float(texdesc.WEIGHT_SCALE))
    q = b.call(_decl(b.module, "llvm.floor.f32", F32, [F32]), [b.fadd(b.fmul(frac, scale), _f32(0.5))])
    return b.fdiv(q, scale)


def _sample_fn(mod, dims: int, layered: bool, float_coords: bool, want_float: bool):
    """<4 x i32> anycuda.tex.sample...(i8* desc, c0, c1, c2, i32 layer): a `tex` at
    coordinates c (f32 or s32; the unused ones ignored), its result as 4 x 32 bits (float
    bits for a float read)."""
    name = f"anycuda.tex.sample{dims}{'a' if layered else ''}{'f' if float_coords else 'i'}" \
           f"{'f' if want_float else 'i'}"
    fn = mod.globals.get(name)
    if fn is not None:
        return fn
    ct = F32 if float_coords else I32
    fn = _internal(mod, name, V4I32, [PTR, ct, ct, ct, I32])
    desc, *coords, layer_arg = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    img = _Image(b, desc, dims)
    texel_fn = _texel_fn(mod, want_float)
    layer = _layer_index(b, desc, layer_arg) if layered else None

    def result(v):
        return b.bitcast(v, V4I32) if want_float else v

    if not float_coords:
        b.ret(result(img.texel(b, coords[:dims], layer, texel_fn)))
        return fn
    if not want_float:           # linear filtering needs float results: integer reads are point-sampled
        idx = [_coordinate(b, img, d, coords[d], None)[0] for d in range(dims)]
        b.ret(result(img.texel(b, idx, layer, texel_fn)))
        return fn
    linear = b.icmp_unsigned("==", img.filter, i32(texdesc.FILTER_LINEAR))
    parts = [_coordinate(b, img, d, coords[d], linear) for d in range(dims)]
    point_bb, linear_bb = fn.append_basic_block("point"), fn.append_basic_block("linear")
    b.cbranch(linear, linear_bb, point_bb)

    b.position_at_end(point_bb)
    b.ret(result(img.texel(b, [i for i, _ in parts], layer, texel_fn)))

    b.position_at_end(linear_bb)
    weights = [_weight(b, frac) for _, frac in parts]
    acc = ir.Constant(V4F32, [0.0] * 4)
    for corner in range(1 << dims):
        w = _f32(1.0)
        idx = []
        for d, (i, _) in enumerate(parts):
            upper = (corner >> d) & 1
            idx.append(b.add(i, i32(1)) if upper else i)
            w = b.fmul(w, weights[d] if upper else b.fsub(_f32(1.0), weights[d]))
        v = img.texel(b, idx, layer, texel_fn)
        wv = b.insert_element(ir.Constant(V4F32, None), w, i32(0))
        wv = b.shuffle_vector(wv, ir.Constant(V4F32, None), ir.Constant(ir.VectorType(I32, 4), [0] * 4))
        acc = b.fadd(acc, b.fmul(wv, v))
    b.ret(result(acc))
    return fn


def _mip_fn(mod, dims: int, layered: bool, want_float: bool):
    """<4 x i32> anycuda.tex.mip...(i8* desc, f32 c0, c1, c2, i32 layer, f32 lod): a fetch at a
    level of detail. The texture's bias is added and the sum clamped to its [min, max] level
    clamps and to the levels there are; point filtering between levels takes the nearest level,
    linear filtering blends the two around it. A texture without mipmaps samples its image."""
    name = f"anycuda.tex.mip{dims}{'a' if layered else ''}{'f' if want_float else 'i'}"
    fn = mod.globals.get(name)
    if fn is not None:
        return fn
    fn = _internal(mod, name, V4I32, [PTR, F32, F32, F32, I32, F32])
    desc, x, y, z, layer, lod = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    sample = _sample_fn(mod, dims, layered, True, want_float)
    count = _field(b, desc, "num_levels")
    plain, mip = fn.append_basic_block("plain"), fn.append_basic_block("mip")
    b.cbranch(b.icmp_unsigned("==", count, i32(0)), plain, mip)
    b.position_at_end(plain)
    b.ret(b.call(sample, [desc, x, y, z, layer]))

    b.position_at_end(mip)
    fmax, fmin = _fmax(mod), _fmin(mod)
    floor = _decl(mod, "llvm.floor.f32", F32, [F32])
    lod = b.fadd(lod, _field(b, desc, "lod_bias", F32))
    lod = b.call(fmin, [b.call(fmax, [lod, _field(b, desc, "lod_min", F32)]), _field(b, desc, "lod_max", F32)])
    top = b.uitofp(b.sub(count, i32(1)), F32)
    lod = b.call(fmin, [b.call(fmax, [lod, _f32(0.0)]), top])          # NaN: level 0
    table = b.inttoptr(_field(b, desc, "levels", I64), PTR)

    def level_desc(k):
        return b.gep(table, [b.mul(b.zext(k, I64), i64(texdesc.SIZE))])
    nearest = b.fptosi(b.call(floor, [b.fadd(lod, _f32(0.5))]), I32)
    if not want_float:
        b.ret(b.call(sample, [level_desc(nearest), x, y, z, layer]))
        return fn
    point, blend = fn.append_basic_block("point"), fn.append_basic_block("blend")
    b.cbranch(b.icmp_unsigned("==", _field(b, desc, "mip_filter"), i32(texdesc.FILTER_LINEAR)), blend, point)
    b.position_at_end(point)
    b.ret(b.call(sample, [level_desc(nearest), x, y, z, layer]))
    b.position_at_end(blend)
    low = b.call(floor, [lod])
    k0 = b.fptosi(low, I32)
    k1 = b.select(b.icmp_signed("<", k0, b.sub(count, i32(1))), b.add(k0, i32(1)), k0)
    w = b.fsub(lod, low)
    v0 = b.bitcast(b.call(sample, [level_desc(k0), x, y, z, layer]), V4F32)
    v1 = b.bitcast(b.call(sample, [level_desc(k1), x, y, z, layer]), V4F32)
    wv = b.shuffle_vector(b.insert_element(ir.Constant(V4F32, None), w, i32(0)), ir.Constant(V4F32, None),
                          ir.Constant(ir.VectorType(I32, 4), [0] * 4))
    one = ir.Constant(V4F32, [1.0] * 4)
    b.ret(b.bitcast(b.fadd(b.fmul(b.fsub(one, wv), v0), b.fmul(wv, v1)), V4I32))
    return fn


def _gradient_lod(f, desc, dims, dx, dy):
    """log2 of the longer of the two gradients, in texels of level 0 (the isotropic level of
    detail; gradients are scaled by the extent when coordinates are normalised)."""
    b = f.b
    flags = _field(b, desc, "flags")
    normalized = b.icmp_unsigned("!=", b.and_(flags, i32(texdesc.NORMALIZED_COORDINATES)), i32(0))
    scales = [b.select(normalized, b.uitofp(_field(b, desc, n), F32), _f32(1.0))
              for n in ("width", "height", "depth")[:dims]]

    def length(vec):
        items = list(vec.items) if isinstance(vec, pir.Vec) else [vec]
        if len(items) < dims:
            raise f.error(f"tex.grad needs {dims} gradient components")
        acc = _f32(0.0)
        for d in range(dims):
            v = b.fmul(_read_coord(f, items[d], "f32"), scales[d])
            acc = b.fadd(acc, b.fmul(v, v))
        return b.call(_decl(b.module, "llvm.sqrt.f32", F32, [F32]), [acc])
    rho = b.call(_fmax(b.module), [length(dx), length(dy)])
    return b.call(_decl(b.module, "llvm.log2.f32", F32, [F32]), [rho])


def _gather_fn(mod, want_float: bool):
    """<4 x i32> anycuda.tex.gather_{f,i}(i8* desc, f32 x, f32 y, i32 comp): tld4, component
    `comp` of the four texels bilinear filtering at (x, y) would read, counter-clockwise from
    the lower left: (i, j+1), (i+1, j+1), (i+1, j), (i, j)."""
    name = "anycuda.tex.gather_" + ("f" if want_float else "i")
    fn = mod.globals.get(name)
    if fn is not None:
        return fn
    fn = _internal(mod, name, V4I32, [PTR, F32, F32, I32])
    desc, x, y, comp = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    img = _Image(b, desc, 2)
    texel_fn = _texel_fn(mod, want_float)
    (i, _), (j, _) = (_coordinate(b, img, d, c, ir.Constant(I1, 1)) for d, c in enumerate((x, y)))
    i1, j1 = b.add(i, i32(1)), b.add(j, i32(1))
    out = ir.Constant(V4I32, None)
    for k, idx in enumerate(((i, j1), (i1, j1), (i1, j), (i, j))):
        v = b.extract_element(img.texel(b, list(idx), None, texel_fn), comp)
        out = b.insert_element(out, b.bitcast(v, I32) if want_float else v, i32(k))
    b.ret(out)
    return fn


# ---------------------------------------------------------------------- operands

def _unsupported(f, what):
    return f.error(f"{what} is not supported by anycuda", UnsupportedPtx)


def _handle(f, op, kind="texture"):
    """The descriptor address (i8*) a texture or surface operand names."""
    if isinstance(op, pir.Reg):
        v = f.read(op, "u64")
    elif isinstance(op, pir.Sym) and f.is_kernel_param(pir.Addr(op, 0)):
        v = f.kernel_param_value(pir.Addr(op, 0), 0, "u64")[0]
    elif isinstance(op, pir.Sym):
        raise _unsupported(f, f"{kind} references ({op.name}: .texref/.samplerref/.surfref, removed in CUDA 12); "
                              f"use {kind} objects")
    else:
        raise f.error(f"bad {kind} operand {op}")
    return f.b.inttoptr(v, PTR)


def _texture_and_coords(f, inst, kind="texture"):
    """(descriptor, coordinate operands) of the `[a, c]` operand."""
    op = inst.operands[1] if inst.opcode in ("tex", "tld4", "suld") else inst.operands[0]
    if not isinstance(op, pir.Vec) or len(op.items) not in (2, 3):
        raise f.error(f"{inst.opcode} needs a [{kind}, coordinates] operand")
    if len(op.items) == 3:
        raise _unsupported(f, f"{inst.opcode} with an explicit sampler (independent texture mode)")
    coords = op.items[1]
    coords = list(coords.items) if isinstance(coords, pir.Vec) else [coords]
    return _handle(f, op.items[0], kind), coords


def _read_coord(f, op, t):
    if isinstance(op, pir.Sym) and op.name == "_":
        return ir.Constant(F32 if t == "f32" else I32, 0)
    return f.read(op, t)


def _geometry(f, inst):
    for m in inst.mods:
        if m in GEOMETRIES:
            return GEOMETRIES[m]
        if m in UNSUPPORTED_GEOMETRIES:
            raise _unsupported(f, f"{inst.opcode}.{m} ({'cube map' if 'cube' in m else 'multisample'} textures)")
    raise f.error(f"{inst.opcode} needs a geometry (.1d, .2d, .3d, .a1d, .a2d)")


def _check_forms(f, inst, extra=0):
    """Refuse the forms anycuda lacks; `extra` operands past `d, [a, c]` belong to the form
    (the level of detail of tex.level, the gradients of tex.grad)."""
    if inst.opcode != "tex":
        for m in inst.mods:
            if m in MIPMAP_FORMS:
                raise _unsupported(f, f"{inst.opcode}.{m} (mipmapped textures)")
    if isinstance(inst.operands[0], pir.Pair):
        raise _unsupported(f, f"{inst.opcode} with a residency predicate (sparse textures)")
    if len(inst.operands) > 2 + extra:
        raise _unsupported(f, f"{inst.opcode} with texel offsets or a depth compare operand")
    if len(inst.operands) < 2 + extra:
        raise f.error(f"{inst.opcode} needs {2 + extra} operands")


def _write_results(f, dst, vec, dtype):
    b = f.b
    items = dst.items if isinstance(dst, pir.Vec) else [dst]
    for k, item in enumerate(items[:4]):
        if isinstance(item, pir.Sym) and item.name == "_":
            continue
        v = b.extract_element(vec, i32(k))
        f.write(item, b.bitcast(v, F32) if dtype == "f32" else v, dtype)


def _types(f, inst):
    ts = [m for m in inst.mods if m in ("u32", "s32", "f32", "f16", "f16x2")]
    if len(ts) != 2:
        raise f.error(f"{inst.opcode} needs a result and a coordinate type")
    dtype, ctype = ts
    if dtype in ("f16", "f16x2"):
        raise _unsupported(f, f"{inst.opcode} with .{dtype} results")
    if ctype not in ("f32", "s32"):
        raise f.error(f"{inst.opcode} coordinates are .f32 or .s32, not .{ctype}")
    return dtype, ctype


@handles("tex", mods=MODIFIERS["tex"], types=2)
def tex(f, inst):
    mip = next((m for m in inst.mods if m in MIPMAP_FORMS), None)
    _check_forms(f, inst, {"level": 1, "grad": 2}.get(mip, 0))
    dims, layered = _geometry(f, inst)
    dtype, ctype = _types(f, inst)
    if mip in ("level", "grad") and ctype != "f32":
        raise f.error(f"tex.{mip} coordinates are .f32")
    desc, coords = _texture_and_coords(f, inst)
    layer = i32(0)
    if layered:
        layer = _read_coord(f, coords[0], "s32")
        coords = coords[1:]
    if len(coords) < dims:
        raise f.error(f"{inst.opcode} needs {dims} coordinates")
    cs = [_read_coord(f, c, ctype) for c in coords[:dims]]
    zero = ir.Constant(F32 if ctype == "f32" else I32, 0)
    cs += [zero] * (3 - len(cs))
    if mip in ("level", "grad"):
        lod = _read_coord(f, inst.operands[2], "f32") if mip == "level" else \
            _gradient_lod(f, desc, dims, inst.operands[2], inst.operands[3])
        fn = _mip_fn(f.b.module, dims, layered, dtype == "f32")
        _write_results(f, inst.operands[0], f.b.call(fn, [desc, *cs, layer, lod]), dtype)
        return
    # a plain fetch (and tex.base) reads level 0 of a mipmapped texture
    fn = _sample_fn(f.b.module, dims, layered, ctype == "f32", dtype == "f32")
    _write_results(f, inst.operands[0], f.b.call(fn, [desc, *cs, layer]), dtype)


@handles("tld4", mods=MODIFIERS["tld4"], types=2)
def tld4(f, inst):
    _check_forms(f, inst)
    comp = next((m for m in inst.mods if m in ("r", "g", "b", "a")), None)
    if comp is None:
        raise f.error("tld4 needs a component (.r, .g, .b, .a)")
    dims, layered = _geometry(f, inst)
    if dims != 2 or layered:
        raise _unsupported(f, "tld4 of a layered texture")
    dtype, ctype = _types(f, inst)
    if ctype != "f32":
        raise f.error("tld4 coordinates are .f32")
    desc, coords = _texture_and_coords(f, inst)
    x, y = (_read_coord(f, c, "f32") for c in coords[:2])
    fn = _gather_fn(f.b.module, dtype == "f32")
    _write_results(f, inst.operands[0], f.b.call(fn, [desc, x, y, i32("rgba".index(comp))]), dtype)


# txq / suq fields: (descriptor field, how to turn it into the answer)
_QUERIES = {
    "width": "q_width", "height": "q_height", "depth": "q_depth", "array_size": "q_layers",
    "channel_data_type": "format", "channel_order": "channels", "filter_mode": "filter",
    "addr_mode_0": "mode_x", "addr_mode_1": "mode_y", "addr_mode_2": "mode_z",
}


@handles("txq", "suq", mods=MODIFIERS["txq"] | MODIFIERS["suq"])
def query(f, inst):
    b = f.b
    if "level" in inst.mods:
        raise _unsupported(f, "txq.level (queries of one mipmap level)")
    if len(inst.operands) != 2:
        raise f.error(f"{inst.opcode} needs a destination and a [{'texture' if inst.opcode == 'txq' else 'surface'}]")
    what = next((m for m in inst.mods if m not in ("b32",)), None)
    op = inst.operands[1]
    base = op.base if isinstance(op, pir.Addr) else op
    desc = _handle(f, base, "texture" if inst.opcode == "txq" else "surface")
    if what in _QUERIES:
        v = _field(b, desc, _QUERIES[what])
    elif what == "normalized_coords":
        v = b.lshr(b.and_(_field(b, desc, "flags"), i32(texdesc.NORMALIZED_COORDINATES)), i32(1))
    elif what == "num_mipmap_levels":
        count = _field(b, desc, "num_levels")
        v = b.select(b.icmp_unsigned("==", count, i32(0)), i32(1), count)
    elif what in ("num_samples", "memory_layout"):
        v = i32(0)
    else:
        raise _unsupported(f, f"{inst.opcode}.{what}")
    f.write(inst.operands[0], v, "b32")


# ---------------------------------------------------------------------- surfaces

_SURFACE_SIZES = {"b8": 1, "b16": 2, "b32": 4, "b64": 8}


def _surface_access(f, inst, load: bool):
    """(address i8*, inside i1 or None) of a suld/sust, after the out-of-range mode's clamp,
    with .trap's fault emitted. Also returns the data operand items and their type."""
    b = f.b
    if "b" not in inst.mods:
        raise _unsupported(f, f"{inst.opcode}.p (formatted surface access)")
    dims, layered = _geometry(f, inst)
    t = next((m for m in inst.mods if m in _SURFACE_SIZES), None)
    if t is None:
        raise f.error(f"{inst.opcode} needs a .b8, .b16, .b32 or .b64 size")
    mode = next((m for m in inst.mods if m in ("trap", "clamp", "zero")), "trap")
    if len(inst.operands) != 2:
        raise f.error(f"{inst.opcode} takes two operands")
    data = inst.operands[0] if load else inst.operands[1]
    items = list(data.items) if isinstance(data, pir.Vec) else [data]
    desc, coords = _texture_and_coords(f, inst, "surface")
    layer = None
    if layered:
        layer, coords = _read_coord(f, coords[0], "s32"), coords[1:]
    if len(coords) < dims:
        raise f.error(f"{inst.opcode} needs {dims} coordinates")
    cs = [_read_coord(f, c, "s32") for c in coords[:dims]]
    access = _SURFACE_SIZES[t] * len(items)
    limits = [b.sub(b.mul(_field(b, desc, "width"), _field(b, desc, "element")), i32(access))]
    limits += [b.sub(_field(b, desc, n), i32(1)) for n in ("height", "depth")][:dims - 1]
    if layer is not None:
        cs.append(layer)
        limits.append(b.sub(_field(b, desc, "layers"), i32(1)))
    inside = ir.Constant(I1, 1)
    for c, hi in zip(cs, limits):
        inside = b.and_(inside, b.and_(b.icmp_signed(">=", c, i32(0)), b.icmp_signed("<=", c, hi)))
    if mode == "clamp":
        cs = [b.select(b.icmp_signed("<", c, i32(0)), i32(0), b.select(b.icmp_signed(">", c, hi), hi, c))
              for c, hi in zip(cs, limits)]
    addr = _surface_address(b, desc, cs, dims, layer is not None)
    if mode == "trap":
        ok, bad = f.fn.append_basic_block("surface.ok"), f.fn.append_basic_block("surface.out_of_range")
        b.cbranch(inside, ok, bad)
        b.position_at_end(bad)
        # the address the access would have reached, for the launch error's message
        b.store(b.ptrtoint(addr, I64), field_ptr(b, f.launch_ptr(), abi.LAUNCH["err_info"], I64))
        f.emit_trap(abi.LAUNCH_ERR_ILLEGAL_ADDRESS)
        b.position_at_end(ok)
    return addr, (inside if mode == "zero" else None), items, t


def _surface_address(b, desc, cs, dims, layered):
    """base + (z + layer) * slice + y * pitch + x (x in bytes)."""
    off = b.sext(cs[0], I64)
    if dims > 1:
        off = b.add(off, b.mul(b.sext(cs[1], I64), _field(b, desc, "pitch", I64)))
    plane = b.sext(cs[2], I64) if dims > 2 else None
    if layered:
        plane = b.sext(cs[-1], I64) if plane is None else b.add(plane, b.sext(cs[-1], I64))
    if plane is not None:
        off = b.add(off, b.mul(plane, _field(b, desc, "slice", I64)))
    return b.gep(b.inttoptr(_field(b, desc, "base", I64), PTR), [off])


@handles("suld", mods=MODIFIERS["suld"])
def suld(f, inst):
    b = f.b
    addr, inside, items, t = _surface_access(f, inst, load=True)
    size = _SURFACE_SIZES[t]
    lt = ir.IntType(8 * size)
    values = []
    if inside is None:
        for k in range(len(items)):
            values.append(b.load(b.bitcast(b.gep(addr, [i64(k * size)]), lt.as_pointer()), align=size))
    else:
        slot = f.entry_alloca(ir.ArrayType(lt, len(items)), "surface.zero")
        for k in range(len(items)):
            b.store(ir.Constant(lt, 0), b.gep(slot, [i32(0), i32(k)]))
        with b.if_then(inside):
            for k in range(len(items)):
                v = b.load(b.bitcast(b.gep(addr, [i64(k * size)]), lt.as_pointer()), align=size)
                b.store(v, b.gep(slot, [i32(0), i32(k)]))
        values = [b.load(b.gep(slot, [i32(0), i32(k)])) for k in range(len(items))]
    for item, v in zip(items, values):
        if not (isinstance(item, pir.Sym) and item.name == "_"):
            f.write(item, v, t)


@handles("sust", mods=MODIFIERS["sust"])
def sust(f, inst):
    b = f.b
    addr, inside, items, t = _surface_access(f, inst, load=False)
    size = _SURFACE_SIZES[t]
    values = [f.read(item, t) for item in items]

    def store():
        for k, v in enumerate(values):
            b.store(v, b.bitcast(b.gep(addr, [i64(k * size)]), v.type.as_pointer()), align=size)
    if inside is None:
        store()
    else:
        with b.if_then(inside):
            store()


@handles("sured", mods=MODIFIERS["sured"])
def sured(f, inst):
    raise _unsupported(f, "sured (surface reductions)")
