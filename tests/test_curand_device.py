"""cuRAND's device API (curand_kernel.h compiled by nvcc into the program's PTX) runs under
anycuda, and what it computes for each thread's subsequence (NVIDIA's skip-ahead tables) equals
what anycuda's own cuRAND computes with its jump-ahead matrices (curand/device.py): two independent derivations of
the same sequences, XORWOW and Philox, and the first Box-Muller normal."""
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from anycuda.libraries.curand import device, distributions
from anycuda.libraries.curand.kinds import RngType

HERE = Path(__file__).parent
NVCC = shutil.which("nvcc")


def _curand_include():
    try:
        import nvidia
    except ImportError:
        return None
    for base in nvidia.__path__:
        for sub in ("cu13", "curand"):
            if (Path(base) / sub / "include" / "curand_kernel.h").exists():
                return Path(base) / sub / "include"
    return None


INCLUDE = _curand_include()
pytestmark = [pytest.mark.skipif(NVCC is None, reason="needs nvcc (the CUDA toolkit) on PATH"),
              pytest.mark.skipif(INCLUDE is None, reason="needs NVIDIA's cuRAND headers (pip install nvidia-curand)")]


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    folder = tmp_path_factory.mktemp("curand-device")
    headers = folder / "include"
    headers.mkdir()
    for header in INCLUDE.glob("curand*.h"):      # only cuRAND's: the folder's others are another toolkit's
        (headers / header.name).symlink_to(header)
    exe = folder / "curand_device"
    r = subprocess.run([NVCC, "-o", str(exe), str(HERE / "programs" / "curand_device.cu"), f"-I{headers}"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return exe


def test_device_api_sequences_equal_anycudas(program, rng):
    seed, offset = int(rng.integers(1, 2**63)), int(rng.integers(0, 50))
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", str(program), str(seed), str(offset)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.split("\n")[:96]
    for line in lines:
        fields = line.split()
        t = int(fields[0])
        xorwow, philox = [int(v) for v in fields[1:7]], [int(v) for v in fields[7:13]]
        ours = device.sequence(RngType.PSEUDO_XORWOW, seed, t, offset, 8)
        assert xorwow == list(ours[:6]), f"XORWOW, thread {t}"
        assert philox == list(device.sequence(RngType.PSEUDO_PHILOX4_32_10, seed, t, offset, 6)), f"Philox, thread {t}"
        normal = np.asarray(distributions.box_muller_float(ours[6:7], ours[7:8])).reshape(-1)[0]
        assert float(fields[13]) == pytest.approx(float(normal), rel=1e-5, abs=1e-6), f"normal, thread {t}"
