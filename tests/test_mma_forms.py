"""mma.sync forms beyond the 16-bit, tf32 and 8-bit ones (compiler/ops/matrix.py): the sub-byte
integers (.s4/.u4), single bits (.b1 with .xor.popc and .and.popc) and the quad pairs' four
m8n8k4 .f16 products in each of their layouts. Fragment maps are written here from the ISA's
formulas ("Matrix Fragments for mma.mMnNkK"), not read from the compiler's tables; each test
runs several warps in several blocks on fresh random matrices with poisoned outputs; integers
are checked exactly, floats bit for bit against the order and rounding matrix.py documents.
"""
from __future__ import annotations

import numpy as np
import pytest

from test_mma import BLOCKS, WARPS, launch, mma_ptx, sequential

NWARPS = WARPS * BLOCKS


# ---------------------------------------------------------------- the ISA's maps
# shape -> {operand: (elements per lane, place(groupID, threadID_in_group, i) -> (row, col))}
def _c8(g, t, i):
    return g, 2 * t + i


def _c16(g, t, i):
    return (g if i < 2 else g + 8), 2 * t + (i & 1)


SUB_BYTE = {
    "m8n8k32": {"a": (8, lambda g, t, i: (g, t * 8 + i)), "b": (8, lambda g, t, i: (t * 8 + i, g)), "c": (2, _c8)},
    "m16n8k32": {"a": (16, lambda g, t, i: (g if i < 8 else g + 8, t * 8 + (i & 7))),
                 "b": (8, lambda g, t, i: (t * 8 + (i & 7), g)), "c": (4, _c16)},
    "m16n8k64": {"a": (32, lambda g, t, i: (g if i < 8 or 16 <= i < 24 else g + 8,
                                            t * 8 + (i & 7) + (32 if i >= 16 else 0))),
                 "b": (16, lambda g, t, i: (t * 8 + (i & 7) + (32 if i >= 8 else 0), g)), "c": (4, _c16)},
    "m8n8k128": {"a": (32, lambda g, t, i: (g, t * 32 + i)), "b": (32, lambda g, t, i: (t * 32 + i, g)),
                 "c": (2, _c8)},
    "m16n8k128": {"a": (64, lambda g, t, i: (g if i < 32 else g + 8, t * 32 + (i & 31))),
                  "b": (32, lambda g, t, i: (t * 32 + i, g)), "c": (4, _c16)},
    # the ISA writes a's column as t * 32 + i for i < 64; its figure (and the pattern of every
    # other shape) has i & 0x1F, a's elements 32..63 being rows g + 8 of the same columns
    "m16n8k256": {"a": (128, lambda g, t, i: (g if i < 32 or 64 <= i < 96 else g + 8,
                                              t * 32 + (i & 31) + (128 if i >= 64 else 0))),
                  "b": (64, lambda g, t, i: (t * 32 + (i & 31) + (128 if i >= 32 else 0), g)), "c": (4, _c16)},
}


def dims(shape):
    m, rest = shape[1:].split("n")
    n, k = rest.split("k")
    return int(m), int(n), int(k)


def lane_elements(mat, count, place):
    """[lane][element] of `mat` in the map `place`."""
    return np.array([[mat[place(lane >> 2, lane & 3, i)] for i in range(count)] for lane in range(32)])


def from_lanes(frags, shape, place):
    out = np.zeros(shape, frags.dtype)
    for lane in range(32):
        for i in range(frags.shape[1]):
            out[place(lane >> 2, lane & 3, i)] = frags[lane, i]
    return out


def pack(elements, bits):
    """Each lane's elements packed into .b32 registers, element i at bit (i % per) * bits of
    register i // per (the ISA's 'low to high')."""
    per = 32 // bits
    e = elements.astype(np.int64) & ((1 << bits) - 1)
    e = e.reshape(e.shape[0], -1, per)
    return (e << (np.arange(per) * bits)).sum(axis=2).astype(np.uint32)


