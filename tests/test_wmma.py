"""wmma (compiler/ops/matrix.py): wmma.load, wmma.mma and wmma.store compose to D = A * B + C
for each shape and type anycuda lowers, with row- and column-major matrices and padded
strides, on hand-written PTX (the layout of a fragment is ours to choose: only the
composition is checked, and element-wise access by the lane's own code, as nvcc emits for
`frag.x[i]`); and a tiled GEMM in CUDA C with nvcuda::wmma. Several warps in several
blocks, fresh random matrices, poisoned outputs; float sums bit for bit in the order
matrix.py documents.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import anycuda as ac
from conformance import nvcc_module, ptx_launcher
from test_mma import over_paths

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"
WARPS, BLOCKS = 2, 2
NWARPS = WARPS * BLOCKS

# the ISA's fragment register counts of wmma (PTX ISA, wmma.load): (shape, type, matrix) -> registers
REGISTERS = {
    **{(s, "f16", x): 8 for s in ("m16n16k16", "m32n8k16", "m8n32k16") for x in "ab"},
    ("m16n16k16", "bf16", "a"): 4, ("m16n16k16", "bf16", "b"): 4,
    ("m32n8k16", "bf16", "a"): 8, ("m32n8k16", "bf16", "b"): 2,
    ("m8n32k16", "bf16", "a"): 2, ("m8n32k16", "bf16", "b"): 8,
    ("m16n16k8", "tf32", "a"): 4, ("m16n16k8", "tf32", "b"): 4,
    ("m8n8k4", "f64", "a"): 1, ("m8n8k4", "f64", "b"): 1,
    ("m16n16k16", "s8", "a"): 2, ("m16n16k16", "s8", "b"): 2,
    ("m32n8k16", "s8", "a"): 4, ("m32n8k16", "s8", "b"): 1,
    ("m8n32k16", "s8", "a"): 1, ("m8n32k16", "s8", "b"): 4,
    ("m8n8k32", "s4", "a"): 1, ("m8n8k32", "s4", "b"): 1, ("m8n8k128", "b1", "a"): 1, ("m8n8k128", "b1", "b"): 1,
}
ACCUMULATOR_REGISTERS = {"f32": 8, "s32": 8, "f16": 4}
SUB_BYTE = {"s4": 4, "u4": 4, "b1": 1}            # bits of the sub-byte types, packed low bits first
NUMPY = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "s32": np.int32, "s8": np.int8, "u8": np.uint8,
         "tf32": np.float32, "bf16": np.uint16}
REG_TYPE = {"f16": "b32", "bf16": "b32", "tf32": "b32", "s8": "b32", "u8": "b32", "f32": "f32", "s32": "s32",
            "f64": "f64", "s4": "b32", "u4": "b32", "b1": "b32"}


def dims(shape):
    m, rest = shape[1:].split("n")
    n, k = rest.split("k")
    return int(m), int(n), int(k)


def wmma_ptx(shape, at, bt, ct, dt, layouts, strides, satfinite=False, scale=False, op="", path="rounds"):
    """A kernel: each warp loads its A, B, C (layouts[x] 'row'/'col', strides[x] elements),
    D = A * B + C (.b1: `op` 'xor' or 'and' with .popc), stores D; with `scale`, each lane
    doubles its C elements first (as user code does with frag.x[i]) to show element-wise
    access agrees with load and store. On the "block program" path a barrier after the
    loads lets a block program take it (compiler/vector/warpmatrix.py), the fragments kept
    across it."""
    m, n, k = dims(shape)
    signed = {"u8": "s8", "u4": "s4"}
    eight_by_eight = 2 if m * n == 64 else None      # an 8 x 8 accumulator: two elements a lane
    regs = {"a": REGISTERS[(shape, signed.get(at, at), "a")], "b": REGISTERS[(shape, signed.get(bt, bt), "b")],
            "c": eight_by_eight or ACCUMULATOR_REGISTERS[ct], "d": eight_by_eight or ACCUMULATOR_REGISTERS[dt]}
    rtype = {"a": REG_TYPE[at], "b": REG_TYPE[bt], "c": REG_TYPE[ct], "d": REG_TYPE[dt]}
    types = {"a": at, "b": bt, "c": ct, "d": dt}
    lines = [f".reg .{rtype[x]} %{x}<{regs[x]}>;" for x in "abcd"]
    lines += [".reg .b32 %r<8>;", ".reg .b64 %rd<16>;", ".reg .f32 %s;",
              "mov.u32 %r1, %tid.x;", "mov.u32 %r2, %ctaid.x;", "mov.u32 %r3, %ntid.x;",
              "mad.lo.u32 %r4, %r2, %r3, %r1;", "shr.u32 %r4, %r4, 5;"]     # the warp's index in the grid
    vec = lambda x: "{" + ", ".join(f"%{x}{i}" for i in range(regs[x])) + "}"     # noqa: E731
    for i, x in enumerate("abcd"):
        ebits = SUB_BYTE.get(types[x]) or 8 * np.dtype(NUMPY[types[x]]).itemsize
        other = {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[x]
        span = (other[0] if layouts[x] == "row" else other[1]) * strides[x] * ebits // 8
        lines += [f"ld.param.u64 %rd{i}, [p{x}];", f"mul.wide.u32 %rd9, %r4, {span};", f"add.u64 %rd{i}, %rd{i}, %rd9;"]
    for i, x in enumerate("abc"):
        lines.append(f"wmma.load.{x}.sync.aligned.{layouts[x]}.{shape}.global.{types[x]} "
                     f"{vec(x)}, [%rd{i}], {strides[x]};")
    if path == "block program":
        lines.append("bar.sync 0;")
    if scale:
        for i in range(regs["c"]):
            lines.append(f"add.f32 %c{i}, %c{i}, %c{i};")
    sat = ".satfinite" if satfinite else ""
    kinds = f".{dt}.{ct}" if at == "f16" else f".{dt}.{at}.{bt}.{ct}"
    bit_op = f".{op}.popc" if op else ""
    lines.append(f"wmma.mma{bit_op}.sync.aligned.{layouts['a']}.{layouts['b']}.{shape}{kinds}{sat} "
                 f"{vec('d')}, {vec('a')}, {vec('b')}, {vec('c')};")
    lines.append(f"wmma.store.d.sync.aligned.{layouts['d']}.{shape}.global.{dt} [%rd3], {vec('d')}, {strides['d']};")
    return (".visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)\n{\n"
            + "\n".join(lines) + "\nret;\n}\n")


def to_memory(mat, layout, stride, fill):
    """A matrix in memory: rows (row) or columns (col) `stride` elements apart, padding `fill`."""
    if layout == "col":
        mat = mat.T
    out = np.full((mat.shape[0], stride), fill, mat.dtype)
    out[:, :mat.shape[1]] = mat
    return out


def from_memory(buf, layout, shape):
    rows, cols = shape
    return buf[:rows, :cols] if layout == "row" else buf[:cols, :rows].T


def launch(ptx, *arrays, path="rounds"):
    """Run kernel k of `ptx` and check it ran the way `path` names."""
    prog = ptx_launcher(HEADER, "test.ptx")(ptx, "k", (BLOCKS, 1, 1), (WARPS * 32, 1, 1), *arrays)
    assert (prog.kernel("k")._programs.get((WARPS * 32, 1, 1)) is not None) == (path == "block program"), path


def sequential(A, B, C, dtype=np.float32):
    acc = C.astype(dtype)
    for k in range(A.shape[1]):
        acc = (acc + np.outer(A[:, k].astype(dtype), B[k, :].astype(dtype)).astype(dtype)).astype(dtype)
    return acc


def random_matrix(rng, t, shape):
    if t == "f16":
        return rng.standard_normal(shape).astype(np.float16)
    if t == "bf16":
        return (rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if t in ("f32", "tf32"):
        return rng.standard_normal(shape).astype(np.float32)
    if t == "f64":
        return rng.standard_normal(shape)
    info = np.iinfo(NUMPY[t])
    return rng.integers(info.min, info.max + 1, shape).astype(NUMPY[t])


def value(mat, t):
    """The numbers a matrix of type t stands for, as the product reads them."""
    if t == "bf16":
        return (mat.astype(np.uint32) << 16).view(np.float32)
    if t == "tf32":
        return (mat.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    return mat


def reference(A, B, C, at, ct, dt, satfinite):
    Av, Bv = value(A, at), value(B, at)
    if at in ("s8", "u8"):
        exact = Av.astype(np.int64) @ Bv.astype(np.int64) + C
        return np.clip(exact, -2 ** 31, 2 ** 31 - 1).astype(np.int32) if satfinite else exact.astype(np.int32)
    if at == "f64":
        ref = np.zeros(C.shape)
        for r in range(C.shape[0]):
            for c in range(C.shape[1]):
                acc = C[r, c]
                for k in range(A.shape[1]):
                    acc = float(Fraction(A[r, k]) * Fraction(B[k, c]) + Fraction(acc))
                ref[r, c] = acc
        return ref
    ref = sequential(Av, Bv, C)
    return ref.astype(np.float16) if dt == "f16" else ref


FORMS = [
    # shape, a/b type, ctype, dtype
    ("m16n16k16", "f16", "f32", "f32"), ("m16n16k16", "f16", "f16", "f16"), ("m16n16k16", "f16", "f16", "f32"),
    ("m16n16k16", "f16", "f32", "f16"), ("m32n8k16", "f16", "f32", "f32"), ("m8n32k16", "f16", "f16", "f16"),
    ("m16n16k16", "bf16", "f32", "f32"), ("m32n8k16", "bf16", "f32", "f32"), ("m8n32k16", "bf16", "f32", "f32"),
    ("m16n16k8", "tf32", "f32", "f32"), ("m8n8k4", "f64", "f64", "f64"),
    ("m16n16k16", "s8", "s32", "s32"), ("m32n8k16", "u8", "s32", "s32"), ("m8n32k16", "s8", "s32", "s32"),
]
LAYOUTS = [("row", "col", "row", "row"), ("col", "row", "col", "col"), ("row", "row", "col", "row")]


@over_paths("shape,at,ct,dt,layouts", [(*form, layouts) for layouts in LAYOUTS for form in FORMS], len(FORMS))
def test_wmma_load_mma_store(rng, shape, at, ct, dt, layouts, path):
    m, n, k = dims(shape)
    lay = dict(zip("abcd", layouts))
    shapes = {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}
    pad = int(rng.integers(0, 3)) * 8
    strides = {x: (shapes[x][1] if lay[x] == "row" else shapes[x][0]) + pad for x in "abcd"}
    satfinite = at in ("s8", "u8")
    mats = []
    for w in range(NWARPS):
        A, B = random_matrix(rng, at, shapes["a"]), random_matrix(rng, at if at != "s8" else "u8", shapes["b"])
        if at == "s8":
            B = B.view(np.int8) if w % 2 else B      # s8 with u8 and with s8
        C = random_matrix(rng, ct, shapes["c"])
        if ct == "s32":
            C = (rng.choice([-1, 1], shapes["c"]) * (2 ** 31 - 2 ** 12) + rng.integers(-2 ** 11, 2 ** 11, shapes["c"]))
            C = C.astype(np.int32)
        mats.append((A, B, C))
    fill = {"f16": np.float16(np.nan), "f32": np.float32(np.nan), "f64": np.nan}.get(dt, 0)
    bufs = [np.concatenate([to_memory(mt[i], lay[x], strides[x], 0) for mt in mats]) for i, x in enumerate("abc")]
    d = np.concatenate([to_memory(np.zeros(shapes["d"], NUMPY[dt]), lay["d"], strides["d"], fill) for _ in mats])
    if dt not in ("f16", "f32", "f64"):
        d[...] = np.int32(-0x32323233)
    groups = {w % 2 for w in range(NWARPS)} if at == "s8" else {0}
    for parity in sorted(groups):
        # s8 forms: even warps s8 x u8, odd warps s8 x s8 (one launch each)
        bt = at if at != "s8" else ("u8" if parity == 0 else "s8")
        ptx = wmma_ptx(shape, at, bt, ct, dt, lay, strides, satfinite=satfinite, path=path)
        out = d.copy()
        b_bufs = bufs[1]
        if at == "s8":
            b_bufs = np.concatenate([to_memory(mt[1].view(np.int8 if bt == "s8" else np.uint8), lay["b"],
                                               strides["b"], 0) for mt in mats])
        launch(ptx, bufs[0], b_bufs, bufs[2], out, path=path)
        per = out.shape[0] // NWARPS
        for w, (A, B, C) in enumerate(mats):
            if w % 2 != parity and at == "s8":
                continue
            Bt = B.view(np.int8 if bt == "s8" else np.uint8) if at == "s8" else B
            D = from_memory(out[w * per:(w + 1) * per], lay["d"], shapes["d"])
            ref = reference(A, Bt, C, at, ct, dt, satfinite)
            assert np.array_equal(D, ref.astype(D.dtype)), (w, np.abs(D.astype(float) - ref).max())
            rest = out[w * per:(w + 1) * per]
            if pad and dt in ("f16", "f32", "f64"):
                assert np.isnan(rest[:, strides["d"] - pad:]).all()      # the padding is not written


def pack_bits(mem, bits):
    """A matrix in memory of `bits`-bit elements (ints, rows of an even number of bytes) as
    bytes, element e at bits (e * bits) % 8 of byte e * bits // 8."""
    per = 8 // bits
    e = (mem.astype(np.int64) & ((1 << bits) - 1)).reshape(mem.shape[0], -1, per)
    return (e << (np.arange(per) * bits)).sum(axis=2).astype(np.uint8)


