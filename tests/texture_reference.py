"""Texture fetching as the CUDA C++ Programming Guide's texture-fetching appendix states it,
in numpy (float32 arithmetic), for checking tests/programs/textures.cu.

- normalised coordinates are scaled by the extent: x = x_n * N;
- point sampling reads T[floor(x)]; linear filtering reads T[i] and T[i + 1] with
  i = floor(x - 0.5) and weights (1 - a, a), a = frac(x - 0.5) in 9-bit fixed point with 8
  fractional bits (here: rounded to the nearest multiple of 1/256);
- address modes act on each texel index: wrap (i mod N), mirror (period 2N), clamp, border
  (border colour outside [0, N)).
"""
from __future__ import annotations

import struct

import numpy as np

WRAP, CLAMP, MIRROR, BORDER = 0, 1, 2, 3
F = np.float32


def records(data: bytes) -> dict:
    """name -> bytes of the records textures.cu writes (u32 name length, name, u32 size, bytes)."""
    out, pos = {}, 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        name = data[pos + 4:pos + 4 + n].decode()
        pos += 4 + n
        (size,) = struct.unpack_from("<I", data, pos)
        out[name] = data[pos + 4:pos + 4 + size]
        pos += 4 + size
    return out


def address(i, n, mode):
    """(index in range, inside) of integer texel indices under an address mode."""
    i = np.asarray(i, np.int64)
    if mode == WRAP:
        return i % n, np.ones(i.shape, bool)
    if mode == MIRROR:
        m = i % (2 * n)
        return np.where(m >= n, 2 * n - 1 - m, m), np.ones(i.shape, bool)
    inside = (i >= 0) & (i < n)
    clamped = np.clip(i, 0, n - 1)
    return clamped, (inside if mode == BORDER else np.ones(i.shape, bool))


def texels(img, idx, mode, border):
    """img[..., idx] for indices per dimension (x first), border colour where outside.
    img has shape (.., H, W, C) with the x axis last before the channels."""
    dims = len(idx)
    fixed, inside = [], np.ones(np.shape(idx[0]), bool)
    for d, i in enumerate(idx):
        r, ok = address(i, img.shape[dims - 1 - d], mode)
        fixed.append(r)
        inside &= ok
    v = img[tuple(reversed(fixed))]
    return np.where(inside[:, None], v, np.asarray(border, F)[None, :v.shape[1]])


def split(coords, extents, normalized, linear):
    """(floor indices, fractions) per dimension, float32 as the GPU computes them."""
    idx, frac = [], []
    for d, n in enumerate(extents):
        c = coords[:, d].astype(F)
        if normalized:
            c = (c * F(n)).astype(F)
        if linear:
            c = (c - F(0.5)).astype(F)
        fl = np.floor(c)
        idx.append(fl.astype(np.int64))
        frac.append((c - fl).astype(F))
    return idx, frac


def weight(frac):
    return (np.floor(frac * F(256) + F(0.5)) / F(256)).astype(F)


def sample(img, coords, mode=CLAMP, linear=False, normalized=False, border=(0, 0, 0, 0)):
    """tex{1,2,3}D of img (shape (W,) (H, W) or (D, H, W), plus a channel axis) at coords
    (M x dims); returns M x channels float32."""
    dims = coords.shape[1]
    extents = [img.shape[dims - 1 - d] for d in range(dims)]
    idx, frac = split(coords, extents, normalized, linear)
    if not linear:
        return texels(img, idx, mode, border).astype(F)
    weights = [weight(f) for f in frac]
    acc = np.zeros((coords.shape[0], img.shape[-1]), F)
    for corner in range(1 << dims):
        w = np.ones(coords.shape[0], F)
        at = []
        for d in range(dims):
            upper = (corner >> d) & 1
            at.append(idx[d] + upper)
            w = (w * (weights[d] if upper else (F(1) - weights[d]))).astype(F)
        acc = (acc + w[:, None] * texels(img, at, mode, border)).astype(F)
    return acc


def gather(img, coords, comp=0, mode=CLAMP):
    """tex2Dgather: component `comp` of (i, j+1), (i+1, j+1), (i+1, j), (i, j)."""
    (i, j), _ = split(coords, [img.shape[1], img.shape[0]], False, True)
    corners = [(i, j + 1), (i + 1, j + 1), (i + 1, j), (i, j)]
    return np.stack([texels(img, [a, b], mode, (0, 0, 0, 0))[:, comp] for a, b in corners], axis=1)


