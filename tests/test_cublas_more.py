"""anycuda's cuBLAS beyond the core levels: plane rotations (rotg, rotm, rotmg), batched gemv
(also on half and bfloat16), batched QR and least squares, the 3M complex products, and the
legacy API of cublas.h (no handle, scalars by value, errors kept for cublasGetError). Called as
the C library calls them (functions.table(), addresses as integers), against numpy on fresh
random inputs, outputs poisoned first."""
import threading

import numpy as np
import pytest

import anycuda as ac
from library_calls import caller, device, peek, read, scalar, stream_handle
from anycuda.libraries.cublas import functions
from anycuda.libraries.cublas.status import CublasError, Status
from test_cublas import REAL, TOL, TYPES, random, status_of, stored, unstored

TABLE = functions.table()
call = caller(TABLE)
N, T, C = 0, 1, 2


@pytest.fixture
def handle():
    out = np.zeros(1, np.uint64)
    call("cublasCreate_v2", out.ctypes.data)
    yield int(out[0])
    call("cublasDestroy_v2", int(out[0]))


def gated_stream(handle):
    """A stream set on the handle whose work waits until the returned event is set."""
    stream = ac.Stream()
    call("cublasSetStream_v2", handle, stream_handle(stream))
    gate = threading.Event()
    stream.enqueue(gate.wait, 5.0)
    return stream, gate


# ---------------------------------------------------------------- rotations

@pytest.mark.parametrize("letter", "SDCZ")
def test_rotg_makes_the_rotation_that_zeroes_b(handle, rng, letter):
    dtype, real = TYPES[letter], REAL[letter]
    for a0, b0 in [random(rng, 2, letter), (0, random(rng, 1, letter)[0]), (random(rng, 1, letter)[0], 0)]:
        a, b = np.array([a0], dtype), np.array([b0], dtype)
        c, s = np.full(1, np.nan, real), np.full(1, np.nan, dtype)
        call(f"cublas{letter}rotg_v2", handle, a.ctypes.data, b.ctypes.data, c.ctypes.data, s.ctypes.data)
        tol = TOL[letter] * 10
        assert abs(c[0]) ** 2 + abs(s[0]) ** 2 == pytest.approx(1, abs=tol)
        rotated = np.array([[c[0], s[0]], [-np.conj(s[0]), c[0]]]) @ np.array([a0, b0], np.complex128)
        np.testing.assert_allclose(rotated, [a[0], 0], rtol=tol, atol=tol)        # a is overwritten by r
        assert abs(a[0]) == pytest.approx(np.hypot(abs(a0), abs(b0)), rel=tol, abs=tol)
        if letter in "SD":                       # b is overwritten by z, from which c and s come back
            z = s[0] if abs(a0) > abs(b0) else (1 / c[0] if c[0] != 0 else 1)
            assert b[0] == pytest.approx(z, rel=tol, abs=tol)
        else:
            assert b[0] == b0                    # complex rotg reads b only


def test_rotg_in_device_mode_runs_when_the_stream_reaches_it(handle, rng):
    stream, gate = gated_stream(handle)
    call("cublasSetPointerMode_v2", handle, 1)
    a, b = device(np.array([3], np.float64)), device(np.array([4], np.float64))
    c, s = device(np.array([np.nan])), device(np.array([np.nan]))
    call("cublasDrotg_v2", handle, a, b, c, s)
    assert np.isnan(peek(c, 1, np.float64)[0])
    gate.set()
    stream.synchronize()
    assert (read(a, 1, np.float64)[0], read(c, 1, np.float64)[0], read(s, 1, np.float64)[0]) == \
        pytest.approx((5, 0.6, 0.8))


def _modified(param):
    """The 2x2 H that rotm's parameters (flag, h11, h21, h12, h22) describe."""
    flag, h11, h21, h12, h22 = param
    return {-1: [[h11, h12], [h21, h22]], 0: [[1, h12], [h21, 1]], 1: [[h11, 1], [-1, h22]],
            -2: [[1, 0], [0, 1]]}[int(flag)]


