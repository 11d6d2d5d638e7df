"""Tiles loaded in turns by block programs (compiler/vector/): a warp's addresses that are a
few runs of consecutive elements (a tile's rows with their halo, `t / W`, `t % W`) are a masked
access per run (blockmemory._run_by_run), many runs a gather; `tile[t / W][t % W]`, which
nvcc writes through `t - (t / W) * W`, is a ramp again where the shapeless parts cancel
(blockforms.py), and nowhere else; such loads in kernels of few barriers are prefetched for
the worker's next blocks (blockmemory._prefetch_lanes_next_blocks).

Each kernel runs against numpy on fresh random inputs with poisoned outputs, and the tests
check that a block program ran it.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler import pipeline
from anycuda.compiler.vector import blockmemory
from anycuda.cudac import compile_to_ptx
from conftest import is_poison, ran_as_block_program

TILES = r"""
// a block's tile of W x H elements (its halo of 2 on each side included) loaded in turns
// through t / W and t % W, then each thread's output from the tile: a row of W elements is two
// or three runs of a vector of 32 lanes (W = 20), three to four (W = 12), seven (W = 5)
template <int W, int H>
__device__ void tile_sum(const float* in, float* out, int w, int h) {
    __shared__ float tile[H][W];
    int x0 = blockIdx.x * (W - 4) - 2, y0 = blockIdx.y * (H - 4) - 2;
    int threads = blockDim.x * blockDim.y;
    for (int t = threadIdx.y * blockDim.x + threadIdx.x; t < W * H; t += threads) {
        int ty = t / W, tx = t % W, xx = x0 + tx, yy = y0 + ty;
        tile[ty][tx] = xx >= 0 && xx < w && yy >= 0 && yy < h ? in[yy * w + xx] : 0.0f;
    }
    __syncthreads();
    for (int t = threadIdx.y * blockDim.x + threadIdx.x; t < (W - 4) * (H - 4); t += threads) {
        int x = blockIdx.x * (W - 4) + t % (W - 4), y = blockIdx.y * (H - 4) + t / (W - 4);
        int tx = t % (W - 4) + 2, ty = t / (W - 4) + 2;
        if (x < w && y < h)
            out[y * w + x] = tile[ty][tx] + 2.0f * tile[ty - 2][tx + 1] - tile[ty + 2][tx - 2];
    }
}
extern "C" __global__ void tile20(const float* in, float* out, int w, int h) { tile_sum<20, 20>(in, out, w, h); }
extern "C" __global__ void tile12(const float* in, float* out, int w, int h) { tile_sum<12, 12>(in, out, w, h); }
extern "C" __global__ void tile5(const float* in, float* out, int w, int h) { tile_sum<5, 36>(in, out, w, h); }