# shape, a type, b type, .b1 operation, .satfinite
SUB_BYTE_FORMS = [("m8n8k32", "s4", "s4", "", False), ("m8n8k32", "u4", "s4", "", True),
                  ("m8n8k32", "s4", "u4", "", True), ("m8n8k32", "u4", "u4", "", False),
                  ("m8n8k128", "b1", "b1", "xor", False), ("m8n8k128", "b1", "b1", "and", False)]
SUB_BYTE_RANGE = {"s4": (-8, 8), "u4": (0, 16), "b1": (0, 2)}


@pytest.mark.parametrize("cd", ["row", "col"])
@pytest.mark.parametrize("shape,at,bt,op,satfinite", SUB_BYTE_FORMS, ids=["-".join(map(str, f)) for f in SUB_BYTE_FORMS])
def test_wmma_sub_byte(rng, shape, at, bt, op, satfinite, cd):
    """.s4/.u4 (m8n8k32) and .b1 (m8n8k128) multiplicands, A row-major and B column-major as the
    ISA requires, packed low bits first in memory, padded strides; D exact (wrapping or
    saturating), .b1's D = C + popc(row of A op column of B)."""
    run_sub_byte(rng, shape, at, bt, op, satfinite, cd)


@pytest.mark.parametrize("shape,at,bt,op,satfinite", SUB_BYTE_FORMS[::4],
                         ids=["-".join(map(str, f)) for f in SUB_BYTE_FORMS[::4]])