@pytest.mark.parametrize("letter", "SD")
@pytest.mark.parametrize("flag", [-1, 0, 1, -2])
def test_rotm_applies_the_flagged_matrix(handle, rng, letter, flag):
    dtype, n = TYPES[letter], 19
    x, y = random(rng, n, letter), random(rng, 2 * n, letter)
    param = np.concatenate([[flag], random(rng, 4, letter)]).astype(dtype)
    dx, dy = device(x), device(y)
    call(f"cublas{letter}rotm_v2", handle, n, dx, 1, dy, -2, param.ctypes.data)
    H = np.array(_modified(param), np.float64)
    yv = y[::2][::-1]                               # incy -2 walks from the far end
    want = H @ np.vstack([x, yv])
    np.testing.assert_allclose(read(dx, n, dtype), want[0], rtol=TOL[letter], atol=TOL[letter])
    got_y = read(dy, 2 * n, dtype)
    np.testing.assert_allclose(got_y[::2][::-1], want[1], rtol=TOL[letter], atol=TOL[letter])
    assert np.array_equal(got_y[1::2], y[1::2])     # elements between the strides untouched


def test_rotm_reads_host_parameters_when_called(handle, rng):
    stream, gate = gated_stream(handle)
    x, y = rng.standard_normal(5), rng.standard_normal(5)
    dx, dy = device(x), device(y)
    param = np.array([-1, 2, 0, 0, 3], np.float64)
    call("cublasDrotm_v2", handle, 5, dx, 1, dy, 1, param.ctypes.data)
    param[:] = [-1, 7, 7, 7, 7]                    # changed before the stream reaches the work
    gate.set()
    stream.synchronize()
    np.testing.assert_allclose(read(dx, 5, np.float64), 2 * x)
    np.testing.assert_allclose(read(dy, 5, np.float64), 3 * y)


@pytest.mark.parametrize("letter", "SD")
def test_rotmg_zeroes_the_second_component(handle, rng, letter):
    dtype = TYPES[letter]
    for _ in range(8):
        d1, d2 = rng.uniform(0.5, 2, 2)
        x1, y1 = rng.standard_normal(2)
        held = [np.array([v], dtype) for v in (d1, d2, x1, y1)]
        param = np.full(5, 9, dtype)
        call(f"cublas{letter}rotmg_v2", handle, *(h.ctypes.data for h in held), param.ctypes.data)
        H = np.array(_modified(param), np.float64)
        tol = TOL[letter] * 10
        new = H @ [x1, y1]
        assert new[1] == pytest.approx(0, abs=tol)
        assert held[2][0] == pytest.approx(new[0], rel=tol, abs=tol)        # x1 becomes H's first component
        # scaled by the new weights, H is a rotation of the old weighted vector: G G^T = I
        G = np.diag(np.sqrt([held[0][0], held[1][0]])) @ H @ np.diag(1 / np.sqrt([d1, d2]))
        np.testing.assert_allclose(G @ G.T, np.eye(2), rtol=tol, atol=tol)


@pytest.mark.parametrize("letter", "CZ")
def test_complex_rot_with_a_complex_sine(handle, rng, letter):
    n, dtype, tol = 17, TYPES[letter], TOL[letter]
    x, y = random(rng, n, letter), random(rng, 3 * n, letter)
    c, s = 0.6, (0.48 - 0.64j)
    dx, dy = device(x), device(y)
    call(f"cublas{letter}rot_v2", handle, n, dx, 1, dy, -3, scalar(c, REAL[letter]), scalar(s, dtype))
    yv = y[::3][::-1]
    np.testing.assert_allclose(read(dx, n, dtype), c * x + s * yv, rtol=tol, atol=tol)
    got = read(dy, 3 * n, dtype)
    np.testing.assert_allclose(got[::3][::-1], c * yv - np.conj(s) * x, rtol=tol, atol=tol)
    assert np.array_equal(got[1::3], y[1::3]) and np.array_equal(got[2::3], y[2::3])


def test_rotation_pointer_rules(handle):
    assert status_of("cublasSrotg_v2", handle, 0, scalar(1, np.float32), scalar(0, np.float32),
                     scalar(0, np.float32)) == Status.INVALID_VALUE
    assert status_of("cublasSrotg_v2", 12345, *(scalar(1, np.float32) for _ in range(4))) == Status.NOT_INITIALIZED
    call("cublasSetPointerMode_v2", handle, 1)
    assert status_of("cublasDrotm_v2", handle, 4, device(np.zeros(4)), 1, device(np.zeros(4)), 1, 0) == \
        Status.INVALID_VALUE


# ---------------------------------------------------------------- batched gemv

def _stored_as(values, code):
    """float values as cuBLAS stores type `code` (H half, T bfloat16, S float)."""
    if code == "T":
        bits = np.asarray(values, np.float32).view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.asarray(values, {"H": np.float16, "S": np.float32}[code])