// the same load into rows padded by one element: (t / W) * (W + 1) + t % W leaves t / W over,
// so the shared store has no shape and looks at its addresses
extern "C" __global__ void padded_rows(const float* in, float* out, int n) {
    __shared__ float tile[20 * 21];
    int threads = blockDim.x * blockDim.y, t0 = threadIdx.y * blockDim.x + threadIdx.x;
    const float* mine = in + (size_t)blockIdx.x * 400;
    for (int t = t0; t < 400; t += threads) tile[(t / 20) * 21 + t % 20] = mine[t];
    __syncthreads();
    for (int t = t0; t < 400; t += threads) out[(size_t)blockIdx.x * 400 + t] = tile[(t % 20) * 21 + t / 20];
}
"""

CARRIED = r"""
// r = t - 3 (t / 3) is a sum of the first round's q; q changes each round, so 3 q + r is t in
// no round after the first: a sum must not cancel a round's q against another's
extern "C" __global__ void carried_quotient(int* out, int rounds) {
    int t = threadIdx.x;
    int q = t / 3, r = t - q * 3;
    #pragma unroll 1
    for (int k = 0; k < rounds; ++k) {
        out[(blockIdx.x * rounds + k) * 1024 + q * 3 + r] = t;
        q = (t + k + 1) / 3;
    }
    __syncthreads();
}
"""

HALO = 2


def _tile_reference(img, W, H):
    """out[y, x] = t[y, x] + 2 t[y - 2, x + 1] - t[y + 2, x - 2], zero outside the image."""
    h, w = img.shape
    pad = np.zeros((h + 2 * HALO, w + 2 * HALO), np.float64)
    pad[HALO:HALO + h, HALO:HALO + w] = img

    def at(dy, dx):
        return pad[HALO + dy:HALO + dy + h, HALO + dx:HALO + dx + w]
    return at(0, 0) + 2 * at(-2, 1) - at(2, -2)


def _recorded_looks(monkeypatch):
    """A list that gets (load or store, in shared memory) for each access that looks at its
    addresses when it runs (blockmemory._runs_or_gathered) while a program is made."""
    looked = []
    original = blockmemory.BlockMemory._runs_or_gathered

    def recorded(self, addrs, elem, size, value):
        looked.append(("store" if value is not None else "load", self.in_shared))
        return original(self, addrs, elem, size, value)
    monkeypatch.setattr(blockmemory.BlockMemory, "_runs_or_gathered", recorded)
    return looked


@pytest.mark.parametrize("block", [(32, 8), (16, 16), (64, 1)])
@pytest.mark.parametrize("kernel,W,H", [("tile20", 20, 20), ("tile12", 12, 12), ("tile5", 5, 36)])
def test_tile_rows_in_runs(compile_cuda, rng, poison, monkeypatch, kernel, W, H, block):
    """A tile's rows with their halo: the global load looks at its addresses (runs, or a
    gather where there are many) and the shared store `tile[t / W][t % W]` is a ramp (no look);
    blocks inside the image and at its four edges (lanes off the mask) against numpy."""
    ptx = compile_to_ptx(TILES, name="tiles.cu")
    looked = _recorded_looks(monkeypatch)
    ir_text = pipeline.block_program_ir(ptx, "tiles.ptx", kernel, block + (1,))
    assert ("load", False) in looked and ("store", True) not in looked, looked
    assert "run.do" in ir_text                              # (the loop over a warp's runs)
    w, h = 3 * (W - 4) + 5, 2 * (H - 4) + 3
    img = rng.standard_normal((h, w)).astype(np.float32)
    out = poison(w * h, np.float32)
    k = compile_cuda(TILES, name="tiles.cu").get_function(kernel)
    grid = (-(-w // (W - 4)), -(-h // (H - 4)))
    k(grid, block, (ac.asarray(img), out, np.int32(w), np.int32(h)))
    np.testing.assert_allclose(out.get().reshape(h, w), _tile_reference(img.astype(np.float64), W, H),
                               rtol=1e-5, atol=1e-5)
    assert ran_as_block_program(k, block + (1,))


@pytest.mark.parametrize("block", [(32, 8), (16, 4)])
def test_padded_rows_keep_no_shape(compile_cuda, rng, poison, monkeypatch, block):
    """`(t / 20) * 21 + t % 20` is t + t / 20: its terms do not cancel, so the shared store
    looks at its addresses; the transposed read back is right."""
    ptx = compile_to_ptx(TILES, name="tiles.cu")
    looked = _recorded_looks(monkeypatch)
    pipeline.block_program_ir(ptx, "tiles.ptx", "padded_rows", block + (1,))
    assert ("store", True) in looked, looked
    blocks = 5
    x = rng.standard_normal(blocks * 400).astype(np.float32)
    out = poison(blocks * 400, np.float32)
    k = compile_cuda(TILES, name="tiles.cu").get_function("padded_rows")
    k((blocks,), block, (ac.asarray(x), out, np.int32(blocks * 400)))
    want = x.reshape(blocks, 20, 20).transpose(0, 2, 1).reshape(-1)
    np.testing.assert_array_equal(out.get(), want)
    assert ran_as_block_program(k, block + (1,))


def test_sums_do_not_cancel_across_rounds(compile_cuda, poison):
    """A quotient redefined in a loop is another value each round: `3 q + r` is t in the
    first round only, and each round's stores land where the GPU's would."""
    rounds, blocks, threads = 4, 3, 256
    out = poison(blocks * rounds * 1024, np.int32)
    k = compile_cuda(CARRIED, name="carried.cu").get_function("carried_quotient")
    k((blocks,), (threads,), (out, np.int32(rounds)))
    want = np.full((blocks, rounds, 1024), -1, np.int64)
    t = np.arange(threads)
    for r in range(rounds):
        q = t // 3 if r == 0 else (t + r) // 3
        want[:, r, 3 * q + t % 3] = t
    got = out.get().reshape(blocks, rounds, 1024).astype(np.int64)
    written = want >= 0
    np.testing.assert_array_equal(got[written], want[written])
    assert is_poison(got[~written].astype(np.int32)).all()
    assert ran_as_block_program(k, threads)


def test_shapeless_tile_loads_prefetched_for_the_next_blocks(compile_cuda, rng, poison):
    """In a kernel of one barrier, the tile load through `t / W`, `t % W` (no shape, in a loop)
    is prefetched for the worker's next blocks by the step warp 0 measured at its first pass
    (a flag per block); over many blocks, each worker's chunks stepping on, the results hold."""
    ptx = compile_to_ptx(TILES, name="tiles.cu")
    ir_text = pipeline.block_program_ir(ptx, "tiles.ptx", "tile20", (16, 16, 1))
    assert re.search(r'%"block\.seen\d+" = alloca', ir_text) and "llvm.prefetch" in ir_text
    w, h = 16 * 23 + 7, 16 * 9 + 3
    img = rng.standard_normal((h, w)).astype(np.float32)
    k = compile_cuda(TILES, name="tiles.cu").get_function("tile20")
    grid = (-(-w // 16), -(-h // 16))
    want = _tile_reference(img.astype(np.float64), 20, 20)
    for _ in range(2):
        out = poison(w * h, np.float32)
        k(grid, (16, 16), (ac.asarray(img), out, np.int32(w), np.int32(h)))
        np.testing.assert_allclose(out.get().reshape(h, w), want, rtol=1e-5, atol=1e-5)
    assert ran_as_block_program(k, (16, 16, 1))
