"""anycuda's cuBLAS, the rest of NVIDIA's header: legacy routines whose result is not a status
when the library cannot answer them (tests/programs/cublas_valued.c), syrkx and herkx, CsyrkEx
and CherkEx, complex syr and syr2, the Ex level-1 family on every type combination cuBLAS lists, the grouped gemms.
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
from anycuda.libraries.cublas.status import Status
from library_calls import caller, device, read, scalar
from test_cublas import REAL, TYPES, op, random, status_of, stored, unstored

HERE = Path(__file__).parent
TABLE = functions.table()
call = caller(TABLE)
N, T, C = 0, 1, 2
LOWER, UPPER = 0, 1
TOL = {"S": 2e-4, "D": 1e-11, "C": 2e-4, "Z": 1e-11}
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture
def handle():
    out = np.zeros(1, np.uint64)
    call("cublasCreate_v2", out.ctypes.data)
    yield int(out[0])
    call("cublasDestroy_v2", int(out[0]))


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


C_32F, C_8I, R_32F = 4, 7, 0
INT8_PAIR = np.dtype([("re", np.int8), ("im", np.int8)])


@pytest.mark.parametrize("routine,trans", [(r, t) for r in ("CsyrkEx", "Csyrk3mEx") for t in (N, T)]
                         + [(r, t) for r in ("CherkEx", "Cherk3mEx") for t in (N, C)])
@pytest.mark.parametrize("a_type", [C_32F, C_8I])
@pytest.mark.parametrize("uplo", [LOWER, UPPER])
@pytest.mark.parametrize("wide", [False, True])
def test_rank_k_ex_updates(handle, rng, routine, trans, a_type, uplo, wide):
    """CsyrkEx/CherkEx (and the 3m forms): A complex float or complex 8-bit integers, C complex
    float, against numpy in double; only C's `uplo` triangle written."""
    n, k = 11, 6
    hermitian = "herk" in routine
    shape = (n, k) if trans == N else (k, n)
    if a_type == C_8I:
        re, im = rng.integers(-128, 128, shape), rng.integers(-128, 128, shape)
        A = re + 1j * im
        packed = np.empty(shape, INT8_PAIR)
        packed["re"], packed["im"] = re, im
        lda = shape[0] + 3
        held = np.zeros((shape[1], lda), INT8_PAIR)
        held["re"], held["im"] = 99, 99                       # padding the routine must skip
        held[:, :shape[0]] = packed.T
        dA = device(held.reshape(-1))
    else:
        A = random(rng, shape, "C")
        lda = shape[0] + 3
        dA = device(stored(A, lda))
    C0 = random(rng, (n, n), "C")
    ldc = n + 2
    dC = device(stored(C0, ldc, poison=7))
    alpha, beta = (0.75, -1.5) if hermitian else (0.5 - 1j, 2.0 + 0.5j)
    scale = np.float32 if hermitian else np.complex64
    call(f"cublas{routine}" + ("_64" if wide else ""), handle, uplo, trans, n, k, scalar(alpha, scale), dA, a_type, lda,
         scalar(beta, scale), dC, C_32F, ldc)
    got = read(dC, ldc * n, np.complex64)
    a = op(A.astype(np.complex128), trans)
    want = alpha * (a @ (a.conj().T if hermitian else a.T)) + beta * C0
    if hermitian:
        np.fill_diagonal(want, want.diagonal().real)
    mask, result = triangle(n, uplo), unstored(got, n, n, ldc)
    scale_of = np.abs(want).max()
    np.testing.assert_allclose(result[mask], want[mask], rtol=1e-5, atol=1e-5 * scale_of)
    assert np.array_equal(result[~mask], C0[~mask])
    assert np.all(got.reshape(n, ldc)[:, n:] == 7)


@pytest.mark.parametrize("routine,a_type,c_type,trans,status", [
    ("CsyrkEx", R_32F, C_32F, N, Status.NOT_SUPPORTED), ("CherkEx", C_8I, R_32F, N, Status.NOT_SUPPORTED),
    ("CsyrkEx", C_32F, C_32F, C, Status.INVALID_VALUE), ("CherkEx", C_32F, C_32F, T, Status.INVALID_VALUE)])
def test_rank_k_ex_refusals(handle, routine, a_type, c_type, trans, status):
    d = device(np.zeros(64, np.complex64))
    one = scalar(1, np.float32 if "herk" in routine else np.complex64)
    assert status_of(f"cublas{routine}", handle, LOWER, trans, 2, 2, one, d, a_type, 2, one, d, c_type, 2) == status


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


# ---------------------------------------------------------------- the level-1 Ex family