def check_program(recs: dict) -> None:
    """Every output of tests/programs/textures.cu against the formulas above."""
    def arr(name, dtype=F, shape=None):
        a = np.frombuffer(recs[name], dtype)
        return a.reshape(shape) if shape else a
    W, H = 37, 23
    img = arr("img", shape=(H, W))
    assert list(arr("array_info", np.int32)) == [32, 2, W, H, 0]      # cudaChannelFormatKindFloat
    assert np.array_equal(arr("roundtrip", shape=(H, W)), img)
    assert np.array_equal(arr("subbox", shape=(5, 8)), img[2:7, 3:11])
    border = arr("border")
    for normalized in (0, 1):
        for mode in (WRAP, CLAMP, MIRROR, BORDER):
            for linear in (0, 1):
                if not normalized and mode in (WRAP, MIRROR):
                    continue
                key = f"tex2d_n{normalized}_m{mode}_f{linear}"
                coords = arr(key + "_coords", shape=(-1, 2))
                want = sample(img[..., None], coords, mode, bool(linear), bool(normalized), border)[:, 0]
                got = arr(key)
                _same(key, got, want, exact=not linear, coords=coords)
    coords = arr("gather_coords", shape=(-1, 2))
    _same("gather", arr("gather", shape=(-1, 4)), gather(img[..., None], coords), exact=True, coords=coords)

    lin, idx = arr("lin"), arr("lin_idx", np.int32)
    inside = (idx >= 0) & (idx < len(lin))
    _same("fetch1d", arr("fetch1d"), np.where(inside, lin[np.clip(idx, 0, len(lin) - 1)], F(0)), exact=True,
          coords=idx)

    u8 = arr("u8img", np.uint8, (13, 19, 4))
    coords = arr("u8_coords", shape=(-1, 2))
    norm = (u8.astype(F) / F(255)).astype(F)
    _same("u8 normalised, point", arr("u8_norm_point", shape=(-1, 4)), sample(norm, coords), exact=True, coords=coords)
    _same("u8 normalised, linear", arr("u8_norm_linear", shape=(-1, 4)), sample(norm, coords, linear=True),
          exact=False, coords=coords)
    _same("u8 element type", arr("u8_element", np.uint32, (-1, 4)), sample(u8.astype(np.uint32), coords),
          exact=True, coords=coords)

    vol = arr("vol", shape=(5, 7, 9))
    assert np.array_equal(arr("vol_roundtrip", shape=(5, 7, 9)), vol)
    coords = arr("vol_coords", shape=(-1, 4))[:, :3]
    _same("tex3d point", arr("tex3d_point"), sample(vol[..., None], coords)[:, 0], exact=True, coords=coords)
    _same("tex3d linear", arr("tex3d_linear"), sample(vol[..., None], coords, linear=True)[:, 0], exact=False,
          coords=coords)

    layers = arr("layers", shape=(3, 9, 11))
    c4 = arr("layer_coords", shape=(-1, 4))
    want = np.array([sample(layers[int(c[2])][..., None], c[None, :2], WRAP, normalized=True)[0, 0] for c in c4], F)
    _same("tex2DLayered", arr("tex2d_layered"), want, exact=True, coords=c4)

    s = arr("surf_in", shape=(17, 33))
    assert np.array_equal(arr("surf_out", shape=(17, 33)), (F(2) * s + F(1)).astype(F))
    ci = arr("surf_coords", np.int32, (-1, 2))
    x, y = ci[:, 0], ci[:, 1]
    inside = (x >= 0) & (x < 33) & (y >= 0) & (y < 17)
    clamped = s[np.clip(y, 0, 16), np.clip(x, 0, 32)]
    _same("surface, boundary mode zero", arr("surf_zero"), np.where(inside, clamped, F(0)), exact=True, coords=ci)
    _same("surface, boundary mode clamp", arr("surf_clamp"), clamped, exact=True, coords=ci)
    assert list(arr("queries", np.int32)) == [33, 17, 33, 17]

    half = arr("half_img", shape=(11, 21))
    coords = arr("half_coords", shape=(-1, 2))
    _same("half, linear", arr("half_linear"), sample(half[..., None], coords, linear=True)[:, 0], exact=False,
          coords=coords)
    s16 = arr("s16_img", np.int16, (11, 21, 2))
    norm = np.maximum((s16.astype(F) / F(32767)).astype(F), F(-1))
    _same("short2 normalised", arr("s16_norm", shape=(-1, 2)), sample(norm, coords), exact=True, coords=coords)
    coords = arr("pitch2d_coords", shape=(-1, 2))
    _same("pitched, border, linear", arr("pitch2d_border_linear"),
          sample(img[..., None], coords, BORDER, linear=True, border=border)[:, 0], exact=False, coords=coords)
    row, c1 = arr("row"), arr("row_coords")
    _same("tex1D mirror linear", arr("tex1d_mirror_linear"),
          sample(row[:, None], c1[:, None], MIRROR, linear=True, normalized=True)[:, 0], exact=False, coords=c1)

    z, y, x = np.meshgrid(np.arange(4), np.arange(5), np.arange(6), indexing="ij")
    assert np.array_equal(arr("surf3d", np.int16, (4, 5, 6)), (x + 10 * y + 100 * z).astype(np.int16))
    iv = arr("surf1d_in", np.int32, (-1, 2))
    assert np.array_equal(arr("surf1d", np.int32), iv.sum(axis=1))
    _check_mipmaps(arr)


