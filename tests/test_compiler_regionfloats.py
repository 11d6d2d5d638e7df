"""Float forms in warp regions and block programs (compiler/vector/): directed roundings
(.rm, .rp, .rz of add/sub/mul/fma, as CUDA's __fmaf_rd and nvcc's own expf write them),
cvt.sat (__saturatef), ex2/lg2/sin .approx. Each kernel is a grid-stride loop, so that its
threads run as an entry region (a warp's lanes as one vector); the region must be made, and
every result is checked against an independent reference: exact rational arithmetic
rounded in the named direction, numpy's exp2/log2/sin within the ulps PTX allows, numpy's
clip. Outputs are poisoned first."""
from fractions import Fraction

import numpy as np
import pytest

import anycuda as ac
from conformance import made_regions, poison

SOURCE = r"""
#define OUT(k, v) out[(size_t)i * 13 + k] = v
extern "C" __global__ void rounded(const float* a, const float* b, const float* c, float* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        float x = a[i], y = b[i], z = c[i];
        OUT(0, __fmaf_rd(x, y, z)); OUT(1, __fmaf_ru(x, y, z)); OUT(2, __fmaf_rz(x, y, z));
        OUT(3, __fadd_rd(x, z)); OUT(4, __fadd_ru(x, z)); OUT(5, __fmul_rz(x, y)); OUT(6, __fsub_ru(x, z));
        OUT(7, __saturatef(x)); OUT(8, exp2f(y)); OUT(9, __expf(y)); OUT(10, __log2f(fabsf(z)));
        OUT(11, __sinf(y)); OUT(12, expf(y));
    }
}

extern "C" __global__ void rounded64(const double* a, const double* b, const double* c, double* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        double x = a[i], y = b[i], z = c[i];
        out[(size_t)i * 3] = __fma_rd(x, y, z);
        out[(size_t)i * 3 + 1] = __dadd_ru(x, z);
        out[(size_t)i * 3 + 2] = __dmul_rz(x, y);
    }
}
"""


def _rounded(exact: Fraction, mode: str, dtype):
    """The value of `dtype` nearest `exact` in direction mode ('rm', 'rp', 'rz')."""
    if mode == "rz":
        mode = "rm" if exact >= 0 else "rp"
    r = dtype(float(exact))                     # within an ulp: adjusted below
    down, up = dtype(-np.inf), dtype(np.inf)
    if mode == "rm":
        while Fraction(float(r)) > exact:
            r = np.nextafter(r, down)
        while Fraction(float(np.nextafter(r, up))) <= exact:
            r = np.nextafter(r, up)
    else:
        while Fraction(float(r)) < exact:
            r = np.nextafter(r, up)
        while Fraction(float(np.nextafter(r, down))) >= exact:
            r = np.nextafter(r, down)
    if r == 0 and exact == 0:
        return dtype(-0.0) if mode == "rm" else dtype(0.0)
    return r


def _sum_zero_sign(r, exact, mode, p_sign_negative, c):
    """IEEE 754's sign of an exact zero sum: -0 rounding down, +0 otherwise, unless both
    addends are zeros of one sign (then theirs)."""
    if exact != 0:
        return r
    both = (p_sign_negative, bool(np.signbit(c)))
    if both == (True, True) and c == 0:
        return type(r)(-0.0)
    return type(r)(-0.0) if mode == "rm" else type(r)(0.0)


def _inputs(rng, n, dtype):
    """Operands of many magnitudes, with exact zeros of sums (z = -x, y = 1) and ties."""
    def draw():
        v = rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))
        return v.astype(dtype)
    a, b, c = draw(), draw(), draw()
    k = n // 8
    b[:k], c[:k] = 1, -a[:k]                       # x * 1 - x: exact zeros
    a[k:2 * k] = dtype(1) + np.finfo(dtype).eps    # products needing the last bit
    b[k:2 * k] = dtype(1) - np.finfo(dtype).eps / 2
    return a, b, c


def _bits_equal(got, want):
    return np.asarray(got).tobytes() == np.asarray(want).tobytes() or (np.isnan(got) and np.isnan(want))


def _check_directed(got, a, b, c, dtype, forms):
    """forms: [(column, op, mode)]; op 'fma', 'add', 'sub', 'mul'."""
    wrong = []
    for i in range(len(a)):
        x, y, z = (Fraction(float(v)) for v in (a[i], b[i], c[i]))
        for col, op, mode in forms:
            exact = {"fma": x * y + z, "add": x + z, "sub": x - z, "mul": x * y}[op]
            want = _rounded(exact, mode, dtype)
            if op in ("fma", "add", "sub") and exact == 0:
                first_negative = bool(np.signbit(a[i] * b[i])) if op == "fma" else bool(np.signbit(a[i]))
                second = c[i] if op != "sub" else -c[i]
                want = _sum_zero_sign(want, exact, mode, first_negative, second)
            if not _bits_equal(got[i, col], want):
                wrong.append((i, op, mode, a[i], b[i], c[i], got[i, col], want))
    assert not wrong, f"{len(wrong)} wrong, first: {wrong[:4]}"