def run_integer(form, shape, mats, bits):
    """Run `form` (an .s32 accumulator form of `shape`) for each warp's (A, B, C); each warp's D."""
    layout = SUB_BYTE[shape]
    bufs = [np.concatenate([pack(lane_elements(mt[x], *layout["ab"[x]]), bits) for mt in mats]) for x in (0, 1)]
    bufs.append(np.concatenate([lane_elements(mt[2], *layout["c"]).astype(np.int32) for mt in mats]))
    nc = layout["c"][0]
    d = np.full((len(mats) * 32, nc), -0x32323233, np.int32)
    regs = (bufs[0].shape[1], bufs[1].shape[1], nc, nc)
    launch(mma_ptx(form, regs, None, ("b32", "b32", "s32", "s32")), "k", (BLOCKS, 1, 1), (WARPS * 32, 1, 1),
           *bufs, d)
    m, n, _ = dims(shape)
    return [from_lanes(d[w * 32:(w + 1) * 32], (m, n), layout["c"][1]) for w in range(len(mats))]


def accumulators(rng, w, shape):
    """C for warp w: within 64 of the s32 limits in odd warps, so that sums overflow there."""
    if w % 2:
        return rng.choice([-1, 1], shape) * (2 ** 31 - 1 - rng.integers(0, 64, shape))
    return rng.integers(-2 ** 11, 2 ** 11, shape)


# ---------------------------------------------------------------- .s4 / .u4
FOUR_BIT = {"s4": (-8, 8), "u4": (0, 16)}


@pytest.mark.parametrize("shape", ["m8n8k32", "m16n8k32", "m16n8k64"])
@pytest.mark.parametrize("at,bt", [("s4", "s4"), ("u4", "u4"), ("s4", "u4"), ("u4", "s4")])
@pytest.mark.parametrize("satfinite", [False, True])
def test_mma_four_bit_integers(rng, shape, at, bt, satfinite):
    m, n, k = dims(shape)
    mats = [(rng.integers(*FOUR_BIT[at], (m, k)), rng.integers(*FOUR_BIT[bt], (k, n)), accumulators(rng, w, (m, n)))
            for w in range(NWARPS)]
    sat = ".satfinite" if satfinite else ""
    got = run_integer(f"mma.sync.aligned.{shape}.row.col{sat}.s32.{at}.{bt}.s32", shape, mats, 4)
    overflowed = False
    for (A, B, C), D in zip(mats, got):
        exact = A @ B + C
        overflowed |= bool((np.abs(exact) >= 2 ** 31).any())
        want = np.clip(exact, -2 ** 31, 2 ** 31 - 1) if satfinite else (exact + 2 ** 31) % 2 ** 32 - 2 ** 31
        assert np.array_equal(D, want.astype(np.int32))
    assert overflowed


# ---------------------------------------------------------------- .b1
@pytest.mark.parametrize("shape", ["m8n8k128", "m16n8k128", "m16n8k256"])
@pytest.mark.parametrize("op", ["xor", "and"])
def test_mma_single_bit(rng, shape, op):
    """D = C + popc(row of A op column of B), wrapping in 32 bits (no .satfinite here)."""
    m, n, k = dims(shape)
    mats = [(rng.integers(0, 2, (m, k)), rng.integers(0, 2, (k, n)), accumulators(rng, w, (m, n)))
            for w in range(NWARPS)]
    got = run_integer(f"mma.sync.aligned.{shape}.row.col.s32.b1.b1.s32.{op}.popc", shape, mats, 1)
    for (A, B, C), D in zip(mats, got):
        bits = (A[:, :, None] ^ B[None, :, :]) if op == "xor" else (A[:, :, None] & B[None, :, :])
        popc = np.array([[sum(int(A[r, j]) != int(B[j, c]) if op == "xor" else int(A[r, j]) & int(B[j, c])
                              for j in range(k)) for c in range(n)] for r in range(m)])
        assert np.array_equal(bits.sum(axis=1), popc)          # numpy and a plain count agree
        want = (popc + C + 2 ** 31) % 2 ** 32 - 2 ** 31
        assert np.array_equal(D, want.astype(np.int32))


