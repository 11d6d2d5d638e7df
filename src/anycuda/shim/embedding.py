"""What every library anycuda builds with cffi's embedding mode shares (libcuda.so.1 and the
CUDA libraries, shim/libraries.py): making libpython's symbols visible, finding anycuda's
modules when the library's Python starts, starting that Python once (or saying why it cannot),
and answering calls without it while the process exits."""
from __future__ import annotations

import json
import os
import shutil
import sysconfig
import tempfile
from pathlib import Path

MODULE_PATHS = "module-paths.txt"           # folders of the environment that built it, one per line

# The CUDA runtime opens libcuda.so.1 with RTLD_LOCAL, which leaves libpython's symbols
# invisible to the extension modules the embedded interpreter imports later. Reopening
# libpython with RTLD_GLOBAL (it is already loaded, as our dependency) makes them visible.
# It also notes whether the process was a Python program before this library came in.
_PROMOTE_PYTHON = """
#include <dlfcn.h>
#include <stdio.h>
static int anycuda_host_python;
static int anycuda_foreign_python;      /* the program is a Python of another version than ours */
__attribute__((constructor)) static void anycuda_promote_python(void) {
    anycuda_host_python = Py_IsInitialized();
    if (anycuda_host_python) {          /* the program's own Python answers these calls */
        int major = 0, minor = 0;
        sscanf(Py_GetVersion(), "%d.%d", &major, &minor);
        anycuda_foreign_python = major != PY_MAJOR_VERSION || minor != PY_MINOR_VERSION;
    }
    if (!anycuda_foreign_python)
        dlopen("SONAME", RTLD_LAZY | RTLD_GLOBAL | RTLD_NOLOAD);
}
static int anycuda_host_is_python(void) { return anycuda_host_python; }
"""

# Where anycuda and its dependencies are, decided when the library's Python starts: the package
# the library lies in (built at install: <root>/anycuda/shim/lib/), the folders `anycuda run`
# names in ANYCUDA_PYTHONPATH, or else those noted beside the library when it was built. A Python
# program's own interpreter (`host`) gets them appended to its path; when the process has no
# Python of its own, they are added as site folders (their .pth files read) before the base
# installation's site-packages, as in the environment's own interpreter.
FIND_MODULES = """
def _anycuda_find_modules(found, host):
    import os, site, sys
    here = os.path.dirname(os.path.realpath(found)) if found else None
    paths = []
    if here:
        root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
        if os.path.basename(here) == "lib" and os.path.isfile(os.path.join(root, "anycuda", "shim", "build.py")):
            paths.append(root)
    named = os.environ.get("ANYCUDA_PYTHONPATH")
    paths += named.split(os.pathsep) if named else []
    if here and not named:
        try:
            with open(os.path.join(here, "MODULE_PATHS")) as f:
                paths += f.read().splitlines()
        except OSError:
            pass
    before = list(sys.path)
    for p in paths:
        if p and p not in sys.path and os.path.isdir(p):
            if host:
                sys.path.append(p)
            else:
                site.addsitedir(p)
    if not host:
        added = [p for p in sys.path if p not in before]
        kept = [p for p in sys.path if p in before]
        cut = next((i for i, p in enumerate(kept) if os.path.basename(p) in ("site-packages", "dist-packages")),
                   len(kept))
        sys.path[:] = kept[:cut] + added + kept[cut:]
""".replace("MODULE_PATHS", MODULE_PATHS)

# Run in a Python program's own interpreter before cffi starts the library's module: cffi imports
# `_cffi_backend` first, from the program's sys.path, which lacks it when the program is a Python
# of another environment than anycuda's; the folders are added then, not once cffi has started.
SEED_CODE = FIND_MODULES + "_anycuda_find_modules(library, True)\n"

