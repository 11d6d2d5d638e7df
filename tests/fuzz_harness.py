"""What the fuzz tests (tests/test_fuzz_*.py) share.

Each fuzz target is a hypothesis test function named `fuzz_*` in a test module. The pytest
test beside it runs that function in a child process (`run_in_child`), so that a segfault or
a hang in native code fails the test, naming the last input, instead of ending the test run.
Inside the child every input runs under a time limit (`within_time_limit`) and may only end
in success or one of the exception types the target allows (`allowed_outcome`).

Settings: a short, derandomized run by default (CI); ANYCUDA_FUZZ_EXAMPLES=N runs N inputs
per target (a campaign, see README.md, "Fuzzing"), with ANYCUDA_FUZZ_RANDOM=1 for a fresh random sequence.

Two drivers draw the inputs. Hypothesis (`fuzz_*`) shrinks a failing input to a small one, but
its engine costs about a millisecond a draw; the plain driver (`fuzz_*_plain`, `plain_run`)
makes input i of a seed from its own numpy generator, some times faster, for campaigns of a
million inputs; a failure names the seed and the input's number, which the target's replay
runs again. Targets describe their choices once, through `Draws` (`pick`, `number`), which
both drivers implement.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, settings, strategies as st

TESTS = Path(__file__).resolve().parent
LAST_INPUT_ENV = "ANYCUDA_FUZZ_LAST_INPUT"
INPUT_TIME_LIMIT = float(os.environ.get("ANYCUDA_FUZZ_INPUT_SECONDS", "20"))


def examples(default: int) -> int:
    """Inputs per target: `default` in CI, ANYCUDA_FUZZ_EXAMPLES in a campaign."""
    return int(os.environ.get("ANYCUDA_FUZZ_EXAMPLES", default))


def fresh() -> bool:
    """Whether this is a campaign's fresh random sequence (ANYCUDA_FUZZ_RANDOM=1), not CI's fixed one."""
    return os.environ.get("ANYCUDA_FUZZ_RANDOM") == "1"


def fuzz_settings(default: int, **more) -> settings:
    """Deterministic in CI (derandomize, no example database); a campaign with
    ANYCUDA_FUZZ_RANDOM=1 draws a fresh random sequence instead."""
    return settings(max_examples=examples(default), deadline=None, database=None,
                    derandomize=not fresh(), print_blob=True,
                    suppress_health_check=list(HealthCheck), **more)


class InputHang(Exception):
    """An input ran past the per-input time limit."""


@contextmanager
def within_time_limit(seconds: float = INPUT_TIME_LIMIT):
    """Raise InputHang in this (main) thread when the body takes longer than `seconds`.
    Native code that never returns to Python is caught by the parent's timeout instead."""
    def expire(_signum, _frame):
        raise InputHang(f"input still running after {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_replaying = [""]          # the plain driver's replay call of the input running, or ""


def record_input(data) -> None:
    """Write the input about to run where the parent reads it after a crash (with the plain
    driver's replay call of it)."""
    path = os.environ.get(LAST_INPUT_ENV)
    if path:
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(_replaying[0] + repr(data)[:200_000])


def allowed_outcome(call, allowed: tuple, data=None):
    """Run call() for one input (recorded first, unless `data` is None: the caller recorded
    it); return its result, or the allowed exception it raised. Any other exception type (or
    a hang) is a finding: AssertionError naming it."""
    if data is not None:
        record_input(data)
    try:
        with within_time_limit():
            return call()
    except allowed as e:
        assert str(e), f"{type(e).__name__} without a message"
        return e
    except InputHang:
        raise AssertionError(f"hang: input ran past {INPUT_TIME_LIMIT} s") from None
    except Exception as e:
        raise AssertionError(f"wrong exception type {type(e).__name__}: {e}") from e


def run_in_child(module: str, target: str, timeout: float = None) -> None:
    """Run `module.target()` in a fresh interpreter; fail with its output and, on a crash or
    hang, the input it was running."""
    timeout = timeout or float(os.environ.get("ANYCUDA_FUZZ_TIMEOUT", 600))
    last = Path(tempfile.gettempdir()) / f"anycuda-fuzz-{os.getpid()}-{target}.txt"
    env = dict(os.environ, **{LAST_INPUT_ENV: str(last)})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH", "")) if p)
    code = f"import {module} as m; m.{target}()"
    try:
        # (-X faulthandler: a crash prints the child's Python stacks into the report)
        done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{target}: hang past {timeout} s; last input: {_read(last)}") from None
    try:
        if done.returncode < 0:
            raise AssertionError(f"{target}: child died of signal {-done.returncode}; last input: {_read(last)}\n"
                                 f"{done.stderr[-4000:]}")
        assert done.returncode == 0, f"{target} found a failure:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
        # (a plain driver's last line names its seed and count: what a campaign's note records)
        print(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else f"{target}: done")
    finally:
        last.unlink(missing_ok=True)


def _read(path: Path) -> str:
    try:
        return path.read_text()[:4000]
    except OSError:
        return "(none recorded)"


class Draws:
    """What a target draws its input with: `pick(options)` one of a sequence, `number(lo, hi)`
    an integer in [lo, hi]. Over hypothesis's `draw` (HypothesisDraws) or a numpy generator
    (PlainDraws)."""

    def pick(self, options):
        raise NotImplementedError

    def number(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def pick_each(self, choices: dict) -> dict:
        """{name: one of its options} for a dict of {name: options}."""
        return {name: self.pick(options) for name, options in choices.items()}


class HypothesisDraws(Draws):
    def __init__(self, draw):
        self.draw = draw

    def pick(self, options):
        return self.draw(st.sampled_from(options))

    def number(self, lo, hi):
        return self.draw(st.integers(lo, hi))


class PlainDraws(Draws):
    def __init__(self, rng):
        self.rng = rng

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def number(self, lo, hi):
        if hi - lo < 2**62:
            return int(self.rng.integers(lo, hi + 1))
        return lo + int(self.rng.integers(0, hi - lo, dtype=np.uint64, endpoint=True))   # past int64's range


def plain_seed() -> int:
    """A fixed seed in CI, a fresh one with ANYCUDA_FUZZ_RANDOM=1."""
    return int.from_bytes(os.urandom(4), "little") if fresh() else 2026


def plain_draws(seed: int, index: int) -> PlainDraws:
    """Input `index` of `seed`'s draws: the same whatever ran before it."""
    return PlainDraws(np.random.default_rng([seed, index]))


def plain_run(replay: str, run_input, default: int) -> None:
    """The plain driver: `run_input(seed, index)` for examples(default) inputs of plain_seed();
    a failure is an AssertionError naming the call that replays it: `replay` with the seed and
    index filled in (a format string: "module.replay({seed}, {index})"). What the inputs leave
    behind is a finding too: threads or mappings that grow from the first input to the last
    (`stays_flat`)."""
    seed, count = plain_seed(), examples(default)
    start = None
    for index in range(count):
        again = replay.format(seed=seed, index=index)
        _replaying[0] = again + ": "
        record_input("")
        try:
            run_input(seed, index)
        except AssertionError as e:
            raise AssertionError(f"input {index} of seed {seed} (replay: {again}): {e}") from e
        if index == 0:                  # (after the first: the runtime's own threads and pools are up)
            start = _resources()
    _replaying[0] = ""
    if start is not None:
        stays_flat(start, f"{count} inputs of seed {seed} ({replay})")
    print(f"{replay}: {count} inputs of seed {seed}, no finding")


# what a run of inputs may leave beyond what its first left: threads (a stream's worker that
# outlived its stream grew fuzz_api by ~140 threads, 8 MiB stacks, a thousand sequences) and
# mappings (a slab of device memory per slot size, compiled code in the compiler's pools)
THREADS_SLACK, MAPPINGS_SLACK = 8, 512


def _resources() -> tuple:
    """(live threads, mappings) of this process."""
    import threading
    with open("/proc/self/maps") as maps:
        return threading.active_count(), sum(1 for _ in maps)


def stays_flat(start: tuple, what: str, seconds: float = 5.0) -> None:
    """Fail where threads or mappings grew past their slack since `start` (_resources()),
    once collected garbage has let its threads end (they end a moment after)."""
    import gc
    import time
    deadline = time.monotonic() + seconds
    while True:
        gc.collect()
        now = _resources()
        if now[0] <= start[0] + THREADS_SLACK and now[1] <= start[1] + MAPPINGS_SLACK:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} left resources behind: threads {start[0]} -> {now[0]}, "
                                 f"mappings {start[1]} -> {now[1]}")
        time.sleep(0.05)
