"""cuRAND's device API (curand_kernel.h compiled by nvcc into the program's PTX) runs under
anycuda, and what it computes for each thread's subsequence (NVIDIA's skip-ahead tables) equals
what anycuda's own cuRAND computes with its jump-ahead matrices (curand/device.py): two
independent derivations of the same sequences, for XORWOW and Philox (and the first Box-Muller
normal), MRG32k3a (the skip-ahead tables of curand_precalc.h) and Sobol32 (from the library's
direction vectors). MTGP32's device API (curandMakeMTGP32KernelState and NVIDIA's parameter sets
compiled into the program, curand() on a state shared by a block's threads) against anycuda's own
MTGP32 (generators/mtgp32.py)."""
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from anycuda.libraries.curand import device, distributions
from anycuda.libraries.curand.generators import mtgp32
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


def _build(folder, name: str, with_libcurand: bool = False):
    """Compile tests/programs/<name>.cu against the cuRAND headers linked into `folder/include`
    (and against anycuda's libcurand where the program calls the host library)."""
    exe = folder / name
    link = []
    if with_libcurand:
        shim = subprocess.run([sys.executable, "-m", "anycuda.cli", "shim-path"], capture_output=True, text=True,
                              check=True).stdout.strip()
        link = [f"-L{shim}", "-l:libcurand.so.10"]
    r = subprocess.run([NVCC, "-o", str(exe), str(HERE / "programs" / f"{name}.cu"), f"-I{folder / 'include'}"] + link,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return exe


def _run(exe, *args) -> list:
    """The lines a program prints under `anycuda run`; it must succeed."""
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", str(exe), *map(str, args)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip().split("\n")


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    folder = tmp_path_factory.mktemp("curand-device")
    headers = folder / "include"
    headers.mkdir()
    for header in INCLUDE.glob("curand*.h"):      # only cuRAND's: the folder's others are another toolkit's
        (headers / header.name).symlink_to(header)
    return _build(folder, "curand_device")


def test_device_api_sequences_equal_anycudas(program, rng):
    seed, offset = int(rng.integers(1, 2**63)), int(rng.integers(0, 50))
    lines = _run(program, seed, offset)[:96]
    for line in lines:
        fields = line.split()
        t = int(fields[0])
        xorwow, philox = [int(v) for v in fields[1:7]], [int(v) for v in fields[7:13]]
        ours = device.sequence(RngType.PSEUDO_XORWOW, seed, t, offset, 8)
        assert xorwow == list(ours[:6]), f"XORWOW, thread {t}"
        assert philox == list(device.sequence(RngType.PSEUDO_PHILOX4_32_10, seed, t, offset, 6)), f"Philox, thread {t}"
        normal = np.asarray(distributions.box_muller_float(ours[6:7], ours[7:8])).reshape(-1)[0]
        assert float(fields[13]) == pytest.approx(float(normal), rel=1e-5, abs=1e-6), f"normal, thread {t}"


@pytest.fixture(scope="module")
def discrete_program(program):
    return _build(program.parent, "curand_discrete", with_libcurand=True)


def test_kernels_draw_from_poisson_distribution_objects(discrete_program, rng):
    """curandCreatePoissonDistribution's object is what curand_kernel.h reads: the square-histogram
    table (lambda 10, 1000: one word per draw) or mean and deviation (5000: a double normal pair)."""
    seed = int(rng.integers(1, 2**63))
    lines = _run(discrete_program, seed)
    assert lines[-1] == "destroy twice: 101"                   # CURAND_STATUS_NOT_INITIALIZED
    for line in lines[:64]:
        t, *draws = [int(v) for v in line.split()]
        words = device.sequence(RngType.PSEUDO_XORWOW, seed, t, 0, 4)
        assert draws[:2] == list(distributions.poisson_from_words(words[:2], 10.0)), f"lambda 10, thread {t}"
        assert draws[2:4] == list(distributions.poisson_from_words(words[:2], 1000.0)), f"lambda 1000, thread {t}"
        z = np.asarray(distributions.box_muller_double(*(words[i:i + 1] for i in range(4)))).reshape(-1)
        expected = (math.sqrt(5000.0) * z + 5000.0 + 0.5).astype(np.int64)
        assert np.abs(np.array(draws[4:]) - expected).max() <= 1 and (draws[4:] == expected).sum() >= 1, f"5000, {t}"


@pytest.fixture(scope="module")
def mtgp32_program(program):
    return _build(program.parent, "curand_device_mtgp32")


@pytest.mark.parametrize("threads", [256, 96])
def test_mtgp32_device_api_equals_anycudas(mtgp32_program, rng, threads):
    """Three blocks, three rounds of curand() per thread: each block's words in the order drawn are
    its parameter set's sequence from seed (s ^ s >> 32) + block + 1, whatever the block size."""
    sets = mtgp32.parameter_sets()
    assert sets is not None, "NVIDIA's curand_mtgp32dc_p_11213.h is beside the curand_kernel.h this test compiles with"
    seed = int(rng.integers(1, 2**63))
    lines = _run(mtgp32_program, seed, threads)
    folded = (seed ^ (seed >> 32)) & 0xFFFFFFFF
    assert len(lines) == 3
    for line in lines:
        b, *drawn = [int(v) for v in line.split()]
        state = np.array(mtgp32.init_state(sets[b], folded + b + 1), np.uint32)
        expected, _ = mtgp32.block_words(sets[b], sets[0]["mask"], state, 3 * threads)
        assert drawn == list(expected), f"block {b}"


@pytest.fixture(scope="module")
def more_program(program):
    return _build(program.parent, "curand_device_more", with_libcurand=True)


def test_mrg32k3a_and_sobol_device_apis_equal_anycudas(more_program, rng):
    """MRG32k3a's curand_init (its skip-ahead tables) per thread's subsequence and offset, and
    Sobol32's curand_init from anycuda's direction vectors at an offset, against anycuda's own
    sequences of the same states."""
    from anycuda.libraries.curand.generators import sobol
    seed, offset = int(rng.integers(1, 2**63)), int(rng.integers(0, 5000))
    lines = [line.split() for line in _run(more_program, seed, offset)]
    mrg = [line for line in lines if line[0] == "mrg"]
    quasi = [line for line in lines if line[0] == "sobol"]
    assert len(mrg) == 64 and len(quasi) == 4
    for _, t, *words in mrg:
        want = device.sequence(RngType.PSEUDO_MRG32K3A, seed, int(t), offset, 4)
        assert [int(w) for w in words] == list(want), f"MRG32k3a, thread {t}"
    for _, d, *words in quasi:
        assert [int(w) for w in words] == list(sobol.device_sequence(int(d), offset, 8)), f"Sobol32, dimension {d}"
