"""Quick code first, optimised code from the compile server (compiler/build/tiers.py).

The rest of the suite runs optimised code (conftest sets ANYCUDA_JIT=optimised); here the
quick code runs the bundled examples against numpy, a tiered module switches over and
fills the cache, a launch in flight hands its blocks over at a chunk boundary, and the
modes that must not tier do not.
"""
from __future__ import annotations

import ctypes
import os
import re
import struct
import subprocess
import sys
import threading
import time
from importlib import resources

import numpy as np
import pytest

from anycuda import compiler, demo
from anycuda.compiler import pipeline
from anycuda.compiler.build import cache, tiers
from anycuda.compiler.build.jit import LoadedObject
from anycuda.compiler.vector import blockprograms
from anycuda.ptx.index import ModuleIndex
from anycuda.runtime.program import Program, load_program
from conformance import REVERSE_PTX, launch_reverse

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


def test_quick_kernels_are_not_cached(jit_mode, tmp_path):
    jit_mode("quick")
    load_program(MARKS, "marks.ptx").kernel("mark_b").info      # noqa: B018 - compiled now
    assert not list(cache.cache_dir().rglob("*.pkl"))


def _marks_params(out, flag):
    return struct.pack("<QQ", out.ctypes.data, flag.ctypes.data)


def test_a_launch_in_flight_hands_its_remaining_blocks_over(jit_mode):
    """One worker runs mark_a's blocks; while block 0 waits, the launch's handoff slot gets
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
    try:
        assert out[0] == 1, "block 0 never ran"
        (flight,) = a._in_flight.values()       # (quick code alone: what a launch runs is "optimised")
        a._hand_over(b._jit.address(b.info.export), "program", lambda kind, shape: shape == (1, 1, 1))
        assert flight[2] == "program" and flight[0].handoff
    finally:
        flag[0] = 1                             # (the launch ends whatever failed)
    launch.join(60)
    assert not launch.is_alive()
    assert out.tolist() == [1] * chunk + [2] * (nblocks - chunk)


# mark_b's count (3 a thread) after a barrier: a kernel a block program takes
MARK_C = HEADER + """
.visible .entry mark_c(.param .u64 pout, .param .u64 pflag)
{
  .reg .b32 %r<3>; .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [pout];
  bar.sync 0;
  mov.u32 %r1, %ctaid.x;
  mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd1, %rd3;
  atom.global.add.u32 %r2, [%rd4], 3;
  ret;
}
"""


def test_a_block_program_takes_over_a_launch_in_flight(jit_mode):
    """As above, with a block program for the launch's shape taking over (what its arrival
    from the compile server does for a long first launch of that shape): its launch function
    runs the blocks left from the launch record's counter, each block exactly once."""
    jit_mode("optimised")
    made = []
    pipeline.compile_block_program(ModuleIndex(MARK_C, "markc.ptx").kernel_unit("mark_c"), "markc.ptx",
                                   "mark_c", (32, 1, 1), made.append)
    program = LoadedObject(made[0])
    jit_mode("quick")
    a = load_program(MARKS, "marks.ptx").kernel("mark_a")
    nblocks, chunk = 64, 4
    out, flag = np.zeros(nblocks, np.uint32), np.zeros(1, np.uint32)
    launch = threading.Thread(target=a.launch, args=((nblocks, 1, 1), (32, 1, 1), _marks_params(out, flag)),
                              kwargs={"num_workers": 1})
    launch.start()
    deadline = time.monotonic() + 60
    while out[0] < 32 and time.monotonic() < deadline:
        time.sleep(0.001)
    try:
        assert out[0] == 32, "block 0 never ran"
        a._hand_over(program.address(blockprograms.EXPORT), "program", lambda kind, shape: shape == (32, 1, 1))
    finally:
        flag[0] = 1
    launch.join(60)
    assert not launch.is_alive()
    assert out.tolist() == [32] * chunk + [96] * (nblocks - chunk)


