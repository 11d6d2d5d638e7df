"""Module loading at scale, as real modules need it (compiler/pipeline.py, ptx/index.py):

- load: seconds per MB of PTX to load a module of many small kernels (the index alone);
- first launch of one kernel from a module of 2,000 kernels, each in a fresh process: cold
  with quick code (ANYCUDA_JIT=quick), cold optimised (ANYCUDA_JIT=optimised), the default
  (tiered: quick code while the optimised code is made), and from the disk cache.

- where CuPy is installed, the time to the first result of CuPy's first reduction under
  `anycuda run`: `x.sum()` on ten floats (x made by cupy.arange before the clock starts), which
  loads CuPy's CUB extension (a 21 MB PTX module of 383 kernels, through cuLibraryLoadData),
  from the call to its result: cold (empty anycuda and CuPy caches; tiered, the default, and
  optimised) and with both caches filled.

Targets on a 2-core machine: load <= 0.3 s per MB, first launch <= 1 s cold with quick code
and <= 30 ms from the cache (issue "The compiler as one visible pipeline"); CuPy's first
reduction <= 5 s cold and <= 0.5 s warm (issue "Python GPU stacks").

- big kernels (generated: deep loop nests and branches, or many small loops): the quick
  tier's rate in PTX instructions per second (parse, lean lowering, IR text, instruction
  selection, in process) and the time from the module's load to the first result, quick and
  tiered, each in a fresh process; and a generated kernel of 50,000 instructions optimised
  (ANYCUDA_JIT=optimised), from its load to its first result (target <= 20 s).

    python benchmarks/modules.py          # the table, as run.py's extras print it
    python benchmarks/modules.py --big    # the big kernels alone
"""
from __future__ import annotations

import inspect
import json
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"
KERNELS = 2000
LAUNCHED = 1234          # the kernel launched from the big module


def small_kernel(i: int) -> str:
    """Kernel k{i}: out[t] = t * i for t < n, behind an exit guard."""
    return f""".visible .entry k{i}(.param .u64 p, .param .u32 n)
{{
  .reg .pred %p<2>; .reg .b32 %r<6>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x; mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x;
  mad.lo.s32 %r2, %r3, %r4, %r2;
  setp.ge.u32 %p1, %r2, %r1;
  @%p1 bra DONE;
  mul.wide.u32 %rd2, %r2, 4; add.s64 %rd3, %rd1, %rd2;
  mul.lo.u32 %r5, %r2, {i};
  st.global.u32 [%rd3], %r5;
DONE:
  ret;
}}
"""


def many_kernels(n: int) -> str:
    return HEADER + "".join(small_kernel(i) for i in range(n))


def child_first_launch() -> None:
    """In a fresh process: load the big module, launch one kernel, check it; print the
    seconds of the load and from the launch to its result (LLVM's one-time set-up is done
    before and not counted)."""
    import numpy as np
    import anycuda as ac
    from anycuda.runtime.program import load_program
    ac.RawModule(ptx=HEADER + ".visible .entry warm() { ret; }\n", name="warm-up.ptx").get_function("warm")((1,), (1,), ())
    text = many_kernels(KERNELS)
    out = np.zeros(1000, np.uint32)
    t0 = time.perf_counter()
    kernel = load_program(text, "many.ptx").kernel(f"k{LAUNCHED}")
    t1 = time.perf_counter()
    kernel.launch((4, 1, 1), (256, 1, 1), struct.pack("<QI", out.ctypes.data, out.size))
    t2 = time.perf_counter()
    assert (out == np.arange(out.size, dtype=np.uint32) * LAUNCHED).all()
    print(json.dumps({"load_s": t1 - t0, "first_launch_s": t2 - t1}))


def load_seconds_per_mb(repeats: int = 5) -> dict:
    from anycuda.runtime.program import load_program
    res = {}
    for n in (KERNELS, 5 * KERNELS):
        text = many_kernels(n)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            load_program(text, "many.ptx")
            times.append(time.perf_counter() - t0)
        res[f"{n} kernels"] = {"mb": len(text) / 1e6, "load_s": statistics.median(times),
                               "s_per_mb": statistics.median(times) / (len(text) / 1e6)}
    return res


