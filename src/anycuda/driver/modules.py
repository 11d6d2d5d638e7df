"""Modules, libraries and kernels: module images (PTX, fatbinaries, ELF), loading and unloading,
kernels and globals by name, function attributes, and the driver's linker (cuLink*).

A library is a context-independent module; with one device and one address space it is a
module loaded once, and a kernel is that module's function. The linker's image is PTX text
(all inputs' PTX linked into one module), which cuModuleLoadData and cuLibraryLoadData take
like any other image.
"""
from __future__ import annotations

import ctypes
import re
import struct
import threading
from dataclasses import dataclass, field

from .. import fatbin
from ..ptx.errors import UnsupportedVersion
from ..runtime.errors import CudaError, CUresult
from ..runtime.program import load_program, loading_mode
from ..runtime.stream import wait_idle
from .handles import (_current_device, _current_handle, _drop_module, Function, _get, _handles, _lock,
                      _MANAGED_VARIABLE, Module, _new_handle, _require_context, _require_init)


def ptx_from_image(address: int) -> bytes:
    """The PTX in a module image at `address`: PTX text itself, a fatbinary container, or a
    fatbinary wrapper (what the CUDA runtime registers)."""
    magic = struct.unpack("<I", ctypes.string_at(address, 4))[0]
    if magic == 0x464C457F:                # an ELF image: a cubin, or an object carrying fatbinaries
        return _ptx_from_elf_image(address)
    if magic not in (fatbin.CONTAINER_MAGIC, fatbin.WRAPPER_MAGIC):
        return ctypes.string_at(address)
    try:
        if magic == fatbin.WRAPPER_MAGIC:
            modules = fatbin.ptx_modules(fatbin.read_wrapper_containers(ctypes.string_at, address))
            from .linker import link
            return link([m.ptx_text() for m in modules]).encode()
        entries = fatbin.read_container_at(ctypes.string_at, address)
        return fatbin.require_ptx(entries).ptx_text().encode()
    except fatbin.FatbinError as e:
        raise CudaError(CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU if "no PTX" in str(e)
                        else CUresult.CUDA_ERROR_INVALID_IMAGE, str(e)) from None


@dataclass
class ModuleImage:
    """What a module image holds for anycuda: its PTX, and the kernels it holds as machine code
    only (name -> why it cannot run), which a load under CUDA_MODULE_LOADING=LAZY accepts as
    CUDA's lazy loading does: such a kernel fails when it is launched, not its module when
    loaded (cuBLAS registers a few SASS-only containers beside 189 with PTX)."""
    ptx: bytes
    machine_code_only: dict = field(default_factory=dict)


def image_at(address: int) -> ModuleImage:
    """The module image at `address` (ptx_from_image). Under lazy loading, a container with
    SASS alone gives its variables (as PTX) and its kernels' names."""
    try:
        return ModuleImage(ptx_from_image(address) + b"\0")
    except CudaError as e:
        if e.code != CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU or loading_mode() == "EAGER":
            raise
        try:
            ptx, names = fatbin.machine_code_module(_main_container(address))
        except fatbin.FatbinError:
            raise e from None
        return ModuleImage(ptx.encode() + b"\0", dict.fromkeys(names, e.message))


def _main_container(address: int) -> list:
    """The entries of the container at `address`, or of a wrapper's main container (one with
    relocatable PTX would have given its PTX)."""
    magic = struct.unpack("<I", ctypes.string_at(address, 4))[0]
    if magic == fatbin.CONTAINER_MAGIC:
        return fatbin.read_container_at(ctypes.string_at, address)
    if magic == fatbin.WRAPPER_MAGIC:
        containers = fatbin.read_wrapper_containers(ctypes.string_at, address)
        if containers:
            return containers[0]
    raise fatbin.FatbinError("no fatbinary container at the image")


def cuModuleGetLoadingMode() -> int:
    """CU_MODULE_LAZY_LOADING (2), or CU_MODULE_EAGER_LOADING (1) under CUDA_MODULE_LOADING=EAGER."""
    return 1 if loading_mode() == "EAGER" else 2


def cuModuleLoadData(image: bytes) -> int:
    _require_context()
    h = _load_module(image)
    _handles[h].context = _current_handle()      # unloaded with its context (contexts._release_objects)
    return h


