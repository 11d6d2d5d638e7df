"""Indexed loads in block programs (compiler/vector/blockmemory.py): a value every lane of a
warp loads from one address keeps the shape of a value alike in the warp (CSR's row start in a
warp per row), so the indices made from it give vector loads; a gather under a mask reads
every lane, the lanes outside the mask at a slot of the stack, never at their own addresses;
a gather through loaded indices is one at once, without looking at its addresses.

Each kernel runs against numpy on fresh random inputs with poisoned outputs, and the tests
check that a block program ran it.
"""
from __future__ import annotations

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler import pipeline
from anycuda.compiler.vector import blockmemory
from anycuda.cudac import compile_to_ptx
from conftest import ran_as_block_program

CSR = r"""
// y = A x for A in CSR: a warp per row, its lanes striding over the row's nonzeros, a
// butterfly of shuffles summing them in every lane
extern "C" __global__ void spmv_warp(int rows, const int* starts, const int* columns, const float* values,
                                     const float* x, float* y) {
    unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / warpSize, lane = threadIdx.x % warpSize;
    if (warp >= rows) return;
    int begin = starts[warp], end = starts[warp + 1];
    float partial = 0.0f;
    for (int k = begin + lane; k < end; k += warpSize) partial += values[k] * x[columns[k]];
    for (int mask = 16; mask >= 1; mask >>= 1) partial += __shfl_xor_sync(0xffffffff, partial, mask);
    if (lane == 31) y[warp] = partial;
}
"""

WILD = r"""
// lanes whose index is negative read nothing: their addresses lie far outside any buffer
extern "C" __global__ void picked(const int* idx, const double* x, double* out) {
    __shared__ double s[256];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    int j = idx[i];
    s[t] = j >= 0 ? x[j] : -1.0;
    __syncthreads();
    out[i] = s[t] + s[t ^ 1];
}
"""


def _recorded_loads(monkeypatch):
    """[(load?, shape stride or None)] of each access the block program makes, as it makes it."""
    seen = []
    original = blockmemory.BlockMemory._memory

    def recorded(self, addrs, shape, elem, size, value):
        seen.append((value is None, None if shape is None else shape.stride))
        return original(self, addrs, shape, elem, size, value)
    monkeypatch.setattr(blockmemory.BlockMemory, "_memory", recorded)
    return seen


def test_a_row_start_loaded_by_a_warp_keeps_vector_loads(monkeypatch):
    """`rowptr[row]` is one address in a warp: the loads of `cols[j]` and `vals[j]` from
    `j = rowptr[row] + lane` are ramps of 4 bytes (vector loads), `x[cols[j]]` a gather."""
    ptx = compile_to_ptx(CSR, name="csr.cu")
    seen = _recorded_loads(monkeypatch)
    pipeline.block_program_ir(ptx, "csr.ptx", "spmv_warp", 256)
    strides = [stride for load, stride in seen if load]
    assert 0 in strides, seen                      # the row's start and end
    assert strides.count(4) >= 2, seen             # cols[j], vals[j]
    assert None in strides, seen                   # x[cols[j]]


def test_a_gather_through_loaded_indices_does_not_look_at_its_addresses(monkeypatch):
    """`x[cols[j]]`'s addresses come from loaded values: a gather at once, neither a look at
    whether they are runs (blockmemory._runs_or_gathered) nor a prefetch for the next blocks."""
    ptx = compile_to_ptx(CSR, name="csr.cu")
    looked, steps = [], []
    original, step = blockmemory.BlockMemory._runs_or_gathered, blockmemory.BlockMemory._block_step

    def recorded(self, *args):
        looked.append(args)
        return original(self, *args)

    def measured(self, pos, address, kind, sites):
        steps.append(kind)
        return step(self, pos, address, kind, sites)
    monkeypatch.setattr(blockmemory.BlockMemory, "_runs_or_gathered", recorded)
    monkeypatch.setattr(blockmemory.BlockMemory, "_block_step", measured)
    ir_text = pipeline.block_program_ir(ptx, "csr.ptx", "spmv_warp", 256)
    assert not looked and "lanes" not in steps and "llvm.masked.gather" in ir_text


@pytest.mark.parametrize("lengths", ["short", "mixed", "long"])
def test_csr_warp_per_row_matches_numpy(compile_cuda, rng, poison, lengths):
    """Rows of 0 to 8 nonzeros (lane by lane), 9 to 31 (a gather under a mask), whole warps
    and more (several rounds of the loop, the last masked): against numpy."""
    low, high = {"short": (0, 9), "mixed": (0, 80), "long": (30, 200)}[lengths]
    n = 8 * 37 + 5                                 # a partial last block
    counts = rng.integers(low, high, n)
    rowptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    cols = rng.integers(0, n, rowptr[-1]).astype(np.int32)
    vals = rng.standard_normal(rowptr[-1]).astype(np.float32)
    x = rng.standard_normal(n).astype(np.float32)
    y = poison(n, np.float32)
    k = compile_cuda(CSR, name="csr.cu").get_function("spmv_warp")
    k(((n + 7) // 8,), (256,), (np.int32(n), *(ac.asarray(a) for a in (rowptr, cols, vals, x)), y))
    products = vals.astype(np.float64) * x[cols]
    want = np.array([products[rowptr[r]:rowptr[r + 1]].sum() for r in range(n)])
    np.testing.assert_allclose(y.get(), want, rtol=1e-4, atol=1e-4)
    assert ran_as_block_program(k, 256)


@pytest.mark.parametrize("share", [0.1, 0.5, 0.9])
def test_a_masked_gather_reads_no_lane_outside_the_mask(compile_cuda, rng, poison, share):
    """The lanes outside a gather's mask hold addresses two gigabytes and more below the
    buffer (a negative index): the gather reads every lane, those at a slot of the stack,
    so none faults; the lanes inside it get their elements."""
    n = 256 * 6
    x = rng.standard_normal(n).astype(np.float64)
    idx = rng.integers(0, n, n).astype(np.int32)
    off = rng.random(n) >= share
    idx[off] = -(2 ** 31) + rng.integers(0, 1000, int(off.sum()))
    out = poison(n, np.float64)
    k = compile_cuda(WILD, name="wild.cu").get_function("picked")
    k((n // 256,), (256,), (ac.asarray(idx), ac.asarray(x), out))
    got = np.where(idx >= 0, x[np.maximum(idx, 0)], -1.0)
    np.testing.assert_array_equal(out.get(), got + got[np.arange(n) ^ 1])
    assert ran_as_block_program(k, 256)
