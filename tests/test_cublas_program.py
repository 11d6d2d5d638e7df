"""A program linked against cuBLAS (NVIDIA's headers, anycuda's libcublas.so.13) runs under
`anycuda run` with NVIDIA's library nowhere on the loader path: every result is checked
against numpy on fresh random inputs (tests/programs/cublas_calls.cu takes them, in order,
from a pool of random doubles this test writes)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
NVCC = shutil.which("nvcc")


def _cublas_include():
    try:
        import nvidia
    except ImportError:
        return None
    for base in nvidia.__path__:
        for sub in ("cu13", "cublas"):
            folder = Path(base) / sub / "include"
            if (folder / "cublas_v2.h").exists():
                return folder
    return None


INCLUDE = _cublas_include()
pytestmark = [pytest.mark.skipif(NVCC is None, reason="needs nvcc (the CUDA toolkit) on PATH"),
              pytest.mark.skipif(INCLUDE is None, reason="needs NVIDIA's cuBLAS headers (pip install nvidia-cublas)")]

m, n, k, batch = 67, 45, 33, 3


class Pool:
    """The program's inputs: it takes them from the pool in this order."""

    def __init__(self, values):
        self.values, self.at = values, 0

    def take(self, count, dtype=np.float64):
        v = self.values[self.at:self.at + count]
        self.at += count
        return v.astype(dtype)


class Output:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def read(self, count, dtype):
        size = np.dtype(dtype).itemsize * count
        v = np.frombuffer(self.data[self.at:self.at + size], dtype=dtype)
        self.at += size
        return v


def col(v, rows, cols, ld=None):
    """A column-major matrix stored with leading dimension `ld`."""
    ld = ld or rows
    return v.reshape(cols, ld).T[:rows]


def bf16(x):
    bits = np.asarray(x, np.float32).view(np.uint32)
    return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).view(np.float32)


def _build(folder, name, library):
    """programs/<name>.cu built with nvcc against anycuda's `library` (a name, or several)."""
    shim = subprocess.run([sys.executable, "-m", "anycuda.cli", "shim-path"], capture_output=True, text=True,
                          check=True).stdout.strip()
    # only cuBLAS's headers from the wheel: its folder also holds CUDA runtime headers of another
    # toolkit version than nvcc's, which nvcc refuses
    headers = folder / "include"
    headers.mkdir(exist_ok=True)
    for header in INCLUDE.glob("cublas*.h"):
        (headers / header.name).unlink(missing_ok=True)
        (headers / header.name).symlink_to(header)
    exe = folder / name
    r = subprocess.run([NVCC, "-o", str(exe), str(HERE / "programs" / f"{name}.cu"), f"-I{headers}",
                        f"-L{shim}", *[f"-l:{lib}" for lib in ((library,) if isinstance(library, str) else library)]],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("cublas"), "cublas_calls", "libcublas.so.13")


@pytest.fixture(scope="module")
def lt_program(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("cublaslt"), "cublaslt_calls", "libcublasLt.so.13")


@pytest.fixture(scope="module")
def legacy_program(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("cublas_legacy"), "cublas_legacy", "libcublas.so.13")


def run(program, tmp_path, rng):
    pool = rng.standard_normal(200_000)
    pool.tofile(tmp_path / "pool.bin")
    env = {key: value for key, value in os.environ.items() if key != "LD_LIBRARY_PATH"}
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", str(program), str(tmp_path / "pool.bin"),
                        str(tmp_path / "out.bin")], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and "done" in r.stdout, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    said = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    return Pool(pool), Output((tmp_path / "out.bin").read_bytes()), said, r.stderr


