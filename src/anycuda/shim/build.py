"""Build libcuda.so.1 with cffi's embedding mode: at `pip install` (setup.py calls
`build_at_install`) into the package's `shim/lib/`, else on first use into the user cache.

The library starts an embedded Python (the one that built it) the first time a program calls
into it, and forwards every call to `anycuda.shim.entry`. Where that interpreter finds anycuda
and its dependencies is decided when it starts, not when the library is built: the package the
library lies in (found from its own address), and the folders `anycuda run` names in
ANYCUDA_PYTHONPATH or else those noted next to the library when it was built (the
environment that built it). So a library built in pip's isolated build environment serves the
environment it is installed into.

Every build notes its recipe fingerprint (the shim sources compiled into it, anycuda's version,
the Python it embeds) in BUILD_STAMP; a library whose stamp differs from the current recipe is
stale and is not used: the cache then gets a fresh one.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

from .. import __version__

from .settings import LIBRARY
from .standins import NVRTC_SOURCE, STANDINS, build_standins

BUILD_STAMP = "build-stamp.txt"             # the recipe fingerprint of the library beside it
MODULE_PATHS = "module-paths.txt"           # folders of the environment that built it, one per line
INSTALL_FAILURE = "install-build-failed.txt"    # why the build at install did not succeed

# The shim modules whose text is compiled into the library (entry.py is imported at run time)
RECIPE_MODULES = ("build.py", "declarations.py", "export_tables.py", "standins.py", NVRTC_SOURCE.name)


def _cache_root() -> Path:
    root = os.environ.get("ANYCUDA_CACHE_DIR")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "anycuda"


def _module_paths() -> list:
    """Where the embedded interpreter must find anycuda and its dependencies, as this
    interpreter sees it: the folder anycuda is imported from and its site-packages."""
    import site
    paths = [str(Path(__file__).resolve().parent.parent.parent)]
    paths += [p for p in site.getsitepackages() if p not in paths]
    return paths


def recipe_fingerprint() -> str:
    """What a library built now would be made of: the shim sources compiled into it,
    anycuda's version and the Python it embeds. A library whose BUILD_STAMP differs is stale."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in RECIPE_MODULES:
        h.update(name.encode() + b"\0" + (here / name).read_bytes())
    h.update(__version__.encode())
    h.update(" ".join([sys.implementation.cache_tag or "", getattr(sys, "abiflags", ""), sysconfig.get_platform(),
                       sysconfig.get_config_var("INSTSONAME") or ""]).encode())
    return h.hexdigest()[:16]


def _fingerprint() -> str:
    """The cache folder's name: the recipe and the environment noted beside the library."""
    h = hashlib.sha256()
    h.update(recipe_fingerprint().encode())
    h.update(os.path.realpath(sys.prefix).encode())
    h.update(repr(_module_paths()).encode())
    return h.hexdigest()[:16]


def install_folder() -> Path:
    """Where `pip install` builds the library: the package's shim/lib/ (in the source tree for
    an editable install)."""
    return Path(__file__).resolve().parent / "lib"


def shim_folder() -> Path:
    """The cache folder for this installation's libcuda.so.1 (whether or not it is built yet)."""
    return _cache_root() / "shim" / _fingerprint()


def _is_current(folder: Path) -> bool:
    """Whether `folder` holds a complete build of the current recipe."""
    try:
        stamp = (folder / BUILD_STAMP).read_text().strip()
    except OSError:
        return False
    return stamp == recipe_fingerprint() and all((folder / n).exists() for n in (LIBRARY,) + STANDINS)


def install_build_problem() -> str | None:
    """Why the library built at install is not used, or None when it is."""
    folder = install_folder()
    if _is_current(folder):
        return None
    try:
        failure = (folder / INSTALL_FAILURE).read_text().strip()
    except OSError:
        failure = ""
    if failure:
        return f"the build at install failed: {failure}"
    if (folder / LIBRARY).exists():
        return "the library built at install is stale (the shim's sources or the Python it embeds changed since)"
    return "no library was built at install (installed without the build step of anycuda's setup.py)"


