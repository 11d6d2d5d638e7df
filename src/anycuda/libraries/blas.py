"""The CPU BLAS that anycuda's cuBLAS calls: the OpenBLAS numpy already loaded.

numpy's wheels carry OpenBLAS (as `libscipy_openblas64_`, with every CBLAS function exported
under a `scipy_` prefix and a `64_` suffix and 64-bit integers); other numpy builds link a
plain CBLAS (`cblas_sgemm`, 32-bit integers). Using the library numpy loaded means one BLAS and
one thread pool in the process, and no second copy to install. Calls go through ctypes, which
releases the GIL, so stream work on several streams computes at once.

`routine("sgemm")` gives the CBLAS function with its argument types set; integers are passed
as the library's width (ILP64 or LP64) and scalars of real routines by value, as CBLAS takes them.
"""
from __future__ import annotations

import ctypes
import os
import threading

from ..runtime.errors import CudaError, CUresult

# CBLAS's enumerations (cblas.h): anycuda always calls in column-major order, as cuBLAS works
COL_MAJOR = 102
NO_TRANS, TRANS, CONJ_TRANS = 111, 112, 113
UPPER, LOWER = 121, 122
NON_UNIT, UNIT = 131, 132
LEFT, RIGHT = 141, 142

_NAMINGS = (("scipy_cblas_", "64_", True), ("cblas_", "64_", True), ("cblas_", "", False))

# argument kinds (see `function`): e enum, i BLAS integer, p pointer, r real scalar, X scalar
_SIGNATURES = {
    "gemm": "eeeiiiXpipiXpi", "gemv": "eeiiXpipiXpi", "ger": "eiiXpipipi", "symv": "eeiXpipiXpi",
    "trmv": "eeeeipipi", "trsv": "eeeeipipi", "symm": "eeeiiXpipiXpi", "syrk": "eeeiiXpiXpi",
    "syr2k": "eeeiiXpipiXpi", "trmm": "eeeeeiiXpipi", "trsm": "eeeeeiiXpipi",
    "axpy": "iXpipi", "scal": "iXpi", "copy": "ipipi", "swap": "ipipi", "rot": "ipipirr",
}
_COMPLEX = set("cz")


class _Library:
    def __init__(self):
        self.lib, self.prefix, self.suffix, self.ilp64 = _find_cblas()
        self.int = ctypes.c_int64 if self.ilp64 else ctypes.c_int32
        self._cache = {}
        self._lock = threading.Lock()

    def function(self, name: str, argtypes: list, restype=None):
        with self._lock:
            fn = self._cache.get(name)
            if fn is None:
                try:
                    fn = getattr(self.lib, self.prefix + name + self.suffix)
                except AttributeError:
                    raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED,
                                    f"the CPU BLAS has no cblas_{name}") from None
                fn.argtypes, fn.restype = argtypes, restype
                self._cache[name] = fn
        return fn


def _find_cblas():
    """The loaded BLAS library numpy uses, and how its CBLAS functions are named."""
    import numpy  # noqa: F401 -- loads numpy's BLAS into the process
    del numpy
    candidates = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            name = os.path.basename(path).lower()
            if ("blas" in name or "mkl" in name) and path not in candidates and ".so" in name:
                candidates.append(path)
    for path in candidates:
        lib = ctypes.CDLL(path)
        for prefix, suffix, ilp64 in _NAMINGS:
            if hasattr(lib, prefix + "sgemm" + suffix):
                return lib, prefix, suffix, ilp64
    raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED,
                    "no CBLAS found in the BLAS library numpy loaded (anycuda's cuBLAS needs one)")


_library = []
_library_lock = threading.Lock()


def library() -> _Library:
    with _library_lock:
        if not _library:
            _library.append(_Library())
            _set_threads(_library[0])
        return _library[0]


def _set_threads(lib: _Library) -> None:
    """OpenBLAS computes with as many threads as anycuda has workers (ANYCUDA_NUM_THREADS)."""
    from ..runtime.device import worker_count
    for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads"):
        fn = getattr(lib.lib, name, None)
        if fn is not None:
            fn.argtypes, fn.restype = [ctypes.c_int], None
            fn(worker_count())
            return


def real_type(letter: str):
    """The ctypes real of a type letter (s, d, c, z)."""
    return ctypes.c_double if letter in "dz" else ctypes.c_float


def function(name: str, kinds: str, letter: str, restype=None):
    """CBLAS's `cblas_<name>` taking arguments of `kinds` (e enum, i BLAS integer, p pointer,
    r the real of `letter` by value, X a scalar of `letter`: by value when real, by address
    when complex), returning `restype`."""
    lib = library()
    types = {"e": ctypes.c_int, "i": lib.int, "p": ctypes.c_void_p, "r": real_type(letter),
             "X": ctypes.c_void_p if letter in _COMPLEX else real_type(letter)}
    return lib.function(name, [types[k] for k in kinds], restype)


def routine(letter: str, family: str):
    """`cblas_<letter><family>` (e.g. "s", "gemm") with the family's argument kinds."""
    return function(letter + family, _SIGNATURES[family], letter)
