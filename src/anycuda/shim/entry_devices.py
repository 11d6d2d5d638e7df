"""The C entry points of the driver, devices and contexts: marshalling only (the semantics are in
anycuda.driver.api). Called from entry.define() with the marshalling they share
(shim/marshal.py). `define` is long because it is a list: one closure of a few lines per C
entry point."""
from __future__ import annotations

from ..driver import api
from ..runtime.errors import CudaError, CUresult
from .marshal import c_string


def define(ffi, entry, ptr, handle, common):
    @entry
    def cuInit(flags):
        api.cuInit(flags)

    @entry
    def cuDriverGetVersion(out):
        out[0] = api.cuDriverGetVersion()

    @entry
    def cuDeviceGetCount(out):
        out[0] = api.cuDeviceGetCount()

    @entry
    def cuDeviceGet(out, ordinal):
        out[0] = api.cuDeviceGet(ordinal)

    @entry
    def cuDeviceGetName(buf, length, dev):
        name = api.cuDeviceGetName(dev).encode()[: max(length - 1, 0)]
        ffi.memmove(buf, name + b"\0", len(name) + 1)

    @entry
    def cuDeviceTotalMem_v2(out, dev):
        out[0] = api.cuDeviceTotalMem(dev)

    @entry
    def cuDeviceComputeCapability(major, minor, dev):
        major[0], minor[0] = api.cuDeviceComputeCapability(dev)

    @entry
    def cuDeviceGetAttribute(out, attrib, dev):
        out[0] = api.cuDeviceGetAttribute(attrib, dev)

    @entry
    def cuDevicePrimaryCtxRetain(out, dev):
        out[0] = handle(api.cuDevicePrimaryCtxRetain(dev))

    @entry
    def cuDevicePrimaryCtxRelease_v2(dev):
        api.cuDevicePrimaryCtxRelease(dev)

    @entry
    def cuDevicePrimaryCtxReset_v2(dev):
        api.cuDevicePrimaryCtxReset(dev)

    @entry
    def cuCtxCreate_v2(out, flags, dev):
        out[0] = handle(api.cuCtxCreate(flags, dev))

    @entry
    def cuCtxCreate_v4(out, params, flags, dev):
        if params != ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED, "context creation parameters are not supported yet")
        out[0] = handle(api.cuCtxCreate(flags, dev))

    @entry
    def cuCtxDestroy_v2(ctx):
        api.cuCtxDestroy(ptr(ctx))

    @entry
    def cuCtxSetCurrent(ctx):
        api.cuCtxSetCurrent(ptr(ctx))

    @entry
    def cuCtxGetCurrent(out):
        out[0] = handle(api.cuCtxGetCurrent())

    @entry
    def cuCtxSynchronize():
        api.cuCtxSynchronize()

    @entry
    def cuCtxSynchronize_v2(ctx):
        api.cuCtxSynchronize(ptr(ctx))

    @entry
    def cuCtxPushCurrent_v2(ctx):
        api.cuCtxPushCurrent(ptr(ctx))

    @entry
    def cuCtxPopCurrent_v2(out):
        popped = api.cuCtxPopCurrent()
        if out != ffi.NULL:
            out[0] = handle(popped)

    @entry
    def cuCtxGetFlags(out):
        out[0] = 0

    @entry
    def cuCtxGetApiVersion(ctx, out):
        out[0] = 3020                  # the context API version current drivers report

    @entry
    def cuDevicePrimaryCtxGetState(dev, flags, active):
        flags[0], active[0] = api.cuDevicePrimaryCtxGetState(dev)

    @entry
    def cuDevicePrimaryCtxSetFlags_v2(dev, flags):
        api.cuDeviceGet(dev)

    @entry
    def cuDeviceGetUuid_v2(out, dev):
        ffi.memmove(out, api.cuDeviceGetUuid(dev), 16)

    @entry
    def cuDeviceGetUuid(out, dev):
        ffi.memmove(out, api.cuDeviceGetUuid(dev), 16)

    @entry
    def cuCtxGetDevice(out):
        out[0] = api.cuCtxGetDevice()

    @entry
    def cuCtxGetDevice_v2(out, ctx):
        out[0] = api.cuCtxGetDevice(ptr(ctx))

    @entry
    def cuCtxSetLimit(limit, value):
        api.cuCtxSetLimit(limit, value)

    @entry
    def cuCtxGetLimit(out, limit):
        out[0] = api.cuCtxGetLimit(limit)

    @entry
    def cuCtxGetCacheConfig(out):
        out[0] = 0                         # CU_FUNC_CACHE_PREFER_NONE

    @entry
    def cuCtxSetCacheConfig(config):
        pass                               # no caches to configure on the CPU

    @entry
    def cuCtxGetStreamPriorityRange(least, greatest):
        if least != ffi.NULL:
            least[0] = 0
        if greatest != ffi.NULL:
            greatest[0] = -5               # what current GPUs report; priorities are hints

    @entry
    def cuDeviceGetByPCIBusId(out, bus_id):
        if bus_id == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "NULL PCI bus id")
        out[0] = api.cuDeviceGetByPCIBusId(ffi.string(bus_id).decode("ascii", "replace"))

    @entry
    def cuDeviceGetPCIBusId(buf, length, dev):
        text = api.cuDeviceGetPCIBusId(dev).encode()[: max(length - 1, 0)]
        ffi.memmove(buf, text + b"\0", len(text) + 1)

    @entry
    def cuDeviceCanAccessPeer(out, dev, peer):
        out[0] = api.cuDeviceCanAccessPeer(dev, peer)

    @entry
    def cuDeviceGetP2PAttribute(out, attrib, src, dst):
        out[0] = api.cuDeviceGetP2PAttribute(attrib, src, dst)

    @entry
    def cuCtxEnablePeerAccess(peer, flags):
        api.cuCtxEnablePeerAccess(ptr(peer), flags)

    @entry
    def cuCtxDisablePeerAccess(peer):
        api.cuCtxDisablePeerAccess(ptr(peer))

    @entry
    def cuProfilerStart():
        pass

    @entry
    def cuProfilerStop():
        pass

    @entry
    def cuGetErrorName(code, out):
        out[0] = c_string(ffi, api.error_name(code))

    @entry
    def cuGetErrorString(code, out):
        out[0] = c_string(ffi, api.error_string(code))
