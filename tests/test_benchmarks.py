"""Smoke test of the benchmark suite (benchmarks/suite.py): at the quick size, every kernel's
anycuda (CUDA C++) and C reference (gcc -O3 -march=native -fopenmp) implementations agree
with numpy. Only the correctness checks of benchmarks/run.py; nothing is timed."""
import shutil

import numpy as np
import pytest

from anycuda import cudac
from conformance import benchmark_module

suite = benchmark_module("suite")
idioms = benchmark_module("idioms")


@pytest.fixture(scope="module")
def c_reference():
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not on PATH: the C reference cannot be built")
    return suite.build_c_reference()


@pytest.fixture(scope="module")
def anycuda_backend():
    if not (cudac.find_nvcc() or cudac.find_nvrtc()):
        pytest.skip("no CUDA C++ compiler (nvcc or NVRTC): the benchmark kernels cannot be compiled")
    return suite.AnyCUDA()


@pytest.mark.parametrize("bench", suite.BENCHMARKS + idioms.BENCHMARKS, ids=lambda b: b.name)
@pytest.mark.parametrize("impl", ["anycuda", "c"])
def test_benchmark_matches_numpy(bench, impl, request):
    handle = request.getfixturevalue("anycuda_backend" if impl == "anycuda" else "c_reference")
    b = bench("quick")
    run, result = getattr(b, impl)(handle)
    run()
    b.check(result())
    if bench.name != "saxpy" and getattr(b, "repeats_exactly", True):   # saxpy accumulates into y
        run()
        b.check(result())


@pytest.fixture(scope="module")
def pocl():
    backend = suite.PoCL()
    if backend.reason:
        pytest.skip(f"PoCL is not there: {backend.reason}")
    return backend


@pytest.mark.parametrize("bench", [b for b in suite.BENCHMARKS + idioms.BENCHMARKS if b.implements("pocl")],
                         ids=lambda b: b.name)
def test_pocl_version_matches_numpy(bench, pocl):
    """The OpenCL versions (kernels/bench.cl, kernels/idioms.cl) that run.py times in PoCL's
    column, checked as the others are."""
    b = bench("quick")
    run, result = b.pocl(pocl)
    run()
    b.check(result())


def _run_py():
    return benchmark_module("run")


def test_c_host_launch_program_runs_through_anycuda():
    """benchmarks/kernels/launch_overhead.c builds with gcc alone and launches through
    anycuda's libcuda.so.1 (what run.py times; only that it works is checked here)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not on PATH")
    assert _run_py().c_host_launch_overhead_us() > 0


def test_timed_runs_take_turns():
    """run.py's measure: one warm-up call each, then rounds in which every implementation
    runs its `inner` calls in turn; one entry per implementation."""
    calls = []
    run = _run_py()
    run.SETTLE = 0
    times = run.measure({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 0, 3)
    assert calls == ["a", "b"] + ["a", "b"] * 3
    assert set(times) == {"a", "b"} and all(inner == 1 and t >= 0 and len(each) == 3 for t, inner, each in times.values())


def test_ratios_pair_the_rounds():
    """A ratio is the median of the rounds' ratios (0.5, 0.25, 0.5 here), not the ratio of
    the medians (0.05 / 0.2): the machine turned twice as fast between a's first timed run
    and b's, and again before the third round."""
    run = _run_py()
    times = {"a": (0.05, 1, [0.1, 0.05, 0.05]), "b": (0.2, 1, [0.2, 0.2, 0.1])}
    assert run.paired_ratio(times, "a", "b") == 0.5
    assert run.paired_ratio(times, "a", "c") is None


def test_yardsticks_of_the_idioms():
    """The memory-bound idioms are timed with the triad, the SGEMMs and DGEMMs with numpy's
    BLAS of their own matrices (not the half one: numpy's half matmul is no BLAS); a share is
    the median of the rounds' shares: 1 GB a run in 0.5, 0.25 and 0.5 s against a triad of 12,
    6 and 12 GB/s -> 1/6, 2/3, 1/6: 1/6."""
    run = _run_py()
    run.TRIAD_N = 1024                  # (the arrays only, not timed here)
    by_name = {b.name: b for b in idioms.BENCHMARKS}
    assert set(run.yardsticks(by_name["saxpy_f32_stride"]("quick"), None)) == {"triad_GBps"}
    assert set(run.yardsticks(by_name["reduce_shfl"]("quick"), None)) == {"triad_GBps"}
    assert set(run.yardsticks(by_name["sgemm_tiled_16x16"]("quick"), None)) == {"numpy_blas_GFLOPs"}
    assert set(run.yardsticks(by_name["dgemm_tiled_16x16"]("quick"), None)) == {"numpy_blas_GFLOPs"}
    assert run.yardsticks(by_name["hgemm_tiled_16x16"]("quick"), None) == {}
    assert run.yardsticks(by_name["transpose_naive_16x16"]("quick"), None) == {}
    b = by_name["copy_f32_guard"]("quick")
    b.work = 1e9
    sticks = run.yardsticks(b, None)
    n = run.TRIAD_N
    per_second = 12 * n / 12e9
    times = {"anycuda": (0, 1, [0.5, 0.25, 0.5]), "triad_GBps": (0, 1, [per_second, 2 * per_second, per_second])}
    share = run.yardstick_shares(b, sticks, times)["triad_GBps"]
    assert abs(share - 1 / 6) < 1e-9, share


def test_tensorcore_gemms_match_numpy():
    """benchmarks/tensorcores.py at 128: the WMMA and the ldmatrix + mma.sync GEMMs (our
    kernels/cuda/tensorcores.cu), the tiled SGEMM and cublasGemmEx f16 -> f32 each agree
    with numpy's f64 product of the same f16 inputs (`cases` checks every output once)."""
    if not cudac.find_nvcc():
        pytest.skip("nvcc is not on PATH: the WMMA kernel needs the toolkit's <mma.h>")
    runs, keep = benchmark_module("tensorcores").cases(128, np.random.default_rng(1))
    assert set(runs) == {"WMMA f16 GEMM", "mma.sync f16 GEMM", "tiled SGEMM f32", "cublasGemmEx f16 -> f32",
                         "numpy f32 matmul"}


def test_strategies_name_the_compilers_choice():
    """benchmarks/strategies.py: a kernel with no barrier runs as the thread loop; the tiled
    transpose has a barrier and takes a block program at 32 x 32 and 16 x 16 blocks (rows of
    whole vectors), but not at 12 x 12 (rows of 12 threads)."""
    if not (cudac.find_nvcc() or cudac.find_nvrtc()):
        pytest.skip("no CUDA C++ compiler (nvcc or NVRTC)")
    strategies = benchmark_module("strategies")
    from anycuda import compile as compile_cu
    cu = "idioms_transpose.cu"
    ptx = compile_cu((suite.KERNELS / "cuda" / cu).read_text(), name=cu)
    assert strategies.strategy(ptx, cu, "transpose_naive", (32, 8))[0] == "thread loop"
    assert strategies.strategy(ptx, cu, "transpose_tiled32", (32, 32))[0] == "block program"
    assert strategies.strategy(ptx, cu, "transpose_tiled32", (16, 16))[0] == "block program"
    how, why = strategies.strategy(ptx, cu, "transpose_tiled32", (12, 12))
    assert how == "rounds" and "not rows of whole vectors" in why
