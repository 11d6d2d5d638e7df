"""The CPU as CUDA devices: what they report about themselves.

One device by default, number 0; ANYCUDA_DEVICES=N splits the CPU into N devices so that
multi-GPU code paths run. A process an MPI launcher started, with several of its ranks on this
machine, sees as many devices as there are such ranks (a machine with one GPU per rank: each
rank picks its own by its local rank, and its device's share of the CPU is its share).
The "multiprocessors" are the worker threads that run blocks (one per CPU the process may use;
ANYCUDA_NUM_THREADS overrides), shared out between the devices
(each gets at least one; a launch on a device uses its share). Host memory is shared out
the same way: each device reports an equal part of it as its total and counts the device
memory allocated on it. All devices share one address space.

The compute capability reported is 8.6 unless ANYCUDA_COMPUTE_CAPABILITY says otherwise
(e.g. "8.0"); the per-block limits are those of sm_86: 1024 threads, 48 KiB of shared
memory by default and up to 99 KiB when a kernel opts in (`max_dynamic_shared_size_bytes`,
`cuFuncSetAttribute`). The per-multiprocessor limits that occupancy is computed from
(2048 threads, 32 blocks, 100 KiB of shared memory, 64 Ki registers) are what the device
reports as its attributes.
"""
from __future__ import annotations

import os
import platform
import threading
from dataclasses import dataclass
from functools import lru_cache

from . import memory
from .errors import CudaError, CUresult

DEFAULT_COMPUTE_CAPABILITY = (8, 6)


@lru_cache(maxsize=1)
def worker_count() -> int:
    """Worker threads that run blocks (reported as the multiprocessor count). Read once per
    process, as libgomp reads OMP_NUM_THREADS: every launch asks."""
    env = os.environ.get("ANYCUDA_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    if env and env.split(",")[0].strip().isdigit() and int(env.split(",")[0]) > 0:
        return int(env.split(",")[0])
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@lru_cache(maxsize=1)
def last_level_cache_bytes() -> int:
    """Size of the largest CPU cache (Linux sysfs), 32 MiB where it cannot be read."""
    sizes = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for index in os.listdir(base):
            try:
                with open(os.path.join(base, index, "size")) as fh:
                    text = fh.read().strip().upper()
            except OSError:
                continue
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            digits = text.rstrip("KMG")
            if digits.isdigit():
                sizes.append(int(digits) * scale)
    except OSError:
        pass
    return max(sizes, default=32 << 20)


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


# what launchers set to the number of ranks they started on this machine (Open MPI, MPICH's Hydra)
LOCAL_RANKS_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS")


def _local_ranks() -> int:
    for name in LOCAL_RANKS_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) >= 1:
            return int(value)
    return 1


@lru_cache(maxsize=1)
def device_count() -> int:
    """How many devices the CPU is split into (ANYCUDA_DEVICES; by default 1, or the number of
    ranks an MPI launcher started on this machine; read once per process)."""
    env = os.environ.get("ANYCUDA_DEVICES", "").strip()
    if not env:
        return _local_ranks()
    if not env.isdigit() or int(env) < 1:
        raise ValueError(f"ANYCUDA_DEVICES={env!r}: expected a positive number of devices, e.g. 2")
    return int(env)


def _check_id(device_id: int) -> int:
    n = device_count()
    if not isinstance(device_id, int) or not 0 <= device_id < n:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_DEVICE,
                        f"device {device_id} does not exist (there {'is' if n == 1 else 'are'} {n} "
                        f"device{'' if n == 1 else 's'}; ANYCUDA_DEVICES sets how many)")
    return device_id


def multiprocessor_count(device_id: int = 0) -> int:
    """The device's share of the worker threads (at least one)."""
    base, extra = divmod(worker_count(), device_count())
    return max(1, base + (1 if device_id < extra else 0))


def device_total_memory(device_id: int = 0) -> int:
    """The device's share of host memory."""
    return total_memory() // device_count()


def used_memory(device_id: int = 0) -> int:
    """Bytes of device (and managed) memory allocated on the device and not freed yet.
    Allocations that name no device (made outside the driver API) count for device 0."""
    table = memory.table
    with table._lock:
        allocations = list(table._allocs.values())
    return sum(a.size for a in allocations
               if a.kind in ("device", "managed") and getattr(a, "device", 0) == device_id)