def first_launches(env_for) -> dict:
    """{case: {load_s, first_launch_s}} for each way of reaching the first result, a fresh
    process each (from the cache: the fastest of three)."""
    def child(**env):
        p = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True,
                           env=env_for(**env), timeout=600)
        if p.returncode:
            raise RuntimeError(f"first-launch child failed: {p.stderr[-2000:]}")
        return json.loads(p.stdout.strip().splitlines()[-1])

    res = {}
    with tempfile.TemporaryDirectory(prefix="anycuda-bench-modules-") as root:
        for case, mode in (("cold, quick code", "quick"), ("cold, tiered (default)", "tiered"),
                           ("cold, optimised", "optimised")):
            res[case] = child(ANYCUDA_JIT=mode, ANYCUDA_CACHE="1", ANYCUDA_CACHE_DIR=str(Path(root) / mode))
        cached = [child(ANYCUDA_JIT="optimised", ANYCUDA_CACHE="1", ANYCUDA_CACHE_DIR=str(Path(root) / "optimised"))
                  for _ in range(3)]
        res["from the disk cache"] = min(cached, key=lambda c: c["first_launch_s"])
    return res


BIG_KERNELS = ((3000, "random"), (12000, "random"), (125, "loops"))    # tests/ptx_generators.py
HUGE_KERNEL = 50000         # instructions of the generated kernel timed optimised (ANYCUDA_JIT=optimised)


def _generated(size: int, kind: str):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import ptx_generators as gen
    if kind == "loops":
        return gen.small_loops_kernel(size, 2, name="loops")
    return gen.random_kernel(size, 1, name="big")


def child_big_kernel(size: int, kind: str, stages: bool = True) -> None:
    """In a fresh process: the time from the module's load to its first launch's result (the
    mode is the caller's), then, with `stages`, the quick tier's stages for one generated
    kernel, in process (parse, lean lowering, IR text, fast instruction selection; best of
    three)."""
    import numpy as np
    import anycuda as ac
    from anycuda.compiler import pipeline
    from anycuda.compiler.build.jit import compile_to_object
    from anycuda.ptx.index import ModuleIndex
    k = _generated(size, kind)
    warm = ac.RawModule(ptx=HEADER + ".visible .entry warm() { ret; }\n", name="warm-up.ptx")
    warm.get_function("warm")((1,), (1,), ())
    t0 = time.perf_counter()
    inp = ac.asarray(np.arange(4096, dtype=np.uint32))
    finp = ac.asarray(np.ones(4096, np.float32))
    out = ac.asarray(np.zeros(2 * 64 * 16, np.uint32))
    f = ac.RawModule(ptx=k.ptx, name="big.ptx").get_function(k.name)
    f((2,), (64,), (inp, finp, out, np.uint32(100)))
    out.get()
    first = time.perf_counter() - t0
    if not stages:
        print(json.dumps({"instructions": k.instructions, "first_result_s": first}))
        return
    times = []
    for _ in range(3):
        t1 = time.perf_counter()
        unit = ModuleIndex(k.ptx, "big.ptx").kernel_unit(k.name)
        # (anycuda before lean quick code, for `run.py --at`: its quick code was the full lowering)
        lean = {"lean": True} if "lean" in inspect.signature(pipeline._lowered).parameters else {}
        compile_to_object(pipeline._lowered(unit, k.name, "big.ptx", **lean)[3], "big", optimised=False)
        times.append(time.perf_counter() - t1)
    print(json.dumps({"instructions": k.instructions, "first_result_s": first, "quick_stages_s": min(times)}))


def big_kernels(env_for) -> dict:
    """{kernel: {instructions, quick tier rate, first result per mode}}, each mode in a fresh
    process with an empty cache."""
    res = {}
    with tempfile.TemporaryDirectory(prefix="anycuda-bench-big-") as root:
        for size, kind in BIG_KERNELS:
            row = {}
            for mode in ("quick", "tiered"):
                child = [sys.executable, __file__, "--child-big", str(size), kind] + ([] if mode == "quick" else ["first-only"])
                p = subprocess.run(child, capture_output=True,
                                   text=True, timeout=1200, env=env_for(ANYCUDA_JIT=mode, ANYCUDA_QUIET="1",
                                                                        ANYCUDA_CACHE_DIR=str(Path(root) / f"{size}{kind}{mode}")))
                if p.returncode:
                    raise RuntimeError(f"big-kernel child failed: {p.stderr[-2000:]}")
                r = json.loads(p.stdout.strip().splitlines()[-1])
                row["instructions"] = r["instructions"]
                if mode == "quick":     # (in the tiered child the compile server would compete with them)
                    row["quick_rate"] = r["instructions"] / r["quick_stages_s"]
                row[f"first_result_{mode}_s"] = r["first_result_s"]
            res[f"{kind} {size}"] = row
        p = subprocess.run([sys.executable, __file__, "--child-big", str(HUGE_KERNEL), "random", "first-only"],
                           capture_output=True, text=True, timeout=1200,
                           env=env_for(ANYCUDA_JIT="optimised", ANYCUDA_QUIET="1", ANYCUDA_CACHE_DIR=str(Path(root) / "huge")))
        if p.returncode:
            raise RuntimeError(f"huge-kernel child failed: {p.stderr[-2000:]}")
        res["huge"] = json.loads(p.stdout.strip().splitlines()[-1])
    return res


