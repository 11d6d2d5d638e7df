"""The sanitizers on correct kernels: random kernels of ptx_generators (branches, loops,
barriers, shuffles, shared memory), run checked by each tool on fresh inputs, must give the
model's every word and report nothing. A checked kernel runs on another path than an
unchecked one (memcheck.py: one thread at a time up to its next barrier), so this also
checks that path's results; a false report would make the tools useless on real programs."""
import numpy as np
import pytest

import ptx_generators as gen

TOOLS = ["memcheck", "racecheck", "synccheck", "initcheck"]


@pytest.mark.parametrize("tool", TOOLS)
def test_random_kernels_run_right_and_clean_under(tool, monkeypatch, capfd, rng):
    monkeypatch.setenv("ANYCUDA_SANITIZE", tool)
    monkeypatch.setenv("ANYCUDA_SANITIZE_PRINT_LIMIT", "100000")
    for _ in range(3):
        seed = int(rng.integers(2**31))
        block = int(rng.choice([32, 64, 128, 256]))
        grid = int(rng.integers(1, 4))
        kernel = gen.random_kernel(int(rng.integers(100, 300)), seed, name=f"k{seed}")
        kernel.check_launch(grid, block, np.random.default_rng(seed), max(1, int(rng.random() * 1.5 * grid * block)))
    reports = [line for line in capfd.readouterr().err.splitlines() if line.startswith("=========")]
    assert reports == [], "\n".join(reports[:20])
