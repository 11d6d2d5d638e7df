"""Python CUDA stacks, unchanged, through `anycuda run`: numba-cuda (kernels compiled to PTX by
NVVM, linked through the driver's cuLink*) and cuda.core (NVRTC, or PTX that nvcc made here).
Each program is ours, in tests/programs/; it prints its inputs and results as JSON and the test
checks them against numpy. The packages come with anycuda's `stacks` extra
(pip install -e '.[stacks]'); without them the tests are skipped with the reason."""
import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
PROGRAMS = HERE / "programs"


def run(*command, env=None, check=True):
    """`anycuda run -- command` in a subprocess."""
    full_env = dict(os.environ)
    full_env.pop("ANYCUDA_NVJITLINK", None)
    full_env.update(env or {})
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", *map(str, command)],
                       capture_output=True, text=True, timeout=600, env=full_env)
    if check:
        assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout[-4000:]}\nstderr:\n{r.stderr[-6000:]}"
    return r


def run_json(*command, env=None) -> dict:
    r = run(*command, env=env)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:                          # a parent package is missing
        return False


@functools.cache
def _nvidia_library(name: str) -> str:
    """'' when cuda.pathfinder finds NVIDIA's library `name` (nvrtc, nvvm, nvJitLink), else why not."""
    if not _has_module("cuda.pathfinder"):
        return "cuda-pathfinder is not installed"
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        load_nvidia_dynamic_lib(name)
    except Exception as e:                       # not found, not loadable
        return f"lib{name} is not available: {type(e).__name__}: {str(e).splitlines()[0]}"
    return ""


def _require(*modules, libraries=(), install="pip install -e '.[stacks]'"):
    for module in modules:
        if not _has_module(module):
            pytest.skip(f"needs {module} ({install})")
    for library in libraries:
        why = _nvidia_library(library)
        if why:
            pytest.skip(f"needs NVIDIA's {library} from the pip wheels (pip install -e '.[stacks]'): {why}")


def _check_saxpy(d):
    x, y, a = np.float32(d["x"]), np.float32(d["y"]), np.float32(d["a"])
    got = np.float32(d["out"] if "out" in d else d["saxpy"])
    unfused = a * x + y
    fused = (np.float64(a) * x.astype(np.float64) + y).astype(np.float32)   # contraction to fma is allowed
    bad = ~((got == unfused) | (got == fused))
    assert not bad.any(), f"{bad.sum()} wrong, first at {np.argmax(bad)}: {got[bad][:4]} vs {unfused[bad][:4]}"


# ---------------------------------------------------------------- what `anycuda run` sets up (no packages needed)

def test_run_preloads_an_nvjitlink_without_its_version_symbol():
    """numba-cuda and cuda.core use nvJitLink only when its library has `__nvJitLinkVersion`;
    cuda.pathfinder takes an nvJitLink already loaded. Our stand-ins are preloaded, lack it."""
    probe = textwrap.dedent("""
        import ctypes, os
        for soname in ("libnvJitLink.so.13", "libnvJitLink.so.12"):
            lib = ctypes.CDLL(soname, mode=os.RTLD_NOLOAD)
            print(soname, hasattr(lib, "__nvJitLinkVersion"), hasattr(lib, "nvJitLinkCreate"))
    """)
    r = run(sys.executable, "-c", probe)
    assert r.stdout.split() == ["libnvJitLink.so.13", "False", "False", "libnvJitLink.so.12", "False", "False"]
    kept = run(sys.executable, "-c", "import os; print(os.environ.get('LD_PRELOAD', ''))",
               env={"ANYCUDA_NVJITLINK": "1", "LD_PRELOAD": ""})
    assert "libnvJitLink" not in kept.stdout


def test_driver_calls_after_python_has_finalised_do_not_crash():
    """A Python program's interpreter is gone before the C library's exit handlers run (cuda.core
    releases contexts in thread-local destructors then): those calls answer an error, not a crash."""
    program = textwrap.dedent("""
        import ctypes
        cuda = ctypes.CDLL("libcuda.so.1")
        assert cuda.cuInit(0) == 0
        libc = ctypes.CDLL("libc.so.6")
        libc.__cxa_atexit.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        # cuInit(0) runs in exit(), after Py_FinalizeEx
        assert libc.__cxa_atexit(ctypes.cast(cuda.cuInit, ctypes.c_void_p).value, None, None) == 0
        print("done")
    """)
    r = run(sys.executable, "-c", program)
    assert r.stdout.strip() == "done"


DEVICE_PROBE = textwrap.dedent("""
    import ctypes, sys
    cuda = ctypes.CDLL("libcuda.so.1")
    count = ctypes.c_int(-1)
    print(cuda.cuInit(0), cuda.cuDeviceGetCount(ctypes.byref(count)), count.value)
""")


