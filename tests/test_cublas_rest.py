"""anycuda's cuBLAS, the rest of NVIDIA's header: legacy routines whose result is not a status
when the library cannot answer them (tests/programs/cublas_valued.c), syrkx and herkx, complex
syr and syr2, the Ex level-1 family on every type combination cuBLAS lists, the grouped gemms.
Called as the C library calls them (functions.table(), addresses as integers), against numpy on
fresh random inputs, outputs poisoned first; one test per argument rule."""
import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from anycuda.libraries.cublas import functions
from anycuda.libraries.cublas.status import CublasError, Status
from library_calls import caller

HERE = Path(__file__).parent
TABLE = functions.table()
call = caller(TABLE)
N, T, C = 0, 1, 2
LOWER, UPPER = 0, 1
TYPES = {"S": np.float32, "D": np.float64, "C": np.complex64, "Z": np.complex128}
REAL = {"S": np.float32, "D": np.float64, "C": np.float32, "Z": np.float64}
TOL = {"S": 2e-4, "D": 1e-11, "C": 2e-4, "Z": 1e-11}
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture
def handle():
    out = np.zeros(1, np.uint64)
    call("cublasCreate_v2", out.ctypes.data)
    yield int(out[0])
    call("cublasDestroy_v2", int(out[0]))


def status_of(name, *args):
    with pytest.raises(CublasError) as e:
        call(name, *args)
    return e.value.status


def random(rng, shape, letter):
    x = rng.standard_normal(shape)
    if letter in "CZ":
        x = x + 1j * rng.standard_normal(shape)
    return np.asarray(x, TYPES[letter])


def fortran(a):
    """A column-major copy (its address is what cuBLAS takes)."""
    return np.asfortranarray(a)


def poisoned(shape, letter):
    return np.asfortranarray(np.full(shape, np.nan, TYPES[letter]))


def ptr(a):
    return a.ctypes.data


def host_scalar(value, letter):
    return np.array([value], TYPES[letter])


# ---------------------------------------------------------------- results that are not statuses

def _shim_folder():
    out = subprocess.run([sys.executable, "-m", "anycuda.cli", "shim-path"], capture_output=True, text=True,
                         check=True).stdout.strip()
    return Path(out)


VALUED_LINE = "dot=0 error=1 again=0 norm=0 index=0 cdot=0,0 error=1"


@needs_gcc
def test_valued_routines_answer_zero_and_keep_the_status_when_python_cannot_start(tmp_path):
    """A copy of the library away from the package, told to find an anycuda that cannot be
    imported: its Python does not start, so every call is answered in C."""
    shutil.copy(_shim_folder() / "libcublas.so.13", tmp_path)
    fake = tmp_path / "fake" / "anycuda"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('an anycuda that cannot start')\n")
    subprocess.run(["gcc", str(HERE / "programs" / "cublas_valued.c"), "-o", str(tmp_path / "prog"),
                    f"-L{tmp_path}", "-l:libcublas.so.13", f"-Wl,-rpath,{tmp_path}"], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_PRELOAD")}
    env["ANYCUDA_PYTHONPATH"] = str(tmp_path / "fake")
    r = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "main " + VALUED_LINE, r.stdout + r.stderr
    assert "could not start its Python" in r.stderr


@needs_gcc
def test_valued_routines_answer_zero_once_the_interpreter_has_gone(tmp_path):
    """A Python program's library: answered by Python while it runs, in C from a destructor
    that runs after the interpreter was finalised."""
    lib = _shim_folder()
    helper = tmp_path / "helper.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-DAT_EXIT", str(HERE / "programs" / "cublas_valued.c"), "-o",
                    str(helper), f"-L{lib}", "-l:libcublas.so.13", f"-Wl,-rpath,{lib}"], check=True)
    code = ("import ctypes, sys\n"
            f"lib = ctypes.CDLL({str(lib / 'libcublas.so.13')!r}, ctypes.RTLD_GLOBAL)\n"
            "assert lib.cublasInit() == 0\n"
            f"ctypes.CDLL({str(helper)!r}).valued_calls(b'alive')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    alive, at_exit = r.stdout.strip().splitlines()
    assert alive == "alive dot=21 error=0 again=0 norm=5 index=2 cdot=-10,28 error=0"
    assert at_exit == "exit " + VALUED_LINE