R32, R64, R16, C32, C64, B16 = 0, 1, 2, 4, 5, 14
_STORED = {R32: np.float32, R64: np.float64, R16: np.float16, C32: np.complex64, C64: np.complex128, B16: np.uint16}
# how close a result stored in a type comes to the exact one
_CLOSE = {R32: 1e-5, R64: 1e-12, R16: 3e-3, C32: 1e-5, C64: 1e-12, B16: 2e-2}


def ex_values(rng, shape, code):
    """(stored elements of type `code`, the exact values they hold as float64/complex128)."""
    x = rng.standard_normal(shape)
    if code in (C32, C64):
        x = x + 1j * rng.standard_normal(shape)
    if code == B16:
        bits = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        return bits, exact(bits, code)
    stored = np.asarray(x, _STORED[code])
    return stored, exact(stored, code)


def exact(stored, code):
    if code == B16:
        return (np.asarray(stored).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.asarray(stored).astype(np.complex128 if code in (C32, C64) else np.float64)


def close(got, want, *codes):
    tol = max(_CLOSE[c] for c in codes) * 4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.max(np.abs(want), initial=0)))


def strided(values, inc, poison=np.nan):
    """`values` stored `inc` apart (the gaps poisoned, a negative inc storing them backwards)."""
    step = abs(inc)
    out = np.full(len(values) * step, poison if values.dtype.kind in "fc" else 0x7FC0, values.dtype)
    out[::step] = values if inc > 0 else values[::-1]
    return out


_EX = functions.level1_ex.COMBINATIONS


@pytest.mark.parametrize("alpha_type,x_type,execution", sorted(_EX["axpy"]))
def test_axpy_ex(handle, rng, alpha_type, x_type, execution):
    n, incx, incy = 33, 2, -1
    x, xe = ex_values(rng, n, x_type)
    y, ye = ex_values(rng, n, x_type)
    alpha, ae = ex_values(rng, 1, alpha_type)
    dy = device(strided(y, incy))
    call("cublasAxpyEx", handle, n, device(alpha), alpha_type, device(strided(x, incx)), x_type, incx, dy, x_type,
         incy, execution)
    close(exact(read(dy, n, _STORED[x_type])[::-1], x_type), ye + ae[0] * xe, x_type)


@pytest.mark.parametrize("alpha_type,x_type,execution", sorted(_EX["scal"]))
def test_scal_ex(handle, rng, alpha_type, x_type, execution):
    n, incx = 21, 3
    x, xe = ex_values(rng, n, x_type)
    alpha, ae = ex_values(rng, 1, alpha_type)
    dx = device(strided(x, incx))
    call("cublasScalEx", handle, n, device(alpha), alpha_type, dx, x_type, incx, execution)
    got = read(dx, n * incx, _STORED[x_type])
    close(exact(got[::incx], x_type), ae[0] * xe, x_type)
    assert np.all(np.isnan(got.reshape(n, incx)[:, 1:])) or x_type == B16          # the gaps untouched


@pytest.mark.parametrize("conjugate", [False, True])
@pytest.mark.parametrize("x_type,result_type,execution", sorted(_EX["dot"]))
def test_dot_ex(handle, rng, x_type, result_type, execution, conjugate):
    n = 40
    x, xe = ex_values(rng, n, x_type)
    y, ye = ex_values(rng, n, x_type)
    result = np.full(1, np.nan if result_type != B16 else 0, _STORED[result_type])
    call("cublasDotcEx" if conjugate else "cublasDotEx", handle, n, device(x), x_type, 1, device(y), x_type, 1,
         result.ctypes.data, result_type, execution)
    close(exact(result, result_type), [np.sum((xe.conj() if conjugate else xe) * ye)], result_type, x_type)


@pytest.mark.parametrize("family", ["Nrm2", "Asum"])
@pytest.mark.parametrize("x_type,result_type,execution", sorted(_EX["nrm2"]))
def test_norms_ex(handle, rng, family, x_type, result_type, execution):
    n, incx = 30, 2
    x, xe = ex_values(rng, n, x_type)
    result = np.zeros(1, _STORED[result_type])
    call(f"cublas{family}Ex", handle, n, device(strided(x, incx)), x_type, incx, result.ctypes.data, result_type,
         execution)
    want = np.sqrt(np.sum(np.abs(xe) ** 2)) if family == "Nrm2" else np.sum(np.abs(xe.real) + np.abs(xe.imag))
    close(exact(result, result_type), [want], result_type, x_type)


