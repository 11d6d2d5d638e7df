"""Warp matrix instructions (compiler/ops/matrix.py): mma.sync in each form anycuda lowers,
ldmatrix, stmatrix and movmatrix, on hand-written PTX whose lanes load their fragments from
buffers laid out by the ISA's fragment maps, written here from the ISA's formulas (not read
from the compiler's tables); and CUDA C with inline-asm mma.sync + ldmatrix compiled by nvcc.
Each test runs several warps in several blocks on fresh random matrices, outputs poisoned;
float products are checked bit for bit against the order and rounding matrix.py documents
(and against numpy's product within rounding), integers exactly. Each runs both ways a kernel
can: in the rounds, where these instructions are warp collectives, and in a block program
(compiler/vector/warpmatrix.py), which a barrier lets take the kernel (over_paths, PATHS).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.ops import table
from anycuda.compiler.vector import blockops, warpregions, warpruns
from anycuda.ptx import PtxError, parse
from anycuda.runtime.errors import CudaError, CUresult
from anycuda.runtime.program import load_program
from conformance import nvcc_module, ptx_launcher

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"
WARPS, BLOCKS = 2, 3                       # warps per block, blocks
THREADS = WARPS * 32 * BLOCKS


launch = ptx_launcher(HEADER, "test.ptx")
PATHS = ("rounds", "block program")


def over_paths(names: str, grid, block_programs: int):
    """pytest.mark.parametrize of `names` and `path`, the way a kernel of mma_ptx's runs:
    every case of `grid` (tuples, or values of one name) in the rounds, whose warp matrix
    instructions are collectives (ops/matrix.py), and `block_programs` of them, spread over
    the grid's values (_spread), in a block program too, which a barrier before the
    instruction lets it take (compiler/vector/warpmatrix.py). A few of each test's cases
    suffice there: a block program's product is the rounds' own function, warpmatrix.py only
    moves its operands, and each block program costs seconds of LLVM."""
    grid = [case if isinstance(case, tuple) else (case,) for case in grid]
    cases = [(*case, "rounds") for case in grid] + [(*case, "block program") for case in _spread(grid, block_programs)]
    return pytest.mark.parametrize(names + ",path", cases, ids=["-".join(map(_case_id, case)) for case in cases])


def _spread(grid, count) -> list:
    """`count` cases of `grid` that between them take as many values of each parameter as
    they can (chosen greedily, the first case first), in the grid's order."""
    seen, picked = set(), []
    for _ in range(min(count, len(grid))):
        best = max((i for i in range(len(grid)) if i not in picked),
                   key=lambda i: (len(set(enumerate(grid[i])) - seen), -i))
        picked.append(best)
        seen |= set(enumerate(grid[best]))
    return [grid[i] for i in sorted(picked)]


def _case_id(value) -> str:
    return "-".join(map(str, value)) if isinstance(value, tuple) else str(value)


def launch_on(path, ptx, *args):
    """launch(ptx, "k", ...) and a check that it ran the way `path` names."""
    prog = launch(ptx, "k", *args)
    block = tuple(args[1])
    assert (prog.kernel("k")._programs.get(block) is not None) == (path == "block program"), path


# ---------------------------------------------------------------- the ISA's fragment maps
# (matrix, element type class) -> (rows, cols, elements per register, registers,
# place(groupID, threadID_in_group, i) -> (row, col)), from "Matrix Fragments for mma.mMnNkK"
def _isa(shape, operand, kind):
    g_rows = {"m16n8k16": (16, 16, 8), "m16n8k8": (16, 8, 8), "m16n8k4": (16, 4, 8), "m16n8k32": (16, 32, 8),
              "m8n8k4": (8, 4, 8), "m8n8k16": (8, 16, 8)}[shape]
    m, k, n = g_rows
    if operand == "c":
        if m == 8:
            return m, n, 1, 2, lambda g, t, i: (g, t * 2 + i)
        per = 2 if kind == "f16" else 1
        return m, n, per, 4 // per, lambda g, t, i: (g if i < 2 else g + 8, t * 2 + (i & 1))
    maps = {
        ("m16n8k16", "a", "16"): (2, 4, lambda g, t, i: (g if i in (0, 1, 4, 5) else g + 8,
                                                         t * 2 + (i & 1) + (8 if i >= 4 else 0))),
        ("m16n8k16", "b", "16"): (2, 2, lambda g, t, i: (t * 2 + (i & 1) + (8 if i >= 2 else 0), g)),
        ("m16n8k8", "a", "16"): (2, 2, lambda g, t, i: (g if i < 2 else g + 8, t * 2 + (i & 1))),
        ("m16n8k8", "b", "16"): (2, 1, lambda g, t, i: (t * 2 + i, g)),
        ("m16n8k4", "a", "tf32"): (1, 2, lambda g, t, i: (g if i == 0 else g + 8, t)),
        ("m16n8k4", "b", "tf32"): (1, 1, lambda g, t, i: (t, g)),
        ("m16n8k8", "a", "tf32"): (1, 4, lambda g, t, i: (g if i in (0, 2) else g + 8, t if i < 2 else t + 4)),
        ("m16n8k8", "b", "tf32"): (1, 2, lambda g, t, i: (t if i == 0 else t + 4, g)),
        ("m8n8k4", "a", "f64"): (1, 1, lambda g, t, i: (g, t)),
        ("m8n8k4", "b", "f64"): (1, 1, lambda g, t, i: (t, g)),
        ("m16n8k4", "a", "f64"): (1, 2, lambda g, t, i: (g if i == 0 else g + 8, t)),
        ("m16n8k4", "b", "f64"): (1, 1, lambda g, t, i: (t, g)),
        ("m16n8k8", "a", "f64"): (1, 4, lambda g, t, i: (g if i in (0, 2) else g + 8, t if i < 2 else t + 4)),
        ("m16n8k8", "b", "f64"): (1, 2, lambda g, t, i: (t if i == 0 else t + 4, g)),
        # the ISA's "col = i * 2 + t for even i, i * 2 - 2 + t for odd i"
        ("m16n8k16", "a", "f64"): (1, 8, lambda g, t, i: (g if i % 2 == 0 else g + 8,
                                                         i * 2 + t if i % 2 == 0 else i * 2 - 2 + t)),
        ("m16n8k16", "b", "f64"): (1, 4, lambda g, t, i: (t + i * 4, g)),
        ("m8n8k16", "a", "8"): (4, 1, lambda g, t, i: (g, t * 4 + i)),
        ("m8n8k16", "b", "8"): (4, 1, lambda g, t, i: (t * 4 + i, g)),
        ("m16n8k16", "a", "8"): (4, 2, lambda g, t, i: (g if i < 4 else g + 8, t * 4 + (i & 3))),
        ("m16n8k16", "b", "8"): (4, 1, lambda g, t, i: (t * 4 + i, g)),
        ("m16n8k32", "a", "8"): (4, 4, lambda g, t, i: (g if i < 4 or 8 <= i < 12 else g + 8,
                                                        t * 4 + (i & 3) + (16 if i >= 8 else 0))),
        ("m16n8k32", "b", "8"): (4, 2, lambda g, t, i: (t * 4 + (i & 3) + (16 if i >= 4 else 0), g)),
    }
    per, regs, place = maps[(shape, operand, kind)]
    rows, cols = (m, k) if operand == "a" else (k, n)
    return rows, cols, per, regs, place


