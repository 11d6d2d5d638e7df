"""Profile mode (runtime/profile.py): per kernel and per library call, the counts are exact, the
times positive and adding up, the strategy said, and the summary on stderr alone, for the Python
API, for library calls made through their C entry points, and for an nvcc-built program under
`anycuda run --profile`."""
import csv
import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import anycuda as ac
from anycuda.runtime import profile

HERE = Path(__file__).parent
NVCC = shutil.which("nvcc")

SOURCE = r'''
extern "C" __global__ void twice(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.0f;
}
extern "C" __global__ void block_sums(const float *x, float *out) {
    __shared__ float s[128];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * 128 + t];
    __syncthreads();
    for (int k = 64; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
'''

INT_COLUMNS = ("Total Time (ns)", "Instances", "Avg (ns)", "Min (ns)", "Max (ns)")


@pytest.fixture
def profiling(monkeypatch):
    """Profile mode on in this process, with empty tables."""
    monkeypatch.setattr(profile, "ENABLED", True)
    monkeypatch.setattr(profile, "_kernels", {})
    monkeypatch.setattr(profile, "_calls", {})
    return profile


def _by_name(table):
    return {row[-1]: dict(zip(profile.COLUMNS, row)) for row in table}


def test_counts_are_exact_and_times_add_up(profiling):
    rng = np.random.default_rng()
    m = ac.RawModule(code=SOURCE)
    twice, sums = m.get_function("twice"), m.get_function("block_sums")
    nblocks, n_twice, n_sums = 24, random.randint(3, 9), random.randint(2, 6)
    values = rng.standard_normal(nblocks * 128).astype(np.float32)
    x = ac.asarray(values)
    out = ac.asarray(np.full(nblocks, np.nan, np.float32))       # poisoned
    for _ in range(n_twice):
        twice((nblocks,), (128,), (x, np.int32(values.size)))
    for _ in range(n_sums):
        sums((nblocks,), (128,), (x, out))
    ac.synchronize()
    expected = (values * 2.0 ** n_twice).reshape(nblocks, 128).sum(axis=1)
    np.testing.assert_allclose(out.get(), expected, rtol=1e-4, atol=1e-3)

    kernels = {name: s for (_, name), s in profiling._kernels.items()}
    assert len(kernels["twice"].durations) == n_twice
    assert len(kernels["block_sums"].durations) == n_sums
    assert kernels["twice"].blocks == n_twice * nblocks
    assert all(d > 0 for s in kernels.values() for d in s.durations)
    rows = _by_name(profiling.rows())
    for name, stats in kernels.items():
        row = rows[name]
        assert row["Instances"] == len(stats.durations)
        assert row["Total Time (ns)"] == sum(stats.durations)
        assert row["Min (ns)"] <= row["Avg (ns)"] <= row["Max (ns)"]
        assert row["Avg (ns)"] == row["Total Time (ns)"] // row["Instances"]
        assert float(row["Blocks/s"]) > 0
        assert row["Strategy"], row
    assert sum(float(r["Time (%)"]) for r in rows.values()) == pytest.approx(100, abs=0.2)
    totals = [r["Total Time (ns)"] for r in rows.values()]
    assert totals == sorted(totals, reverse=True)
    # the kernel without barriers loops over its threads; the tree reduction runs in rounds
    # or as a block program
    assert "thread loop" in rows["twice"]["Strategy"]
    assert any(kind in rows["block_sums"]["Strategy"] for kind in ("rounds", "block program")), rows
    if "block program for block shape (128, 1, 1)" in rows["block_sums"]["Strategy"]:
        lanes, ms = rows["block_sums"]["Block programs (ms)"].split(" threads: ")
        assert lanes == "128" and float(ms) >= 0
    assert rows["twice"]["Block programs (ms)"] == "-"        # no barriers: the plain loop is kept


def test_bands_are_said(profiling):
    """A thread loop launched with blocks of several rows runs in bands (compiler/simt/bands.py)
    and the profile says so; with one-row blocks it does not."""
    m = ac.RawModule(code=SOURCE)
    twice = m.get_function("twice")
    x = ac.asarray(np.ones(4096, np.float32))
    twice((16,), (128,), (x, np.int32(4096)))
    ac.synchronize()
    assert "in bands" not in _by_name(profiling.rows())["twice"]["Strategy"]
    twice((16,), (32, 4), (x, np.int32(4096)))      # (threadIdx.y unused: blocks overlap, x*2 twice)
    ac.synchronize()
    strategies = _by_name(profiling.rows())["twice"]["Strategy"].split("; ")
    assert len(strategies) == 2, strategies
    assert any(s.removesuffix(" x1").endswith("thread loop (chunk calls or grid-stride turns), in bands of a grid row")
               for s in strategies), strategies


