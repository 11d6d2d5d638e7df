"""A warp whose lanes all stop at one shuffle again after the last one is resolved at once
by the collective round (scheduler: the warp's run of shuffles goes on without the block's
scheduler in between); lanes that part ways (a partial mask, a lane that skips the chain)
and a barrier after it take the general rounds. numpy is the reference."""
import numpy as np
import pytest

import anycuda as ac
from conformance import poison

SOURCE = r"""
extern "C" __global__ void chains(const int* x, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    int w = v;
    if (threadIdx.x & 1) w += 1;
    else for (int o = 2; o < 32; o <<= 1) w += __shfl_xor_sync(0x55555555, w, o);
    w += __shfl_down_sync(0xffffffff, w, 1);
    __syncthreads();
    out[i] = w;
}
"""


@pytest.mark.parametrize("block", [32, 96, 256])
def test_runs_of_shuffles_and_lanes_that_part(rng, block):
    grid = 3
    x = rng.integers(-1000, 1000, grid * block).astype(np.int32)
    out = poison(grid * block, np.int32)
    ac.RawModule(code=SOURCE).get_function("chains")((grid,), (block,), (ac.asarray(x), out))
    v = np.repeat(x.reshape(-1, 32).sum(axis=1), 32)          # each lane: its warp's sum
    lane = np.arange(grid * block) % 32
    w = np.where(lane & 1, v + 1, 16 * v)
    below = np.where(lane < 31, np.roll(w, -1), w)              # shfl.down 1: lane 31 keeps its own
    np.testing.assert_array_equal(out.get(), w + below)
