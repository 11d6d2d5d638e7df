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
    if not (folder / LIBRARY).exists():
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
"""


def build(folder: Path) -> Path:
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(declarations.TYPES)
    ffi.cdef(export_tables.DECLARATIONS)
    ffi.cdef(STUB_DECLARATIONS)
    ffi.embedding_api(declarations.FUNCTIONS)
    ffi.set_source("anycuda_libcuda", "#include <stddef.h>\n#include <stdint.h>\n" + declarations.TYPES +
                   _PROMOTE_PYTHON.replace("SONAME", sysconfig.get_config_var("INSTSONAME") or "libpython3.so")
                   + _STUB_SOURCE + "\n" + export_tables.STUB_SOURCE)
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
    names = _driver_function_names()
    if names:
        (folder / "driver-functions.txt").write_text("\n".join(names) + "\n")
    return folder / LIBRARY
