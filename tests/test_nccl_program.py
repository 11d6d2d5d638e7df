"""A program linked against anycuda's libnccl.so.2 (built with nvcc, declaring the NCCL
prototypes itself) runs under `anycuda run` over 3 devices of one process: kernels and
collectives ordered on each device's stream, results checked against numpy; and CuPy's own NCCL
binding, unchanged, over the same 3 devices."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from test_cublas_program import HERE, NVCC

pytestmark = pytest.mark.skipif(NVCC is None, reason="needs nvcc (the CUDA toolkit) on PATH")
N, DEVICES = 1000, 3


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    folder = tmp_path_factory.mktemp("nccl")
    shim = subprocess.run([sys.executable, "-m", "anycuda.cli", "shim-path"], capture_output=True, text=True,
                          check=True).stdout.strip()
    exe = folder / "nccl_devices"
    r = subprocess.run([NVCC, "-o", str(exe), str(HERE / "programs" / "nccl_devices.cu"), f"-L{shim}",
                        "-l:libnccl.so.2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return exe


def test_nccl_program_over_three_devices(program, tmp_path, rng):
    data = rng.standard_normal((DEVICES, N)).astype(np.float32)
    data.tofile(tmp_path / "in.bin")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["ANYCUDA_DEVICES"] = str(DEVICES)
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", str(program), str(tmp_path / "in.bin"),
                        str(tmp_path / "out.bin")], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and "done" in r.stdout, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    lines = r.stdout.splitlines()
    assert lines[0] == f"devices {DEVICES} version 23203"
    assert lines[1:1 + DEVICES] == [f"comm {d} count {DEVICES} rank {d}" for d in range(DEVICES)]
    made = 2 * data + np.arange(DEVICES, dtype=np.float32)[:, None]
    want = np.square(made.sum(axis=0))
    got = np.fromfile(tmp_path / "out.bin", np.float32).reshape(DEVICES, N)
    for d in range(DEVICES):
        np.testing.assert_allclose(got[d], want, rtol=1e-5, atol=1e-5)
    gathered = " ".join(str(v) for d in range(DEVICES) for v in (d, 10 * d, 100 * d, -d))
    last = DEVICES - 1
    for d in range(DEVICES):
        assert f"gathered {d}: {gathered}" in lines
        assert f"broadcast {d}: {last + 0.5:g} {last * 1.25:g} {-1.0 * last:g}" in lines
        assert f"ring {d}: {1000 + d} {1000 + (d - 1) % DEVICES}" in lines
    assert 'bad type 4 "invalid argument" last error has type: 1' in lines
    assert "not implemented 5" in lines                     # ncclInvalidUsage, named once on stderr
    assert "ncclCommInitRankScalable is not implemented" in r.stderr


def test_cupy_nccl_over_three_devices(tmp_path, rng):
    """CuPy's cupy.cuda.nccl, unchanged, finds anycuda's libnccl.so.2 under `anycuda run`."""
    from test_cupy import _skip_without_cupy
    import json
    _skip_without_cupy()
    data = rng.standard_normal((DEVICES, 50)).astype(np.float32)
    data.tofile(tmp_path / "in.bin")
    env = {k: v for k, v in os.environ.items() if k not in ("ANYCUDA_NVRTC", "CUPY_COMPILE_WITH_PTX")}
    env.update(ANYCUDA_DEVICES=str(DEVICES), CUPY_CACHE_DIR=str(tmp_path / "cupy"), ANYCUDA_QUIET="1")
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", sys.executable,
                        str(HERE / "programs" / "cupy_nccl.py"), str(tmp_path / "in.bin")],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr[-3000:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["version"] == 23203 and out["ranks"] == [0, 1, 2]
    for d in range(DEVICES):
        np.testing.assert_array_equal(out[f"max{d}"], data.max(axis=0))
        np.testing.assert_array_equal(out[f"bcast{d}"], data[2])
        np.testing.assert_array_equal(out[f"gathered{d}"], np.tile(data.max(axis=0), DEVICES))
