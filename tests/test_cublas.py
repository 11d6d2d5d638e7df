"""anycuda's cuBLAS, called as the C library calls it (anycuda.libraries.cublas.functions: C
name -> function of the C arguments, addresses as integers), against numpy on fresh random
inputs, with poisoned outputs and padded leading dimensions whose padding must stay untouched."""
import ctypes
import threading

import numpy as np
import pytest

import anycuda as ac
from library_calls import caller, device, peek, read, scalar, stream_handle
from anycuda.libraries.cublas import blocks, functions
from anycuda.libraries.cublas.status import CublasError, Status

TABLE = functions.table()
TYPES = {"S": np.float32, "D": np.float64, "C": np.complex64, "Z": np.complex128}
REAL = {"S": np.float32, "D": np.float64, "C": np.float32, "Z": np.float64}
TOL = {"S": 1e-4, "D": 1e-10, "C": 1e-4, "Z": 1e-10}
N, T, C = 0, 1, 2
call = caller(TABLE)


def random(rng, shape, letter):
    x = rng.standard_normal(shape)
    if letter in "CZ":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(TYPES[letter])


def stored(matrix, ld, poison=np.nan):
    """A column-major copy of `matrix` with leading dimension `ld` (padding rows poisoned)."""
    rows, cols = matrix.shape
    out = np.full((cols, ld), poison, matrix.dtype)
    out[:, :rows] = matrix.T
    return out.reshape(-1)


def unstored(flat, rows, cols, ld):
    return flat.reshape(cols, ld)[:, :rows].T


def status_of(name, *args):
    """The status a call answers with (it must fail)."""
    with pytest.raises(CublasError) as e:
        call(name, *args)
    return e.value.status


def op(x, o):
    return x if o == N else (x.T if o == T else x.conj().T)


@pytest.fixture
def handle():
    out = np.zeros(1, np.uint64)
    call("cublasCreate_v2", out.ctypes.data)
    yield int(out[0])
    call("cublasDestroy_v2", int(out[0]))


@pytest.mark.parametrize("letter", "SDCZ")
@pytest.mark.parametrize("ta,tb", [(N, N), (T, N), (N, C), (C, T)])
def test_gemm(handle, rng, letter, ta, tb):
    m, n, k = 23, 17, 11
    dtype = TYPES[letter]
    A = random(rng, (m, k) if ta == N else (k, m), letter)
    B = random(rng, (k, n) if tb == N else (n, k), letter)
    C0 = random(rng, (m, n), letter)
    lda, ldb, ldc = A.shape[0] + 3, B.shape[0] + 1, m + 2
    dA, dB, dC = device(stored(A, lda)), device(stored(B, ldb)), device(stored(C0, ldc, poison=7))
    alpha, beta = (0.5 - 1j, 2) if letter in "CZ" else (0.5, 2)
    call(f"cublas{letter}gemm_v2", handle, ta, tb, m, n, k, scalar(alpha, dtype), dA, lda, dB, ldb,
         scalar(beta, dtype), dC, ldc)
    got = read(dC, ldc * n, dtype)
    want = alpha * op(A, ta).astype(np.complex128) @ op(B, tb) + beta * C0
    np.testing.assert_allclose(unstored(got, m, n, ldc), want, rtol=TOL[letter], atol=TOL[letter])
    assert np.all(got.reshape(n, ldc)[:, m:] == 7)


@pytest.mark.parametrize("letter", "SDCZ")
def test_batched_gemms(handle, rng, letter):
    m, n, k, count = 9, 8, 7, 4
    dtype = TYPES[letter]
    As = [random(rng, (m, k), letter) for _ in range(count)]
    Bs = [random(rng, (k, n), letter) for _ in range(count)]
    dA = [device(stored(a, m)) for a in As]
    dB = [device(stored(b, k)) for b in Bs]
    dC = [device(np.full(m * n, np.nan, dtype)) for _ in range(count)]
    one, zero = scalar(1, dtype), scalar(0, dtype)
    call(f"cublas{letter}gemmBatched", handle, N, N, m, n, k, one, device(np.array(dA, np.uint64)), m,
         device(np.array(dB, np.uint64)), k, zero, device(np.array(dC, np.uint64)), m, count)
    for a, b, c in zip(As, Bs, dC):
        np.testing.assert_allclose(unstored(read(c, m * n, dtype), m, n, m), a @ b, rtol=TOL[letter], atol=TOL[letter])
    strided = device(np.full(m * n * count, np.nan, dtype))
    call(f"cublas{letter}gemmStridedBatched", handle, N, T, m, n, k, one, device(np.concatenate([stored(a, m) for a in As])),
         m, m * k, device(np.concatenate([stored(b.T.copy(), n) for b in Bs])), n, n * k, zero, strided, m, m * n, count)
    got = read(strided, m * n * count, dtype)
    for i, (a, b) in enumerate(zip(As, Bs)):
        np.testing.assert_allclose(unstored(got[i * m * n:(i + 1) * m * n], m, n, m), a @ b, rtol=TOL[letter], atol=TOL[letter])