def to_fragments(mat, layout):
    """[lane][element] of matrix `mat` in `layout`."""
    rows, cols, per, regs, place = layout
    return np.array([[mat[place(l >> 2, l & 3, i)] for i in range(per * regs)] for l in range(32)], mat.dtype)


def from_fragments(frags, layout):
    rows, cols, per, regs, place = layout
    out = np.zeros((rows, cols), frags.dtype)
    for l in range(32):
        for i in range(per * regs):
            out[place(l >> 2, l & 3, i)] = frags[l, i]
    return out


# ---------------------------------------------------------------- the kernel
def mma_ptx(form, regs, dtype_bits, reg_types, path="rounds", lanes_on=32):
    """A kernel: each thread loads its A, B, C registers (words of regs[x] x bits, its
    thread's row of each buffer), runs `form` (in the lanes below `lanes_on` of each warp),
    stores its D registers; on the "block program" path with a barrier before `form`."""
    na, nb, nc, nd = regs
    ra, rb, rc, rd = reg_types
    body = []
    names = {}
    for x, n, t in (("a", na, ra), ("b", nb, rb), ("c", nc, rc), ("d", nd, rd)):
        names[x] = [f"%{x}{i}" for i in range(n)]
        body.append(f".reg .{t} %{x}<{n}>;")
    lines = ["mov.u32 %r1, %tid.x;", "mov.u32 %r2, %ctaid.x;", "mov.u32 %r3, %ntid.x;",
             "mad.lo.u32 %r4, %r2, %r3, %r1;"]
    for i, (x, p) in enumerate((("a", "pa"), ("b", "pb"), ("c", "pc"), ("d", "pd"))):
        n, t = regs[i], reg_types[i]
        size = 8 if t.endswith("64") else 4
        lines += [f"ld.param.u64 %rd{i}, [{p}];", f"mul.wide.u32 %rd9, %r4, {n * size};",
                  f"add.u64 %rd{i}, %rd{i}, %rd9;"]
        if x != "d":
            lines += [f"ld.global.{t} {names[x][j]}, [%rd{i}+{j * size}];" for j in range(n)]
    vec = lambda x: "{" + ", ".join(names[x]) + "}"    # noqa: E731
    if path == "block program":
        lines.append("bar.sync 0;")
    if lanes_on < 32:
        lines += ["and.b32 %r5, %r1, 31;", f"setp.lt.u32 %p1, %r5, {lanes_on};"]
        form = "@%p1 " + form
    lines.append(f"{form} {vec('d')}, {vec('a')}, {vec('b')}, {vec('c')};")
    lines += [f"st.global.{rd} [%rd3+{j * (8 if rd.endswith('64') else 4)}], {names['d'][j]};" for j in range(nd)]
    return (".visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)\n{\n"
            + "\n".join(body) + "\n.reg .b32 %r<8>;\n.reg .b64 %rd<10>;\n.reg .pred %p1;\n" + "\n".join(lines)
            + "\nret;\n}\n")


def run_mma(form, la, lb, lc, ld_, mats, word_dtypes, reg_types, path, lanes_on=32):
    """Run `form` for each warp's (A, B, C) in `mats` the way `path` names (in its lanes below
    `lanes_on`); [(D fragments of each warp)]."""
    def words(frags, dt):
        return np.ascontiguousarray(frags).view(dt).reshape(32, -1)
    bufs = []
    for which, layout, dt in ((0, la, word_dtypes[0]), (1, lb, word_dtypes[1]), (2, lc, word_dtypes[2])):
        bufs.append(np.concatenate([words(to_fragments(m[which], layout), dt) for m in mats]))
    nd = ld_[3]
    d = np.frombuffer(b"\xcd" * (len(mats) * 32 * nd * np.dtype(word_dtypes[3]).itemsize),
                      word_dtypes[3]).reshape(len(mats) * 32, nd).copy()
    regs = (bufs[0].shape[1], bufs[1].shape[1], bufs[2].shape[1], nd)
    launch_on(path, mma_ptx(form, regs, None, reg_types, path, lanes_on), (BLOCKS, 1, 1), (WARPS * 32, 1, 1),
              *bufs, d)
    return [d[w * 32:(w + 1) * 32] for w in range(len(mats))]


def sequential(A, B, C, dtype=np.float32):
    """C + sum over k of A[:, k] * B[k, :], in k order, rounding each addition to `dtype`."""
    acc = C.astype(dtype)
    for k in range(A.shape[1]):
        acc = (acc + np.outer(A[:, k].astype(dtype), B[k, :].astype(dtype)).astype(dtype)).astype(dtype)
    return acc


