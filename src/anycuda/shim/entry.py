"""The C entry points of libcuda.so.1, defined with cffi's `def_extern`.

Nothing but marshalling: read C arguments, call anycuda.driver.api, write results through
the caller's pointers, and turn every exception into a CUresult (never let one escape
into C, where it would abort the caller).
"""
from __future__ import annotations

import functools
import os
import sys
import threading

from ..driver import api
from . import entry_textures
from .settings import LIBRARY, TRACE
from ..runtime.errors import CudaError, CUresult

_strings = {}

# Failures whose reason a program cannot learn from the code alone (no PTX in the binary, PTX
# anycuda cannot compile, a feature not supported yet, where a kernel faulted): named on
# stderr once, whatever the program does with the code.
_EXPLAINED = {CUresult.CUDA_ERROR_INVALID_IMAGE, CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU,
              CUresult.CUDA_ERROR_INVALID_PTX, CUresult.CUDA_ERROR_NOT_SUPPORTED,
              CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, CUresult.CUDA_ERROR_MISALIGNED_ADDRESS,
              CUresult.CUDA_ERROR_ILLEGAL_INSTRUCTION, CUresult.CUDA_ERROR_LAUNCH_FAILED}


_explained = []

# The CUDA version that introduced each versioned entry point anycuda exports whose signature
# differs from its predecessor's (as cudaTypedefs.h's PFN_<name>_v<version> records them).
_INTRODUCED = {"cuCtxCreate_v4": 12050, "cuCtxCreate_v3": 11040, "cuGetProcAddress_v2": 12000,
               "cuMemPrefetchAsync_v2": 12020, "cuMemAdvise_v2": 12020, "cuStreamBeginCapture_v2": 10010,
               "cuEventElapsedTime_v2": 12080, "cuStreamGetCaptureInfo_v2": 11030,
               "cuStreamGetCaptureInfo_v3": 12030}


def _explain(name: str, e: CudaError) -> None:
    """The CUDA runtime keeps only the code: say once what went wrong (a sticky fault that
    later calls repeat is said once, by the call that met it)."""
    if any(e.message == m or e.message.endswith(": " + m) for m in _explained):
        return
    _explained.append(e.message)
    sys.stderr.write(f"anycuda: {name}: {e}\n")


def _c_string(ffi, text: str):
    """A NUL-terminated string that lives as long as the process."""
    if text not in _strings:
        _strings[text] = ffi.new("char[]", text.encode())
    return _strings[text]




def _log(msg):
    if TRACE:
        sys.stderr.write(f"anycuda: {msg}\n")


def _own_library():
    """This libcuda.so.1, opened again to look up its exported functions."""
    import ctypes
    if "lib" not in _strings:
        _strings["lib"] = ctypes.CDLL(LIBRARY)       # already loaded: the loader returns it
    return _strings["lib"]


def _address(fn) -> int:
    import ctypes
    return ctypes.cast(fn, ctypes.c_void_p).value


def _known_driver_functions():
    """The driver function names recorded when this library was built (None if unknown)."""
    if "known" not in _strings:
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


class _ProgramStdout:
    """sys.stdout of the embedded interpreter: writes through the C library's `stdout`, so
    device printf output lands in the program's own output stream, ordered with what the
    program printed before the synchronisation that shows it (as NVIDIA's driver does)."""
    encoding = "utf-8"
    errors = "replace"

    def __init__(self):
        import ctypes
        self._libc = ctypes.CDLL(None)
        self._stdout = ctypes.c_void_p.in_dll(self._libc, "stdout")
        self._libc.fwrite.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
        self._libc.fflush.argtypes = [ctypes.c_void_p]

    def write(self, text: str) -> int:
        data = text.encode(self.encoding, self.errors)
        self._libc.fwrite(data, 1, len(data), self._stdout)
        return len(text)

    def flush(self) -> None:
        self._libc.fflush(self._stdout)

    def isatty(self) -> bool:
        return False