def _example_ptx(name):
    return resources.files("anycuda.examples").joinpath(name + ".ptx").read_text()


def test_tiered_kernel_switches_to_optimised_code_and_caches_it(jit_mode, monkeypatch, rng):
    jit_mode("tiered")
    # (its launches run its own code: with block programs its optimised code waits to be asked for)
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")
    ptx = _example_ptx("reduce_shfl")
    prog = Program(ptx, "reduce_shfl.ptx")
    kernel = prog.kernel("reduce_sum")
    job = prog.compiled_kernel("reduce_sum").optimised
    assert isinstance(job, tiers.OptimisedCode)
    quick = kernel._jit
    x = rng.standard_normal(100_000).astype(np.float32)
    for _ in range(2):            # before and after the switch
        got = np.zeros(1, np.float32)      # reduce_sum(const float* x, float* out, int n) adds into out
        kernel.launch((16, 1, 1), (256, 1, 1), struct.pack("<QQi", x.ctypes.data, got.ctypes.data, x.size))
        assert got[0] == pytest.approx(x.astype(np.float64).sum(), rel=1e-4, abs=1e-2)
        assert job.done.wait(300), "the optimised code never arrived"
        assert job.error is None and job.object_code
    assert kernel._jit is not quick and kernel._quick == [quick]
    hit = compiler.compile_kernel(ModuleIndex(ptx, "reduce_shfl.ptx").kernel_unit("reduce_sum"), "reduce_sum",
                                  "reduce_shfl.ptx")
    assert hit.optimised is None and hit.object_code == job.object_code
    # a second instance of the module (another device) links the optimised code at once
    again = prog.instance().kernel("reduce_sum")
    assert again._jit is not None and not again.optimising


def _functions_defined(llvm_ir: str) -> set:
    return set(re.findall(r'^define [^@]*@"?([\w.]+)', llvm_ir, re.M))


def test_quick_code_is_lean_and_the_server_makes_the_full_code(jit_mode):
    """The quick code of a kernel with shuffles and grid-stride loops has no warp regions,
    runs or probes (the general path alone); the compile server lowers the kernel in full
    itself (a Recipe), and refuses where the full code's ABI would differ from the quick's."""
    unit = ModuleIndex(_example_ptx("reduce_shfl"), "reduce_shfl.ptx").kernel_unit("reduce_sum")
    info, _, _, lean_ir, _ = pipeline._lowered(unit, "reduce_sum", "reduce_shfl.ptx", lean=True)
    full_info, _, _, full_ir, _ = pipeline._lowered(unit, "reduce_sum", "reduce_shfl.ptx")
    specialised = _specialised(full_ir)
    assert specialised and not specialised & _functions_defined(lean_ir)
    assert lean_ir.count("\n") < 0.7 * full_ir.count("\n")
    assert pipeline._abi(info) == pipeline._abi(full_info)
    made = pipeline._optimised_ir(unit.text, "reduce_sum", "reduce_shfl.ptx", pipeline._abi(info))
    assert _functions_defined(made) == _functions_defined(full_ir)
    other = ModuleIndex(MARKS, "marks.ptx").kernel_unit("mark_b")
    with pytest.raises(RuntimeError, match="differs from its quick code"):
        pipeline._optimised_ir(unit.text, "reduce_sum", "reduce_shfl.ptx",
                               pipeline._abi(pipeline._lowered(other, "mark_b", "marks.ptx", lean=True)[0]))


def _specialised(llvm_ir: str) -> set:
    return {f for f in _functions_defined(llvm_ir) if re.search(r"\.(region|run|advance|probe)\d*", f)}


