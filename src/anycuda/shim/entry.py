"""The C entry points of libcuda.so.1, defined with cffi's `def_extern`.

Nothing but marshalling: read C arguments, call anycuda.driver.api, write results through
the caller's pointers, and turn every exception into a CUresult (never let one escape
into C, where it would abort the caller). Here: the wrapper every entry point goes through,
and the lookups of driver functions and export tables; the entry points themselves are
defined by group (shim/entry_devices.py, entry_memory.py, entry_modules.py, entry_streams.py,
entry_textures.py), with the marshalling they share in shim/marshal.py.
"""
from __future__ import annotations

import functools
import sys

from . import entry_devices, entry_memory, entry_modules, entry_streams, entry_textures, export_tables, marshal
from .declarations import PER_THREAD_NAMES
from .settings import LIBRARY, STUBS, TRACE
from ..driver import api
from ..runtime.errors import CudaError, CUresult

_strings = {}

# Failures whose reason a program cannot learn from the code alone (no PTX in the binary, PTX
# anycuda cannot compile, a feature not supported yet, where a kernel faulted): named on
# stderr once, whatever the program does with the code.
_EXPLAINED = {CUresult.CUDA_ERROR_INVALID_IMAGE, CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU,
              CUresult.CUDA_ERROR_INVALID_PTX, CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
              CUresult.CUDA_ERROR_NOT_SUPPORTED,
              CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, CUresult.CUDA_ERROR_MISALIGNED_ADDRESS,
              CUresult.CUDA_ERROR_ILLEGAL_INSTRUCTION, CUresult.CUDA_ERROR_LAUNCH_FAILED}


_explained = []

# The CUDA version that introduced each versioned entry point anycuda exports whose signature
# differs from its predecessor's (as cudaTypedefs.h's PFN_<name>_v<version> records them).
_INTRODUCED = {"cuCtxCreate_v4": 12050, "cuCtxCreate_v3": 11040, "cuGetProcAddress_v2": 12000,
               "cuMemPrefetchAsync_v2": 12020, "cuMemAdvise_v2": 12020, "cuStreamBeginCapture_v2": 10010,
               "cuEventElapsedTime_v2": 12080, "cuStreamGetCaptureInfo_v2": 11030,
               "cuStreamGetCaptureInfo_v3": 12030, "cuCtxGetDevice_v2": 13000, "cuCtxSynchronize_v2": 13000}


# cuGetProcAddress's flag asking for the functions whose NULL stream is the per-thread default stream
_PER_THREAD_DEFAULT_STREAM = 2


def _per_thread_variant(fn, name: str):
    """The entry point `name` (cuLaunchKernel_ptsz...): `fn` with the NULL stream, and the
    blocking copies' and memsets' stream, meaning the calling thread's per-thread default stream."""
    def variant(*args):
        api.call_with_per_thread_default(fn, *args)
    variant.__name__ = variant.__qualname__ = name
    return variant


def _explain(name: str, e: CudaError) -> None:
    """The CUDA runtime keeps only the code: say once what went wrong (a sticky fault that
    later calls repeat is said once, by the call that met it)."""
    if any(e.message == m or e.message.endswith(": " + m) for m in _explained):
        return
    _explained.append(e.message)
    sys.stderr.write(f"anycuda: {name}: {e}\n")


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


def _build_record(filename: str):
    """The words of a file the build left beside this library (build.py), or None."""
    key = "record " + filename
    if key not in _strings:
        import pathlib
        path = None
        for line in open("/proc/self/maps"):
            if line.rstrip().endswith("/" + LIBRARY):
                path = pathlib.Path(line.split()[-1]).parent / filename
                break
        try:
            _strings[key] = path.read_text().split() if path else None
        except OSError:
            _strings[key] = None
    return _strings[key]


def _named_stubs() -> frozenset:
    """The driver functions libcuda.so.1 exports as stubs (build.named_stubs): not ours to resolve."""
    if "named stubs" not in _strings:
        _strings["named stubs"] = frozenset(_build_record("driver-stubs.txt") or ())
    return _strings["named stubs"]


def _known_driver_functions():
    """The driver function names recorded when this library was built (None if unknown)."""
    if "known" not in _strings:
        names = _build_record("driver-functions.txt")
        _strings["known"] = set(names) if names is not None else None
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

    defined = {}

    def entry(fn):
        """Export `fn` under its name."""
        name = fn.__name__
        defined[name] = fn

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
    common = marshal.helpers(ffi, ptr)
    for group in (entry_devices, entry_memory, entry_modules, entry_streams):
        group.define(ffi, entry, ptr, handle, common)
    entry_textures.define(ffi, entry, ptr, handle)     # CUDA arrays, texture and surface objects
    for name, variant in PER_THREAD_NAMES.items():
        if name in defined:
            entry(_per_thread_variant(defined[name], variant))

    def resolve(symbol: bytes, version: int, flags: int = 0):
        """The address of our implementation of a driver function, by base name and the
        CUDA version the caller was built for: the newest `_vN` we export, else the plain name;
        its per-thread variant (`_ptsz`/`_ptds`) when the flags ask for the per-thread
        default stream."""
        lib = _own_library()
        name = symbol.decode()
        stubs = _named_stubs()
        for candidate in [f"{name}_v{n}" for n in range(4, 1, -1)] + [name]:
            if version < _INTRODUCED.get(candidate, 0) or candidate in stubs:
                continue                  # a caller built for an older CUDA expects the older signature
            if candidate.split("_v")[0] != name:
                continue
            if flags & _PER_THREAD_DEFAULT_STREAM and PER_THREAD_NAMES.get(candidate) in defined:
                candidate = PER_THREAD_NAMES[candidate]
            fn = getattr(lib, candidate, None)
            if fn is not None:
                return ffi.cast("void *", ffi.cast("uintptr_t", _address(fn)))
        return None

    stub_names = []

    def unsupported(index):
        if index >= STUBS:                # one of the stubs exported by name (build.named_stubs)
            named = _build_record("driver-stubs.txt") or []
            name = named[index - STUBS] if index - STUBS < len(named) else f"#{index}"
        else:
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

    def resolve_or_stub(name: bytes, version: int, flags: int = 0):
        found = resolve(name, version, flags)
        if found is None:
            stub = stub_for(name.decode())
            if stub is not None and stub != ffi.NULL:
                return stub
        return found

    @entry
    def cuGetProcAddress_v2(symbol, pfn, version, flags, status):
        name = ffi.string(symbol)
        found = resolve_or_stub(name, version, flags)
        if status != ffi.NULL:
            status[0] = 0 if found is not None else 1        # CU_GET_PROC_ADDRESS_SUCCESS / SYMBOL_NOT_FOUND
        pfn[0] = found if found is not None else ffi.NULL
        _log(f"cuGetProcAddress {name.decode()} (CUDA {version}, flags {flags}) -> "
             f"{'found' if found is not None else 'missing'}")
        if found is None:
            raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"{name.decode()} is not provided by anycuda yet")

    @entry
    def cuGetProcAddress(symbol, pfn, version, flags):
        found = resolve_or_stub(ffi.string(symbol), version, flags)
        pfn[0] = found if found is not None else ffi.NULL
        if found is None:
            raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"{ffi.string(symbol).decode()} is not provided")

    @entry
    def cuGetExportTable(table, table_id):
        if table == ffi.NULL or table_id == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "NULL table or table id")
        uuid = bytes(ffi.buffer(ffi.cast("char *", table_id), 16)).hex()
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
