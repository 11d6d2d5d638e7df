"""The CPU as a CUDA device: what it reports about itself."""
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
    return DeviceProperties(name=f"anycuda CPU ({cpu_model()})", compute_capability=compute_capability(),
                            multiprocessor_count=worker_count(), total_memory=total_memory())
