"""The builds of anycuda's CUDA libraries (libcublas, libcublasLt, libcufft, libcurand, libcufftw, libnccl, under each
soname programs ask for), each a cffi-embedded library like libcuda.so.1, sharing its Python.

A library exports every function of its NVIDIA header: those anycuda implements are Python
(anycuda.libraries.<name>.functions gives their parameter kinds, shim/entry_libraries.py their
marshalling); every other name is a C stub that answers the library's NOT_SUPPORTED status and
names itself once on stderr. The names are recorded in `<name>_functions.txt` beside this file,
read from NVIDIA's public headers (names only).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from . import nccl_front
from .embedding import FIND_MODULES, compile_embedded, embedded_prelude

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class DropIn:
    name: str                 # "cublasLt": <name>_functions.txt
    module: str               # "cublaslt": anycuda.libraries.<module>
    sonames: tuple            # one build per soname (each its own SONAME)
    not_started: tuple        # (status, its name) every call answers when the library's Python cannot start
    not_supported: tuple      # (status, its name) of a function anycuda does not implement
    error_getter: str = ""    # the function answering the last failure of one whose result is not a status
    preloaded: bool = True    # `anycuda run` preloads it (else the loader finds it by soname on its path)
    front: object = None      # C answering some entry points first (shim/nccl_front.py describes libnccl's)

    @property
    def names_file(self) -> Path:
        return HERE / f"{self.name}_functions.txt"

    @property
    def signatures_file(self) -> Path:
        """The library's C signatures (data), compiled into its build as its names are."""
        return HERE.parent / "libraries" / self.module / "signatures.py"


_CUBLAS_ANSWERS = dict(not_started=(1, "CUBLAS_STATUS_NOT_INITIALIZED"), not_supported=(15, "CUBLAS_STATUS_NOT_SUPPORTED"))
LIBRARIES = (DropIn("cublas", "cublas", ("libcublas.so.13", "libcublas.so.12"), **_CUBLAS_ANSWERS,
                    error_getter="cublasGetError"),
             DropIn("cublasLt", "cublaslt", ("libcublasLt.so.13", "libcublasLt.so.12"), **_CUBLAS_ANSWERS),
             DropIn("cufft", "cufft", ("libcufft.so.12", "libcufft.so.11"), not_started=(7, "CUFFT_SETUP_FAILED"),
                    not_supported=(16, "CUFFT_NOT_SUPPORTED")),
             DropIn("curand", "curand", ("libcurand.so.10",), not_started=(203, "CURAND_STATUS_INITIALIZATION_FAILED"),
                    not_supported=(103, "CURAND_STATUS_TYPE_ERROR")),
             DropIn("nccl", "nccl", ("libnccl.so.2",), not_started=(3, "ncclInternalError"),
                    not_supported=(5, "ncclInvalidUsage"), front=nccl_front),
             # FFTW's interface has no status: a planner that cannot answer gives NULL. Not preloaded:
             # it exports FFTW's own names, which would take the place of a real FFTW the program uses
             DropIn("cufftw", "cufftw", ("libcufftw.so.12", "libcufftw.so.11"), not_started=(0, "NULL (no plan)"),
                    not_supported=(0, "nothing"), preloaded=False))
DROP_INS = tuple(soname for lib in LIBRARIES for soname in lib.sonames)
PRELOADED = tuple(soname for lib in LIBRARIES if lib.preloaded for soname in lib.sonames)
# what a build of the libraries is made of, relative to this folder (shim/build.py's fingerprint)
LIBRARY_SOURCES = tuple(os.path.relpath(path, HERE) for lib in LIBRARIES
                        for path in (lib.names_file, lib.signatures_file)
                        + ((*lib.front.SOURCES, Path(lib.front.__file__)) if lib.front else ()))

_C_TYPES = {"h": "void *", "p": "void *", "e": "int", "L": "int64_t", "U": "uint64_t", "z": "size_t", "f": "float",
            "d": "double", "c": "char", "C": "cuComplex", "Z": "cuDoubleComplex", "I": "ncclUniqueId"}

# the by-value types some kinds and results name (cuComplex.h's float2 and double2: same size
# and the same registers in the calling convention, so the alignment NVIDIA's gives them does not
# change a call; NCCL's unique id, 128 bytes passed by value), declared for cffi and for the C
# compiler alike
_VALUE_TYPES = """
typedef struct { float x, y; } cuComplex;
typedef struct { double x, y; } cuDoubleComplex;
typedef struct { char internal[128]; } ncclUniqueId;
"""