@pytest.mark.parametrize("x_type,cs_type,execution", sorted(_EX["rot"]))
def test_rot_ex(handle, rng, x_type, cs_type, execution):
    n, incx, incy = 17, 1, 2
    x, xe = ex_values(rng, n, x_type)
    y, ye = ex_values(rng, n, x_type)
    c, ce = ex_values(rng, 1, cs_type)
    s, se = ex_values(rng, 1, cs_type)
    dx, dy = device(strided(x, incx)), device(strided(y, incy))
    call("cublasRotEx", handle, n, dx, x_type, incx, dy, x_type, incy, device(c), device(s), cs_type, execution)
    cr = ce[0].real
    close(exact(read(dx, n, _STORED[x_type]), x_type), cr * xe + se[0] * ye, x_type, cs_type)
    close(exact(read(dy, n * incy, _STORED[x_type])[::incy], x_type), cr * ye - np.conj(se[0]) * xe, x_type, cs_type)


@pytest.mark.parametrize("ab_type,cs_type,execution", sorted(_EX["rotg"]))
def test_rotg_ex_zeroes_b(handle, rng, ab_type, cs_type, execution):
    a, ae = ex_values(rng, 1, ab_type)
    b, be = ex_values(rng, 1, ab_type)
    c = np.zeros(1, _STORED[cs_type])
    s = np.zeros(1, _STORED[ab_type])
    call("cublasRotgEx", handle, a.ctypes.data, b.ctypes.data, ab_type, c.ctypes.data, s.ctypes.data, cs_type,
         execution)
    cv, sv, r = exact(c, cs_type)[0], exact(s, ab_type)[0], exact(a, ab_type)[0]
    rotated = np.array([[cv, sv], [-np.conj(sv), cv]]) @ np.array([ae[0], be[0]])
    close(rotated, [r, 0], ab_type, cs_type)
    close([abs(r)], [np.hypot(abs(ae[0]), abs(be[0]))], ab_type)


def _modified_rotation(param):
    """The H a rotm parameter array describes (flag -1 full, 0 and 1 with implied entries, -2 I)."""
    flag, h11, h21, h12, h22 = param
    return {-1: [[h11, h12], [h21, h22]], 0: [[1, h12], [h21, 1]], 1: [[h11, 1], [-1, h22]],
            -2: [[1, 0], [0, 1]]}[int(flag)]


@pytest.mark.parametrize("flag", [-1, 0, 1, -2])
@pytest.mark.parametrize("x_type,param_type,execution", sorted(_EX["rotm"]))
def test_rotm_ex(handle, rng, x_type, param_type, execution, flag):
    n = 12
    x, xe = ex_values(rng, n, x_type)
    y, ye = ex_values(rng, n, x_type)
    param, pe = ex_values(rng, 5, param_type)
    param[0] = np.asarray(flag).astype(np.float32).view(np.uint32) >> 16 if param_type == B16 else flag
    pe = exact(param, param_type)
    dx, dy = device(x), device(y)
    call("cublasRotmEx", handle, n, dx, x_type, 1, dy, x_type, 1, device(param), param_type, execution)
    h = np.array(_modified_rotation(pe))
    want = h @ np.vstack([xe, ye])
    close(exact(read(dx, n, _STORED[x_type]), x_type), want[0], x_type, param_type)
    close(exact(read(dy, n, _STORED[x_type]), x_type), want[1], x_type, param_type)


@pytest.mark.parametrize("d_type,param_type,execution", sorted(_EX["rotmg"]))
def test_rotmg_ex_zeroes_the_second_component(handle, rng, d_type, param_type, execution):
    d1, d2 = (ex_values(rng, 1, d_type)[0] for _ in range(2))
    for d in (d1, d2):                          # the scalings are positive: clear the sign bit
        d.view(np.uint16 if d.itemsize == 2 else np.uint32 if d.itemsize == 4 else np.uint64)[...] &= (
            (1 << (8 * d.itemsize - 1)) - 1)
    x1, x1e = ex_values(rng, 1, d_type)
    y1, y1e = ex_values(rng, 1, d_type)
    param = np.zeros(5, _STORED[param_type])
    call("cublasRotmgEx", handle, d1.ctypes.data, d_type, d2.ctypes.data, d_type, x1.ctypes.data, d_type,
         y1.ctypes.data, d_type, param.ctypes.data, param_type, execution)
    h = np.array(_modified_rotation(exact(param, param_type)))
    rotated = h @ np.array([x1e[0], y1e[0]])
    close(rotated, [exact(x1, d_type)[0], 0], d_type, param_type)


@pytest.mark.parametrize("family", ["amax", "amin"])
@pytest.mark.parametrize("x_type", [R32, R64, C32, C64])
@pytest.mark.parametrize("wide", [False, True])
def test_index_ex(handle, rng, family, x_type, wide):
    n, incx = 25, 2
    x, xe = ex_values(rng, n, x_type)
    result = np.full(1, -5, np.int64 if wide else np.int32)
    call(f"cublasI{family}Ex" + ("_64" if wide else ""), handle, n, device(strided(x, incx)), x_type, incx,
         result.ctypes.data)
    size = np.abs(xe.real) + np.abs(xe.imag)
    assert result[0] == (np.argmax(size) if family == "amax" else np.argmin(size)) + 1


