"""Threads looped y innermost (BlockPlan.by_column): a kernel without sites whose stores run
along threadIdx.y and not along x (analysis.memory.stores_run_along_y: a naive transpose's
`out[x * rows + y]`) has its block's threads looped column by column where the block has
blockfunction.COLUMN_THREADS rows or more, so that those stores are vector stores. The
analysis is checked on the PTX nvcc makes; the kernels against numpy, outputs poisoned,
in block shapes on both sides of the threshold and with partial blocks at the edges."""
import numpy as np
import pytest

import anycuda as ac
from anycuda import ptx
from anycuda.compiler.analysis import memory
from conformance import poison

SOURCE = r"""
// the naive transpose: loads along x, stores along y
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows) out[x * rows + y] = in[y * cols + x];
}

// the naive transpose through size_t indices: nvcc's 64-bit arithmetic, not mul.wide of an int
extern "C" __global__ void transpose_sizet(const float* in, float* out, size_t rows, size_t cols) {
    size_t x = blockIdx.x * (size_t)blockDim.x + threadIdx.x, y = blockIdx.y * (size_t)blockDim.y + threadIdx.y;
    if (x < cols && y < rows) out[x * rows + y] = in[y * cols + x];
}

// a copy: loads and stores along x
extern "C" __global__ void copy2d(const float* in, float* out, int rows, int cols) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows) out[y * cols + x] = in[y * cols + x];
}

// both: a transposed and a straight copy (one store runs along x: rows stay innermost)
extern "C" __global__ void both(const double* in, double* t, double* c, int rows, int cols) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows) {
        double v = in[y * cols + x];
        t[x * rows + y] = 2.0 * v;
        c[y * cols + x] = v + 1.0;
    }
}

// a 3-D block: planes of a transposed volume, and a ticket per thread (any order is CUDA's)
extern "C" __global__ void planes(const int* in, int* out, int* tickets, int* counter, int rows, int cols,
                                  int plane) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = threadIdx.z;
    if (x < cols && y < rows) {
        out[z * plane + x * rows + y] = in[z * plane + y * cols + x] * 3 + z;
        tickets[z * plane + x * rows + y] = atomicAdd(counter, 1);
    }
}
"""


@pytest.fixture(scope="module")
def mod():
    return ac.RawModule(code=SOURCE, name="column_order.cu")


@pytest.mark.parametrize("kernel, along_y", [("transpose", True), ("transpose_sizet", True), ("copy2d", False),
                                             ("both", False), ("planes", True)])
def test_which_kernels_run_by_column(mod, kernel, along_y):
    module = ptx.parse(mod.ptx)
    fn = next(f for f in module.functions if f.name == kernel)
    assert memory.stores_run_along_y(fn.body, [d.name for d in fn.params]) is along_y


@pytest.mark.parametrize("kernel, index", [("transpose", np.int32), ("transpose_sizet", np.uint64)])
@pytest.mark.parametrize("block", [(16, 16), (32, 8), (8, 32), (4, 64), (64, 4), (32, 1), (1, 32), (32, 4)])
@pytest.mark.parametrize("rows, cols", [(96, 160), (37, 53), (51, 70)])
def test_transpose_by_column(mod, rng, kernel, index, block, rows, cols):
    """Blocks with at least COLUMN_THREADS rows loop by column, the others by row: the same
    transpose either way, through int or size_t indices, partial blocks at the edges included."""
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = poison(rows * cols, np.float32)
    grid = ((cols + block[0] - 1) // block[0], (rows + block[1] - 1) // block[1])
    mod.get_function(kernel)(grid, block, (ac.asarray(x), out, index(rows), index(cols)))
    np.testing.assert_array_equal(out.get().reshape(cols, rows), x.T)


@pytest.mark.parametrize("block", [(16, 16), (8, 8)])
def test_a_kernel_storing_both_ways(mod, rng, block):
    rows, cols = 45, 70
    x = rng.standard_normal((rows, cols))
    t, c = poison(rows * cols, np.float64), poison(rows * cols, np.float64)
    grid = ((cols + block[0] - 1) // block[0], (rows + block[1] - 1) // block[1])
    mod.get_function("both")(grid, block, (ac.asarray(x), t, c, np.int32(rows), np.int32(cols)))
    np.testing.assert_array_equal(t.get().reshape(cols, rows), 2.0 * x.T)
    np.testing.assert_array_equal(c.get().reshape(rows, cols), x + 1.0)


@pytest.mark.parametrize("block", [(8, 8, 4), (16, 8, 2), (4, 4, 4)])
def test_a_3d_block_by_column(mod, rng, one_worker, block):
    """Every thread of a 3-D block runs once, whatever the loop order: each takes one ticket."""
    rows, cols, depth = 40, 24, block[2]
    x = rng.integers(-1000, 1000, (depth, rows, cols)).astype(np.int32)
    out, tickets = poison(depth * rows * cols, np.int32), poison(depth * rows * cols, np.int32)
    counter = ac.zeros(1, np.int32)
    grid = ((cols + block[0] - 1) // block[0], (rows + block[1] - 1) // block[1])
    mod.get_function("planes")(grid, block, (ac.asarray(x), out, tickets, counter, np.int32(rows), np.int32(cols),
                                                 np.int32(rows * cols)))
    want = x.transpose(0, 2, 1) * 3 + np.arange(depth)[:, None, None]
    np.testing.assert_array_equal(out.get().reshape(depth, cols, rows), want)
    got = tickets.get().reshape(depth, cols, rows)
    np.testing.assert_array_equal(np.sort(got.ravel()), np.arange(depth * rows * cols))
    # one worker's first block: a block of 8 rows or more takes its tickets down each column
    # of threads (y innermost), a shorter one along each row
    first = got[0, :block[0], :block[1]] - got[0, :block[0], :block[1]].min()       # [x, y]
    steps = np.diff(first, axis=1 if block[1] >= 8 else 0)
    assert (steps == 1).all(), first