# Starting the library's Python (first call): where it cannot start (a Python program of another
# version, whose interpreter cannot run a library built for ours; or cffi's start failed, which
# cffi describes), one line says so and every entry point answers CUDA_ERROR_NOT_INITIALIZED
# (cffi alone would answer 0, success, without doing anything).
_STARTUP = """
#include <pthread.h>
static const char anycuda_seed_code[] = SEED_CODE;
static void anycuda_seed_host_path(void) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *globals = PyDict_New();
    PyObject *path = PyUnicode_DecodeFSDefault(anycuda_library_path());
    if (globals && path && PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) == 0
            && PyDict_SetItemString(globals, "library", path) == 0) {
        PyObject *done = PyRun_String(anycuda_seed_code, Py_file_input, globals, globals);
        Py_XDECREF(done);
    }
    PyErr_Clear();
    Py_XDECREF(path);
    Py_XDECREF(globals);
    PyGILState_Release(gil);
}
static int anycuda_start_failed;
static void anycuda_start(void) {
    char version[32] = "";
    if (anycuda_foreign_python) {
        sscanf(Py_GetVersion(), "%31s", version);
        fprintf(stderr, "anycuda: LIBNAME embeds Python %d.%d and cannot run inside this program's Python %s; "
                "every call answers NOT_STARTED_NAME (install anycuda into that Python's "
                "environment and run the program with its `anycuda run`)\\n", PY_MAJOR_VERSION, PY_MINOR_VERSION, version);
        anycuda_start_failed = 1;
        return;
    }
    if (anycuda_host_python)
        anycuda_seed_host_path();
    if (cffi_start_python() != 0) {
        fprintf(stderr, "anycuda: LIBNAME could not start its Python (cffi says why above); every call "
                "answers NOT_STARTED_NAME\\n");
        anycuda_start_failed = 1;
    }
}
static pthread_once_t anycuda_start_once = PTHREAD_ONCE_INIT;
static int anycuda_started(void) {
    pthread_once(&anycuda_start_once, anycuda_start);
    return !anycuda_start_failed;
}
"""

# A Python program's interpreter is finalised before the C library's exit handlers run, and some
# of those (cuda.core's thread-local context handles) still release contexts: calling into Python
# then would crash the process at exit. The interpreter also counts as finalised while it tears
# down its modules, whose objects (CuPy's modules and memory) release what they hold from their
# destructors. Once the interpreter we started in has gone, calls that release something
# succeed (the process's end releases it), the error-text functions give a text, and every
# other entry point answers CUDA_ERROR_DEINITIALIZED, as NVIDIA's driver does while the process
# shuts down. (cffi's exported functions all call through `_cffi_call_python`, defined before
# this code, with each argument in an 8-byte slot of `args` and the result written over them.)
#
# A function whose result is not a status (legacy cuBLAS's `float cublasSdot`, `int
# cublasIsamax`) answers a zero of its own type instead: writing the status there would hand the
# program a made-up dot product or index. Its failure is kept, as the library's Python keeps it
# (`valued_failed`), for the library's error getter (cublasGetError), which answers it once.
_AFTER_FINALIZE = """
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static const char *const anycuda_release_words[] = {"Destroy", "Unload", "Free", "Release", "Unregister", "Detach"};
static const char *const anycuda_valued_names[] = {VALUED_NAMES};          /* sorted, then NULL */
static const char anycuda_error_getter[] = ERROR_GETTER;
static int anycuda_valued_status;          /* the last failure of a valued function, for the getter */
static int anycuda_compare_names(const void *key, const void *member) {
    return strcmp((const char *)key, *(const char *const *)member);
}
static int anycuda_is_valued(const char *name) {
    size_t count = sizeof anycuda_valued_names / sizeof *anycuda_valued_names - 1;
    return bsearch(name, anycuda_valued_names, count, sizeof *anycuda_valued_names, anycuda_compare_names) != NULL;
}
__attribute__((noinline)) static void anycuda_answer_without_python(struct _cffi_externpy_s *externpy, char *args,
                                                                    int code, int releases, const char *why) {
    static __thread char text[128];
    const char *name = externpy->name ? externpy->name : "";
    if (strrchr(name, '.'))                           /* cffi names it "module.function" */
        name = strrchr(name, '.') + 1;
    int result = code;
    if (!strcmp(name, "cuGetErrorName") || !strcmp(name, "cuGetErrorString")) {
        const char **out = *(const char ***)(args + 8);
        snprintf(text, sizeof text, "CUDA error %d (anycuda: %s)", *(int *)args, why);
        if (out)
            *out = text;
        result = 0;
    }
    for (size_t i = 0; releases && i < sizeof anycuda_release_words / sizeof *anycuda_release_words; i++)
        if (!strncmp(name, "PREFIX", sizeof "PREFIX" - 1) && strstr(name, anycuda_release_words[i]))
            result = 0;
    memset(args, 0, externpy->size_of_result);
    if (anycuda_is_valued(name)) {                    /* its zero stays; the getter answers the status */
        if (!strcmp(name, anycuda_error_getter))
            *(int *)args = __atomic_exchange_n(&anycuda_valued_status, 0, __ATOMIC_SEQ_CST);
        else if (result)
            __atomic_store_n(&anycuda_valued_status, result, __ATOMIC_SEQ_CST);
        return;
    }
    if (externpy->size_of_result == sizeof(int))
        *(int *)args = result;
}
static void anycuda_call_python(struct _cffi_externpy_s *externpy, char *args) {
    if (_cffi_call_python == &_cffi_start_and_call_python && !anycuda_started()) {
        anycuda_answer_without_python(externpy, args, NOT_STARTED_CODE, 0, "anycuda could not start in this process");
        return;
    }
    if (!Py_IsInitialized()) {                        /* 4: CUDA_ERROR_DEINITIALIZED */
        anycuda_answer_without_python(externpy, args, EXITING_CODE, 1, "the process is exiting");
        return;
    }
    _cffi_call_python(externpy, args);
}
#define _cffi_call_python anycuda_call_python
"""