def test_a_big_kernel_is_lean_in_every_tier(jit_mode, monkeypatch, rng):
    """From BIG_KERNEL instructions on, the optimised code is made from the lean lowering too
    (a threshold lowered here so that a small kernel counts as big), and runs right; a tiered
    big kernel sends the server a Recipe, which makes that lean IR (not the quick code's, whose
    saved registers live in their spill arrays: no IR for the optimiser)."""
    unit = ModuleIndex(_example_ptx("reduce_shfl"), "reduce_shfl.ptx").kernel_unit("reduce_sum")
    *_, full_ir, big = pipeline._lowered(unit, "reduce_sum", "reduce_shfl.ptx")
    assert _specialised(full_ir) and not big
    monkeypatch.setattr(pipeline, "BIG_KERNEL", 20)
    *_, big_ir, big = pipeline._lowered(unit, "reduce_sum", "reduce_shfl.ptx")
    assert big and not _specialised(big_ir)
    jit_mode("tiered")
    sent = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tiers, "optimise_in_background", lambda source, name, **kw: sent.append(source))
        Program(_example_ptx("reduce_shfl"), "reduce_shfl.ptx").compiled_kernel("reduce_sum")
    assert len(sent) == 1 and isinstance(sent[0], tiers.Recipe)
    made = sent[0].make(*sent[0].args)
    assert made == big_ir and not _specialised(made)
    jit_mode("optimised")
    kernel = Program(_example_ptx("reduce_shfl"), "reduce_shfl.ptx").kernel("reduce_sum")
    x = rng.standard_normal(50_000).astype(np.float32)
    got = np.zeros(1, np.float32)
    kernel.launch((16, 1, 1), (256, 1, 1), struct.pack("<QQi", x.ctypes.data, got.ctypes.data, x.size))
    assert got[0] == pytest.approx(x.astype(np.float64).sum(), rel=1e-4, abs=1e-2)


def test_a_tiered_kernel_sends_the_server_a_recipe(jit_mode, monkeypatch):
    jit_mode("tiered")
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")      # (its job queued at once)
    sent = []
    real = tiers.optimise_in_background
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tiers, "optimise_in_background",
                   lambda source, name, **kw: sent.append(source) or real(source, name, **kw))
        job = Program(_example_ptx("reduce_shfl"), "reduce_shfl.ptx").compiled_kernel("reduce_sum").optimised
    assert len(sent) == 1 and isinstance(sent[0], tiers.Recipe) and sent[0].make is pipeline._optimised_ir
    assert job.done.wait(300), "the optimised code never arrived"
    assert job.error is None and job.object_code


def _arrival():
    got, arrived = [], threading.Event()

    def arrive(code):
        got.append(code)
        arrived.set()
    return got, arrived, arrive


def test_a_tiered_block_program_is_made_by_the_server(jit_mode, monkeypatch):
    """The program neither lowers nor compiles a tiered block program: the server does both
    (a Recipe) and the object arrives, then comes from the cache at once; a kernel the block
    program does not take arrives as None and is remembered as not taken."""
    jit_mode("tiered")
    made_here = []
    monkeypatch.setattr(pipeline, "block_program_ir", lambda *a: made_here.append(a))
    unit = ModuleIndex(REVERSE_PTX, "reverse.ptx").kernel_unit("reverse")
    got, arrived, arrive = _arrival()
    pipeline.compile_block_program(unit, "reverse.ptx", "reverse", (64, 1, 1), arrive)
    assert arrived.wait(300), "the block program never arrived"
    assert got[0] and not made_here
    got_again, _, arrive_again = _arrival()
    pipeline.compile_block_program(unit, "reverse.ptx", "reverse", (64, 1, 1), arrive_again)
    assert got_again == got
    plain = ModuleIndex(MARKS, "marks.ptx").kernel_unit("mark_b")       # no barrier, no shuffle
    got, arrived, arrive = _arrival()
    pipeline.compile_block_program(plain, "marks.ptx", "mark_b", (64, 1, 1), arrive)
    assert arrived.wait(300) and got == [None]
    monkeypatch.setattr(tiers, "optimise_in_background", lambda *a, **kw: pytest.fail("not taken: asked again"))
    got, _, arrive = _arrival()
    pipeline.compile_block_program(plain, "marks.ptx", "mark_b", (64, 1, 1), arrive)
    assert got == [None]