def _load_module(image) -> int:
    """A module from PTX bytes or a ModuleImage."""
    if not isinstance(image, ModuleImage):
        image = ModuleImage(image)
    text = image.ptx.split(b"\0", 1)[0]
    try:
        program = load_program(text.decode("utf-8"), "module.ptx", unavailable=image.machine_code_only)
    except UnicodeDecodeError:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_IMAGE, "the image is neither PTX text nor a fatbinary") from None
    except CudaError:
        raise
    except UnsupportedVersion as e:
        raise CudaError(CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION, str(e)) from None
    except Exception as e:       # PtxError and friends
        raise CudaError(CUresult.CUDA_ERROR_INVALID_PTX, str(e)) from None
    m = re.search(rb"^\s*\.target\s+sm_(\d+)", text, re.M)
    module = Module(program, int(m.group(1)) if m else 0)
    module.has_managed_variables = bool(_MANAGED_VARIABLE.search(text))
    return _new_handle(module)


def cuModuleUnload(mod: int) -> None:
    """Waits for the device's work (its kernels may be queued), then lets the module's code
    go: its handle and its functions' handles are dropped, and with the last reference the
    compiled code is freed."""
    _get(mod, Module)                   # a live module, else CUDA_ERROR_INVALID_HANDLE
    wait_idle(_current_device())
    with _lock:
        _drop_module(mod)


def cuModuleGetFunction(mod: int, name: str) -> int:
    m = _get(mod, Module)
    h = m.functions.get(name)
    if h is None:
        try:
            image = m.program.kernel(name)
        except KeyError:
            raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"no kernel named {name}") from None
        new = _new_handle(Function(m, image))
        h = m.functions.setdefault(name, new)      # another thread may have made it meanwhile
        if h != new:
            _handles.pop(new, None)
    return h


def cuModuleGetGlobal(mod: int, name: str) -> tuple:
    m = _get(mod, Module)
    try:
        return m.program.global_address(name)
    except KeyError:
        raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"no global variable named {name}") from None


class Library:
    """Compiled once; each device that uses it gets the module linked once more, so that
    `__device__` and `__constant__` variables are per device as on several GPUs."""

    def __init__(self, module: int):
        self.first = module          # the module as loaded, given to the first device that asks
        self.modules = {}            # device -> Module handle
        self.kernels = {}            # name -> Kernel handle, so a kernel has one handle
        self.lock = threading.RLock()
        self.one_copy = False        # every device uses the first module (see _MANAGED_VARIABLE)

    def module_for(self, device: int) -> int:
        with self.lock:
            if device not in self.modules:
                if self.modules and not self.one_copy:
                    m = _get(self.first, Module)
                    self.modules[device] = _new_handle(Module(m.program.instance(), m.ptx_arch))
                else:
                    self.modules[device] = self.first
            return self.modules[device]


class Kernel:
    """A library's kernel (CUkernel): launched or queried in a context, it is the function of
    the library's module on that context's device."""

    def __init__(self, library: Library, name: str):
        self.library = library
        self.name = name
        self.functions = {}          # device -> Function handle
        self.settings = {}           # attribute -> value set through the kernel, for every device

    def function_for(self, device: int) -> int:
        with self.library.lock:
            if device not in self.functions:
                h = cuModuleGetFunction(self.library.module_for(device), self.name)
                for attrib, value in self.settings.items():
                    _set_function_attribute(_handles[h].image, attrib, value)
                self.functions[device] = h
            return self.functions[device]


def _function(func: int) -> Function:
    """The Function a CUfunction or CUkernel handle stands for in the current context."""
    obj = _handles.get(func)
    if isinstance(obj, Kernel):
        return _get(obj.function_for(_current_device()), Function)
    return _get(func, Function)


def cuLibraryLoadData(image: bytes) -> int:
    _require_init()                    # a library belongs to no context
    library = Library(_load_module(image))
    library.one_copy = _get(library.first, Module).has_managed_variables
    return _new_handle(library)


def cuLibraryUnload(lib: int) -> None:
    library = _get(lib, Library)
    modules = set(library.modules.values()) | {library.first}
    for m in modules:
        cuModuleUnload(m)
    with _lock:
        for h in library.kernels.values():
            for f in _handles[h].functions.values():
                _handles.pop(f, None)
            _handles.pop(h, None)
        del _handles[lib]


