"""The C entry points of modules, libraries, kernels, launches,
occupancy and the linker: marshalling only (the semantics are in
anycuda.driver.api). Called from entry.define() with the marshalling they share
(shim/marshal.py). `define` is long because it is a list: one closure of a few lines per C
entry point."""
from __future__ import annotations

from ..driver import api
from ..runtime.errors import CudaError, CUresult
from .marshal import c_string, kept


def define(ffi, entry, ptr, handle, common):
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
        api.cuLaunchKernel(ptr(f), (gx, gy, gz), (bx, by, bz), shared, ptr(stream), common.launch_params(f, params, extra))

    @entry
    def cuModuleGetLoadingMode(out):
        out[0] = api.cuModuleGetLoadingMode()

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
    def cuFuncGetAttribute(out, attrib, f):
        out[0] = api.cuFuncGetAttribute(attrib, ptr(f))

    @entry
    def cuOccupancyMaxActiveBlocksPerMultiprocessor(out, f, block, shared):
        out[0] = api.cuOccupancyMaxActiveBlocksPerMultiprocessor(ptr(f), block, shared)

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
        out[0] = c_string(ffi, api.function_name(ptr(kernel)))

    @entry
    def cuFuncGetName(out, f):
        out[0] = c_string(ffi, api.function_name(ptr(f)))

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
                             c.sharedMemBytes, ptr(c.hStream), common.launch_params(f, params, extra),
                             launch_attributes(c.attrs, c.numAttrs))

    @entry
    def cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params):
        api.cuLaunchCooperativeKernel(ptr(f), (gx, gy, gz), (bx, by, bz), shared, ptr(stream),
                                      common.launch_params(f, params, ffi.NULL))

    @entry
    def cuFuncSetCacheConfig(f, config):
        api.function_name(ptr(f))

    @entry
    def cuKernelSetCacheConfig(kernel, config, dev):
        api.function_name(ptr(kernel))

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
        kept[("link", ptr(state))] = keep          # lives until cuLinkDestroy
        out[0] = ffi.cast("void *", keep)
        if size != ffi.NULL:
            size[0] = len(image)

    @entry
    def cuLinkDestroy(state):
        api.cuLinkDestroy(ptr(state))
        kept.pop(("link", ptr(state)), None)
