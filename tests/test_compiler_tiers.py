"""Quick code first, optimised code from the compile server (compiler/tiers.py).

The rest of the suite runs optimised code (conftest sets ANYCUDA_JIT=optimised); here the
quick code runs the bundled examples against numpy, a tiered module switches over and
fills the cache, a launch in flight hands its blocks over at a chunk boundary, and the
modes that must not tier do not.
"""
from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import sys
import threading
import time
from importlib import resources

import numpy as np
import pytest

from anycuda import compiler, demo
from anycuda.compiler import cache, tiers
from anycuda.runtime.program import Program, load_program

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"

# One thread per block adds `v` to out[blockIdx.x]; in mark_a block 0 then waits until the
# host writes a nonzero *flag (a host address: the CPU target's device pointers are host ones).
MARKS = HEADER + """
.visible .entry mark_a(.param .u64 pout, .param .u64 pflag)
{
  .reg .b32 %r<4>; .reg .b64 %rd<5>; .reg .pred %p<2>;
  ld.param.u64 %rd1, [pout]; ld.param.u64 %rd2, [pflag];
  mov.u32 %r1, %ctaid.x;
  mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd1, %rd3;
  atom.global.add.u32 %r2, [%rd4], 1;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra DONE;
SPIN:
  ld.volatile.global.u32 %r3, [%rd2];
  setp.eq.u32 %p1, %r3, 0;
  @%p1 bra SPIN;
DONE:
  ret;
}
.visible .entry mark_b(.param .u64 pout, .param .u64 pflag)
{
  .reg .b32 %r<3>; .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %ctaid.x;
  mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd1, %rd3;
  atom.global.add.u32 %r2, [%rd4], 2;
  ret;
}
"""

GLOBALS = HEADER + """
.global .align 4 .u32 counter = 7;
.visible .entry bump(.param .u64 pout)
{
  .reg .b32 %r<3>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [pout];
  ld.global.u32 %r1, [counter];
  add.u32 %r2, %r1, 1;
  st.global.u32 [counter], %r2;
  st.global.u32 [%rd1], %r2;
  ret;
}
"""


@pytest.fixture
def jit_mode(monkeypatch, fresh_cache):
    def set_mode(mode):
        monkeypatch.setenv("ANYCUDA_JIT", mode)
    return set_mode


@pytest.mark.parametrize("example", demo.EXAMPLES, ids=lambda e: e.name)
def test_quick_code_runs_the_examples_right(jit_mode, example):
    jit_mode("quick")
    assert demo.run_example(example, repeats=1, out=lambda line: None)


def test_quick_modules_are_not_cached(jit_mode):
    jit_mode("quick")
    load_program(MARKS, "marks.ptx")
    assert cache.load(cache.key_for(MARKS, "marks.ptx")) is None


def _marks_params(out, flag):
    return struct.pack("<QQ", out.ctypes.data, flag.ctypes.data)


def test_a_launch_in_flight_hands_its_remaining_blocks_over(jit_mode):
    """One worker runs mark_a's blocks; while block 0 waits, mark_a's handoff slot gets
    mark_b's launch function: the rest of block 0's chunk runs mark_a, every block after it
    mark_b, each block exactly once."""
    jit_mode("quick")
    prog = load_program(MARKS, "marks.ptx")
    a, b = prog.kernel("mark_a"), prog.kernel("mark_b")
    nblocks, chunk = 64, 4             # the launch record's chunk: 64 // (1 worker * 16)
    out = np.zeros(nblocks, np.uint32)
    flag = np.zeros(1, np.uint32)
    launch = threading.Thread(target=a.launch, args=((nblocks, 1, 1), (1, 1, 1), _marks_params(out, flag)),
                              kwargs={"num_workers": 1})
    launch.start()
    deadline = time.monotonic() + 60
    while out[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert out[0] == 1, "block 0 never ran"
    slot = prog.jit.address(a.info.handoff)
    ctypes.c_uint64.from_address(slot).value = prog.jit.address(b.info.export)
    flag[0] = 1
    launch.join(60)
    assert not launch.is_alive()
    assert out.tolist() == [1] * chunk + [2] * (nblocks - chunk)


def _example_ptx(name):
    return resources.files("anycuda.examples").joinpath(name + ".ptx").read_text()


def test_tiered_module_switches_to_optimised_code_and_caches_it(jit_mode, rng):
    jit_mode("tiered")
    ptx = _example_ptx("reduce_shfl")
    prog = Program(ptx, "reduce_shfl.ptx")
    job = prog.compiled.optimised
    assert isinstance(job, tiers.OptimisedCode)
    quick = prog.jit
    kernel = prog.kernel("reduce_sum")
    x = rng.standard_normal(100_000).astype(np.float32)
    for _ in range(2):            # before and after the switch
        got = np.zeros(1, np.float32)      # reduce_sum(const float* x, float* out, int n) adds into out
        kernel.launch((16, 1, 1), (256, 1, 1), struct.pack("<QQi", x.ctypes.data, got.ctypes.data, x.size))
        assert got[0] == pytest.approx(x.astype(np.float64).sum(), rel=1e-4, abs=1e-2)
        assert job.done.wait(300), "the optimised code never arrived"
        assert job.error is None and job.object_code
    assert prog.jit is not quick and prog._quick == [quick]
    hit = compiler.compile_ptx(ptx, "reduce_shfl.ptx")
    assert hit.optimised is None and hit.object_code == job.object_code


def test_module_with_variables_is_optimised_at_once(jit_mode):
    jit_mode("tiered")
    prog = load_program(GLOBALS, "globals.ptx")
    assert prog.compiled.optimised is None
    assert cache.load(cache.key_for(GLOBALS, "globals.ptx")) is not None
    out = np.zeros(1, np.uint32)
    prog.kernel("bump").launch((1, 1, 1), (1, 1, 1), struct.pack("<Q", out.ctypes.data))
    assert out[0] == 8


def test_optimised_mode_compiles_before_the_first_launch(jit_mode):
    jit_mode("optimised")
    prog = load_program(MARKS, "marks.ptx")
    assert prog.compiled.optimised is None
    assert cache.load(cache.key_for(MARKS, "marks.ptx")) is not None


def test_unknown_mode_is_refused(jit_mode):
    jit_mode("fastest")
    with pytest.raises(ValueError, match="ANYCUDA_JIT='fastest': expected one of tiered, optimised, quick"):
        load_program(MARKS, "marks.ptx")


def test_a_failed_optimising_compile_keeps_the_quick_code(jit_mode):
    job = tiers.optimise_in_background("this is not LLVM IR", "broken.ll")
    assert job.done.wait(120)
    assert job.object_code is None and "broken" in job.error
    seen = []
    job.subscribe(seen.append)
    assert seen == [None]
    # the server is still there for the next module
    good = tiers.optimise_in_background("define i32 @f() {\n  ret i32 1\n}\n", "good.ll")
    assert good.done.wait(120) and good.error is None and good.object_code


def test_process_exits_at_once_with_an_optimising_compile_in_flight(tmp_path):
    ptx = _example_ptx("softmax")
    code = ("import sys, time; from anycuda.runtime.program import load_program\n"
            "t = time.perf_counter(); p = load_program(sys.stdin.read(), 'softmax.ptx')\n"
            "assert p.compiled.optimised is not None and not p.compiled.optimised.done.is_set()\n"
            "print('loaded')\n")
    env = dict(os.environ, ANYCUDA_JIT="tiered", ANYCUDA_CACHE_DIR=str(tmp_path))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], input=ptx, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "loaded", r.stderr
    assert time.perf_counter() - t < 30
