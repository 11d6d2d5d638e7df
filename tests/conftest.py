"""Shared fixtures.

* `rng`: a fresh random generator whose seed is printed when a test fails (ANYCUDA_TEST_SEED=
  that seed runs the test on it again).
* `compile_cuda` (session): `compile_cuda(source, options=(), name="kernel.cu")` gives a
  RawModule for CUDA C++ source, compiled once per session; the test is skipped with the
  reason when there is no CUDA C++ compiler (neither NVRTC nor nvcc).
* `poison` / `poison_like`: device arrays full of a recognisable garbage pattern (NaN for
  floats, 0xCD bytes otherwise), so an output a kernel forgot to write cannot pass.
* `fresh_cache`: ANYCUDA_CACHE_DIR pointed at an empty temporary folder.
* `one_worker`: launches run on one worker thread (ANYCUDA_NUM_THREADS=1).
"""
import os

import numpy as np
import pytest

# The suite tests optimised code; quick code and the switch between the two are tested in
# test_compiler_tiers.py.
os.environ.setdefault("ANYCUDA_JIT", "optimised")
# ... and leaves no finisher compiling after a tiered program's exit (tested there too)
os.environ.setdefault("ANYCUDA_FINISH_AT_EXIT", "0")

import anycuda as ac
from anycuda.runtime import device
from conformance import make_rng, poison as _poison

POISON_BYTE = 0xCD


@pytest.fixture
def rng():
    """A fresh random generator; its seed is printed when a test fails."""
    gen, seed = make_rng()
    print(f"random seed: {seed}")
    return gen


def have_cuda_compiler() -> bool:
    from anycuda import cudac
    return bool(cudac.find_nvrtc() or cudac.find_nvcc())


@pytest.fixture(scope="session")
def compile_cuda():
    """compile_cuda(source, options=(), name="kernel.cu") -> RawModule (cached per session)."""
    modules = {}

    def compile_(source: str, options=(), name: str = "kernel.cu", name_expressions=None) -> ac.RawModule:
        key = (source, tuple(options), name, tuple(name_expressions or ()))
        if key not in modules:
            try:
                modules[key] = ac.RawModule(code=source, options=tuple(options), name=name,
                                            name_expressions=name_expressions)
            except ac.CompileError as e:
                if "no CUDA C++ compiler" in str(e):
                    pytest.skip(str(e))
                raise
        return modules[key]

    return compile_


def poison_array(shape, dtype) -> ac.ndarray:
    """A device array of `shape` and `dtype` full of garbage (NaN for floats)."""
    return _poison(shape, dtype)


def ran_as_block_program(kernel, block) -> bool:
    """Whether a RawModule function has run as a block program for blocks of `block` threads
    (a count, or the (x, y, z) shape)."""
    shape = (block, 1, 1) if isinstance(block, int) else tuple(block)
    return kernel.kernel._programs.get(shape) is not None


def is_poison(host: np.ndarray) -> np.ndarray:
    """Elementwise: does this host copy still hold the poison pattern?"""
    host = np.asarray(host)
    if host.dtype.kind in "fc":
        return np.isnan(host)
    pattern = np.frombuffer(bytes([POISON_BYTE]) * host.dtype.itemsize, dtype=host.dtype)[0]
    return host == pattern


@pytest.fixture
def poison():
    """poison(shape, dtype) -> a device array full of garbage."""
    return poison_array


@pytest.fixture
def poison_like():
    """poison_like(host_array) -> a poisoned device array of the same shape and dtype."""
    return lambda host: poison_array(np.shape(host), np.asarray(host).dtype)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty on-disk cache for this test (ANYCUDA_CACHE_DIR)."""
    monkeypatch.setenv("ANYCUDA_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def one_worker(monkeypatch):
    """Launches run on one worker (the count is read once per process: asked again here)."""
    monkeypatch.setenv("ANYCUDA_NUM_THREADS", "1")
    device.worker_count.cache_clear()
    yield
    device.worker_count.cache_clear()


@pytest.fixture
def context():
    """Device 0's primary context current for a driver-API test (released after it): its handle."""
    from anycuda.driver import api
    api.cuInit(0)
    ctx = api.cuDevicePrimaryCtxRetain(0)
    api.cuCtxSetCurrent(ctx)
    yield ctx
    api.cuDevicePrimaryCtxRelease(0)