@pytest.mark.parametrize("x_type", [R16, B16, R32, R64, C32, C64])
def test_copy_and_swap_ex(handle, rng, x_type):
    n = 14
    x, _ = ex_values(rng, n, x_type)
    y, _ = ex_values(rng, n, x_type)
    dx, dy = device(strided(x, 2)), device(y)
    call("cublasSwapEx", handle, n, dx, x_type, 2, dy, x_type, 1)
    assert np.array_equal(read(dy, n, _STORED[x_type]), x)
    assert np.array_equal(read(dx, 2 * n, _STORED[x_type])[::2], y)
    dz = device(np.zeros(n, _STORED[x_type]))
    call("cublasCopyEx", handle, n, dy, x_type, 1, dz, x_type, 1)
    assert np.array_equal(read(dz, n, _STORED[x_type]), x)


@pytest.mark.parametrize("name,args", [
    ("cublasAxpyEx", (4, "p", R64, "p", R32, 1, "p", R32, 1, R32)),          # alpha's type is not x's
    ("cublasAxpyEx", (4, "p", R32, "p", R32, 1, "p", R64, 1, R32)),          # x's type is not y's
    ("cublasDotEx", (4, "p", R16, 1, "p", R16, 1, "p", R16, R16)),           # 16F execution
    ("cublasNrm2Ex", (4, "p", C32, 1, "p", C32, R32)),                       # a complex norm
    ("cublasScalEx", (4, "p", C32, "p", R32, 1, R32)),                       # a complex scale of a real vector
    ("cublasIamaxEx", (4, "p", R16, 1, "p")),
    ("cublasCopyEx", (4, "p", R32, 1, "p", R16, 1)),
    ("cublasRotmEx", (4, "p", C32, 1, "p", C32, 1, "p", C32, C32)),
])
def test_ex_type_combinations_not_listed_are_not_supported(handle, name, args):
    d = device(np.zeros(64, np.complex128))
    assert status_of(name, handle, *(d if a == "p" else a for a in args)) == Status.NOT_SUPPORTED


# ---------------------------------------------------------------- grouped batched gemms

# two groups: (transa, transb, m, n, k, group size)
_GROUPS = [(N, N, 5, 4, 3, 2), (T, C, 3, 6, 2, 3)]


def _grouped_arguments(rng, letter, wide, stored_type=None):
    """The grouped call's arrays and the matrices they point at: (arrays, inputs, C addresses, shapes)."""
    ints = np.int64 if wide else np.int32
    dtype = stored_type or TYPES[letter]
    columns = list(zip(*_GROUPS))
    ta, tb = (np.array(c, np.int32) for c in columns[:2])
    m, n, k, size = (np.array(c, ints) for c in columns[2:])
    lda = np.array([(gm if t == N else gk) + 1 for t, gm, gk in zip(ta, m, k)], ints)
    ldb = np.array([(gk if t == N else gn) + 2 for t, gk, gn in zip(tb, k, n)], ints)
    ldc = np.array(m + 1, ints)
    problems, pointers = [], ([], [], [])
    for g, (t_a, t_b, gm, gn, gk, count) in enumerate(_GROUPS):
        for _ in range(count):
            a = random(rng, (gm, gk) if t_a == N else (gk, gm), letter).astype(dtype)
            b = random(rng, (gk, gn) if t_b == N else (gn, gk), letter).astype(dtype)
            c0 = random(rng, (gm, gn), letter).astype(dtype)
            problems.append((g, a, b, c0))
            for where, matrix, ld in zip(pointers, (a, b, c0), (lda[g], ldb[g], ldc[g])):
                where.append(device(stored(matrix, int(ld), poison=7)))
    arrays = [x.ctypes.data for x in (ta, tb, m, n, k)], [device(np.array(p, np.uint64)) for p in pointers], \
        [x.ctypes.data for x in (lda, ldb, ldc, size)]
    _kept.extend([ta, tb, m, n, k, lda, ldb, ldc, size])
    return arrays, problems, pointers[2], ldc


_kept = []


