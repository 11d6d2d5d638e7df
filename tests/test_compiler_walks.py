"""Walks (compiler/analysis/walks.py): a kernel whose threads each step through memory of their
own (a thread per CSR row, per dense row, per chunk) runs thread after thread, not with a warp's
lanes side by side; kernels whose loops have an access across neighbouring threads, an address
alike in every thread or a slow recurrence keep their lanes. The answers of the analysis on
kernels written in several ways, what the compiler makes of them, and their results against
numpy on fresh inputs with poisoned outputs."""
import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler import pipeline
from anycuda.compiler.analysis.walks import threads_walk_alone
from anycuda.compiler.vector import blockprograms
from anycuda.cudac import compile_to_ptx
from anycuda.ptx.parser import parse
from conformance import made_regions, poison

WALKS = r"""
extern "C" __global__ void csr_rows(int n, const int* rowptr, const int* cols, const int* vals, const int* x,
                                    int* y) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n) {
        int sum = 0;
        for (int j = rowptr[row]; j < rowptr[row + 1]; ++j) sum += vals[j] * x[cols[j]];
        y[row] = sum;
    }
}
extern "C" __global__ void csr_rows_wide(int n, const long long* rowptr, const int* cols, const double* vals,
                                         const double* x, double* y) {
    for (int row = blockIdx.x * blockDim.x + threadIdx.x; row < n; row += blockDim.x * gridDim.x) {
        long long j = rowptr[row], end = rowptr[row + 1];
        double sum = 0;
        while (j < end) { sum += vals[j] * x[cols[j]]; j++; }
        y[row] = sum;
    }
}
extern "C" __global__ void chunk_sums(int n, int K, const int* in, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int s = 0;
    for (int k = 0; k < K; ++k) s += in[i * K + k];
    out[i] = s;
}
extern "C" __global__ void dense_rows(size_t n, const double* A, const double* x, double* y) {
    size_t row = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (row < n) {
        const double* a = A + row * n;
        double s = 0.0;
        for (size_t j = 0; j < n; j++) s += a[j] * x[j];
        y[row] = s;
    }
}
"""

LANES = r"""
extern "C" __global__ void row_max(int rows, int cols, const float* in, float* out) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        const float* p = in + (size_t)r * cols;
        float m = p[0];
        for (int c = 1; c < cols; c++) m = fmaxf(m, p[c]);
        out[r] = m;
    }
}
extern "C" __global__ void naive_gemm(int n, const float* A, const float* B, float* C) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < n) {
        float s = 0.0f;
        for (int k = 0; k < n; ++k) s += A[row * n + k] * B[k * n + col];
        C[row * n + col] = s;
    }
}
extern "C" __global__ void z_march(int nx, int ny, int nz, const float* in, float* out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    for (int z = 1; z < nz; ++z) out[(z * ny + y) * nx + x] = in[(z * ny + y) * nx + x] - in[((z - 1) * ny + y) * nx + x];
}
extern "C" __global__ void all_bodies(int n, const float4* pos, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int j = 0; j < n; ++j) { float dx = pos[j].x - pos[i].x; s += dx * dx; }
    out[i] = s;
}
extern "C" __global__ void saxpy_stride(int n, float a, const float* x, float* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void window_sizet(size_t n, int K, const float* in, float* out) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) {
        float s = 0.0f;
        for (int k = 0; k < K; ++k) s += in[i + k];
        out[i] = s;
    }
}
extern "C" __global__ void window_int(int n, int K, const float* in, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = 0.0f;
        for (int k = 0; k < K; ++k) s += in[i + k];
        out[i] = s;
    }
}
extern "C" __global__ void chunk_total(const int* in, int* total, int n, int per) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < per; ++k) { int j = i * per + k; if (j < n) atomicAdd(total, in[j]); }
}
extern "C" __global__ void chains(int n, const int* first, const int* next, const int* vals, int* y) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n) {
        int sum = 0;
        for (int j = first[row]; j >= 0; j = next[j]) sum += vals[j];
        y[row] = sum;
    }
}
"""


def _kernels(source):
    ptx = compile_to_ptx(source)
    return ptx, {f.name: f for f in parse(ptx, "walks.ptx").functions if f.is_kernel}


@pytest.fixture(scope="module")
def walks():
    return _kernels(WALKS)


@pytest.fixture(scope="module")
def lanes():
    return _kernels(LANES)


@pytest.mark.parametrize("kernel", ["csr_rows", "csr_rows_wide", "chunk_sums", "dense_rows"])
def test_threads_that_walk(walks, kernel):
    f = walks[1][kernel]
    assert threads_walk_alone(f.body, [d.name for d in f.params])


@pytest.mark.parametrize("kernel", ["row_max", "naive_gemm", "z_march", "all_bodies", "saxpy_stride", "window_sizet",
                                    "window_int", "chunk_total", "chains"])
