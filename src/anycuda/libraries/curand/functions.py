"""Every cuRAND function anycuda implements: C name -> (kinds, the Python that answers it,
taking the C arguments in order, addresses as integers); kinds are in signatures.py."""
from __future__ import annotations

import numpy as np

from ..cublas.calls import write_scalar
from . import generator as gen, signatures
from .status import Status, require

VERSION = 10405           # cuRAND 10.4.5, as the headers anycuda is tested against define CURAND_VERSION


def _property(kind, out):
    require(kind in (0, 1, 2) and out != 0, Status.OUT_OF_RANGE, f"library property {kind}")
    write_scalar(out, (10, 4, 5)[kind], np.int32)


_TABLE = {
    "curandCreateGenerator": gen.create,
    "curandCreateGeneratorHost": gen.create,
    "curandDestroyGenerator": gen.destroy,
    "curandSetPseudoRandomGeneratorSeed": gen.set_seed,
    "curandSetGeneratorOffset": gen.set_offset,
    "curandSetGeneratorOrdering": gen.set_ordering,
    "curandSetQuasiRandomGeneratorDimensions": gen.set_dimensions,
    "curandSetStream": gen.set_stream,
    "curandGenerateSeeds": lambda g: gen.get(g) and None,
    "curandGenerate": gen.generate,
    "curandGenerateLongLong": gen.generate_long_long,
    "curandGenerateUniform": gen.generate_uniform,
    "curandGenerateUniformDouble": gen.generate_uniform_double,
    "curandGenerateNormal": gen.generate_normal,
    "curandGenerateNormalDouble": lambda g, p, n, mean, sd: gen.generate_normal(g, p, n, mean, sd, double=True),
    "curandGenerateLogNormal": gen.generate_log_normal,
    "curandGenerateLogNormalDouble": lambda g, p, n, mean, sd: gen.generate_log_normal(g, p, n, mean, sd, double=True),
    "curandGeneratePoisson": gen.generate_poisson,
    "curandGetVersion": lambda out: write_scalar(out, VERSION, np.int32),
    "curandGetProperty": _property,
}

VALUED = {}


def table() -> dict:
    return {name: (signatures.FUNCTIONS[name], fn) for name, fn in _TABLE.items()}