def bf16(rng, shape):
    bits = (rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return bits


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


FLOAT_FORMS = [
    # (shape, a/b type, ctype, dtype)
    ("m16n8k16", "f16", "f32", "f32"), ("m16n8k16", "f16", "f16", "f16"), ("m16n8k16", "f16", "f32", "f16"),
    ("m16n8k16", "f16", "f16", "f32"), ("m16n8k8", "f16", "f32", "f32"), ("m16n8k8", "f16", "f16", "f16"),
    ("m16n8k16", "bf16", "f32", "f32"), ("m16n8k8", "bf16", "f32", "f32"),
]


@over_paths("shape,ab,ct,dt", FLOAT_FORMS, 4)
def test_mma_half_forms(rng, shape, ab, ct, dt, path):
    m, n, k = {"m16n8k16": (16, 8, 16), "m16n8k8": (16, 8, 8)}[shape]
    mats = []
    for _ in range(WARPS * BLOCKS):
        if ab == "f16":
            A, B = (rng.standard_normal(s).astype(np.float16) for s in ((m, k), (k, n)))
            Av, Bv = A, B
        else:
            A, B = bf16(rng, (m, k)), bf16(rng, (k, n))
            Av, Bv = bf16_value(A), bf16_value(B)
        C = (rng.standard_normal((m, n)) * 4).astype(np.float16 if ct == "f16" else np.float32)
        mats.append((A, B, C, Av, Bv))
    la, lb = _isa(shape, "a", "16"), _isa(shape, "b", "16")
    lc, ld_ = _isa(shape, "c", ct), _isa(shape, "c", dt)
    form = f"mma.sync.aligned.{shape}.row.col.{dt}.{ab}.{ab}.{ct}"
    word = lambda t: np.uint32 if t in ("f16", "bf16") else np.float32    # noqa: E731
    got = run_mma(form, la, lb, lc, ld_, mats, (np.uint32, np.uint32, word(ct), word(dt)),
                  ("b32", "b32", "b32" if ct == "f16" else "f32", "b32" if dt == "f16" else "f32"), path)
    for (A, B, C, Av, Bv), frags in zip(mats, got):
        frags = frags.view(np.float16 if dt == "f16" else np.float32).reshape(32, -1)
        D = from_fragments(frags, ld_)
        ref = sequential(Av, Bv, C)
        if dt == "f16":
            ref = ref.astype(np.float16)
        assert np.array_equal(D, ref)
        exact = Av.astype(np.float64) @ Bv.astype(np.float64) + C
        assert np.allclose(D, exact, rtol=1e-2 if dt == "f16" else 1e-5, atol=1e-2 if dt == "f16" else 1e-4)


@pytest.mark.parametrize("path", PATHS)
def test_mma_under_a_guard(rng, path):
    """Lanes 20-31 of each warp do not run it (a GPU leaves that undefined): both ways take
    their fragments as zeros, and the lanes that ran it get that product."""
    la, lb, lc = _isa("m16n8k16", "a", "16"), _isa("m16n8k16", "b", "16"), _isa("m16n8k16", "c", "f32")
    mats = [(rng.standard_normal((16, 16)).astype(np.float16), rng.standard_normal((16, 8)).astype(np.float16),
             rng.standard_normal((16, 8)).astype(np.float32)) for _ in range(WARPS * BLOCKS)]
    got = run_mma("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", la, lb, lc, lc, mats,
                  (np.uint32, np.uint32, np.float32, np.float32), ("b32", "b32", "f32", "f32"), path, lanes_on=20)

    def without_idle_lanes(mat, layout):
        frags = to_fragments(mat, layout)
        frags[20:] = 0
        return from_fragments(frags, layout)
    for (A, B, C), frags in zip(mats, got):
        want = to_fragments(sequential(without_idle_lanes(A, la), without_idle_lanes(B, lb), without_idle_lanes(C, lc)),
                            lc)
        assert np.array_equal(frags[:20], want[:20])


@over_paths("shape", ["m16n8k4", "m16n8k8"], 2)
def test_mma_tf32(rng, shape, path):
    m, n, k = 16, 8, int(shape.split("k")[1])
    mats = [(rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32),
             rng.standard_normal((m, n)).astype(np.float32)) for _ in range(WARPS * BLOCKS)]
    la, lb, lc = _isa(shape, "a", "tf32"), _isa(shape, "b", "tf32"), _isa(shape, "c", "f32")
    got = run_mma(f"mma.sync.aligned.{shape}.row.col.f32.tf32.tf32.f32", la, lb, lc, lc, mats,
                  (np.float32,) * 4, ("b32", "b32", "f32", "f32"), path)
    tf32 = lambda x: (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)   # noqa: E731
    for (A, B, C), frags in zip(mats, got):
        D = from_fragments(frags, lc)
        assert np.array_equal(D, sequential(tf32(A), tf32(B), C))
        assert not np.array_equal(D, sequential(A, B, C))        # the low bits were dropped


def float8(byte, etype):
    """The value of an 8-bit float (the ISA's e4m3: bias 7, 3 mantissa bits, no infinities,
    S.1111.111 NaN; e5m2: bias 15, 2 mantissa bits, exponent 31 infinities and NaNs)."""
    byte = int(byte)
    mbits, bias = (3, 7) if etype == "e4m3" else (2, 15)
    e, m = (byte & 0x7F) >> mbits, byte & ((1 << mbits) - 1)
    if (etype == "e4m3" and byte & 0x7F == 0x7F) or (etype == "e5m2" and e == 31):
        return float("nan")
    mag = m * 2.0 ** (1 - bias - mbits) if e == 0 else (1 + m / 2 ** mbits) * 2.0 ** (e - bias)
    return -mag if byte & 0x80 else mag


@over_paths("at,bt,acc,shape", [(at, bt, acc, shape)
                                 for at, bt in (("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2"))
                                 for acc in ("f32", "f16") for shape in ("m16n8k32", "m16n8k16")], 3)
