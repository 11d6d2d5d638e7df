"""The sanitizer's cost: the suite's kernels (suite.py) built for each tool (ANYCUDA_SANITIZE=
memcheck, initcheck, racecheck, synccheck) against the same kernels unchecked, in one process, medians of rounds (one
timed run of each build per round; a ratio is the median of the rounds' ratios). Every output is
checked against numpy before anything is timed. Target (issue "Reliability and diagnostics"):
memcheck <= 20x.

    python benchmarks/sanitizer.py [--size quick|full] [--only saxpy,sgemm] [--tools memcheck,initcheck] [--rounds 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("ANYCUDA_JIT", "optimised")     # both columns time optimised code, not the quick tier
sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite  # noqa: E402  (benchmarks/ is a folder of scripts)
from libraries import seconds_per_call  # noqa: E402


@contextmanager
def sanitizing(tool: str):
    """ANYCUDA_SANITIZE=tool while the block runs: a kernel is compiled checked or not at its
    first launch (and stays so)."""
    before = os.environ.get("ANYCUDA_SANITIZE")
    os.environ["ANYCUDA_SANITIZE"] = tool
    try:
        yield
    finally:
        if before is None:
            del os.environ["ANYCUDA_SANITIZE"]
        else:
            os.environ["ANYCUDA_SANITIZE"] = before


def _implementation(bench_class, size: str, tool: str):
    """run() of one kernel's anycuda implementation, compiled under `tool`, its output checked."""
    bench = bench_class(size)
    with sanitizing(tool):
        run, result = bench.anycuda(suite.AnyCUDA())
        run()
        bench.check(result())
    return run


def measure(bench_class, size: str, tools: list, rounds: int, min_run: float) -> dict:
    """{build: (median ms, median ratio to the unchecked build)}; the unchecked build is ''."""
    runs = {tool: _implementation(bench_class, size, tool) for tool in [""] + tools}
    times = {tool: [] for tool in runs}
    for _ in range(rounds):
        for tool, run in runs.items():
            times[tool].append(seconds_per_call(run, min_run))
    return {tool: (statistics.median(t) * 1e3, statistics.median(y / x for x, y in zip(times[""], t)))
            for tool, t in times.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="quick", choices=("quick", "full"))
    ap.add_argument("--only", default="", help="comma-separated kernel names")
    ap.add_argument("--tools", default="memcheck,initcheck", help="comma-separated sanitizer tools")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-run", type=float, default=0.2, help="seconds each timed run lasts at least")
    args = ap.parse_args(argv)
    only = {n for n in args.only.split(",") if n}
    tools = [t for t in args.tools.split(",") if t]
    print(f"{'kernel':<12} {'unchecked ms':>13}" + "".join(f" {t + ' ms':>14} {'ratio':>7}" for t in tools))
    worst = {tool: 0.0 for tool in tools}
    for bench_class in suite.BENCHMARKS:
        if only and bench_class.name not in only:
            continue
        r = measure(bench_class, args.size, tools, args.rounds, args.min_run)
        for tool in tools:
            worst[tool] = max(worst[tool], r[tool][1])
        print(f"{bench_class.name:<12} {r[''][0]:>13.3f}" +
              "".join(f" {r[t][0]:>14.3f} {r[t][1]:>6.1f}x" for t in tools), flush=True)
    print("largest ratio: " + ", ".join(f"{t} {worst[t]:.1f}x" for t in tools) + " (target for memcheck <= 20x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
