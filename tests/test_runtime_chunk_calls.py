"""A kernel without sites runs each chunk of blocks in one call (launch.emit_run_blocks):
the loop there counts the blocks' coordinates instead of dividing, and keeps the running
block's index where a memory fault finds it. These tests run grids whose chunks cross rows
and planes of the grid, in both block orders, and fault in the middle of a chunk."""
import re

import numpy as np
import pytest

import anycuda as ac
from anycuda.runtime.errors import CudaError, CUresult
from conformance import poison

SOURCE = r"""
// each thread writes where its block is, at its own place in a grid of blocks of 32 threads
extern "C" __global__ void where(int* out) {
    int block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    int i = block * blockDim.x + threadIdx.x;
    out[3 * i] = blockIdx.x;
    out[3 * i + 1] = blockIdx.y;
    out[3 * i + 2] = blockIdx.z;
}
// block `bad` writes through `wild`; the others write their index
extern "C" __global__ void faults_in(int* out, int* wild, int bad) {
    if (blockIdx.x == bad) *wild = 1;
    else out[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x;
}
"""


@pytest.fixture(scope="module")
def mod():
    return ac.RawModule(code=SOURCE)


def expected_coordinates(grid, threads):
    gx, gy, gz = grid
    z, y, x = np.meshgrid(np.arange(gz), np.arange(gy), np.arange(gx), indexing="ij")
    per_block = np.stack([x.ravel(), y.ravel(), z.ravel()], axis=1).astype(np.int32)
    return np.repeat(per_block, threads, axis=0).ravel()


@pytest.mark.parametrize("order", ["forward", "backward"])
@pytest.mark.parametrize("grid", [(7, 5, 3), (1, 9, 4), (13, 1, 1), (3, 1, 11)])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_every_block_runs_once_at_its_coordinates(monkeypatch, mod, order, grid, workers):
    """Chunks of 105 // 16 = 6 blocks (one worker) cross the rows of a 7 x 5 x 3 grid and its
    planes; every block runs once, with its own blockIdx."""
    from anycuda.runtime import device
    monkeypatch.setenv("ANYCUDA_BLOCK_ORDER", order)
    monkeypatch.setenv("ANYCUDA_NUM_THREADS", workers)
    device.worker_count.cache_clear()
    try:
        m = ac.RawModule(code=SOURCE)      # (a launch's choices are kept per kernel)
        n = int(np.prod(grid)) * 32
        out = poison(3 * n, np.int32)
        m.get_function("where")(grid, (32,), (out,))
        np.testing.assert_array_equal(out.get(), expected_coordinates(grid, 32))
    finally:
        device.worker_count.cache_clear()


@pytest.mark.usefixtures("one_worker")
@pytest.mark.parametrize("bad", [0, 101, 199])
def test_a_fault_in_the_middle_of_a_chunk_names_its_block(mod, bad):
    """200 blocks on one worker: chunks of 12, so block 101 is the sixth of its chunk."""
    out = poison(200 * 32, np.int32)
    mod.get_function("faults_in")((200,), (32,), (out, np.uint64(16), np.int32(bad)))
    with pytest.raises(CudaError) as e:
        ac.synchronize()                  # the launch returned at once: its fault is reported here
    assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    assert re.search(rf"block {bad}\b", str(e.value)), str(e.value)
    ran = out.get().reshape(200, 32)
    # the blocks before the faulting one in its worker's order all ran
    assert (ran[:bad] == np.arange(bad)[:, None]).all()
    fine = poison(200 * 32, np.int32)
    mod.get_function("faults_in")((200,), (32,), (fine, np.uint64(16), np.int32(-1)))
    np.testing.assert_array_equal(fine.get().reshape(200, 32), np.repeat(np.arange(200)[:, None], 32, axis=1))
