"""Memory: allocations (device, host, managed, pitched, pools), copies and memsets (blocking,
in stream order, pitched, between peers), registered host memory, pointer attributes and
managed-memory hints.
"""
from __future__ import annotations

from ..runtime import device as device_info
from ..runtime import memory, sanitizer
from ..runtime.errors import CudaError, CUresult
from ..runtime.stream import wait_idle
from .handles import (Context, _current, _current_device, _current_handle, _faults_are_sticky, _get, _handles,
                      _new_handle, _require_context, _state)
from .contexts import _check_device, cuDeviceGetCount
from .streams import _null_stream, _stream, submit


def _owned(allocation, counted: bool = True):
    """Mark an allocation as made in the current context, on its device; device memory
    counts against that device's share (CUDA_ERROR_OUT_OF_MEMORY past it)."""
    allocation.context = _current_handle()
    allocation.device = _current_device()
    return allocation


def _allocate(size: int, kind: str = "device"):
    # what a device has left is counted over the allocation table, so only for allocations
    # large enough to matter (1/64 of the device's share and up); smaller ones cannot go past
    # the share by much before the host itself runs out
    dev = _current_device()
    share = device_info.device_total_memory(dev)
    if kind in ("device", "managed") and size >= share // 64:
        left = share - device_info.used_memory(dev)
        if size > left:
            raise CudaError(CUresult.CUDA_ERROR_OUT_OF_MEMORY,
                            f"{size} bytes asked of device {dev}, which has {max(left, 0)} left")
    return _owned(memory.allocate(size, kind=kind)).ptr


def cuMemAlloc(size: int) -> int:
    _require_context()
    if size == 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes")
    return _allocate(size)


def cuMemFree(ptr: int) -> None:
    """Synchronises the device first, as a GPU's does: queued work may still use the memory."""
    _require_context()
    if ptr:                        # cuMemFree(0) succeeds, as free(NULL) (the runtime inside NVIDIA's
        try:                       # CUDA 13 libraries passes cudaFree(0) on to the driver)
            _check_live(ptr)
        except CudaError as e:
            sanitizer.report_api_error("cuMemFree", e)
            raise
        wait_idle(_current_device())
        memory.free(ptr)


def _check_live(ptr: int) -> None:
    """CUDA_ERROR_INVALID_VALUE unless `ptr` starts a live allocation (checked before waiting
    for the device: a bad free fails at once)."""
    a = memory.lookup(ptr)
    if a is None or a.ptr != ptr:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"0x{ptr:x} is not the start of a live allocation "
                                                          "(double free?)")


@_faults_are_sticky
def cuMemcpy(dst: int, src: int, n: int) -> None:
    """A blocking copy: returns when it is done (device printf is flushed then, as CUDA does)."""
    _require_context()
    _null_stream().call(memory.memcpy, dst, src, n)


@_faults_are_sticky
def cuMemsetD8(dst: int, value: int, n: int) -> None:
    _require_context()
    _null_stream().call(memory.memset, dst, value, n)


@_faults_are_sticky
def cuMemsetD32(dst: int, value: int, n: int) -> None:
    _require_context()
    _null_stream().call(memory.fill, dst, value, n, 4)


def cuMemGetInfo() -> tuple:
    """(free, total) of the current context's device: its share of host memory, less the
    device memory allocated on it (and no more than the host has available)."""
    _require_context()
    dev = _current_device()
    return device_info.device_free_memory(dev), device_info.device_total_memory(dev)


def _check_copy_contexts(*contexts) -> None:
    for c in contexts:
        if not isinstance(_handles.get(c), Context):
            raise CudaError(CUresult.CUDA_ERROR_INVALID_CONTEXT, f"0x{c:x} is not a live context")


@_faults_are_sticky
def cuMemcpyPeer(dst: int, dst_ctx: int, src: int, src_ctx: int, n: int) -> None:
    """A copy between memory of two contexts (devices); synchronous like cuMemcpy."""
    _require_context()
    _check_copy_contexts(dst_ctx, src_ctx)
    cuMemcpy(dst, src, n)


@_faults_are_sticky
def cuMemcpyPeerAsync(dst: int, dst_ctx: int, src: int, src_ctx: int, n: int, stream: int) -> None:
    """In stream order; the stream may belong to any device (copies, unlike launches, may)."""
    _require_context()
    _check_copy_contexts(dst_ctx, src_ctx)
    cuMemcpyAsync(dst, src, n, stream)


@_faults_are_sticky
def cuMemcpy3DPeer(src: int, src_pitch: int, src_slice: int, dst: int, dst_pitch: int, dst_slice: int,
                   width: int, height: int, depth: int, src_ctx: int, dst_ctx: int, stream=None) -> None:
    """cuMemcpy3D between the memory of two contexts (a NULL context: the current one)."""
    _require_context()
    _check_copy_contexts(*(c for c in (src_ctx, dst_ctx) if c))
    cuMemcpy3D(src, src_pitch, src_slice, dst, dst_pitch, dst_slice, width, height, depth, stream)