def shim_state():
    """(folder, how, why): the folder whose libcuda.so.1 anycuda uses; how it was built:
    "install", "cache" or None (not built yet: `folder` is where shim_dir() will build it);
    why the library built at install is not used (None when it is)."""
    why = install_build_problem()
    if why is None:
        return install_folder(), "install", None
    cache = shim_folder()
    return cache, ("cache" if _is_current(cache) else None), why


def shim_dir() -> Path:
    """The folder holding the libcuda.so.1 in use: the one built at install when it is current,
    else this installation's in the cache (built now if needed)."""
    folder, how, why = shim_state()
    if how is None:
        print(f"anycuda: building libcuda.so.1 into {folder}; {why}", file=sys.stderr)
        build(folder)
    return folder


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
        fprintf(stderr, "anycuda: libcuda.so.1 embeds Python %d.%d and cannot run inside this program's Python %s; "
                "every CUDA call answers CUDA_ERROR_NOT_INITIALIZED (install anycuda into that Python's "
                "environment and run the program with its `anycuda run`)\\n", PY_MAJOR_VERSION, PY_MINOR_VERSION, version);
        anycuda_start_failed = 1;
        return;
    }
    if (anycuda_host_python)
        anycuda_seed_host_path();
    if (cffi_start_python() != 0) {
        fprintf(stderr, "anycuda: libcuda.so.1 could not start its Python (cffi says why above); every CUDA call "
                "answers CUDA_ERROR_NOT_INITIALIZED\\n");
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
_AFTER_FINALIZE = """
#include <stdio.h>
#include <string.h>
static const char *const anycuda_release_words[] = {"Destroy", "Unload", "Free", "Release", "Unregister", "Detach"};
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
        if (!strncmp(name, "cu", 2) && strstr(name, anycuda_release_words[i]))
            result = 0;
    memset(args, 0, externpy->size_of_result);
    if (externpy->size_of_result == sizeof(int))
        *(int *)args = result;
}
static void anycuda_call_python(struct _cffi_externpy_s *externpy, char *args) {
    if (_cffi_call_python == &_cffi_start_and_call_python && !anycuda_started()) {
        anycuda_answer_without_python(externpy, args, 3, 0, "anycuda could not start in this process");
        return;                                       /* 3: CUDA_ERROR_NOT_INITIALIZED */
    }
    if (!Py_IsInitialized()) {                        /* 4: CUDA_ERROR_DEINITIALIZED */
        anycuda_answer_without_python(externpy, args, 4, 1, "the process is exiting");
        return;
    }
    _cffi_call_python(externpy, args);
}
#define _cffi_call_python anycuda_call_python
"""

# A program's own exit handlers (the CUDA runtime's unloads its modules from one) run after
# those of libraries loaded later, and LLVM's static destructors are among those: by the time
# the runtime unloads a module, LLVM's context is gone and freeing JIT code would crash. A
# handler registered once LLVM is loaded runs before LLVM's destructors and notes the exit, so
# anycuda then leaves JIT code to the process's end instead of freeing it; it also waits for a
# link in progress on another thread and stops any more (jit.stop_linking, anycuda_exit_hook).
_EXIT_WATCH = """
#include <stdlib.h>
static int anycuda_exiting;
static void anycuda_exit_hook(void);
static void anycuda_note_exit(void) { anycuda_exiting = 1; anycuda_exit_hook(); }
static void anycuda_watch_exit(void) { atexit(anycuda_note_exit); }
static int anycuda_process_exiting(void) { return anycuda_exiting; }
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

STUBS = 1024

# Driver functions anycuda does not implement resolve to one of these stubs: each returns
# CUDA_ERROR_NOT_SUPPORTED through anycuda_unsupported(i), which names the function once.
_STUB_SOURCE = "\n".join(
    ["static int anycuda_unsupported(int index);"]
    + [f"static int anycuda_stub_{i}(void) {{ return anycuda_unsupported({i}); }}" for i in range(STUBS)]
    + ["static void *anycuda_stubs[] = {" + ", ".join(f"(void *)anycuda_stub_{i}" for i in range(STUBS)) + "};",
       "static void *anycuda_stub_address(int i) { return (i >= 0 && i < %d) ? anycuda_stubs[i] : 0; }" % STUBS])

STUB_DECLARATIONS = """
static int anycuda_host_is_python(void);
extern "Python" int anycuda_unsupported(int index);
static void *anycuda_stub_address(int i);
static void anycuda_watch_exit(void);
static int anycuda_process_exiting(void);
extern "Python" void anycuda_exit_hook(void);
static const char *anycuda_library_path(void);
"""


def _driver_function_names():
    """Names of the driver API's functions, read from a cuda.h on this machine (only the
    names are used), or None when there is none."""
    import glob
    import re
    candidates = glob.glob("/usr/local/cuda*/include/cuda.h")
    try:
        import nvidia
        candidates += glob.glob(os.path.join(list(nvidia.__path__)[0], "cu1*", "include", "cuda.h"))
    except ImportError:
        pass
    for path in candidates:
        try:
            text = Path(path).read_text(errors="replace")
        except OSError:
            continue
        names = set(re.findall(r"CUresult\s+CUDAAPI\s+(cu\w+)\s*\(", text))
        # cuda.h renames many functions by macro (cuGraphInstantiate -> cuGraphInstantiateWithFlags,
        # cuMemAlloc -> cuMemAlloc_v2): the names programs end up asking for
        names |= set(re.findall(r"#define\s+cu\w+\s+(?:__CUDA_API_PT\w+\()?(cu\w+)", text))
        names = sorted(names)
        if names:
            return names
    return None


# Run by the embedded interpreter when it starts (a Python program's was seeded already: the
# folders are then on its path, and adding them again changes nothing).
INIT_CODE = FIND_MODULES + """
from anycuda_libcuda import ffi, lib
_anycuda_find_modules(ffi.string(lib.anycuda_library_path()).decode("utf-8", "surrogateescape"),
                      lib.anycuda_host_is_python())