def _ulps(got, want):
    g, w = got.astype(np.float32).view(np.int32).astype(np.int64), want.astype(np.float32).view(np.int32).astype(np.int64)
    return np.abs(g - w)


def test_the_float_forms_run_as_regions():
    made, _ = made_regions(SOURCE)
    assert {"rounded", "rounded64"} <= set(made), f"regions made only for {sorted(made)}"


@pytest.mark.parametrize("block, grid", [(128, 2), (64, 3)])
def test_float_forms_in_a_region(rng, block, grid):
    n = 1500
    a, b, c = _inputs(rng, n, np.float32)
    a[-6:] = [np.nan, np.inf, -np.inf, -0.5, 1.5, 0.25]      # what __saturatef clamps
    b = np.where(np.arange(n) < n // 2, rng.uniform(-20, 20, n), b).astype(np.float32)
    out = poison(n * 13, np.float32)
    k = ac.RawModule(code=SOURCE).get_function("rounded")
    k((grid,), (block,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
    got = out.get().reshape(n, 13)
    finite = np.isfinite(a)
    _check_directed(got[finite], a[finite], b[finite], c[finite], np.float32,
                    [(0, "fma", "rm"), (1, "fma", "rp"), (2, "fma", "rz"), (3, "add", "rm"),
                     (4, "add", "rp"), (5, "mul", "rz"), (6, "sub", "rp")])
    sat = np.clip(np.nan_to_num(a, nan=0.0, posinf=1.0, neginf=0.0), 0, 1)
    assert _bits_equal(got[:, 7], sat.astype(np.float32))
    moderate = np.abs(b) <= 20
    exp2 = np.exp2(b[moderate].astype(np.float64)).astype(np.float32)
    exp = np.exp(b[moderate].astype(np.float64)).astype(np.float32)
    assert _ulps(got[moderate, 8], exp2).max() <= 2
    # __expf is ex2.approx of the rounded y * log2(e): CUDA's bound, 2 + floor(|1.173 y|) ulps
    assert (_ulps(got[moderate, 9], exp) <= 2 + np.floor(np.abs(1.173 * b[moderate]))).all()
    assert _ulps(got[moderate, 12], exp).max() <= 2        # expf: nvcc's range reduction (fma.rm) around ex2
    log2 = np.log2(np.abs(c).astype(np.float64)).astype(np.float32)
    assert _ulps(got[:, 10], log2).max() <= 2
    assert np.abs(got[moderate, 11] - np.sin(b[moderate].astype(np.float64))).max() < 2e-6


def test_double_directed_roundings_in_a_region(rng):
    n = 700
    a, b, c = _inputs(rng, n, np.float64)
    out = poison(n * 3, np.float64)
    k = ac.RawModule(code=SOURCE).get_function("rounded64")
    k((2,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
    _check_directed(out.get().reshape(n, 3), a, b, c, np.float64, [(0, "fma", "rm"), (1, "add", "rp"), (2, "mul", "rz")])


SOFTMAX = r"""
// softmax of each row, a block per row: shared-memory trees for the row's max and sum, expf
// (nvcc's: fma.rm and ex2.approx.ftz) and __saturatef between barriers
extern "C" __global__ void softmax_rows(const float* x, float* out, float* clamped, int C) {
    __shared__ float part[128];
    const float* r = x + (size_t)blockIdx.x * C;
    float m = -__int_as_float(0x7f800000);
    for (int i = threadIdx.x; i < C; i += blockDim.x) m = fmaxf(m, r[i]);
    part[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + s]);
        __syncthreads();
    }
    m = part[0];
    __syncthreads();
    float sum = 0.0f;
    for (int i = threadIdx.x; i < C; i += blockDim.x) sum += expf(r[i] - m);
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    sum = part[0];
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        out[(size_t)blockIdx.x * C + i] = expf(r[i] - m) / sum;
        clamped[(size_t)blockIdx.x * C + i] = __saturatef(r[i]);
    }
}
"""


def test_expf_and_saturate_in_a_block_program(rng):
    """A block program takes the kernel (its expf, __saturatef) and computes numpy's softmax."""
    from anycuda.compiler import pipeline
    from anycuda.cudac import compile_to_ptx
    ptx = compile_to_ptx(SOFTMAX)
    pipeline.block_program_ir(ptx, "softmax.ptx", "softmax_rows", 128)     # raises NotVectorisable if refused
    rows, C = 6, 1000
    x = (rng.standard_normal((rows, C)) * 4).astype(np.float32)
    out, clamped = poison(rows * C, np.float32), poison(rows * C, np.float32)
    k = ac.RawModule(code=SOFTMAX).get_function("softmax_rows")
    k((rows,), (128,), (ac.asarray(x), out, clamped, np.int32(C)))
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out.get().reshape(rows, C), e / e.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-9)
    assert _bits_equal(clamped.get(), np.clip(x, 0, 1).ravel())