@_faults_are_sticky
def cuMemcpyAsync(dst: int, src: int, n: int, stream: int) -> None:
    _require_context()
    submit(stream, memory.memcpy, dst, src, n)


def cuMemAllocHost(size: int) -> int:
    _require_context()
    return _allocate(size, kind="host")


def cuMemAllocManaged(size: int, flags: int) -> int:
    _require_context()
    if size == 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "cuMemAllocManaged of 0 bytes")
    return _allocate(size, kind="managed")


# CU_POINTER_ATTRIBUTE_* -> value for an address inside an allocation
_MEMORY_TYPE = {"host": 1, "device": 2, "managed": 2}


def cuPointerGetAttribute(attribute: int, ptr: int) -> int:
    _require_context()
    a = memory.lookup(ptr)
    if a is None:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"0x{ptr:x} is not in any allocation")
    # the context and device an allocation was made in (memory anycuda made for itself, such
    # as module globals: the caller's)
    values = {1: getattr(a, "context", 0) or _current.ctx, 2: _MEMORY_TYPE.get(a.kind, 2), 3: ptr, 4: ptr,
              8: int(a.kind == "managed"), 9: getattr(a, "device", _current_device()), 11: a.ptr, 12: a.size}
    if attribute not in values:
        raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED, f"pointer attribute {attribute} is not supported yet")
    return values[attribute]


@_faults_are_sticky
def cuMemcpy2D(src: int, src_pitch: int, dst: int, dst_pitch: int, width: int, height: int, stream=None) -> None:
    """Copy `height` rows of `width` bytes between pitched memory (addresses of the first
    byte of the region); synchronous on the default stream unless a stream is given."""
    cuMemcpy3D(src, src_pitch, src_pitch * height, dst, dst_pitch, dst_pitch * height, width, height, 1, stream)


def memcpy_3d_work(src: int, src_pitch: int, src_slice: int, dst: int, dst_pitch: int, dst_slice: int,
                   width: int, height: int, depth: int):
    """The copy of a width x height x depth box between pitched memory, as stream work."""
    if (height > 1 or depth > 1) and (width > src_pitch or width > dst_pitch):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"width {width} exceeds the pitch")
    if depth > 1 and (src_slice < src_pitch * height or dst_slice < dst_pitch * height):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "the height exceeds a slice")

    def copy():
        for z in range(depth):
            for row in range(height):
                memory.memcpy(dst + z * dst_slice + row * dst_pitch, src + z * src_slice + row * src_pitch, width)
    return copy


@_faults_are_sticky
def cuMemcpy3D(src: int, src_pitch: int, src_slice: int, dst: int, dst_pitch: int, dst_slice: int,
               width: int, height: int, depth: int, stream=None) -> None:
    _require_context()
    submit(stream, memcpy_3d_work(src, src_pitch, src_slice, dst, dst_pitch, dst_slice, width, height, depth))


def cuMemAllocPitch(width: int, height: int, element_size: int) -> tuple:
    """Rows padded to 512 bytes, as NVIDIA GPUs' texture pitch alignment."""
    _require_context()
    if element_size not in (4, 8, 16) or width == 0 or height == 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "cuMemAllocPitch: bad width, height or element size")
    pitch = (width + 511) // 512 * 512
    return _allocate(pitch * height), pitch


@_faults_are_sticky
def cuMemsetAsync(dst: int, value: int, count: int, element: int, stream) -> None:
    """Fill `count` elements of `element` bytes (1, 2 or 4) with `value`, in stream order
    (stream None: a blocking memset on the default stream)."""
    _require_context()
    a = memory.lookup(dst)
    if a is None and count == 0:
        a = memory.lookup(dst - 1)       # an empty range at an allocation's end is still inside it
    if a is None or dst + count * element > a.end:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"memset of {count * element} bytes at 0x{dst:x} "
                                                          "is not inside one allocation")
    submit(stream, lambda: memory.fill(dst, value, count, element))


@_faults_are_sticky
def cuMemsetD2D(dst: int, pitch: int, value: int, element: int, width: int, height: int, stream) -> None:
    """A pitched memset in stream order (stream None: blocking, on the default stream)."""
    _require_context()
    submit(stream, memset_2d_work(dst, pitch, value, element, width, height))


def memset_2d_work(dst: int, pitch: int, value: int, element: int, width: int, height: int):
    if element not in (1, 2, 4):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"element size {element} (1, 2 or 4)")
    def fill():
        for row in range(height):
            memory.fill(dst + row * pitch, value, width, element)
    return fill


