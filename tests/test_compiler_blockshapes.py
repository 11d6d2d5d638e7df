"""Block programs for 2-D and 3-D blocks (compiler/vector/blockprograms.py): with x a multiple
of 32 each warp is 32 consecutive x values of one row, %tid.y and %tid.z alike in it; with x a
multiple of 16 or 8 only, each vector is one row of that many threads, and a kernel with warp
instructions keeps the rounds.

Each kernel runs against numpy on fresh random inputs with poisoned outputs, at shapes with
one and several warps per row and partial edge blocks, and the test checks that a block
program ran it.
"""
from __future__ import annotations

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.vector import blockprograms
from conftest import ran_as_block_program

SOURCE = r"""
#define TILE 32

// the tiled transpose people write: a padded tile, rows of the tile a blockDim.y apart
extern "C" __global__ void transpose_tiled(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += blockDim.y)
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += blockDim.y)
        if (x < rows && y + j < cols) out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

// a 5-point stencil through a shared tile with a one-point halo, any block shape
extern "C" __global__ void stencil_halo(const float* in, float* out, int w, int h) {
    extern __shared__ float tile[];
    int bw = blockDim.x + 2;
    int tx = threadIdx.x + 1, ty = threadIdx.y + 1;
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    bool inside = x < w && y < h;
    tile[ty * bw + tx] = inside ? in[y * w + x] : 0.0f;
    if (threadIdx.x == 0) tile[ty * bw] = (x > 0 && y < h) ? in[y * w + x - 1] : 0.0f;
    if (threadIdx.x == blockDim.x - 1) tile[ty * bw + tx + 1] = (x + 1 < w && y < h) ? in[y * w + x + 1] : 0.0f;
    if (threadIdx.y == 0) tile[tx] = (y > 0 && x < w) ? in[(y - 1) * w + x] : 0.0f;
    if (threadIdx.y == blockDim.y - 1) tile[(ty + 1) * bw + tx] = (y + 1 < h && x < w) ? in[(y + 1) * w + x] : 0.0f;
    __syncthreads();
    if (inside)
        out[y * w + x] = 0.5f * tile[ty * bw + tx] + 0.125f * (tile[ty * bw + tx - 1] + tile[ty * bw + tx + 1]
                                                                + tile[(ty - 1) * bw + tx] + tile[(ty + 1) * bw + tx]);
}

// every thread's three indices, and a value from the thread mirrored in y and z
extern "C" __global__ void mirror3d(const int* in, int* out, int* where) {
    extern __shared__ int s[];
    int X = blockDim.x, Y = blockDim.y, Z = blockDim.z;
    int t = (threadIdx.z * Y + threadIdx.y) * X + threadIdx.x;
    int base = blockIdx.x * X * Y * Z;
    s[t] = in[base + t];
    __syncthreads();
    int m = ((Z - 1 - threadIdx.z) * Y + (Y - 1 - threadIdx.y)) * X + threadIdx.x;
    out[base + t] = s[m];
    where[base + t] = threadIdx.x + 1000 * threadIdx.y + 1000000 * threadIdx.z;
}

// the classic tree over any block width (s halves, rounding down, as the loop is written)
extern "C" __global__ void tree_sum(const int* in, int* out) {
    extern __shared__ int s[];
    int t = threadIdx.x;
    s[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if (t < h) s[t] += s[t + h];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

// a warp shuffle after a barrier: rows narrower than a warp put two rows in one warp
extern "C" __global__ void row_pairs(const int* in, int* out) {
    __shared__ int s[1024];
    int t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    s[t] = in[blockIdx.x * 1024 + t] * 3;
    __syncthreads();
    int v = s[t ^ 1] + (threadIdx.x << 8);
    out[blockIdx.x * 1024 + t] = v + __shfl_xor_sync(0xffffffffu, v, 16);
}
"""


@pytest.fixture
def module(compile_cuda):
    return compile_cuda(SOURCE, name="blockshapes.cu")


def test_supported_shapes():
    for block in ((32, 8, 1), (64, 4, 1), (32, 32, 1), (96, 3, 1), (32, 2, 2), (256, 1, 1)):
        assert blockprograms.supported_shape(block) and blockprograms.lane_width(block) == 32
    for block, lanes in (((16, 16, 1), 16), ((48, 2, 1), 16), ((8, 8, 8), 8), ((24, 4, 1), 8), ((16, 1, 1), 16)):
        assert blockprograms.supported_shape(block) and blockprograms.lane_width(block) == lanes
    for block in ((4, 4, 4), (12, 8, 1), (100, 1, 1), (32, 33, 1), (64, 8, 4), (16, 65, 1)):
        assert not blockprograms.supported_shape(block)


