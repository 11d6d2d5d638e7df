"""Blocks in groups (compiler/vector/blockgroups.py): a block program for a kernel without barriers,
warp instructions or shared memory runs the neighbouring blocks of a row of the grid together, so
that the rounds of its loop run in turns over all of their warps. Each thread must still see its
own block's index and its own place in it, at the grid's edge too, where a group has fewer
blocks than it could."""
from __future__ import annotations

import re

import numpy as np
import pytest

from anycuda.compiler import pipeline
from conftest import is_poison, ran_as_block_program

TAGGED = r"""
// a march along z whose values name the thread's block and place in it
extern "C" __global__ void tagged_march(const float* in, float* out, int nx, int ny, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    size_t plane = (size_t)nx * ny;
    for (int z = 0; z < nz; ++z) {
        size_t i = z * plane + (size_t)y * nx + x;
        out[i] = 2.0f * in[i] + (z + 1 < nz ? in[i + plane] : 0.0f)
                 + 1000.0f * blockIdx.x + 100.0f * blockIdx.y + 10.0f * threadIdx.y + 0.5f * (threadIdx.x & 7);
    }
}
// no bounds test: only the grid's blocks may write
extern "C" __global__ void unguarded_march(const float* in, float* out, int pitch, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    for (int z = 0; z < nz; ++z) out[(size_t)z * pitch + x] = in[(size_t)z * pitch + x] + 1.0f;
}
// each block marches as far as its index says: the group's warps leave the loop in different turns
extern "C" __global__ void uneven_march(const float* in, float* out, int pitch) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, z = 0;
    for (; z < (int)(blockIdx.x % 5) + 1; ++z) out[(size_t)z * pitch + x] = in[(size_t)z * pitch + x] * (z + 1);
    out[(size_t)5 * pitch + x] = z + 0.25f * threadIdx.x;
}
// the same march with its plane in shared memory: blocks that share a window run alone
extern "C" __global__ void shared_march(const float* in, float* out, int nx, int nz) {
    __shared__ float row[64];
    int x = blockIdx.x * 64 + threadIdx.x;
    for (int z = 0; z < nz; ++z) {
        __syncthreads();
        row[threadIdx.x] = x < nx ? in[(size_t)z * nx + x] : 0.0f;
        __syncthreads();
        if (x < nx) out[(size_t)z * nx + x] = row[threadIdx.x] + row[63 - threadIdx.x];
    }
}
// a warp shuffle in the march: a warp's lanes exchange values, so its blocks run alone
extern "C" __global__ void shuffled_march(const float* in, float* out, int pitch, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    for (int z = 0; z < nz; ++z) {
        float v = in[(size_t)z * pitch + x];
        out[(size_t)z * pitch + x] = v + __shfl_xor_sync(0xffffffff, v, 1);
    }
}
"""


def _leader_test(ir_text: str, group: int) -> bool:
    """Whether the program returns unless its block's x index is a multiple of `group`."""
    return re.search(rf"urem i32 %[\w.\"]+, {group}\b", ir_text) is not None


