"""anycuda benchmark suite: each kernel (suite.py) as (1) CUDA C++ through anycuda, (2) the
same computation hand-written in C (gcc -O3 -march=native -fopenmp), (3) OpenCL C on PoCL
and (4) Numba's CUDA simulator, on the same inputs, in one run. Every implementation's
output is checked against numpy before it is timed.

    python benchmarks/run.py                  # everything; table on stdout,
                                              # benchmarks/results.json and results.png
    python benchmarks/run.py --quick          # small sizes, few repeats (smoke run)
    python benchmarks/run.py --only sgemm,scan --no-sim --no-extras
    python benchmarks/run.py --only idioms --no-extras    # groups: suite (the twelve), idioms

Times are medians of --repeats timed runs; a timed run is `inner` back-to-back runs of the
computation, with `inner` chosen per implementation so that one timed run lasts at least
--min-run seconds (50 ms by default), and the time reported is per computation. The timed
runs of a kernel's implementations take turns (anycuda, C, PoCL, anycuda, ...), so that
they see the machine alike. Ratios
are time / time (lower is better for the numerator), the median of the rounds' ratios. The simulator is far too slow for
the full sizes: it runs a small size and is reported as (simulator time / anycuda time)
at that same size (where anycuda's time is mostly launch latency), and as the ratio of
time per unit of work, simulator at its small size over anycuda at the table's size. Also measured, unless --no-extras: JIT compile time per kernel (cold:
a fresh ANYCUDA_CACHE_DIR; warm: loaded from that on-disk cache), the launch overhead of
an empty kernel (launch-to-launch gap, and the time a launch call takes to return: launches
are asynchronous) through the Python API and through cuLaunchKernel from a C host program
(kernels/launch_overhead.c under `anycuda run`), module loading at scale (modules.py: load
time per MB of PTX, the first launch of one kernel of 2,000), warp matrix GEMMs (tensorcores.py:
WMMA and mma.sync against the tiled SGEMM, cuBLAS and numpy), and anycuda's scaling from one
thread to all cores (ANYCUDA_NUM_THREADS is read at start-up, so each thread count is a
subprocess).
Needs: gcc, nvcc (or NVRTC); optional: pyopencl + pocl-opencl-icd, numba-cuda, matplotlib
(pip install -e '.[bench]').
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import idioms  # noqa: E402
import libraries  # noqa: E402
import modules  # noqa: E402
import suite  # noqa: E402
import tensorcores  # noqa: E402

# Timed runs measure optimised code: without this a module new to the cache would run quick
# code until its optimised code arrives from the background (anycuda/compiler/tiers.py).
# The compile-time children set the mode they measure.
os.environ.setdefault("ANYCUDA_JIT", "optimised")

IMPLS = ("anycuda", "c", "pocl")
LABEL = {"anycuda": "anycuda", "c": "C/OpenMP", "pocl": "PoCL", "sim": "Numba sim"}
EMPTY_PTX = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry empty() { ret; }\n"


# seconds between two timed runs: the thread pools of OpenBLAS and PoCL spin for a while
# after a call, and the next run shared the cores with them (anycuda's sgemm took 55-79 ms
# right after numpy's matmul, 46-49 after a pause of 0.2 s, 49-60 with no matmul before it)
SETTLE = 0.1


def timed(fn, k=1):
    t = time.perf_counter()
    for _ in range(k):
        fn()
    return time.perf_counter() - t


def measure(runs, min_run, repeats):
    """{name: (median seconds per run, inner, each round's seconds per run)} of the callables
    `runs` ({name: run}): after
    one warm-up run each, `repeats` rounds, each timing every run once in turn, `inner`
    back-to-back calls, `inner` chosen per run so that a timed run lasts >= min_run. The
    rounds interleave the implementations, so that a machine whose speed drifts (other
    tenants, the memory's bandwidth moved by 2x within minutes here) moves them alike and
    their ratios hold."""
    inner = {}
    for name, run in runs.items():
        t1 = timed(run)
        inner[name] = max(1, math.ceil(min_run / max(t1, 1e-9))) if min_run > 0 else 1
        if t1 > 2.0:
            repeats = min(repeats, 3)
    samples = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            time.sleep(SETTLE)
            samples[name].append(timed(run, inner[name]) / inner[name])
    return {name: (statistics.median(samples[name]), inner[name], samples[name]) for name in runs}


def paired_ratio(times, a, b):
    """The median over the rounds of a's time / b's in the same round (`times`: measure's),
    None where either was not timed. A round times each implementation once, a second or
    so apart, so a drift of the machine's speed between rounds cancels (this VM's memory
    bandwidth moves by 2x within minutes; the ratio of two medians could take them from
    rounds at different speeds)."""
    if a not in times or b not in times:
        return None
    return statistics.median(x / y for x, y in zip(times[a][2], times[b][2]))


def checked_run(bench, impl, handle):
    """The implementation's run function, its output checked against numpy once first."""
    run, result = getattr(bench, impl)(handle)
    run()
    bench.check(result())
    return run


def geomeans(rows):
    """The geomean of each ratio over `rows` (run_kernels' rows)."""
    return {k: geomean([r["ratio"][k] for r in rows])
            for k in ("anycuda/c", "pocl/c", "anycuda/pocl", "sim/anycuda", "sim/anycuda per work")}


def geomean(xs):
    xs = [x for x in xs if x]
    return float(np.exp(np.mean(np.log(xs)))) if xs else None


def child_failure(what, p):
    lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
    return RuntimeError(f"{what} exited with {p.returncode}: {lines[-1] if lines else 'no output'}")


def child_env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def num_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# ------------------------------------------------------------------ the kernels

def run_kernels(args, benches, out):
    lib = suite.build_c_reference()
    g = suite.AnyCUDA()
    pocl = None if args.no_pocl else suite.PoCL()
    pocl_reason = "--no-pocl" if pocl is None else pocl.reason
    sim, sim_reason = None, "--no-sim" if args.no_sim else None
    if not args.no_sim:
        try:
            sim = suite.load_sim()
        except ImportError as e:
            sim_reason = f"numba-cuda is not installed ({e})"
    out["skipped"] = {"pocl": pocl_reason, "sim": sim_reason}
    size = "quick" if args.quick else "full"
    rows = []
    for B in benches:
        b = B(size)
        row = {"kernel": b.name, "size": b.describe(), "ms": {}, "inner": {}, "rounds_ms": {}, "rate": {}, "errors": {}}
        runs = {}
        for impl in IMPLS:
            handle = {"anycuda": g, "c": lib, "pocl": pocl}[impl]
            if impl == "pocl" and (pocl_reason or not B.implements("pocl")):
                continue
            try:
                runs[impl] = checked_run(b, impl, handle)
            except Exception as e:             # report it, keep going with the others
                row["errors"][impl] = f"{type(e).__name__}: {e}"
                print(f"  {b.name} / {LABEL[impl]} failed: {row['errors'][impl]}", file=sys.stderr)
                if args.verbose:
                    traceback.print_exc()
        sticks = yardsticks(b, lib)
        try:
            times = measure({**runs, **{name: run for name, (run, _) in sticks.items()}}, args.min_run, args.repeats)
        except Exception as e:                 # a run that fails once checked: report it
            row["errors"]["timing"] = f"{type(e).__name__}: {e}"
            print(f"  {b.name} failed while timed: {row['errors']['timing']}", file=sys.stderr)
            times = {}
        for impl in runs:
            if impl in times:
                t, inner, each = times[impl]
                row["rounds_ms"][impl] = [round(x * 1e3, 3) for x in each]
                row["ms"][impl], row["inner"][impl], row["rate"][impl] = t * 1e3, inner, b.rate(t)
        row["yardstick"] = {name: value(times[name][0]) for name, (_, value) in sticks.items() if name in times}
        row["share"] = yardstick_shares(b, sticks, times)
        if sim is not None and B.implements("sim"):
            row["sim"] = sim_column(B, g, sim, args)
        ms = row["ms"]
        if row.get("sim", {}).get("sim_ms") and "anycuda" in ms:
            # the simulator's time per unit of work at its small size over anycuda's at this size
            row["sim"]["per_work_ratio"] = (row["sim"]["sim_ms"] / row["sim"]["work"]) / (ms["anycuda"] / b.work)
        row["ratio"] = {
            "anycuda/c": paired_ratio(times, "anycuda", "c"),
            "pocl/c": paired_ratio(times, "pocl", "c"),
            "anycuda/pocl": paired_ratio(times, "anycuda", "pocl"),
            "sim/anycuda": row.get("sim", {}).get("ratio"),
            "sim/anycuda per work": row.get("sim", {}).get("per_work_ratio"),
        }
        rows.append(row)
        print(f"  {b.name:13s} " + "  ".join(f"{LABEL[k]} {v:.2f} ms" for k, v in ms.items())
              + (f"  sim/anycuda {row['ratio']['sim/anycuda']:.0f}x" if row["ratio"]["sim/anycuda"] else ""),
              flush=True)
    return rows


TRIAD_N = 1 << 24           # floats per array of the triad yardstick: 192 MB moved a run
SHARE_TARGETS = {"triad_GBps": 0.85, "numpy_blas_GFLOPs": 0.30}    # the issue's targets for each share
_triad_arrays = []


def yardsticks(b, lib):
    """What the hardware can do, timed in the same rounds as the kernel: STREAM-style triad
    for the streaming kernels and the memory-bound idioms (`memory_bound`), numpy's BLAS of
    the same matrices for the SGEMMs (and DGEMMs). {name: (run, its value from the median
    seconds per run)}."""
    own_size = b.name in ("saxpy", "vector_add")     # (the suite's: a triad of their n)
    if own_size or b.memory_bound:
        n = b.n if own_size else TRIAD_N
        if not _triad_arrays or _triad_arrays[0].size != n:
            _triad_arrays[:] = [np.ones(n, np.float32), np.ones(n, np.float32), np.empty(n, np.float32)]
        a, x, c = _triad_arrays
        return {"triad_GBps": (lambda: lib.triad(suite.p(a), suite.p(x), suite.p(c), ctypes.c_float(3), n),
                               lambda t: 12 * n / t / 1e9)}
    if isinstance(b, suite.Sgemm) and b.A.dtype in (np.float32, np.float64):
        return {"numpy_blas_GFLOPs": (lambda: b.A @ b.B, lambda t: b.work / t / 1e9)}
    return {}


def yardstick_shares(b, sticks, times) -> dict:
    """anycuda's rate as a share of each yardstick's (`sticks`: yardsticks'), from the same
    rounds: the median over the rounds of (work / anycuda's time) / the yardstick's rate in
    that round."""
    shares = {}
    for name, (_, value) in sticks.items():
        if "anycuda" in times and name in times:
            shares[name] = statistics.median((b.work / t_any / 1e9) / value(t_stick)
                                             for t_any, t_stick in zip(times["anycuda"][2], times[name][2]))
    return shares


def time_anycuda(b, g, min_run, repeats):
    """Median seconds per run of the kernel through anycuda alone, its output checked first."""
    return measure({"anycuda": checked_run(b, "anycuda", g)}, min_run, repeats)["anycuda"][0]


def sim_column(B, g, sim, args):
    """Numba's simulator at the small size, against anycuda at that same size."""
    b = B("sim")
    res = {"size": b.describe(), "work": b.work}
    try:
        res["sim_ms"] = timed(checked_run(b, "sim", sim)) * 1e3
        res["anycuda_ms"] = time_anycuda(b, g, min(args.min_run, 0.02), args.repeats) * 1e3
        res["ratio"] = res["sim_ms"] / res["anycuda_ms"]
    except Exception as e:
        res["error"] = f"{type(e).__name__}: {e}"
        print(f"  {b.name} / simulator failed: {res['error']}", file=sys.stderr)
    return res


# ------------------------------------------------------------------ compile time, launch, scaling

def child_compile(files):
    """In a subprocess: per kernel file, CUDA C++ -> PTX (nvcc/NVRTC) and PTX -> native code
    (anycuda's JIT), each timed; both go through the on-disk caches in ANYCUDA_CACHE_DIR. The
    parent sets CUDA_MODULE_LOADING=EAGER: loaded lazily (the default), a module compiles its
    kernels at their first launches, and its load alone measured nothing (0.00 s for every
    file until 2026-12-05)."""
    import anycuda as ac
    ac.RawModule(ptx=EMPTY_PTX, name="warm-up.ptx")     # one-time LLVM set-up, not counted
    res = {}
    for cu in files:
        code = (suite.KERNELS / "cuda" / cu).read_text()
        t0 = time.perf_counter()
        ptx = ac.compile(code, name=cu)
        t1 = time.perf_counter()
        ac.RawModule(ptx=ptx, name=cu)
        t2 = time.perf_counter()
        res[cu] = {"to_ptx_s": t1 - t0, "jit_s": t2 - t1}
    print(json.dumps(res))


def compile_times(benches):
    """Cold, optimised: a fresh ANYCUDA_CACHE_DIR, ANYCUDA_JIT=optimised (the optimised code
    before the first launch); cold, first code: another fresh cache, ANYCUDA_JIT=tiered (the
    default: quick code to launch at once, the optimised code made in the background);
    warm: a third process on the first cache. A warm run that still compiles (the cache
    grew: someone changed anycuda's compiler sources, which are part of the cache key, in
    between) is repeated, and flagged if it never hits."""
    files = list(dict.fromkeys(B.cu for B in benches))

    def child(cache, mode):
        p = subprocess.run([sys.executable, __file__, "--child", "compile", "--only",
                            ",".join(B.name for B in benches)], capture_output=True, text=True,
                           env=child_env(ANYCUDA_CACHE_DIR=cache, ANYCUDA_CACHE="1", ANYCUDA_JIT=mode,
                                         CUDA_MODULE_LOADING="EAGER"),
                           timeout=1800)
        if p.returncode:
            raise child_failure("compile-time child", p)
        return json.loads(p.stdout.strip().splitlines()[-1])

    def entries(cache):
        return sum(1 for q in Path(cache).rglob("*") if q.is_file())

    with tempfile.TemporaryDirectory(prefix="anycuda-bench-cache-") as cache, \
            tempfile.TemporaryDirectory(prefix="anycuda-bench-cache-") as tiered_cache:
        cold = child(cache, "optimised")
        first = child(tiered_cache, "tiered")
        for _ in range(3):
            before = entries(cache)
            warm = child(cache, "optimised")
            hit = entries(cache) == before
            if hit:
                break
    return {cu: {"to_ptx_cold_s": cold[cu]["to_ptx_s"], "jit_cold_s": cold[cu]["jit_s"],
                 "jit_first_code_s": first[cu]["jit_s"], "jit_warm_s": warm[cu]["jit_s"],
                 "warm_was_cache_hit": hit} for cu in files}


def launch_overhead():
    """Seconds per launch of an empty 1-thread kernel through the Python API (1000 launches
    then one synchronize, median of 7): the launch-to-launch gap."""
    import anycuda as ac
    e = ac.RawModule(ptx=EMPTY_PTX, name="empty.ptx").get_function("empty")
    e((1,), (1,), ())
    ac.synchronize()

    def thousand():
        for _ in range(1000):
            e((1,), (1,), ())
        ac.synchronize()
    return statistics.median(timed(thousand) for _ in range(7)) / 1000


def launch_latency():
    """Seconds for one launch call of an empty 1-thread kernel through the Python API to
    return, the stream idle before it (median of 1001): launches are asynchronous, so this is
    the host's cost of a launch, not the kernel's."""
    import anycuda as ac
    e = ac.RawModule(ptx=EMPTY_PTX, name="empty.ptx").get_function("empty")
    e((1,), (1,), ())
    times = []
    for _ in range(1001):
        ac.synchronize()
        times.append(timed(lambda: e((1,), (1,), ())))
    ac.synchronize()
    return statistics.median(times)


def launch_round_trip():
    """Seconds for one launch of an empty 1-thread kernel through the Python API and the
    synchronize after it (median of 1001): what a program that waits for each kernel pays."""
    import anycuda as ac
    e = ac.RawModule(ptx=EMPTY_PTX, name="empty.ptx").get_function("empty")
    e((1,), (1,), ())
    ac.synchronize()

    def launch_and_wait():
        e((1,), (1,), ())
        ac.synchronize()
    return statistics.median(timed(launch_and_wait) for _ in range(1001))


def c_host_launch_overhead_us():
    """Microseconds per launch of the same empty kernel through cuLaunchKernel from a C host
    program (kernels/launch_overhead.c) run under `anycuda run`, as an nvcc-built program is:
    the launch-to-launch gap (c_host_launch_times_us has the latency too)."""
    return c_host_launch_times_us()[0]


def c_host_launch_times_us():
    """(launch-to-launch gap, launch latency, launch and synchronize) in microseconds through
    cuLaunchKernel from a C host program (kernels/launch_overhead.c) run under `anycuda run`."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "launch_overhead"
        subprocess.run(["gcc", "-O2", "-o", str(exe), str(HERE / "kernels" / "launch_overhead.c"), "-ldl"],
                       check=True, capture_output=True, text=True)
        p = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", str(exe)], capture_output=True,
                           text=True, env=child_env(), timeout=600)
        if p.returncode:
            raise child_failure("C host launch program", p)
        gap, call, round_trip = p.stdout.strip().splitlines()[-1].split()
        return float(gap), float(call), float(round_trip)


def launch_overheads():
    """In this process (all worker threads), in a subprocess with one worker thread (no
    thread wake-up per launch: the Python and marshalling cost alone), and from a C host
    program through anycuda's libcuda.so.1: the launch-to-launch gap (*_us) and the time for
    a launch call to return (*_call_us)."""
    res = {"all_threads_us": launch_overhead() * 1e6, "all_threads_call_us": launch_latency() * 1e6,
           "all_threads_sync_us": launch_round_trip() * 1e6}
    p = subprocess.run([sys.executable, __file__, "--child", "launch"], capture_output=True, text=True,
                       env=child_env(ANYCUDA_NUM_THREADS=1, OMP_NUM_THREADS=1), timeout=600)
    if p.returncode:
        raise child_failure("launch child", p)
    res["one_thread_us"] = json.loads(p.stdout.strip().splitlines()[-1]) * 1e6
    try:
        res["c_host_us"], res["c_host_call_us"], res["c_host_sync_us"] = c_host_launch_times_us()
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        res["c_host_error"] = f"{type(e).__name__}: {e}"
    return res


def child_scaling(args, benches):
    g = suite.AnyCUDA()
    res = {}
    for B in benches:
        b = B("quick" if args.quick else "full")
        try:
            res[b.name] = time_anycuda(b, g, args.min_run, args.repeats)
        except Exception as e:
            res[b.name] = None
            res.setdefault("_errors", {})[b.name] = f"{type(e).__name__}: {e}"
    print(json.dumps(res))


def scaling(args, benches):
    cores = num_cores()
    counts = sorted({1, cores} | {1 << i for i in range(cores.bit_length()) if 1 << i <= cores})
    res, errors = {}, {}
    for t in counts:
        cmd = [sys.executable, __file__, "--child", "scaling", "--only", ",".join(B.name for B in benches),
               "--repeats", str(args.scaling_repeats), "--min-run", str(args.min_run)] + (["--quick"] if args.quick else [])
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                           env=child_env(ANYCUDA_NUM_THREADS=t, OMP_NUM_THREADS=t))
        if p.returncode:
            raise child_failure(f"scaling child ({t} threads)", p)
        res[t] = json.loads(p.stdout.strip().splitlines()[-1])
        for k, err in res[t].pop("_errors", {}).items():
            errors[f"{k} ({t} threads)"] = err
        print(f"  {t} thread(s): " + "  ".join(f"{k} {v * 1e3:.1f} ms" for k, v in res[t].items() if v), flush=True)
    speedup = {k: {t: (res[1][k] / res[t][k] if res[1].get(k) and res[t].get(k) else None) for t in counts}
               for k in res[1]}
    return {"threads": counts, "ms": {t: {k: (v * 1e3 if v else None) for k, v in r.items()} for t, r in res.items()},
            "speedup": speedup, "errors": errors}


# ------------------------------------------------------------------ report

def fmt(x, spec=".2f", none="-"):
    return none if x is None else format(x, spec)


def print_shares(rows):
    """For each yardstick: how many kernels reach the issue's share of it (SHARE_TARGETS), and
    the ones below."""
    for name, target in SHARE_TARGETS.items():
        shares = {r["kernel"]: r["share"][name] for r in rows if name in r.get("share", {})}
        if shares:
            below = sorted((v, k) for k, v in shares.items() if v < target)
            print(f"anycuda at >= {100 * target:.0f}% of {name}: {len(shares) - len(below)} of {len(shares)}"
                  + ("; below: " + ", ".join(f"{k} {100 * v:.0f}%" for v, k in below) if below else ""))


def print_table(out):
    rows = out["kernels"]
    print()
    head = (f"{'kernel':13s} {'anycuda ms':>10s} {'C ms':>9s} {'PoCL ms':>9s} {'any/C':>7s} {'PoCL/C':>7s} "
            f"{'any/PoCL':>8s} {'sim/any':>8s} {'per work':>9s}  anycuda rate (C; yardstick)")
    print(head)
    print("-" * len(head))
    for r in rows:
        ms, ra = r["ms"], r["ratio"]
        yard = "; ".join(f"{k} {v:.1f}, anycuda {100 * r.get('share', {}).get(k, float('nan')):.0f}%"
                         for k, v in r["yardstick"].items())
        note = r["rate"].get("anycuda", "")
        extra = "; ".join(x for x in (f"C {r['rate']['c']}" if r["rate"].get("c") else "", yard) if x)
        print(f"{r['kernel']:13s} {fmt(ms.get('anycuda')):>10s} {fmt(ms.get('c')):>9s} {fmt(ms.get('pocl')):>9s} "
              f"{fmt(ra['anycuda/c']):>7s} {fmt(ra['pocl/c']):>7s} {fmt(ra['anycuda/pocl']):>8s} "
              f"{fmt(ra['sim/anycuda'], '.0f'):>8s} {fmt(ra['sim/anycuda per work'], '.3g'):>9s}  {note}"
              + (f" ({extra})" if extra else ""))
        for impl, err in r["errors"].items():
            print(f"{'':13s} {LABEL[impl]} FAILED: {err[:200]}")
        if r.get("sim", {}).get("error"):
            print(f"{'':13s} simulator FAILED: {r['sim']['error'][:200]}")
    print("-" * len(head))
    groups = out.get("geomean_by_group", {})
    for label, gm in [("geomean", out["geomean"])] + ([(f"  {g}", v) for g, v in groups.items()]
                                                     if len(groups) > 1 else []):
        print(f"{label:13s} {'':>10s} {'':>9s} {'':>9s} {fmt(gm['anycuda/c']):>7s} {fmt(gm['pocl/c']):>7s} "
              f"{fmt(gm['anycuda/pocl']):>8s} {fmt(gm['sim/anycuda'], '.0f'):>8s} "
              f"{fmt(gm['sim/anycuda per work'], '.3g'):>9s}")
    print_shares(rows)
    print("sim/any: Numba simulator time / anycuda time, both at the small simulator size; per work:\n"
          "the simulator's time per unit of work (small size) / anycuda's (size of this table)")
    for what, why in out["skipped"].items():
        if why:
            print(f"{LABEL[what]} column skipped: {why}")
    if out.get("compile"):
        print("\nJIT compile time per kernel file (s): CUDA C++ -> PTX cold | PTX -> optimised native code cold | "
              "first code (quick, the default) cold | warm (disk cache)")
        for cu, c in out["compile"].items():
            print(f"  {cu:16s} {c['to_ptx_cold_s']:7.2f} {c['jit_cold_s']:9.2f} {c['jit_first_code_s']:9.3f} "
                  f"{c['jit_warm_s']:9.3f}"
                  + ("" if c["warm_was_cache_hit"] else "  (warm run missed the cache: compiler sources changed)"))
        for key, what in (("jit_cold_s", "optimised"), ("jit_first_code_s", "first code")):
            print(f"  median {what}: {statistics.median(c[key] for c in out['compile'].values()):.3f} s")
    if out.get("launch"):
        la = out["launch"]
        print(f"\nempty-kernel launch through the Python API: {la['all_threads_us']:.1f} us launch to launch "
              f"(all worker threads), {la['one_thread_us']:.1f} us (ANYCUDA_NUM_THREADS=1); "
              f"the launch call returns in {la['all_threads_call_us']:.1f} us; launch and synchronize "
              f"{la['all_threads_sync_us']:.1f} us")
        print("empty-kernel launch through cuLaunchKernel from a C host program (anycuda run): "
              + (f"{la['c_host_us']:.1f} us launch to launch; the call returns in {la['c_host_call_us']:.1f} us; "
                 f"launch and cuCtxSynchronize {la['c_host_sync_us']:.1f} us"
                 if "c_host_us" in la else f"FAILED: {la.get('c_host_error')}"))
    if out.get("modules"):
        modules.print_results(out["modules"])
    if out.get("libraries"):
        libraries.print_results(out["libraries"])
    if out.get("tensorcores"):
        tensorcores.print_results(out["tensorcores"])
    if out.get("scaling"):
        s = out["scaling"]
        print("\nanycuda scaling (speed-up over 1 thread): " + "  ".join(f"{t} threads" for t in s["threads"]))
        for k, sp in s["speedup"].items():
            print(f"  {k:13s} " + "  ".join(f"{fmt(sp[t]):>9s}" for t in s["threads"]))
        for k, err in s.get("errors", {}).items():
            print(f"  {k} FAILED: {err[:200]}")
    for what, err in out.get("extra_errors", {}).items():
        print(f"{what} FAILED: {err[:300]}")


def plot(out, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed"
    rows = out["kernels"]
    names = [r["kernel"] for r in rows]
    panels = 1 + bool(out.get("compile")) + bool(out.get("scaling"))
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels + 4, 5), squeeze=False)
    ax = axes[0][0]
    x = np.arange(len(names))
    for i, (key, label) in enumerate((("anycuda/c", "anycuda / C"), ("pocl/c", "PoCL / C"))):
        vals = [r["ratio"][key] or np.nan for r in rows]
        ax.bar(x + (i - 0.5) * 0.38, vals, 0.38, label=label)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(x, names, rotation=45, ha="right")
    ax.set_ylabel("time relative to gcc -O3 -fopenmp C (lower is better)")
    ax.set_title(f"anycuda vs C vs PoCL ({out['mode']} sizes)")
    sims = [r["ratio"]["sim/anycuda"] for r in rows]
    if any(sims):
        ax2 = ax.twinx()
        ax2.plot(x, [s or np.nan for s in sims], "k^", label="Numba sim / anycuda (small size)")
        ax2.plot(x, [r["ratio"]["sim/anycuda per work"] or np.nan for r in rows], "kv",
                 label="Numba sim / anycuda, time per unit of work")
        ax2.set_yscale("log")
        ax2.set_ylabel("simulator time / anycuda time")
        ax2.legend(loc="upper right", fontsize=8)
    ax.legend(loc="upper left", fontsize=8)
    col = 1
    if out.get("compile"):
        ax = axes[0][col]
        col += 1
        c = out["compile"]
        files = list(c)
        xs = np.arange(len(files))
        ax.bar(xs - 0.3, [c[f]["to_ptx_cold_s"] for f in files], 0.2, label="CUDA C++ -> PTX (cold)")
        ax.bar(xs - 0.1, [c[f]["jit_cold_s"] for f in files], 0.2, label="JIT PTX -> optimised (cold)")
        ax.bar(xs + 0.1, [c[f]["jit_first_code_s"] for f in files], 0.2, label="JIT first code (cold)")
        ax.bar(xs + 0.3, [c[f]["jit_warm_s"] for f in files], 0.2, label="JIT from disk cache (warm)")
        ax.set_yscale("log")
        ax.set_xticks(xs, [f.removesuffix(".cu") for f in files], rotation=45, ha="right")
        ax.set_ylabel("seconds")
        ax.set_title("compile time per kernel")
        ax.legend(fontsize=8)
    if out.get("scaling"):
        ax = axes[0][col]
        s = out["scaling"]
        ax.set_prop_cycle(color=plt.get_cmap("tab20").colors)
        for k, sp in s["speedup"].items():
            ax.plot(s["threads"], [sp[t] or np.nan for t in s["threads"]], "o-", label=k)
        ax.plot(s["threads"], s["threads"], "k--", lw=0.8, label="linear")
        ax.set_xlabel("ANYCUDA_NUM_THREADS")
        ax.set_ylabel("speed-up over 1 thread")
        ax.set_xticks(s["threads"])
        ax.set_title("anycuda scaling")
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return None


def anycuda_source():
    """Which anycuda was measured: its path, and the commit (and whether its src/ differs
    from that commit) of the git checkout it lives in."""
    import anycuda
    src = Path(anycuda.__file__).resolve().parent
    res = {"path": str(src)}
    if os.environ.get("ANYCUDA_BENCH_COMMIT"):              # set by --at
        return {**res, "commit": os.environ["ANYCUDA_BENCH_COMMIT"], "src_modified": False}
    try:
        git = lambda *a: subprocess.run(["git", "-C", str(src), *a], capture_output=True, text=True,
                                        timeout=30).stdout.strip()
        res["commit"] = git("rev-parse", "HEAD") or None
        res["src_modified"] = bool(git("status", "--porcelain", "--", ".")) if res["commit"] else None
    except (OSError, subprocess.SubprocessError):
        pass
    return res


def rerun_at(commit, argv):
    """Run this script again with anycuda's src/ as of `commit` (git archive into a temporary
    directory, first on PYTHONPATH): a measurement of committed code that edits in the
    working tree cannot disturb."""
    root = HERE.parent
    sha = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", f"{commit}^{{commit}}"],
                         capture_output=True, text=True)
    if sha.returncode:
        sys.exit(f"--at {commit}: not a commit ({sha.stderr.strip()})")
    sha = sha.stdout.strip()
    with tempfile.TemporaryDirectory(prefix="anycuda-bench-src-") as tmp:
        archive = subprocess.run(["git", "-C", str(root), "archive", sha, "src"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        path = os.pathsep.join(x for x in (str(Path(tmp) / "src"), os.environ.get("PYTHONPATH")) if x)
        env = {**os.environ, "PYTHONPATH": path, "ANYCUDA_BENCH_COMMIT": sha}
        return subprocess.run([sys.executable, __file__, *argv], env=env).returncode


# every benchmark by name, and the groups --only also takes
ALL = {b.name: b for b in suite.BENCHMARKS + idioms.BENCHMARKS}
GROUPS = {"suite": [b.name for b in suite.BENCHMARKS], "idioms": [b.name for b in idioms.BENCHMARKS]}


def select(only):
    if not only:
        return list(ALL.values())
    names = [n.strip() for part in only for n in part.split(",") if n.strip()]
    names = [m for n in names for m in GROUPS.get(n, [n])]
    unknown = [n for n in names if n not in ALL]
    if unknown:
        sys.exit(f"unknown kernel(s) {', '.join(unknown)}; choose from {', '.join([*GROUPS, *ALL])}")
    return [ALL[n] for n in dict.fromkeys(names)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, 3 repeats, no minimum run time")
    ap.add_argument("--only", action="append", metavar="KERNEL[,KERNEL]",
                    help=f"run only these kernels or groups ({', '.join([*GROUPS, *ALL])})")
    ap.add_argument("--repeats", type=int, default=None, help="timed runs per implementation (default 7; quick 3)")
    ap.add_argument("--min-run", type=float, default=None,
                    help="minimum seconds per timed run (default 0.05; quick 0)")
    ap.add_argument("--no-pocl", action="store_true", help="skip the PoCL column")
    ap.add_argument("--no-sim", action="store_true", help="skip Numba's simulator column")
    ap.add_argument("--no-extras", action="store_true", help="skip compile times, launch overhead and scaling")
    ap.add_argument("--no-scaling", action="store_true", help="skip the thread-scaling runs")
    ap.add_argument("--scaling-repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, default=HERE / "results.json", help="where to write the results")
    ap.add_argument("--at", metavar="COMMIT",
                    help="measure anycuda as of this commit (its src/ from git archive), not the working tree")
    ap.add_argument("--verbose", action="store_true", help="tracebacks for failures")
    ap.add_argument("--child", choices=("compile", "scaling", "launch"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.at:
        argv = list(sys.argv[1:] if argv is None else argv)
        i = next(i for i, a in enumerate(argv) if a == "--at" or a.startswith("--at="))
        del argv[i:i + (1 if "=" in argv[i] else 2)]
        return rerun_at(args.at, argv)
    args.repeats = args.repeats or (3 if args.quick else 7)
    if args.min_run is None:
        args.min_run = 0.0 if args.quick else 0.05
    benches = select(args.only)

    if args.child == "compile":
        return child_compile(list(dict.fromkeys(B.cu for B in benches)))
    if args.child == "scaling":
        return child_scaling(args, benches)
    if args.child == "launch":
        return print(json.dumps(launch_overhead()))

    out = {"mode": "quick" if args.quick else "full",
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "machine": {"cpu": platform.processor() or platform.machine(), "cores": num_cores(),
                       "load_avg": os.getloadavg(), "python": platform.python_version(),
                       "ANYCUDA_NUM_THREADS": os.environ.get("ANYCUDA_NUM_THREADS")},
           "repeats": args.repeats, "min_run_s": args.min_run, "extra_errors": {}}
    out["anycuda"] = anycuda_source()
    try:
        out["machine"]["cpu"] = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                                     if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"anycuda benchmarks ({out['mode']} sizes, {out['machine']['cores']} cores, "
          f"load average {out['machine']['load_avg'][0]:.1f}; anycuda from {out['anycuda']['path']}"
          f" at {str(out['anycuda'].get('commit'))[:10]}"
          f"{' + local changes' if out['anycuda'].get('src_modified') else ''})", flush=True)
    out["kernels"] = run_kernels(args, benches, out)
    out["geomean"] = geomeans(out["kernels"])
    # per group too: the twelve's geomean stays comparable with earlier runs
    out["geomean_by_group"] = {g: geomeans(rows) for g, names in GROUPS.items()
                               if (rows := [r for r in out["kernels"] if r["kernel"] in names])}
    if not args.no_extras:
        for what, fn in (("launch", launch_overheads),
                         ("compile", lambda: compile_times(benches)),
                         ("modules", lambda: modules.measure(child_env)),
                         ("libraries", lambda: libraries.measure(args.quick)),
                         ("tensorcores", lambda: tensorcores.measure(args.quick)),
                         ("scaling", None if args.no_scaling else lambda: scaling(args, benches))):
            if fn is None:
                continue
            print(f"measuring {what} ...", flush=True)
            try:
                out[what] = fn()
            except Exception as e:
                out["extra_errors"][what] = f"{type(e).__name__}: {e}"
    print_table(out)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2, default=str))
    png = args.json.with_suffix(".png")
    why = plot(out, png)
    print(f"\nresults: {args.json}" + (f", plot: {png}" if why is None else f" (no plot: {why})"))
    failed = any(r["errors"] for r in out["kernels"]) or any(r.get("sim", {}).get("error") for r in out["kernels"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