@pytest.mark.parametrize("letter", "SD")
@pytest.mark.parametrize("wide", [False, True])
def test_gemm_grouped_batched(handle, rng, letter, wide):
    (ops_sizes, (dA, dB, dC), (lda, ldb, ldc, size)), problems, cs, ld = _grouped_arguments(rng, letter, wide)
    alpha, beta = np.array([0.5, -2], TYPES[letter]), np.array([1.5, 0], TYPES[letter])
    call(f"cublas{letter}gemmGroupedBatched" + ("_64" if wide else ""), handle, *ops_sizes, alpha.ctypes.data,
         dA, lda, dB, ldb, beta.ctypes.data, dC, ldc, len(_GROUPS), size)
    for (g, a, b, c0), c in zip(problems, cs):
        ta, tb, m, n = _GROUPS[g][:4]
        want = alpha[g] * (op(a, ta).astype(np.float64) @ op(b, tb)) + beta[g] * c0
        got = read(c, int(ld[g]) * n, TYPES[letter])
        np.testing.assert_allclose(unstored(got, m, n, int(ld[g])), want, rtol=TOL[letter], atol=TOL[letter])
        assert np.all(got.reshape(n, int(ld[g]))[:, m:] == 7)


@pytest.mark.parametrize("ab_type,c_type", [(R16, R16), (R16, R32), (R32, R32), (R64, R64)])
def test_gemm_grouped_batched_ex(handle, rng, ab_type, c_type):
    stored_type = _STORED[ab_type]
    (ops_sizes, (dA, dB, dC), (lda, ldb, ldc, size)), problems, cs, ld = _grouped_arguments(rng, "D", False,
                                                                                            stored_type)
    if c_type != ab_type:                                  # C of its own type, same values
        cs = [device(stored(c0.astype(_STORED[c_type]), int(ld[g]), poison=7)) for g, _, _, c0 in problems]
        dC = device(np.array(cs, np.uint64))
    scale = np.float64 if ab_type == R64 else np.float32
    alpha, beta = np.array([0.5, -2], scale), np.array([1.5, 0], scale)
    call("cublasGemmGroupedBatchedEx", handle, *ops_sizes, alpha.ctypes.data, dA, ab_type, lda, dB, ab_type, ldb,
         beta.ctypes.data, dC, c_type, ldc, len(_GROUPS), size, 70 if ab_type == R64 else 68)
    for (g, a, b, c0), c in zip(problems, cs):
        ta, tb, m, n = _GROUPS[g][:4]
        want = alpha[g] * (op(a, ta).astype(np.float64) @ op(b, tb)) + beta[g] * c0.astype(np.float64)
        got = read(c, int(ld[g]) * n, _STORED[c_type])
        close(unstored(got, m, n, int(ld[g])).astype(np.float64), want, c_type, ab_type)


def _grouped_rule(handle, rng, edit):
    (ops_sizes, (dA, dB, dC), (lda, ldb, ldc, size)), _, _, _ = _grouped_arguments(rng, "S", False)
    arguments = dict(ops=ops_sizes, lda=lda, ldb=ldb, ldc=ldc, size=size, count=len(_GROUPS))
    edit(arguments)
    alpha = np.ones(2, np.float32)
    return status_of("cublasSgemmGroupedBatched", handle, *arguments["ops"], alpha.ctypes.data, dA, arguments["lda"],
                     dB, arguments["ldb"], alpha.ctypes.data, dC, arguments["ldc"], arguments["count"],
                     arguments["size"])


def _set_int(index):
    """An edit writing a bad value into the `index`-th array of group 0's values (ops, m, n, k, lda...)."""
    def edit(arguments):
        names = ["ops0", "ops1", "ops2", "ops3", "ops4", "lda", "ldb", "ldc", "size"]
        name = names[index]
        address = arguments["ops"][index] if name.startswith("ops") else arguments[name]
        holder = (ctypes.c_int32 * 1).from_address(address)
        holder[0] = {0: 9, 2: -1, 3: -1, 4: -1, 5: 0, 6: 0, 7: 0, 8: -1}[index]
    return edit


@pytest.mark.parametrize("index,why", [(0, "transa"), (2, "negative m"), (3, "negative n"), (4, "negative k"),
                                       (5, "lda"), (6, "ldb"), (7, "ldc"), (8, "negative group size")])
def test_grouped_argument_rules(handle, rng, index, why):
    assert _grouped_rule(handle, rng, _set_int(index)) == Status.INVALID_VALUE, why


def test_grouped_negative_group_count(handle, rng):
    assert _grouped_rule(handle, rng, lambda a: a.update(count=-1)) == Status.INVALID_VALUE


def test_grouped_ex_complex_is_not_supported(handle):
    d = device(np.zeros(64))
    assert status_of("cublasGemmGroupedBatchedEx", handle, *[d] * 6, d, C32, d, d, C32, d, d, d, C32, d, 1, d,
                     68) == Status.NOT_SUPPORTED


# ---------------------------------------------------------------- cublasXt: host memory, synchronous

@pytest.fixture
def xt():
    out = np.zeros(1, np.uint64)
    call("cublasXtCreate", out.ctypes.data)
    devices = np.array([0], np.int32)
    call("cublasXtDeviceSelect", int(out[0]), 1, devices.ctypes.data)
    yield int(out[0])
    call("cublasXtDestroy", int(out[0]))