del _anycuda_find_modules
from anycuda.shim.entry import define
from anycuda.shim import export_tables
define(ffi, lib)
export_tables.install(ffi, lib)
from anycuda.compiler.build import jit
ffi.def_extern(name="anycuda_exit_hook")(jit.stop_linking)
jit.watch_process_exit(lib.anycuda_watch_exit, lib.anycuda_process_exiting)
"""


class _Absent:
    """Stands in for what a shim module imports from anycuda's runtime when only its C text is
    wanted (see _text_only)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *args, **kwargs):
        return self


def _text_only(name: str):
    """The shim module `name` run with its imports from the rest of anycuda left out: what pip's
    build of anycuda needs of it (the C text of its module-level constants) while anycuda's
    runtime dependencies are not installed yet."""
    import builtins
    import types
    path = Path(__file__).resolve().with_name(name + ".py")
    real_import = builtins.__import__

    def partial_import(module, globals=None, locals=None, fromlist=(), level=0):
        return _Absent() if level else real_import(module, globals, locals, fromlist, level)

    module = types.ModuleType(f"{__package__}.{name}")
    module.__file__ = str(path)
    module.__dict__["__builtins__"] = dict(vars(builtins), __import__=partial_import)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module


def _recipe_modules():
    """The modules holding the library's C text: imported as usual, or read for their text alone
    while pip builds anycuda without its runtime dependencies."""
    from . import declarations
    try:
        from . import export_tables
    except Exception:                       # noqa: BLE001 -- the runtime cannot be imported here
        export_tables = _text_only("export_tables")
    return declarations, export_tables


def _write(path: Path, text: str) -> None:
    staged = path.with_name(path.name + f".tmp{os.getpid()}")
    staged.write_text(text)
    os.replace(staged, path)