def test_a_tiered_kernel_runs_right_before_and_after_its_block_program_arrives(jit_mode, rng):
    jit_mode("tiered")
    kernel = Program(REVERSE_PTX, "reverse.ptx").kernel("reverse")
    deadline = time.monotonic() + 300
    ways = set()
    while len(ways) < 2 and time.monotonic() < deadline:
        launch_reverse(kernel, 64, rng)
        ways.add(kernel._programs.get((64, 1, 1)) is not None)
        time.sleep(0.05)
    assert ways == {False, True}, "the block program never took over"


def test_quick_and_optimised_code_share_the_module_variables(jit_mode):
    """The variables live in one object per module instance, which the quick and the
    optimised code of each kernel both use."""
    jit_mode("tiered")
    prog = load_program(GLOBALS, "globals.ptx")
    bump = prog.kernel("bump")
    job = prog.compiled_kernel("bump").optimised
    assert isinstance(job, tiers.OptimisedCode)
    out = np.zeros(1, np.uint32)
    bump.launch((1, 1, 1), (1, 1, 1), struct.pack("<Q", out.ctypes.data))
    assert out[0] == 8
    assert job.done.wait(300) and job.error is None
    bump.launch((1, 1, 1), (1, 1, 1), struct.pack("<Q", out.ctypes.data))
    assert out[0] == 9 and bump._quick
    address, size = prog.global_address("counter")
    assert size == 4 and ctypes.c_uint32.from_address(address).value == 9
    other = prog.instance()           # another device: variables of its own, freshly initialised
    other.kernel("bump").launch((1, 1, 1), (1, 1, 1), struct.pack("<Q", out.ctypes.data))
    assert out[0] == 8 and ctypes.c_uint32.from_address(address).value == 9


def test_optimised_mode_compiles_before_the_first_launch(jit_mode):
    jit_mode("optimised")
    prog = load_program(MARKS, "marks.ptx")
    assert prog.compiled_kernel("mark_b").optimised is None
    assert list(cache.cache_dir().rglob("*.pkl"))


def test_unknown_mode_is_refused(jit_mode):
    jit_mode("fastest")
    prog = load_program(MARKS, "marks.ptx")
    with pytest.raises(ValueError, match="ANYCUDA_JIT='fastest': expected one of tiered, optimised, quick"):
        prog.kernel("mark_b").launch((1, 1, 1), (1, 1, 1), bytes(16))


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
            "job = p.compiled_kernel('softmax_rows').optimised\n"
            "assert job is not None and not job.done.is_set()\n"
            "print('loaded')\n")
    env = dict(os.environ, ANYCUDA_JIT="tiered", ANYCUDA_CACHE_DIR=str(tmp_path), ANYCUDA_BLOCK_PROGRAMS="0")
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], input=ptx, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "loaded", r.stderr
    assert time.perf_counter() - t < 30


def test_a_compile_cut_short_by_the_exit_is_no_failure(monkeypatch):
    """The program ends while the server compiles (close() at exit kills it mid-reply): the
    job ends without an error, so nothing warns of a failed compile (the demo, ending while
    the tiled matmul's block program was made, printed one)."""
    server = tiers._Server()

    def cut_short(self, source, name):
        self.close()
        raise RuntimeError("the compile server stopped")
    monkeypatch.setattr(tiers._Server, "_compile", cut_short)
    job = tiers.OptimisedCode("define i32 @f() {\n  ret i32 1\n}\n", "cut.ll")
    server.submit(job)
    assert job.done.wait(30)
    assert job.error is None and job.object_code is None


