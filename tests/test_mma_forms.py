"""mma.sync forms beyond the 16-bit, tf32 and 8-bit ones (compiler/ops/matrix.py): the sub-byte
integers (.s4/.u4), single bits (.b1 with .xor.popc and .and.popc), the quad pairs' four
m8n8k4 .f16 products in each of their layouts, and mma.sp's sparse A with its metadata and
sparsity selector. Fragment maps are written here from the ISA's
formulas ("Matrix Fragments for mma.mMnNkK"), not read from the compiler's tables; each test
runs several warps in several blocks on fresh random matrices with poisoned outputs; integers
are checked exactly, floats bit for bit against the order and rounding matrix.py documents.
"""
from __future__ import annotations

import numpy as np

from test_mma import BLOCKS, WARPS, launch_on, mma_ptx, over_paths, sequential

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


def run_integer(form, shape, mats, bits, path):
    """Run `form` (an .s32 accumulator form of `shape`) for each warp's (A, B, C) the way
    `path` names; each warp's D."""
    layout = SUB_BYTE[shape]
    bufs = [np.concatenate([pack(lane_elements(mt[x], *layout["ab"[x]]), bits) for mt in mats]) for x in (0, 1)]
    bufs.append(np.concatenate([lane_elements(mt[2], *layout["c"]).astype(np.int32) for mt in mats]))
    nc = layout["c"][0]
    d = np.full((len(mats) * 32, nc), -0x32323233, np.int32)
    regs = (bufs[0].shape[1], bufs[1].shape[1], nc, nc)
    launch_on(path, mma_ptx(form, regs, None, ("b32", "b32", "s32", "s32"), path), (BLOCKS, 1, 1),
              (WARPS * 32, 1, 1), *bufs, d)
    m, n, _ = dims(shape)
    return [from_lanes(d[w * 32:(w + 1) * 32], (m, n), layout["c"][1]) for w in range(len(mats))]


def accumulators(rng, w, shape):
    """C for warp w: within 64 of the s32 limits in odd warps, so that sums overflow there."""
    if w % 2:
        return rng.choice([-1, 1], shape) * (2 ** 31 - 1 - rng.integers(0, 64, shape))
    return rng.integers(-2 ** 11, 2 ** 11, shape)


# ---------------------------------------------------------------- .s4 / .u4
FOUR_BIT = {"s4": (-8, 8), "u4": (0, 16)}


@over_paths("shape,at,bt,satfinite", [(shape, at, bt, sat) for shape in ("m8n8k32", "m16n8k32", "m16n8k64")
                                      for at, bt in (("s4", "s4"), ("u4", "u4"), ("s4", "u4"), ("u4", "s4"))
                                      for sat in (False, True)], 3)
def test_mma_four_bit_integers(rng, shape, at, bt, satfinite, path):
    m, n, k = dims(shape)
    mats = [(rng.integers(*FOUR_BIT[at], (m, k)), rng.integers(*FOUR_BIT[bt], (k, n)), accumulators(rng, w, (m, n)))
            for w in range(NWARPS)]
    sat = ".satfinite" if satfinite else ""
    got = run_integer(f"mma.sync.aligned.{shape}.row.col{sat}.s32.{at}.{bt}.s32", shape, mats, 4, path)
    overflowed = False
    for (A, B, C), D in zip(mats, got):
        exact = A @ B + C
        overflowed |= bool((np.abs(exact) >= 2 ** 31).any())
        want = np.clip(exact, -2 ** 31, 2 ** 31 - 1) if satfinite else (exact + 2 ** 31) % 2 ** 32 - 2 ** 31
        assert np.array_equal(D, want.astype(np.int32))
    assert overflowed


# ---------------------------------------------------------------- .b1
@over_paths("shape,op", [(shape, op) for shape in ("m8n8k128", "m16n8k128", "m16n8k256") for op in ("xor", "and")], 2)
def test_mma_single_bit(rng, shape, op, path):
    """D = C + popc(row of A op column of B), wrapping in 32 bits (no .satfinite here)."""
    m, n, k = dims(shape)
    mats = [(rng.integers(0, 2, (m, k)), rng.integers(0, 2, (k, n)), accumulators(rng, w, (m, n)))
            for w in range(NWARPS)]
    got = run_integer(f"mma.sync.aligned.{shape}.row.col.s32.b1.b1.s32.{op}.popc", shape, mats, 1, path)
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