def test_mma_float8(rng, at, bt, acc, shape, path):
    def draw(etype, shape):
        # f16 sums stay in f16's range with small elements
        limit = 4 if acc == "f16" else np.inf
        finite = [v for v in range(256) if abs(float8(v, etype)) <= limit]
        return rng.choice(finite, shape).astype(np.uint8)
    k = int(shape.split("k")[1])
    mats = [(draw(at, (16, k)), draw(bt, (k, 8)),
             rng.standard_normal((16, 8)).astype(np.float16 if acc == "f16" else np.float32))
            for _ in range(WARPS * BLOCKS)]
    la, lb, lc = _isa(shape, "a", "8"), _isa(shape, "b", "8"), _isa(shape, "c", acc)
    word = np.uint32 if acc == "f16" else np.float32
    got = run_mma(f"mma.sync.aligned.{shape}.row.col.{acc}.{at}.{bt}.{acc}", la, lb, lc, lc, mats,
                  (np.uint32, np.uint32, word, word), ("b32", "b32") + ("b32" if acc == "f16" else "f32",) * 2, path)
    decode = np.vectorize(float8)
    for (A, B, C), frags in zip(mats, got):
        D = from_fragments(frags.view(np.float16 if acc == "f16" else np.float32).reshape(32, -1), lc)
        ref = sequential(decode(A, at).astype(np.float32), decode(B, bt).astype(np.float32), C)
        assert np.array_equal(D, ref.astype(D.dtype))


@pytest.mark.parametrize("path", PATHS)
def test_cvt_rna_tf32(rng, path):
    """cvt.rna.tf32.f32 (nvcc's __float_to_tf32): to nearest, ties away from zero, low 13
    bits cleared; infinities stay, NaNs become 0x7FFFFFFF, the largest finite values round
    to infinity. (A barrier before it lets a block program take the kernel.)"""
    ptx = """
.visible .entry k(.param .u64 pin, .param .u64 pout)
{
.reg .b32 %r<4>; .reg .f32 %f1; .reg .b64 %rd<5>;
ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout];
mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x; mad.lo.u32 %r1, %r1, %r2, %r3;
mul.wide.u32 %rd3, %r1, 4; add.u64 %rd1, %rd1, %rd3; add.u64 %rd2, %rd2, %rd3;
ld.global.f32 %f1, [%rd1];
BAR
cvt.rna.tf32.f32 %r1, %f1;
st.global.b32 [%rd2], %r1;
ret;
}
"""
    special = np.array([0x00001000, 0x00000FFF, 0x3F801000, 0xBF801000, 0x3F802FFF, 0x7F7FF000, 0xFF7FFFFF,
                        0x7F800000, 0xFF800000, 0x7FC00001, 0xFF800001, 0x00000000, 0x80000000], np.uint32)
    bits = np.concatenate([special, rng.integers(0, 2 ** 32, 256 - len(special), dtype=np.uint64).astype(np.uint32)])
    out = np.full(256, 0xCDCDCDCD, np.uint32)
    launch_on(path, ptx.replace("BAR", "bar.sync 0;" if path == "block program" else ""), (2, 1, 1), (128, 1, 1),
              bits, out)
    for x, y in zip(bits, out):
        x = int(x)
        if x & 0x7F800000 == 0x7F800000:
            want = 0x7FFFFFFF if x & 0x7FFFFF else x
        else:
            sign, mag = x & 0x80000000, x & 0x7FFFFFFF
            want = sign | ((mag + 0x1000) & 0x7FFFE000)        # half a unit up on the magnitude: ties away
        assert int(y) == want, hex(x)


@over_paths("shape", ["m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16"], 2)
def test_mma_f64(rng, shape, path):
    m, k = int(shape[1:].split("n")[0]), int(shape.split("k")[1])
    mats = [(rng.standard_normal((m, k)), rng.standard_normal((k, 8)), rng.standard_normal((m, 8)))
            for _ in range(WARPS * BLOCKS)]
    la, lb, lc = _isa(shape, "a", "f64"), _isa(shape, "b", "f64"), _isa(shape, "c", "f64")
    got = run_mma(f"mma.sync.aligned.{shape}.row.col.f64.f64.f64.f64", la, lb, lc, lc, mats,
                  (np.float64,) * 4, ("f64",) * 4, path)
    for (A, B, C), frags in zip(mats, got):
        ref = np.zeros((m, 8))
        for r in range(m):
            for c in range(8):
                acc = C[r, c]
                for j in range(k):     # a fused multiply-add per k, rounded once
                    acc = float(Fraction(A[r, j]) * Fraction(B[j, c]) + Fraction(acc))
                ref[r, c] = acc
        assert np.array_equal(from_fragments(frags, lc), ref)


@over_paths("shape,at,bt,satfinite", [(shape, at, bt, sat) for shape in ("m8n8k16", "m16n8k16", "m16n8k32")
                                      for at, bt in (("s8", "s8"), ("u8", "u8"), ("s8", "u8"), ("u8", "s8"))
                                      for sat in (False, True)], 3)
def test_mma_integers(rng, shape, at, bt, satfinite, path):
    m, k = int(shape[1:].split("n")[0]), int(shape.split("k")[1])
    dt = lambda t: np.int8 if t == "s8" else np.uint8         # noqa: E731
    mats = []
    for w in range(WARPS * BLOCKS):
        A = rng.integers(np.iinfo(dt(at)).min, np.iinfo(dt(at)).max + 1, (m, k)).astype(dt(at))
        B = rng.integers(np.iinfo(dt(bt)).min, np.iinfo(dt(bt)).max + 1, (k, 8)).astype(dt(bt))
        # accumulators near the s32 limits in some warps, so that sums overflow there
        edge = 2 ** 31 - 2 ** 12 if w % 2 else 0
        C = (rng.integers(-2 ** 11, 2 ** 11, (m, 8)) + edge * rng.choice([-1, 1], (m, 8))).astype(np.int32)
        mats.append((A, B, C))
    la, lb, lc = _isa(shape, "a", "8"), _isa(shape, "b", "8"), _isa(shape, "c", "s32")
    sat = ".satfinite" if satfinite else ""
    got = run_mma(f"mma.sync.aligned.{shape}.row.col{sat}.s32.{at}.{bt}.s32", la, lb, lc, lc, mats,
                  (np.uint32, np.uint32, np.int32, np.int32), ("b32", "b32", "s32", "s32"), path)
    overflowed = False
    for (A, B, C), frags in zip(mats, got):
        exact = A.astype(np.int64) @ B.astype(np.int64) + C
        overflowed |= bool((np.abs(exact) >= 2 ** 31).any())
        ref = np.clip(exact, -2 ** 31, 2 ** 31 - 1) if satfinite else exact.astype(np.int32)
        assert np.array_equal(from_fragments(frags, lc), ref.astype(np.int32))
    assert overflowed