@pytest.mark.parametrize("letter", "SDCZ")
def test_level3_triangular_and_symmetric(handle, rng, letter):
    m, n = 12, 9
    dtype, tol = TYPES[letter], TOL[letter]
    A = random(rng, (m, m), letter) + m * np.eye(m, dtype=TYPES[letter])
    B = random(rng, (m, n), letter)
    two = scalar(2, dtype)
    # trsm: left, upper, transposed, non-unit: op(A) X = 2 B
    dB = device(stored(B, m))
    call(f"cublas{letter}trsm_v2", handle, 0, 1, T, 0, m, n, two, device(stored(A, m)), m, dB, m)
    np.testing.assert_allclose(unstored(read(dB, m * n, dtype), m, n, m), np.linalg.solve(np.triu(A).T, 2 * B),
                               rtol=tol * 10, atol=tol * 10)
    # trmm (out of place): C = 2 B op(A), right, lower, unit diagonal
    An = random(rng, (n, n), letter)
    dC = device(np.full(m * n, np.nan, dtype))
    call(f"cublas{letter}trmm_v2", handle, 1, 0, N, 1, m, n, two, device(stored(An, n)), n, device(stored(B, m)), m, dC, m)
    L = np.tril(An, -1) + np.eye(n)
    np.testing.assert_allclose(unstored(read(dC, m * n, dtype), m, n, m), 2 * B @ L, rtol=tol, atol=tol)
    # symm: C = 2 A_sym B (left, lower half read)
    S = np.tril(A) + np.tril(A, -1).T
    dC = device(np.full(m * n, np.nan, dtype))
    call(f"cublas{letter}symm_v2", handle, 0, 0, m, n, two, device(stored(np.tril(A), m)), m, device(stored(B, m)), m,
         scalar(0, dtype), dC, m)
    np.testing.assert_allclose(unstored(read(dC, m * n, dtype), m, n, m), 2 * S @ B, rtol=tol, atol=tol)
    # syrk / syr2k: the upper triangle of 2 B B^T (+ 2 B A'^T + ...)
    K = random(rng, (m, n), letter)
    dC = device(np.zeros(m * m, dtype))
    call(f"cublas{letter}syrk_v2", handle, 1, N, m, n, two, device(stored(B, m)), m, scalar(0, dtype), dC, m)
    np.testing.assert_allclose(np.triu(unstored(read(dC, m * m, dtype), m, m, m)), np.triu(2 * B @ B.T), rtol=tol, atol=tol)
    dC = device(np.zeros(m * m, dtype))
    call(f"cublas{letter}syr2k_v2", handle, 0, N, m, n, two, device(stored(B, m)), m, device(stored(K, m)), m,
         scalar(0, dtype), dC, m)
    np.testing.assert_allclose(np.tril(unstored(read(dC, m * m, dtype), m, m, m)), np.tril(2 * (B @ K.T + K @ B.T)),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("letter", "SDCZ")
def test_geam_and_dgmm(handle, rng, letter):
    m, n = 10, 7
    dtype, tol = TYPES[letter], TOL[letter]
    A, B = random(rng, (n, m), letter), random(rng, (m, n), letter)
    dC = device(np.full(m * n, np.nan, dtype))
    call(f"cublas{letter}geam", handle, C, N, m, n, scalar(2, dtype), device(stored(A, n)), n, scalar(-1, dtype),
         device(stored(B, m)), m, dC, m)
    np.testing.assert_allclose(unstored(read(dC, m * n, dtype), m, n, m), 2 * A.conj().T - B, rtol=tol, atol=tol)
    x = random(rng, n, letter)
    dC = device(np.full(m * n, np.nan, dtype))
    call(f"cublas{letter}dgmm", handle, 1, m, n, device(stored(B, m)), m, device(x), 1, dC, m)
    np.testing.assert_allclose(unstored(read(dC, m * n, dtype), m, n, m), B * x[None, :], rtol=tol, atol=tol)


@pytest.mark.parametrize("letter", "SDCZ")
def test_level2(handle, rng, letter):
    m, n = 14, 11
    dtype, tol = TYPES[letter], TOL[letter]
    A = random(rng, (m, n), letter)
    x, y = random(rng, m, letter), random(rng, n, letter)
    dy = device(np.full(2 * n, np.nan, dtype))
    call(f"cublas{letter}gemv_v2", handle, T, m, n, scalar(3, dtype), device(stored(A, m)), m, device(x), 1,
         scalar(0, dtype), dy, 2)
    np.testing.assert_allclose(read(dy, 2 * n, dtype)[::2], 3 * A.T @ x, rtol=tol, atol=tol)
    assert np.all(np.isnan(read(dy, 2 * n, dtype)[1::2]))
    ger = {"S": "Sger", "D": "Dger", "C": "Cgerc", "Z": "Zgerc"}[letter]
    dA = device(stored(A, m))
    call(f"cublas{ger}_v2", handle, m, n, scalar(2, dtype), device(x), 1, device(y), 1, dA, m)
    np.testing.assert_allclose(unstored(read(dA, m * n, dtype), m, n, m), A + 2 * np.outer(x, y.conj()), rtol=tol, atol=tol)
    S = random(rng, (m, m), letter) + m * np.eye(m, dtype=dtype)
    dy = device(np.full(m, np.nan, dtype))
    call(f"cublas{letter}symv_v2", handle, 1, m, scalar(1, dtype), device(stored(np.triu(S), m)), m, device(x), 1,
         scalar(0, dtype), dy, 1)
    np.testing.assert_allclose(read(dy, m, dtype), (np.triu(S) + np.triu(S, 1).T) @ x, rtol=tol, atol=tol)
    dx = device(x)
    call(f"cublas{letter}trsv_v2", handle, 0, N, 0, m, device(stored(S, m)), m, dx, 1)
    np.testing.assert_allclose(read(dx, m, dtype), np.linalg.solve(np.tril(S), x), rtol=tol * 10, atol=tol * 10)
    call(f"cublas{letter}trmv_v2", handle, 0, N, 0, m, device(stored(S, m)), m, dx, 1)
    np.testing.assert_allclose(read(dx, m, dtype), x, rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("letter", "SDCZ")
def test_level1(handle, rng, letter):
    n = 37
    dtype, tol = TYPES[letter], TOL[letter]
    real = np.float32 if letter in "SC" else np.float64
    x, y = random(rng, n, letter), random(rng, 2 * n, letter)
    dx, dy = device(x), device(y)
    call(f"cublas{letter}axpy_v2", handle, n, scalar(2, dtype), dx, 1, dy, 2)
    want = y.copy()
    want[::2] += 2 * x
    np.testing.assert_allclose(read(dy, 2 * n, dtype), want, rtol=tol, atol=tol)
    out = np.zeros(1, dtype)
    dots = {"S": ["Sdot"], "D": ["Ddot"], "C": ["Cdotu", "Cdotc"], "Z": ["Zdotu", "Zdotc"]}[letter]
    for name in dots:
        call(f"cublas{name}_v2", handle, n, dx, 1, dx, -1, out.ctypes.data)
        first = x.conj() if name.endswith("c") else x
        assert out[0] == pytest.approx(np.sum(first * x[::-1]), rel=tol, abs=tol)
    norm = np.zeros(1, real)
    two = {"S": "S", "D": "D", "C": "Sc", "Z": "Dz"}[letter]
    call(f"cublas{two}nrm2_v2", handle, n, dx, 1, norm.ctypes.data)
    assert norm[0] == pytest.approx(np.linalg.norm(x), rel=tol)
    call(f"cublas{two}asum_v2", handle, n, dx, 1, norm.ctypes.data)
    assert norm[0] == pytest.approx(np.sum(np.abs(x.real) + np.abs(x.imag)), rel=tol)
    at = np.zeros(1, np.int32)
    magnitude = np.abs(x.real) + np.abs(x.imag)
    call(f"cublasI{letter.lower()}amax_v2", handle, n, dx, 1, at.ctypes.data)
    assert at[0] == np.argmax(magnitude) + 1
    call(f"cublasI{letter.lower()}amin_v2", handle, n, dx, 1, at.ctypes.data)
    assert at[0] == np.argmin(magnitude) + 1
    wide = np.zeros(1, np.int64)
    call(f"cublasI{letter.lower()}amax_v2_64", handle, n, dx, 1, wide.ctypes.data)
    assert wide[0] == np.argmax(magnitude) + 1
    dz = device(np.zeros(n, dtype))
    call(f"cublas{letter}copy_v2", handle, n, dx, 1, dz, 1)
    call(f"cublas{letter}scal_v2", handle, n, scalar(-0.5, dtype), dz, 1)
    np.testing.assert_allclose(read(dz, n, dtype), -0.5 * x, rtol=tol)
    call(f"cublas{letter}swap_v2", handle, n, dx, 1, dz, 1)
    np.testing.assert_allclose(read(dx, n, dtype), -0.5 * x, rtol=tol)


def test_rotations_and_mixed_scales(handle, rng):
    x, y = rng.standard_normal(20), rng.standard_normal(20)
    dx, dy = device(x), device(y)
    c, s = 0.6, 0.8
    call("cublasDrot_v2", handle, 20, dx, 1, dy, 1, scalar(c, np.float64), scalar(s, np.float64))
    np.testing.assert_allclose(read(dx, 20, np.float64), c * x + s * y)
    np.testing.assert_allclose(read(dy, 20, np.float64), c * y - s * x)
    z = (rng.standard_normal(8) + 1j * rng.standard_normal(8)).astype(np.complex64)
    dz = device(z)
    call("cublasCsscal_v2", handle, 8, scalar(3, np.float32), dz, 1)
    np.testing.assert_allclose(read(dz, 8, np.complex64), 3 * z, rtol=1e-6)


@pytest.mark.parametrize("whole", [True, False], ids=["one block", "blocks"])
def test_gemm_ex_types(handle, rng, whole, monkeypatch):
    if not whole:                          # a product too large to widen at once goes in blocks
        monkeypatch.setattr(blocks, "WHOLE_BYTES", 0)
    m, n, k = 40, 600, 530                 # more than one block of the shared dimension
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    dC = device(np.full(m * n, np.nan, np.float16))
    call("cublasGemmEx", handle, N, N, m, n, k, scalar(1, np.float16), device(stored(a.astype(np.float16), m)), 2, m,
         device(stored(b.astype(np.float16), k)), 2, k, scalar(0, np.float16), dC, 2, m, 64, -1)
    want = a.astype(np.float16).astype(np.float64) @ b.astype(np.float16)
    np.testing.assert_allclose(unstored(read(dC, m * n, np.float16), m, n, m), want, rtol=2e-2, atol=0.1)
    # mixed types the table does not list are NOT_SUPPORTED, not computed
    with pytest.raises(CublasError) as e:
        call("cublasGemmEx", handle, N, N, m, n, k, scalar(1, np.float32), dC, 2, m, dC, 14, k, scalar(0, np.float32),
             dC, 0, m, 68, -1)
    assert e.value.status == Status.NOT_SUPPORTED


def test_device_pointer_mode_reads_scalars_when_the_stream_runs(handle, rng):
    stream = ac.Stream()
    sid = stream_handle(stream)
    call("cublasSetStream_v2", handle, sid)
    call("cublasSetPointerMode_v2", handle, 1)
    gate = threading.Event()
    stream.enqueue(gate.wait, 5.0)
    m = n = k = 4
    a = rng.standard_normal((m, k)).astype(np.float32)
    alpha = device(np.array([1], np.float32))
    dC = device(np.zeros(m * n, np.float32))
    call("cublasSgemm_v2", handle, N, N, m, n, k, alpha, device(stored(a, m)), m, device(stored(np.eye(k, dtype=np.float32), k)),
         k, device(np.array([0], np.float32)), dC, m)
    ctypes.c_float.from_address(alpha).value = 3.0     # changed before the stream reaches the product
    result = device(np.array([np.nan], np.float32))
    call("cublasSdot_v2", handle, m * k, device(stored(a, m)), 1, device(stored(a, m)), 1, result)
    assert np.isnan(peek(result, 1, np.float32)[0])    # device mode: the call did not wait
    gate.set()
    stream.synchronize()
    np.testing.assert_allclose(unstored(read(dC, m * n, np.float32), m, n, m), 3 * a, rtol=1e-6)
    assert read(result, 1, np.float32)[0] == pytest.approx(np.sum(a * a), rel=1e-5)
    # host mode: scalars read at the call, results waited for
    call("cublasSetPointerMode_v2", handle, 0)
    host_alpha = np.array([2], np.float32)
    gate2 = threading.Event()
    stream.enqueue(gate2.wait, 5.0)
    call("cublasSgemm_v2", handle, N, N, m, n, k, host_alpha.ctypes.data, device(stored(a, m)), m,
         device(stored(np.eye(k, dtype=np.float32), k)), k, scalar(0, np.float32), dC, m)
    host_alpha[0] = 100
    gate2.set()
    out = np.zeros(1, np.float32)
    call("cublasSnrm2_v2", handle, m * k, device(stored(a, m)), 1, out.ctypes.data)   # waits for its work
    assert out[0] == pytest.approx(np.linalg.norm(a), rel=1e-6)
    np.testing.assert_allclose(unstored(read(dC, m * n, np.float32), m, n, m), 2 * a, rtol=1e-6)


@pytest.mark.parametrize("args,rule", [
    ((N, N, -1, 4, 4, 4, 4, 4), "negative m"),
    ((N, N, 4, -1, 4, 4, 4, 4), "negative n"),
    ((N, N, 4, 4, -1, 4, 4, 4), "negative k"),
    ((N, N, 4, 4, 4, 3, 4, 4), "lda below m"),
    ((T, N, 4, 4, 5, 4, 5, 4), "lda below k for op T"),
    ((N, N, 4, 4, 5, 4, 4, 4), "ldb below k"),
    ((N, T, 4, 5, 4, 4, 4, 4), "ldb below n for op T"),
    ((N, N, 4, 4, 4, 4, 4, 3), "ldc below m"),
    ((5, N, 4, 4, 4, 4, 4, 4), "unknown operation"),
])
def test_gemm_argument_rules(handle, args, rule):
    ta, tb, m, n, k, lda, ldb, ldc = args
    buf = device(np.zeros(64, np.float32))
    one = scalar(1, np.float32)
    with pytest.raises(CublasError) as e:
        call("cublasSgemm_v2", handle, ta, tb, m, n, k, one, buf, lda, buf, ldb, one, buf, ldc)
    assert e.value.status == Status.INVALID_VALUE, rule


def test_handle_rules(handle):
    with pytest.raises(CublasError) as e:
        call("cublasSetPointerMode_v2", handle, 2)
    assert e.value.status == Status.INVALID_VALUE
    with pytest.raises(CublasError) as e:
        call("cublasSetMathMode", handle, 99)
    assert e.value.status == Status.INVALID_VALUE
    with pytest.raises(CublasError) as e:
        call("cublasSgemm_v2", 12345, N, N, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1)
    assert e.value.status == Status.NOT_INITIALIZED
    mode = np.zeros(1, np.int32)
    call("cublasSetMathMode", handle, 3 | 16)
    call("cublasGetMathMode", handle, mode.ctypes.data)
    assert mode[0] == 19
    assert functions.VALUED["cublasGetStatusName"](15) == "CUBLAS_STATUS_NOT_SUPPORTED"


def test_geam_with_a_null_beta_leaves_b_unread(handle, rng):
    # NVIDIA's cuSOLVER (gesvd) transposes with geam(alpha, A, beta=NULL, B=A)
    m, n = 5, 3
    A = random(rng, (n, m), "S")
    dC = device(np.full(m * n, np.nan, np.float32))
    call("cublasSgeam", handle, T, T, m, n, scalar(1, np.float32), device(stored(A, n)), n, 0, 0, n, dC, m)
    np.testing.assert_allclose(unstored(read(dC, m * n, np.float32), m, n, m), A.T, rtol=1e-6)


def test_emulation_settings_are_kept_with_their_defaults(handle):
    value = np.zeros(1, np.int32)
    for name, default, new in [("EmulationStrategy", 0, 2), ("EmulationSpecialValuesSupport", 0xFFFF, 0),
                               ("FixedPointEmulationMantissaControl", 0, 1),
                               ("FixedPointEmulationMaxMantissaBitCount", 0, 40),
                               ("FixedPointEmulationMantissaBitOffset", 0, -8)]:
        call(f"cublasGet{name}", handle, value.ctypes.data)
        assert value[0] == default, name
        call(f"cublasSet{name}", handle, new)
        call(f"cublasGet{name}", handle, value.ctypes.data)
        assert value[0] == new, name
    for name, bad in [("EmulationStrategy", 3), ("FixedPointEmulationMantissaControl", 2),
                      ("FixedPointEmulationMaxMantissaBitCount", -1)]:
        with pytest.raises(CublasError) as e:
            call(f"cublasSet{name}", handle, bad)
        assert e.value.status == Status.INVALID_VALUE, name
    call("cublasSetEnvironmentMode")          # what NVIDIA's cuSOLVER needs to find: a no-op


def test_empty_products_touch_nothing(handle):
    buf = device(np.full(4, 7, np.float32))
    call("cublasSgemm_v2", handle, N, N, 0, 2, 2, scalar(1, np.float32), 0, 1, 0, 2, scalar(0, np.float32), buf, 1)
    assert np.all(read(buf, 4, np.float32) == 7)


def _hermitian(rng, n, letter):
    a = random(rng, (n, n), letter)
    return (a + a.conj().T) / 2 + n * np.eye(n)


def _packed(a, upper):
    """Column-major packed storage of a triangle."""
    n = a.shape[0]
    return np.concatenate([a[:j + 1, j] if upper else a[j:, j] for j in range(n)])


@pytest.mark.parametrize("letter", "CZ")
def test_hermitian_family(handle, rng, letter):
    m, n, k = 9, 7, 5
    dtype, tol = TYPES[letter], TOL[letter]
    real = np.float32 if letter == "C" else np.float64
    H = _hermitian(rng, m, letter).astype(dtype)
    B = random(rng, (m, n), letter)
    dC = device(np.full(m * n, np.nan, dtype))
    call(f"cublas{letter}hemm_v2", handle, 0, 1, m, n, scalar(2, dtype), device(stored(np.triu(H), m)), m,
         device(stored(B, m)), m, scalar(0, dtype), dC, m)
    np.testing.assert_allclose(unstored(read(dC, m * n, dtype), m, n, m), 2 * H @ B, rtol=tol, atol=tol)
    A = random(rng, (m, k), letter)
    C0 = _hermitian(rng, m, letter).astype(dtype)
    dC = device(stored(C0, m))
    call(f"cublas{letter}herk_v2", handle, 0, N, m, k, scalar(1.5, real), device(stored(A, m)), m, scalar(0.5, real),
         dC, m)
    got = unstored(read(dC, m * m, dtype), m, m, m)
    np.testing.assert_allclose(np.tril(got), np.tril(1.5 * A @ A.conj().T + 0.5 * C0), rtol=tol, atol=tol)
    Bk = random(rng, (m, k), letter)
    dC = device(stored(C0, m))
    call(f"cublas{letter}her2k_v2", handle, 1, N, m, k, scalar(1 + 1j, dtype), device(stored(A, m)), m,
         device(stored(Bk, m)), m, scalar(2, real), dC, m)
    want = (1 + 1j) * A @ Bk.conj().T + np.conj(1 + 1j) * Bk @ A.conj().T + 2 * C0
    np.testing.assert_allclose(np.triu(unstored(read(dC, m * m, dtype), m, m, m)), np.triu(want), rtol=tol, atol=tol)
    x, y = random(rng, m, letter), random(rng, m, letter)
    dy = device(np.full(m, np.nan, dtype))
    call(f"cublas{letter}hemv_v2", handle, 0, m, scalar(1, dtype), device(stored(np.tril(H), m)), m, device(x), 1,
         scalar(0, dtype), dy, 1)
    np.testing.assert_allclose(read(dy, m, dtype), H @ x, rtol=tol, atol=tol)
    dA = device(stored(H, m))
    call(f"cublas{letter}her_v2", handle, 1, m, scalar(0.5, real), device(x), 1, dA, m)
    np.testing.assert_allclose(np.triu(unstored(read(dA, m * m, dtype), m, m, m)), np.triu(H + 0.5 * np.outer(x, x.conj())),
                               rtol=tol, atol=tol)
    dAP = device(_packed(H, upper=False))
    call(f"cublas{letter}hpr2_v2", handle, 0, m, scalar(1, dtype), device(x), 1, device(y), 1, dAP)
    want = H + np.outer(x, y.conj()) + np.outer(y, x.conj())
    np.testing.assert_allclose(read(dAP, m * (m + 1) // 2, dtype), _packed(want, upper=False), rtol=tol, atol=tol)


@pytest.mark.parametrize("letter", "SD")
def test_symmetric_rank_updates_and_packed_products(handle, rng, letter):
    n = 8
    dtype, tol = TYPES[letter], TOL[letter]
    S = _hermitian(rng, n, letter).astype(dtype)
    x, y = random(rng, n, letter), random(rng, n, letter)
    dA = device(stored(S, n))
    call(f"cublas{letter}syr2_v2", handle, 0, n, scalar(2, dtype), device(x), 1, device(y), 1, dA, n)
    np.testing.assert_allclose(np.tril(unstored(read(dA, n * n, dtype), n, n, n)),
                               np.tril(S + 2 * (np.outer(x, y) + np.outer(y, x))), rtol=tol, atol=tol)
    dy = device(np.full(n, np.nan, dtype))
    call(f"cublas{letter}spmv_v2", handle, 1, n, scalar(1, dtype), device(_packed(S, upper=True)), device(x), 1,
         scalar(0, dtype), dy, 1)
    np.testing.assert_allclose(read(dy, n, dtype), S @ x, rtol=tol, atol=tol)
    dx = device(x)
    call(f"cublas{letter}tpsv_v2", handle, 1, T, 0, n, device(_packed(S, upper=True)), dx, 1)
    np.testing.assert_allclose(read(dx, n, dtype), np.linalg.solve(np.triu(S).T, x), rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("letter", "SZ")
def test_banded_product(handle, rng, letter):
    m, n, kl, ku = 9, 7, 2, 1
    dtype, tol = TYPES[letter], TOL[letter]
    full = random(rng, (m, n), letter)
    band = np.zeros((kl + ku + 1, n), dtype)
    for j in range(n):
        for i in range(max(0, j - ku), min(m, j + kl + 1)):
            band[ku + i - j, j] = full[i, j]
        full[:max(0, j - ku), j] = 0
        full[min(m, j + kl + 1):, j] = 0
    x = random(rng, n, letter)
    dy = device(np.full(m, np.nan, dtype))
    call(f"cublas{letter}gbmv_v2", handle, N, m, n, kl, ku, scalar(1, dtype), device(stored(band, kl + ku + 1)),
         kl + ku + 1, device(x), 1, scalar(0, dtype), dy, 1)
    np.testing.assert_allclose(read(dy, m, dtype), full @ x, rtol=tol, atol=tol)


@pytest.mark.parametrize("letter", "SDCZ")
def test_batched_lu_solve_and_inverse(handle, rng, letter):
    n, nrhs, count = 6, 3, 4
    dtype, tol = TYPES[letter], TOL[letter] * 100
    As = [random(rng, (n, n), letter) + n * np.eye(n, dtype=dtype) for _ in range(count)]
    Bs = [random(rng, (n, nrhs), letter) for _ in range(count)]
    dA = [device(stored(a, n + 1)) for a in As]            # lda n + 1: padding rows
    dB = [device(stored(b, n)) for b in Bs]
    pivots, info = device(np.zeros(n * count, np.int32)), device(np.full(count, -7, np.int32))
    a_array = device(np.array(dA, np.uint64))
    call(f"cublas{letter}getrfBatched", handle, n, a_array, n + 1, pivots, info, count)
    assert np.all(read(info, count, np.int32) == 0)
    piv = read(pivots, n * count, np.int32)
    assert piv.min() >= 1 and piv.max() <= n                      # 1-based
    host_info = np.full(1, 99, np.int32)
    call(f"cublas{letter}getrsBatched", handle, N, n, nrhs, a_array, n + 1, pivots,
         device(np.array(dB, np.uint64)), n, host_info.ctypes.data, count)
    assert host_info[0] == 0
    for a, b, d in zip(As, Bs, dB):
        np.testing.assert_allclose(unstored(read(d, n * nrhs, dtype), n, nrhs, n), np.linalg.solve(a, b), rtol=tol, atol=tol)
    dC = [device(np.full(n * n, np.nan, dtype)) for _ in range(count)]
    call(f"cublas{letter}getriBatched", handle, n, a_array, n + 1, pivots, device(np.array(dC, np.uint64)), n, info, count)
    for a, c in zip(As, dC):
        np.testing.assert_allclose(unstored(read(c, n * n, dtype), n, n, n), np.linalg.inv(a), rtol=tol, atol=tol)
    dI = [device(np.full(n * n, np.nan, dtype)) for _ in range(count)]
    call(f"cublas{letter}matinvBatched", handle, n, device(np.array([device(stored(a, n)) for a in As], np.uint64)), n,
         device(np.array(dI, np.uint64)), n, info, count)
    for a, c in zip(As, dI):
        np.testing.assert_allclose(unstored(read(c, n * n, dtype), n, n, n), np.linalg.inv(a), rtol=tol, atol=tol)
    host_info[0] = 0
    with pytest.raises(CublasError):
        call(f"cublas{letter}getrsBatched", handle, N, n, nrhs, a_array, n - 1, pivots, a_array, n,
             host_info.ctypes.data, count)
    assert host_info[0] == -6                                     # lda, the sixth argument


def test_lu_of_a_singular_matrix_reports_its_zero_pivot(handle):
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    info = device(np.full(1, -1, np.int32))
    call("cublasDgetrfBatched", handle, 2, device(np.array([device(stored(a, 2))], np.uint64)), 2,
         device(np.zeros(2, np.int32)), info, 1)
    assert read(info, 1, np.int32)[0] == 2


@pytest.mark.parametrize("letter", "SDCZ")
def test_batched_triangular_solves_and_packed_conversions(handle, rng, letter):
    m, n, count = 7, 4, 3
    dtype, tol = TYPES[letter], TOL[letter] * 10
    As = [random(rng, (m, m), letter) + m * np.eye(m, dtype=dtype) for _ in range(count)]
    Bs = [random(rng, (m, n), letter) for _ in range(count)]
    dB = [device(stored(b, m)) for b in Bs]
    call(f"cublas{letter}trsmBatched", handle, 0, 0, N, 0, m, n, scalar(2, dtype),
         device(np.array([device(stored(a, m)) for a in As], np.uint64)), m, device(np.array(dB, np.uint64)), m, count)
    for a, b, d in zip(As, Bs, dB):
        np.testing.assert_allclose(unstored(read(d, m * n, dtype), m, n, m), np.linalg.solve(np.tril(a), 2 * b),
                                   rtol=tol, atol=tol)
    A = As[0]
    for uplo, lower in ((0, True), (1, False)):
        packed = device(np.full(m * (m + 1) // 2, np.nan, dtype))
        call(f"cublas{letter}trttp", handle, uplo, m, device(stored(A, m + 2)), m + 2, packed)
        want = np.concatenate([A[j:, j] if lower else A[:j + 1, j] for j in range(m)])
        assert np.array_equal(read(packed, want.size, dtype), want)
        full = device(np.full(m * m, 7, dtype))
        call(f"cublas{letter}tpttr", handle, uplo, m, packed, full, m)
        got = unstored(read(full, m * m, dtype), m, m, m)
        tri = np.tril(np.ones((m, m), bool)) if lower else np.triu(np.ones((m, m), bool))
        assert np.array_equal(got[tri], A[tri]) and np.all(got[~tri] == 7)


@pytest.mark.parametrize("code,dtype,compute", [(0, np.float32, 68), (5, np.complex128, 70), (2, np.float16, 68)])
def test_batched_ex_forms(handle, rng, code, dtype, compute):
    """GemmBatchedEx and GemmStridedBatchedEx: same-type products (CBLAS) and widened ones."""
    m, n, k, count = 6, 5, 4, 3
    scale = np.complex128 if code == 5 else np.float32
    tol = 2e-2 if code == 2 else 1e-5
    As = [random(rng, (m, k), "Z" if code == 5 else "D").astype(dtype) for _ in range(count)]
    Bs = [random(rng, (k, n), "Z" if code == 5 else "D").astype(dtype) for _ in range(count)]
    out_code, out_dtype = (0, np.float32) if code == 2 else (code, dtype)
    strided = device(np.full(count * m * n, np.nan, out_dtype))
    call("cublasGemmStridedBatchedEx", handle, N, N, m, n, k, scalar(1, scale),
         device(np.concatenate([stored(a, m) for a in As])), code, m, m * k,
         device(np.concatenate([stored(b, k) for b in Bs])), code, k, k * n, scalar(0, scale), strided, out_code, m,
         m * n, count, compute, -1)
    pointers = [device(np.full(m * n, np.nan, out_dtype)) for _ in range(count)]
    call("cublasGemmBatchedEx", handle, N, N, m, n, k, scalar(1, scale),
         device(np.array([device(stored(a, m)) for a in As], np.uint64)), code, m,
         device(np.array([device(stored(b, k)) for b in Bs], np.uint64)), code, k, scalar(0, scale),
         device(np.array(pointers, np.uint64)), out_code, m, count, compute, -1)
    got = read(strided, count * m * n, out_dtype)
    for i, (a, b) in enumerate(zip(As, Bs)):
        want = a.astype(np.complex128) @ b
        np.testing.assert_allclose(unstored(got[i * m * n:(i + 1) * m * n], m, n, m), want, rtol=tol, atol=tol)
        np.testing.assert_allclose(unstored(read(pointers[i], m * n, out_dtype), m, n, m), want, rtol=tol, atol=tol)