def define(ffi, lib=None):
    """Register every entry point on `ffi` (called by the embedding's init code)."""
    if lib is not None and not lib.anycuda_host_is_python():
        try:                                   # a C/C++ program: its stdout is the C library's
            sys.stdout = _ProgramStdout()
        except (OSError, ValueError) as e:
            _log(f"device printf goes through Python's stdout: {e}")

    def entry(fn):
        """Export `fn` under its name."""
        name = fn.__name__

        @functools.wraps(fn)
        def wrapper(*args):
            try:
                fn(*args)
                code = CUresult.CUDA_SUCCESS
            except CudaError as e:
                code = e.code
                _log(f"{name}: {e}")
                if code in _EXPLAINED and e.message and name != "cuGetExportTable":   # tables: reported by lookup
                    _explain(name, e)
            except Exception as e:        # a bug in anycuda must not kill the caller
                if isinstance(e, RuntimeError) and "null pointer" in str(e):
                    code = CUresult.CUDA_ERROR_INVALID_VALUE     # cffi: a NULL where the answer goes
                    _log(f"{name}: {e}")
                else:
                    code = CUresult.CUDA_ERROR_UNKNOWN
                    sys.stderr.write(f"anycuda: internal error in {name}: {type(e).__name__}: {e}\n")
            if TRACE:                     # formatting the arguments costs more than most calls
                _log(f"{name}{args} -> {int(code)}")
            return int(code)
        ffi.def_extern(name=name)(wrapper)
        return wrapper

    ptr = lambda p: int(ffi.cast("uintptr_t", p))
    handle = lambda h: ffi.cast("void *", h)
    entry_textures.define(ffi, entry, ptr, handle)     # CUDA arrays, texture and surface objects

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
        out[0] = handle(api.cuModuleLoadData(api.image_at(ptr(image))))

    @entry
    def cuModuleUnload(mod):
        api.cuModuleUnload(ptr(mod))

    @entry
    def cuModuleGetFunction(out, mod, name):
        out[0] = handle(api.cuModuleGetFunction(ptr(mod), ffi.string(name).decode()))

    def write_symbol(dptr, nbytes, found):
        """A symbol's (address, size) through the caller's pointers, either of which may be NULL."""
        addr, size = found
        if dptr != ffi.NULL:
            dptr[0] = addr
        if nbytes != ffi.NULL:
            nbytes[0] = size

    @entry
    def cuModuleGetGlobal_v2(dptr, nbytes, mod, name):
        write_symbol(dptr, nbytes, api.cuModuleGetGlobal(ptr(mod), ffi.string(name).decode()))

    @entry
    def cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        api.cuLaunchKernel(ptr(f), (gx, gy, gz), (bx, by, bz), shared, ptr(stream), launch_params(f, params, extra))

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

    def file_image(fname) -> bytes:
        """The PTX of the module image in file `fname` (PTX text, a fatbinary or an ELF)."""
        if fname == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "file name is NULL")
        path = ffi.string(fname).decode(errors="surrogateescape")
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as e:
            raise CudaError(CUresult.CUDA_ERROR_FILE_NOT_FOUND, f"{path}: {e.strerror}") from None
        keep = ffi.from_buffer(data + b"\0")
        return api.image_at(ptr(ffi.cast("void *", keep)))

    @entry
    def cuModuleLoad(out, fname):
        out[0] = handle(api.cuModuleLoadData(file_image(fname)))

    @entry
    def cuLibraryLoadFromFile(out, fname, jit_options, jit_values, n_jit, lib_options, lib_values, n_lib):
        out[0] = handle(api.cuLibraryLoadData(file_image(fname)))       # options do not apply to the CPU

    @entry
    def cuModuleLoadDataEx(out, image, nopts, options, values):
        if image == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "image is NULL")
        out[0] = handle(api.cuModuleLoadData(api.image_at(ptr(image))))   # JIT options ignored

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
        return api.image_at(ptr(image))

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
        write_symbol(dptr, nbytes, api.cuLibraryGetGlobal(ptr(lib), ffi.string(name).decode()))

    @entry
    def cuLibraryGetManaged(dptr, nbytes, lib, name):
        write_symbol(dptr, nbytes, api.cuLibraryGetManaged(ptr(lib), ffi.string(name).decode()))

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

    # ------------------------------------------------------------ what the CUDA runtime asks for besides

    def launch_params(f, params, extra):
        """The kernel's parameter bytes from kernelParams (an array of pointers, one per
        parameter) or from extra (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE)."""
        layout = api.kernel_param_layout(ptr(f))
        size = max((off + n for off, n in layout), default=0)
        if params == ffi.NULL and extra != ffi.NULL:
            values, i = {}, 0
            while ptr(extra[i]) != 0:                     # CU_LAUNCH_PARAM_END
                values[ptr(extra[i])] = extra[i + 1]
                i += 2
            if 1 not in values or 2 not in values:
                raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "extra lacks the parameter buffer or its size")
            given = ffi.cast("size_t *", values[2])[0]
            if given < size:
                raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"parameter buffer of {given} bytes, kernel takes {size}")
            return bytes(ffi.buffer(ffi.cast("char *", values[1]), size))
        buf = bytearray(size)
        if layout and params == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "kernelParams is NULL")
        for i, (off, n) in enumerate(layout):
            buf[off:off + n] = ffi.buffer(ffi.cast("char *", params[i]), n)[:]
        return bytes(buf)

    def launch_attributes(attrs, count):
        """[(id, value)] of a CUlaunchAttribute array: 8 bytes holding the id, then a 64-byte
        union whose first int (cooperative, priority, ...) or first three unsigned ints
        (clusterDim, preferredClusterDim) are the value."""
        if count and attrs == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "attrs is NULL")
        out = []
        for i in range(count):
            words = ffi.cast("unsigned int *", ffi.cast("char *", attrs) + 72 * i)
            attr = words[0]
            out.append((attr, (words[2], words[3], words[4]) if attr in (4, 11) else ffi.cast("int *", words + 2)[0]))
        return out

    @entry
    def cuLaunchKernelEx(config, f, params, extra):
        c = config
        api.cuLaunchKernelEx(ptr(f), (c.gridDimX, c.gridDimY, c.gridDimZ), (c.blockDimX, c.blockDimY, c.blockDimZ),
                             c.sharedMemBytes, ptr(c.hStream), launch_params(f, params, extra),
                             launch_attributes(c.attrs, c.numAttrs))

    @entry
    def cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params):
        api.cuLaunchCooperativeKernel(ptr(f), (gx, gy, gz), (bx, by, bz), shared, ptr(stream),
                                      launch_params(f, params, ffi.NULL))

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

    def copy_3d_args(p):
        """(src, src pitch, src slice, dst, dst pitch, dst slice, width, height, depth) of a
        CUDA_MEMCPY3D (memory types: 1 host, 2 device, 3 CUDA array, 4 unified)."""
        def side(kind, host, device, array, x, y, z, pitch, rows, name):
            if kind == 3:
                return entry_textures.array_side(ffi, ptr, array, x, y, z, p.WidthInBytes, p.Height, p.Depth)
            slice_ = pitch * (rows or p.Height)
            return (ptr(host) if kind == 1 else device) + z * slice_ + y * pitch + x, pitch, slice_
        src = side(p.srcMemoryType, p.srcHost, p.srcDevice, p.srcArray, p.srcXInBytes, p.srcY, p.srcZ,
                   p.srcPitch, p.srcHeight, "source")
        dst = side(p.dstMemoryType, p.dstHost, p.dstDevice, p.dstArray, p.dstXInBytes, p.dstY, p.dstZ,
                   p.dstPitch, p.dstHeight, "destination")
        return (*src, *dst, p.WidthInBytes, p.Height, p.Depth)

    @entry
    def cuMemcpy3D_v2(p):
        api.cuMemcpy3D(*copy_3d_args(p))

    @entry
    def cuMemcpy3DAsync_v2(p, stream):
        api.cuMemcpy3D(*copy_3d_args(p), ptr(stream))

    def capture_info(stream, status, id_out, graph_out, deps_out, edges_out, count_out):
        status[0] = api.cuStreamIsCapturing(ptr(stream))
        if id_out != ffi.NULL:
            id_out[0] = api.capture_id(ptr(stream))
        if graph_out != ffi.NULL:
            graph_out[0] = ffi.NULL          # the graph under capture is not exposed yet
        for out in (deps_out, edges_out):
            if out != ffi.NULL:
                out[0] = ffi.NULL
        if count_out != ffi.NULL:
            count_out[0] = 0

    @entry
    def cuStreamGetCaptureInfo_v2(stream, status, id_out, graph_out, deps_out, count_out):
        capture_info(stream, status, id_out, graph_out, deps_out, ffi.NULL, count_out)

    @entry
    def cuStreamGetCaptureInfo_v3(stream, status, id_out, graph_out, deps_out, edges_out, count_out):
        capture_info(stream, status, id_out, graph_out, deps_out, edges_out, count_out)

    def node_dependencies(deps, count):
        if count and deps == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "dependencies is NULL")
        return [ptr(deps[i]) for i in range(count)]

    @entry
    def cuGraphCreate(out, flags):
        out[0] = handle(api.cuGraphCreate())

    @entry
    def cuGraphAddKernelNode_v2(out, graph, deps, count, p):
        f = p.func if p.func != ffi.NULL else p.kern
        grid, block = (p.gridDimX, p.gridDimY, p.gridDimZ), (p.blockDimX, p.blockDimY, p.blockDimZ)
        fn, args = api.graph_kernel_work(ptr(f), grid, block, p.sharedMemBytes,
                                         launch_params(f, p.kernelParams, p.extra))     # values copied now
        out[0] = handle(api.graph_add_node(ptr(graph), node_dependencies(deps, count), fn, *args))

    @entry
    def cuGraphAddMemsetNode(out, graph, deps, count, p, ctx):
        fill = api.memset_2d_work(p.dst, p.pitch, p.value, p.elementSize, p.width, p.height)
        out[0] = handle(api.graph_add_node(ptr(graph), node_dependencies(deps, count), fill))

    @entry
    def cuGraphAddMemcpyNode(out, graph, deps, count, p, ctx):
        copy = api.memcpy_3d_work(*copy_3d_args(p))
        out[0] = handle(api.graph_add_node(ptr(graph), node_dependencies(deps, count), copy))

    @entry
    def cuGraphAddHostNode(out, graph, deps, count, p):
        fn = ffi.cast("void (*)(void *)", p.fn)
        out[0] = handle(api.graph_add_node(ptr(graph), node_dependencies(deps, count), fn, p.userData))

    @entry
    def cuGraphAddEmptyNode(out, graph, deps, count):
        out[0] = handle(api.graph_add_node(ptr(graph), node_dependencies(deps, count)))

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
        api.cuMemsetAsync(dst, value, n, 2, 0)

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
        api.cuMemsetD2D(dst, pitch, value, 1, width, height, 0)

    @entry
    def cuMemsetD2D32_v2(dst, pitch, value, width, height):
        api.cuMemsetD2D(dst, pitch, value, 4, width, height, 0)

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
        if api.memory.lookup(ptr(p)) is None:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "not page-locked host memory")
        out[0] = ptr(p)                    # one address space: the same address

    @entry
    def cuMemHostGetFlags(out, p):
        if api.memory.lookup(ptr(p)) is None:
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
                found = api.memory.lookup(p)
                value = found.ptr if found else 0
            n = _ATTRIBUTE_SIZES[a]
            ffi.memmove(data[i], int(value).to_bytes(n, "little", signed=value < 0), n)

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
    def cuFuncSetCacheConfig(f, config):
        api.function_name(ptr(f))

    @entry
    def cuKernelSetCacheConfig(kernel, config, dev):
        api.function_name(ptr(kernel))

    @entry
    def cuCtxGetStreamPriorityRange(least, greatest):
        if least != ffi.NULL:
            least[0] = 0
        if greatest != ffi.NULL:
            greatest[0] = -5               # what current GPUs report; priorities are hints

    @entry
    def cuStreamCreateWithPriority(out, flags, priority):
        out[0] = handle(api.cuStreamCreateWithPriority(flags, priority))

    @entry
    def cuStreamGetPriority(stream, out):
        out[0] = api.stream_priority(ptr(stream))

    @entry
    def cuStreamGetFlags(stream, out):
        out[0] = api.stream_flags(ptr(stream))

    @entry
    def cuStreamAddCallback(stream, callback, user, flags):
        api.cuStreamAddCallback(ptr(stream), ptr(callback), ptr(user))

    @entry
    def cuEventRecordWithFlags(event, stream, flags):
        api.cuEventRecord(ptr(event), ptr(stream))

    @entry
    def cuMemAllocAsync(out, size, stream):
        out[0] = api.cuMemAllocAsync(size, ptr(stream))

    @entry
    def cuMemFreeAsync(dptr, stream):
        api.cuMemFreeAsync(dptr, ptr(stream))

    @entry
    def cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(out, f, block, shared, flags):
        out[0] = api.cuOccupancyMaxActiveBlocksPerMultiprocessor(ptr(f), block, shared, flags)

    def potential_block_size(min_grid, block, f, b2d, shared, limit, flags):
        to_dynamic = (lambda size: int(b2d(size))) if b2d != ffi.NULL else None
        grid, size = api.cuOccupancyMaxPotentialBlockSize(ptr(f), to_dynamic, shared, limit, flags)
        if min_grid == ffi.NULL or block == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "minGridSize or blockSize is NULL")
        min_grid[0], block[0] = grid, size

    @entry
    def cuOccupancyMaxPotentialBlockSize(min_grid, block, f, b2d, shared, limit):
        potential_block_size(min_grid, block, f, b2d, shared, limit, 0)

    @entry
    def cuOccupancyMaxPotentialBlockSizeWithFlags(min_grid, block, f, b2d, shared, limit, flags):
        potential_block_size(min_grid, block, f, b2d, shared, limit, flags)

    @entry
    def cuOccupancyAvailableDynamicSMemPerBlock(out, f, blocks, block):
        out[0] = api.cuOccupancyAvailableDynamicSMemPerBlock(ptr(f), blocks, block)

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
    def cuMemcpyPeer(dst, dst_ctx, src, src_ctx, n):
        api.cuMemcpyPeer(dst, ptr(dst_ctx), src, ptr(src_ctx), n)

    @entry
    def cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, n, stream):
        api.cuMemcpyPeerAsync(dst, ptr(dst_ctx), src, ptr(src_ctx), n, ptr(stream))

    @entry
    def cuMemcpy3DPeer(p):
        api.cuMemcpy3DPeer(*copy_3d_args(p), ptr(p.srcContext), ptr(p.dstContext))

    @entry
    def cuMemcpy3DPeerAsync(p, stream):
        api.cuMemcpy3DPeer(*copy_3d_args(p), ptr(p.srcContext), ptr(p.dstContext), ptr(stream))

    def param_info(f, index, offset, size):
        layout = api.kernel_param_layout(ptr(f))
        if index >= len(layout):
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"the kernel has {len(layout)} parameters")
        if offset != ffi.NULL:
            offset[0] = layout[index][0]
        if size != ffi.NULL:
            size[0] = layout[index][1]

    @entry
    def cuFuncGetParamInfo(f, index, offset, size):
        param_info(f, index, offset, size)

    @entry
    def cuKernelGetParamInfo(kernel, index, offset, size):
        param_info(kernel, index, offset, size)

    @entry
    def cuProfilerStart():
        pass

    @entry
    def cuProfilerStop():
        pass

    @entry
    def cuMemPrefetchAsync_v2(dptr, count, location, flags, stream):
        api.managed_range(dptr, count)

    @entry
    def cuMemPrefetchAsync(dptr, count, device, stream):
        api.managed_range(dptr, count)

    @entry
    def cuMemAdvise_v2(dptr, count, advice, location):
        api.managed_range(dptr, count)

    @entry
    def cuMemAdvise(dptr, count, advice, device):
        api.managed_range(dptr, count)

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

    @entry
    def cuStreamBeginCapture_v2(stream, mode):
        api.cuStreamBeginCapture(ptr(stream), mode)

    @entry
    def cuStreamEndCapture(stream, out):
        out[0] = handle(api.cuStreamEndCapture(ptr(stream)))

    @entry
    def cuStreamIsCapturing(stream, out):
        out[0] = api.cuStreamIsCapturing(ptr(stream))

    capture_mode = threading.local()

    @entry
    def cuThreadExchangeStreamCaptureMode(mode):
        old = getattr(capture_mode, "mode", 0)        # CU_STREAM_CAPTURE_MODE_GLOBAL
        capture_mode.mode = mode[0]
        mode[0] = old

    @entry
    def cuGraphInstantiateWithFlags(out, graph, flags):
        out[0] = handle(api.cuGraphInstantiate(ptr(graph)))

    @entry
    def cuGraphInstantiateWithParams(out, graph, params):
        out[0] = handle(api.cuGraphInstantiate(ptr(graph)))
        if params != ffi.NULL:
            params.result_out = 0                      # CUDA_GRAPH_INSTANTIATE_SUCCESS
            params.hErrNode_out = ffi.NULL

    @entry
    def cuGraphUpload(exec_, stream):
        api.cuGraphUpload(ptr(exec_), ptr(stream))

    @entry
    def cuGraphLaunch(exec_, stream):
        api.cuGraphLaunch(ptr(exec_), ptr(stream))

    @entry
    def cuGraphDestroy(graph):
        api.cuGraphDestroy(ptr(graph))

    @entry
    def cuGraphExecDestroy(exec_):
        api.cuGraphExecDestroy(ptr(exec_))

    # the driver's linker: JIT options (optimisation level, log buffers) do not apply
    @entry
    def cuLinkCreate_v2(n, options, values, out):
        out[0] = handle(api.cuLinkCreate())

    @entry
    def cuLinkAddData_v2(state, kind, data, size, name, n, options, values):
        if data == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "data is NULL")
        label = ffi.string(name).decode(errors="replace") if name != ffi.NULL else ""
        api.cuLinkAddData(ptr(state), kind, bytes(ffi.buffer(ffi.cast("char *", data), size)), label)

    @entry
    def cuLinkAddFile_v2(state, kind, path, n, options, values):
        api.cuLinkAddFile(ptr(state), kind, ffi.string(path).decode())

    @entry
    def cuLinkComplete(state, out, size):
        image = api.cuLinkComplete(ptr(state))
        keep = ffi.from_buffer(image)
        _strings[("link", ptr(state))] = keep          # lives until cuLinkDestroy
        out[0] = ffi.cast("void *", keep)
        if size != ffi.NULL:
            size[0] = len(image)

    @entry
    def cuLinkDestroy(state):
        api.cuLinkDestroy(ptr(state))
        _strings.pop(("link", ptr(state)), None)

    def resolve(symbol: bytes, version: int):
        """The address of our implementation of a driver function, by base name and the
        CUDA version the caller was built for: the newest `_vN` we export, else the plain name."""
        lib = _own_library()
        name = symbol.decode()
        for candidate in [f"{name}_v{n}" for n in range(4, 1, -1)] + [name]:
            if version < _INTRODUCED.get(candidate, 0):
                continue                  # a caller built for an older CUDA expects the older signature
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