# The library's own file name (dladdr on one of its functions), for INIT_CODE.
_SELF_PATH = """
#include <limits.h>
#include <string.h>
static const char *anycuda_library_path(void) {
    static char path[PATH_MAX];
    Dl_info info;
    if (!path[0] && dladdr((void *)&anycuda_library_path, &info) && info.dli_fname)
        strncpy(path, info.dli_fname, sizeof path - 1);
    return path;
}
"""

def embedded_prelude(library: str, not_started: tuple, exiting: int, prefix: str, valued=(),
                     error_getter: str = "") -> str:
    """The C that every cffi-embedded library of anycuda starts with: libpython made visible,
    the library's own path, the start of its Python and the answers given without it.
    `not_started` is (code, name) of the status every call answers when Python cannot start,
    `exiting` the code answered once the interpreter has gone (releases, named by functions
    starting with `prefix`, then succeed). `valued` names the functions whose result is not a
    status (they answer zero), `error_getter` the one of them that answers their last failure."""
    code, name = not_started
    startup = (_STARTUP.replace("SEED_CODE", json.dumps(SEED_CODE)).replace("LIBNAME", library)
               .replace("NOT_STARTED_NAME", name))
    names = "".join(json.dumps(n) + ", " for n in sorted(set(valued), key=str.encode)) + "NULL"
    after = (_AFTER_FINALIZE.replace("NOT_STARTED_CODE", str(code)).replace("EXITING_CODE", str(exiting))
             .replace("PREFIX", prefix).replace("VALUED_NAMES", names)
             .replace("ERROR_GETTER", json.dumps(error_getter)))
    return (_PROMOTE_PYTHON.replace("SONAME", sysconfig.get_config_var("INSTSONAME") or "libpython3.so")
            + _SELF_PATH + startup + after)


def compile_embedded(folder: Path, module: str, target: str, cdefs: list, api: str, source: str,
                     init_code: str, link_args=()) -> None:
    """One cffi-embedded library: `api` its exported Python functions, `source` its C (the
    prelude included), written atomically as `folder/target`."""
    import cffi
    ffi = cffi.FFI()
    for cdef in cdefs:
        ffi.cdef(cdef)
    ffi.embedding_api(api)
    ffi.set_source(module, source, extra_link_args=list(link_args))
    ffi.embedding_init_code(init_code)
    with tempfile.TemporaryDirectory(prefix="anycuda-shim-") as tmp:
        out = ffi.compile(tmpdir=tmp, target=target, verbose=False)
        staged = folder / (target + f".tmp{os.getpid()}")
        shutil.copy(out, staged)
        os.replace(staged, folder / target)
