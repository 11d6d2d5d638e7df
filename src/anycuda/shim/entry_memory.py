"""The C entry points of memory (allocations, copies, memsets,
pointer attributes, pools): marshalling only (the semantics are in
anycuda.driver.api). Called from entry.define() with the marshalling they share
(shim/marshal.py). `define` is long because it is a list: one closure of a few lines per C
entry point."""
from __future__ import annotations

from ..driver import api
from ..runtime import memory
from ..runtime.errors import CudaError, CUresult
from . import entry_textures


def define(ffi, entry, ptr, handle, common):
    @entry
    def cuMemAlloc_v2(out, size):
        out[0] = api.cuMemAlloc(size)

    @entry
    def cuMemFree_v2(dptr):
        api.cuMemFree(dptr)

    @entry
    def cuMemcpyHtoD_v2(dst, src, n):
        api.cuMemcpy(dst, ptr(src), n)

    @entry
    def cuMemcpyDtoH_v2(dst, src, n):
        api.cuMemcpy(ptr(dst), src, n)

    @entry
    def cuMemcpyDtoD_v2(dst, src, n):
        api.cuMemcpy(dst, src, n)

    @entry
    def cuMemsetD8_v2(dst, value, n):
        api.cuMemsetD8(dst, value, n)

    @entry
    def cuMemsetD32_v2(dst, value, n):
        api.cuMemsetD32(dst, value, n)

    @entry
    def cuMemGetInfo_v2(free, total):
        free[0], total[0] = api.cuMemGetInfo()

    @entry
    def cuMemAllocHost_v2(out, size):
        out[0] = ffi.cast("void *", api.cuMemAllocHost(size))

    @entry
    def cuMemHostAlloc(out, size, flags):
        out[0] = ffi.cast("void *", api.cuMemAllocHost(size))

    @entry
    def cuMemFreeHost(p):
        api.cuMemFreeHost(ptr(p))

    @entry
    def cuMemAllocManaged(out, size, flags):
        out[0] = api.cuMemAllocManaged(size, flags)

    @entry
    def cuMemcpyAsync(dst, src, n, stream):
        api.cuMemcpyAsync(dst, src, n, ptr(stream))

    @entry
    def cuMemcpyHtoDAsync_v2(dst, src, n, stream):
        api.cuMemcpyAsync(dst, ptr(src), n, ptr(stream))

    @entry
    def cuMemcpyDtoHAsync_v2(dst, src, n, stream):
        api.cuMemcpyAsync(ptr(dst), src, n, ptr(stream))

    @entry
    def cuPointerGetAttribute(data, attribute, p):
        value = api.cuPointerGetAttribute(attribute, p)
        size = {1: 8, 2: 4, 3: 8, 4: 8, 8: 4, 9: 4, 11: 8, 12: 8}[attribute]
        ffi.memmove(data, int(value).to_bytes(size, "little"), size)

    @entry
    def cuMemcpy(dst, src, n):
        api.cuMemcpy(dst, src, n)

    @entry
    def cuMemcpyDtoDAsync_v2(dst, src, n, stream):
        api.cuMemcpyAsync(dst, src, n, ptr(stream))

    def copy_2d(p, stream):
        def base(kind, host, device, array, x, y, pitch):
            if kind == 3:                 # CU_MEMORYTYPE_ARRAY
                return entry_textures.array_side(ffi, ptr, array, x, y, 0, p.WidthInBytes, p.Height, 1)[:2]
            start = ptr(host) if kind == 1 else device
            return start + y * pitch + x, pitch
        src, src_pitch = base(p.srcMemoryType, p.srcHost, p.srcDevice, p.srcArray, p.srcXInBytes, p.srcY, p.srcPitch)
        dst, dst_pitch = base(p.dstMemoryType, p.dstHost, p.dstDevice, p.dstArray, p.dstXInBytes, p.dstY, p.dstPitch)
        api.cuMemcpy2D(src, src_pitch, dst, dst_pitch, p.WidthInBytes, p.Height, stream)

    @entry
    def cuMemcpy3D_v2(p):
        api.cuMemcpy3D(*common.copy_3d_args(p))

    @entry
    def cuMemcpy3DAsync_v2(p, stream):
        api.cuMemcpy3D(*common.copy_3d_args(p), ptr(stream))

    @entry
    def cuMemcpy2D_v2(p):
        copy_2d(p, None)

    @entry
    def cuMemcpy2DUnaligned_v2(p):
        copy_2d(p, None)

    @entry
    def cuMemcpy2DAsync_v2(p, stream):
        copy_2d(p, ptr(stream))

    @entry
    def cuMemAllocPitch_v2(out, pitch, width, height, element):
        out[0], pitch[0] = api.cuMemAllocPitch(width, height, element)

    @entry
    def cuMemsetD16_v2(dst, value, n):
        api.cuMemsetAsync(dst, value, n, 2, None)      # blocking

    @entry
    def cuMemsetD8Async(dst, value, n, stream):
        api.cuMemsetAsync(dst, value, n, 1, ptr(stream))

    @entry
    def cuMemsetD16Async(dst, value, n, stream):
        api.cuMemsetAsync(dst, value, n, 2, ptr(stream))

    @entry
    def cuMemsetD32Async(dst, value, n, stream):
        api.cuMemsetAsync(dst, value, n, 4, ptr(stream))

    @entry
    def cuMemsetD2D8_v2(dst, pitch, value, width, height):
        api.cuMemsetD2D(dst, pitch, value, 1, width, height, None)

    @entry
    def cuMemsetD2D32_v2(dst, pitch, value, width, height):
        api.cuMemsetD2D(dst, pitch, value, 4, width, height, None)

    @entry
    def cuMemsetD2D8Async(dst, pitch, value, width, height, stream):
        api.cuMemsetD2D(dst, pitch, value, 1, width, height, ptr(stream))

    @entry
    def cuMemsetD2D32Async(dst, pitch, value, width, height, stream):
        api.cuMemsetD2D(dst, pitch, value, 4, width, height, ptr(stream))

    @entry
    def cuMemHostRegister_v2(p, size, flags):
        api.cuMemHostRegister(ptr(p), size)

    @entry
    def cuMemHostUnregister(p):
        api.cuMemHostUnregister(ptr(p))

    @entry
    def cuMemHostGetDevicePointer_v2(out, p, flags):
        if memory.lookup(ptr(p)) is None:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "not page-locked host memory")
        out[0] = ptr(p)                    # one address space: the same address

    @entry
    def cuMemHostGetFlags(out, p):
        if memory.lookup(ptr(p)) is None:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "not page-locked host memory")
        out[0] = 0

    @entry
    def cuMemGetAddressRange_v2(base, size, dptr):
        b, s = api.cuMemGetAddressRange(dptr)
        if base != ffi.NULL:
            base[0] = b
        if size != ffi.NULL:
            size[0] = s

    _ATTRIBUTE_SIZES = {1: 8, 2: 4, 3: 8, 4: 8, 5: 8, 6: 8, 7: 4, 8: 4, 9: 4, 10: 8, 11: 8, 12: 8, 13: 4,
                        14: 8, 15: 4, 16: 4, 17: 8, 18: 4, 19: 8}

    @entry
    def cuPointerGetAttributes(count, attributes, data, p):
        for i in range(count):
            a = attributes[i]
            if a not in _ATTRIBUTE_SIZES:
                raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"pointer attribute {a} is not supported yet")
            try:
                value = api.pointer_attribute_or_default(a, p)
            except CudaError as e:
                if e.code != CUresult.CUDA_ERROR_NOT_SUPPORTED:
                    raise
                value = 0
            if a == 6:                   # CU_POINTER_ATTRIBUTE_BUFFER_ID: unique per allocation
                found = memory.lookup(p)
                value = found.ptr if found else 0
            n = _ATTRIBUTE_SIZES[a]
            ffi.memmove(data[i], int(value).to_bytes(n, "little", signed=value < 0), n)

    @entry
    def cuMemAllocAsync(out, size, stream):
        out[0] = api.cuMemAllocAsync(size, ptr(stream))

    @entry
    def cuMemFreeAsync(dptr, stream):
        api.cuMemFreeAsync(dptr, ptr(stream))

    @entry
    def cuMemcpyPeer(dst, dst_ctx, src, src_ctx, n):
        api.cuMemcpyPeer(dst, ptr(dst_ctx), src, ptr(src_ctx), n)

    @entry
    def cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, n, stream):
        api.cuMemcpyPeerAsync(dst, ptr(dst_ctx), src, ptr(src_ctx), n, ptr(stream))

    @entry
    def cuMemcpy3DPeer(p):
        api.cuMemcpy3DPeer(*common.copy_3d_args(p), ptr(p.srcContext), ptr(p.dstContext))

    @entry
    def cuMemcpy3DPeerAsync(p, stream):
        api.cuMemcpy3DPeer(*common.copy_3d_args(p), ptr(p.srcContext), ptr(p.dstContext), ptr(stream))

    @entry
    def cuMemPrefetchAsync_v2(dptr, count, location, flags, stream):
        if flags:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"prefetch flags {flags} (must be 0)")
        api.managed_hint(dptr, count, (location.type, location.id))

    @entry
    def cuMemPrefetchAsync(dptr, count, device, stream):
        api.managed_hint(dptr, count, api.location_of_device(device))

    @entry
    def cuMemAdvise_v2(dptr, count, advice, location):
        api.managed_hint(dptr, count, (location.type, location.id), advice)

    @entry
    def cuMemAdvise(dptr, count, advice, device):
        api.managed_hint(dptr, count, api.location_of_device(device), advice)

    @entry
    def cuDeviceGetDefaultMemPool(out, dev):
        out[0] = handle(api.cuDeviceGetDefaultMemPool(dev))

    @entry
    def cuDeviceGetMemPool(out, dev):
        out[0] = handle(api.cuDeviceGetDefaultMemPool(dev))

    # CUmemPool_attribute: 1-3 are ints, 4-8 (release threshold, memory counters) 64-bit
    def pool_value_type(attribute):
        return "int *" if attribute <= 3 else "unsigned long long *"

    @entry
    def cuMemPoolSetAttribute(pool, attribute, value):
        api.cuMemPoolSetAttribute(ptr(pool), attribute, ffi.cast(pool_value_type(attribute), value)[0])

    @entry
    def cuMemPoolGetAttribute(pool, attribute, value):
        ffi.cast(pool_value_type(attribute), value)[0] = api.cuMemPoolGetAttribute(ptr(pool), attribute)

    @entry
    def cuMemPoolTrimTo(pool, keep):
        api.cuMemPoolGetAttribute(ptr(pool), 0)

    @entry
    def cuMemAllocFromPoolAsync(out, size, pool, stream):
        out[0] = api.cuMemAllocFromPoolAsync(size, ptr(pool), ptr(stream))
