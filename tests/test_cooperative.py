"""Cooperative launches: every block of the grid runs at once, so that
cooperative_groups::this_grid().sync() works. Through the Python API (RawModule with CuPy's
enable_cooperative_groups) and the driver API (cuLaunchCooperativeKernel, cuLaunchKernelEx
with launch attributes): grid-wide phases against numpy, the co-residency limit, a grid
workspace only in cooperative launches, and the ways a grid barrier can fail (blocks that
never arrive, a fault in another block) ending the launch instead of hanging it."""
import numpy as np
import pytest

import anycuda as ac
from anycuda.driver import api
from anycuda.runtime import device as device_info
from conformance import normalised_jacobi

SOURCE = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// u <- x / sum(x), then `steps` Jacobi steps (ends fixed); u and v are work space, the
// result is in u when steps is even. Every step reads neighbours other blocks wrote.
extern "C" __global__ void phases(const float *x, float *partial, float *u, float *v, int n, int steps) {
  cg::grid_group grid = cg::this_grid();
  __shared__ float sum[256];
  float s = 0.0f;
  for (long long i = grid.thread_rank(); i < n; i += grid.size()) s += x[i];
  sum[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) sum[threadIdx.x] += sum[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sum[0];
  grid.sync();
  float total = 0.0f;
  for (int b = 0; b < gridDim.x; b++) total += partial[b];
  for (long long i = grid.thread_rank(); i < n; i += grid.size()) u[i] = x[i] / total;
  grid.sync();
  for (int step = 0; step < steps; step++) {
    const float *from = step % 2 ? v : u;
    float *to = step % 2 ? u : v;
    for (long long i = grid.thread_rank(); i < n; i += grid.size())
      to[i] = (i == 0 || i == n - 1) ? from[i] : 0.5f * (from[i - 1] + from[i + 1]);
    grid.sync();
  }
}

extern "C" __global__ void validity(int *out) {
  if (threadIdx.x == 0) out[blockIdx.x] = cg::this_grid().is_valid();
}

// block `late` leaves without reaching the grid barrier (late < 0: every block arrives)
extern "C" __global__ void leaves_early(int *out, int late) {
  if ((int)blockIdx.x == late) return;
  cg::this_grid().sync();
  out[blockIdx.x] = 1;
}

// block 1 writes through a bad pointer while the others wait at the grid barrier
extern "C" __global__ void faults_before_sync(int *out, int *bad) {
  if (blockIdx.x == 1 && threadIdx.x == 0) bad[0] = 1;
  cg::this_grid().sync();
  out[blockIdx.x] = 1;
}
"""

BLOCK = 256


@pytest.fixture
def modules(compile_cuda):
    """(normal, cooperative) RawModules of SOURCE."""
    normal = compile_cuda(SOURCE, name="cooperative.cu")
    return normal, ac.RawModule(ptx=normal.ptx, name="cooperative.ptx", enable_cooperative_groups=True)


def _co_resident(block=BLOCK):
    """Blocks of `block` threads (no shared memory beyond 1 KiB) the device holds at once."""
    p = device_info.properties(0)
    return min(p.max_threads_per_multiprocessor // block, p.max_blocks_per_multiprocessor) * p.multiprocessor_count


@pytest.mark.parametrize("n,steps", [(1, 0), (4099, 2), (30011, 10)])
def test_grid_sync_phases_match_numpy(modules, rng, n, steps):
    grid = _co_resident()
    x = rng.uniform(0.5, 2.0, n).astype(np.float32)
    partial = ac.asarray(np.zeros(grid, np.float32))
    u, v = ac.asarray(np.full(n, np.nan, np.float32)), ac.asarray(np.full(n, np.nan, np.float32))
    modules[1].get_function("phases")((grid,), (BLOCK,), (ac.asarray(x), partial, u, v, np.int32(n), np.int32(steps)))
    np.testing.assert_allclose(u.get(), normalised_jacobi(x, steps), rtol=2e-5)


def test_grid_sync_checked_by_memcheck(modules, rng, monkeypatch, capsys):
    """Under memcheck (compiler/ops/memcheck.py) the grid barrier's workspace is memory the
    launch may use: the same results, no report."""
    monkeypatch.setenv("ANYCUDA_SANITIZE", "memcheck")
    grid, n = _co_resident(), 4099
    x = rng.uniform(0.5, 2.0, n).astype(np.float32)
    partial = ac.asarray(np.zeros(grid, np.float32))
    u, v = ac.asarray(np.full(n, np.nan, np.float32)), ac.asarray(np.full(n, np.nan, np.float32))
    modules[1].get_function("phases")((grid,), (BLOCK,), (ac.asarray(x), partial, u, v, np.int32(n), np.int32(2)))
    np.testing.assert_allclose(u.get(), normalised_jacobi(x, 2), rtol=2e-5)
    assert "=========" not in capsys.readouterr().err


def test_grid_larger_than_co_resident_is_refused(modules):
    out = ac.asarray(np.zeros(4, np.int32))
    with pytest.raises(ac.CudaError) as e:
        modules[1].get_function("validity")((_co_resident() + 1,), (BLOCK,), (out,))
    assert e.value.code == ac.CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
    assert "at most" in str(e.value)


def test_workspace_only_in_cooperative_launches(modules):
    for module, want in zip(modules, (0, 1)):
        out = ac.asarray(np.full(3, -1, np.int32))
        module.get_function("validity")((3,), (64,), (out,))
        assert out.get().tolist() == [want] * 3


def test_grid_sync_in_a_normal_launch_traps(modules):
    """cooperative groups trap when grid.sync() finds no workspace, as on a GPU."""
    out = ac.asarray(np.zeros(2, np.int32))
    with pytest.raises(ac.CudaError) as e:
        modules[0].get_function("leaves_early")((2,), (32,), (out, np.int32(-1)))
        ac.synchronize()
    assert e.value.code == ac.CUresult.CUDA_ERROR_LAUNCH_FAILED and "trap" in str(e.value)


def test_block_that_never_arrives_is_a_grid_barrier_deadlock(modules, monkeypatch):
    monkeypatch.setenv("ANYCUDA_GRID_SYNC_TIMEOUT", "0.5")
    out = ac.asarray(np.zeros(8, np.int32))
    with pytest.raises(ac.CudaError) as e:
        modules[1].get_function("leaves_early")((8,), (32,), (out, np.int32(3)))
        ac.synchronize()
    assert e.value.code == ac.CUresult.CUDA_ERROR_LAUNCH_FAILED and "grid barrier deadlock" in str(e.value)


def test_fault_in_one_block_ends_the_others_waiting_at_the_grid_barrier(modules, monkeypatch):
    monkeypatch.setenv("ANYCUDA_GRID_SYNC_TIMEOUT", "600")     # were they left waiting, the test would hang
    out = ac.asarray(np.zeros(8, np.int32))
    with pytest.raises(ac.CudaError) as e:
        modules[1].get_function("faults_before_sync")((8,), (64,), (out, np.uint64(16)))
        ac.synchronize()
    assert e.value.code == ac.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS and "block 1" in str(e.value)


def test_more_blocks_than_cores_all_arrive(modules):
    """Many more blocks than CPUs (each on its own thread) meet at the barrier again and again."""
    grid = _co_resident(32)
    assert grid > 2 * device_info.worker_count()
    out = ac.asarray(np.zeros(grid, np.int32))
    modules[1].get_function("leaves_early")((grid,), (32,), (out, np.int32(-1)))
    assert out.get().tolist() == [1] * grid


# ---------------------------------------------------------------- the driver API

@pytest.fixture
def driver_function(modules):
    """A handle of `leaves_early` through the driver API, in device 0's primary context."""
    api.cuInit(0)
    api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
    mod = api.cuModuleLoadData(modules[0].ptx.encode())
    yield api.cuModuleGetFunction(mod, "leaves_early")
    api.cuModuleUnload(mod)
    api.cuDevicePrimaryCtxRelease(0)


def _params(out, late):
    return np.array([out.data.ptr], np.uint64).tobytes() + np.array([late, 0], np.int32).tobytes()


def test_driver_cooperative_launches_and_attributes(driver_function):
    assert api.cuDeviceGetAttribute(95, 0) == 1          # CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH
    out = ac.asarray(np.zeros(4, np.int32))
    api.cuLaunchCooperativeKernel(driver_function, (4, 1, 1), (32, 1, 1), 0, 0, _params(out, -1))
    api.cuCtxSynchronize()
    assert out.get().tolist() == [1] * 4
    # cuLaunchKernelEx: COOPERATIVE (2), with hints that change nothing (priority 8, a
    # 1x1x1 cluster 4, ignore 0); a real cluster, a completion event or an unknown attribute are refused
    out = ac.asarray(np.zeros(4, np.int32))
    api.cuLaunchKernelEx(driver_function, (4, 1, 1), (32, 1, 1), 0, 0, _params(out, -1),
                         [(0, 0), (8, 1), (4, (1, 1, 1)), (2, 1)])
    api.cuCtxSynchronize()
    assert out.get().tolist() == [1] * 4
    for attrs, code in (([(4, (2, 1, 1))], ac.CUresult.CUDA_ERROR_NOT_SUPPORTED),
                        ([(12, 0)], ac.CUresult.CUDA_ERROR_NOT_SUPPORTED),
                        ([(99, 0)], ac.CUresult.CUDA_ERROR_INVALID_VALUE)):
        with pytest.raises(ac.CudaError) as e:
            api.cuLaunchKernelEx(driver_function, (4, 1, 1), (32, 1, 1), 0, 0, _params(out, -1), attrs)
        assert e.value.code == code
    too_many = _co_resident(32) + 1
    for launch in (lambda: api.cuLaunchCooperativeKernel(driver_function, (too_many, 1, 1), (32, 1, 1), 0, 0,
                                                         _params(out, -1)),
                   lambda: api.cuLaunchKernelEx(driver_function, (too_many, 1, 1), (32, 1, 1), 0, 0,
                                                _params(out, -1), [(2, 1)])):
        with pytest.raises(ac.CudaError) as e:
            launch()
        assert e.value.code == ac.CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE


# ---------------------------------------------------------------- code generation

POLLING_PTX = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry poll(.param .u64 p)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [p];
    READ_WORKSPACE
$wait:
    ld.volatile.global.u32 %r1, [%rd1];
    ld.acquire.gpu.u32 %r2, [%rd1+4];
    ld.volatile.shared.u32 %r3, [0];
    add.s32 %r1, %r1, %r2;
    add.s32 %r1, %r1, %r3;
    setp.eq.s32 %p1, %r1, 0;
    @%p1 bra $wait;
    ret;
}
"""


def _llvm_ir(ptx):
    from anycuda.compiler.lowering.module import ModuleLowering
    from anycuda.ptx import parse
    return str(ModuleLowering(parse(ptx, "poll.ptx"), "poll.ptx").lower().mod)


def test_polling_waits_only_in_modules_that_read_the_grid_workspace():
    """Ordered loads from global memory wait politely in a module that reads %envreg1/2
    (not the shared one), and a module that does not read them gets the same code as before."""
    plain = _llvm_ir(POLLING_PTX.replace("READ_WORKSPACE", ""))
    assert "grid_wait" not in plain and "sched_yield" not in plain
    reading = _llvm_ir(POLLING_PTX.replace("READ_WORKSPACE", "mov.u32 %r3, %envreg1;"))
    assert reading.count("call i32 @\"anycuda.grid_wait\"") == 2      # the volatile and the acquire load