def test_run_a_python_of_another_environment(tmp_path):
    """A Python whose environment lacks anycuda and cffi: the library finds its own."""
    import venv
    venv.create(tmp_path / "other", with_pip=False)
    r = run(tmp_path / "other" / "bin" / "python", "-c", DEVICE_PROBE)
    assert r.stdout.split() == ["0", "0", "1"], r.stderr
    assert "Failed to initialize" not in r.stderr and "anycuda" not in r.stderr, r.stderr


def _python_of_another_version():
    import glob
    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    names = [shutil.which(f"python3.{minor}") for minor in range(8, 20)]
    names += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")))
    for path in filter(None, names):
        r = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip() not in (mine, "") and int(r.stdout.split(".")[1]) >= 8:
            return path
    pytest.skip(f"needs a Python 3 of another version than {mine} on PATH or under ~/.pyenv")


def test_run_a_python_of_another_version_says_so_and_fails_every_call():
    other = _python_of_another_version()
    r = run(other, "-c", DEVICE_PROBE)
    assert r.stdout.split() == ["3", "3", "-1"], (r.stdout, r.stderr)      # CUDA_ERROR_NOT_INITIALIZED
    said = [line for line in r.stderr.splitlines() if line.startswith("anycuda:")]
    assert len(said) == 1 and "embeds Python" in said[0], r.stderr


# ---------------------------------------------------------------- numba-cuda

def test_numba_cuda_saxpy_and_shared_memory_reduction():
    _require("numba.cuda", "cuda.core", libraries=("nvvm", "nvrtc"))
    d = run_json(sys.executable, PROGRAMS / "numba_saxpy.py")
    _check_saxpy(d)
    x, block = np.float32(d["x"]), d["block"]
    blocks = -(-len(x) // block)
    padded = np.zeros(blocks * block, np.float32)
    padded[:len(x)] = x
    np.testing.assert_allclose(d["partial"], padded.reshape(blocks, block).sum(axis=1, dtype=np.float64), rtol=1e-5)
    np.testing.assert_allclose(d["total"], x.sum(dtype=np.float64), rtol=1e-5)
    assert d["counts"] == np.bincount((x * 4).astype(np.int64), minlength=4).tolist()


def test_numba_cuda_with_nvjitlink_kept_names_the_problem():
    """ANYCUDA_NVJITLINK=1 leaves NVIDIA's nvJitLink in charge: its cubin holds machine code only,
    and the failure says so (instead of a PTX parse error)."""
    _require("numba.cuda", "cuda.core", libraries=("nvvm", "nvrtc", "nvJitLink"))
    r = run(sys.executable, PROGRAMS / "numba_saxpy.py", env={"ANYCUDA_NVJITLINK": "1"}, check=False)
    assert r.returncode != 0
    assert "cubin holding machine code only" in r.stderr, r.stderr[-3000:]


# ---------------------------------------------------------------- cuda.core

def test_cuda_core_saxpy_compiled_by_nvrtc():
    _require("cuda.core", libraries=("nvrtc",))
    d = run_json(sys.executable, PROGRAMS / "cuda_core_saxpy.py")
    _check_saxpy(d)


def test_cuda_core_saxpy_compiled_by_nvrtc_to_a_cubin():
    """cuda.core asks NVRTC for machine code (-arch=sm_XX, nvrtcGetCUBIN); under `anycuda run` the
    NVRTC stand-in answers with a container of PTX, which the driver loads."""
    _require("cuda.core", libraries=("nvrtc",))
    d = run_json(sys.executable, PROGRAMS / "cuda_core_saxpy.py", "--cubin")
    _check_saxpy(d)


def test_cuda_core_saxpy_from_nvcc_ptx(tmp_path):
    _require("cuda.core")
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("needs nvcc (the CUDA toolkit) on PATH")
    source = (PROGRAMS / "cuda_core_saxpy.py").read_text()
    kernel = source.split('SOURCE = r"""', 1)[1].split('"""', 1)[0]
    (tmp_path / "saxpy.cu").write_text(kernel)
    r = subprocess.run([nvcc, "-ptx", "-o", str(tmp_path / "saxpy.ptx"), str(tmp_path / "saxpy.cu")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    d = run_json(sys.executable, PROGRAMS / "cuda_core_saxpy.py", tmp_path / "saxpy.ptx")
    _check_saxpy(d)


# ---------------------------------------------------------------- Triton

def test_triton_kernel_assembled_by_anycudas_ptxas(tmp_path):
    """Triton (not in the test extra: 285 MB) generates PTX and runs NVIDIA's ptxas on it, or
    the one TRITON_PTXAS_PATH names: under `anycuda run`, anycuda-ptxas."""
    _require("triton", "cupy", libraries=("nvrtc",), install="pip install triton cupy-cuda13x")
    d = run_json(sys.executable, PROGRAMS / "triton_add.py", env={"CUPY_CACHE_DIR": str(tmp_path / "cupy"),
                                                                   "TRITON_CACHE_DIR": str(tmp_path / "triton"),
                                                                   "TRITON_DEFAULT_FP_FUSION": "1"})
    _check_saxpy(d)