def _running(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie nobody has reaped yet has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_the_compile_server_ends_with_its_program(tmp_path):
    """A program that ends without Python's exit handlers (a C program embedding Python ends
    so) takes its compile server with it at once: the server must not go on optimising, hold
    the program's pipes open or print to its output when its reply finds the program gone."""
    ptx = _example_ptx("softmax")
    code = ("import os, sys, time; from anycuda.compiler.build import tiers; from anycuda.runtime.program import load_program\n"
            "p = load_program(sys.stdin.read(), 'softmax.ptx')\n"
            "job = p.compiled_kernel('softmax_rows').optimised\n"
            "while tiers._server()._proc is None: time.sleep(0.01)\n"
            "time.sleep(0.5)                     # the server has the kernel\n"
            "print(tiers._server()._proc.pid, flush=True)\n"
            "os._exit(0)\n")
    env = dict(os.environ, ANYCUDA_JIT="tiered", ANYCUDA_CACHE_DIR=str(tmp_path), ANYCUDA_BLOCK_PROGRAMS="0")
    r = subprocess.run([sys.executable, "-c", code], input=ptx, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    server = int(r.stdout)
    deadline = time.monotonic() + 10
    while _running(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(server), "the compile server outlived its program"


def test_no_code_is_linked_once_the_exit_has_begun():
    """jit.stop_linking (at exit) waits for a link in progress and refuses later ones, which
    would meet LLVM being torn down."""
    code = ("from anycuda.compiler.build import jit\n"
            "obj = jit.compile_to_object('define i32 @f() {\\n  ret i32 1\\n}\\n', 'f')\n"
            "assert jit.LoadedObject(obj).address('f')\n"
            "jit.stop_linking()\n"
            "try:\n"
            "    jit.LoadedObject(obj)\n"
            "except RuntimeError as e:\n"
            "    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "the process is exiting" in r.stdout, r.stdout + r.stderr


def test_quick_code_keeps_saved_registers_in_their_spill_arrays(jit_mode, monkeypatch, rng):
    """Quick code: the registers live across reverse's barrier stay in their spill arrays
    (no site saves them, no resume reloads them) and the kernel runs right; the lowering for
    the optimiser keeps them in stack slots."""
    from anycuda.compiler.lowering.function import FunctionLowering
    kept = []
    real = FunctionLowering._keep_saved_registers_in_spill_arrays

    def spy(self):
        real(self)
        kept.append(set(self.in_spill_arrays))
    monkeypatch.setattr(FunctionLowering, "_keep_saved_registers_in_spill_arrays", spy)
    unit = ModuleIndex(REVERSE_PTX, "reverse.ptx").kernel_unit("reverse")
    pipeline._lowered(unit, "reverse", "reverse.ptx", lean=True)
    assert kept and {"%rd2", "%rd3"} <= kept[0]
    kept.clear()
    pipeline._lowered(unit, "reverse", "reverse.ptx")
    assert not kept
    jit_mode("quick")
    kernel = Program(REVERSE_PTX, "reverse.ptx").kernel("reverse")
    for block in (64, 96, 1000):
        x = rng.integers(0, 2 ** 32, block, dtype=np.uint32)
        out = np.full(block, 0xCDCDCDCD, np.uint32)
        kernel.launch((1, 1, 1), (block, 1, 1), struct.pack("<QQ", x.ctypes.data, out.ctypes.data))
        assert out.tolist() == x[::-1].tolist()


def test_a_pending_job_lets_an_unloaded_kernel_go():
    """A job on its way to the compile server holds its kernels' switches (bound methods)
    weakly: a kernel whose module was unloaded meanwhile is freed with its quick code, and the
    finished job skips it; a plain function stays held and is called."""
    import gc
    import weakref
    from anycuda.compiler.build.tiers import OptimisedCode

    class Image:
        switched = None

        def switch(self, object_code):
            self.switched = object_code
    job = OptimisedCode("", "k")
    kept, dropped, calls = Image(), Image(), []
    job.subscribe(kept.switch)
    job.subscribe(dropped.switch)
    job.subscribe(lambda object_code: calls.append(object_code))
    gone = weakref.ref(dropped)
    del dropped
    gc.collect()
    assert gone() is None
    job._finish(b"object")
    assert kept.switched == b"object" and calls == [b"object"] and job.error is None


def _held_server(monkeypatch, compiled):
    """A server whose start waits for `go` (so that jobs queue) and whose compiles answer
    b"object:<name>" at once, noting each name in `compiled`."""
    go = threading.Event()
    monkeypatch.setattr(tiers._Server, "_started", lambda self: go.wait(30))

    def answer(self, source, name):
        compiled.append(name)
        return b"ok", b"object:" + name.encode()
    monkeypatch.setattr(tiers._Server, "_compile", answer)
    return tiers._Server(), go


def test_a_block_program_goes_before_the_optimised_code_waiting(monkeypatch):
    """A job queued `first` (a block program: compiler/pipeline.py) is taken before the jobs
    that are not, after those `first` before it; the server takes a job only once it is
    ready, so a block program asked for while it starts goes first."""
    compiled = []
    server, go = _held_server(monkeypatch, compiled)
    jobs = [tiers.OptimisedCode("", name, first=name.startswith("block"))
            for name in ("kernel a", "kernel b", "block a", "block b")]
    for job in jobs:
        server.submit(job)
    go.set()
    assert all(job.done.wait(30) for job in jobs)
    assert compiled == ["block a", "block b", "kernel a", "kernel b"]
    assert [job.object_code for job in jobs] == [b"object:" + j._name.encode() for j in jobs]
    server.close()


def test_the_exit_waits_for_an_arrival_being_linked_and_drops_the_rest(monkeypatch):
    """close() (the program's exit) waits while an object is being linked on the optimiser's
    thread, and a later arrival is finished empty, without an error: no link meets the
    teardown of LLVM that follows the exit (jit.EXIT_WATCH_RENEWALS)."""
    compiled = []
    server, go = _held_server(monkeypatch, compiled)
    linking, linked = threading.Event(), []

    def slow_link(object_code):
        linking.set()
        time.sleep(0.3)
        linked.append(object_code)
    job = tiers.OptimisedCode("", "k")
    job.subscribe(slow_link)
    server.submit(job)
    go.set()
    assert linking.wait(30)
    server.close()
    assert linked == [b"object:k"]               # close() returned after the link
    late, got = tiers.OptimisedCode("", "late"), []
    late.subscribe(got.append)
    server._deliver(late, b"object:late")
    assert got == [None] and late.error is None


# ---------------------------------------------------------------- the finisher

TINY_IR = "define i32 @f() {\n  ret i32 1\n}\n"


def test_the_exit_hands_the_jobs_left_that_say_where_they_go_to_a_finisher(monkeypatch):
    """close() at the exit hands the finisher the job the server has and those waiting, each
    with its name, source and Keep; a job without a Keep is left undone."""
    handed = []
    monkeypatch.setattr(tiers, "finish_after_exit", handed.extend)
    compiled = []
    server, go = _held_server(monkeypatch, compiled)
    kept = [tiers.OptimisedCode(TINY_IR, f"kept {k}", keep=tiers.Keep(f"key{k}")) for k in range(3)]
    for job in (*kept, tiers.OptimisedCode(TINY_IR, "not kept")):
        server.submit(job)
    server.close()                                 # before the server started: all four waiting
    assert handed == [(f"kept {k}", TINY_IR, tiers.Keep(f"key{k}")) for k in range(3)]
    assert compiled == []


def test_finish_after_exit_starts_a_finisher_apart_from_the_program(monkeypatch, tmp_path):
    """The finisher is a session of its own with none of the program's files and no output;
    none is started without jobs, without a cache or with ANYCUDA_FINISH_AT_EXIT=0."""
    started = []

    class Recorded:
        def __init__(self, args, **kw):
            started.append((args, kw, kw["stdin"].read()))
    monkeypatch.setattr(tiers.subprocess, "Popen", Recorded)
    monkeypatch.setenv("ANYCUDA_CACHE_DIR", str(tmp_path))
    left = [("f.ll", TINY_IR, tiers.Keep("k"))]
    tiers.finish_after_exit([])
    monkeypatch.setenv("ANYCUDA_FINISH_AT_EXIT", "0")
    tiers.finish_after_exit(left)
    monkeypatch.setenv("ANYCUDA_FINISH_AT_EXIT", "1")
    monkeypatch.setenv("ANYCUDA_CACHE", "0")
    tiers.finish_after_exit(left)
    assert started == []
    monkeypatch.setenv("ANYCUDA_CACHE", "1")
    tiers.finish_after_exit(left)
    (args, kw, jobs), = started
    assert "finish()" in args[-1]
    assert kw["start_new_session"] and kw.get("close_fds", True)
    assert kw["stdout"] == kw["stderr"] == subprocess.DEVNULL
    import pickle
    assert pickle.loads(jobs) == [("f.ll", b"ir", TINY_IR.encode(), tiers.Keep("k"))]


def _finish(jobs, env) -> subprocess.CompletedProcess:
    """The finisher run on `jobs` ([(name, source, Keep)]) as finish_after_exit sends them."""
    import pickle
    data = pickle.dumps([(name, *tiers._message(source), keep) for name, source, keep in jobs])
    return subprocess.run([sys.executable, "-c", "from anycuda.compiler.build.tiers import finish; finish()"],
                          input=data, capture_output=True, env=env, timeout=300)


def test_the_finisher_stores_what_is_not_cached_yet(monkeypatch, tmp_path):
    """Each job's object goes into the cache where its Keep says (a kernel's entry with the
    object as its code); an entry cached meanwhile is left as it is; a job that fails to
    compile is skipped; while another finisher holds the cache's lock nothing is done."""
    import fcntl
    monkeypatch.setenv("ANYCUDA_CACHE_DIR", str(tmp_path))
    env = dict(os.environ)
    entry = pipeline.CompiledVariables({"v": ("v", 4)})
    cache.store("cached", b"made by a later run")
    # a kernel's info alone (its object left for a launch that needs it) is not its object
    info_alone = pipeline.CompiledKernel("k", None, {}, object_later=True)
    cache.store("info alone", info_alone)
    jobs = [("broken.ll", "this is not LLVM IR", tiers.Keep("broken")),
            ("f.ll", TINY_IR, tiers.Keep("plain")),
            ("g.ll", TINY_IR, tiers.Keep("entry", entry)),
            ("h.ll", TINY_IR, tiers.Keep("cached")),
            ("k.ll", TINY_IR, tiers.Keep("info alone", pipeline.CompiledKernel("k", None, {})))]
    d = cache.cache_dir()
    with open(d / ".finishing", "wb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        r = _finish(jobs, env)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert cache.load("plain") is None
    r = _finish(jobs, env)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    plain, stored = cache.load("plain"), cache.load("entry")
    assert LoadedObject(plain).address("f")
    assert isinstance(stored, pipeline.CompiledVariables) and stored.symbols == entry.symbols
    assert LoadedObject(stored.object_code).address("f")
    assert cache.load("cached") == b"made by a later run" and cache.load("broken") is None
    kernel = cache.load("info alone")
    assert not kernel.object_later and LoadedObject(kernel.object_code).address("f")


def test_the_next_run_finds_what_the_exit_left_unfinished(tmp_path):
    """A program that ends before its optimised code arrives (a short test program) exits at
    once, and the finisher puts the code in the cache: the next run takes it from there
    instead of compiling it again, and never ran it."""
    ptx = _example_ptx("softmax")
    first = ("import sys; from anycuda.runtime.program import load_program\n"
             "job = load_program(sys.stdin.read(), 'softmax.ptx').compiled_kernel('softmax_rows').optimised\n"
             "assert job is not None and not job.done.is_set()\n"
             "print('left')\n")
    again = ("import sys; from anycuda.runtime.program import load_program\n"
             "k = load_program(sys.stdin.read(), 'softmax.ptx').compiled_kernel('softmax_rows')\n"
             "print('cached' if k.optimised is None and k.object_code else 'compiled')\n")
    env = dict(os.environ, ANYCUDA_JIT="tiered", ANYCUDA_CACHE_DIR=str(tmp_path), ANYCUDA_FINISH_AT_EXIT="1",
               ANYCUDA_BLOCK_PROGRAMS="0")      # (softmax's job queued at once, not at a launch's need)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", first], input=ptx, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "left" and r.stderr == "", r.stderr
    assert time.perf_counter() - t < 30
    checking = dict(env, ANYCUDA_FINISH_AT_EXIT="0")       # (the checks leave nothing to finish)
    deadline = time.monotonic() + 240
    while True:
        r = subprocess.run([sys.executable, "-c", again], input=ptx, capture_output=True, text=True,
                           env=checking, timeout=120)
        assert r.returncode == 0, r.stderr
        if r.stdout.strip() == "cached" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert r.stdout.strip() == "cached", "the finisher did not leave the optimised code in the cache"


def _until_its_block_program_runs(kernel, threads, rng):
    deadline = time.monotonic() + 300
    while kernel._programs.get((threads, 1, 1)) is None:
        assert time.monotonic() < deadline, "the block program never arrived"
        launch_reverse(kernel, threads, rng)
        time.sleep(0.02)
    launch_reverse(kernel, threads, rng)


def test_a_tiered_kernel_block_programs_run_has_its_optimised_code_made_only_at_need(jit_mode, monkeypatch, rng):
    """Tiered, a kernel with a barrier: its quick code runs the first launches while the server
    makes their block program, and its optimised code is a job the server is not given while
    block programs take every launch; a block shape none takes (12 threads) queues it, and the
    launches switch to it when it arrives. The cache holds the kernel's info at once: a later
    process (a new Program) compiles nothing for the block program's launches, and at a launch
    that needs the kernel's own code makes its quick code then and queues its optimised code."""
    jit_mode("tiered")
    given = []
    real_submit = tiers._Server.submit
    monkeypatch.setattr(tiers._Server, "submit", lambda server, job: given.append(job._name) or real_submit(server, job))
    prog = Program(REVERSE_PTX, "reverse.ptx")
    kernel = prog.kernel("reverse")
    job = prog.compiled_kernel("reverse").optimised
    assert isinstance(job, tiers.OptimisedCode) and not job.queued and kernel._jit is not None
    _until_its_block_program_runs(kernel, 64, rng)
    assert given == ["reverse.ptx:reverse.block64x1x1"] and not job.queued
    launch_reverse(kernel, 12, rng)
    assert job.queued and given[1:] == ["reverse.ptx:reverse"]
    assert job.done.wait(300) and job.error is None and job.object_code
    launch_reverse(kernel, 12, rng)
    assert kernel._quick and not kernel.optimising
    unit = ModuleIndex(REVERSE_PTX, "reverse.ptx").kernel_unit("reverse")
    hit = compiler.compile_kernel(unit, "reverse", "reverse.ptx")
    assert not hit.object_later and hit.object_code == job.object_code

    other = REVERSE_PTX.replace(".entry reverse(", ".entry reverse_again(")
    first = Program(other, "other.ptx").kernel("reverse_again")
    _until_its_block_program_runs(first, 64, rng)
    del given[:]
    later = Program(other, "other.ptx")
    again = later.kernel("reverse_again")
    compiled = later.compiled_kernel("reverse_again")
    assert compiled.object_later and compiled.optimised is None         # the info alone, from the cache
    launch_reverse(again, 64, rng)
    assert again._jit is None and given == []
    launch_reverse(again, 12, rng)                                     # quick code now, optimised code queued
    made = compiled.optimised
    assert again._jit is not None and again.optimising and made.queued and given == ["other.ptx:reverse_again"]
    assert made.done.wait(300) and made.error is None
    launch_reverse(again, 12, rng)
    assert again._quick and not again.optimising
    assert cache.load(pipeline._kernel_key(ModuleIndex(other, "other.ptx").kernel_unit("reverse_again"),
                                           "reverse_again", "other.ptx")).object_code == made.object_code