def cuMemHostRegister(ptr: int, size: int) -> None:
    """Host memory the caller owns becomes known to anycuda (it is usable by kernels as it is)."""
    _require_context()
    if size == 0 or not ptr:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "cuMemHostRegister of nothing")
    if memory.lookup(ptr) is not None:
        raise CudaError(CUresult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, f"0x{ptr:x} is registered already")
    memory.table.add(_owned(memory.Allocation(ptr, size, None, "registered")))


def cuMemHostUnregister(ptr: int) -> None:
    _require_context()
    a = memory.lookup(ptr)
    if a is None or a.kind != "registered" or a.ptr != ptr:
        raise CudaError(CUresult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, f"0x{ptr:x} was not registered")
    memory.table.remove(ptr, expected=a)


def cuMemFreeHost(ptr: int) -> None:
    _require_context()
    if not ptr:                    # as the driver: free(NULL) semantics
        return
    a = memory.lookup(ptr)
    if a is None or a.ptr != ptr or a.kind != "host":
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"0x{ptr:x} is not host memory from cuMemAllocHost")
    wait_idle(_current_device())   # as cuMemFree: queued work may still use it
    memory.free(ptr)


def cuMemGetAddressRange(ptr: int) -> tuple:
    _require_context()
    a = memory.lookup(ptr)
    if a is None:
        raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"0x{ptr:x} is not in any allocation")
    return a.ptr, a.size


def pointer_attribute_or_default(attribute: int, ptr: int):
    """cuPointerGetAttributes' answer: the attribute's value, or 0 for memory anycuda does
    not know (which that call reports without an error)."""
    a = memory.lookup(ptr)
    if a is None:
        return 0
    return cuPointerGetAttribute(attribute, ptr)


def cuMemAllocAsync(size: int, stream: int) -> int:
    """Stream-ordered allocation: with one address space the memory is ready at once."""
    _stream(stream)
    return cuMemAlloc(size)


def cuMemFreeAsync(ptr: int, stream: int) -> None:
    _require_context()
    if memory.lookup(ptr) is None:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"0x{ptr:x} is not a live allocation")
    submit(stream, memory.free, ptr)


CU_DEVICE_CPU = -1


# CUmemLocationType: device, host, host NUMA node, the calling thread's host NUMA node
LOCATION_DEVICE, LOCATION_HOST, LOCATION_HOST_NUMA, LOCATION_HOST_NUMA_CURRENT = 1, 2, 3, 4


MEM_ADVICE = range(1, 7)      # CU_MEM_ADVISE_SET_READ_MOSTLY .. CU_MEM_ADVISE_UNSET_ACCESSED_BY


def managed_hint(ptr: int, count: int, location: tuple, advice: int = None) -> None:
    """A prefetch (`advice` None) or an advice about managed memory at `location`, a
    CUmemLocation's (type, id): nothing to move on the CPU, so it is checked as CUDA checks it
    and then done."""
    kind, ident = location
    if advice is not None and advice not in MEM_ADVICE:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"memory advice {advice} is not a CUmem_advise value")
    if kind == LOCATION_DEVICE:
        if not 0 <= ident < cuDeviceGetCount():
            raise CudaError(CUresult.CUDA_ERROR_INVALID_DEVICE, f"device {ident} does not exist")
    elif kind not in (LOCATION_HOST, LOCATION_HOST_NUMA, LOCATION_HOST_NUMA_CURRENT) \
            or kind == LOCATION_HOST_NUMA and ident < 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"memory location type {kind} (id {ident}) is not valid")
    _require_context()
    a = memory.lookup(ptr)
    if a is None or ptr + count > a.end:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"0x{ptr:x}+{count} is not inside one allocation")


def location_of_device(dev: int) -> tuple:
    """The (type, id) location a CUdevice names in the older calls: CU_DEVICE_CPU is the host."""
    return (LOCATION_HOST, 0) if dev == CU_DEVICE_CPU else (LOCATION_DEVICE, dev)


class MemPool:
    def __init__(self):
        self.attributes = {}


def cuDeviceGetDefaultMemPool(dev: int) -> int:
    """One memory pool per device; stream-ordered allocations come from the ordinary heap."""
    _check_device(dev)
    pools = _state.setdefault("pools", {})
    if dev not in pools:
        pools[dev] = _new_handle(MemPool())
    return pools[dev]


def cuMemPoolSetAttribute(pool: int, attribute: int, value: int) -> None:
    _get(pool, MemPool).attributes[attribute] = value


def cuMemPoolGetAttribute(pool: int, attribute: int) -> int:
    return _get(pool, MemPool).attributes.get(attribute, 0)


def cuMemAllocFromPoolAsync(size: int, pool: int, stream: int) -> int:
    _get(pool, MemPool)
    return cuMemAllocAsync(size, stream)
