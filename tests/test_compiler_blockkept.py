"""What a warp of a block program keeps from stretch to stretch (compiler/vector/blockstretches.py):
a register live across several barriers and not written between them is stored in its warp's
slot once, not again at each barrier.

The kernel runs against numpy on fresh random inputs with poisoned outputs; the stores into
the kept slots are counted in the block program's IR.
"""
from __future__ import annotations

import re

import numpy as np

import anycuda as ac
from anycuda.compiler import pipeline
from anycuda.cudac import compile_to_ptx
from conftest import ran_as_block_program

HELD = r"""
// v is a loaded value (no shape to rebuild it from): kept across the tree's nine barriers
extern "C" __global__ void held(const int* in, int* out) {
    __shared__ int s[256];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    int v = in[i] * 3 + 1;
    s[t] = in[i];
#pragma unroll
    for (int h = 128; h > 0; h >>= 1) {
        __syncthreads();
        if (t < h) s[t] += s[t + h];
    }
    __syncthreads();
    out[i] = v + s[0];
}
"""


def _vector_stores_into_kept_slots(ir_text) -> int:
    """How many stores of a warp's <32 x i32> go into a kept slot (an element of a `kept` array)."""
    slots = set(re.findall(r'(%"[^"]+") = getelementptr \[\d+ x <32 x i32>\], \[\d+ x <32 x i32>\]\* %"kept', ir_text))
    stores = re.findall(r'store <32 x i32> %"[^"]+", <32 x i32>\* (%"[^"]+")', ir_text)
    return sum(1 for ptr in stores if ptr in slots)


def test_a_register_held_across_barriers_is_stored_once():
    ptx = compile_to_ptx(HELD, name="held.cu")
    assert ptx.count("bar.sync") == 9
    stored = _vector_stores_into_kept_slots(pipeline.block_program_ir(ptx, "held.ptx", "held", 256))
    assert 1 <= stored <= 2, stored                 # (v; each barrier stored it again before)


def test_a_register_held_across_barriers_keeps_its_value(compile_cuda, rng, poison):
    n = 256 * 7
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poison(n, np.int32)
    k = compile_cuda(HELD, name="held.cu").get_function("held")
    k((n // 256,), (256,), (ac.asarray(x), out))
    sums = np.repeat(x.reshape(-1, 256).sum(axis=1), 256)
    np.testing.assert_array_equal(out.get(), x * 3 + 1 + sums)
    assert ran_as_block_program(k, 256)
