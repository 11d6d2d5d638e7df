"""The CPU as a CUDA device: what it reports about itself.

One device, number 0. Its "multiprocessors" are the worker threads that run blocks (one per
CPU the process may use; ANYCUDA_NUM_THREADS overrides). The compute capability it reports
is 8.6 unless ANYCUDA_COMPUTE_CAPABILITY says otherwise (e.g. "8.0"); the per-block limits
are those of sm_86: 1024 threads, 48 KiB of shared memory by default and up to 99 KiB when a
kernel opts in (`max_dynamic_shared_size_bytes`, `cuFuncSetAttribute`).
"""
from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from functools import lru_cache

DEFAULT_COMPUTE_CAPABILITY = (8, 6)


def worker_count() -> int:
    """Worker threads that run blocks (reported as the multiprocessor count)."""
    env = os.environ.get("ANYCUDA_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    if env and env.split(",")[0].strip().isdigit() and int(env.split(",")[0]) > 0:
        return int(env.split(",")[0])
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def compute_capability() -> tuple:
    env = os.environ.get("ANYCUDA_COMPUTE_CAPABILITY")
    if env:
        try:
            major, minor = env.split(".")
            return int(major), int(minor)
        except ValueError:
            raise ValueError(f"ANYCUDA_COMPUTE_CAPABILITY={env!r}: expected MAJOR.MINOR, e.g. 8.6") from None
    return DEFAULT_COMPUTE_CAPABILITY


@lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def total_memory() -> int:
    """Bytes of host memory (the device's global memory)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def free_memory() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return total_memory()


@dataclass(frozen=True)
class DeviceProperties:
    name: str
    compute_capability: tuple
    multiprocessor_count: int
    total_memory: int
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_block_dims: tuple = (1024, 1024, 64)
    max_grid_dims: tuple = (2 ** 31 - 1, 65535, 65535)
    shared_memory_per_block: int = 48 * 1024
    shared_memory_per_block_optin: int = 99 * 1024


def properties(device_id: int = 0) -> DeviceProperties:
    if device_id != 0:
        from .errors import CudaError, CUresult
        raise CudaError(CUresult.CUDA_ERROR_INVALID_DEVICE, f"device {device_id} does not exist (there is 1 device)")
    return DeviceProperties(name=f"anycuda CPU ({cpu_model()})", compute_capability=compute_capability(),
                            multiprocessor_count=worker_count(), total_memory=total_memory())


def device_count() -> int:
    return 1


class Device:
    """CuPy's `cupy.cuda.Device` for the CPU device (id 0)."""

    def __init__(self, device_id: int = 0):
        properties(device_id)          # validates the id
        self.id = int(device_id)

    @property
    def name(self) -> str:
        return properties(self.id).name

    @property
    def compute_capability(self) -> str:
        """As CuPy spells it: "86" for 8.6."""
        major, minor = compute_capability()
        return f"{major}{minor}"

    @property
    def attributes(self) -> dict:
        p = properties(self.id)
        return {"MultiProcessorCount": p.multiprocessor_count, "WarpSize": p.warp_size,
                "MaxThreadsPerBlock": p.max_threads_per_block,
                "MaxBlockDimX": p.max_block_dims[0], "MaxBlockDimY": p.max_block_dims[1],
                "MaxBlockDimZ": p.max_block_dims[2], "MaxGridDimX": p.max_grid_dims[0],
                "MaxGridDimY": p.max_grid_dims[1], "MaxGridDimZ": p.max_grid_dims[2],
                "MaxSharedMemoryPerBlock": p.shared_memory_per_block,
                "MaxSharedMemoryPerBlockOptin": p.shared_memory_per_block_optin,
                "ComputeCapabilityMajor": p.compute_capability[0],
                "ComputeCapabilityMinor": p.compute_capability[1]}

    @property
    def mem_info(self) -> tuple:
        """(free, total) bytes."""
        return free_memory(), total_memory()

    def synchronize(self) -> None:
        from .stream import synchronize_all
        synchronize_all()

    def use(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        return f"<anycuda Device {self.id}: {self.name}>"
