"""The CUDA runtime's private driver interface ("export tables", reached through
cuGetExportTable): tables of C function pointers identified by UUID, slot 0 usually holding
the table's size in bytes. Their layout is undocumented by NVIDIA; what is known comes from
other projects' public notes (read for facts, implemented here from scratch).

Every table is described once in TABLES (name, UUID, number of slots, the slots anycuda
fills). A slot anycuda does not fill points to a stub that names table and slot on stderr
(once) and answers CUDA_ERROR_NOT_SUPPORTED, so a runtime that reaches one stops with a
message instead of jumping to NULL.
"""
from __future__ import annotations

import os
import sys
import threading

from ..driver import api, integrity
from ..runtime.errors import CudaError, CUresult
from .settings import TRACE

# The tables and the buffers handed to the runtime live in the library's static storage, not in
# Python objects: the runtime reads them until the process ends (its exit handlers call through
# the tables after Python has finalised and freed its objects).
TABLE_SLOTS = 128
TOOLS_BUFFER_WORDS = (1024, 14)            # the two buffers the tools interface hands out
_STATIC_STORAGE = (f"void *anycuda_table_slots[{TABLE_SLOTS}];\n"
                   f"uint32_t anycuda_tools_buffer1[{TOOLS_BUFFER_WORDS[0]}];\n"
                   f"uint32_t anycuda_tools_buffer2[{TOOLS_BUFFER_WORDS[1]}];\n")

# C signatures of the functions anycuda puts in the tables (cffi `extern "Python"`)
DECLARATIONS = """
extern "Python" int anycuda_rt_module_from_wrapper(void **module, const void *wrapper);
extern "Python" int anycuda_rt_primary_context(void **pctx, int dev);
extern "Python" int anycuda_rt_module_from_wrapper_ext(void **module, const void *wrapper, void *a3, void *a4, unsigned int a5);
extern "Python" void anycuda_rt_fn7(size_t arg);
extern "Python" int anycuda_rt_module_from_header_ext(const void *header, void **module, void *a3, void *a4, unsigned int a5);
extern "Python" int anycuda_rt_load_compilers(void);
extern "Python" void anycuda_hooks_buffer1(void **ptr, size_t *size);
extern "Python" void anycuda_hooks_buffer2(void **ptr, size_t *size);
extern "Python" int anycuda_cls_put(void *ctx, void *key, void *value, void *dtor);
extern "Python" int anycuda_cls_delete(void *ctx, void *key);
extern "Python" int anycuda_cls_get(void **value, void *ctx, void *key);
extern "Python" int anycuda_integrity_check(unsigned int version, unsigned long long unix_seconds, unsigned long long *result);
extern "Python" int anycuda_context_check(void *ctx, unsigned int *result1, const void **result2);
extern "Python" unsigned int anycuda_context_check3(void);
extern "Python" int anycuda_context_id(void *ctx, unsigned long long *id);
extern "Python" int anycuda_slot_unsupported(int index);
static void *anycuda_slot_stub_address(int i);
""" + "".join("extern " + line + "\n" for line in _STATIC_STORAGE.splitlines())

SLOT_STUBS = 256

# Stubs for the slots anycuda leaves empty: each calls anycuda_slot_unsupported(i).
STUB_SOURCE = "\n".join(
    ["static int anycuda_slot_unsupported(int index);"]
    + ["static " + line for line in _STATIC_STORAGE.splitlines()]
    + [f"static int anycuda_slot_stub_{i}(void) {{ return anycuda_slot_unsupported({i}); }}" for i in range(SLOT_STUBS)]
    + ["static void *anycuda_slot_stubs[] = {" + ", ".join(f"(void *)anycuda_slot_stub_{i}" for i in range(SLOT_STUBS)) + "};",
       "static void *anycuda_slot_stub_address(int i) { return (i >= 0 && i < %d) ? anycuda_slot_stubs[i] : 0; }" % SLOT_STUBS])


SIZE = "size"           # slot 0 holds the table's size in bytes