def c_parameters(kinds: str, wide: bool) -> str:
    """C parameter types of a kinds string (i is int, or int64_t in a `_64` variant)."""
    types = [_C_TYPES.get(k, "int64_t" if wide else "int") for k in kinds]
    return ", ".join(types) or "void"


def implemented(lib: DropIn) -> dict:
    """C name -> (C result type, parameter kinds) of what anycuda implements, from the
    library's signature table (data only: pip's build reads it before numpy is installed)."""
    import importlib
    return importlib.import_module(f"anycuda.libraries.{lib.module}.signatures").c_signatures()


def valued(lib: DropIn) -> tuple:
    """The implemented functions whose C result is not a status (they answer zero when they fail)."""
    import importlib
    return tuple(importlib.import_module(f"anycuda.libraries.{lib.module}.signatures").VALUED)


def public_names(lib: DropIn) -> list:
    return lib.names_file.read_text().split()


@functools.lru_cache(maxsize=None)
def unimplemented(lib: DropIn) -> tuple:
    """The public names anycuda does not implement, in the order of their stubs (stub i is
    the i-th): read once per process."""
    table = implemented(lib)
    return tuple(n for n in public_names(lib) if n not in table)


def _api(table: dict, prefix: str = "") -> str:
    return "\n".join(f"{prefix}{result} {name}({c_parameters(kinds, name.endswith('_64'))});"
                     for name, (result, kinds) in sorted(table.items()))


def python_name(lib: DropIn, name: str) -> str:
    """The name the library's Python answers C function `name` under: its own, or behind a front."""
    return lib.front.PYTHON_PREFIX + name if lib.front and name in lib.front.ANSWERS_FIRST else name


def _front_parts(lib: DropIn, table: dict) -> tuple:
    """(cdef, C source) a library's front adds: its C, the Python it falls back to (cffi's
    extern "Python" functions are static: declared before the front's C calls them)."""
    if lib.front is None:
        return "", ""
    behind = {python_name(lib, n): table[n] for n in lib.front.ANSWERS_FIRST}
    cdef = lib.front.CDEF + _api(behind, 'extern "Python" ')
    return cdef, _api(behind, "static ") + "".join("\n" + path.read_text() for path in lib.front.SOURCES)


def _stubs(lib: DropIn) -> str:
    """A C function for each public name anycuda does not implement."""
    lines = ["static int anycuda_unsupported(int index);"]
    lines += [f'__attribute__((visibility("default"))) int {n}(void) {{ return anycuda_unsupported({i}); }}'
              for i, n in enumerate(unimplemented(lib))]
    return "\n".join(lines)


_DECLARATIONS = """
static int anycuda_host_is_python(void);
static const char *anycuda_library_path(void);
extern "Python" int anycuda_unsupported(int index);
"""

_INIT_CODE = FIND_MODULES + """
from MODULE import ffi, lib
_anycuda_find_modules(ffi.string(lib.anycuda_library_path()).decode("utf-8", "surrogateescape"),
                      lib.anycuda_host_is_python())
del _anycuda_find_modules
from anycuda.shim.entry_libraries import define
define(ffi, lib, "NAME")
"""


def build_libraries(folder: Path) -> None:
    """Compile each drop-in library, one file per soname, into `folder`."""
    for lib in LIBRARIES:
        table = implemented(lib)
        front_cdef, front_source = _front_parts(lib, table)
        source = ("#include <stddef.h>\n#include <stdint.h>\n" + _VALUE_TYPES
                  + embedded_prelude(lib.sonames[0], lib.not_started, lib.not_started[0], lib.name, valued(lib),
                                     lib.error_getter)
                  + _stubs(lib) + front_source)
        exported = {n: v for n, v in table.items() if python_name(lib, n) == n}
        for soname in lib.sonames:
            module = "anycuda_" + soname.split(".so")[0].replace("-", "_") + "_" + soname.rsplit(".", 1)[-1]
            compile_embedded(folder, module, soname, [_VALUE_TYPES, _DECLARATIONS, front_cdef], _api(exported), source,
                             _INIT_CODE.replace("MODULE", module).replace("NAME", lib.module),
                             link_args=[f"-Wl,-soname,{soname}"])


def unsupported_name(lib: DropIn, index: int) -> str:
    """The name of the index-th stub of a library."""
    missing = unimplemented(lib)
    return missing[index] if 0 <= index < len(missing) else f"function #{index}"