def cuLibraryGetModule(lib: int) -> int:
    return _get(lib, Library).module_for(_current_device())


def cuLibraryGetKernel(lib: int, name: str) -> int:
    library = _get(lib, Library)
    if name not in library.kernels:
        first = _get(library.first, Module)
        if not first.program.has_kernel(name):
            raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"no kernel named {name}")
        library.kernels[name] = _new_handle(Kernel(library, name))
    return library.kernels[name]


def cuLibraryGetGlobal(lib: int, name: str) -> tuple:
    return cuModuleGetGlobal(cuLibraryGetModule(lib), name)


def cuLibraryGetManaged(lib: int, name: str) -> tuple:
    """A __managed__ variable: with one address space, its storage is the module's global."""
    return cuLibraryGetGlobal(lib, name)


def cuKernelGetFunction(kernel: int) -> int:
    return _get(kernel, Kernel).function_for(_current_device())


def cuKernelGetLibrary(kernel: int) -> int:
    library = _get(kernel, Kernel).library
    for h, obj in list(_handles.items()):
        if obj is library:
            return h
    raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE, f"the library of kernel 0x{kernel:x} is unloaded")


class LinkState:
    def __init__(self):
        self.modules = []
        self.image = None            # the linked image, kept alive until cuLinkDestroy


def cuLinkCreate() -> int:
    _require_init()
    return _new_handle(LinkState())


def cuLinkAddData(state: int, kind: int, data: bytes, name: str = "") -> None:
    from .linker import ptx_of_input
    _get(state, LinkState).modules += ptx_of_input(kind, data, name)


def cuLinkAddFile(state: int, kind: int, path: str) -> None:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise CudaError(CUresult.CUDA_ERROR_FILE_NOT_FOUND, f"{path}: {e.strerror}") from None
    cuLinkAddData(state, kind, data, path)


def cuLinkComplete(state: int) -> bytes:
    from .linker import link
    s = _get(state, LinkState)
    if not s.modules:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "nothing was added to link")
    s.image = link(s.modules).encode() + b"\0"
    return s.image


def cuLinkDestroy(state: int) -> None:
    _get(state, LinkState)
    with _lock:
        del _handles[state]


def _ptx_from_elf_image(address: int) -> bytes:
    """The PTX of an ELF module image (its size read from the ELF header: the section headers
    come last). A cubin, such as nvJitLink makes, holds machine code only."""
    header = ctypes.string_at(address, 64)
    if header[4] != 2:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_IMAGE, "the image is a 32-bit ELF file")
    shoff, = struct.unpack_from("<Q", header, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", header, 0x3A)
    from .linker import _ptx_of_elf, link
    try:
        found = _ptx_of_elf(ctypes.string_at(address, shoff + shentsize * shnum))
    except (fatbin.FatbinError, ValueError, struct.error) as e:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_IMAGE, f"ELF image: {e}") from None
    if not found:
        raise CudaError(CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU,
                        "the image is a cubin holding machine code only (anycuda runs PTX); "
                        "load the PTX instead (a cubin made by nvJitLink: run the program "
                        "through `anycuda run`, which makes numba-cuda and cuda.core link PTX)")
    return link(found).encode()


def function_name(func: int) -> str:
    return _function(func).image.name


def cuFuncSetAttribute(func: int, attrib: int, value: int) -> None:
    """Accepts what a CPU block can honour: the dynamic shared memory limit (8) and the
    preferred shared-memory carveout (9); other attributes are read-only or not supported.
    Set through a kernel (CUkernel), it holds for that kernel on every device."""
    kernel = _handles.get(func)
    if isinstance(kernel, Kernel):
        _set_function_attribute(_function(func).image, attrib, value)      # rejects what cannot be set
        for h in kernel.functions.values():
            _set_function_attribute(_handles[h].image, attrib, value)
        kernel.settings[attrib] = value
        return
    _set_function_attribute(_get(func, Function).image, attrib, value)


def _set_function_attribute(image, attrib: int, value: int) -> None:
    if attrib == 8:
        if value < 0:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "negative shared memory size")
        image.max_dynamic_shared_size = value
    elif attrib in (9, 10, 11, 12, 13, 14, 15):
        pass                          # carveout / cluster hints: nothing to do on the CPU
    else:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"function attribute {attrib} cannot be set")
