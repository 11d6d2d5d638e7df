"""anycuda's cuBLAS, the rest of NVIDIA's header: legacy routines whose result is not a status
when the library cannot answer them (tests/programs/cublas_valued.c), syrkx and herkx, complex
syr and syr2, the Ex level-1 family on every type combination cuBLAS lists, the grouped gemms.
Called as the C library calls them (functions.table(), addresses as integers), against numpy on
fresh random inputs, outputs poisoned first; one test per argument rule."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from anycuda.libraries.cublas import functions
from anycuda.libraries.cublas.status import CublasError, Status
from library_calls import caller, device, read, scalar

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


def stored(matrix, ld, poison=np.nan):
    """A column-major copy of `matrix` with leading dimension `ld` (padding rows poisoned)."""
    rows, cols = matrix.shape
    out = np.full((cols, ld), poison, matrix.dtype)
    out[:, :rows] = matrix.T
    return out.reshape(-1)


def unstored(flat, rows, cols, ld):
    return flat.reshape(cols, ld)[:, :rows].T


def op(a, trans):
    return a if trans == N else a.T if trans == T else a.conj().T


def triangle(n, uplo):
    """A mask of the `uplo` triangle (diagonal included)."""
    full = np.ones((n, n), bool)
    return np.tril(full) if uplo == LOWER else np.triu(full)


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


# ---------------------------------------------------------------- syrkx, herkx, complex syr and syr2

# the operations each accepts: real syrkx N, T and C (meaning T), complex syrkx N and T, herkx N and C
_RANK_KX = ([(x, "syrkx", t) for x in "SD" for t in (N, T, C)] + [(x, "syrkx", t) for x in "CZ" for t in (N, T)]
            + [(x, "herkx", t) for x in "CZ" for t in (N, C)])


@pytest.mark.parametrize("letter,routine,trans", _RANK_KX)
@pytest.mark.parametrize("uplo", [LOWER, UPPER])
def test_rank_k_updates_from_two_matrices(handle, rng, letter, routine, trans, uplo):
    n, k = 13, 7
    hermitian = routine == "herkx"
    A, B = random(rng, (n, k) if trans == N else (k, n), letter), random(rng, (n, k) if trans == N else (k, n), letter)
    C0 = random(rng, (n, n), letter)
    lda, ldb, ldc = A.shape[0] + 2, B.shape[0] + 1, n + 3
    dC = device(stored(C0, ldc, poison=7))
    alpha = 0.5 - 1j if letter in "CZ" else 0.5
    beta = 2.0
    call(f"cublas{letter}{routine}", handle, uplo, trans, n, k, scalar(alpha, TYPES[letter]),
         device(stored(A, lda)), lda, device(stored(B, ldb)), ldb,
         scalar(beta, REAL[letter] if hermitian else TYPES[letter]), dC, ldc)
    got = read(dC, ldc * n, TYPES[letter])
    a, b = op(A, trans), op(B, trans)
    want = alpha * (a.astype(np.complex128) @ (b.conj().T if hermitian else b.T)) + beta * C0
    if hermitian:
        np.fill_diagonal(want, want.diagonal().real)
    mask = triangle(n, uplo)
    result = unstored(got, n, n, ldc)
    np.testing.assert_allclose(result[mask], want[mask], rtol=TOL[letter], atol=TOL[letter])
    assert np.array_equal(result[~mask], C0[~mask])                     # the other triangle untouched
    assert np.all(got.reshape(n, ldc)[:, n:] == 7)


def test_rank_kx_with_zero_beta_leaves_c_unread(handle, rng):
    n, k = 5, 3
    A, B = random(rng, (n, k), "D"), random(rng, (n, k), "D")
    dC = device(np.full(n * n, np.nan))
    call("cublasDsyrkx", handle, UPPER, N, n, k, scalar(1.0, np.float64), device(stored(A, n)), n,
         device(stored(B, n)), n, scalar(0.0, np.float64), dC, n)
    got = unstored(read(dC, n * n, np.float64), n, n, n)
    np.testing.assert_allclose(got[triangle(n, UPPER)], (A @ B.T)[triangle(n, UPPER)], rtol=1e-12)


@pytest.mark.parametrize("routine,refused", [("Csyrkx", C), ("Zherkx", T)])
def test_rank_kx_refuses_the_other_transpose(handle, routine, refused):
    d = device(np.zeros(64, np.complex128))
    assert status_of(f"cublas{routine}", handle, LOWER, refused, 2, 2, scalar(1, np.complex128), d, 2, d, 2,
                     scalar(1, np.complex128), d, 2) == Status.INVALID_VALUE


@pytest.mark.parametrize("args,why", [((LOWER, N, -1, 2, 2, 2, 2), "negative n"), ((LOWER, N, 3, -1, 3, 3, 3), "negative k"),
                                      ((LOWER, N, 3, 2, 2, 3, 3), "lda below n"), ((LOWER, T, 3, 4, 3, 4, 3), "lda below k"),
                                      ((LOWER, N, 3, 2, 3, 2, 3), "ldb below n"), ((LOWER, N, 3, 2, 3, 3, 2), "ldc below n"),
                                      ((7, N, 3, 2, 3, 3, 3), "fill mode")])
def test_syrkx_argument_rules(handle, args, why):
    uplo, trans, n, k, lda, ldb, ldc = args
    d = device(np.zeros(64))
    assert status_of("cublasDsyrkx", handle, uplo, trans, n, k, scalar(1, np.float64), d, lda, d, ldb,
                     scalar(1, np.float64), d, ldc) == Status.INVALID_VALUE, why


@pytest.mark.parametrize("letter", "CZ")
@pytest.mark.parametrize("uplo", [LOWER, UPPER])
@pytest.mark.parametrize("two", [False, True])
def test_complex_symmetric_rank_updates(handle, rng, letter, uplo, two):
    n, lda, incx, incy = 9, 11, 2, -1
    dtype = TYPES[letter]
    x, y, A0 = random(rng, n, letter), random(rng, n, letter), random(rng, (n, n), letter)
    xs = np.full(n * incx, np.nan, dtype)
    xs[::incx] = x
    dA = device(stored(A0, lda, poison=7))
    alpha = 1.5 - 0.5j
    if two:
        call(f"cublas{letter}syr2_v2", handle, uplo, n, scalar(alpha, dtype), device(xs), incx, device(y[::-1].copy()),
             incy, dA, lda)
        want = A0 + alpha * (np.outer(x, y) + np.outer(y, x))
    else:
        call(f"cublas{letter}syr_v2", handle, uplo, n, scalar(alpha, dtype), device(xs), incx, dA, lda)
        want = A0 + alpha * np.outer(x, x)                 # x x^T: no conjugate (symmetric, not Hermitian)
    got = read(dA, n * lda, dtype)
    result, mask = unstored(got, n, n, lda), triangle(n, uplo)
    np.testing.assert_allclose(result[mask], want[mask], rtol=TOL[letter], atol=TOL[letter])
    assert np.array_equal(result[~mask], A0[~mask])
    assert np.all(got.reshape(n, lda)[:, n:] == 7)


@pytest.mark.parametrize("name,args,why", [
    ("cublasCsyr_v2", (LOWER, -1, 1, 1), "negative n"), ("cublasCsyr_v2", (LOWER, 3, 0, 3), "incx 0"),
    ("cublasCsyr_v2", (LOWER, 3, 1, 2), "lda below n"), ("cublasCsyr_v2", (5, 3, 1, 3), "fill mode"),
    ("cublasZsyr2_v2", (LOWER, 3, 1, 0, 3), "incy 0"), ("cublasZsyr2_v2", (LOWER, 3, 1, 1, 2), "lda below n")])
def test_complex_syr_argument_rules(handle, name, args, why):
    d = device(np.zeros(64, np.complex128))
    uplo, n, incx, *rest = args
    tail = (d, rest[0], d, rest[1]) if len(rest) == 2 else (d, rest[0])
    assert status_of(name, handle, uplo, n, scalar(1, np.complex128), d, incx, *tail) == Status.INVALID_VALUE, why