@over_paths("alayout,blayout,ct,dt", [(a, b, c, d)
                                      for a, b in (("row", "col"), ("row", "row"), ("col", "col"), ("col", "row"))
                                      for c, d in (("f32", "f32"), ("f16", "f16"), ("f16", "f32"), ("f32", "f16"))], 3)
def test_mma_m8n8k4_quad_pairs(rng, alayout, blayout, ct, dt, path):
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
    launch_on(path, mma_ptx(form, regs, None, ("b32", "b32", rtype[ct], rtype[dt]), path), (BLOCKS, 1, 1),
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


# ---------------------------------------------------------------- mma.sp: sparse A
# (shape, element bits) -> maps: "a" of the kept elements (row, column among the kept of the
# row), "b" of B, from "Matrix fragments for sparse mma"; the 16-bit m16n8k32, .tf32
# m16n8k16 and 8-bit m16n8k64 B are the ISA's figures (each register the next rows)
SPARSE = {
    ("m16n8k16", 16): {"a": (4, lambda g, t, i: (g if i < 2 else g + 8, 2 * t + (i & 1))),
                       "b": (4, lambda g, t, i: (t * 2 + (i & 1) + (8 if i >= 2 else 0), g))},
    ("m16n8k32", 16): {"a": (8, lambda g, t, i: (g if i in (0, 1, 4, 5) else g + 8, 2 * (t + 4 * (i >= 4)) + (i & 1))),
                       "b": (8, lambda g, t, i: (t * 2 + (i & 1) + 8 * (i >> 1), g))},
    ("m16n8k8", 32): {"a": (2, lambda g, t, i: (g if i == 0 else g + 8, t)),
                      "b": (2, lambda g, t, i: (t if i == 0 else t + 4, g))},
    ("m16n8k16", 32): {"a": (4, lambda g, t, i: (g if i in (0, 2) else g + 8, t if i < 2 else t + 4)),
                       "b": (4, lambda g, t, i: (t + 4 * i, g))},
    ("m16n8k32", 8): {"a": (8, lambda g, t, i: (g if i < 4 else g + 8, 4 * t + (i & 3))),
                      "b": (8, lambda g, t, i: (t * 4 + (i & 3) + (16 if i >= 4 else 0), g))},
    ("m16n8k64", 8): {"a": (16, lambda g, t, i: (g if i < 4 or 8 <= i < 12 else g + 8,
                                                 4 * t + (i & 3) + (16 if i >= 8 else 0))),
                      "b": (16, lambda g, t, i: (t * 4 + (i & 3) + 16 * (i >> 2), g))},
}
# the ISA's selector rule: one lane of a group of four holds the metadata (selector 0-3), a
# pair (0-1) or all four (0)
METADATA_LANES = {("m16n8k16", 16): 1, ("m16n8k32", 16): 2, ("m16n8k8", 32): 1, ("m16n8k16", 32): 2,
                  ("m16n8k32", 8): 2, ("m16n8k64", 8): 4}


def sparse_matrix(rng, m, k, bits, ordered):
    """(kept columns [m][k/2], metadata nibbles [m][chunks]): each chunk of four 16-bit units
    keeps two (2:4; .tf32, two units an element, 1:2), their 2-bit unit indices in a nibble,
    the first in the low bits; sorted when `ordered`."""
    units = 2 if bits == 32 else 1
    chunk = 4 // units
    columns, nibbles = np.zeros((m, k // 2), np.int64), np.zeros((m, k // chunk), np.int64)
    for r in range(m):
        for c in range(k // chunk):
            if units == 2:
                pos = [int(rng.integers(0, 2))]
                idx = [2 * pos[0], 2 * pos[0] + 1]                  # the element's two units
            else:
                pos = sorted(rng.choice(4, 2, replace=False)) if ordered else list(rng.choice(4, 2, replace=False))
                idx = pos
            nibbles[r, c] = idx[0] | idx[1] << 2
            columns[r, c * len(pos):(c + 1) * len(pos)] = [c * chunk + p for p in pos]
    return columns, nibbles


def metadata_words(rng, nibbles, shape, bits, selector):
    """Each lane's metadata: the lane that holds chunk c of rows g and g + 8 is
    4g + selector * lanes + c // 4, row g's nibble at bits 4 * (c % 4), row g + 8's 16 higher;
    the other lanes hold garbage, which must not matter."""
    lanes = METADATA_LANES[(shape, bits)]
    words = rng.integers(0, 2 ** 32, 32, dtype=np.uint64)
    for lane in range(32):
        j = (lane & 3) - selector * lanes
        if 0 <= j < lanes:
            words[lane] = 0
    for r in range(16):
        for c in range(nibbles.shape[1]):
            lane = 4 * (r % 8) + selector * lanes + c // 4
            words[lane] |= np.uint64(int(nibbles[r, c]) << (16 * (r // 8) + 4 * (c % 4)))
    return words.astype(np.uint32)


FLOAT_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8}
SPARSE_FORMS = [  # shape, a/b type, accumulator
    ("m16n8k16", "f16", "f32"), ("m16n8k16", "f16", "f16"), ("m16n8k32", "f16", "f32"), ("m16n8k32", "f16", "f16"),
    ("m16n8k16", "bf16", "f32"), ("m16n8k32", "bf16", "f32"), ("m16n8k8", "tf32", "f32"), ("m16n8k16", "tf32", "f32"),
    ("m16n8k32", "s8", "s32"), ("m16n8k32", "u8", "s32.satfinite"), ("m16n8k64", "s8", "s32.satfinite"),
    ("m16n8k64", "u8", "s32"),
    ("m16n8k64", "e4m3", "f32"), ("m16n8k64", "e5m2", "f32"),
]


def random_values(rng, t, shape):
    """(bit patterns, the numbers they stand for as f64 or int) of type t."""
    if t in ("s8", "u8"):
        v = rng.integers(*((-128, 128) if t == "s8" else (0, 256)), shape)
        return v & 0xFF, v
    if t == "f16":
        x = rng.standard_normal(shape).astype(np.float16)
        return x.view(np.uint16).astype(np.int64), x.astype(np.float64)
    if t == "bf16":
        bits = rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16
        return bits.astype(np.int64), (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if t == "tf32":
        x = rng.standard_normal(shape).astype(np.float32)
        return x.view(np.uint32).astype(np.int64), (x.view(np.uint32) & 0xFFFFE000).view(np.float32).astype(np.float64)
    from test_mma import float8
    bits = rng.integers(0, 256, shape)
    values = np.vectorize(lambda v: float8(v, t))(bits)
    while not np.isfinite(values).all():                       # finite values only
        bad = ~np.isfinite(values)
        bits[bad] = rng.integers(0, 256, int(bad.sum()))
        values = np.vectorize(lambda v: float8(v, t))(bits)
    return bits, values


@over_paths("shape,ab,acc,spelling", [(*form, spelling) for form in SPARSE_FORMS
                                      for spelling in ("mma.sp", "mma.sp::ordered_metadata")], 4)
def test_mma_sparse(rng, shape, ab, acc, spelling, path):
    """D = A * B + C with A 2:4 (.tf32 1:2) sparse: the kept elements where the metadata puts
    them, each selector the ISA allows for the shape, the other lanes' metadata garbage."""
    bits = FLOAT_BITS[ab]
    m, n, k = dims(shape)
    maps, lanes = SPARSE[(shape, bits)], METADATA_LANES[(shape, bits)]
    acc, _, sat = acc.partition(".")
    for selector in range(4 // lanes):
        mats = []
        for w in range(NWARPS):
            columns, nibbles = sparse_matrix(rng, m, k, bits, spelling.endswith("ordered_metadata"))
            kept, kept_values = random_values(rng, ab, (m, k // 2))
            b_bits, b_values = random_values(rng, ab, (k, n))
            if acc == "s32":
                C = accumulators(rng, w, (m, n))
            else:
                C = (rng.standard_normal((m, n)) * 4).astype(np.float16 if acc == "f16" else np.float32)
            mats.append((columns, nibbles, kept, kept_values, b_bits, b_values, C))
        a = np.concatenate([pack(lane_elements(mt[2], *maps["a"]), bits) for mt in mats])
        b = np.concatenate([pack(lane_elements(mt[4], *maps["b"]), bits) for mt in mats])
        c_frags = [lane_elements(mt[6], 4, _c16) for mt in mats]
        if acc == "f16":
            c = np.concatenate([np.ascontiguousarray(f.astype(np.float16)).view(np.uint32) for f in c_frags])
        else:
            c = np.concatenate([f.astype({"f32": np.float32, "s32": np.int32}[acc]) for f in c_frags])
        meta = np.concatenate([metadata_words(rng, mt[1], shape, bits, selector) for mt in mats]).reshape(-1, 1)
        nd = 2 if acc == "f16" else 4
        d = np.frombuffer(b"\xcd" * (NWARPS * 32 * nd * 4), np.uint32).reshape(NWARPS * 32, nd).copy()
        rtype = {"f16": "b32", "f32": "f32", "s32": "s32"}[acc]
        form = f"{spelling}.sync.aligned.{shape}.row.col{'.' + sat if sat else ''}.{acc}.{ab}.{ab}.{acc}"
        ptx = sparse_ptx(form, (a.shape[1], b.shape[1], c.shape[1], nd), rtype, selector, path)
        launch_on(path, ptx, (BLOCKS, 1, 1), (WARPS * 32, 1, 1), a, b, c, meta, d)
        for w, (columns, nibbles, kept, kept_values, b_bits, b_values, C) in enumerate(mats):
            frags = d[w * 32:(w + 1) * 32].view({"f16": np.float16, "f32": np.float32, "s32": np.int32}[acc])
            D = from_lanes(frags.reshape(32, 4), (m, n), _c16)
            if acc == "s32":
                exact = C.copy()
                for j in range(k // 2):
                    exact += kept_values[:, j:j + 1] * b_values[columns[:, j]]
                wrapped = (exact + 2 ** 31) % 2 ** 32 - 2 ** 31
                want = (np.clip(exact, -2 ** 31, 2 ** 31 - 1) if sat else wrapped).astype(np.int32)
            else:
                # the kept elements in metadata order, each product exact in f32, each sum rounded
                want = C.astype(np.float32)
                for j in range(k // 2):
                    want = (want + (kept_values[:, j:j + 1] * b_values[columns[:, j]]).astype(np.float32)).astype(
                        np.float32)
                want = want.astype(D.dtype)
                dense = np.zeros((m, k))
                for r in range(m):
                    dense[r, columns[r]] = kept_values[r]
                # (near the exact sum, within what rounding each partial sum may lose: terms of
                # e5m2 inputs reach 3e9, and their sum may cancel to far less)
                exact = dense @ b_values + C
                lost = (k // 2 + 1) * np.finfo(D.dtype).eps * (np.abs(dense) @ np.abs(b_values) + np.abs(C))
                assert (np.abs(D - exact) <= 1e-2 + 1e-2 * np.abs(exact) + lost).all()
            assert np.array_equal(D, want), (selector, w)


def sparse_ptx(form, regs, acc_type, selector, path):
    """A kernel like test_mma's with a fifth buffer of each thread's metadata word."""
    na, nb, nc, nd = regs
    lines = [f".reg .b32 %a<{na}>;", f".reg .b32 %b<{nb}>;", f".reg .{acc_type} %c<{nc}>;",
             f".reg .{acc_type} %d<{nd}>;", ".reg .b32 %e;", ".reg .b32 %r<8>;", ".reg .b64 %rd<12>;",
             "mov.u32 %r1, %tid.x;", "mov.u32 %r2, %ctaid.x;", "mov.u32 %r3, %ntid.x;",
             "mad.lo.u32 %r4, %r2, %r3, %r1;"]
    for i, (x, n) in enumerate((("a", na), ("b", nb), ("c", nc), ("e", 1), ("d", nd))):
        lines += [f"ld.param.u64 %rd{i}, [p{x}];", f"mul.wide.u32 %rd9, %r4, {n * 4};", f"add.u64 %rd{i}, %rd{i}, %rd9;"]
        if x in "abc":
            lines += [f"ld.global.{'b32' if x != 'c' else acc_type} %{x}{j}, [%rd{i}+{j * 4}];" for j in range(n)]
    lines.append("ld.global.b32 %e, [%rd3];")
    if path == "block program":
        lines.append("bar.sync 0;")
    vec = lambda x, n: "{" + ", ".join(f"%{x}{j}" for j in range(n)) + "}"    # noqa: E731
    lines.append(f"{form} {vec('d', nd)}, {vec('a', na)}, {vec('b', nb)}, {vec('c', nc)}, %e, {selector};")
    lines += [f"st.global.{acc_type} [%rd4+{j * 4}], %d{j};" for j in range(nd)]
    return (".visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pe, .param .u64 pd)\n{\n"
            + "\n".join(lines) + "\nret;\n}\n")