# ---------------------------------------------------------------- m8n8k4 .f16: four products a warp
# (operand, layout or accumulator type) -> (elements per lane,
# place(lane) -> (quad pair, row, col)), from "Matrix Fragments for mma.m8n8k4 with .f16"
def _quad(lane):
    return (lane >> 2) & 3, lane % 4, lane >= 16


QUAD = {
    ("a", "row"): (4, lambda lane, i: (_quad(lane)[0], lane % 4 + (4 if lane >= 16 else 0), i)),
    ("a", "col"): (4, lambda lane, i: (_quad(lane)[0], i % 4 + (4 if lane >= 16 else 0), lane % 4)),
    ("b", "row"): (4, lambda lane, i: (_quad(lane)[0], lane % 4, i + (4 if lane >= 16 else 0))),
    ("b", "col"): (4, lambda lane, i: (_quad(lane)[0], i, lane % 4 + (4 if lane >= 16 else 0))),
    ("c", "f16"): (8, lambda lane, i: (_quad(lane)[0], lane % 4 + (4 if lane >= 16 else 0), i)),
    ("c", "f32"): (8, lambda lane, i: (_quad(lane)[0], (lane & 1) + (i & 2) + (4 if lane >= 16 else 0),
                                       (i & 4) + (lane & 2) + (i & 1))),
}


@pytest.mark.parametrize("alayout,blayout", [("row", "col"), ("row", "row"), ("col", "col"), ("col", "row")])
@pytest.mark.parametrize("ct,dt", [("f32", "f32"), ("f16", "f16"), ("f16", "f32"), ("f32", "f16")])
def test_mma_m8n8k4_quad_pairs(rng, alayout, blayout, ct, dt):
    """Each quad pair q (lanes 4q..4q+3 and 16+4q..16+4q+3) computes its own D = A * B + C."""
    numpy = {"f16": np.float16, "f32": np.float32}
    mats = [(rng.standard_normal((4, 8, 4)).astype(np.float16), rng.standard_normal((4, 4, 8)).astype(np.float16),
             (rng.standard_normal((4, 8, 8)) * 4).astype(numpy[ct])) for _ in range(NWARPS)]
    maps = {"a": QUAD[("a", alayout)], "b": QUAD[("b", blayout)], "c": QUAD[("c", ct)], "d": QUAD[("c", dt)]}

    def lanes(mat, x):
        count, place = maps[x]
        return np.array([[mat[place(lane, i)] for i in range(count)] for lane in range(32)], mat.dtype)

    word = {"f16": np.uint32, "f32": np.float32}
    bufs = [np.concatenate([np.ascontiguousarray(lanes(mt[j], x)).view(np.uint32 if x in "ab" else word[ct])
                            for mt in mats]) for j, x in enumerate("abc")]
    nd = 4 if dt == "f16" else 8
    d = np.frombuffer(b"\xcd" * (NWARPS * 32 * nd * 4), word[dt]).reshape(NWARPS * 32, nd).copy()
    regs = (2, 2, bufs[2].shape[1], nd)
    rtype = {"f16": "b32", "f32": "f32"}
    form = f"mma.sync.aligned.m8n8k4.{alayout}.{blayout}.{dt}.f16.f16.{ct}"
    launch(mma_ptx(form, regs, None, ("b32", "b32", rtype[ct], rtype[dt])), "k", (BLOCKS, 1, 1),
           (WARPS * 32, 1, 1), *bufs, d)
    count, place = maps["d"]
    for w, (A, B, C) in enumerate(mats):
        frags = d[w * 32:(w + 1) * 32].view(numpy[dt]).reshape(32, count)
        D = np.zeros((4, 8, 8), numpy[dt])
        for lane in range(32):
            for i in range(count):
                D[place(lane, i)] = frags[lane, i]
        for q in range(4):
            want = sequential(A[q], B[q], C[q].astype(np.float32))
            assert np.array_equal(D[q], want.astype(numpy[dt])), (w, q)