def host(matrix, ld, poison=7):
    """A column-major host copy (numpy memory, not anycuda's) with leading dimension `ld`."""
    return stored(matrix, ld, poison)


@pytest.mark.parametrize("letter", "SDCZ")
def test_xt_gemm_on_host_memory_is_done_when_it_returns(xt, rng, letter):
    m, n, k = 19, 23, 8
    A, B, C0 = random(rng, (k, m), letter), random(rng, (k, n), letter), random(rng, (m, n), letter)
    a, b, c = host(A, k + 1), host(B, k), host(C0, m + 2)
    alpha, beta = np.array([2], TYPES[letter]), np.array([-1], TYPES[letter])
    call(f"cublasXt{letter}gemm", xt, T, N, m, n, k, alpha.ctypes.data, a.ctypes.data, k + 1, b.ctypes.data, k,
         beta.ctypes.data, c.ctypes.data, m + 2)
    np.testing.assert_allclose(unstored(c, m, n, m + 2), 2 * (A.T.astype(np.complex128) @ B) - C0,
                               rtol=TOL[letter], atol=TOL[letter])
    assert np.all(c.reshape(n, m + 2)[:, m:] == 7)


@pytest.mark.parametrize("letter", "CZ")
def test_xt_herk_and_herkx(xt, rng, letter):
    n, k = 9, 4
    A, B, C0 = random(rng, (n, k), letter), random(rng, (n, k), letter), random(rng, (n, n), letter)
    for routine, args, product in [("herk", (A,), A @ A.conj().T), ("herkx", (A, B), A @ B.conj().T)]:
        c = host(C0, n)
        alpha = np.array([0.5], REAL[letter] if routine == "herk" else TYPES[letter])
        beta = np.array([2], REAL[letter])
        held = [host(m, n) for m in args]
        matrices = [x for m in held for x in (m.ctypes.data, n)]
        call(f"cublasXt{letter}{routine}", xt, UPPER, N, n, k, alpha.ctypes.data, *matrices, beta.ctypes.data,
             c.ctypes.data, n)
        want = 0.5 * product + 2 * C0
        mask = triangle(n, UPPER) & ~np.eye(n, dtype=bool)
        np.testing.assert_allclose(unstored(c, n, n, n)[mask], want[mask], rtol=TOL[letter], atol=TOL[letter])
        np.testing.assert_allclose(unstored(c, n, n, n).diagonal(), want.diagonal().real, rtol=TOL[letter],
                                   atol=TOL[letter])


@pytest.mark.parametrize("letter", "SDCZ")
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("uplo", [LOWER, UPPER])
def test_xt_spmm_multiplies_by_a_packed_symmetric_matrix(xt, rng, letter, side, uplo):
    m, n = 6, 5
    order = m if side == 0 else n
    full = random(rng, (order, order), letter)
    full = np.tril(full) + np.tril(full, -1).T if uplo == LOWER else np.triu(full) + np.triu(full, 1).T
    packed = np.array([full[i, j] for j in range(order) for i in (range(j, order) if uplo == LOWER else range(j + 1))],
                      TYPES[letter])
    B, C0 = random(rng, (m, n), letter), random(rng, (m, n), letter)
    b, c = host(B, m), host(C0, m + 1)
    alpha, beta = np.array([1.5], TYPES[letter]), np.array([0.5], TYPES[letter])
    call(f"cublasXt{letter}spmm", xt, side, uplo, m, n, alpha.ctypes.data, packed.ctypes.data, b.ctypes.data, m,
         beta.ctypes.data, c.ctypes.data, m + 1)
    product = full @ B if side == 0 else B @ full
    np.testing.assert_allclose(unstored(c, m, n, m + 1), 1.5 * product + 0.5 * C0, rtol=TOL[letter], atol=TOL[letter])


def test_xt_trmm_and_trsm_are_inverse(xt, rng):
    m, n = 7, 4
    A = np.tril(random(rng, (m, m), "D")) + 4 * np.eye(m)
    B = random(rng, (m, n), "D")
    a, b, c = host(A, m), host(B, m), np.full(m * n, np.nan)
    one = np.array([1.0])
    call("cublasXtDtrmm", xt, 0, LOWER, N, 0, m, n, one.ctypes.data, a.ctypes.data, m, b.ctypes.data, m,
         c.ctypes.data, m)
    np.testing.assert_allclose(unstored(c, m, n, m), A @ B, rtol=1e-12)
    call("cublasXtDtrsm", xt, 0, LOWER, N, 0, m, n, one.ctypes.data, a.ctypes.data, m, c.ctypes.data, m)
    np.testing.assert_allclose(unstored(c, m, n, m), B, rtol=1e-10, atol=1e-12)