@pytest.mark.parametrize("rows,cols,by", [(100, 70, 8), (64, 96, 4), (33, 40, 32)])
def test_tiled_transpose(module, rng, poison, rows, cols, by):
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    out = poison((cols, rows), np.float32)
    k = module.get_function("transpose_tiled")
    block = (32, by, 1)
    k((-(-cols // 32), -(-rows // 32)), block, (ac.asarray(a), out, np.int32(rows), np.int32(cols)))
    np.testing.assert_array_equal(out.get(), a.T)
    assert ran_as_block_program(k, block)


def _stencil_reference(a):
    p = np.pad(a, 1)
    return 0.5 * a + 0.125 * (p[1:-1, :-2] + p[1:-1, 2:] + p[:-2, 1:-1] + p[2:, 1:-1])


@pytest.mark.parametrize("block", [(32, 8, 1), (64, 4, 1), (96, 3, 1), (32, 1, 1),
                                   (16, 16, 1), (16, 4, 1), (8, 8, 1), (48, 2, 1), (24, 5, 1)])
def test_stencil_with_a_halo(module, rng, poison, block):
    h, w = 45, 150
    a = rng.standard_normal((h, w)).astype(np.float32)
    out = poison((h, w), np.float32)
    k = module.get_function("stencil_halo")
    grid = (-(-w // block[0]), -(-h // block[1]))
    shared = 4 * (block[0] + 2) * (block[1] + 2)
    k(grid, block, (ac.asarray(a), out, np.int32(w), np.int32(h)), shared_mem=shared)
    np.testing.assert_allclose(out.get(), _stencil_reference(a), rtol=1e-6, atol=1e-6)
    assert ran_as_block_program(k, block)


@pytest.mark.parametrize("block", [(32, 2, 2), (64, 3, 2), (32, 1, 4), (16, 2, 2), (8, 4, 3)])
def test_three_dimensional_blocks(module, rng, poison, block):
    X, Y, Z = block
    blocks = 3
    n = blocks * X * Y * Z
    x = rng.integers(-10**6, 10**6, n).astype(np.int32)
    out, where = poison(n, np.int32), poison(n, np.int32)
    k = module.get_function("mirror3d")
    k((blocks,), block, (ac.asarray(x), out, where), shared_mem=4 * X * Y * Z)
    cube = x.reshape(blocks, Z, Y, X)
    np.testing.assert_array_equal(out.get(), cube[:, ::-1, ::-1, :].ravel())
    z, y, xx = np.meshgrid(np.arange(Z), np.arange(Y), np.arange(X), indexing="ij")
    np.testing.assert_array_equal(where.get(), np.tile((xx + 1000 * y + 1000000 * z).ravel(), blocks))
    assert ran_as_block_program(k, block)


def _tree_reference(x, width):
    s = x.reshape(-1, width).astype(np.int64)
    h = width // 2
    while h > 0:
        s[:, :h] += s[:, h:2 * h]
        h //= 2
    return ((s[:, 0] + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)


@pytest.mark.parametrize("width", [48, 80, 16, 24])
def test_tree_sum_over_narrow_rows(module, rng, poison, width):
    """A tree over blocks of 16- or 8-thread vectors: the stretches that skip idle vectors
    (idlewarps.py) count them in the program's own lanes."""
    blocks = 5
    x = rng.integers(-10**6, 10**6, blocks * width).astype(np.int32)
    out = poison(blocks, np.int32)
    k = module.get_function("tree_sum")
    k((blocks,), (width,), (ac.asarray(x), out), shared_mem=4 * width)
    np.testing.assert_array_equal(out.get(), _tree_reference(x, width))
    assert ran_as_block_program(k, (width, 1, 1))


@pytest.mark.parametrize("block", [(16, 8, 1), (8, 4, 2)])
def test_warp_instructions_in_narrow_rows_keep_the_rounds(module, rng, poison, block):
    """A shuffle in blocks whose rows are narrower than a warp: no block program (a vector is
    one row, a warp two or more), and each lane gets its partner 16 lanes away in the warp."""
    threads = block[0] * block[1] * block[2]
    blocks = 2
    x = rng.integers(-10**5, 10**5, blocks * 1024).astype(np.int32)
    out = poison(blocks * 1024, np.int32)
    k = module.get_function("row_pairs")
    k((blocks,), block, (ac.asarray(x), out))
    t = np.arange(threads)
    xs = x.reshape(blocks, 1024).astype(np.int64)
    v = xs[:, t ^ 1] * 3 + ((t % block[0]) << 8)
    want = v + v[:, t ^ 16]
    np.testing.assert_array_equal(out.get().reshape(blocks, 1024)[:, :threads], want.astype(np.int32))
    assert not ran_as_block_program(k, block)