def test_threads_that_keep_their_lanes(lanes, kernel):
    """A slow recurrence (fmaxf), an access across neighbouring threads (B[k * n + col], the
    z-march's planes, the grid-stride loop's x[i], a sliding window's `in[i + k]` stepped a
    float a turn from a start one float apart in neighbouring threads, through an int or a
    size_t index), an address alike in every thread (pos[j]), addresses loaded by the last
    turn (a linked list), atomics (a chunk's total: side by side, a warp's are one): none is
    a walk."""
    f = lanes[1][kernel]
    assert not threads_walk_alone(f.body, [d.name for d in f.params])


def test_walks_get_neither_a_region_nor_a_block_program(walks):
    ptx, kernels = walks
    made = made_regions(WALKS)[0]
    for name in kernels:
        assert name not in made, f"an entry region for {name}"
        with pytest.raises(blockprograms.NotVectorisable, match="walks"):
            pipeline.block_program_ir(ptx, "walks.ptx", name, (128, 1, 1))
    # and a kernel that keeps its lanes still gets its region (the check is not always no)
    assert "row_max" in made_regions(LANES)[0]


@pytest.mark.parametrize("block", [128, 96, 40])
def test_csr_rows_against_numpy(rng, block):
    """Rows of 0 to 70 entries, in integers (exact); blocks of whole warps and not."""
    n, m = 1000, 300
    lengths = rng.integers(0, 71, n)
    rowptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    cols = rng.integers(0, m, rowptr[-1]).astype(np.int32)
    vals = rng.integers(-1000, 1000, rowptr[-1]).astype(np.int32)
    x = rng.integers(-1000, 1000, m).astype(np.int32)
    want = np.array([(vals[a:b].astype(np.int64) * x[cols[a:b]]).sum() for a, b in zip(rowptr[:-1], rowptr[1:])])
    y = poison(n, np.int32)
    k = ac.RawModule(code=WALKS).get_function("csr_rows")
    k(((n + block - 1) // block,), (block,),
      (np.int32(n), ac.asarray(rowptr), ac.asarray(cols), ac.asarray(vals), ac.asarray(x), y))
    np.testing.assert_array_equal(y.get(), want.astype(np.int32))


def test_wide_csr_rows_in_a_grid_stride_loop(rng):
    n, m = 3000, 500
    lengths = rng.integers(0, 40, n)
    rowptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    cols = rng.integers(0, m, rowptr[-1]).astype(np.int32)
    vals, x = rng.standard_normal(rowptr[-1]), rng.standard_normal(m)
    want = np.array([np.dot(vals[a:b], x[cols[a:b]]) for a, b in zip(rowptr[:-1], rowptr[1:])])
    y = poison(n, np.float64)
    k = ac.RawModule(code=WALKS).get_function("csr_rows_wide")
    k((5,), (128,), (np.int32(n), *(ac.asarray(a) for a in (rowptr, cols, vals, x)), y))
    np.testing.assert_allclose(y.get(), want, rtol=1e-12, atol=1e-12)


def test_chunk_sums_and_dense_rows(rng):
    n, K = 777, 37
    data = rng.integers(-10 ** 6, 10 ** 6, n * K).astype(np.int32)
    out = poison(n, np.int32)
    mod = ac.RawModule(code=WALKS)
    mod.get_function("chunk_sums")(((n + 63) // 64,), (64,), (np.int32(n), np.int32(K), ac.asarray(data), out))
    np.testing.assert_array_equal(out.get(), data.reshape(n, K).astype(np.int64).sum(1).astype(np.int32))
    rows = 300
    A, x = rng.standard_normal((rows, rows)), rng.standard_normal(rows)
    y = poison(rows, np.float64)
    mod.get_function("dense_rows")((3,), (128,), (np.uint64(rows), ac.asarray(A), ac.asarray(x), y))
    np.testing.assert_allclose(y.get(), A @ x, rtol=1e-12, atol=1e-12)


def test_a_long_chain_of_definitions():
    """An address at the end of 5,000 additions (far past Python's recursion limit): the
    strides are followed a bounded way back, and the answer comes (a walk: the additions of
    the thread index make the start nothing the analysis knows)."""
    lines = [".version 7.0", ".target sm_70", ".address_size 64",
             ".visible .entry deep(.param .u64 p) {", ".reg .b64 %rd<5010>;", ".reg .b32 %r<4>;",
             ".reg .pred %p<2>;", ".reg .f32 %f<2>;",
             "ld.param.u64 %rd0, [p];", "mov.u32 %r1, %tid.x;", "cvt.u64.u32 %rd1, %r1;"]
    lines += [f"add.s64 %rd{i}, %rd{i - 1}, %rd1;" for i in range(2, 5002)]
    lines += ["mov.u32 %r2, 0;", "$L:", "ld.global.f32 %f1, [%rd5001];", "add.s64 %rd5001, %rd5001, 4;",
              "add.u32 %r2, %r2, 1;", "setp.lt.u32 %p1, %r2, 10;", "@%p1 bra $L;", "ret;", "}"]
    f = parse("\n".join(lines), "deep.ptx").functions[0]
    assert threads_walk_alone(f.body, ["p"])