def device_free_memory(device_id: int = 0) -> int:
    """What the device has left of its share, and no more than the host has available."""
    return max(0, min(device_total_memory(device_id) - used_memory(device_id), free_memory()))


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
    # per multiprocessor (one worker thread): what occupancy is computed from
    max_threads_per_multiprocessor: int = 2048
    max_blocks_per_multiprocessor: int = 32
    shared_memory_per_multiprocessor: int = 100 * 1024
    registers_per_multiprocessor: int = 65536
    registers_per_block: int = 65536
    reserved_shared_memory_per_block: int = 0
    shared_memory_granularity: int = 128      # shared memory is given to blocks in these units
    register_granularity: int = 256           # registers are given to warps in these units
    ordinal: int = 0


def properties(device_id: int = 0) -> DeviceProperties:
    _check_id(device_id)
    suffix = f" #{device_id}" if device_count() > 1 else ""
    return DeviceProperties(name=f"anycuda CPU ({cpu_model()}){suffix}", compute_capability=compute_capability(),
                            multiprocessor_count=multiprocessor_count(device_id),
                            total_memory=device_total_memory(device_id), ordinal=device_id)


def max_active_blocks(p: DeviceProperties, block_size: int, shared_bytes: int, regs_per_thread: int = 32,
                      max_threads_per_block: int = 1024, max_shared_per_block: int = None) -> int:
    """Blocks of `block_size` threads, each using `shared_bytes` of shared memory (static and
    dynamic) and `regs_per_thread` registers per thread, that one multiprocessor holds at
    once: limited by its threads (whole warps), blocks, registers and shared memory; 0 when
    one such block cannot run at all."""
    if block_size <= 0:
        return 0
    limit = p.shared_memory_per_block_optin if max_shared_per_block is None else max_shared_per_block
    if block_size > min(max_threads_per_block, p.max_threads_per_block) or shared_bytes > limit:
        return 0
    warps = -(-block_size // p.warp_size)
    by_threads = (p.max_threads_per_multiprocessor // p.warp_size) // warps
    regs_per_warp = -(-max(regs_per_thread, 1) * p.warp_size // p.register_granularity) * p.register_granularity
    by_registers = (p.registers_per_multiprocessor // regs_per_warp) // warps
    if regs_per_warp * warps > p.registers_per_block:
        return 0
    blocks = min(by_threads, by_registers, p.max_blocks_per_multiprocessor)
    footprint = shared_bytes + p.reserved_shared_memory_per_block
    if footprint:
        footprint = -(-footprint // p.shared_memory_granularity) * p.shared_memory_granularity
        blocks = min(blocks, p.shared_memory_per_multiprocessor // footprint)
    return max(0, blocks)


def available_dynamic_shared_memory(p: DeviceProperties, num_blocks: int, block_size: int, static_shared: int,
                                    regs_per_thread: int = 32, max_threads_per_block: int = 1024,
                                    max_dynamic: int = None) -> int:
    """The most dynamic shared memory per block with which `num_blocks` blocks of `block_size`
    threads fit on one multiprocessor (0 when they do not fit whatever the shared memory)."""
    if num_blocks <= 0 or max_active_blocks(p, block_size, 0, regs_per_thread, max_threads_per_block) < num_blocks:
        return 0
    share = p.shared_memory_per_multiprocessor // num_blocks
    share = share // p.shared_memory_granularity * p.shared_memory_granularity
    dynamic = share - p.reserved_shared_memory_per_block - static_shared
    limit = p.shared_memory_per_block_optin - static_shared if max_dynamic is None else max_dynamic
    return max(0, min(dynamic, limit))


def max_potential_block_size(p: DeviceProperties, active_blocks, dynamic_shared=lambda block: 0,
                             block_size_limit: int = 0, max_threads_per_block: int = 1024) -> tuple:
    """(min grid size, block size): the largest block size, in whole warps, that reaches the
    highest occupancy (threads per multiprocessor), and the grid that fills every
    multiprocessor with it. `active_blocks(block, dynamic)` is the occupancy calculator."""
    limit = min(p.max_threads_per_block, max_threads_per_block)
    if block_size_limit > 0:
        limit = min(limit, block_size_limit)
    best_threads, best_block, best_blocks = 0, 0, 0
    aligned = -(-limit // p.warp_size) * p.warp_size
    for candidate in range(aligned, 0, -p.warp_size):
        block = min(limit, candidate)
        blocks = active_blocks(block, dynamic_shared(block))
        if block * blocks > best_threads:
            best_threads, best_block, best_blocks = block * blocks, block, blocks
        if best_threads == p.max_threads_per_multiprocessor:
            break
    return best_blocks * p.multiprocessor_count, best_block


_current = threading.local()


def get_device_id() -> int:
    """The current device of the calling thread for the Python API (CuPy's
    `cupy.cuda.runtime.getDevice`)."""
    return getattr(_current, "device", 0)


# The device of a thread's current driver-API context, or None without one: driver/handles.py
# sets this (the runtime does not know about contexts).
context_device = lambda: None    # noqa: E731


def work_device() -> int:
    """The device that work queued by the calling thread belongs to: the one it chose with
    the Python API's Device (use() or with), else its current driver context's, else 0."""
    chosen = getattr(_current, "device", None)
    if chosen is not None:
        return chosen
    dev = context_device()
    return 0 if dev is None else dev


# What the device reports of its texture and surface limits (CU_DEVICE_ATTRIBUTE_* number ->
# value, as an sm_80 GPU has them); arrays past them are refused as on a GPU (driver/arrays.py).
# Cube-map limits stay 0: anycuda has none.
TEXTURE_LIMITS = {
    21: 131072, 22: 131072, 23: 65536, 24: 16384, 25: 16384, 26: 16384,          # 1-D, 2-D, 3-D textures
    27: 32768, 28: 32768, 29: 2048, 42: 32768, 43: 2048,                        # layered textures
    45: 32768, 46: 32768, 47: 8192, 48: 8192, 49: 32768,                        # gather, alternate 3-D
    30: 512, 51: 32,                                                            # surface, texture pitch alignment
    55: 32768, 56: 131072, 57: 65536, 58: 16384, 59: 16384, 60: 16384,          # surfaces
    61: 32768, 62: 2048, 63: 32768, 64: 32768, 65: 2048,                        # layered surfaces
    69: 1 << 27, 70: 131072, 71: 65536, 72: 2097120,                            # textures on linear memory
    73: 32768, 74: 32768, 77: 32768,                                            # mipmapped 2-D and 1-D
}


_synchronisers = []      # wait for a device's work: the streams register theirs (runtime/stream.py)


def register_synchroniser(wait) -> None:
    """`wait(device_id)` is called by Device.synchronize: streams, which sit above devices,
    say how to wait for a device's work."""
    _synchronisers.append(wait)


class Device:
    """CuPy's `cupy.cuda.Device`: `Device()` is the calling thread's current device; `use()`
    makes one current, and so does `with` until the block ends."""

    def __init__(self, device_id: int = None):
        if device_id is None:
            device_id = get_device_id()
        self.id = _check_id(int(device_id))
        self._previous = []

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
                "ComputeCapabilityMinor": p.compute_capability[1],
                "MaxThreadsPerMultiProcessor": p.max_threads_per_multiprocessor,
                "MaxSharedMemoryPerMultiprocessor": p.shared_memory_per_multiprocessor,
                "MaxBlocksPerMultiprocessor": p.max_blocks_per_multiprocessor}

    @property
    def mem_info(self) -> tuple:
        """(free, total) bytes of this device's share of memory."""
        return device_free_memory(self.id), device_total_memory(self.id)

    def can_access_peer(self, peer) -> bool:
        """One address space: every device reaches every other device's memory."""
        peer_id = peer.id if isinstance(peer, Device) else int(peer)
        _check_id(peer_id)
        return peer_id != self.id

    def synchronize(self) -> None:
        """Wait for this device's streams (and the legacy default stream)."""
        for wait in _synchronisers:
            wait(self.id)

    def use(self):
        _current.device = self.id
        return self

    def __enter__(self):
        self._previous.append(getattr(_current, "device", None))
        _current.device = self.id
        return self

    def __exit__(self, *exc):
        previous = self._previous.pop() if self._previous else None
        if previous is None:
            _current.__dict__.pop("device", None)     # back to no choice made
        else:
            _current.device = previous
        return False

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(("anycuda.Device", self.id))

    def __repr__(self):
        return f"<anycuda Device {self.id}: {self.name}>"