def _as_float(stored_values, code):
    if code == "T":
        return (stored_values.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return stored_values.astype(np.float64)


GEMV_TYPES = ["S", "D", "C", "Z", "HSH", "HSS", "TST", "TSS"]


def _gemv_case(rng, types, trans, m, n, count):
    """Inputs (as stored, and as the values they hold) of a batch of gemvs."""
    rows, cols = (m, n) if trans == N else (n, m)
    if len(types) == 1:
        As = [random(rng, (m, n), types) for _ in range(count)]
        xs = [random(rng, cols, types) for _ in range(count)]
        ys = [random(rng, rows, types) for _ in range(count)]
        return As, xs, ys, As, xs, ys
    As = [_stored_as(rng.standard_normal((m, n)), types[0]) for _ in range(count)]
    xs = [_stored_as(rng.standard_normal(cols), types[0]) for _ in range(count)]
    ys = [_stored_as(rng.standard_normal(rows), types[2]) for _ in range(count)]
    return (As, xs, ys, [_as_float(a, types[0]) for a in As], [_as_float(x, types[0]) for x in xs],
            [_as_float(y, types[2]) for y in ys])


def _gemv_want(A, x, y, trans, alpha, beta):
    op = A if trans == N else (A.T if trans == T else A.conj().T)
    return alpha * op.astype(np.complex128) @ x + beta * y


def _gemv_tolerance(types):
    return TOL[types] if len(types) == 1 else (2e-2 if types[2] in "HT" else 1e-4)


@pytest.mark.parametrize("types", GEMV_TYPES)
@pytest.mark.parametrize("trans", [N, T, C])
def test_gemv_batched(handle, rng, types, trans):
    m, n, count, lda, incx, incy = 13, 9, 3, 15, 2, -1
    rows, cols = (m, n) if trans == N else (n, m)
    As, xs, ys, Av, xv, yv = _gemv_case(rng, types, trans, m, n, count)
    scale = TYPES[types] if len(types) == 1 else np.float32
    alpha, beta = (1.5 - 0.5j, -0.5 + 1j) if types in "CZ" else (1.5, -0.5)
    dA = [device(stored(a, lda, poison=0)) for a in As]
    dx = [device(np.repeat(x, 2)) for x in xs]               # incx 2: every other element
    dy = [device(y) for y in ys]
    call(f"cublas{types}gemvBatched", handle, trans, m, n, scalar(alpha, scale), device(np.array(dA, np.uint64)),
         lda, device(np.array(dx, np.uint64)), incx, scalar(beta, scale), device(np.array(dy, np.uint64)), incy, count)
    tol = _gemv_tolerance(types)
    for i in range(count):
        got = _as_float(read(dy[i], rows, ys[i].dtype), types[-1]) if len(types) > 1 else read(dy[i], rows, ys[i].dtype)
        want = _gemv_want(Av[i], xv[i], yv[i][::-1], trans, alpha, beta)[::-1]     # incy -1: y reversed
        np.testing.assert_allclose(got, want if types in "CZ" else want.real, rtol=tol, atol=tol)


@pytest.mark.parametrize("types", GEMV_TYPES)
def test_gemv_strided_batched(handle, rng, types):
    m, n, count, trans = 11, 7, 4, T
    rows, cols = n, m
    As, xs, ys, Av, xv, yv = _gemv_case(rng, types, trans, m, n, count)
    scale = TYPES[types] if len(types) == 1 else np.float32
    strideA, stridex, stridey = m * n + 3, cols + 1, rows + 2
    poison = np.nan if ys[0].dtype.kind in "fc" else 0x7FC0
    A = np.zeros(strideA * count, As[0].dtype)
    x = np.zeros(stridex * count, xs[0].dtype)
    y = np.full(stridey * count, poison, ys[0].dtype)            # beta 0: y is written, never read
    for i in range(count):
        A[i * strideA:i * strideA + m * n] = stored(As[i], m, poison=0)
        x[i * stridex:i * stridex + cols] = xs[i]
    dy = device(y)
    call(f"cublas{types}gemvStridedBatched", handle, trans, m, n, scalar(2, scale), device(A), m, strideA, device(x),
         1, stridex, scalar(0, scale), dy, 1, stridey, count)
    got = read(dy, stridey * count, ys[0].dtype)
    tol = _gemv_tolerance(types)
    for i in range(count):
        part = got[i * stridey:i * stridey + rows]
        value = _as_float(part, types[-1]) if len(types) > 1 else part
        np.testing.assert_allclose(value, 2 * Av[i].T @ xv[i], rtol=tol, atol=tol)
        gap = got[i * stridey + rows:(i + 1) * stridey]
        assert np.all(np.isnan(gap)) if gap.dtype.kind in "fc" else np.all(gap == poison)


@pytest.mark.parametrize("args,rule", [
    ((7, 4, 4, 4, 1, 1, 1), "unknown operation"),
    ((N, -1, 4, 4, 1, 1, 1), "negative m"),
    ((N, 4, -1, 4, 1, 1, 1), "negative n"),
    ((N, 4, 4, 3, 1, 1, 1), "lda below m"),
    ((N, 4, 4, 4, 0, 1, 1), "incx 0"),
    ((N, 4, 4, 4, 1, 0, 1), "incy 0"),
    ((N, 4, 4, 4, 1, 1, -1), "negative batch count"),
])
@pytest.mark.parametrize("types", ["S", "HSS"])
def test_gemv_batched_argument_rules(handle, args, rule, types):
    trans, m, n, lda, incx, incy, count = args
    one = scalar(1, np.float32)
    pointers = device(np.zeros(2, np.uint64))
    assert status_of(f"cublas{types}gemvBatched", handle, trans, m, n, one, pointers, lda, pointers, incx, one,
                     pointers, incy, count) == Status.INVALID_VALUE, rule
    buf = device(np.zeros(64, np.float32))
    assert status_of(f"cublas{types}gemvStridedBatched", handle, trans, m, n, one, buf, lda, 16, buf, incx, 4, one,
                     buf, incy, 4, count) == Status.INVALID_VALUE, rule


# ---------------------------------------------------------------- batched QR and least squares

def _householder_q(qr, tau):
    """Q = H_1 ... H_k from LAPACK's reflectors: H_i = I - tau_i v_i v_i^H, v_i below R's diagonal."""
    m = qr.shape[0]
    Q = np.eye(m, dtype=np.complex128)
    for i, t in enumerate(tau):
        v = np.zeros(m, np.complex128)
        v[i] = 1
        v[i + 1:] = qr[i + 1:, i]
        Q = Q @ (np.eye(m) - t * np.outer(v, v.conj()))
    return Q


@pytest.mark.parametrize("letter", "SDCZ")
@pytest.mark.parametrize("m,n", [(9, 6), (5, 8)])
def test_geqrf_batched_factors_each_matrix(handle, rng, letter, m, n):
    dtype, count, lda = TYPES[letter], 3, m + 2
    As = [random(rng, (m, n), letter) for _ in range(count)]
    dA = [device(stored(a, lda, poison=5)) for a in As]
    taus = [device(np.full(min(m, n) + 1, np.nan, dtype)) for _ in range(count)]
    info = np.full(1, 99, np.int32)
    call(f"cublas{letter}geqrfBatched", handle, m, n, device(np.array(dA, np.uint64)), lda,
         device(np.array(taus, np.uint64)), info.ctypes.data, count)
    assert info[0] == 0
    tol = TOL[letter] * 10
    for a, da, dt in zip(As, dA, taus):
        got = read(da, lda * n, dtype)
        assert np.all(got.reshape(n, lda)[:, m:] == 5)          # padding untouched
        qr = unstored(got, m, n, lda)
        tau = read(dt, min(m, n) + 1, dtype)
        assert np.isnan(tau[-1])                                 # nothing written past min(m, n)
        Q = _householder_q(qr, tau[:-1])
        np.testing.assert_allclose(Q @ np.triu(qr), a, rtol=tol, atol=tol)
        np.testing.assert_allclose(Q.conj().T @ Q, np.eye(m), rtol=tol, atol=tol)


@pytest.mark.parametrize("args,position", [
    ((-1, 4, 4, 1), 2), ((4, -1, 4, 1), 3), ((4, 4, 3, 1), 5), ((0, 4, 0, 1), 5), ((4, 4, 4, -1), 8),
])
def test_geqrf_batched_names_the_wrong_argument_in_info(handle, args, position):
    m, n, lda, count = args
    info = np.zeros(1, np.int32)
    pointers = device(np.zeros(2, np.uint64))
    assert status_of("cublasSgeqrfBatched", handle, m, n, pointers, lda, pointers, info.ctypes.data, count) == \
        Status.INVALID_VALUE
    assert info[0] == -position


@pytest.mark.parametrize("letter", "SDCZ")
def test_gels_batched_solves_least_squares(handle, rng, letter):
    m, n, nrhs, count, lda, ldc = 12, 5, 3, 3, 13, 14
    dtype, tol = TYPES[letter], TOL[letter] * 100
    As = [random(rng, (m, n), letter) for _ in range(count)]
    As[1][:, 0] = 0                                              # rank deficient: R(1, 1) is exactly 0
    Cs = [random(rng, (m, nrhs), letter) for _ in range(count)]
    dA = [device(stored(a, lda)) for a in As]
    dC = [device(stored(c, ldc, poison=3)) for c in Cs]
    info = np.full(1, 99, np.int32)
    dev_info = device(np.full(count, -7, np.int32))
    call(f"cublas{letter}gelsBatched", handle, N, m, n, nrhs, device(np.array(dA, np.uint64)), lda,
         device(np.array(dC, np.uint64)), ldc, info.ctypes.data, dev_info, count)
    assert info[0] == 0
    assert list(read(dev_info, count, np.int32)) == [0, 1, 0]
    for i in (0, 2):
        got = read(dC[i], ldc * nrhs, dtype)
        want = np.linalg.lstsq(As[i].astype(np.complex128), Cs[i], rcond=None)[0]
        np.testing.assert_allclose(unstored(got, n, nrhs, ldc), want if letter in "CZ" else want.real,
                                   rtol=tol, atol=tol)
        assert np.all(got.reshape(nrhs, ldc)[:, m:] == 3)
    # without devInfoArray the same call succeeds
    call(f"cublas{letter}gelsBatched", handle, N, m, n, nrhs, device(np.array(dA[:1], np.uint64)), lda,
         device(np.array(dC[:1], np.uint64)), ldc, info.ctypes.data, 0, 1)


@pytest.mark.parametrize("args,position", [
    ((7, 4, 4, 1, 4, 4, 1), 2), ((N, -1, 4, 1, 4, 4, 1), 3), ((N, 4, -1, 1, 4, 4, 1), 4),
    ((N, 4, 4, -1, 4, 4, 1), 5), ((N, 4, 4, 1, 3, 4, 1), 7), ((N, 4, 4, 1, 4, 3, 1), 9),
    ((N, 4, 4, 1, 4, 4, -1), 12),
])
def test_gels_batched_names_the_wrong_argument_in_info(handle, args, position):
    trans, m, n, nrhs, lda, ldc, count = args
    info = np.zeros(1, np.int32)
    pointers = device(np.zeros(2, np.uint64))
    assert status_of("cublasDgelsBatched", handle, trans, m, n, nrhs, pointers, lda, pointers, ldc, info.ctypes.data,
                     0, count) == Status.INVALID_VALUE
    assert info[0] == -position


@pytest.mark.parametrize("trans,m,n", [(T, 6, 4), (C, 6, 4), (N, 4, 6)])
def test_gels_batched_supports_only_untransposed_overdetermined_systems(handle, trans, m, n):
    info = np.full(1, 99, np.int32)
    pointers = device(np.zeros(2, np.uint64))
    assert status_of("cublasZgelsBatched", handle, trans, m, n, 1, pointers, 8, pointers, 8, info.ctypes.data, 0,
                     1) == Status.NOT_SUPPORTED


# ---------------------------------------------------------------- 3M complex products

@pytest.mark.parametrize("name,letter", [("cublasCgemm3m", "C"), ("cublasZgemm3m", "Z"), ("cublasCgemm3mEx", "C"),
                                         ("cublasCgemmEx", "C")])
def test_gemm3m_is_complex_gemm(handle, rng, name, letter):
    m, n, k = 14, 9, 6
    dtype = TYPES[letter]
    A, B, C0 = random(rng, (k, m), letter), random(rng, (k, n), letter), random(rng, (m, n), letter)
    dC = device(stored(C0, m))
    alpha, beta = scalar(0.5 + 2j, dtype), scalar(-1j, dtype)
    if name.endswith("Ex"):
        call(name, handle, C, N, m, n, k, alpha, device(stored(A, k)), 4, k, device(stored(B, k)), 4, k, beta, dC, 4, m)
    else:
        call(name, handle, C, N, m, n, k, alpha, device(stored(A, k)), k, device(stored(B, k)), k, beta, dC, m)
    want = (0.5 + 2j) * A.conj().T.astype(np.complex128) @ B - 1j * C0
    np.testing.assert_allclose(unstored(read(dC, m * n, dtype), m, n, m), want, rtol=TOL[letter], atol=TOL[letter])


def test_gemm3m_batched_forms(handle, rng):
    m, n, k, count = 6, 5, 4, 3
    dtype = np.complex64
    As = [random(rng, (m, k), "C") for _ in range(count)]
    Bs = [random(rng, (k, n), "C") for _ in range(count)]
    one, zero = scalar(1, dtype), scalar(0, dtype)
    dC = [device(np.full(m * n, np.nan, dtype)) for _ in range(count)]
    call("cublasCgemm3mBatched", handle, N, N, m, n, k, one, device(np.array([device(stored(a, m)) for a in As],
                                                                                np.uint64)), m,
         device(np.array([device(stored(b, k)) for b in Bs], np.uint64)), k, zero, device(np.array(dC, np.uint64)), m,
         count)
    strided = device(np.full(m * n * count, np.nan, dtype))
    call("cublasCgemm3mStridedBatched", handle, N, N, m, n, k, one, device(np.concatenate([stored(a, m) for a in As])),
         m, m * k, device(np.concatenate([stored(b, k) for b in Bs])), k, k * n, zero, strided, m, m * n, count)
    got = read(strided, m * n * count, dtype)
    for i, (a, b) in enumerate(zip(As, Bs)):
        np.testing.assert_allclose(unstored(read(dC[i], m * n, dtype), m, n, m), a @ b, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(unstored(got[i * m * n:(i + 1) * m * n], m, n, m), a @ b, rtol=1e-4, atol=1e-4)
    # a 3M product on types the table lacks (8-bit complex) is NOT_SUPPORTED, as for CgemmEx
    assert status_of("cublasCgemm3mEx", handle, N, N, m, n, k, one, dC[0], 7, m, dC[0], 7, k, zero, dC[0], 4, m) == \
        Status.NOT_SUPPORTED


# ---------------------------------------------------------------- the legacy API (cublas.h)

def legacy(name, *args):
    """A legacy routine as the shim calls it (characters as their codes, scalars by value)."""
    return functions.VALUED[name](*args)


@pytest.fixture
def context():
    call("cublasInit")
    yield
    call("cublasShutdown")


def ch(text):
    return ord(text)


@pytest.mark.parametrize("letter", "SDCZ")
def test_legacy_gemm_takes_characters_and_scalars_by_value(context, rng, letter):
    m, n, k = 12, 7, 5
    dtype, tol = TYPES[letter], TOL[letter]
    A, B, C0 = random(rng, (k, m), letter), random(rng, (n, k), letter), random(rng, (m, n), letter)
    alpha, beta = (2 - 1j, 0.5j) if letter in "CZ" else (2, 0.5)
    dC = device(stored(C0, m + 1, poison=4))
    assert legacy(f"cublas{letter}gemm", ch("c"), ch("T"), m, n, k, alpha, device(stored(A, k)), k,
                  device(stored(B, n)), n, beta, dC, m + 1) is None
    got = read(dC, (m + 1) * n, dtype)
    want = alpha * A.conj().T.astype(np.complex128) @ B.T + beta * C0
    np.testing.assert_allclose(unstored(got, m, n, m + 1), want if letter in "CZ" else want.real, rtol=tol, atol=tol)
    assert np.all(got.reshape(n, m + 1)[:, m] == 4)


@pytest.mark.parametrize("letter", "SDCZ")
def test_legacy_level1_returns_its_results(context, rng, letter):
    n = 23
    dtype, tol = TYPES[letter], TOL[letter]
    x, y = random(rng, n, letter), random(rng, n, letter)
    dx, dy = device(x), device(y)
    dot = {"S": "Sdot", "D": "Ddot", "C": "Cdotc", "Z": "Zdotc"}[letter]
    assert legacy(f"cublas{dot}", n, dx, 1, dy, 1) == pytest.approx(np.vdot(x, y), rel=tol, abs=tol)
    two = {"S": "S", "D": "D", "C": "Sc", "Z": "Dz"}[letter]
    assert legacy(f"cublas{two}nrm2", n, dx, 1) == pytest.approx(np.linalg.norm(x), rel=tol)
    assert legacy(f"cublasI{letter.lower()}amax", n, dx, 1) == np.argmax(np.abs(x.real) + np.abs(x.imag)) + 1
    legacy(f"cublas{letter}axpy", n, 3, dx, 1, dy, 1)
    np.testing.assert_allclose(read(dy, n, dtype), y + 3 * x, rtol=tol, atol=tol)
    legacy(f"cublas{letter}scal", n, -2, dx, 1)
    np.testing.assert_allclose(read(dx, n, dtype), -2 * x, rtol=tol, atol=tol)
    if letter in "CZ":                      # a complex vector scaled by a real
        legacy(f"cublas{letter}{'s' if letter == 'C' else 'd'}scal", n, 0.5, dx, 1)
        np.testing.assert_allclose(read(dx, n, dtype), -x, rtol=tol, atol=tol)


@pytest.mark.parametrize("letter", "SDCZ")
def test_legacy_level2_and_triangular_products(context, rng, letter):
    n = 9
    dtype, tol = TYPES[letter], TOL[letter] * 10
    A = (random(rng, (n, n), letter) + n * np.eye(n)).astype(TYPES[letter])
    x, y = random(rng, n, letter), random(rng, n, letter)
    dy = device(y)
    legacy(f"cublas{letter}gemv", ch("t"), n, n, 2, device(stored(A, n)), n, device(x), 1, -1, dy, 1)
    np.testing.assert_allclose(read(dy, n, dtype), 2 * A.T @ x - y, rtol=tol, atol=tol)
    dx = device(x)
    legacy(f"cublas{letter}trsv", ch("U"), ch("N"), ch("n"), n, device(stored(A, n)), n, dx, 1)
    np.testing.assert_allclose(read(dx, n, dtype), np.linalg.solve(np.triu(A), x), rtol=tol, atol=tol)
    B = random(rng, (n, 4), letter)
    dB = device(stored(B, n))                        # legacy trmm works in place on B
    legacy(f"cublas{letter}trmm", ch("L"), ch("l"), ch("N"), ch("U"), n, 4, 3, device(stored(A, n)), n, dB, n)
    L = np.tril(A, -1) + np.eye(n)
    np.testing.assert_allclose(unstored(read(dB, n * 4, dtype), n, 4, n), 3 * L @ B, rtol=tol, atol=tol)
    dA = device(stored(A, n))
    rank1 = {"S": "Sger", "D": "Dger", "C": "Cgerc", "Z": "Zgerc"}[letter]
    legacy(f"cublas{rank1}", n, n, 0.5, device(x), 1, device(y), 1, dA, n)
    np.testing.assert_allclose(unstored(read(dA, n * n, dtype), n, n, n), A + 0.5 * np.outer(x, y.conj()),
                               rtol=tol, atol=tol)


def test_legacy_hermitian_update_takes_a_real_alpha(context, rng):
    n, k = 6, 4
    A = random(rng, (n, k), "Z")
    dC = device(np.zeros(n * n, np.complex128))
    legacy("cublasZherk", ch("U"), ch("N"), n, k, 2.0, device(stored(A, n)), n, 0.0, dC, n)
    got = unstored(read(dC, n * n, np.complex128), n, n, n)
    np.testing.assert_allclose(np.triu(got), np.triu(2 * A @ A.conj().T), rtol=1e-12, atol=1e-12)


def test_legacy_complex_rot_takes_a_real_c_and_a_complex_s(context, rng):
    x, y = random(rng, 6, "Z"), random(rng, 6, "Z")
    dx, dy = device(x), device(y)
    legacy("cublasZrot", 6, dx, 1, dy, 1, 0.8, 0.36 + 0.48j)
    np.testing.assert_allclose(read(dx, 6, np.complex128), 0.8 * x + (0.36 + 0.48j) * y)
    np.testing.assert_allclose(read(dy, 6, np.complex128), 0.8 * y - (0.36 - 0.48j) * x)


def test_xerbla_names_the_routine_and_argument(capfd):
    name = np.frombuffer(b"SGEMM\0", np.uint8).copy()
    legacy("cublasXerbla", name.ctypes.data, 3)
    assert "SGEMM parameter number 3" in capfd.readouterr().err


def test_legacy_complex_rotg_takes_b_by_value(context):
    a, c, s = np.array([3 + 4j], np.complex64), np.zeros(1, np.float32), np.zeros(1, np.complex64)
    legacy("cublasCrotg", a.ctypes.data, 1 - 2j, c.ctypes.data, s.ctypes.data)
    rotated = np.array([[c[0], s[0]], [-np.conj(s[0]), c[0]]]) @ np.array([3 + 4j, 1 - 2j])
    np.testing.assert_allclose(rotated, [a[0], 0], atol=1e-5)


@pytest.mark.parametrize("name,args,rule", [
    ("cublasSgemm", (ch("X"), ch("N"), 2, 2, 2, 1, 0, 2, 0, 2, 0, 0, 2), "unknown operation character"),
    ("cublasSgemm", (ch("N"), ch("N"), -1, 2, 2, 1, 0, 2, 0, 2, 0, 0, 2), "negative m"),
    ("cublasStrsv", (ch("Q"), ch("N"), ch("N"), 2, 0, 2, 0, 1), "unknown fill character"),
    ("cublasStrsv", (ch("U"), ch("N"), ch("V"), 2, 0, 2, 0, 1), "unknown diagonal character"),
    ("cublasStrsm", (ch("M"), ch("U"), ch("N"), ch("N"), 2, 2, 1, 0, 2, 0, 2), "unknown side character"),
])
def test_legacy_argument_rules(context, name, args, rule):
    with pytest.raises(CublasError) as e:
        legacy(name, *args)
    assert e.value.status == Status.INVALID_VALUE, rule


def test_legacy_routines_need_cublas_init():
    with pytest.raises(CublasError) as e:
        legacy("cublasSdot", 1, 0, 1, 0, 1)
    assert e.value.status == Status.NOT_INITIALIZED
    assert status_of("cublasShutdown") == Status.NOT_INITIALIZED
    assert status_of("cublasSetKernelStream", 0) == Status.NOT_INITIALIZED
    call("cublasInit")
    call("cublasInit")                    # a second init keeps the context
    call("cublasShutdown")
    assert status_of("cublasShutdown") == Status.NOT_INITIALIZED


def test_get_error_answers_the_last_failure_once(context):
    assert legacy("cublasGetError") == Status.SUCCESS
    functions.valued_failed("cublasSgemm", Status.NOT_INITIALIZED)
    functions.valued_failed("cublasSgemm", Status.INVALID_VALUE)
    assert legacy("cublasGetError") == Status.INVALID_VALUE
    assert legacy("cublasGetError") == Status.SUCCESS


def test_legacy_alloc_and_free(context, rng):
    out = np.zeros(1, np.uint64)
    call("cublasAlloc", 10, 8, out.ctypes.data)
    x = rng.standard_normal(10)
    call("cublasSetVector", 10, 8, x.ctypes.data, 1, int(out[0]), 1)
    assert legacy("cublasDasum", 10, int(out[0]), 1) == pytest.approx(np.abs(x).sum())
    call("cublasFree", int(out[0]))
    assert status_of("cublasAlloc", 0, 8, out.ctypes.data) == Status.INVALID_VALUE
    assert status_of("cublasAlloc", 4, -1, out.ctypes.data) == Status.INVALID_VALUE
    version = np.zeros(1, np.int32)
    call("cublasGetVersion", version.ctypes.data)
    assert version[0] == functions.VERSION


def test_legacy_routines_run_on_the_kernel_stream(context, rng):
    stream = ac.Stream()
    call("cublasSetKernelStream", stream_handle(stream))
    gate = threading.Event()
    stream.enqueue(gate.wait, 5.0)
    x = rng.standard_normal(8)
    dx = device(x)
    legacy("cublasDscal", 8, 3.0, dx, 1)
    assert np.array_equal(peek(dx, 8, np.float64), x)          # queued behind the gate
    gate.set()
    stream.synchronize()
    np.testing.assert_allclose(read(dx, 8, np.float64), 3 * x)


# ---------------------------------------------------------------- the copies legacy programs read results with

def test_get_vector_waits_for_work_on_a_blocking_stream(handle, rng):
    """cublasGetVector copies as cudaMemcpy does, on the legacy default stream: after a routine
    still queued on the handle's (blocking) stream."""
    stream, gate = gated_stream(handle)
    x = rng.standard_normal(16)
    dx = device(x)
    call("cublasDscal_v2", handle, 16, scalar(2, np.float64), dx, 1)
    threading.Timer(0.2, gate.set).start()
    host = np.full(16, np.nan)
    call("cublasGetVector", 16, 8, dx, 1, host.ctypes.data, 1)
    np.testing.assert_allclose(host, 2 * x)
    stream.synchronize()


@pytest.mark.parametrize("name,args", [
    ("cublasSetVector", (4, 8, 1, 0, 1, 1)), ("cublasGetVector", (4, 0, 1, 1, 1, 1)),
    ("cublasSetMatrix", (4, 2, 8, 1, 3, 1, 4)), ("cublasGetMatrix", (-1, 2, 8, 1, 4, 1, 4)),
    ("cublasSetVectorAsync", (4, 8, 1, 1, 1, -1, 0)), ("cublasGetMatrixAsync", (4, 2, 8, 1, 4, 1, 2, 0)),
])
def test_copy_argument_rules_answer_at_the_call(name, args):
    assert status_of(name, *args) == Status.INVALID_VALUE
