"""The C entry points of libcuda.so.1, defined with cffi's `def_extern`.

Nothing but marshalling: read C arguments, call anycuda.driver.api, write results through
the caller's pointers, and turn every exception into a CUresult (never let one escape
into C, where it would abort the caller).
"""
from __future__ import annotations

import functools
import os
import sys

from ..driver import api
from ..runtime.errors import CudaError, CUresult

_strings = {}


def _c_string(ffi, text: str):
    """A NUL-terminated string that lives as long as the process."""
    if text not in _strings:
        _strings[text] = ffi.new("char[]", text.encode())
    return _strings[text]


def _log(msg):
    if "api" in os.environ.get("ANYCUDA_LOG", ""):
        sys.stderr.write(f"anycuda: {msg}\n")


def _own_library():
    """This libcuda.so.1, opened again to look up its exported functions."""
    import ctypes
    from .build import LIBRARY
    if "lib" not in _strings:
        _strings["lib"] = ctypes.CDLL(LIBRARY)       # already loaded: the loader returns it
    return _strings["lib"]


def _address(fn) -> int:
    import ctypes
    return ctypes.cast(fn, ctypes.c_void_p).value


def _known_driver_functions():
    """The driver function names recorded when this library was built (None if unknown)."""
    if "known" not in _strings:
        from .build import LIBRARY
        import pathlib
        path = None
        for line in open("/proc/self/maps"):
            if line.rstrip().endswith("/" + LIBRARY):
                path = pathlib.Path(line.split()[-1]).parent / "driver-functions.txt"
                break
        try:
            _strings["known"] = set(path.read_text().split()) if path else None
        except OSError:
            _strings["known"] = None
    return _strings["known"]