# ---------------------------------------------------------------- ldmatrix, stmatrix, movmatrix
LDMATRIX_PTX = """
.visible .entry k(.param .u64 pm, .param .u64 prow, .param .u64 pout)
{
.reg .b32 %r<16>; .reg .b64 %rd<12>; .reg .pred %p;
.shared .align 16 .b8 tile[2048];
mov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x;
mad.lo.u32 %r3, %r2, 64, %r1;
// 64 threads copy 2048 bytes of this block's rows into shared memory
ld.param.u64 %rd1, [pm];
mul.wide.u32 %rd2, %r2, 2048; add.u64 %rd1, %rd1, %rd2;
mul.wide.u32 %rd2, %r1, 32; add.u64 %rd3, %rd1, %rd2;
mov.u64 %rd4, tile; cvt.u64.u32 %rd5, %r1; mul.lo.u64 %rd5, %rd5, 32; add.u64 %rd4, %rd4, %rd5;
ld.global.v4.b32 {%r4, %r5, %r6, %r7}, [%rd3]; st.shared.v4.b32 [%rd4], {%r4, %r5, %r6, %r7};
ld.global.v4.b32 {%r4, %r5, %r6, %r7}, [%rd3+16]; st.shared.v4.b32 [%rd4+16], {%r4, %r5, %r6, %r7};
bar.sync 0;
// this lane's row: a row index (of 128 rows of 16 bytes) from prow
ld.param.u64 %rd6, [prow]; mul.wide.u32 %rd7, %r3, 4; add.u64 %rd6, %rd6, %rd7;
ld.global.u32 %r8, [%rd6];
mov.u64 %rd8, tile; mul.wide.u32 %rd9, %r8, 16; add.u64 %rd8, %rd8, %rd9;
mov.b32 %r10, 0xCDCDCDCD; mov.b32 %r11, 0xCDCDCDCD; mov.b32 %r12, 0xCDCDCDCD; mov.b32 %r13, 0xCDCDCDCD;
LDM
ld.param.u64 %rd10, [pout]; mul.wide.u32 %rd11, %r3, 16; add.u64 %rd10, %rd10, %rd11;
st.global.v4.b32 [%rd10], {%r10, %r11, %r12, %r13};
ret;
}
"""


def run_ldmatrix(rng, count, trans, space, path, monkeypatch, lanes_on=32):
    """ldmatrix.xN from rows of shared memory that random lanes name, in lanes `lanes_on` and
    up of each warp not run (a guard), checked against the ISA's layout: the rows of lanes
    that do not run it read as zeros, and those lanes' registers keep their values."""
    if path == "rounds":
        monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")
    blocks = 2
    tiles = rng.integers(0, 2 ** 16, (blocks, 128, 8)).astype(np.uint16)     # 128 rows of 8 b16 per block
    rows = np.concatenate([rng.permutation(128)[:64] for _ in range(blocks)]).astype(np.uint32)
    out = np.full((blocks * 64, 4), 0xCDCDCDCD, np.uint32)
    regs = ", ".join(f"%r{10 + i}" for i in range(count))
    ldm = (f"ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}"
           f"{'.shared' if space == 'shared' else ''}.b16 {{{regs}}}, [%rd8];")
    if lanes_on < 32:
        ldm = f"and.b32 %r9, %r1, 31;\nsetp.lt.u32 %p, %r9, {lanes_on};\n@%p " + ldm
    if space == "generic":
        ldm = "cvta.shared.u64 %rd8, %rd8;\n" + ldm
    launch_on(path, LDMATRIX_PTX.replace("LDM", ldm), (blocks, 1, 1), (64, 1, 1), tiles, rows, out)
    for t in range(blocks * 64):
        blk, lane, warp0 = t // 64, t % 32, t // 32 * 32
        g, tig = lane >> 2, lane & 3
        if lane >= lanes_on:
            assert (out[t] == 0xCDCDCDCD).all()
            continue
        for m in range(count):
            mat = tiles[blk][rows[warp0 + 8 * m: warp0 + 8 * m + 8]]       # matrix m: rows from lanes 8m..8m+7
            mat[max(lanes_on - 8 * m, 0):] = 0
            if trans:
                mat = mat.T
            want = int(mat[g, 2 * tig]) | int(mat[g, 2 * tig + 1]) << 16
            assert out[t, m] == want, (t, m)
        assert (out[t, count:] == 0xCDCDCDCD).all()


@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("space", ["shared", "generic"])
@pytest.mark.parametrize("path", PATHS)
def test_ldmatrix(rng, count, trans, space, path, monkeypatch):
    run_ldmatrix(rng, count, trans, space, path, monkeypatch)


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("path", PATHS)
def test_ldmatrix_under_a_guard(rng, trans, path, monkeypatch):
    """Lanes 20-31 of each warp do not run it: the two ways agree (a GPU leaves this undefined)."""
    run_ldmatrix(rng, 4, trans, "shared", path, monkeypatch, lanes_on=20)