# name: (UUID as the runtime passes its 16 bytes, slots, {slot: C function or SIZE})
TABLES = {
    "CUDART_INTERFACE": ("6bd5fb6c5bf4e74a8987d93912fd9df9", 13, {
        0: SIZE, 1: "anycuda_rt_module_from_wrapper", 2: "anycuda_rt_primary_context",
        6: "anycuda_rt_module_from_wrapper_ext", 7: "anycuda_rt_fn7",
        8: "anycuda_rt_module_from_header_ext", 12: "anycuda_rt_load_compilers"}),
    "TOOLS_RUNTIME_CALLBACK_HOOKS": ("a094798c2e742e7493f20800200c0a66", 7, {
        0: SIZE, 2: "anycuda_hooks_buffer1", 6: "anycuda_hooks_buffer2"}),
    "TOOLS_TLS": ("42d85a8123f6cb478298f6e78a3aecdc", 4, {0: SIZE}),
    "CONTEXT_LOCAL_STORAGE": ("c693336e1121df11a8c368f355d89593", 4, {
        0: "anycuda_cls_put", 1: "anycuda_cls_delete", 2: "anycuda_cls_get"}),
    "INTEGRITY_CHECK": ("d4082055bde6704b8d34ba123c66e1f2", 3, {0: SIZE, 1: "anycuda_integrity_check"}),
    "CONTEXT_CHECKS": ("263e88607cd2614392f6bbd5006dfa7e", 4, {
        0: SIZE, 2: "anycuda_context_check", 3: "anycuda_context_check3"}),
    # asked for by the CUDA runtime that NVIDIA's later CUDA 13 libraries link statically
    # (cuSPARSE 12.9, NPP 13.2): without it their first call fails (cusparseCreate: "CUDA context
    # cannot be initialized"). Slot 4 answers a context's unique id, as cuCtxGetId does (as
    # other projects' notes describe it); no slot was called in those libraries' runs
    "CONTEXT_IDENTITY": ("21318c60971432488ca641ff7324c8f2", 5, {0: SIZE, 4: "anycuda_context_id"}),
}

# Tables the runtime asks for and copes without: "not found" sends it down its ordinary path.
OPTIONAL = {
    "f8cff95121468b4eb9e2fb469e7c0dd9": "BOOTSTRAP_BYPASS",
    "0ca50b8c1004929a89a7d0df10e77286": "CTX_CREATE_BYPASS",
    "195bcbf4d67d024aacc51d29cea631ae": "HEAP_ACCESS",
    "b10541e1f7c7c74a9f64f223be99f1e2": "DEVICE_EXTENDED_RT",
    "dd9e98a4f410484499b0e2aeb7b432b5": "HYBRID_CUDART",
    # asked by NVRTC 13 inside nvrtcCompileProgram (cuda.core's Program, numba-cuda); it compiles on without it
    "da9151d33ae6cc41a5c04f26d533e328": "NVRTC_DRIVER_QUERY",
}

_tables = {}            # UUID -> its first slot in anycuda_table_slots
_addresses = {}         # table name -> address of its first slot
_context_storage = {}   # (context, key) -> (value, destructor)
_stub_names = []        # stub index -> "TABLE slot N"
_reported = set()


def _log(msg):
    if TRACE:
        sys.stderr.write(f"anycuda: {msg}\n")


def report_once(message: str) -> None:
    if message not in _reported:
        _reported.add(message)
        sys.stderr.write(f"anycuda: {message}\n")


def _guarded(name, result=lambda code: int(code)):
    """Turn exceptions into a CUresult (or what `result` makes of it for functions that do
    not return one): nothing may escape into the runtime."""
    def wrap(fn):
        def call(*args):
            try:
                value = fn(*args)
                if TRACE:             # (cls_get comes with every launch: no formatting for nothing)
                    _log(f"{name} -> {value}")
                return value
            except CudaError as e:
                _log(f"{name}: {e}")
                return result(e.code)
            except Exception as e:
                sys.stderr.write(f"anycuda: internal error in export table function {name}: "
                                 f"{type(e).__name__}: {e}\n")
                return result(CUresult.CUDA_ERROR_UNKNOWN)
        return call
    return wrap


def _current_context() -> int:
    ctx = api.cuCtxGetCurrent()
    if not ctx:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_CONTEXT, "no current context")
    return ctx


