"""Build libcuda.so.1 with cffi's embedding mode, into the user cache, on first use.

The library starts an embedded Python (the one that built it, with its module search
path recorded) the first time a program calls into it, and forwards every call to
`anycuda.shim.entry`.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

from .. import __version__
from . import declarations, export_tables

LIBRARY = "libcuda.so.1"

# Stand-ins for NVIDIA's JIT linker, preloaded by `anycuda run`. numba-cuda and cuda.core link
# through nvJitLink when its library exports `__nvJitLinkVersion` (numba-cuda then also turns on
# link-time optimisation, handing nvJitLink NVVM's LTO IR); nvJitLink's output is a cubin holding
# machine code only. cuda.pathfinder takes a library that is already loaded before it searches the
# pip wheels, so a preloaded library of that soname without the version symbol makes both fall
# back to the driver's cuLink* with PTX inputs, which anycuda's libcuda.so.1 answers.
NVJITLINK_STANDINS = ("libnvJitLink.so.13", "libnvJitLink.so.12")
_NVJITLINK_STANDIN_SOURCE = """
/* anycuda's stand-in for libnvJitLink: exports no nvJitLink function, so its users fall back
   to the CUDA driver's linker (cuLink*), which anycuda implements over PTX. */
const char anycuda_nvjitlink_standin[] = "anycuda";
"""


def _cache_root() -> Path:
    root = os.environ.get("ANYCUDA_CACHE_DIR")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "anycuda"


def _module_paths() -> list:
    """Where the embedded interpreter must find anycuda and its dependencies: the folder
    anycuda is imported from and this interpreter's site-packages."""
    import site
    paths = [str(Path(__file__).resolve().parent.parent.parent)]
    paths += [p for p in site.getsitepackages() if p not in paths]
    return paths


def _fingerprint() -> str:
    h = hashlib.sha256()
    here = Path(__file__).parent
    for p in sorted(here.glob("*.py")):
        h.update(p.read_bytes())
    h.update(__version__.encode())
    h.update(os.path.realpath(sys.prefix).encode())
    h.update(repr(_module_paths()).encode())
    return h.hexdigest()[:16]


def shim_folder() -> Path:
    """Where this installation's libcuda.so.1 lives (whether or not it is built yet)."""
    return _cache_root() / "shim" / _fingerprint()


def shim_dir() -> Path:
    """The folder holding this installation's libcuda.so.1 (built if needed)."""
    folder = shim_folder()
    if not all((folder / name).exists() for name in (LIBRARY,) + NVJITLINK_STANDINS):
        build(folder)
    return folder


# The CUDA runtime opens libcuda.so.1 with RTLD_LOCAL, which leaves libpython's symbols
# invisible to the extension modules the embedded interpreter imports later. Reopening
# libpython with RTLD_GLOBAL (it is already loaded, as our dependency) makes them visible.
# It also notes whether the process was a Python program before this library came in.
_PROMOTE_PYTHON = """
#include <dlfcn.h>
static int anycuda_host_python;
__attribute__((constructor)) static void anycuda_promote_python(void) {
    anycuda_host_python = Py_IsInitialized();
    dlopen("SONAME", RTLD_LAZY | RTLD_GLOBAL | RTLD_NOLOAD);
}
static int anycuda_host_is_python(void) { return anycuda_host_python; }
"""

# A Python program's interpreter is finalised before the C library's exit handlers run, and some
# of those (cuda.core's thread-local context handles) still release contexts: calling into Python
# then would crash the process at exit. Once the interpreter we started in has gone, every entry
# point answers CUDA_ERROR_DEINITIALIZED, as NVIDIA's driver does while the process shuts down.
# (cffi's exported functions all call through `_cffi_call_python`, defined before this code.)
_AFTER_FINALIZE = """
#include <string.h>
static void anycuda_call_python(struct _cffi_externpy_s *externpy, char *args) {
    if (_cffi_call_python != &_cffi_start_and_call_python && !Py_IsInitialized()) {
        memset(args, 0, externpy->size_of_result);
        if (externpy->size_of_result == sizeof(int))
            *(int *)args = 4;                     /* CUDA_ERROR_DEINITIALIZED */
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
# anycuda then leaves JIT code to the process's end instead of freeing it.
_EXIT_WATCH = """
#include <stdlib.h>
static int anycuda_exiting;
static void anycuda_note_exit(void) { anycuda_exiting = 1; }
static void anycuda_watch_exit(void) { atexit(anycuda_note_exit); }
static int anycuda_process_exiting(void) { return anycuda_exiting; }
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


def _init_code() -> str:
    paths = _module_paths()
    return f"""
import sys
for p in {paths!r}:
    if p not in sys.path:
        sys.path.append(p)
from anycuda_libcuda import ffi, lib
from anycuda.shim.entry import define
from anycuda.shim import export_tables
define(ffi, lib)
export_tables.install(ffi, lib)
from anycuda.compiler import jit
jit.watch_process_exit(lib.anycuda_watch_exit, lib.anycuda_process_exiting)
"""


def _build_nvjitlink_standins(folder: Path) -> None:
    """Compile the nvJitLink stand-ins (one tiny shared library per soname) into `folder`."""
    import shlex
    import subprocess
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc") or ["cc"]
    with tempfile.TemporaryDirectory(prefix="anycuda-nvjitlink-") as tmp:
        source = Path(tmp) / "standin.c"
        source.write_text(_NVJITLINK_STANDIN_SOURCE)
        for soname in NVJITLINK_STANDINS:
            staged = Path(tmp) / soname
            subprocess.run(compiler + ["-shared", "-fPIC", "-o", str(staged), str(source),
                                       f"-Wl,-soname,{soname}"], check=True, capture_output=True)
            shutil.copy(staged, folder / (soname + f".tmp{os.getpid()}"))
            os.replace(folder / (soname + f".tmp{os.getpid()}"), folder / soname)


def build(folder: Path) -> Path:
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(declarations.TYPES)
    ffi.cdef(export_tables.DECLARATIONS)
    ffi.cdef(STUB_DECLARATIONS)
    ffi.embedding_api(declarations.FUNCTIONS)
    ffi.set_source("anycuda_libcuda", "#include <stddef.h>\n#include <stdint.h>\n" + declarations.TYPES +
                   _PROMOTE_PYTHON.replace("SONAME", sysconfig.get_config_var("INSTSONAME") or "libpython3.so")
                   + _AFTER_FINALIZE + _EXIT_WATCH + _STUB_SOURCE + "\n" + export_tables.STUB_SOURCE)
    ffi.embedding_init_code(_init_code())
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="anycuda-shim-") as tmp:
        libdir = sysconfig.get_config_var("LIBDIR")
        out = ffi.compile(tmpdir=tmp, target=LIBRARY, verbose=False)
        staged = folder / (LIBRARY + f".tmp{os.getpid()}")
        shutil.copy(out, staged)
        os.replace(staged, folder / LIBRARY)
    if libdir:
        (folder / "libpython-dir").write_text(libdir)
    _build_nvjitlink_standins(folder)
    names = _driver_function_names()
    if names:
        (folder / "driver-functions.txt").write_text("\n".join(names) + "\n")
    return folder / LIBRARY