def test_warp_regions_are_said(profiling):
    """A grid-stride loop's blocks of whole warps run a warp at a time from the kernel's start
    (compiler/vector/warpregions.py), and the profile says so; blocks with a partial warp run
    thread by thread, and it does not."""
    m = ac.RawModule(code=r"""
extern "C" __global__ void strided(float* x, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) x[i] += 1.0f;
}""")
    strided = m.get_function("strided")
    x = ac.asarray(np.zeros(5000, np.float32))
    strided((4,), (128,), (x, np.int32(5000)))
    ac.synchronize()
    assert _by_name(profiling.rows())["strided"]["Strategy"].endswith(", warp regions from the start")
    strided((4,), (100,), (x, np.int32(5000)))
    ac.synchronize()
    strategies = _by_name(profiling.rows())["strided"]["Strategy"].split("; ")
    assert sorted(s.endswith("warp regions from the start x1") for s in strategies) == [False, True], strategies
    np.testing.assert_array_equal(x.get(), np.full(5000, 2, np.float32))


STRIDED = r"""
extern "C" __global__ void strided(float* x, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) x[i] += 1.0f;
}"""


def test_warp_regions_are_said_for_the_code_that_ran(profiling, monkeypatch, fresh_cache):
    """Tiered, a kernel's quick code (lean: no warp regions) and then its optimised code (with
    them) run its launches, and the Strategy says which did what, whichever lowering its info
    came from."""
    import struct
    from anycuda.cudac import compile_to_ptx
    from anycuda.runtime.program import Program
    monkeypatch.setenv("ANYCUDA_JIT", "tiered")
    prog = Program(compile_to_ptx(STRIDED), "strided.ptx")
    kernel = prog.kernel("strided")
    job = prog.compiled_kernel("strided").optimised
    x = np.zeros(5000, np.float32)
    for _ in range(2):              # before and after the switch
        kernel.launch((4, 1, 1), (128, 1, 1), struct.pack("<Qi", x.ctypes.data, x.size))
        assert job is not None and job.done.wait(300), "the optimised code never arrived"
    np.testing.assert_array_equal(x, np.full(5000, 2, np.float32))
    strategies = _by_name(profiling.rows())["strided"]["Strategy"].split("; ")
    assert sorted(strategies) == ["quick code, thread loop (chunk calls or grid-stride turns) x1",
                                  "thread loop (chunk calls or grid-stride turns), warp regions from the start x1"], \
        strategies


def test_a_failed_launch_is_not_counted(profiling):
    m = ac.RawModule(code=SOURCE)
    twice = m.get_function("twice")
    x = ac.asarray(np.ones(128, np.float32))
    twice((1,), (128,), (x, np.int32(128)))
    with pytest.raises(Exception):
        twice((1,), (2048,), (x, np.int32(128)))        # past the block limit: refused at launch
    ac.synchronize()
    assert _by_name(profiling.rows())["twice"]["Instances"] == 1


def test_off_nothing_is_recorded_and_no_time_is_taken(monkeypatch):
    def no_clock():
        raise AssertionError("a time stamp taken with the profile off")
    monkeypatch.setattr(profile, "ENABLED", False)
    monkeypatch.setattr(profile, "_kernels", {})
    monkeypatch.setattr(profile, "now", no_clock)
    m = ac.RawModule(code=SOURCE)
    x = ac.asarray(np.ones(128, np.float32))
    m.get_function("twice")((1,), (128,), (x, np.int32(128)))
    ac.synchronize()
    assert profile._kernels == {} and profile.rows() == []


def _run_python(code: str, tmp_path, profiled: bool, *args):
    env = dict(os.environ)
    env.pop("ANYCUDA_PROFILE", None)
    env.pop("ANYCUDA_PROFILE_OUTPUT", None)
    if profiled:
        env.update(ANYCUDA_PROFILE="1", ANYCUDA_PROFILE_OUTPUT=str(tmp_path / "profile.csv"))
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(code))
    r = subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def _csv_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for c in INT_COLUMNS:
            row[c] = int(row[c])
    return {row["Name"]: row for row in rows}