def test_wmma_sub_byte_with_a_barrier_stays_in_the_rounds(rng, shape, at, bt, op, satfinite):
    """Block programs leave sub-byte fragments to the rounds (warpmatrix.py): with a barrier
    the kernel still runs, and right."""
    run_sub_byte(rng, shape, at, bt, op, satfinite, "row", barrier=True)


def run_sub_byte(rng, shape, at, bt, op, satfinite, cd, barrier=False):
    m, n, k = dims(shape)
    lay = {"a": "row", "b": "col", "c": cd, "d": cd}
    bits = SUB_BYTE[at]
    pad = int(rng.integers(0, 3)) * 8 * 8 // bits                    # whole bytes, in elements
    strides = {"a": k + pad, "b": k + pad, "c": (n if cd == "row" else m) + 4, "d": (n if cd == "row" else m) + 4}
    mats = []
    for w in range(NWARPS):
        C = rng.integers(-2 ** 11, 2 ** 11, (m, n))
        if w % 2:                                                # within reach of the s32 limits
            C = rng.choice([-1, 1], (m, n)) * (2 ** 31 - 1 - rng.integers(0, 64, (m, n)))
        mats.append((rng.integers(*SUB_BYTE_RANGE[at], (m, k)), rng.integers(*SUB_BYTE_RANGE[bt], (k, n)), C))
    bufs = [np.concatenate([pack_bits(to_memory(mt[0], "row", strides["a"], 0), bits) for mt in mats]),
            np.concatenate([pack_bits(to_memory(mt[1], "col", strides["b"], 0), bits) for mt in mats]),
            np.concatenate([to_memory(mt[2].astype(np.int32), cd, strides["c"], 0) for mt in mats])]
    out = np.concatenate([to_memory(np.zeros((m, n), np.int32), cd, strides["d"], -0x32323233) for _ in mats])
    ptx = wmma_ptx(shape, at, bt, "s32", "s32", lay, strides, satfinite=satfinite, op=op,
                   path="block program" if barrier else "rounds")
    launch(ptx, *bufs, out)
    per = out.shape[0] // NWARPS
    overflowed = False
    for w, (A, B, C) in enumerate(mats):
        if op == "xor":
            exact = (A[:, :, None] ^ B[None, :, :]).sum(axis=1) + C
        elif op == "and":
            exact = (A[:, :, None] & B[None, :, :]).sum(axis=1) + C
        else:
            exact = A @ B + C
        overflowed |= bool((np.abs(exact) >= 2 ** 31).any())
        want = np.clip(exact, -2 ** 31, 2 ** 31 - 1) if satfinite else (exact + 2 ** 31) % 2 ** 32 - 2 ** 31
        got = out[w * per:(w + 1) * per]
        assert np.array_equal(from_memory(got, cd, (m, n)), want.astype(np.int32)), w
        assert (got[:, strides["d"] - 4:] == -0x32323233).all()       # the padding is not written
    assert overflowed