def install(ffi, lib):
    """Define the callbacks and build the tables (called once by the embedding's init)."""
    ptr = lambda p: int(ffi.cast("uintptr_t", p))

    def define(name, fn, result=lambda code: int(code)):
        ffi.def_extern(name=name)(_guarded(name.replace("anycuda_", ""), result)(fn))

    def load_module(out, image):
        if out == ffi.NULL or image == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "NULL module or image")
        module = api.cuModuleLoadData(api.image_at(ptr(image)))
        out[0] = ffi.cast("void *", module)
        return 0

    define("anycuda_rt_module_from_wrapper", load_module)
    define("anycuda_rt_module_from_wrapper_ext", lambda out, wrapper, a3, a4, a5: load_module(out, wrapper))
    define("anycuda_rt_module_from_header_ext", lambda header, out, a3, a4, a5: load_module(out, header))

    def primary_context(pctx, dev):
        ctx = api.cuDevicePrimaryCtxRetain(dev)
        pctx[0] = ffi.cast("void *", ctx)
        return 0
    define("anycuda_rt_primary_context", primary_context)
    define("anycuda_rt_fn7", lambda arg: None, result=lambda code: None)
    define("anycuda_rt_load_compilers", lambda: 0)

    # buffers the tools interface hands out (callback tables the runtime fills in)
    buffers = [lib.anycuda_tools_buffer1, lib.anycuda_tools_buffer2]

    def hooks(buffer):
        def give(p, size):
            p[0] = buffer
            size[0] = len(buffer)
        return give
    define("anycuda_hooks_buffer1", hooks(buffers[0]), result=lambda code: None)
    define("anycuda_hooks_buffer2", hooks(buffers[1]), result=lambda code: None)

    def cls_put(ctx, key, value, dtor):
        c = ptr(ctx) or _current_context()
        _context_storage[(c, ptr(key))] = (ptr(value), ptr(dtor))
        return 0

    def cls_delete(ctx, key):
        c = ptr(ctx) or _current_context()
        _context_storage.pop((c, ptr(key)), None)
        return 0

    def cls_get(out, ctx, key):
        c = ptr(ctx) or _current_context()
        entry = _context_storage.get((c, ptr(key)))
        if entry is None:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE, "no context-local value for this key")
        out[0] = ffi.cast("void *", entry[0])
        return 0
    def tear_down(ctx):
        """Run the destructors stored with a context's values (on reset or destroy)."""
        for (c, key), (value, dtor) in list(_context_storage.items()):
            if c != ctx:
                continue
            del _context_storage[(c, key)]
            if dtor:
                _log(f"context-local storage destructor for key 0x{key:x}")
                ffi.cast("void (*)(void *, void *, void *)", dtor)(
                    ffi.cast("void *", c), ffi.cast("void *", key), ffi.cast("void *", value))
    api.context_teardown_hooks.append(tear_down)

    define("anycuda_cls_put", cls_put)
    define("anycuda_cls_delete", cls_delete)
    define("anycuda_cls_get", cls_get)

    def integrity_check(version, unix_seconds, result):
        devices = []
        for dev in range(api.cuDeviceGetCount()):
            devices.append((api.cuDeviceGetUuid(dev), api.cuDeviceGetAttribute(50, dev),
                            api.cuDeviceGetAttribute(33, dev), api.cuDeviceGetAttribute(34, dev)))
        words = integrity.answer(
            version, unix_seconds, driver_version=api.cuDriverGetVersion(), process=os.getpid(),
            thread=threading.get_ident(), cudart_table=_addresses["CUDART_INTERFACE"],
            integrity_table=_addresses["INTEGRITY_CHECK"],
            function=ptr(ffi.cast("void *", ffi.addressof(lib, "anycuda_integrity_check"))),
            devices=devices)
        result[0], result[1] = words
        return 0
    define("anycuda_integrity_check", integrity_check)

    def context_check(ctx, result1, result2):
        if result1 != ffi.NULL:
            result1[0] = 0
        return 0
    define("anycuda_context_check", context_check)
    define("anycuda_context_check3", lambda: 0, result=lambda code: 0)

    def context_id(ctx, out):
        if out == ffi.NULL:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "NULL id")
        out[0] = api.context_id(ptr(ctx) or _current_context())
        return 0
    define("anycuda_context_id", context_id)

    def slot_unsupported(index):
        name = _stub_names[index] if 0 <= index < len(_stub_names) else f"#{index}"
        report_once(f"export table {name} is not implemented (the CUDA runtime called it)")
        return int(CUresult.CUDA_ERROR_NOT_SUPPORTED)
    ffi.def_extern(name="anycuda_slot_unsupported")(slot_unsupported)

    used = 0
    for name, (uuid, slots, filled) in TABLES.items():
        assert used + slots <= TABLE_SLOTS, "anycuda_table_slots is too small for the export tables"
        t = lib.anycuda_table_slots + used
        used += slots
        for i in range(slots):
            what = filled.get(i)
            if what == SIZE:
                t[i] = ffi.cast("void *", slots * ffi.sizeof("void *"))
            elif what is not None:
                t[i] = ffi.cast("void *", ffi.addressof(lib, what))
            else:
                _stub_names.append(f"{name} slot {i}")
                t[i] = lib.anycuda_slot_stub_address(len(_stub_names) - 1)
        _tables[uuid] = t
        _addresses[name] = ptr(t)


def lookup(uuid_hex: str):
    """The table for a UUID, or None; an unknown UUID is named on stderr once."""
    found = _tables.get(uuid_hex)
    if found is None and uuid_hex not in OPTIONAL:
        report_once(f"export table {uuid_hex} (private to the CUDA runtime) is unknown to anycuda")
    return found


def optional_name(uuid_hex: str):
    return OPTIONAL.get(uuid_hex)

