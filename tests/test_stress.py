"""The concurrency stress campaign (scripts/stress.py), short: 13 host threads (8 with streams of
their own, per-thread default streams by handle and as the _ptsz entry points use them, the
legacy default stream) launch, capture graphs, copy, memset, record and query events, run host
functions, synchronise and allocate at once; every result is checked by the script against
numpy, every atomic update counted. The long campaign's figures are in NOTES.md. Its watchdog must report
a deadlock with the threads' stacks instead of hanging."""
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "stress.py"


def _stress(*args, timeout=300):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


def test_short_stress_run_has_no_failure_and_no_deadlock():
    r = _stress("--minutes", "0.2", "--watchdog", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    figures = dict(re.findall(r"(\w+) (\d+)", r.stdout.splitlines()[-2]))
    assert int(figures["launches"]) >= 100 and int(figures["host_functions"]) >= 30 and int(figures["graphs"]) >= 1, \
        r.stdout
    assert r.stdout.splitlines()[-1] == "failures 0"


def test_the_watchdog_reports_a_deadlock_with_every_threads_stack():
    r = _stress("--minutes", "0.05", "--watchdog", "3", "--own", "2", "--per-thread", "1", "--ptsz", "1",
                "--inject-deadlock", timeout=120)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "DEADLOCK: no progress for 3 s in" in r.stdout and "injected" in r.stdout
    assert "--- thread injected" in r.stdout and "never.wait()" in r.stdout   # the blocked host function's stack
