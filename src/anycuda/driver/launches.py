"""Kernel launches and occupancy: cuLaunchKernel and its cooperative and attributed forms,
function attributes that launches read, and the occupancy calculator.

Occupancy is computed as CUDA's occupancy calculator does, from what the device reports about
one multiprocessor (one worker thread: CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
..._MAX_BLOCKS_PER_MULTIPROCESSOR, ..._MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
..._MAX_REGISTERS_PER_MULTIPROCESSOR) and what the kernel uses (its static shared memory, the
registers cuFuncGetAttribute reports, its thread limit and its dynamic shared memory limit),
for the current context's device.
"""
from __future__ import annotations

from ..runtime import device as device_info
from ..runtime.errors import CudaError, CUresult
from .handles import _current_device, _faults_are_sticky, _require_context
from .streams import _check_stream_device, submit
from .modules import _function


def kernel_param_layout(func: int) -> tuple:
    """((offset, size), ...) of a kernel's parameters, for marshalling kernelParams."""
    return _function(func).image.param_spans


@_faults_are_sticky
def cuLaunchKernel(func: int, grid: tuple, block: tuple, shared: int, stream: int, params: bytes,
                   cooperative: bool = False, cluster: bool = False) -> None:
    """A launch in stream order; a cooperative one (cuLaunchCooperativeKernel) runs all its
    blocks at once, so that they may wait for each other (cooperative groups' grid.sync()),
    and may not be larger than what the device holds at once. `cluster`: given a cluster
    shape (cuLaunchKernelEx), which can only be 1x1x1."""
    _require_context()
    f = _function(func)
    dev = _check_stream_device(stream)
    workers = device_info.multiprocessor_count(dev)
    record = f.image.prepare(grid, block, shared, workers, cluster)
    if cooperative:
        check_cooperative_grid(f.image, grid, block, shared, dev)
    submit(stream, f.image.launch, grid, block, params, shared, workers, cooperative, cluster, record)


def cuLaunchCooperativeKernel(func: int, grid: tuple, block: tuple, shared: int, stream: int, params: bytes) -> None:
    cuLaunchKernel(func, grid, block, shared, stream, params, True)


def check_cooperative_grid(image, grid: tuple, block: tuple, shared: int, dev: int) -> None:
    """CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE unless every block of the grid can be resident
    on device `dev` at once (occupancy times multiprocessors)."""
    p = device_info.properties(dev)
    nthreads = block[0] * block[1] * block[2]
    per_sm = _active_blocks(image, p, nthreads, shared)
    nblocks = grid[0] * grid[1] * grid[2]
    if nblocks > per_sm * p.multiprocessor_count:
        raise CudaError(CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
                        f"a cooperative launch of {nblocks} blocks of {nthreads} threads: kernel {image.name} can "
                        f"have at most {per_sm} such blocks on each of the device's {p.multiprocessor_count} "
                        f"multiprocessors, {per_sm * p.multiprocessor_count} in all")


# CU_LAUNCH_ATTRIBUTE_* that cuLaunchKernelEx accepts as hints: nothing to do on the CPU
# (access policy window, synchronisation policy, cluster scheduling policy, programmatic
# stream serialisation, whose overlap stream order already rules out, priority, memory
# synchronisation domains, preferred cluster dimension, shared memory carveout, NVLink-centric
# scheduling); COOPERATIVE and a 1x1x1 CLUSTER_DIMENSION are honoured; anything else is refused.
_HINT_ATTRIBUTES = {1, 3, 5, 6, 8, 9, 10, 11, 14, 16}


CU_LAUNCH_ATTRIBUTE_IGNORE, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 0, 2, 4


_UNSUPPORTED_ATTRIBUTES = {7: "PROGRAMMATIC_EVENT", 12: "LAUNCH_COMPLETION_EVENT",
                           13: "DEVICE_UPDATABLE_KERNEL_NODE (graph kernel nodes only)"}


def cuLaunchKernelEx(func: int, grid: tuple, block: tuple, shared: int, stream: int, params: bytes,
                     attributes=()) -> None:
    """cuLaunchKernel with launch attributes: [(CU_LAUNCH_ATTRIBUTE_*, value)], the value an
    int, or the (x, y, z) of a cluster dimension."""
    cooperative = cluster = False
    for attr, value in attributes:
        if attr == CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
            cooperative = bool(value)
        elif attr == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
            if tuple(value) not in ((1, 1, 1), (0, 0, 0)):
                raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED,
                                f"thread block clusters (cluster dimension {tuple(value)}) are not supported yet")
            cluster = tuple(value) == (1, 1, 1)
        elif attr in _UNSUPPORTED_ATTRIBUTES:
            raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED,
                            f"launch attribute CU_LAUNCH_ATTRIBUTE_{_UNSUPPORTED_ATTRIBUTES[attr]} is not supported yet")
        elif attr != CU_LAUNCH_ATTRIBUTE_IGNORE and attr not in _HINT_ATTRIBUTES:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"unknown launch attribute {attr}")
    cuLaunchKernel(func, grid, block, shared, stream, params, cooperative, cluster)


