"""The CUDA runtime's private driver interface ("export tables", reached through
cuGetExportTable): tables of C function pointers identified by UUID, slot 0 usually holding
the table's size in bytes. Their layout is undocumented by NVIDIA; what is known comes from
other projects' public notes (read for facts, implemented here from scratch).
"""
from __future__ import annotations

import sys

from ..driver import api
from ..runtime.errors import CudaError, CUresult

# C signatures of the functions anycuda puts in the tables (cffi `extern "Python"`)
DECLARATIONS = """
extern "Python" int anycuda_rt_module_from_wrapper(void **module, const void *wrapper);
extern "Python" int anycuda_rt_primary_context(void **pctx, int dev);
extern "Python" int anycuda_rt_module_from_wrapper_ext(void **module, const void *wrapper, void *a3, void *a4, unsigned int a5);
extern "Python" int anycuda_rt_ok(size_t arg);
extern "Python" int anycuda_rt_module_from_header_ext(const void *header, void **module, void *a3, void *a4, unsigned int a5);
extern "Python" void anycuda_hooks_buffer(void **ptr, size_t *size);
extern "Python" int anycuda_cls_ctor(void *ctx, void *manager, void *state, void *dtor);
extern "Python" int anycuda_cls_dtor(void *a1, void *a2);
extern "Python" int anycuda_cls_get(void **state, void *ctx, void *manager);
extern "Python" int anycuda_context_check(void *ctx, unsigned int *result1, const void **result2, size_t a4, size_t a5, size_t a6);
extern "Python" unsigned int anycuda_context_check3(size_t a1, size_t a2, size_t a3, size_t a4, size_t a5, size_t a6);
extern "Python" int anycuda_not_supported(void);
"""

CUDART_INTERFACE = "6bd5fb6c5bf4e74a8987d93912fd9df9"
RUNTIME_CALLBACK_HOOKS = "a094798c2e742e7493f20800200c0a66"
TOOLS_TLS = "42d85a8123f6cb478298f6e78a3aecdc"
CONTEXT_LOCAL_STORAGE = "c693336e1121df11a8c368f355d89593"
CONTEXT_CHECKS = "263e88607cd2614392f6bbd5006dfa7e"

_tables = {}
_keep = []
_context_state = {}


def _log(msg):
    import os
    if "api" in os.environ.get("ANYCUDA_LOG", ""):
        sys.stderr.write(f"anycuda: {msg}\n")


def _guarded(name, default_code=CUresult.CUDA_ERROR_UNKNOWN):
    def wrap(fn):
        def call(*args):
            try:
                result = fn(*args)
                _log(f"{name} -> {result}")
                return result
            except CudaError as e:
                _log(f"{name}: {e}")
                return int(e.code)
            except Exception as e:
                sys.stderr.write(f"anycuda: internal error in {name}: {type(e).__name__}: {e}\n")
                return int(default_code)
        return call
    return wrap


def install(ffi, lib):
    """Define the callbacks and build the tables (called once by the embedding's init)."""
    addr = lambda n: ffi.cast("void *", ffi.addressof(lib, n))
    ptr = lambda p: int(ffi.cast("uintptr_t", p))

    def load_module(out, wrapper):
        module = api.cuModuleLoadData(api.ptx_from_image(ptr(wrapper)) + b"\0")
        out[0] = ffi.cast("void *", module)
        return 0

    ffi.def_extern(name="anycuda_rt_module_from_wrapper")(
        _guarded("cudart.module_from_wrapper")(lambda out, wrapper: load_module(out, wrapper)))
    ffi.def_extern(name="anycuda_rt_primary_context")(
        _guarded("cudart.primary_context")(lambda pctx, dev: _primary(ffi, pctx, dev)))
    ffi.def_extern(name="anycuda_rt_module_from_wrapper_ext")(
        _guarded("cudart.module_from_wrapper_ext")(lambda out, wrapper, a3, a4, a5: load_module(out, wrapper)))
    ffi.def_extern(name="anycuda_rt_ok")(_guarded("cudart.fn7")(lambda arg: 0))
    ffi.def_extern(name="anycuda_rt_module_from_header_ext")(
        _guarded("cudart.module_from_header_ext")(lambda header, out, a3, a4, a5: load_module(out, header)))

    hooks_buffer = ffi.new("char[]", 4096)
    _keep.append(hooks_buffer)

    def hooks(p, size):
        p[0] = hooks_buffer
        size[0] = 4096
    ffi.def_extern(name="anycuda_hooks_buffer")(hooks)

    def cls_ctor(ctx, manager, state, dtor):
        _context_state[(ptr(ctx), ptr(manager))] = ptr(state)
        return 0

    def cls_get(out, ctx, manager):
        state = _context_state.get((ptr(ctx), ptr(manager)))
        if state is None:
            return int(CUresult.CUDA_ERROR_INVALID_HANDLE)
        out[0] = ffi.cast("void *", state)
        return 0
    ffi.def_extern(name="anycuda_cls_ctor")(_guarded("cls.ctor")(cls_ctor))
    ffi.def_extern(name="anycuda_cls_dtor")(_guarded("cls.dtor")(lambda a1, a2: 0))
    ffi.def_extern(name="anycuda_cls_get")(_guarded("cls.get")(cls_get))

    def context_check(ctx, result1, result2, a4, a5, a6):
        if result1 != ffi.NULL:
            result1[0] = 0
        return 0
    ffi.def_extern(name="anycuda_context_check")(_guarded("context_checks.check")(context_check))
    ffi.def_extern(name="anycuda_context_check3")(_guarded("context_checks.fn3")(lambda *args: 0))
    ffi.def_extern(name="anycuda_not_supported")(
        _guarded("export table slot")(lambda: int(CUresult.CUDA_ERROR_NOT_SUPPORTED)))

    def table(slots, size_slot=True):
        t = ffi.new("void *[]", slots)
        if size_slot:
            t[0] = ffi.cast("void *", slots * ffi.sizeof("void *"))
        _keep.append(t)
        return t

    t = table(10)
    t[1] = addr("anycuda_rt_module_from_wrapper")
    t[2] = addr("anycuda_rt_primary_context")
    t[6] = addr("anycuda_rt_module_from_wrapper_ext")
    t[7] = addr("anycuda_rt_ok")
    t[8] = addr("anycuda_rt_module_from_header_ext")
    _tables[CUDART_INTERFACE] = t
    t = table(7)
    t[2] = addr("anycuda_hooks_buffer")
    t[6] = addr("anycuda_hooks_buffer")
    _tables[RUNTIME_CALLBACK_HOOKS] = t
    _tables[TOOLS_TLS] = table(4)
    t = table(4, size_slot=False)
    t[0] = addr("anycuda_cls_ctor")
    t[1] = addr("anycuda_cls_dtor")
    t[2] = addr("anycuda_cls_get")
    _tables[CONTEXT_LOCAL_STORAGE] = t
    t = table(15)
    for i in range(1, 15):
        t[i] = addr("anycuda_not_supported")
    t[2] = addr("anycuda_context_check")
    t[3] = addr("anycuda_context_check3")
    _tables[CONTEXT_CHECKS] = t


def _primary(ffi, pctx, dev):
    api.cuInit(0)
    ctx = api.cuDevicePrimaryCtxRetain(dev)
    api.cuCtxSetCurrent(ctx)
    pctx[0] = ffi.cast("void *", ctx)
    return 0


def lookup(uuid_hex: str):
    return _tables.get(uuid_hex)
