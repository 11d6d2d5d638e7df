"""The sanitizer's cost: the suite's kernels (suite.py) checked (ANYCUDA_SANITIZE=memcheck, or
racecheck with --tool) against the same kernels unchecked, in one process, medians of paired rounds (one timed run of each per
round; the ratio is the median of the rounds' ratios). Both outputs are checked against numpy
before anything is timed. Target (issue "Reliability and diagnostics"): memcheck <= 20x.

    python benchmarks/sanitizer.py [--tool memcheck|racecheck] [--size quick|full] [--only saxpy,sgemm] [--rounds 5]
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


def measure(bench_class, size: str, rounds: int, min_run: float, tool: str = "memcheck") -> dict:
    plain = _implementation(bench_class, size, "")
    checked = _implementation(bench_class, size, tool)
    a, b = [], []
    for _ in range(rounds):
        a.append(seconds_per_call(plain, min_run))
        b.append(seconds_per_call(checked, min_run))
    return {"plain_ms": statistics.median(a) * 1e3, "checked_ms": statistics.median(b) * 1e3,
            "ratio": statistics.median(y / x for x, y in zip(a, b))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="quick", choices=("quick", "full"))
    ap.add_argument("--only", default="", help="comma-separated kernel names")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tool", default="memcheck", choices=("memcheck", "racecheck"))
    ap.add_argument("--min-run", type=float, default=0.2, help="seconds each timed run lasts at least")
    args = ap.parse_args(argv)
    only = {n for n in args.only.split(",") if n}
    print(f"{'kernel':<12} {'unchecked ms':>13} {args.tool + ' ms':>12} {'ratio':>7}")
    worst = 0.0
    for bench_class in suite.BENCHMARKS:
        if only and bench_class.name not in only:
            continue
        r = measure(bench_class, args.size, args.rounds, args.min_run, args.tool)
        worst = max(worst, r["ratio"])
        print(f"{bench_class.name:<12} {r['plain_ms']:>13.3f} {r['checked_ms']:>12.3f} {r['ratio']:>6.1f}x", flush=True)
    print(f"largest ratio {worst:.1f}x" + (" (target <= 20x)" if args.tool == "memcheck" else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