@pytest.mark.parametrize("path", ["rounds", "block program"])
def test_elementwise_access_agrees_with_load_and_store(rng, path):
    """Doubling each element of a loaded C fragment in the lane's own code (frag.x[i] *= 2)
    doubles C in the product."""
    shape, lay = "m16n16k16", {"a": "row", "b": "col", "c": "row", "d": "row"}
    strides = {"a": 16, "b": 16, "c": 16, "d": 16}
    mats = [(random_matrix(rng, "f16", (16, 16)), random_matrix(rng, "f16", (16, 16)),
             random_matrix(rng, "f32", (16, 16)))
            for _ in range(NWARPS)]
    bufs = [np.concatenate([to_memory(mt[i], lay[x], 16, 0) for mt in mats]) for i, x in enumerate("abc")]
    out = np.full((NWARPS * 16, 16), np.nan, np.float32)
    launch(wmma_ptx(shape, "f16", "f16", "f32", "f32", lay, strides, scale=True, path=path), *bufs, out, path=path)
    for w, (A, B, C) in enumerate(mats):
        assert np.array_equal(out[w * 16:(w + 1) * 16], sequential(A, B, 2 * C))


# ---------------------------------------------------------------- CUDA C: nvcuda::wmma
WMMA_CUDA = r"""
#include <mma.h>
using namespace nvcuda;
// D = alpha * A * B + beta * C for 64 x 64 tiles: a block of 4 warps per tile, each warp a
// 16-row stripe of 4 wmma 16 x 16 tiles; A row-major, B column-major through shared memory.
extern "C" __global__ void gemm(const half *A, const half *B, const float *C, float *D,
                                int M, int N, int K, float alpha, float beta) {
    __shared__ half sa[64 * 16];
    __shared__ half sb[64 * 16];          // B's 16 x 64 slice, column-major (stride 16)
    int warp = threadIdx.x / 32;
    int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4];
    for (int j = 0; j < 4; ++j) wmma::fill_fragment(acc[j], 0.0f);
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) {
            sa[i] = A[(row0 + i / 16) * K + k0 + i % 16];
            sb[i] = B[(col0 + i / 16) * K + k0 + i % 16];
        }
        __syncthreads();
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
        wmma::load_matrix_sync(a, sa + warp * 16 * 16, 16);
        for (int j = 0; j < 4; ++j) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
            wmma::load_matrix_sync(b, sb + j * 16 * 16, 16);
            wmma::mma_sync(acc[j], a, b, acc[j]);
        }
        __syncthreads();
    }
    for (int j = 0; j < 4; ++j) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
        const float *ct = C + (row0 + warp * 16) * N + col0 + j * 16;
        wmma::load_matrix_sync(c, ct, N, wmma::mem_row_major);
        for (int i = 0; i < c.num_elements; ++i)
            c.x[i] = alpha * acc[j].x[i] + beta * c.x[i];
        wmma::store_matrix_sync(D + (row0 + warp * 16) * N + col0 + j * 16, c, N, wmma::mem_row_major);
    }
}
"""