def test_xt_settings_are_kept(xt):
    out = np.zeros(1, np.int32)
    call("cublasXtSetBlockDim", xt, 512)
    call("cublasXtGetBlockDim", xt, out.ctypes.data)
    assert out[0] == 512
    call("cublasXtSetPinningMemMode", xt, 1)
    call("cublasXtGetPinningMemMode", xt, out.ctypes.data)
    assert out[0] == 1
    call("cublasXtSetCpuRatio", xt, 0, 1, 0.25)
    call("cublasXtSetCpuRoutine", xt, 0, 1, 0)
    call("cublasXtMaxBoards", out.ctypes.data)
    assert out[0] >= 1


@pytest.mark.parametrize("name,args,why", [
    ("cublasXtSetBlockDim", (0,), "block dimension 0"), ("cublasXtSetPinningMemMode", (2,), "pinning mode 2"),
    ("cublasXtSetCpuRatio", (0, 1, 1.5), "a ratio above 1"), ("cublasXtSetCpuRatio", (11, 1, 0.5), "BLAS op 11"),
    ("cublasXtSetCpuRoutine", (0, 4, 0), "type 4"), ("cublasXtDeviceSelect", (0, 0), "no devices")])
def test_xt_setting_rules(xt, name, args, why):
    assert status_of(name, xt, *args) == Status.INVALID_VALUE, why


def test_xt_device_select_refuses_a_device_that_does_not_exist(xt):
    devices = np.array([0, 4096], np.int32)
    assert status_of("cublasXtDeviceSelect", xt, 2, devices.ctypes.data) == Status.INVALID_VALUE


def test_xt_gemm_argument_rules_and_destroyed_handles(xt):
    d = np.zeros(64)
    one = np.array([1.0])
    assert status_of("cublasXtDgemm", xt, N, N, 4, 4, 4, one.ctypes.data, d.ctypes.data, 3, d.ctypes.data, 4,
                     one.ctypes.data, d.ctypes.data, 4) == Status.INVALID_VALUE            # lda below m
    out = np.zeros(1, np.uint64)
    call("cublasXtCreate", out.ctypes.data)
    call("cublasXtDestroy", int(out[0]))
    assert status_of("cublasXtDgemm", int(out[0]), N, N, 1, 1, 1, one.ctypes.data, d.ctypes.data, 1, d.ctypes.data,
                     1, one.ctypes.data, d.ctypes.data, 1) == Status.NOT_INITIALIZED


# ---------------------------------------------------------------- through NVIDIA's headers (the C types)

def _program_tools():
    import test_cublas_program as tools
    return tools


@pytest.mark.skipif(_program_tools().NVCC is None or _program_tools().INCLUDE is None,
                    reason="needs nvcc and NVIDIA's cuBLAS headers")