@pytest.mark.parametrize("path", PATHS)
def test_stmatrix_and_movmatrix(rng, path, monkeypatch):
    """stmatrix.x4 (and .trans) writes what ldmatrix.x4 reads; movmatrix transposes."""
    if path == "rounds":
        monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")
    ptx = """
.visible .entry k(.param .u64 pin, .param .u64 pout, .param .u64 pmov)
{
.reg .b32 %r<20>; .reg .b64 %rd<12>;
.shared .align 16 .b8 tile[1024];
mov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x; mad.lo.u32 %r3, %r2, 32, %r1;
ld.param.u64 %rd1, [pin]; mul.wide.u32 %rd2, %r3, 16; add.u64 %rd1, %rd1, %rd2;
ld.global.v4.b32 {%r4, %r5, %r6, %r7}, [%rd1];
mov.u64 %rd3, tile; mul.wide.u32 %rd4, %r1, 16; add.u64 %rd3, %rd3, %rd4;
stmatrix.sync.aligned.m8n8.x4.shared.b16 [%rd3], {%r4, %r5, %r6, %r7};
add.u64 %rd5, %rd3, 512;
stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%rd5], {%r4, %r5, %r6, %r7};
bar.sync 0;
mov.u64 %rd6, tile; mul.wide.u32 %rd7, %r1, 16; add.u64 %rd6, %rd6, %rd7;
ld.shared.v4.b32 {%r8, %r9, %r10, %r11}, [%rd6];
ld.shared.v4.b32 {%r12, %r13, %r14, %r15}, [%rd6+512];
ld.param.u64 %rd8, [pout]; mul.wide.u32 %rd9, %r3, 32; add.u64 %rd8, %rd8, %rd9;
st.global.v4.b32 [%rd8], {%r8, %r9, %r10, %r11};
st.global.v4.b32 [%rd8+16], {%r12, %r13, %r14, %r15};
movmatrix.sync.aligned.m8n8.trans.b16 %r16, %r4;
ld.param.u64 %rd10, [pmov]; mul.wide.u32 %rd11, %r3, 4; add.u64 %rd10, %rd10, %rd11;
st.global.b32 [%rd10], %r16;
ret;
}
"""
    blocks = 3
    frags = rng.integers(0, 2 ** 32, (blocks * 32, 4), dtype=np.uint64).astype(np.uint32)
    out = np.full((blocks * 32, 8), 0xCDCDCDCD, np.uint32)
    moved = np.full(blocks * 32, 0xCDCDCDCD, np.uint32)
    launch_on(path, ptx, (blocks, 1, 1), (32, 1, 1), frags, out, moved)
    place = lambda lane, j: (lane >> 2, 2 * (lane & 3) + j)   # noqa: E731 - the ISA's ldmatrix layout
    for blk in range(blocks):
        f = frags[blk * 32:(blk + 1) * 32]
        mats = np.zeros((4, 8, 8), np.uint16)
        for lane in range(32):
            for m in range(4):
                for j in range(2):
                    mats[m][place(lane, j)] = (int(f[lane, m]) >> (16 * j)) & 0xFFFF
        # lane l gave the address of row l % 8 of matrix l // 8: 16-byte rows, in order
        plain = out[blk * 32:(blk + 1) * 32, :4].copy().view(np.uint16).reshape(4, 8, 8)
        trans = out[blk * 32:(blk + 1) * 32, 4:].copy().view(np.uint16).reshape(4, 8, 8)
        assert np.array_equal(plain, mats)
        assert np.array_equal(trans, mats.transpose(0, 2, 1))
        mv = moved[blk * 32:(blk + 1) * 32]
        for lane in range(32):
            for j in range(2):
                r, c = place(lane, j)
                assert (int(mv[lane]) >> (16 * j)) & 0xFFFF == mats[0][c, r]


# ---------------------------------------------------------------- refusals and paths
@pytest.mark.parametrize("text,words", [
    ("mma.sync.aligned.m8n8k4.row.col.f32.bf16.bf16.f32 {%f1,%f2,%f3,%f4,%f5,%f6,%f7,%f8}, {%r1,%r2}, {%r3,%r4}, "
     "{%f1,%f2,%f3,%f4,%f5,%f6,%f7,%f8};", ("mma", "m8n8k4", "bf16")),
    ("mma.sync.aligned.m16n8k32.col.row.s32.s8.s8.s32 {%r1,%r2,%r3,%r4}, {%r5,%r6,%r7,%r8}, {%r9,%r10}, "
     "{%r1,%r2,%r3,%r4};", ("mma", "m16n8k32", ".row.col")),
    ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e3m2.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, "
     "{%r5,%r6}, {%f1,%f2,%f3,%f4};",
     ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e3m2.f32", "kind::f8f6f4")),
    ("mma.sync.aligned.m16n8k8.row.col.f32.e4m3.e4m3.f32 {%f1,%f2,%f3,%f4}, {%r1}, {%r5}, "
     "{%f1,%f2,%f3,%f4};", ("mma", "m16n8k8", "e4m3")),
    ("mma.sync.aligned.m16n8k16.row.col.f16.bf16.bf16.f16 {%r1,%r2}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%r1,%r2};",
     ("mma", "bf16", "f16")),
    ("mma.sync.aligned.m8n8k32.row.col.s32.s4.s8.s32 {%r1,%r2}, {%r3}, {%r4}, {%r1,%r2};", ("mma", ".s4 with .s8")),
    ("mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32 {%r1,%r2}, {%r3}, {%r4}, {%r1,%r2};",
     ("mma", "m8n8k128", ".xor.popc or .and.popc")),
    ("mma.sync.aligned.m8n8k128.row.col.satfinite.s32.b1.b1.s32.xor.popc {%r1,%r2}, {%r3}, {%r4}, {%r1,%r2};",
     ("mma", ".satfinite with .b1")),
    ("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32.xor.popc {%r1,%r2}, {%r3}, {%r4}, {%r1,%r2};",
     ("mma", ".xor with .s8")),
    ("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, "
     "{%r5,%r6,%r7,%r8}, {%f1,%f2,%f3,%f4}, %r9, 2;", ("mma.sp", "selector of 0 to 1")),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2}, "
     "{%r5,%r6}, {%f1,%f2,%f3,%f4}, %r9, %r10;", ("mma", "sp::ordered_metadata", "immediate sparsity selector")),
    ("mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f16 {%f1,%f2,%f3,%f4}, {%r1,%r2}, "
     "{%r5,%r6}, {%r1,%r2}, %r9, 0;", ("mma.sp", ".dtype equal to .ctype")),
    ("mma.sp.sync.aligned.m16n8k128.row.col.s32.s4.s4.s32 {%r1,%r2,%r3,%r4}, {%r5,%r6,%r7,%r8}, "
     "{%r9,%r10,%r11,%r12}, {%r1,%r2,%r3,%r4}, %r13, 0;", ("mma.sp", "m16n8k128", "s4")),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e3m2.e3m2.f32 {%f1,%f2,%f3,%f4}, "
     "{%r1,%r2,%r3,%r4}, {%r5,%r6,%r7,%r8}, {%f1,%f2,%f3,%f4}, %r9, 0;", ("mma", "kind::f8f6f4")),
    ("ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%r1,%r2}, [%rd1];",
     ("ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8", "m16n16")),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1,%f2,%f3,%f4}, %rd1, %rd2, 1, 1, 1, 1, 1;",
     ("wgmma.mma_async",)),
    ("tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, 1;", ("tcgen05.mma",)),
    ("wmma.load.a.sync.aligned.col.m8n8k32.s4 {%r1}, [%rd1], 8;", ("wmma.load", "m8n8k32", ".row only")),
    ("wmma.load.b.sync.aligned.row.m8n8k128.b1 {%r1}, [%rd1], 128;", ("wmma.load", "m8n8k128", ".col only")),
])
def test_refused_forms_are_named(text, words):
    ptx = (".visible .entry k()\n{\n.reg .b32 %r<20>; .reg .f32 %f<20>; .reg .b64 %rd<4>;\n"
           + text + "\nret;\n}\n")
    with pytest.raises((PtxError, CudaError)) as e:
        prog = load_program(HEADER.replace("sm_80", "sm_100a").replace("8.0", "8.7") + ptx, "test.ptx")
        prog.kernel("k").launch((1, 1, 1), (32, 1, 1), b"", 0)
    message = str(e.value)
    assert all(w in message for w in words), message
    assert any(w in message for w in ("not supported", "takes", "needs", "not a form of the PTX ISA")), message