CUPY_REDUCTION = """
import json, time, numpy as np
import cupy
x = cupy.arange(10, dtype=cupy.float32)
cupy.cuda.runtime.deviceSynchronize()
t0 = time.perf_counter()
s = float(x.sum())
print(json.dumps({"s": time.perf_counter() - t0, "sum": s}))
"""


def cupy_first_reduction(env_for) -> dict | None:
    """{case: seconds} to the first result of CuPy's first reduction under `anycuda run`, or
    None where CuPy is not installed."""
    import importlib.util
    if importlib.util.find_spec("cupy") is None:
        return None
    res = {}
    with tempfile.TemporaryDirectory(prefix="anycuda-bench-cupy-") as root:
        for case, mode in (("cold, tiered (default)", "tiered"), ("cold, optimised", "optimised"),
                           ("warm (both caches filled)", "optimised")):
            p = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", sys.executable, "-c", CUPY_REDUCTION],
                               capture_output=True, text=True, timeout=1800,
                               env=env_for(ANYCUDA_JIT=mode, ANYCUDA_CACHE="1", ANYCUDA_CACHE_DIR=str(Path(root) / mode),
                                           CUPY_CACHE_DIR=str(Path(root) / ("cupy-" + mode)), ANYCUDA_QUIET="1"))
            if p.returncode:
                raise RuntimeError(f"CuPy reduction failed: {p.stderr[-2000:]}")
            r = json.loads(p.stdout.strip().splitlines()[-1])
            if r["sum"] != 45.0:
                raise RuntimeError(f"CuPy's reduction of 0..9 gave {r['sum']}")
            res[case] = r["s"]
    return res


def measure(env_for) -> dict:
    return {"load": load_seconds_per_mb(), "first_launch_s": first_launches(env_for),
            "kernels_in_module": KERNELS, "big_kernels": big_kernels(env_for),
            "cupy_reduction_s": cupy_first_reduction(env_for)}


def print_results(m: dict) -> None:
    print("\nmodule loading (a generated module of small kernels; targets: load <= 0.3 s/MB, "
          "first launch <= 1 s cold quick, <= 0.03 s cached):")
    for what, r in m["load"].items():
        print(f"  load, {what} ({r['mb']:.2f} MB): {r['load_s']:.3f} s, {r['s_per_mb']:.3f} s/MB")
    for case, s in m["first_launch_s"].items():
        print(f"  first launch of one kernel of {m['kernels_in_module']}, {case}: {s['first_launch_s']:.3f} s "
              f"(after a load of {s['load_s']:.3f} s)")
    print("  big kernels (tests/ptx_generators.py; target: the quick tier >= 10,000 PTX instructions/s):")
    for what, r in m.get("big_kernels", {}).items():
        if what == "huge":
            print(f"    random {r['instructions']} instructions, optimised (target <= 20 s): first result "
                  f"{r['first_result_s']:.1f} s")
            continue
        print(f"    {what} ({r['instructions']} instructions): quick tier {r['quick_rate']:,.0f} instructions/s; "
              f"first result {r['first_result_quick_s']:.2f} s quick, {r['first_result_tiered_s']:.2f} s tiered")
    if m.get("cupy_reduction_s") is None:
        print("  CuPy's first reduction: not measured (CuPy is not installed)")
    else:
        for case, s in m["cupy_reduction_s"].items():
            print(f"  CuPy's first reduction (x.sum(), ten floats) under anycuda run, {case}: {s:.2f} s to its result")


def _env(**extra):
    import os
    return dict(os.environ, **extra)


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        child_first_launch()
    elif sys.argv[1:2] == ["--child-big"]:
        child_big_kernel(int(sys.argv[2]), sys.argv[3], stages=sys.argv[4:] != ["first-only"])
    elif sys.argv[1:] == ["--big"]:
        print_results({"load": {}, "first_launch_s": {}, "kernels_in_module": KERNELS, "big_kernels": big_kernels(_env),
                       "cupy_reduction_s": None})
    else:
        print_results(measure(_env))