def test_cublas_program_gives_numpys_answers(program, tmp_path, rng):
    p, out, said, stderr = run(program, tmp_path, rng)
    f32 = dict(rtol=2e-5, atol=2e-5)
    assert said["version"] == "130100"

    lda, ldc = k + 2, m + 1                                  # 1. Sgemm T,N, beta 0.5, padded C
    A, B, C0 = p.take(lda * m, np.float32), p.take(k * n, np.float32), p.take(ldc * n, np.float32)
    got = out.read(ldc * n, np.float32)
    want = 1.5 * col(A, k, m, lda).T.astype(np.float64) @ col(B, k, n) + 0.5 * col(C0, m, n, ldc)
    np.testing.assert_allclose(col(got, m, n, ldc), want, **f32)
    assert np.array_equal(got.reshape(n, ldc)[:, m], C0.reshape(n, ldc)[:, m])      # padding untouched

    A, B = p.take(m * k), p.take(n * k)                      # 2. Dgemm N,T, beta 0 over NaN
    got = out.read(m * n, np.float64)
    np.testing.assert_allclose(col(got, m, n), -0.75 * col(A, m, k) @ col(B, n, k).T, rtol=1e-12, atol=1e-12)

    a, b = p.take(2 * k * m), p.take(2 * k * n)              # 3. Zgemm C,N
    A, B = a.view(np.complex128), b.view(np.complex128)
    got = out.read(2 * m * n, np.float64).view(np.complex128)
    np.testing.assert_allclose(col(got, m, n), (1 + 2j) * col(A, k, m).conj().T @ col(B, k, n), rtol=1e-12, atol=1e-12)

    sa = m * k + 5                                           # 4. strided batched
    A, B = p.take(sa * batch, np.float32), p.take(k * n * batch, np.float32)
    got = out.read(m * n * batch, np.float32)
    for i in range(batch):
        want = col(A[i * sa:i * sa + m * k], m, k).astype(np.float64) @ col(B[i * k * n:(i + 1) * k * n], k, n)
        np.testing.assert_allclose(col(got[i * m * n:(i + 1) * m * n], m, n), want, **f32)

    A, B = p.take(m * k, np.float32), p.take(k * n, np.float32)       # 5. half in, float out
    got = out.read(m * n, np.float32)
    want = col(A.astype(np.float16), m, k).astype(np.float64) @ col(B.astype(np.float16), k, n)
    np.testing.assert_allclose(col(got, m, n), want, **f32)

    A, B = p.take(k * m, np.float32), p.take(k * n, np.float32)       # 6. bfloat16 in and out
    got = (out.read(m * n, np.uint16).astype(np.uint32) << 16).view(np.float32)
    want = 0.5 * col(bf16(A), k, m).T.astype(np.float64) @ col(bf16(B), k, n)
    np.testing.assert_allclose(col(got, m, n), want, rtol=1e-2, atol=1e-2)

    a, b, c = p.take(m * k), p.take(k * n), p.take(m * n)  # 7. int8 in, int32 out
    A, B = (a * 40).astype(np.int8), (b * 40).astype(np.int8)
    C0 = (c * 1000).astype(np.int32)
    got = out.read(m * n, np.int32)
    want = 2 * (col(A, m, k).astype(np.int64) @ col(B, k, n)) + col(C0, m, n)
    assert np.array_equal(col(got, m, n), want)

    x, y = p.take(n, np.float32), p.take(n, np.float32)    # 8. level 1
    dot = np.dot(x.astype(np.float64), y)
    assert float(said["sdot"]) == pytest.approx(dot, rel=1e-5, abs=1e-5)
    assert float(said["snrm2"]) == pytest.approx(np.linalg.norm(x), rel=1e-6)
    assert int(said["isamax"]) == np.argmax(np.abs(x)) + 1
    assert out.read(1, np.float32)[0] == pytest.approx(dot, rel=1e-5, abs=1e-5)
    np.testing.assert_allclose(out.read(n, np.float32), (y + 2 * x) * np.float32(1 / 3), **f32)

    A, x, B = p.take(m * m, np.float32), p.take(m, np.float32), p.take(m * n, np.float32)   # 9, 10
    A = col(A, m, m).copy()
    A[np.diag_indices(m)] += m
    np.testing.assert_allclose(out.read(m, np.float32), A.astype(np.float64) @ x, rtol=1e-4, atol=1e-4)
    X = np.linalg.solve(np.tril(A).astype(np.float64), 2 * col(B, m, n))
    np.testing.assert_allclose(col(out.read(m * n, np.float32), m, n), X, rtol=1e-4, atol=1e-4)

    A, B = p.take(n * m, np.float32), p.take(m * n, np.float32)       # 11. geam
    np.testing.assert_allclose(col(out.read(m * n, np.float32), m, n), 2 * col(A, n, m).T - col(B, m, n), **f32)

    for name in ("lda_too_small", "negative_m", "bad_operation", "bad_pointer_mode"):     # 12.
        assert said[name] == "7", name
    assert said["unsupported_types"] == "15" and said["not_implemented"] == "15"
    assert "cublasUint8gemmBias is not implemented" in stderr
    assert said["status_name"] == "CUBLAS_STATUS_INVALID_VALUE"

    assert said["same_stream"] == "1"                        # 13. ordered after the kernel
    A, B = p.take(m * k, np.float32), p.take(k * n, np.float32)
    want = col(3 * A, m, k).astype(np.float64) @ col(B, k, n)
    np.testing.assert_allclose(col(out.read(m * n, np.float32), m, n), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(col(out.read(m * n, np.float32), m, n), 2 * want, rtol=1e-4, atol=1e-4)   # 14.
    assert out.at == len(out.data)
    assert said["destroyed_twice"] == "1"


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def test_cublaslt_layer_forward_and_backward(lt_program, tmp_path, rng):
    """llm.c's pattern: GELU_AUX_BIAS forward, plain and DGELU backward products, BGRADB."""
    p, out, said, stderr = run(lt_program, tmp_path, rng)
    C, OC, BT = 48, 80, 33
    back = lambda v: (v.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    W = col(bf16(p.take(C * OC, np.float32)), C, OC).astype(np.float64)
    inp = col(bf16(p.take(C * BT, np.float32)), C, BT).astype(np.float64)
    bias = bf16(p.take(OC, np.float32)).astype(np.float64)
    dout = col(bf16(p.take(OC * BT, np.float32)), OC, BT).astype(np.float64)
    tol = dict(rtol=3e-2, atol=3e-2)
    got = {name: back(out.read(count, np.uint16)) for name, count in
           (("out", OC * BT), ("pre", OC * BT), ("dinp", C * BT), ("dpre", OC * BT), ("dweight", C * OC),
            ("dbias", OC))}
    pre = W.T @ inp + bias[:, None]
    np.testing.assert_allclose(col(got["pre"], OC, BT), pre, **tol)
    np.testing.assert_allclose(col(got["out"], OC, BT), gelu(pre), **tol)
    np.testing.assert_allclose(col(got["dinp"], C, BT), W @ dout, **tol)
    h = 1e-6
    stored_pre = col(got["pre"], OC, BT)
    dpre = dout * (gelu(stored_pre + h) - gelu(stored_pre - h)) / (2 * h)
    np.testing.assert_allclose(col(got["dpre"], OC, BT), dpre, **tol)
    stored_dpre = col(got["dpre"], OC, BT)
    np.testing.assert_allclose(col(got["dweight"], C, OC), inp @ stored_dpre.T, rtol=3e-2, atol=6e-2)
    np.testing.assert_allclose(got["dbias"], stored_dpre.sum(axis=1), rtol=3e-2, atol=6e-2)
    assert out.at == len(out.data)


def test_cublas_legacy_program_gives_numpys_answers(legacy_program, tmp_path, rng):
    """cublas.h's API: no handle, scalars (complex too) by value, characters, returned results,
    cublasGetError; a v2 rotg and batched gemv beside it."""
    p, out, said, stderr = run(legacy_program, tmp_path, rng)
    m, n, k, count = 37, 29, 21, 3
    f32 = dict(rtol=2e-5, atol=2e-5)
    assert said["dot_before_init"] == "0"
    assert said["before_init"] == "1" and said["after_reading"] == "0"       # NOT_INITIALIZED, read once

    A, B, C0 = p.take(k * m, np.float32), p.take(k * n, np.float32), p.take((m + 2) * n, np.float32)   # 2.
    got = out.read((m + 2) * n, np.float32)
    want = 1.5 * col(A, k, m).T.astype(np.float64) @ col(B, k, n) - 0.5 * col(C0, m, n, m + 2)
    np.testing.assert_allclose(col(got, m, n, m + 2), want, **f32)
    assert np.array_equal(got.reshape(n, m + 2)[:, m:], C0.reshape(n, m + 2)[:, m:])

    A, x, _ = p.take(m * n), p.take(n), p.take(m)                                # 3.
    y = out.read(m, np.float64)
    np.testing.assert_allclose(y, 2 * col(A, m, n) @ x, rtol=1e-12, atol=1e-12)
    assert float(said["ddot"]) == pytest.approx(y @ y, rel=1e-12)
    assert float(said["dnrm2"]) == pytest.approx(np.linalg.norm(x), rel=1e-12)
    assert int(said["idamax"]) == np.argmax(np.abs(x)) + 1

    A, B = p.take(2 * k * m).view(np.complex128), p.take(2 * k * n).view(np.complex128)     # 4.
    got = out.read(m * n, np.complex128)
    np.testing.assert_allclose(col(got, m, n), (1 - 2j) * col(A, k, m).conj().T @ col(B, k, n), rtol=1e-12,
                               atol=1e-12)
    x, y = p.take(2 * n, np.float32).view(np.complex64), p.take(2 * n, np.float32).view(np.complex64)
    re, im = (float(v) for v in said["cdotc"].split())
    assert re + 1j * im == pytest.approx(np.vdot(x.astype(np.complex128), y), rel=1e-5, abs=1e-5)

    p.take(4)                                                                     # 5. errors
    assert said["bad_character"] == "7" and said["read_twice"] == "0" and said["negative_n"] == "7"
    assert said["alloc_zero"] == "7"

    x = p.take(n, np.float32)                                                     # 6. kernel stream
    np.testing.assert_allclose(out.read(n, np.float32), 3 * x, **f32)

    a, b = p.take(2, np.float32)                                                  # 7. v2 rotg, gemvBatched
    r, z, c, s = (float(v) for v in said["rotg"].split())
    assert c * c + s * s == pytest.approx(1, abs=1e-6)
    assert c * a + s * b == pytest.approx(r, rel=1e-5, abs=1e-6) and abs(-s * a + c * b) < 1e-5
    assert z == pytest.approx(s if abs(a) > abs(b) else 1 / c, rel=1e-5)
    inputs = [(p.take(m * n), p.take(m)) for _ in range(count)]
    for A, x in inputs:
        np.testing.assert_allclose(out.read(n, np.float64), 0.5 * col(A, m, n).T @ x, rtol=1e-12, atol=1e-12)
    assert out.at == len(out.data)
    assert said["shutdown_twice"] == "1"
