"""cuRAND generators: type, seed, offset, ordering, quasirandom dimensions and stream, and the
generation functions with cuRAND's argument rules. A generation call takes its share of the
sequence when it is made (so the next call continues it, as cuRAND's does) and writes its
results when the stream reaches it.

Sequences. Each pseudorandom type produces the sequence cuRAND's device API gives one state
initialised with (seed, subsequence 0, offset) (bits.py); quasirandom ones produce Sobol points
from the Joe-Kuo direction numbers (scipy's table), laid out dimension after dimension as
CURAND_ORDERING_QUASI_DEFAULT documents. How NVIDIA's host API interleaves its many
subsequences in memory (its orderings) is not documented to the bit: until golden files from a
GPU are recorded, the host-API sequences equal NVIDIA's device API's, not its host API's, and
every ordering gives the same sequence. MTGP32 and the scrambled Sobol types (NVIDIA's own
parameter and scramble tables) are refused with CURAND_STATUS_TYPE_ERROR, naming themselves.
"""
from __future__ import annotations

import numpy as np

from ...driver import api
from ..cublas.calls import array
from . import bits, distributions as dist
from ..registry import Registry
from .status import CurandError, Status, require

TEST, XORWOW, MRG32K3A, MTGP32, MT19937, PHILOX = 0, 101, 121, 141, 142, 161
PSEUDO_DEFAULT, QUASI_DEFAULT = 100, 200
SOBOL32, SCRAMBLED_SOBOL32, SOBOL64, SCRAMBLED_SOBOL64 = 201, 202, 203, 204
PSEUDO = {PSEUDO_DEFAULT, XORWOW, MRG32K3A, MTGP32, MT19937, PHILOX}
QUASI = {QUASI_DEFAULT, SOBOL32, SCRAMBLED_SOBOL32, SOBOL64, SCRAMBLED_SOBOL64}
NOT_IMPLEMENTED = {MTGP32: "MTGP32", SCRAMBLED_SOBOL32: "scrambled Sobol32", SCRAMBLED_SOBOL64: "scrambled Sobol64"}
DEFAULT_SEED = 0                   # cuRAND's default seed
PSEUDO_ORDERINGS = {100, 101, 102, 103, 104}
QUASI_ORDERINGS = {201}
_SOURCES = {XORWOW: bits.Xorwow, PSEUDO_DEFAULT: bits.Xorwow, PHILOX: bits.Philox, MRG32K3A: bits.Mrg32k3a,
            MT19937: bits.Mt19937}


class Sobol:
    """Sobol points of `dims` dimensions (32 or 64 bits), from point `offset` on."""

    def __init__(self, dims: int, width: int, offset: int):
        from scipy.stats import qmc
        self.directions = qmc.Sobol(d=dims, scramble=False, bits=width)._sv     # (dims, width)
        self.dtype = np.uint32 if width == 32 else np.uint64
        self.index = offset

    def points(self, count: int) -> np.ndarray:
        """(dims, count) coordinates of the next `count` points (Gray-code order)."""
        n = np.arange(self.index, self.index + count, dtype=np.uint64)
        gray = n ^ (n >> np.uint64(1))
        out = np.zeros((self.directions.shape[0], count), self.dtype)
        for k in range(self.directions.shape[1]):
            chosen = ((gray >> np.uint64(k)) & np.uint64(1)).astype(bool)
            out[:, chosen] ^= self.directions[:, k:k + 1].astype(self.dtype)
        self.index += count
        return out