def build(folder: Path, module_paths=None) -> Path:
    """Build libcuda.so.1 and the toolchain stand-ins (anycuda.shim.standins) into `folder`,
    note beside them the folders of the environment that builds (`module_paths`, by default this interpreter's) and, last,
    the recipe fingerprint (BUILD_STAMP)."""
    import cffi
    declarations, export_tables = _recipe_modules()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / BUILD_STAMP).unlink(missing_ok=True)        # incomplete until the stamp is written again
    ffi = cffi.FFI()
    ffi.cdef(declarations.TYPES)
    ffi.cdef(export_tables.DECLARATIONS)
    ffi.cdef(STUB_DECLARATIONS)
    ffi.embedding_api(declarations.FUNCTIONS)
    ffi.set_source("anycuda_libcuda", "#include <stddef.h>\n#include <stdint.h>\n" + declarations.TYPES +
                   _PROMOTE_PYTHON.replace("SONAME", sysconfig.get_config_var("INSTSONAME") or "libpython3.so")
                   + _SELF_PATH + _STARTUP.replace("SEED_CODE", json.dumps(SEED_CODE)) + _AFTER_FINALIZE + _EXIT_WATCH + _STUB_SOURCE + "\n" + export_tables.STUB_SOURCE)
    ffi.embedding_init_code(INIT_CODE)
    with tempfile.TemporaryDirectory(prefix="anycuda-shim-") as tmp:
        libdir = sysconfig.get_config_var("LIBDIR")
        out = ffi.compile(tmpdir=tmp, target=LIBRARY, verbose=False)
        staged = folder / (LIBRARY + f".tmp{os.getpid()}")
        shutil.copy(out, staged)
        os.replace(staged, folder / LIBRARY)
    if libdir:
        _write(folder / "libpython-dir", libdir)
    build_standins(folder)
    names = _driver_function_names()
    if names:
        _write(folder / "driver-functions.txt", "\n".join(names) + "\n")
    _write(folder / MODULE_PATHS, "".join(p + "\n" for p in (_module_paths() if module_paths is None else module_paths)))
    _write(folder / BUILD_STAMP, recipe_fingerprint() + "\n")
    return folder / LIBRARY


def _missing_prerequisite() -> str | None:
    """What a build of the library lacks on this machine, when that can be told beforehand."""
    import shlex
    compiler = (shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc") or ["cc"])[0]
    if not shutil.which(compiler):
        return f"no C compiler ({compiler} is not on PATH)"
    include = sysconfig.get_paths().get("include")
    if include and not os.path.exists(os.path.join(include, "Python.h")):
        return f"no Python headers ({include}/Python.h is missing: install the python3-dev package or equivalent)"
    return None


def build_at_install(folder) -> list:
    """The build that `pip install` runs (setup.py): the library into `folder` (the package's
    shim/lib/). Never fails the install: when the library cannot be built (no C compiler, no
    Python headers) it leaves INSTALL_FAILURE saying why and prints a warning, and the library
    is then built on first use into the cache. Returns the files written."""
    import site
    folder = Path(folder)
    ours = (LIBRARY, *STANDINS, BUILD_STAMP, MODULE_PATHS, INSTALL_FAILURE, "libpython-dir",
            "driver-functions.txt")

    def clear():
        for name in ours:
            (folder / name).unlink(missing_ok=True)
    clear()
    try:
        # the environment being installed into: pip runs the build with its interpreter, whose
        # site-packages (not the isolated build environment's) site.getsitepackages() gives
        build(folder, module_paths=site.getsitepackages())
    except Exception as e:                  # noqa: BLE001 -- any failure leaves the build to first use
        clear()
        reason = " ".join(str(e).split()) or type(e).__name__
        missing = _missing_prerequisite()
        if missing:
            reason = f"{missing}; {reason}"
        folder.mkdir(parents=True, exist_ok=True)
        _write(folder / INSTALL_FAILURE, reason + "\n")
        print(f"WARNING: anycuda could not build libcuda.so.1 at install: {reason}\n"
              "WARNING: it will be built on first use into the user cache instead (that needs a C compiler "
              "and Python's headers too); `anycuda info` shows which is used.", file=sys.stderr)
    return sorted(folder / name for name in ours if (folder / name).exists())
