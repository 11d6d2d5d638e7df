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
import re
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from .. import __version__

from .settings import LIBRARY, STUBS
from .embedding import FIND_MODULES, MODULE_PATHS, compile_embedded, embedded_prelude
from .libraries import DROP_INS, LIBRARY_SOURCES, build_libraries
from .standins import NVRTC_SOURCE, STANDINS, build_standins

BUILD_STAMP = "build-stamp.txt"             # the recipe fingerprint of the library beside it
INSTALL_FAILURE = "install-build-failed.txt"    # why the build at install did not succeed

# The shim modules whose text is compiled into the library (entry.py is imported at run time)
RECIPE_MODULES = ("build.py", "declarations.py", "export_tables.py", "standins.py", NVRTC_SOURCE.name,
                  "libraries.py", "embedding.py") + LIBRARY_SOURCES


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
    return stamp == recipe_fingerprint() and all((folder / n).exists() for n in (LIBRARY,) + DROP_INS + STANDINS)


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


# A program's own exit handlers (the CUDA runtime's unloads its modules from one) run after
# those of libraries loaded later, and LLVM's static destructors are among those: by the time
# the runtime unloads a module, LLVM's context is gone and freeing JIT code would crash. A
# handler registered once LLVM is loaded (and again after LLVM's first operations, which make
# statics of their own: jit.EXIT_WATCH_RENEWALS) runs before LLVM's destructors and notes the exit, so
# anycuda then leaves JIT code to the process's end instead of freeing it; it also lets queued
# stream work finish, waits for a link in progress on another thread and stops any more
# (stream.drain, jit.stop_linking, anycuda_exit_hook).
_EXIT_WATCH = """
#include <stdlib.h>
static int anycuda_exiting;
static void anycuda_exit_hook(void);
static void anycuda_note_exit(void) { if (anycuda_exiting) return; anycuda_exiting = 1; anycuda_exit_hook(); }
static void anycuda_watch_exit(void) { atexit(anycuda_note_exit); }
static int anycuda_process_exiting(void) { return anycuda_exiting; }
"""


# Driver functions anycuda does not implement resolve to one of these stubs: each returns
# CUDA_ERROR_NOT_SUPPORTED through anycuda_unsupported(i), which names the function once.
_STUB_SOURCE = "\n".join(
    ["static int anycuda_unsupported(int index);"]
    + [f"static int anycuda_stub_{i}(void) {{ return anycuda_unsupported({i}); }}" for i in range(STUBS)]
    + ["static void *anycuda_stubs[] = {" + ", ".join(f"(void *)anycuda_stub_{i}" for i in range(STUBS)) + "};",
       "static void *anycuda_stub_address(int i) { return (i >= 0 && i < %d) ? anycuda_stubs[i] : 0; }" % STUBS])


def named_stubs(names, implemented) -> tuple:
    """(C source, names) of an exported function for each driver function of `names` that
    anycuda does not implement: each answers CUDA_ERROR_NOT_SUPPORTED through
    anycuda_unsupported(STUBS + its index), which names it once. NVIDIA's libraries look driver
    functions up by name with dlsym on libcuda.so.1 (cuBLASLt fails its start when one it needs
    is missing); cuGetProcAddress hands out the anonymous stubs above instead."""
    missing = [n for n in names if n not in implemented]
    source = "\n".join(f"int {n}(void) {{ return anycuda_unsupported({STUBS + i}); }}"
                       for i, n in enumerate(missing))
    return source, missing


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
from anycuda.compiler.build import jit, tiers
from anycuda.runtime import profile, sanitizer
from anycuda.runtime import stream as _anycuda_streams
def _anycuda_exit_hook():
    tiers.close_at_exit()        # first: no optimised code is linked while the exit tears LLVM down
    _anycuda_streams.drain()     # queued kernels finish before the code they run is torn down
    profile.finish_process()     # after them: every launch has its time
    sanitizer.finish_process()   # after them: their reports come before the summary
    jit.stop_linking()
ffi.def_extern(name="anycuda_exit_hook")(_anycuda_exit_hook)
del _anycuda_exit_hook
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
    """Build libcuda.so.1, anycuda's CUDA libraries (anycuda.shim.libraries) and the toolchain
    stand-ins (anycuda.shim.standins) into `folder`, note beside them the folders of the
    environment that builds (`module_paths`, by default this interpreter's) and, last, the
    recipe fingerprint (BUILD_STAMP)."""
    declarations, export_tables = _recipe_modules()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / BUILD_STAMP).unlink(missing_ok=True)        # incomplete until the stamp is written again
    names = _driver_function_names()
    if names:                                # the per-thread variants a program may link to by name
        variants = declarations.PER_THREAD_NAMES
        names = sorted(set(names) | {variants[n] for n in names if n in variants})
    stubs, stub_names = named_stubs(names or (), set(re.findall(r"\b(cu\w+)\s*\(", declarations.FUNCTIONS)))
    source = ("#include <stddef.h>\n#include <stdint.h>\n" + declarations.TYPES
              + embedded_prelude(LIBRARY, (3, "CUDA_ERROR_NOT_INITIALIZED"), 4, "cu")
              + _EXIT_WATCH + _STUB_SOURCE + "\n" + stubs + "\n" + export_tables.STUB_SOURCE)
    compile_embedded(folder, "anycuda_libcuda", LIBRARY,
                     [declarations.TYPES, export_tables.DECLARATIONS, STUB_DECLARATIONS],
                     declarations.FUNCTIONS, source, INIT_CODE)
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir:
        _write(folder / "libpython-dir", libdir)
    build_libraries(folder)
    build_standins(folder)
    if names:
        _write(folder / "driver-functions.txt", "\n".join(names) + "\n")
        _write(folder / "driver-stubs.txt", "".join(n + "\n" for n in stub_names))
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
    ours = (LIBRARY, *DROP_INS, *STANDINS, BUILD_STAMP, MODULE_PATHS, INSTALL_FAILURE, "libpython-dir",
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