def mip_sample(levels, coords, lod, bias, lo, hi, linear_between):
    """tex2DLod on normalised coordinates, clamp, linear filtering within a level: the level
    of detail plus the bias, clamped to [lo, hi] and to the levels there are; the nearest level
    (point) or the two around it blended (linear)."""
    lod = np.clip(np.clip((lod + F(bias)).astype(F), F(lo), F(hi)), F(0), F(len(levels) - 1)).astype(F)
    per_level = [sample(img[..., None], coords, CLAMP, True, True)[:, 0] for img in levels]
    pick = lambda k: np.choose(k, per_level)
    if not linear_between:
        return pick(np.floor(lod + F(0.5)).astype(np.int64))
    low = np.floor(lod)
    k0 = low.astype(np.int64)
    k1 = np.minimum(k0 + 1, len(levels) - 1)
    w = (lod - low).astype(F)
    return ((F(1) - w) * pick(k0) + w * pick(k1)).astype(F)


def _check_mipmaps(arr):
    shapes = [(max(23 >> k, 1), max(37 >> k, 1)) for k in range(4)]
    levels = [arr(f"mip{k}", shape=shape) for k, shape in enumerate(shapes)]
    bias, lo, hi = arr("mip_params")
    c = arr("mip_lod_coords", shape=(-1, 4))
    for linear, key in ((False, "mip_lod_point"), (True, "mip_lod_linear")):
        want = mip_sample(levels, c[:, :2], c[:, 2], bias, lo, hi, linear)
        _same(key, arr(key), want, exact=False, coords=c)
    g = arr("mip_grad_coords", shape=(-1, 4))
    rho = np.maximum(np.abs(g[:, 2] * F(37)), np.abs(g[:, 3] * F(23))).astype(F)
    with np.errstate(divide="ignore"):
        lod = np.log2(rho).astype(F)
    _same("tex2DGrad", arr("mip_grad"), mip_sample(levels, g[:, :2], lod, bias, lo, hi, True), exact=False,
          coords=g, tolerance=1e-4)
    c2 = arr("mip_plain_coords", shape=(-1, 2))
    _same("tex2D on a mipmapped texture (level 0)", arr("mip_plain"),
          sample(levels[0][..., None], c2, CLAMP, True, True)[:, 0], exact=False, coords=c2)


def _same(what, got, want, exact, coords, tolerance=1e-6):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    if exact:
        bad = got != want
    else:
        bad = ~np.isclose(got, want, rtol=tolerance, atol=tolerance)
    bad = bad.reshape(len(bad), -1).any(axis=1)
    assert not bad.any(), (f"{what}: {bad.sum()} of {len(bad)} wrong, first at {np.argmax(bad)}: "
                           f"coordinates {coords[bad][:3]}, got {got[bad][:3]}, want {want[bad][:3]}")