def _expected(u, block):
    nz, ny, nx = u.shape
    ahead = np.zeros_like(u)
    ahead[:-1] = u[1:]
    x, y = np.arange(nx)[None, :], np.arange(ny)[:, None]
    tags = (1000.0 * (x // block[0]) + 100.0 * (y // block[1]) + 10.0 * (y % block[1])
            + 0.5 * ((x % block[0]) & 7)).astype(np.float32)
    return np.float32(2) * u + ahead + tags[None]


def test_groups_of_blocks_keep_each_threads_indices(compile_cuda, rng, poison):
    """A march along z in blocks of 32 x 4 and of 64 threads: a program of eight and of four
    blocks (GROUP_ROW_THREADS) whose outputs name each thread's block and place, on grids whose
    rows end in a part of a group (11 and 5 blocks) and rows of threads past the data."""
    import anycuda as ac
    from anycuda.cudac import compile_to_ptx
    ptx = compile_to_ptx(TAGGED, name="tagged.cu")
    assert _leader_test(pipeline.block_program_ir(ptx, "tagged.ptx", "tagged_march", (32, 4, 1)), 8)
    assert _leader_test(pipeline.block_program_ir(ptx, "tagged.ptx", "tagged_march", (64, 1, 1)), 4)
    whole_row = pipeline.block_program_ir(ptx, "tagged.ptx", "tagged_march", (256, 1, 1))
    assert not any(_leader_test(whole_row, group) for group in (2, 4, 8))
    mod = compile_cuda(TAGGED, name="tagged.cu")
    k = mod.get_function("tagged_march")
    for block, nx, ny in (((32, 4, 1), 32 * 11 - 5, 10), ((64, 1, 1), 64 * 5 - 3, 3), ((32, 1, 1), 96, 2)):
        nz = int(rng.integers(3, 9))
        u = rng.standard_normal((nz, ny, nx)).astype(np.float32)
        out = poison(u.size, np.float32)
        grid = (-(-nx // block[0]), -(-ny // block[1]))
        k(grid, block, (ac.asarray(u), out, np.int32(nx), np.int32(ny), np.int32(nz)))
        np.testing.assert_allclose(out.get().reshape(u.shape), _expected(u, block), rtol=1e-6, atol=1e-4)
        assert ran_as_block_program(k, block)


def test_a_group_at_the_grids_edge_runs_only_the_grids_blocks(compile_cuda, rng, poison):
    """A row of 11 blocks 32 wide is a group of eight and one of three: the blocks past the
    grid's edge, which a kernel without a bounds test would let write, do not run (the columns
    past the grid's stay poisoned)."""
    import anycuda as ac
    mod = compile_cuda(TAGGED, name="tagged.cu")
    k = mod.get_function("unguarded_march")
    pitch, nz, blocks = 512, 6, 11
    u = rng.standard_normal((nz, pitch)).astype(np.float32)
    out = poison(u.size, np.float32)
    k((blocks,), (32,), (ac.asarray(u), out, np.int32(pitch), np.int32(nz)))
    got = out.get().reshape(nz, pitch)
    np.testing.assert_array_equal(got[:, :32 * blocks], u[:, :32 * blocks] + np.float32(1))
    assert is_poison(got[:, 32 * blocks:]).all()
    assert ran_as_block_program(k, 32)


def test_blocks_of_a_group_may_leave_their_loop_in_different_turns(compile_cuda, rng, poison):
    """Blocks whose loops run 1-5 rounds by their index, in groups of eight: each leaves in its
    own turn and what it holds past the loop (its count of rounds) is its own; the planes it
    did not reach stay poisoned."""
    import anycuda as ac
    mod = compile_cuda(TAGGED, name="tagged.cu")
    k = mod.get_function("uneven_march")
    blocks = 13
    pitch = 32 * blocks
    u = rng.standard_normal((5, pitch)).astype(np.float32)
    out = poison(6 * pitch, np.float32)
    k((blocks,), (32,), (ac.asarray(u), out, np.int32(pitch)))
    got = out.get().reshape(6, pitch)
    rounds = np.repeat(np.arange(blocks) % 5 + 1, 32)
    for z in range(5):
        reached = rounds > z
        np.testing.assert_array_equal(got[z, reached], u[z, reached] * np.float32(z + 1))
        assert is_poison(got[z, ~reached]).all()
    np.testing.assert_array_equal(got[5], rounds + np.float32(0.25) * np.tile(np.arange(32), blocks))
    assert ran_as_block_program(k, 32)


def _alone(compile_cuda, rng, poison, kernel, blocks, width, nz):
    """Run `kernel` (march(in, out, nx, nz)) on `blocks` blocks `width` wide, after checking
    that its program has no leader test (each block runs alone); (input, output) as nz x nx."""
    import anycuda as ac
    from anycuda.cudac import compile_to_ptx
    ptx = compile_to_ptx(TAGGED, name="tagged.cu")
    assert not _leader_test(pipeline.block_program_ir(ptx, "tagged.ptx", kernel, width), 256 // width)
    nx = blocks * width
    u = rng.standard_normal((nz, nx)).astype(np.float32)
    out = poison(u.size, np.float32)
    compile_cuda(TAGGED, name="tagged.cu").get_function(kernel)((blocks,), (width,),
                                                               (ac.asarray(u), out, np.int32(nx), np.int32(nz)))
    return u, out.get().reshape(nz, nx)


def test_blocks_with_shared_memory_or_barriers_run_alone(compile_cuda, rng, poison):
    """A kernel with shared memory and barriers is not grouped: its program runs one block per
    call (no leader test), and computes what numpy does."""
    u, got = _alone(compile_cuda, rng, poison, "shared_march", 3, 64, 5)
    tiles = u.reshape(5, 3, 64)
    np.testing.assert_array_equal(got.reshape(5, 3, 64), tiles + tiles[:, :, ::-1])


def test_blocks_with_warp_instructions_run_alone(compile_cuda, rng, poison):
    """A kernel with a warp shuffle (no barrier, no shared memory) is not grouped either
    (analysis.suspensions' warp collectives), and computes what numpy does."""
    u, got = _alone(compile_cuda, rng, poison, "shuffled_march", 10, 32, 4)
    np.testing.assert_array_equal(got, u + u[:, np.arange(u.shape[1]) ^ 1])


STRIDED = r"""
// a grid-stride sum, warp shuffles, the warps' sums through shared memory and a barrier: blocks
// meet at barriers after the loop, so groups of them take the loop's rounds in turns, each block
// with a window of shared memory of its own. Each block's loop ends where its index says.
__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    return v;
}
extern "C" __global__ void strided_sums(const float* in, float* out, int n) {
    __shared__ float sums[32];
    float v = 0.0f;
    int end = n - 5 * (int)blockIdx.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < end; i += blockDim.x * gridDim.x) v += in[i];
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) sums[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < blockDim.x / 32 ? sums[threadIdx.x] : 0.0f;
        v = warp_sum(v);
        if (threadIdx.x == 0) out[blockIdx.x] = v + 1000.0f * blockIdx.x;
    }
}
// the same sums through a tree in dynamic shared memory (a size the launch gives, any bytes)
extern "C" __global__ void strided_tree(const int* in, int* out, int n) {
    extern __shared__ int part[];
    int v = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += in[i];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0] * 10 + (int)blockIdx.x;
}
"""


def _strided_reference(x, blocks, threads, n, end_of):
    stride = blocks * threads
    sums = []
    for blk in range(blocks):
        idx = np.concatenate([np.arange(blk * threads + t, end_of(blk), stride) for t in range(threads)])
        sums.append(x[idx[idx < n]].astype(np.float64).sum())
    return np.array(sums)


@pytest.mark.parametrize("threads, blocks", [(64, 35), (128, 13), (256, 7), (512, 5)])
def test_blocks_meeting_at_barriers_after_a_grid_stride_loop_run_in_groups(compile_cuda, rng, poison, threads,
                                                                           blocks):
    import anycuda as ac
    from anycuda.cudac import compile_to_ptx
    from anycuda.compiler.vector import blockgroups
    group = blockgroups.GROUP_STRIDE_THREADS // threads
    ptx = compile_to_ptx(STRIDED, name="strided.cu")
    assert _leader_test(pipeline.block_program_ir(ptx, "strided.ptx", "strided_sums", threads), group)
    module = compile_cuda(STRIDED, name="strided.cu")
    n = blocks * threads * 9 + 77
    x = rng.standard_normal(n).astype(np.float32)
    out = poison(blocks, np.float32)
    fn = module.get_function("strided_sums")
    fn((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)))       # (the grid ends inside a group)
    want = _strided_reference(x, blocks, threads, n, lambda blk: n - 5 * blk) + 1000.0 * np.arange(blocks)
    np.testing.assert_allclose(out.get(), want, rtol=1e-5, atol=1e-3)
    assert ran_as_block_program(fn, threads)
    xi = rng.integers(-100, 100, n).astype(np.int32)
    got = poison(blocks, np.int32)
    tree = module.get_function("strided_tree")
    tree((blocks,), (threads,), (ac.asarray(xi), got, np.int32(n)), shared_mem=4 * threads + 4)
    sums = _strided_reference(xi, blocks, threads, n, lambda blk: n).astype(np.int64)
    np.testing.assert_array_equal(got.get(), sums * 10 + np.arange(blocks))
    assert ran_as_block_program(tree, threads)


WILD = r"""
// block `bad` reads a wild address in its loop: blocks in groups, without barriers or with them
extern "C" __global__ void wild_march(const float* in, float* out, int pitch, int nz, int bad, const float* wild) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    for (int z = 0; z < nz; ++z)
        out[(size_t)z * pitch + x] = blockIdx.x == bad && z == 2 ? *wild : in[(size_t)z * pitch + x];
}
extern "C" __global__ void wild_sums(const float* in, float* out, int n, int bad, const float* wild) {
    __shared__ float sums[32];
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        v += blockIdx.x == bad && i >= n / 2 ? *wild : in[i];
    if ((threadIdx.x & 31) == 0) sums[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = sums[0];
}
"""


@pytest.mark.parametrize("kernel, threads", [("wild_march", 32), ("wild_sums", 128)])
def test_a_fault_in_a_group_names_the_warp_s_block(compile_cuda, rng, kernel, threads):
    import anycuda as ac
    from anycuda.cudac import compile_to_ptx
    from anycuda.compiler.vector import blockgroups
    group = (blockgroups.GROUP_ROW_THREADS if kernel == "wild_march" else blockgroups.GROUP_STRIDE_THREADS) // threads
    assert _leader_test(pipeline.block_program_ir(compile_to_ptx(WILD, name="wild.cu"), "wild.ptx", kernel, threads),
                        group)
    fn = compile_cuda(WILD, name="wild.cu").get_function(kernel)
    blocks, wild, bad = 2 * group + 1, 0xDEAD0000, group + 3
    n = blocks * threads * 4
    x = ac.asarray(rng.standard_normal(n).astype(np.float32))
    out = ac.empty(n, np.float32)
    args = (x, out, np.int32(blocks * threads), np.int32(4)) if kernel == "wild_march" else (x, out, np.int32(n))
    with pytest.raises(ac.CudaError) as e:
        fn((blocks,), (threads,), args + (np.int32(bad), np.uint64(wild)))
        ac.synchronize()
    assert e.value.code == ac.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    assert f"block {bad}:" in str(e.value) and f"0x{wild:x}" in str(e.value)
