"""cuRAND generators (one per curandGenerator_t): their options, argument rules and the
generation calls, each queued on the generator's stream like a kernel.

At the call the generator checks cuRAND's argument rules (a broken one raises CurandError and
changes nothing), takes the range of its sequence the call consumes and advances its position,
so the next call continues where this one ends whatever the stream has run yet. The queued work
computes that range and writes it through the destination address. Setting the seed, offset,
ordering or dimensions restarts the sequence at the offset, as NVIDIA's library does.

Positions. XORWOW, MRG32k3a and Philox keep every thread's place in its own subsequence and
the thread the next call starts at (generators/threads.py): a call's results are units (a word,
a Box-Muller pair, an XORWOW double; a Philox block of four results or two blocks of four
doubles) handed to the threads in turn. MT19937 and MTGP32 read one flat stream of words
(mt19937.py, layout.py) and take no offset. A quasirandom generator's position counts points:
n results in d dimensions take n/d.

The reference is NVIDIA's own libcurand, whose host generators (curandCreateGeneratorHost) run
on any CPU and, as its documentation says, work identically to its device generators; where
NVIDIA published GPU runs, both agree (tests/test_curand_golden.py, tests/test_curand_nvidia.py).
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from . import distributions as dist
from .generators import mrg32k3a, mt19937, mtgp32, philox, sobol, xorwow
from .generators.threads import ThreadCursor
from .kinds import (DEFAULT_ORDERING, MAX_DIMENSIONS, PSEUDO, QUASI, QUASI64, RESOLVED, SCRAMBLED,
                    VALID_ORDERINGS, RngType)
from ..memory import array
from ..registry import Registry
from .status import CurandError, Status, require
from ...driver import api

ENGINES = {RngType.PSEUDO_XORWOW: xorwow.Engine, RngType.PSEUDO_PHILOX4_32_10: philox.Engine,
           RngType.PSEUDO_MRG32K3A: mrg32k3a.Engine, RngType.PSEUDO_MT19937: mt19937.Engine,
           RngType.PSEUDO_MTGP32: mtgp32.Engine}

# words per double uniform: the device API's curand_uniform_double (XORWOW's "high-quality" double
# of two words, one word for MTGP32 and MT19937, MRG32k3a's raw result) and curand_uniform2_double
# for Philox, whose threads work in curand4 blocks (two words per double)
DOUBLE_WORDS = {RngType.PSEUDO_XORWOW: 2, RngType.PSEUDO_PHILOX4_32_10: 2, RngType.PSEUDO_MRG32K3A: 1,
                RngType.PSEUDO_MT19937: 1, RngType.PSEUDO_MTGP32: 1}

# MT19937's host generator makes its double uniforms from one word at the middle of its 2^-32
# step; it and MTGP32 make normals by the inverse normal CDF of such uniforms (checked against
# NVIDIA's)
CENTRED_DOUBLES = {RngType.PSEUDO_MT19937}
INVERSE_CDF_NORMALS = {RngType.PSEUDO_MT19937, RngType.PSEUDO_MTGP32}

# generators whose offset NVIDIA's library refuses (CURAND_STATUS_TYPE_ERROR, any offset)
NO_OFFSET = {RngType.PSEUDO_MT19937, RngType.PSEUDO_MTGP32}

POISSON_MAX = 400000


# How NVIDIA's host library draws Poisson(lambda), by generator (asked of it, thresholds bisected
# to 1e-8, NOTES.md): the square-histogram table on one word, the quantile of one uniform, or a
# rounded normal, changing with lambda at thresholds of each generator's own
def _poisson_by_default(lam: float) -> str:
    return "table" if lam < dist.GAUSS_FROM else "normals"


def _poisson_by_mtgp32(lam: float) -> str:
    return "table" if lam < 32 else "quantile" if lam <= 8000 else "normals"


def _poisson_by_sobol32(lam: float) -> str:
    return "table" if lam < 10 else "quantile" if lam <= 8000 else "normals"


def _poisson_by_sobol64(lam: float) -> str:
    return "quantile" if lam < dist.GAUSS_FROM else "normals"


POISSON_METHODS = {RngType.PSEUDO_MTGP32: _poisson_by_mtgp32,
                   RngType.QUASI_SOBOL32: _poisson_by_sobol32, RngType.QUASI_SCRAMBLED_SOBOL32: _poisson_by_sobol32,
                   RngType.QUASI_SOBOL64: _poisson_by_sobol64, RngType.QUASI_SCRAMBLED_SOBOL64: _poisson_by_sobol64}

# curandMethod_t values NVIDIA's curandGeneratePoissonMethod takes (CHOOSE_BEST, DEVICE_API,
# 3RD), each giving curandGeneratePoisson's results; it refuses the others with OUT_OF_RANGE
CHOOSE_BEST = 0
SAME_METHOD = {CHOOSE_BEST, 9, 11}


def _view(address: int, count: int, ctype) -> np.ndarray:
    return array(address, count, ctype)


class Generator:
    def __init__(self, rng_type: int, host: bool = False):
        try:
            rng_type = RngType(rng_type)
        except ValueError:
            raise CurandError(Status.TYPE_ERROR, f"generator type {rng_type}") from None
        rng_type = RESOLVED.get(rng_type, rng_type)
        require(rng_type in PSEUDO or rng_type in QUASI, Status.TYPE_ERROR, f"generator type {int(rng_type)}")
        self.rng_type = rng_type
        self.seed = 0
        self.offset = 0
        self.ordering = DEFAULT_ORDERING[rng_type]
        self.dimensions = 1
        self.stream = 0                       # the CUstream handle calls are queued on
        self.host = host                      # curandCreateGeneratorHost's: calls finish before they return
        self._lock = threading.Lock()         # one generator's work may run on two streams
        self._restart()

    # ---- options ------------------------------------------------------------------------
    @property
    def quasi(self) -> bool:
        return self.rng_type in QUASI

    def _restart(self) -> None:
        self.position = self.offset
        self._engine = None
        self._threads = None            # a stateful engine's ThreadCursor, made with the engine

    def set_stream(self, stream: int) -> None:
        self.stream = stream

    def set_seed(self, seed: int) -> None:
        require(not self.quasi, Status.TYPE_ERROR, "a quasirandom generator has no seed")
        self.seed = seed & 0xFFFFFFFFFFFFFFFF
        self._restart()

    def set_offset(self, offset: int) -> None:
        require(self.rng_type not in NO_OFFSET, Status.TYPE_ERROR,
                f"{self.rng_type.name} takes no offset (NVIDIA's library refuses it too)")
        self.offset = offset & 0xFFFFFFFFFFFFFFFF
        self._restart()

    def set_ordering(self, ordering: int) -> None:
        require(ordering in VALID_ORDERINGS[self.rng_type], Status.OUT_OF_RANGE,
                f"ordering {ordering} for {self.rng_type.name}")
        self.ordering = ordering
        self._restart()

    def set_dimensions(self, dimensions: int) -> None:
        require(self.quasi, Status.TYPE_ERROR, "only quasirandom generators have dimensions")
        require(1 <= dimensions <= MAX_DIMENSIONS, Status.OUT_OF_RANGE, f"{dimensions} dimensions (1 to 20000)")
        require(dimensions <= sobol.available_dimensions(), Status.OUT_OF_RANGE,
                f"{dimensions} dimensions need the Joe-Kuo direction numbers (SciPy's copy is not installed)")
        self.dimensions = dimensions
        self._restart()

    def engine(self):
        if self._engine is None:
            if self.quasi:
                self._engine = sobol.Engine(64 if self.rng_type in QUASI64 else 32, self.rng_type in SCRAMBLED,
                                            self.dimensions)
            else:
                self._engine = ENGINES[self.rng_type](self.seed, int(self.ordering))
        return self._engine

    # ---- the calls ----------------------------------------------------------------------
    def _take(self, words: int, unit: int = 1) -> int:
        """Claim `words` words of the sequence for a call whose results take `unit` words each:
        they start at the next multiple of `unit` (units never straddle a thread's groups)."""
        start = -(-self.position // unit) * unit
        self.position = start + words
        return start

    def _queue(self, address: int, count: int, ctype, compute=None, write=None) -> None:
        """Queue the results to be written at `address` in stream order: `compute()` gives them,
        or `write(view)` puts them straight into the destination."""
        if count == 0:
            return
        require(address != 0, Status.LAUNCH_FAILURE, "the output pointer is NULL")
        lock = self._lock

        def work():
            out = _view(address, count, ctype)
            with lock:
                if write is not None:
                    write(out)
                    return
                values = compute()
            out[:] = values
        if self.host:
            work()                   # into host memory, which the program reads next
        else:
            api.submit(self.stream, work)

    def _direct(self, kind: str, count: int, words_per_result: int = 1):
        """A writer for engines that fill memory themselves (Philox), or None."""
        engine = self.engine()
        if self.quasi or not hasattr(engine, "fill"):
            return None
        claim = self._claim(count, 1, words_per_result)
        return lambda out: engine.fill(kind, out, claim)

    def _quasi_block(self, count: int, convert):
        """Queue-ready computation of `count` quasirandom results (dimension-major)."""
        d = self.dimensions
        require(count % d == 0, Status.LENGTH_NOT_MULTIPLE, f"{count} results in {d} dimensions")
        engine, start = self.engine(), self._take(count // d)
        return lambda: convert(engine.block(start, count // d)).reshape(-1)

    def _claim(self, count: int, per_unit: int, words_per_unit: int):
        """Claim `count` results of an engine that keeps its threads' places (threads.py)."""
        engine = self.engine()
        if engine.unit_results:                 # Philox: every unit is four results
            words_per_unit, per_unit = engine.unit_results * words_per_unit // per_unit, engine.unit_results
        return self._cursor().take(count, per_unit, words_per_unit // engine.step_words)

    def _cursor(self) -> ThreadCursor:
        """The threads' places (threads.py), made with the engine from the offset."""
        if self._threads is None:
            engine = self.engine()
            self._threads = ThreadCursor(engine.layout.streams, self.offset, engine.step_words)
        return self._threads

    def _pseudo(self, count: int, per_unit: int, words_per_unit: int, convert=lambda w: w):
        """Queue-ready computation of `count` results made `per_unit` at a time from units of
        `words_per_unit` words of one thread: `convert(words of whole units)` gives their results."""
        engine = self.engine()
        if hasattr(engine, "claim_words"):
            claim = self._claim(count, per_unit, words_per_unit)
            return lambda: claim.results(convert(engine.claim_words(claim)))
        units = -(-count // per_unit)
        start = self._take(units * words_per_unit, words_per_unit)
        return lambda: convert(engine.words(start, units * words_per_unit, words_per_unit))[:count]

    def generate(self, address: int, count: int) -> None:
        """curandGenerate: 32-bit words."""
        require(self.rng_type not in QUASI64, Status.TYPE_ERROR, "64-bit Sobol generates with curandGenerateLongLong")
        if self.quasi:
            compute = self._quasi_block(count, lambda p: p)
        elif self.rng_type == RngType.PSEUDO_MRG32K3A:
            compute = self._pseudo(count, 1, 1, mrg32k3a.to_bits)
        else:
            write = self._direct("bits", count)
            compute = None if write else self._pseudo(count, 1, 1)
            return self._queue(address, count, ctypes.c_uint32, compute, write)
        self._queue(address, count, ctypes.c_uint32, compute)

    def generate_long_long(self, address: int, count: int) -> None:
        """curandGenerateLongLong: 64-bit Sobol words."""
        require(self.rng_type in QUASI64, Status.TYPE_ERROR, "only 64-bit Sobol generates 64-bit words")
        self._queue(address, count, ctypes.c_uint64, self._quasi_block(count, lambda p: p))

    def generate_uniform(self, address: int, count: int) -> None:
        write = self._direct("uniform", count)
        self._queue(address, count, ctypes.c_float, None if write else self._uniforms(count, double=False), write)

    def generate_uniform_double(self, address: int, count: int) -> None:
        write = self._direct("uniform_double", count, 2)
        self._queue(address, count, ctypes.c_double, None if write else self._uniforms(count, double=True), write)

    def _uniforms(self, count: int, double: bool):
        if self.quasi:
            if self.rng_type in QUASI64:
                return self._quasi_block(count, dist.uniform_double_64 if double else dist.uniform_float_64)
            return self._quasi_block(count, dist.uniform_double if double else dist.uniform_float)
        if self.rng_type == RngType.PSEUDO_MRG32K3A:
            return self._pseudo(count, 1, 1, dist.uniform_double_mrg if double else dist.uniform_float_mrg)
        if not double:
            return self._pseudo(count, 1, 1, dist.uniform_float)
        if DOUBLE_WORDS[self.rng_type] == 2:
            return self._pseudo(count, 1, 2, lambda w: dist.uniform_double_hq(w[0::2], w[1::2]))
        if self.rng_type in CENTRED_DOUBLES:
            return self._pseudo(count, 1, 1, dist.uniform_double_centred)
        return self._pseudo(count, 1, 1, dist.uniform_double)

    def _normals(self, count: int, double: bool):
        """Standard normals: Box-Muller pairs for most pseudorandom generators, the inverse CDF
        of the uniform for quasirandom ones, MT19937 and MTGP32."""
        dtype = np.float64 if double else np.float32
        if self.rng_type in INVERSE_CDF_NORMALS:
            uniforms = self._pseudo(count, 1, 1, dist.uniform_double_centred)
            return lambda: dist.inverse_normal(uniforms()).astype(dtype)
        if self.quasi:
            if not double:
                # a word above 0x80000000 is mirrored before it becomes a float, as NVIDIA's
                # library does (Sobol64: its top 32-bit word), not the float uniform after
                z = self._quasi_block(count, dist.inverse_normal_float_64 if self.rng_type in QUASI64
                                      else dist.inverse_normal_float)
                return lambda: z().astype(dtype)
            if self.rng_type in QUASI64:
                # the top 53 bits, mirrored above 2^52 before they become a double
                return self._quasi_block(count, dist.inverse_normal_double_64)
            # the inverse CDF of a 32-bit point takes the middle of its 2^-32 step, as NVIDIA's
            # library does (its double uniforms take the step's top); 1 - u is exact there
            uniforms = self._quasi_block(count, dist.uniform_double_centred)
            return lambda: dist.inverse_normal(uniforms())
        require(count % 2 == 0, Status.LENGTH_NOT_MULTIPLE, f"Box-Muller makes pairs: {count} results is odd")
        if self.rng_type == RngType.PSEUDO_MRG32K3A:
            transform = dist.box_muller_double_mrg if double else dist.box_muller_float_mrg
            return self._pseudo(count, 2, 2, lambda w: transform(w[0::2], w[1::2]))
        if double:
            return self._pseudo(count, 2, 4, lambda w: dist.box_muller_double(w[0::4], w[1::4], w[2::4], w[3::4]))
        return self._pseudo(count, 2, 2, lambda w: dist.box_muller_float(w[0::2], w[1::2]))

    def generate_normal(self, address: int, count: int, mean: float, stddev: float) -> None:
        z = self._normals(count, double=False)
        m, s = np.float32(mean), np.float32(stddev)
        self._queue(address, count, ctypes.c_float, lambda: m + s * z())

    def generate_normal_double(self, address: int, count: int, mean: float, stddev: float) -> None:
        z = self._normals(count, double=True)
        self._queue(address, count, ctypes.c_double, lambda: mean + stddev * z())

    def generate_log_normal(self, address: int, count: int, mean: float, stddev: float) -> None:
        z = self._normals(count, double=False)
        m, s = np.float32(mean), np.float32(stddev)
        self._queue(address, count, ctypes.c_float, lambda: np.exp(m + s * z()))

    def generate_log_normal_double(self, address: int, count: int, mean: float, stddev: float) -> None:
        z = self._normals(count, double=True)
        self._queue(address, count, ctypes.c_double, lambda: np.exp(mean + stddev * z()))

    def generate_poisson(self, address: int, count: int, lam: float, method: int = CHOOSE_BEST) -> None:
        """curandGeneratePoisson, and curandGeneratePoissonMethod, whose methods NVIDIA's library
        takes only as names of its one way (the others are OUT_OF_RANGE there and here)."""
        require(method in SAME_METHOD, Status.OUT_OF_RANGE, f"method {method}")
        require(0 < lam <= POISSON_MAX, Status.OUT_OF_RANGE, f"lambda {lam} (0 < lambda <= 400000)")
        way = POISSON_METHODS.get(self.rng_type, _poisson_by_default)(lam)
        if way == "table":
            compute = self._poisson_table(count, lam)
        elif way == "quantile":
            uniforms = (self._uniforms(count, double=True) if self.quasi
                        else self._pseudo(count, 1, 1, dist.uniform_double_centred))
            compute = lambda: dist.poisson(uniforms(), lam)            # noqa: E731
        elif self.quasi:
            # the middle of the step of the point's top 32 bits, 64-bit points too (NVIDIA's
            # library: point 0 of Sobol64 gives lambda - 6.3 sqrt(lambda), not - 8.3)
            top = (lambda p: (p >> np.uint64(32)).astype(np.uint32)) if self.rng_type in QUASI64 else (lambda p: p)
            uniforms = self._quasi_block(count, lambda p: dist.uniform_double_centred(top(p)))
            compute = lambda: dist.poisson_from_normals(dist.inverse_normal(uniforms()), lam)     # noqa: E731
        else:
            compute = self._poisson_from_normals(count, lam)
        self._queue(address, count, ctypes.c_uint32, compute)

    def _poisson_table(self, count: int, lam: float):
        """The square-histogram table on one word (a 32-bit point) per result."""
        if self.quasi:
            return self._quasi_block(count, lambda points: dist.poisson_from_words(points, lam))
        bits = mrg32k3a.to_bits if self.rng_type == RngType.PSEUDO_MRG32K3A else (lambda w: w)
        return self._pseudo(count, 1, 1, lambda w: dist.poisson_from_words(bits(w), lam))

    def generate_binomial(self, address: int, count: int, trials: int, p: float, method: int = CHOOSE_BEST) -> None:
        """curandGenerateBinomial(Method): the Binomial(trials, p) quantile of one uniform per
        result (a word of a pseudorandom generator at the middle of its step, a quasirandom
        point). NVIDIA's library at hand has no binomial to compare with, so its sequence is
        not claimed; the methods are taken as curandGeneratePoissonMethod takes them."""
        require(method in SAME_METHOD, Status.OUT_OF_RANGE, f"method {method}")
        require(0.0 <= p <= 1.0, Status.OUT_OF_RANGE, f"p {p} (0 <= p <= 1)")
        if self.quasi:
            uniforms = self._uniforms(count, double=True)
        else:
            bits = mrg32k3a.to_bits if self.rng_type == RngType.PSEUDO_MRG32K3A else (lambda w: w)
            uniforms = self._pseudo(count, 1, 1, lambda w: dist.uniform_double_centred(bits(w)))
        self._queue(address, count, ctypes.c_uint32, lambda: dist.binomial(uniforms(), trials, p))

    def _poisson_from_normals(self, count: int, lam: float):
        """Poisson for a large lambda from the generator's float normals: Philox's, MT19937's and
        MTGP32's as curandGenerateNormal lays them out (MT19937 rounding in float, the others in
        double); XORWOW's and MRG32k3a's one to a thread in turn,
        each thread using both normals of its Box-Muller pairs (threads.SpreadClaim)."""
        engine = self.engine()
        if self.rng_type in INVERSE_CDF_NORMALS:
            z = self._normals(count, double=False)
            single = self.rng_type == RngType.PSEUDO_MT19937
            return lambda: dist.poisson_from_normals(z(), lam, single)
        if self.rng_type not in (RngType.PSEUDO_XORWOW, RngType.PSEUDO_MRG32K3A):
            z = self._pseudo(count, 2, 2, lambda w: dist.box_muller_float(w[0::2], w[1::2]))
            return lambda: dist.poisson_from_normals(z(), lam)
        claim = self._cursor().take_spread(count, 2)
        transform = dist.box_muller_float_mrg if self.rng_type == RngType.PSEUDO_MRG32K3A else dist.box_muller_float

        def compute():
            first, second, element = claim.pair_words(engine)
            pairs = transform(first, second).reshape(-1, 2)
            return dist.poisson_from_normals(pairs[np.arange(count), element], lam)
        return compute


# ---- handles: a curandGenerator_t is a number handed to C, never an address --------------
_generators = Registry(0xC5A4D000, 16, lambda hid: CurandError(Status.NOT_INITIALIZED,
                                                                f"0x{hid:x} is not a live cuRAND generator"))


def create(rng_type: int, host: bool = False) -> int:
    return _generators.add(Generator(rng_type, host))


def get(hid: int) -> Generator:
    return _generators.get(hid)


def destroy(hid: int) -> None:
    _generators.remove(hid)