class Generator:
    def __init__(self, kind: int):
        self.kind = kind
        self.seed = DEFAULT_SEED
        self.offset = 0
        self.ordering = 101 if kind in PSEUDO else 201
        self.dims = 1
        self.stream = 0
        self.source = None             # made at the first generation after an option changed

    @property
    def quasi(self) -> bool:
        return self.kind in QUASI

    def _source(self):
        if self.source is None:
            if self.quasi:
                width = 64 if self.kind == SOBOL64 else 32
                self.source = Sobol(self.dims, width, self.offset)
            else:
                self.source = _SOURCES[self.kind](self.seed, self.offset)
        return self.source

    def reset(self) -> None:
        self.source = None

    # --- taking the generator's outputs (at the call)

    def words(self, n: int) -> np.ndarray:
        """The next n 32-bit outputs (quasirandom: n / dims points, dimension after dimension)."""
        src = self._source()
        if self.quasi:
            return src.points(n // self.dims).reshape(-1)
        return src.take(n)


_generators = Registry(0x5EED0000, 16, lambda gid: CurandError(Status.NOT_INITIALIZED,
                                                                f"0x{gid:x} is not a cuRAND generator"))


def create(out: int, kind: int) -> None:
    require(out != 0, Status.OUT_OF_RANGE, "the generator pointer is NULL")
    if kind in NOT_IMPLEMENTED:
        raise CurandError(Status.TYPE_ERROR, f"the {NOT_IMPLEMENTED[kind]} generator is not implemented by anycuda")
    require(kind in PSEUDO | QUASI, Status.TYPE_ERROR, f"generator type {kind}")
    array(out, 1, np.uint64)[0] = _generators.add(Generator(kind))


def get(gid: int) -> Generator:
    return _generators.get(gid)


def destroy(gid: int) -> None:
    _generators.remove(gid)


def set_seed(gid: int, seed: int) -> None:
    g = get(gid)
    require(not g.quasi, Status.TYPE_ERROR, "a quasirandom generator has no seed")
    g.seed = seed
    g.reset()


def set_offset(gid: int, offset: int) -> None:
    g = get(gid)
    g.offset = offset
    g.reset()


def set_ordering(gid: int, ordering: int) -> None:
    g = get(gid)
    require(ordering in (QUASI_ORDERINGS if g.quasi else PSEUDO_ORDERINGS), Status.OUT_OF_RANGE,
            f"ordering {ordering} for this generator type")
    g.ordering = ordering
    g.reset()


def set_dimensions(gid: int, dims: int) -> None:
    g = get(gid)
    require(g.quasi, Status.TYPE_ERROR, "only quasirandom generators have dimensions")
    require(1 <= dims <= 20000, Status.OUT_OF_RANGE, f"{dims} dimensions (1 to 20,000)")
    g.dims = dims
    g.reset()


def set_stream(gid: int, stream: int) -> None:
    get(gid).stream = stream


# --- generation: check, take the outputs now, write them at the stream's turn

def _output(g: Generator, address: int, n: int, pairs: bool = False) -> None:
    require(address != 0, Status.OUT_OF_RANGE, "the output pointer is NULL")
    if g.quasi:
        require(n % g.dims == 0, Status.LENGTH_NOT_MULTIPLE, f"{n} results in {g.dims} dimensions")
    elif pairs:
        require(n % 2 == 0, Status.LENGTH_NOT_MULTIPLE, f"{n} normally distributed results (pairs)")


def _write(g: Generator, address: int, values: np.ndarray) -> None:
    def work():
        if values.size:
            array(address, values.size, values.dtype)[...] = values
    api.submit(g.stream, work)


def generate(gid: int, address: int, n: int) -> None:
    g = get(gid)
    require(g.kind not in (SOBOL64,), Status.TYPE_ERROR, "64-bit generators answer curandGenerateLongLong")
    _output(g, address, n)
    _write(g, address, g.words(n).astype(np.uint32))


def generate_long_long(gid: int, address: int, n: int) -> None:
    g = get(gid)
    require(g.kind == SOBOL64, Status.TYPE_ERROR, "only 64-bit generators answer curandGenerateLongLong")
    _output(g, address, n)
    _write(g, address, g.words(n).astype(np.uint64))


def _uniform_doubles(g: Generator, n: int) -> np.ndarray:
    if g.kind == MRG32K3A:
        return g._source().take_doubles(n) * bits.MRG_NORM
    if g.kind == SOBOL64:
        return g.words(n).astype(np.float64) * 2.0 ** -64 + 2.0 ** -65
    if g.quasi or g.kind == PHILOX:
        return dist.uniform_double_one(g.words(n))
    w = g.words(2 * n).reshape(n, 2)
    return dist.uniform_double_two(w[:, 0], w[:, 1])


def _uniform_floats(g: Generator, n: int) -> np.ndarray:
    if g.kind == MRG32K3A:
        return (g._source().take_doubles(n) * bits.MRG_NORM).astype(np.float32)
    if g.kind == SOBOL64:
        return (g.words(n).astype(np.float64) * 2.0 ** -64 + 2.0 ** -65).astype(np.float32)
    return dist.uniform_float(g.words(n))


def generate_uniform(gid: int, address: int, n: int) -> None:
    g = get(gid)
    _output(g, address, n)
    _write(g, address, _uniform_floats(g, n))


def generate_uniform_double(gid: int, address: int, n: int) -> None:
    g = get(gid)
    _output(g, address, n)
    _write(g, address, _uniform_doubles(g, n))


def _normals(g: Generator, n: int, double: bool) -> np.ndarray:
    if g.quasi:
        u = _uniform_doubles(g, n) if double else _uniform_floats(g, n)
        return dist.inverse_normal(u)
    if g.kind == MRG32K3A:
        u = g._source().take_doubles(n).reshape(-1, 2) * bits.MRG_NORM
        s = np.sqrt(-2.0 * np.log(u[:, 0]))
        out = np.stack([s * np.sin(2 * np.pi * u[:, 1]), s * np.cos(2 * np.pi * u[:, 1])], axis=1).reshape(-1)[:n]
        return out if double else out.astype(np.float32)
    if double:
        w = g.words(2 * n).reshape(-1, 4)
        return dist.box_muller_double(w[:, 0], w[:, 1], w[:, 2], w[:, 3])
    w = g.words(n).reshape(-1, 2)
    return dist.box_muller_float(w[:, 0], w[:, 1])


def generate_normal(gid: int, address: int, n: int, mean: float, stddev: float, double: bool = False) -> None:
    g = get(gid)
    _output(g, address, n, pairs=True)
    values = _normals(g, n, double) * stddev + mean
    _write(g, address, values.astype(np.float64 if double else np.float32))


def generate_log_normal(gid: int, address: int, n: int, mean: float, stddev: float, double: bool = False) -> None:
    g = get(gid)
    _output(g, address, n, pairs=True)
    values = np.exp(_normals(g, n, double).astype(np.float64) * stddev + mean)
    _write(g, address, values.astype(np.float64 if double else np.float32))


def generate_poisson(gid: int, address: int, n: int, lam: float) -> None:
    g = get(gid)
    _output(g, address, n)
    require(lam > 0, Status.OUT_OF_RANGE, f"lambda {lam}")
    seed = [int(w) for w in g.words(2 * max(g.dims, 1))[:2]]
    values = np.random.Generator(np.random.Philox(seed)).poisson(lam, n).astype(np.uint32)
    _write(g, address, values)
