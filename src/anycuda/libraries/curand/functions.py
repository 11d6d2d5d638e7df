"""Every cuRAND function anycuda implements: C name -> (kinds, the Python that answers it,
taking the C arguments in order: addresses and handles as integers, floats as floats). Kinds
are in signatures.py. Out-parameters are written through their address.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from . import discrete, generator as generators, signatures
from .generators import sobol
from .kinds import MAX_DIMENSIONS, DirectionVectorSet
from ..memory import write_scalar
from .status import CurandError, Status, require

VERSION = 10405            # CURAND_VERSION of the 10.4.5 headers: major * 1000 + minor * 100 + patch


def _write(address: int, value, ctype) -> None:
    require(address != 0, Status.NOT_INITIALIZED, "an output pointer is NULL")
    write_scalar(address, value, ctype)


def _create(out: int, rng_type: int, host: bool = False) -> None:
    require(out != 0, Status.NOT_INITIALIZED, "the generator pointer is NULL")
    _write(out, generators.create(rng_type, host), ctypes.c_uint64)


def _create_host(out: int, rng_type: int) -> None:
    _create(out, rng_type, host=True)


def _property(kind: int, out: int) -> None:
    require(kind in (0, 1, 2), Status.OUT_OF_RANGE, f"library property {kind}")
    _write(out, (VERSION // 1000, VERSION // 100 % 10, VERSION % 100)[kind], ctypes.c_int)


def _method(name):
    """The C function for Generator.<name>: the handle first, then the method's arguments."""
    def call(hid, *args):
        return getattr(generators.get(hid), name)(*args)
    call.__name__ = name
    return call


# ---- Poisson distributions (curandCreatePoissonDistribution): objects kernels read (discrete.py)
def _create_poisson(lam: float, out: int) -> None:
    require(out != 0, Status.NOT_INITIALIZED, "the distribution pointer is NULL")
    require(0 < lam <= generators.POISSON_MAX, Status.OUT_OF_RANGE, f"lambda {lam}")
    _write(out, discrete.create(lam), ctypes.c_uint64)


def _destroy_distribution(address: int) -> None:
    require(discrete.destroy(address), Status.NOT_INITIALIZED, f"0x{address:x} is no distribution")


# ---- direction vectors and scramble constants: host tables whose address is handed out ------
@functools.lru_cache(maxsize=6)
def _table(bits: int, kind: str) -> np.ndarray:
    """kind: "vectors", "scrambled" (the scrambled sets 102/104) or "constants". The constants
    need no Joe-Kuo data, so all 20,000 are there with or without SciPy."""
    dims = MAX_DIMENSIONS if kind == "constants" else min(sobol.available_dimensions(), MAX_DIMENSIONS)
    dtype = np.uint32 if bits == 32 else np.uint64
    table = {"vectors": sobol.direction_vectors, "scrambled": sobol.scrambled_direction_vectors,
             "constants": sobol.scramble_constants}[kind](dims, bits)
    return np.ascontiguousarray(table.astype(dtype))


# set -> (bits, which table)
_SETS = {DirectionVectorSet.VECTORS_32_JOEKUO6: (32, "vectors"),
         DirectionVectorSet.SCRAMBLED_VECTORS_32_JOEKUO6: (32, "scrambled"),
         DirectionVectorSet.VECTORS_64_JOEKUO6: (64, "vectors"),
         DirectionVectorSet.SCRAMBLED_VECTORS_64_JOEKUO6: (64, "scrambled")}


def _direction_vectors(bits: int):
    def call(out: int, which: int) -> None:
        table_bits, kind = _SETS.get(which, (None, None))
        require(table_bits == bits, Status.OUT_OF_RANGE, f"direction vector set {which} for {bits} bits")
        _write(out, _table(bits, kind).ctypes.data, ctypes.c_uint64)
    return call


def _scramble_constants(bits: int):
    return lambda out: _write(out, _table(bits, "constants").ctypes.data, ctypes.c_uint64)


_FUNCTIONS = {
    "curandCreateGenerator": _create,
    "curandCreateGeneratorHost": _create_host,
    "curandDestroyGenerator": generators.destroy,
    "curandGetVersion": lambda out: _write(out, VERSION, ctypes.c_int),
    "curandGetProperty": _property,
    "curandSetStream": _method("set_stream"),
    "curandSetPseudoRandomGeneratorSeed": _method("set_seed"),
    "curandSetGeneratorOffset": _method("set_offset"),
    "curandSetGeneratorOrdering": _method("set_ordering"),
    "curandSetQuasiRandomGeneratorDimensions": _method("set_dimensions"),
    "curandGenerate": _method("generate"),
    "curandGenerateLongLong": _method("generate_long_long"),
    "curandGenerateUniform": _method("generate_uniform"),
    "curandGenerateUniformDouble": _method("generate_uniform_double"),
    "curandGenerateNormal": _method("generate_normal"),
    "curandGenerateNormalDouble": _method("generate_normal_double"),
    "curandGenerateLogNormal": _method("generate_log_normal"),
    "curandGenerateLogNormalDouble": _method("generate_log_normal_double"),
    "curandGeneratePoisson": _method("generate_poisson"),
    "curandGeneratePoissonMethod": _method("generate_poisson"),
    "curandGenerateBinomial": _method("generate_binomial"),
    "curandGenerateBinomialMethod": _method("generate_binomial"),
    "curandCreatePoissonDistribution": _create_poisson,
    "curandDestroyDistribution": _destroy_distribution,
    "curandGenerateSeeds": lambda hid: generators.get(hid) and None,
    "curandGetDirectionVectors32": _direction_vectors(32),
    "curandGetDirectionVectors64": _direction_vectors(64),
    "curandGetScrambleConstants32": _scramble_constants(32),
    "curandGetScrambleConstants64": _scramble_constants(64),
}


VALUED = {}              # every cuRAND function answers a status


def table() -> dict:
    """C name -> (kinds, function) of every function the drop-in libcurand answers."""
    assert _FUNCTIONS.keys() == signatures.FUNCTIONS.keys()
    return {name: (signatures.FUNCTIONS[name], fn) for name, fn in _FUNCTIONS.items()}


__all__ = ["table", "VERSION", "CurandError"]