def test_cuda_wmma_gemm(rng):
    mod = nvcc_module(WMMA_CUDA, name="wmma_gemm.cu")
    M, N, K = 128, 128, 64
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    C = rng.standard_normal((M, N)).astype(np.float32)
    alpha, beta = np.float32(1.5), np.float32(-0.5)
    out = ac.asarray(np.full((M, N), np.nan, np.float32))
    mod.get_function("gemm")((N // 64, M // 64), (128,),
                             (ac.asarray(A), ac.asarray(np.ascontiguousarray(B.T)), ac.asarray(C), out,
                              np.int32(M), np.int32(N), np.int32(K), alpha, beta))
    acc = np.zeros((M, N), np.float32)
    for k0 in range(0, K, 16):
        acc = sequential(A[:, k0:k0 + 16], B[k0:k0 + 16], acc)
    got = out.get()
    assert np.allclose(got, alpha * acc + beta * C, rtol=1e-5, atol=1e-5)
    assert np.allclose(got, 1.5 * (A.astype(np.float64) @ B.astype(np.float64)) - 0.5 * C, rtol=1e-3, atol=1e-3)


FORMS_CUDA = r"""
#include <mma.h>
#include <cuda_bf16.h>
using namespace nvcuda;
// One tile per warp: D = A * B + C with A row-major (lda = K), B column-major (ldb = K), C/D row-major.
template <int M, int N, int K, typename TI, typename TS, typename TA>
__device__ void tile(const TS *a, const TS *b, const TA *c, TA *d) {
    int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    wmma::fragment<wmma::matrix_a, M, N, K, TI, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, M, N, K, TI, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, M, N, K, TA> fc;
    wmma::load_matrix_sync(fa, a + w * M * K, K);
    wmma::load_matrix_sync(fb, b + w * K * N, K);
    wmma::load_matrix_sync(fc, c + w * M * N, N, wmma::mem_row_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(d + w * M * N, fc, N, wmma::mem_row_major);
}
typedef __nv_bfloat16 bf16;
typedef signed char s8;
extern "C" __global__ void bf16_32x8(const bf16 *a, const bf16 *b, const float *c, float *d) {
    tile<32, 8, 16, bf16, bf16, float>(a, b, c, d);
}
extern "C" __global__ void f16_8x32(const half *a, const half *b, const half *c, half *d) {
    tile<8, 32, 16, half, half, half>(a, b, c, d);
}
extern "C" __global__ void s8_16x16(const s8 *a, const s8 *b, const int *c, int *d) {
    tile<16, 16, 16, s8, s8, int>(a, b, c, d);
}
extern "C" __global__ void f64_8x8(const double *a, const double *b, const double *c, double *d) {
    tile<8, 8, 4, double, double, double>(a, b, c, d);
}
extern "C" __global__ void tf32_16x16(const float *a, const float *b, const float *c, float *d) {
    int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc;
    wmma::load_matrix_sync(fa, a + w * 128, 8);
    wmma::load_matrix_sync(fb, b + w * 128, 8);
    for (int i = 0; i < fa.num_elements; i++) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
    for (int i = 0; i < fb.num_elements; i++) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
    wmma::load_matrix_sync(fc, c + w * 256, 16, wmma::mem_row_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(d + w * 256, fc, 16, wmma::mem_row_major);
}
"""

# kernel: (M, N, K, multiplicand dtype, accumulator dtype)
CUDA_FORMS = {"bf16_32x8": (32, 8, 16, "bf16", np.float32), "f16_8x32": (8, 32, 16, np.float16, np.float16),
              "s8_16x16": (16, 16, 16, np.int8, np.int32), "f64_8x8": (8, 8, 4, np.float64, np.float64),
              "tf32_16x16": (16, 16, 8, "tf32", np.float32)}


@pytest.mark.parametrize("kernel", sorted(CUDA_FORMS))
def test_cuda_wmma_forms(rng, kernel):
    """nvcuda::wmma's other shapes and types as nvcc writes them (generic addresses, .rn on
    f64, cvt.rna.tf32.f32 on a fragment's elements), one tile per warp."""
    mod = nvcc_module(FORMS_CUDA, "wmma_forms.cu")
    m, n, k, ti, ta = CUDA_FORMS[kernel]
    warps = NWARPS
    if ti == "bf16":
        a, b = random_matrix(rng, "bf16", (warps, m, k)), random_matrix(rng, "bf16", (warps, n, k))
        av, bv = value(a, "bf16"), value(b, "bf16")
    elif ti == "tf32":
        a, b = random_matrix(rng, "f32", (warps, m, k)), random_matrix(rng, "f32", (warps, n, k))
        rna = lambda x: ((x.view(np.uint32) + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)  # noqa: E731
        av, bv = rna(a), rna(b)
    elif ti == np.int8:
        a, b = random_matrix(rng, "s8", (warps, m, k)), random_matrix(rng, "s8", (warps, n, k))
        av, bv = a, b
    else:
        a, b = rng.standard_normal((warps, m, k)).astype(ti), rng.standard_normal((warps, n, k)).astype(ti)
        av, bv = a, b
    c = (rng.integers(-1000, 1000, (warps, m, n)) if ta == np.int32 else rng.standard_normal((warps, m, n))).astype(ta)
    d = ac.asarray(np.full((warps, m, n), -1 if ta == np.int32 else np.nan, ta))
    mod.get_function(kernel)((BLOCKS,), (WARPS * 32,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), d))
    got = d.get()
    for w in range(warps):
        A, B = av[w], bv[w].T                      # b holds B column-major: B's columns as rows
        if ta == np.int32:
            ref = (A.astype(np.int64) @ B.astype(np.int64) + c[w]).astype(np.int32)
        elif ta == np.float64:
            ref = reference(A, B, c[w], "f64", "f64", "f64", False)
        else:
            ref = sequential(A, B, c[w])
        assert np.array_equal(got[w], ref.astype(ta)), w


SUB_BYTE_CUDA = r"""
#include <mma.h>
using namespace nvcuda;
namespace x = nvcuda::wmma::experimental;
// One 8 x 8 tile per warp: D = A * B + C, A row-major and B column-major as packed bits
// (K elements a row: 16 bytes), C/D row-major.
template <int K, typename P> struct Tile {
    wmma::fragment<wmma::matrix_a, 8, 8, K, P, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 8, 8, K, P, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 8, 8, K, int> c;
    int w;
    __device__ Tile(const int *pa, const int *pb, const int *pc) {
        w = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
        wmma::load_matrix_sync(a, pa + w * 32, K);
        wmma::load_matrix_sync(b, pb + w * 32, K);
        wmma::load_matrix_sync(c, pc + w * 64, 8, wmma::mem_row_major);
    }
    __device__ void store(int *d) { wmma::store_matrix_sync(d + w * 64, c, 8, wmma::mem_row_major); }
};
extern "C" __global__ void s4(const int *a, const int *b, const int *c, int *d) {
    Tile<32, x::precision::s4> t(a, b, c);
    wmma::mma_sync(t.c, t.a, t.b, t.c);
    t.store(d);
}
extern "C" __global__ void b1(const int *a, const int *b, const int *c, int *d, int use_and) {
    Tile<128, x::precision::b1> t(a, b, c);
    if (use_and)
        wmma::bmma_sync(t.c, t.a, t.b, t.c, x::bmmaBitOpAND);
    else
        wmma::bmma_sync(t.c, t.a, t.b, t.c, x::bmmaBitOpXOR);
    t.store(d);
}
"""


@pytest.mark.parametrize("kernel", ["s4", "b1-xor", "b1-and"])
def test_cuda_wmma_sub_byte(rng, kernel):
    """nvcuda::wmma::experimental's .s4 and .b1 fragments as nvcc writes them, one tile a warp."""
    mod = nvcc_module(SUB_BYTE_CUDA, "wmma_sub_byte.cu")
    name, _, op = kernel.partition("-")
    bits, k = (4, 32) if name == "s4" else (1, 128)
    lo, hi = (-8, 8) if name == "s4" else (0, 2)
    A, B = rng.integers(lo, hi, (NWARPS, 8, k)), rng.integers(lo, hi, (NWARPS, k, 8))
    C = rng.integers(-1000, 1000, (NWARPS, 8, 8))
    a = np.concatenate([pack_bits(A[w], bits) for w in range(NWARPS)])
    b = np.concatenate([pack_bits(np.ascontiguousarray(B[w].T), bits) for w in range(NWARPS)])
    d = ac.asarray(np.full((NWARPS, 8, 8), -0x32323233, np.int32))
    args = (ac.asarray(a), ac.asarray(b), ac.asarray(C.astype(np.int32)), d)
    if name == "b1":
        args += (np.int32(op == "and"),)
    mod.get_function(name)((BLOCKS,), (WARPS * 32,), args)
    got = d.get()
    for w in range(NWARPS):
        if name == "s4":
            want = A[w] @ B[w] + C[w]
        else:
            both = (A[w][:, :, None] & B[w][None]) if op == "and" else (A[w][:, :, None] ^ B[w][None])
            want = both.sum(axis=1) + C[w]
        assert np.array_equal(got[w], want.astype(np.int32)), w
