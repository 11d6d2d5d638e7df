"""CuPy, unchanged, through `anycuda run`: tests/programs/cupy_tour.py computes each case with
CuPy and numpy on fresh random inputs. CuPy asks NVRTC for machine code; the NVRTC stand-in
answers with PTX (anycuda.shim.standins). CuPy comes with the test extra; without it, or without
NVIDIA's NVRTC, these tests are skipped with the reason."""
import functools
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOUR = Path(__file__).parent / "programs" / "cupy_tour.py"
CASES = ["creation_and_elementwise", "reductions", "scans", "sorting", "indexing", "raw_kernels_and_modules",
         "elementwise_and_reduction_kernels", "cupyx_jit", "streams_and_events",
         "memory_pool_and_pinned_memory", "runtime_queries", "several_devices", "cublas_products",
         "cufft_transforms", "curand_random", "strided_views_specialised"]


def _skip_without_cupy():
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("needs CuPy (pip install -e '.[test]' brings cupy-cuda13x)")
    from anycuda.shim.standins import nvrtc_folders
    if not nvrtc_folders():
        pytest.skip("needs NVIDIA's NVRTC (pip install nvidia-cuda-nvrtc, or the CUDA toolkit)")


def _run_tour(cases, tmp, env=None):
    # tiered, as users run it (the suite's conftest asks for optimised code everywhere else)
    full_env = {**os.environ, "CUPY_CACHE_DIR": str(tmp), "ANYCUDA_QUIET": "1", "ANYCUDA_JIT": "tiered", **(env or {})}
    for name in ("ANYCUDA_NVRTC", "CUPY_COMPILE_WITH_PTX", "CUPY_ACCELERATORS"):
        full_env.pop(name, None)
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", sys.executable, str(TOUR), *cases],
                       capture_output=True, text=True, timeout=1200, env=full_env)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-5000:]}"
    noise = [line for line in r.stderr.splitlines() if "experimental" not in line and line.strip()]
    assert not noise, "stderr:\n" + r.stderr[-3000:]        # nothing of anycuda's at exit
    return json.loads(r.stdout.strip().splitlines()[-1])


@functools.cache
def _tour(tmp):
    return _run_tour([], Path(tmp))


@pytest.fixture(scope="module")
def tour(tmp_path_factory):
    _skip_without_cupy()
    return _tour(str(tmp_path_factory.mktemp("cupy-cache")))


@pytest.mark.parametrize("case", CASES)
def test_cupy(tour, case):
    result = tour[case]
    assert result["ok"], result["detail"]


def test_cupy_with_several_devices(tmp_path):
    _skip_without_cupy()
    got = _run_tour(["several_devices"], tmp_path, env={"ANYCUDA_DEVICES": "3"})["several_devices"]
    assert got["ok"], got["detail"]
    assert got["detail"] == {"devices": 3}


def test_cupy_kernels_specialised_to_their_views(tmp_path):
    """Optimised before the first launch, a variant is compiled at the launch that asks for it:
    the views' kernels run specialised from their fourth launches, as right as before."""
    _skip_without_cupy()
    got = _run_tour(["strided_views_specialised"], tmp_path,
                    env={"ANYCUDA_JIT": "optimised"})["strided_views_specialised"]
    assert got["ok"], got["detail"]
    assert got["detail"]["variants"] >= 5


def test_cupy_kernel_cache_is_reused(tmp_path):
    """CuPy keeps the "cubin" in its cache; the second run loads the container from there."""
    _skip_without_cupy()
    for _ in range(2):
        got = _run_tour(["raw_kernels_and_modules"], tmp_path)["raw_kernels_and_modules"]
        assert got["ok"], got["detail"]
    cached = list(tmp_path.glob("*.cubin"))
    assert cached and all(b"\x50\xed\x55\xba" in f.read_bytes() for f in cached)    # a fatbinary container