def test_program_through_nvidias_headers(tmp_path):
    tools = _program_tools()
    rng = np.random.default_rng()
    program = tools._build(tmp_path, "cublas_rest", "libcublas.so.13")
    p, out, said, _ = tools.run(program, tmp_path, rng)
    col = tools.col
    m, n, k = 9, 7, 5
    A, B, C0 = p.take(m * k), p.take(n * k), p.take(m * n)                          # Xt Dgemm
    np.testing.assert_allclose(col(out.read(m * n, np.float64), m, n), 2 * col(A, m, k) @ col(B, n, k).T + C0.reshape(
        n, m).T / 2, rtol=1e-12, atol=1e-12)
    P, Q = (p.take(2 * n * k).view(np.complex128) for _ in range(2))             # Xt Zherkx
    H0 = p.take(2 * n * n).view(np.complex128)
    want = (0.5 - 1j) * col(P, n, k) @ col(Q, n, k).conj().T + 2 * col(H0, n, n)
    np.fill_diagonal(want, want.diagonal().real)
    got = col(out.read(2 * n * n, np.float64).view(np.complex128), n, n)
    upper = np.triu(np.ones((n, n), bool))
    np.testing.assert_allclose(got[upper], want[upper], rtol=1e-12, atol=1e-12)
    assert np.array_equal(got[~upper], col(H0, n, n)[~upper])
    AP, SB = p.take(m * (m + 1) // 2, np.float32), p.take(m * n, np.float32)       # Xt Sspmm
    full = np.zeros((m, m))
    full[np.triu_indices(m)[::-1]] = AP                     # lower, column by column = upper's row order
    full = full + np.tril(full, -1).T
    np.testing.assert_allclose(col(out.read(m * n, np.float32), m, n), full @ col(SB, m, n), rtol=1e-4, atol=1e-4)
    X, Y, S = p.take(m * k, np.float32), p.take(m * k, np.float32), p.take(m * m, np.float32)   # Ssyrkx_64
    got, want = col(out.read(m * m, np.float32), m, m), col(X, m, k) @ col(Y, m, k).T + col(S, m, m)
    lower = np.tril(np.ones((m, m), bool))
    np.testing.assert_allclose(got[lower], want[lower], rtol=1e-4, atol=1e-4)
    assert np.array_equal(got[~lower], col(S, m, m)[~lower])
    x, y = (p.take(2 * m, np.float32).view(np.complex64) for _ in range(2))        # Csyr2
    CA = p.take(2 * m * m, np.float32).view(np.complex64)
    got = col(out.read(2 * m * m, np.float32).view(np.complex64), m, m)
    want = (1.5 + 0.5j) * (np.outer(x, y) + np.outer(y, x)) + col(CA, m, m)
    upper = np.triu(np.ones((m, m), bool))
    np.testing.assert_allclose(got[upper], want[upper], rtol=1e-4, atol=1e-4)
    u, v = (p.take(2 * m, np.float32).view(np.complex64) for _ in range(2))        # DotcEx
    assert complex(*map(float, said["dotc"].split())) == pytest.approx(np.vdot(u, v), rel=1e-5, abs=1e-5)
    w = p.take(2 * m).view(np.complex128)                                          # Nrm2Ex, IamaxEx_64
    assert float(said["nrm2"]) == pytest.approx(np.linalg.norm(w), rel=1e-14)
    assert int(said["iamax"]) == np.argmax(np.abs(w.real) + np.abs(w.imag)) + 1
    ax, ay = p.take(m), p.take(m)                                                  # AxpyEx
    np.testing.assert_allclose(out.read(m, np.float64), ay + ax / 2, rtol=1e-15)
    x1, y1 = p.take(2)                                                             # RotmgEx zeroes y1
    flag, h11, h21, h12, h22, rotated = map(float, said["rotmg"].split())
    hm = {-1: [[h11, h12], [h21, h22]], 0: [[1, h12], [h21, 1]], 1: [[h11, 1], [-1, h22]]}[int(flag)]
    np.testing.assert_allclose(np.array(hm) @ [x1, y1], [rotated, 0], atol=1e-12)
    shapes = [((3, 2), (2, 4), (3, 4), 1, 0, False), ((3, 2), (2, 4), (3, 4), 1, 0, False),
              ((3, 2), (3, 2), (2, 2), -1, 1, True)]                                # grouped gemms
    inputs = [(p.take(a[0] * a[1], np.float32), p.take(b[0] * b[1], np.float32), p.take(c[0] * c[1], np.float32))
              for a, b, c, _, _, _ in shapes]
    for (a_shape, b_shape, c_shape, alpha, beta, transposed), (a, b, c) in zip(shapes, inputs):
        a, b, c = col(a, *a_shape), col(b, *b_shape), col(c, *c_shape)
        want = alpha * ((a.T if transposed else a).astype(np.float64) @ b) + beta * c
        np.testing.assert_allclose(col(out.read(c.size, np.float32), *c_shape), want, rtol=1e-4, atol=1e-4)
    for (a_shape, b_shape, c_shape, _, _, _), (a, b, _) in zip(shapes[:2], inputs):   # GemmGroupedBatchedEx
        want = 2 * col(a, *a_shape).astype(np.float64) @ col(b, *b_shape)
        np.testing.assert_allclose(col(out.read(12, np.float32), *c_shape), want, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- the copies' 64-bit forms, the logger callback

def test_copies_with_64_bit_sizes(rng):
    x = rng.standard_normal(12)
    d = device(np.full(24, np.nan))
    call("cublasSetVector_64", 12, 8, x.ctypes.data, 1, d, 2)
    back = np.full(12, np.nan)
    call("cublasGetVector_64", 12, 8, d, 2, back.ctypes.data, 1)
    assert np.array_equal(back, x) and np.all(np.isnan(read(d, 24, np.float64)[1::2]))
    A = rng.standard_normal((3, 4))
    dA = device(np.full(5 * 4, np.nan))
    host_A = stored(A, 3)
    call("cublasSetMatrix_64", 3, 4, 8, host_A.ctypes.data, 3, dA, 5)
    assert np.array_equal(unstored(read(dA, 20, np.float64), 3, 4, 5), A)
    assert status_of("cublasSetMatrix_64", 3, 4, 8, x.ctypes.data, 2, dA, 5) == Status.INVALID_VALUE   # lda < rows


def test_logger_callback_is_given_back():
    out = np.zeros(1, np.uint64)
    call("cublasSetLoggerCallback", 0x1234)
    call("cublasGetLoggerCallback", out.ctypes.data)
    assert out[0] == 0x1234
    call("cublasSetLoggerCallback", 0)
    assert status_of("cublasGetLoggerCallback", 0) == Status.INVALID_VALUE