PYTHON_PROGRAM = '''
    import sys
    import numpy as np
    import anycuda as ac
    source = sys.argv[1]
    m = ac.RawModule(code=open(source).read())
    x = ac.asarray(np.arange(1024, dtype=np.float32))
    for _ in range(int(sys.argv[2])):
        m.get_function("twice")((8,), (128,), (x, np.int32(1024)))
    print("sum", float(x.get().sum()))
'''


def test_summary_goes_to_stderr_and_stdout_is_untouched(tmp_path):
    (tmp_path / "k.cu").write_text(SOURCE)
    launches = random.randint(2, 7)
    plain = _run_python(PYTHON_PROGRAM, tmp_path, False, tmp_path / "k.cu", launches)
    profiled = _run_python(PYTHON_PROGRAM, tmp_path, True, tmp_path / "k.cu", launches)
    assert profiled.stdout == plain.stdout == f"sum {1023 * 1024 / 2 * 2.0 ** launches}\n"
    assert "anycuda profile" not in plain.stderr
    header = "Time (%)  Total Time (ns)  Instances  Avg (ns)"
    assert header in profiled.stderr and header not in profiled.stdout
    line = next(l for l in profiled.stderr.splitlines() if l.rstrip().endswith("twice"))
    assert line.split()[2] == str(launches)
    rows = _csv_rows(tmp_path / "profile.csv")
    assert rows["twice"]["Instances"] == launches and rows["twice"]["Total Time (ns)"] > 0


LIBRARY_PROGRAM = '''
    import ctypes, sys
    import numpy as np
    import anycuda as ac
    folder, generates, axpys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    curand = ctypes.CDLL(folder + "/libcurand.so.10")
    cublas = ctypes.CDLL(folder + "/libcublas.so.13")
    n = 4096
    out = ac.asarray(np.full(n, np.nan, np.float32))
    gen = ctypes.c_void_p()
    assert curand.curandCreateGenerator(ctypes.byref(gen), 100) == 0        # CURAND_RNG_PSEUDO_DEFAULT
    for _ in range(generates):
        assert curand.curandGenerateUniform(gen, ctypes.c_void_p(out.data.ptr), ctypes.c_size_t(n)) == 0
    assert curand.curandDestroyGenerator(gen) == 0
    handle = ctypes.c_void_p()
    assert cublas.cublasCreate_v2(ctypes.byref(handle)) == 0
    x = ac.asarray(np.ones(n, np.float32))
    y = ac.asarray(np.zeros(n, np.float32))
    alpha = ctypes.c_float(2.0)
    for _ in range(axpys):
        assert cublas.cublasSaxpy_v2(handle, n, ctypes.byref(alpha), ctypes.c_void_p(x.data.ptr), 1,
                                     ctypes.c_void_p(y.data.ptr), 1) == 0
    assert cublas.cublasDestroy_v2(handle) == 0
    u = out.get()
    print("uniform in (0, 1]:", bool(((u > 0) & (u <= 1)).all()), "y:", float(y.get()[0]))
'''


def test_library_calls_are_counted_per_function(tmp_path):
    from anycuda.shim.build import shim_dir
    generates, axpys = random.randint(2, 6), random.randint(1, 5)
    r = _run_python(LIBRARY_PROGRAM, tmp_path, True, shim_dir(), generates, axpys)
    assert r.stdout == f"uniform in (0, 1]: True y: {2.0 * axpys}\n"
    rows = _csv_rows(tmp_path / "profile.csv")
    assert rows["curandGenerateUniform"]["Instances"] == generates
    assert rows["cublasSaxpy_v2"]["Instances"] == axpys
    for name in ("curandGenerateUniform", "cublasSaxpy_v2"):
        assert rows[name]["Strategy"] == "library call"
        assert rows[name]["Total Time (ns)"] > 0
    assert "curandCreateGenerator" not in rows         # queues no work