def cuFuncGetAttribute(attrib: int, func: int) -> int:
    f = _function(func)
    image = f.image
    major, minor = device_info.properties(0).compute_capability
    # PTX version: the architecture the PTX was written for (libraries such as CUB choose
    # their code paths by it); binary version: the device's, which the PTX is compiled for
    values = {0: image.max_threads_per_block, 1: image.static_shared, 2: 0, 3: image.info.frame_size, 4: 32,
              5: f.module.ptx_arch or 10 * major + minor, 6: 10 * major + minor, 7: 0, 8: image.max_dynamic_shared_size, 9: -1,
              10: 0, 11: 0, 12: 0, 13: 0, 14: 0, 15: 0,
              # 16 and 17 are newer than CUDA 13.0's headers (its CU_FUNC_ATTRIBUTE_MAX is 16): the
              # runtime linked into NVIDIA's later CUDA 13 libraries (cuSPARSE 12.9, ...) reads
              # 0..17 in cudaFuncGetAttributes and fails without an answer; 0, as for 10-15
              16: 0, 17: 0}
    if attrib not in values:
        raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED, f"function attribute {attrib} is not supported yet")
    return values[attrib]


_FUNC_REGISTERS = 32                 # CU_FUNC_ATTRIBUTE_NUM_REGS as cuFuncGetAttribute reports it


CU_OCCUPANCY_DEFAULT, CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE = 0, 1


def _occupancy_args(func: int, flags: int):
    if flags not in (CU_OCCUPANCY_DEFAULT, CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"occupancy flags {flags}")
    image = _function(func).image
    return image, device_info.properties(_current_device())


def _active_blocks(image, p, block_size: int, dynamic_shared: int) -> int:
    if dynamic_shared > image.max_dynamic_shared_size:
        return 0                     # a launch with this much dynamic shared memory would fail
    return device_info.max_active_blocks(p, block_size, image.static_shared + dynamic_shared, _FUNC_REGISTERS,
                                         image.max_threads_per_block, p.shared_memory_per_block_optin)


def cuOccupancyMaxActiveBlocksPerMultiprocessor(func: int, block_size: int, dynamic_shared: int,
                                                flags: int = 0) -> int:
    """Blocks of `block_size` threads with `dynamic_shared` bytes of dynamic shared memory
    that one multiprocessor (worker) holds at once; 0 when such a block cannot be launched."""
    image, p = _occupancy_args(func, flags)
    if block_size <= 0 or dynamic_shared < 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "block size must be positive")
    return _active_blocks(image, p, block_size, dynamic_shared)


def cuOccupancyMaxPotentialBlockSize(func: int, block_to_dynamic, dynamic_shared: int, block_size_limit: int,
                                     flags: int = 0) -> tuple:
    """(min grid size, block size): the largest block size reaching the highest occupancy,
    and the grid that fills every multiprocessor with it. `block_to_dynamic(block size)`
    gives the dynamic shared memory per block when it depends on the block size (None: the
    constant `dynamic_shared`)."""
    image, p = _occupancy_args(func, flags)
    if block_size_limit < 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"block size limit {block_size_limit}")
    dynamic = block_to_dynamic if block_to_dynamic is not None else (lambda block: dynamic_shared)
    return device_info.max_potential_block_size(
        p, lambda block, smem: _active_blocks(image, p, block, smem), dynamic, block_size_limit,
        image.max_threads_per_block)


def cuOccupancyAvailableDynamicSMemPerBlock(func: int, num_blocks: int, block_size: int) -> int:
    """The most dynamic shared memory per block that lets `num_blocks` blocks of
    `block_size` threads share one multiprocessor (within what a launch of the kernel takes)."""
    image, p = _occupancy_args(func, 0)
    if num_blocks <= 0 or block_size <= 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "block count and size must be positive")
    return device_info.available_dynamic_shared_memory(p, num_blocks, block_size, image.static_shared,
                                                       _FUNC_REGISTERS, image.max_threads_per_block,
                                                       image.max_dynamic_shared_size)


def graph_kernel_work(func: int, grid: tuple, block: tuple, shared: int, params: bytes):
    f = _function(func)
    f.image.check_config(grid, block, shared)
    return f.image.launch, (grid, block, params, shared, device_info.multiprocessor_count(_current_device()))