def test_which_vector_paths_take_matrix_instructions():
    """Warp runs and warp regions take no matrix instruction (a warp there leaves it to the
    scalar step function, a collective of the rounds); block programs take every one
    (compiler/vector/warpmatrix.py), but not in the forms of sub-byte elements (checked when
    the program is made) or `.shared::cta` spellings."""
    for opcode in ("mma", "mma.sp", "wmma.mma", "wmma.load", "wmma.store", "ldmatrix", "stmatrix", "movmatrix"):
        assert opcode in table.HANDLERS
        for allowed in (warpruns.VECTOR_MODS, warpregions.TAKES):
            assert opcode not in allowed
        assert opcode in blockops.TAKES and "shared::cta" not in blockops.TAKES[opcode]
    inst = next(st for st in parse(HEADER + ".visible .entry k()\n{\n.reg .b32 %r<9>;\n.reg .f32 %f<9>;\n"
                                   "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, "
                                   "{%r1,%r2}, {%r3}, {%f1,%f2,%f3,%f4};\nret;\n}\n").functions[0].body
                if getattr(st, "opcode", None) == "mma")
    assert table.takes(blockops.TAKES, inst) and not table.takes(warpregions.TAKES, inst)


# ---------------------------------------------------------------- CUDA C: inline-asm mma.sync + ldmatrix
MMA_CUDA = r"""
#include <cuda_fp16.h>
// C[64 x 64] = A[64 x K] * B[K x 64] (A row-major, B column-major, f16; C f32): each warp of a
// block of 4 computes a 16 x 32 tile as four m16n8k16 products per k step, A fragments by
// ldmatrix.x4 from shared memory, B by ldmatrix.x2.
extern "C" __global__ void gemm(const half *A, const half *Bt, float *C, int K) {
    __shared__ __align__(16) half sa[64][16];
    __shared__ __align__(16) half sb[64][16];     // B's columns as rows (Bt is B transposed)
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
    int wr = (warp / 2) * 32, wc = (warp % 2) * 32;   // this warp's 32 x 32 quarter: two 16-row halves
    float acc[2][4][4] = {};
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) {
            sa[i / 16][i % 16] = A[(row0 + i / 16) * K + k0 + i % 16];
            sb[i / 16][i % 16] = Bt[(col0 + i / 16) * K + k0 + i % 16];
        }
        __syncthreads();
        for (int h = 0; h < 2; ++h) {
            unsigned a[4];
            // lanes 0-15 give rows 0-15 at column 0, lanes 16-31 the same rows at column 8
            unsigned pa = (unsigned)__cvta_generic_to_shared(&sa[wr + h * 16 + lane % 16][(lane / 16) * 8]);
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                         : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(pa));
            for (int n = 0; n < 4; ++n) {
                unsigned b[2];
                unsigned pb = (unsigned)__cvta_generic_to_shared(&sb[wc + n * 8 + lane % 8][((lane / 8) % 2) * 8]);
                asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
                             : "=r"(b[0]), "=r"(b[1]) : "r"(pb));
                float *c = acc[h][n];
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                             "{%8,%9}, {%0,%1,%2,%3};"
                             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
            }
        }
        __syncthreads();
    }
    int g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; ++h)
        for (int n = 0; n < 4; ++n)
            for (int i = 0; i < 4; ++i) {
                int r = row0 + wr + h * 16 + g + (i >= 2 ? 8 : 0), c = col0 + wc + n * 8 + t * 2 + (i & 1);
                C[r * 64 * gridDim.x + c] = acc[h][n][i];
            }
}
"""