@pytest.mark.skipif(NVCC is None, reason="needs nvcc (the CUDA toolkit) on PATH")
def test_nvcc_program_under_anycuda_run_profile(tmp_path):
    exe = tmp_path / "profile_launches"
    built = subprocess.run([NVCC, "-o", str(exe), str(HERE / "programs" / "profile_launches.cu")],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    scales, shifts, n = random.randint(2, 6), random.randint(1, 4), 5000
    csv_path = tmp_path / "out.csv"

    def run(*options):
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANYCUDA_PROFILE")}
        return subprocess.run([sys.executable, "-m", "anycuda.cli", "run", *options, "--", str(exe), str(scales),
                               str(shifts), str(n)], capture_output=True, text=True, timeout=300, env=env)
    plain, profiled = run(), run("--profile", "--profile-output", str(csv_path))
    assert plain.returncode == 0 and profiled.returncode == 0, plain.stderr + profiled.stderr
    base = np.arange(n) % 7
    expected = f"sum {float((base + shifts).sum()):.1f} first {float(shifts):.1f} {1.0 + shifts:.1f}\n"
    assert profiled.stdout == plain.stdout == expected
    assert "Total Time (ns)" in profiled.stderr and "Total Time (ns)" not in plain.stderr
    rows = _csv_rows(csv_path)
    scale = next(name for name in rows if "scale" in name)
    shift = next(name for name in rows if "shift" in name)
    assert rows[scale]["Instances"] == scales and rows[shift]["Instances"] == shifts
    if shutil.which("c++filt") or shutil.which("cu++filt"):
        assert scale == "void demo::scale<float>(float*, float, int)", scale
        assert shift == "shift(float*, float, int)", shift
    for row in (rows[scale], rows[shift]):
        assert row["Total Time (ns)"] > 0 and row["Min (ns)"] <= row["Avg (ns)"] <= row["Max (ns)"]
        assert row["Strategy"]


TIERED_PROGRAM = '''
    import sys, time
    import numpy as np
    import anycuda as ac
    from anycuda.runtime import profile
    m = ac.RawModule(code=open(sys.argv[1]).read())
    x = ac.asarray(np.ones(4096, np.float32))
    twice = m.get_function("twice")
    twice((32,), (128,), (x, np.int32(4096)))
    ac.synchronize()
    stats = next(iter(profile._kernels.values()))
    deadline = time.monotonic() + 120
    # until the optimised code has arrived and the kernel's launches have switched to it
    while (not isinstance(stats.optimised_ns, int) or twice._image.optimising) and time.monotonic() < deadline:
        time.sleep(0.05)
    twice((32,), (128,), (x, np.int32(4096)))
    print(float(x.get().sum()))
'''


def test_tiered_compile_times_and_the_switch_to_optimised_code(tmp_path, monkeypatch):
    """Not from the cache (a fresh one): the quick tier's time, the optimised tier's arrival, and
    the launches before and after the switch told apart."""
    (tmp_path / "k.cu").write_text(SOURCE)
    monkeypatch.setenv("ANYCUDA_JIT", "tiered")
    monkeypatch.setenv("ANYCUDA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ANYCUDA_CACHE", raising=False)
    r = _run_python(TIERED_PROGRAM, tmp_path, True, tmp_path / "k.cu")
    assert r.stdout == f"{4.0 * 4096}\n"
    row = _csv_rows(tmp_path / "profile.csv")["twice"]
    assert row["Cached"] == "no" and row["Instances"] == 2
    assert float(row["Quick compile (ms)"]) > 0 and float(row["Optimised compile (ms)"]) > 0
    strategies = row["Strategy"].split("; ")
    assert len(strategies) == 2 and strategies[0].startswith("quick code, ") and strategies[0].endswith(" x1")
    assert not strategies[1].startswith("quick code") and strategies[1].endswith(" x1")


def test_optimised_code_never_asked_for_is_not_needed(monkeypatch):
    """A kernel whose block programs ran every launch never queued its optimised code
    (pipeline._optimised_job's `later`): its column says `not needed`, not `not ready at exit`;
    queued, it is not ready until it arrives, then its time."""
    from anycuda.compiler.build import tiers
    monkeypatch.setattr(profile, "_kernels", {})
    job = tiers.OptimisedCode("define void @f() {\n  ret void\n}\n", "k.ll")
    profile.optimised_on_its_way("m.ptx", "k", profile.now(), job)
    stats = profile._kernels[("m.ptx", "k")]
    assert profile._optimised_time(stats) == profile.NOT_NEEDED
    job.queued = True                      # (as queue() marks it, without a server)
    assert profile._optimised_time(stats) == profile.NOT_READY
    job._finish(b"an object")
    assert float(profile._optimised_time(stats)) >= 0
