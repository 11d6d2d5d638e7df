"""Where a block's dynamic shared memory starts (irutil.dynamic_shared_start): the launch's
shared_total less its dyn_shared, which the code now knows to be below 2^16.

Knowing it, LLVM sees that a lane's 32-bit address in an `extern __shared__` array cannot wrap,
and the block program's run-time checks for a wrap and the gathers and scatters behind them fold
away (checked in the optimised IR of a tree sum). The kernels run against numpy on fresh random
inputs with poisoned outputs: with and without static shared memory before the dynamic part (so
that it starts at 0 and past it), neighbours read under `tid > 0` (lane 0's address would wrap
where the array starts at 0) and a read below the array's start, which must still fail as on a
GPU.
"""
from __future__ import annotations

import numpy as np
import pytest

from anycuda.compiler import pipeline
from anycuda.compiler.build import jit
from anycuda.cudac import compile_to_ptx
from conftest import ran_as_block_program

SOURCE = r"""
extern "C" __global__ void tree_sum(const float* in, float* out, int n) {
    extern __shared__ float s[];
    unsigned int tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;
    s[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned int h = blockDim.x / 2; h > 0; h >>= 1) {
        if (tid < h) s[tid] += s[tid + h];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = s[0];
}

// each element less its left neighbour in the block (the first keeps its value); `pre` puts
// static shared memory (ones) before the dynamic part, which then starts past it
#define DIFFERENCES(NAME, STATIC, ONE)                                                     \
extern "C" __global__ void NAME(const double* in, double* out, int n) {                    \
    extern __shared__ double d_##NAME[];                                                   \
    STATIC                                                                                 \
    unsigned int tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;             \
    d_##NAME[tid] = i < n ? in[i] : 0.0;                                                   \
    __syncthreads();                                                                       \
    double left = 0.0;                                                                     \
    if (tid > 0) left = d_##NAME[tid - 1];                                                 \
    if (i < n) out[i] = (d_##NAME[tid] - left) * ONE;                                      \
}
DIFFERENCES(differences, , 1.0)
DIFFERENCES(differences_after_static, __shared__ double pre[3]; pre[threadIdx.x % 3] = 1.0;,
            pre[(threadIdx.x + 1) % 3])

// every thread reads its left neighbour, thread 0 the element before the array
extern "C" __global__ void reads_before_start(const float* in, float* out) {
    extern __shared__ float b[];
    unsigned int tid = threadIdx.x;
    b[tid] = in[tid];
    __syncthreads();
    out[tid] = b[tid - 1];
}
"""


@pytest.fixture(scope="module")
def module(compile_cuda):
    return compile_cuda(SOURCE, name="dynamicshared.cu")


def _optimised_block_program(monkeypatch, tmp_path, kernel, threads) -> str:
    dump = tmp_path / f"{kernel}_{threads}.ll"
    monkeypatch.setenv("ANYCUDA_DUMP_OPT_IR", str(dump))
    ptx = compile_to_ptx(SOURCE, name="dynamicshared.cu")
    jit.compile_to_object(pipeline.block_program_ir(ptx, "dynamicshared.ptx", kernel, threads), kernel)
    return dump.read_text()


@pytest.mark.parametrize("threads", [128, 256, 1024])
def test_a_tree_sum_over_dynamic_shared_memory_takes_no_gathers(monkeypatch, tmp_path, threads):
    code = _optimised_block_program(monkeypatch, tmp_path, "tree_sum", threads)
    assert "@llvm.masked.gather." not in code and "@llvm.masked.scatter." not in code


@pytest.mark.parametrize("threads", [64, 256, 1024])
def test_tree_sums_over_dynamic_shared_memory(module, rng, poison, threads):
    import anycuda as ac
    blocks = 7
    n = blocks * threads - 19
    x = rng.standard_normal(n).astype(np.float32)
    out = poison(blocks, np.float32)
    fn = module.get_function("tree_sum")
    fn((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)), shared_mem=4 * threads)
    padded = np.concatenate([x, np.zeros(blocks * threads - n, np.float32)]).reshape(blocks, threads)
    np.testing.assert_allclose(out.get(), padded.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)
    assert ran_as_block_program(fn, threads)


@pytest.mark.parametrize("kernel", ["differences", "differences_after_static"])
@pytest.mark.parametrize("threads", [32, 96, 512])
def test_left_neighbours_in_dynamic_shared_memory(module, rng, poison, kernel, threads):
    import anycuda as ac
    blocks = 5
    n = blocks * threads - 3
    x = rng.standard_normal(n)
    out = poison(n, np.float64)
    fn = module.get_function(kernel)
    fn((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)), shared_mem=8 * threads)
    want = x.copy()
    rows = np.arange(n) % threads != 0
    want[rows] -= x[np.arange(n)[rows] - 1]
    np.testing.assert_array_equal(out.get(), want)
    assert ran_as_block_program(fn, threads)


def test_a_read_before_the_dynamic_shared_memory_fails(module, rng, poison):
    import anycuda as ac
    x = rng.standard_normal(64).astype(np.float32)
    out = poison(64, np.float32)
    fn = module.get_function("reads_before_start")
    with pytest.raises(ac.CudaError, match="ILLEGAL_ADDRESS"):
        fn((1,), (64,), (ac.asarray(x), out), shared_mem=4 * 64)
        ac.synchronize()