def test_cuda_inline_mma_and_ldmatrix_gemm(rng):
    mod = nvcc_module(MMA_CUDA, name="mma_gemm.cu")
    M, N, K = 128, 128, 64
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    out = ac.asarray(np.full((M, N), np.nan, np.float32))
    mod.get_function("gemm")((N // 64, M // 64), (128,), (ac.asarray(A), ac.asarray(np.ascontiguousarray(B.T)),
                                                          out, np.int32(K)))
    got = out.get()
    # each 16-wide k step is one mma (a sum in k order); steps accumulate in order
    ref = np.zeros((M, N), np.float32)
    for k0 in range(0, K, 16):
        ref = sequential(A[:, k0:k0 + 16], B[k0:k0 + 16], ref)
    assert np.array_equal(got, ref)
    assert np.allclose(got, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-4, atol=1e-3)


MIXED_CUDA = r"""
#include <cuda_fp16.h>
// Each warp: D = A * B (m16n8k16, its own A and B), then the sum of its D by a butterfly of
// shuffles, so that the warp collectives the vector paths take meet the matrix ones.
extern "C" __global__ void mma_then_reduce(const unsigned *a, const unsigned *b, float *d, float *sums) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float c[4] = {0.f, 0.f, 0.f, 0.f};
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[4 * t]), "r"(a[4 * t + 1]), "r"(a[4 * t + 2]), "r"(a[4 * t + 3]),
                   "r"(b[2 * t]), "r"(b[2 * t + 1]));
    for (int i = 0; i < 4; ++i) d[4 * t + i] = c[i];
    float s = (c[0] + c[1]) + (c[2] + c[3]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    if (threadIdx.x % 32 == 0) sums[t / 32] = s;
}
"""


def test_matrix_and_shuffle_collectives_in_one_kernel(rng):
    mod = nvcc_module(MIXED_CUDA, "mma_shfl.cu")
    warps = 6
    la, lb, lc = _isa("m16n8k16", "a", "16"), _isa("m16n8k16", "b", "16"), _isa("m16n8k16", "c", "f32")
    mats = [(rng.standard_normal((16, 16)).astype(np.float16), rng.standard_normal((16, 8)).astype(np.float16))
            for _ in range(warps)]
    a = np.concatenate([to_fragments(A, la).view(np.uint32).reshape(32, -1) for A, _ in mats])
    b = np.concatenate([to_fragments(B, lb).view(np.uint32).reshape(32, -1) for _, B in mats])
    d = ac.asarray(np.full((warps * 32, 4), np.nan, np.float32))
    sums = ac.asarray(np.full(warps, np.nan, np.float32))
    mod.get_function("mma_then_reduce")((3,), (64,), (ac.asarray(a), ac.asarray(b), d, sums))
    got = d.get()
    for w, (A, B) in enumerate(mats):
        D = from_fragments(got[w * 32:(w + 1) * 32], lc)
        assert np.array_equal(D, sequential(A, B, np.zeros((16, 8), np.float32)))
        lane_sums = [np.float32((got[w * 32 + l, 0] + got[w * 32 + l, 1]) + (got[w * 32 + l, 2] + got[w * 32 + l, 3]))
                     for l in range(32)]
        for o in (16, 8, 4, 2, 1):
            lane_sums = [np.float32(lane_sums[l] + lane_sums[l ^ o]) for l in range(32)]
        assert sums.get()[w] == lane_sums[0]


@pytest.mark.parametrize("text", [
    "ldmatrix.sync.aligned.m8n8.x1.b16 {%r1}, [%rd1];",
    "stmatrix.sync.aligned.m8n8.x1.b16 [%rd1], {%r1};",
])
def test_a_bad_row_address_is_an_illegal_address(text):
    """A row address that points nowhere ends the launch as a GPU's would, from the warp's
    resolver as from a lane's own access."""
    ptx = (".visible .entry k()\n{\n.reg .b32 %r<9>; .reg .b64 %rd<2>;\nmov.u64 %rd1, 16;\nmov.b32 %r1, 0;\n"
           + text + "\nret;\n}\n")
    with pytest.raises(CudaError) as e:
        launch(ptx, "k", (2, 1, 1), (64, 1, 1))
    assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS


GRID_STRIDE_CUDA = r"""
// Each warp takes tiles w, w + warps, ... of a grid-stride loop (whose back edge the block
// function may give way at): one m16n8k8 product per tile.
extern "C" __global__ void tiles(const unsigned *a, const unsigned *b, float *d, int ntiles) {
    int lane = threadIdx.x % 32;
    int warps = gridDim.x * blockDim.x / 32;
    for (int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32; w < ntiles; w += warps) {
        float c[4] = {0.f, 0.f, 0.f, 0.f};
        int t = w * 32 + lane;
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[2 * t]), "r"(a[2 * t + 1]), "r"(b[t]));
        for (int i = 0; i < 4; ++i) d[4 * t + i] = c[i];
    }
}
"""


def test_mma_in_a_grid_stride_loop(rng):
    mod = nvcc_module(GRID_STRIDE_CUDA, "mma_tiles.cu")
    ntiles = 11
    la, lb, lc = _isa("m16n8k8", "a", "16"), _isa("m16n8k8", "b", "16"), _isa("m16n8k8", "c", "f32")
    mats = [(rng.standard_normal((16, 8)).astype(np.float16), rng.standard_normal((8, 8)).astype(np.float16))
            for _ in range(ntiles)]
    a = np.concatenate([to_fragments(A, la).view(np.uint32).reshape(32, -1) for A, _ in mats])
    b = np.concatenate([to_fragments(B, lb).view(np.uint32).reshape(32, -1) for _, B in mats])
    d = ac.asarray(np.full((ntiles * 32, 4), np.nan, np.float32))
    mod.get_function("tiles")((2,), (64,), (ac.asarray(a), ac.asarray(b), d, np.int32(ntiles)))
    got = d.get()
    for w, (A, B) in enumerate(mats):
        want = sequential(A, B, np.zeros((16, 8), np.float32))
        assert np.array_equal(from_fragments(got[w * 32:(w + 1) * 32], lc), want)