def define(ffi, lib=None):
    """Register every entry point on `ffi` (called by the embedding's init code)."""

    def entry(fn):
        name = fn.__name__

        @functools.wraps(fn)
        def wrapper(*args):
            try:
                fn(*args)
                code = CUresult.CUDA_SUCCESS
            except CudaError as e:
                code = e.code
                _log(f"{name}: {e}")
            except Exception as e:        # a bug in anycuda must not kill the caller
                code = CUresult.CUDA_ERROR_UNKNOWN
                sys.stderr.write(f"anycuda: internal error in {name}: {type(e).__name__}: {e}\n")
            _log(f"{name}{args} -> {int(code)}")
            return int(code)
        ffi.def_extern(name=name)(wrapper)
        return wrapper

    ptr = lambda p: int(ffi.cast("uintptr_t", p))
    handle = lambda h: ffi.cast("void *", h)

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
    def cuModuleLoadData(out, image):
        if image == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "image is NULL")
        out[0] = handle(api.cuModuleLoadData(api.ptx_from_image(ptr(image)) + b"\0"))

    @entry
    def cuModuleUnload(mod):
        api.cuModuleUnload(ptr(mod))

    @entry
    def cuModuleGetFunction(out, mod, name):
        out[0] = handle(api.cuModuleGetFunction(ptr(mod), ffi.string(name).decode()))

    @entry
    def cuModuleGetGlobal_v2(dptr, nbytes, mod, name):
        addr, size = api.cuModuleGetGlobal(ptr(mod), ffi.string(name).decode())
        if dptr != ffi.NULL:
            dptr[0] = addr
        if nbytes != ffi.NULL:
            nbytes[0] = size

    @entry
    def cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        layout = api.kernel_param_layout(ptr(f))
        size = max((off + n for off, n in layout), default=0)
        buf = bytearray(size)
        if layout and params == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "kernelParams is NULL (extra is not supported yet)")
        for i, (off, n) in enumerate(layout):
            buf[off:off + n] = ffi.buffer(ffi.cast("char *", params[i]), n)[:]
        api.cuLaunchKernel(ptr(f), (gx, gy, gz), (bx, by, bz), shared, ptr(stream), bytes(buf))

    @entry
    def cuStreamCreate(out, flags):
        out[0] = handle(api.cuStreamCreate(flags))

    @entry
    def cuStreamDestroy_v2(stream):
        api.cuStreamDestroy(ptr(stream))

    @entry
    def cuStreamSynchronize(stream):
        api.cuStreamSynchronize(ptr(stream))

    @entry
    def cuModuleGetLoadingMode(out):
        out[0] = 1                     # CU_MODULE_EAGER_LOADING

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
    def cuModuleLoad(out, fname):
        with open(ffi.string(fname).decode(), "rb") as fh:
            data = fh.read()
        keep = ffi.from_buffer(data + b"\0")
        out[0] = handle(api.cuModuleLoadData(api.ptx_from_image(ptr(ffi.cast("void *", keep))) + b"\0"))

    @entry
    def cuModuleLoadDataEx(out, image, nopts, options, values):
        if image == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "image is NULL")
        out[0] = handle(api.cuModuleLoadData(api.ptx_from_image(ptr(image)) + b"\0"))   # JIT options ignored

    @entry
    def cuMemAllocHost_v2(out, size):
        out[0] = ffi.cast("void *", api.cuMemAllocHost(size))

    @entry
    def cuMemHostAlloc(out, size, flags):
        out[0] = ffi.cast("void *", api.cuMemAllocHost(size))

    @entry
    def cuMemFreeHost(p):
        api.cuMemFree(ptr(p))

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
    def cuFuncGetAttribute(out, attrib, f):
        out[0] = api.cuFuncGetAttribute(attrib, ptr(f))

    @entry
    def cuOccupancyMaxActiveBlocksPerMultiprocessor(out, f, block, shared):
        out[0] = api.cuOccupancyMaxActiveBlocksPerMultiprocessor(ptr(f), block, shared)

    @entry
    def cuEventCreate(out, flags):
        out[0] = handle(api.cuEventCreate(flags))

    @entry
    def cuEventRecord(event, stream):
        api.cuEventRecord(ptr(event), ptr(stream))

    @entry
    def cuEventQuery(event):
        api.cuEventQuery(ptr(event))

    @entry
    def cuEventSynchronize(event):
        api.cuEventSynchronize(ptr(event))

    @entry
    def cuEventElapsedTime_v2(out, start, end):
        out[0] = api.cuEventElapsedTime(ptr(start), ptr(end))

    @entry
    def cuEventDestroy_v2(event):
        api.cuEventDestroy(ptr(event))

    @entry
    def cuStreamWaitEvent(stream, event, flags):
        api.cuStreamWaitEvent(ptr(stream), ptr(event))

    @entry
    def cuStreamQuery(stream):
        api.cuStreamQuery(ptr(stream))

    @entry
    def cuLaunchHostFunc(stream, fn, user):
        api.cuLaunchHostFunc(ptr(stream), ptr(fn), ptr(user))

    def image_bytes(image):
        if image == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "image is NULL")
        return api.ptx_from_image(ptr(image)) + b"\0"

    @entry
    def cuLibraryLoadData(out, code, jit_options, jit_values, n_jit, lib_options, lib_values, n_lib):
        out[0] = handle(api.cuLibraryLoadData(image_bytes(code)))       # options do not apply to the CPU

    @entry
    def cuLibraryUnload(lib):
        api.cuLibraryUnload(ptr(lib))

    @entry
    def cuLibraryGetKernel(out, lib, name):
        out[0] = handle(api.cuLibraryGetKernel(ptr(lib), ffi.string(name).decode()))

    @entry
    def cuLibraryGetModule(out, lib):
        out[0] = handle(api.cuLibraryGetModule(ptr(lib)))

    @entry
    def cuLibraryGetGlobal(dptr, nbytes, lib, name):
        addr, size = api.cuLibraryGetGlobal(ptr(lib), ffi.string(name).decode())
        if dptr != ffi.NULL:
            dptr[0] = addr
        if nbytes != ffi.NULL:
            nbytes[0] = size

    @entry
    def cuKernelGetFunction(out, kernel):
        out[0] = handle(api.cuKernelGetFunction(ptr(kernel)))

    @entry
    def cuKernelGetLibrary(out, kernel):
        out[0] = handle(api.cuKernelGetLibrary(ptr(kernel)))

    @entry
    def cuKernelGetAttribute(out, attrib, kernel, dev):
        out[0] = api.cuFuncGetAttribute(attrib, ptr(kernel))

    @entry
    def cuKernelSetAttribute(attrib, value, kernel, dev):
        api.cuFuncSetAttribute(ptr(kernel), attrib, value)

    @entry
    def cuFuncSetAttribute(f, attrib, value):
        api.cuFuncSetAttribute(ptr(f), attrib, value)

    @entry
    def cuKernelGetName(out, kernel):
        out[0] = _c_string(ffi, api.function_name(ptr(kernel)))

    @entry
    def cuFuncGetName(out, f):
        out[0] = _c_string(ffi, api.function_name(ptr(f)))

    def resolve(symbol: bytes, version: int):
        """The address of our implementation of a driver function, by base name and the
        CUDA version the caller was built for: the newest `_vN` we export, else the plain name."""
        lib = _own_library()
        name = symbol.decode()
        for candidate in [f"{name}_v{n}" for n in range(4, 1, -1)] + [name]:
            fn = getattr(lib, candidate, None) if candidate.split("_v")[0] == name else None
            if fn is not None:
                return ffi.cast("void *", ffi.cast("uintptr_t", _address(fn)))
        return None

    stub_names = []

    def unsupported(index):
        name = stub_names[index] if index < len(stub_names) else f"#{index}"
        if name not in _strings.setdefault("reported", set()):
            _strings["reported"].add(name)
            sys.stderr.write(f"anycuda: {name} is not supported yet\n")
        return int(CUresult.CUDA_ERROR_NOT_SUPPORTED)
    ffi.def_extern(name="anycuda_unsupported")(unsupported)

    def stub_for(name: str):
        """A stub for a driver function anycuda lacks; None for a name the driver API does
        not have (as far as the cuda.h this library was built against says)."""
        known = _known_driver_functions()
        if known is not None and name not in known:
            return None
        if known is None and not name.startswith("cu"):
            return None
        if name not in stub_names:
            stub_names.append(name)
        return lib.anycuda_stub_address(stub_names.index(name))

    def resolve_or_stub(name: bytes, version: int):
        found = resolve(name, version)
        if found is None:
            stub = stub_for(name.decode())
            if stub is not None and stub != ffi.NULL:
                return stub
        return found

    @entry
    def cuGetProcAddress_v2(symbol, pfn, version, flags, status):
        name = ffi.string(symbol)
        found = resolve_or_stub(name, version)
        if status != ffi.NULL:
            status[0] = 0 if found is not None else 1        # CU_GET_PROC_ADDRESS_SUCCESS / SYMBOL_NOT_FOUND
        pfn[0] = found if found is not None else ffi.NULL
        _log(f"cuGetProcAddress {name.decode()} (CUDA {version}) -> {'found' if found is not None else 'missing'}")
        if found is None:
            raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"{name.decode()} is not provided by anycuda yet")

    @entry
    def cuGetProcAddress(symbol, pfn, version, flags):
        found = resolve_or_stub(ffi.string(symbol), version)
        pfn[0] = found if found is not None else ffi.NULL
        if found is None:
            raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"{ffi.string(symbol).decode()} is not provided")

    @entry
    def cuGetExportTable(table, table_id):
        if table == ffi.NULL or table_id == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "NULL table or table id")
        uuid = bytes(ffi.buffer(ffi.cast("char *", table_id), 16)).hex()
        from . import export_tables
        found = export_tables.lookup(uuid)
        if found is not None:
            table[0] = found
            _log(f"cuGetExportTable {uuid} -> provided")
            return
        table[0] = ffi.NULL
        optional = export_tables.optional_name(uuid)
        # "not found" sends the runtime down its ordinary path for the tables it can do without
        raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND if optional else CUresult.CUDA_ERROR_NOT_SUPPORTED,
                        f"export table {optional or uuid} is not provided")

    @entry
    def cuGetErrorName(code, out):
        out[0] = _c_string(ffi, api.error_name(code))

    @entry
    def cuGetErrorString(code, out):
        out[0] = _c_string(ffi, api.error_string(code))
