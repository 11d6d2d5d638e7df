"""NVIDIA's own cuBLAS and cuBLASLt (the nvidia-cublas wheel) started through anycuda's
libcuda.so.1, as the fallback for a library anycuda does not replace would be: their handles
are created (cuBLASLt looks its driver functions up by name with dlsym on libcuda.so.1, and
calls CUDA 13's cuCtxGetDevice_v2)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import test_cublas_program as tools


@pytest.mark.skipif(tools.NVCC is None or tools.INCLUDE is None, reason="needs nvcc and NVIDIA's cuBLAS wheel")
def test_nvidias_cublas_handles_are_created(tmp_path):
    libs = tools.INCLUDE.parent / "lib"
    preload = [libs / "libcublas.so.13", libs / "libcublasLt.so.13"]
    if not all(p.exists() for p in preload):
        pytest.skip("NVIDIA's libcublas.so.13 and libcublasLt.so.13 are not in the wheel's lib folder")
    program = tools._build(tmp_path, "nvidia_blas_create", ("libcublas.so.13", "libcublasLt.so.13"))
    env = dict(os.environ, LD_PRELOAD=":".join(map(str, preload)), ANYCUDA_LIBRARIES="1")
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", str(program)], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cublasLtCreate 0 cublasCreate 0" in r.stdout, r.stdout + r.stderr
