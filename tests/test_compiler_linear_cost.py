"""Lowering costs O(n log n) at worst in a function's instructions: tests that count work.

Each test lowers generated kernels (tests/ptx_generators.py: deep loop nests, if/else
diamonds, breaks, early exits, grid-stride loops, loops of barriers, shuffles, loads,
stores, integer and float arithmetic) of n and 4n instructions, the larger four times as
much code of the same kind (the same seed: its first pieces are the smaller one's), and
compares the work done, never the seconds: Python lines run in compiler/ (a trace), calls of
the per-instruction helpers every analysis goes through, the blocks the sparse analyses
visit, the LLVM instructions made. Growth of 4x the instructions may cost 4 * log(4n)/log(n)
(n log n) and some slack for the kernels' differences; an analysis that walks the body once
per loop, site, region or register (what these tests were written against: reaching
definitions, liveness, lane strides, written-since-resume and the warp regions' analyses,
each O(n^2)) grows 16x.

The generated kernels also run, against the generator's numpy model."""
import collections
import math
import sys

import pytest

from anycuda.compiler.analysis import cfg, dataflow
from anycuda.compiler.vector import laneshapes
from anycuda.compiler.lowering.module import ModuleLowering
from anycuda.ptx import parse
import ptx_generators as gen

SLACK = 1.35            # kernels of one seed differ a little beyond their size


def _allowed(n_small, n_large):
    """The growth n log n allows from n_small to n_large instructions, with SLACK."""
    return n_large * math.log(n_large) / (n_small * math.log(n_small)) * SLACK


def _lower(kernel, lean=False):
    return ModuleLowering(parse(kernel.ptx, "gen.ptx"), "gen.ptx", lean=lean).lower()


def _traced_lines(kernel) -> collections.Counter:
    """{(file, function): Python lines run in anycuda/compiler/} while `kernel` is lowered."""
    module = parse(kernel.ptx, "gen.ptx")
    lines = collections.Counter()

    def tracer(frame, event, arg):
        code = frame.f_code
        if "anycuda/compiler" not in code.co_filename.replace("\\", "/"):
            return None
        key = (code.co_filename.rsplit("/", 1)[-1], code.co_name)

        def local(frame, event, arg):
            if event == "line":
                lines[key] += 1
            return local
        return local
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        lowering = ModuleLowering(module, "gen.ptx").lower()
    finally:
        sys.settrace(previous)
    assert not lowering.function_errors and all(k.error is None for k in lowering.kernels.values())
    return lines


class _Counts:
    """Calls of the per-instruction helpers of the analyses, and the blocks the sparse ones
    visit, counted by wrapping them (module globals, which the analyses look up per call: in
    the module that defines one and in each compiler module that imports it by name)."""

    HELPERS = ((dataflow, "defs_uses"), (dataflow, "_written_by"), (cfg, "build_cfg"),
               (dataflow, "definition_positions"), (laneshapes, "instruction_stride"))

    def __init__(self, monkeypatch):
        self.calls = collections.Counter()
        for module, name in self.HELPERS:
            key = f"{module.__name__.rsplit('.', 1)[-1]}.{name}"
            original = getattr(module, name)
            counted = self._counting(key, original)
            for other in list(sys.modules.values()):
                if getattr(other, "__name__", "").startswith("anycuda.compiler") \
                        and getattr(other, name, None) is original:
                    monkeypatch.setattr(other, name, counted)
        original = dataflow.ReachingDefinitions._entry

        def entry(rd, b, r):
            before = rd.visits
            try:
                return original(rd, b, r)
            finally:
                self.calls["reaching definitions: blocks solved"] += rd.visits - before
        monkeypatch.setattr(dataflow.ReachingDefinitions, "_entry", entry)

    def _counting(self, key, fn):
        def counted(*args, **kwargs):
            self.calls[key] += 1
            if key.endswith("build_cfg"):
                self.calls["blocks built"] += len(args[0])      # statements walked
            return fn(*args, **kwargs)
        return counted

    def measure(self, kernel, lean=False) -> collections.Counter:
        self.calls.clear()
        lowering = _lower(kernel, lean)
        assert all(k.error is None for k in lowering.kernels.values())
        counts = collections.Counter(self.calls)
        counts["LLVM instructions"] = sum(len(b.instructions) for fn in lowering.mod.functions for b in fn.blocks)
        return counts


def _check_growth(small, large, n_small, n_large, least=1):
    allowed = _allowed(n_small, n_large)
    grew = {k: large[k] / small[k] for k in large if small.get(k, 0) >= least}
    too_much = {k: round(g, 2) for k, g in grew.items() if g > allowed}
    assert not too_much, f"more than n log n ({allowed:.2f}x) from {n_small} to {n_large} instructions: {too_much}"
    return grew


def test_kernel_sizes():
    for n in (1000, 4000, 12000):
        k = gen.random_kernel(n, 3, chunk=500)
        assert abs(k.instructions - n) < 20
        assert k.ptx.count("bar.sync") and k.ptx.count(" ret;") > 1


def test_lines_run_grow_as_n_log_n():
    """Every line of compiler/ that lowering runs, 1,000 against 4,000 instructions: in all,
    and for each function that ran 5,000 lines or more for the smaller kernel."""
    small, large = gen.random_kernel(1000, 3, chunk=500), gen.random_kernel(4000, 3, chunk=500)
    a, b = _traced_lines(small), _traced_lines(large)
    _check_growth({"all": sum(a.values())}, {"all": sum(b.values())}, small.instructions, large.instructions)
    _check_growth(a, b, small.instructions, large.instructions, least=5000)


def test_analysis_work_grows_as_n_log_n(monkeypatch):
    counts = _Counts(monkeypatch)
    small, large = gen.random_kernel(3000, 5), gen.random_kernel(12000, 5)
    a, b = counts.measure(small), counts.measure(large)
    assert a["reaching definitions: blocks solved"] and b["laneshapes.instruction_stride"]
    _check_growth(a, b, small.instructions, large.instructions, least=10)


@pytest.mark.slow
def test_a_kernel_of_50000_instructions(monkeypatch):
    """The issue's size: 12,500 against 50,000 instructions, deep loop nests and many branches,
    lowered as the pipeline lowers a kernel this big (lean: pipeline.BIG_KERNEL, for its
    optimised code and, with `quick`, for its quick code), and the large one's quick code
    compiled. (The full lowering, which no tier gives a kernel of this size, took 34 s of this
    test's 87; its growth is test_analysis_work_grows_as_n_log_n's, at 3,000 and 12,000.)"""
    from anycuda.compiler.build.jit import compile_to_object
    from anycuda.compiler.pipeline import BIG_KERNEL
    counts = _Counts(monkeypatch)
    small, large = gen.random_kernel(12500, 7), gen.random_kernel(50000, 7)
    assert small.instructions >= BIG_KERNEL
    a, b = counts.measure(small, lean=True), counts.measure(large, lean=True)
    _check_growth(a, b, small.instructions, large.instructions, least=10)
    quick = ModuleLowering(parse(large.ptx, "gen.ptx"), "gen.ptx", lean=True, quick=True).lower()
    assert not quick.function_errors and all(k.error is None for k in quick.kernels.values())
    assert compile_to_object(str(quick.mod), "gen50000", optimised=False)


def test_the_issue_kernel_of_125_small_loops(monkeypatch):
    counts = _Counts(monkeypatch)
    small, large = gen.small_loops_kernel(31, 2), gen.small_loops_kernel(125, 2)
    assert 2800 < large.instructions < 3200
    _check_growth(counts.measure(small), counts.measure(large), small.instructions, large.instructions, least=10)


def _run(kernel, grid, block, rng):
    kernel.check_launch(grid, block, rng)


# Quick code (ANYCUDA_JIT=quick) for the most: optimised code of a 700-instruction kernel
# takes LLVM 20-30 s here; one small kernel goes through the optimiser too.
@pytest.mark.parametrize("seed", [11, 13, 24])
def test_generated_kernels_compute_what_their_model_does(seed, rng, monkeypatch, fresh_cache):
    monkeypatch.setenv("ANYCUDA_JIT", "quick")
    _run(gen.random_kernel(700, seed, name=f"gen_{seed}"), 3, 64, rng)


def test_a_generated_kernel_optimised_computes_what_its_model_does(rng, monkeypatch, fresh_cache):
    monkeypatch.setenv("ANYCUDA_JIT", "optimised")
    _run(gen.random_kernel(300, 13, name="gen_opt13"), 2, 64, rng)


def test_generated_small_loops_compute_what_their_model_does(rng, monkeypatch, fresh_cache):
    monkeypatch.setenv("ANYCUDA_JIT", "quick")
    _run(gen.small_loops_kernel(16, 4, name="loops_4"), 2, 128, rng)


@pytest.mark.parametrize("seed", range(4))
def test_larger_generated_kernels_compute_what_their_model_does(seed, rng, monkeypatch, fresh_cache):
    monkeypatch.setenv("ANYCUDA_JIT", "quick")
    _run(gen.random_kernel(2500, 100 + seed, name=f"gen_l{seed}"), 3, 64, rng)


def test_a_big_step_function_is_called_from_its_rounds_not_copied(rng, monkeypatch, fresh_cache):
    """Above STEP_INLINE_LIMIT the rounds call one noinline step function; optimised, the
    kernel still computes what its model does."""
    from anycuda.compiler.simt import blockfunction

    def step_definition():
        text = str(_lower(kernel).mod)
        return next(line for line in text.splitlines() if line.startswith("define") and '@"ptx.k0.step"(' in line)
    kernel = gen.random_kernel(300, 17, name="gen_called17")
    assert not step_definition().endswith("noinline")
    monkeypatch.setattr(blockfunction, "STEP_INLINE_LIMIT", 0)
    assert step_definition().endswith("noinline")
    monkeypatch.setenv("ANYCUDA_JIT", "optimised")
    _run(kernel, 2, 64, rng)


def test_a_huge_module_is_optimised_with_the_light_passes(rng, monkeypatch, fresh_cache):
    """Above jit.LIGHT_ABOVE_LINES lines of IR the optimiser runs LIGHT_PASSES, not O3; the
    kernel still computes what its model does (barriers, shuffles, loops, grid-stride loops)."""
    from anycuda.compiler.build import jit
    line = jit.LIGHT_ABOVE_LINES
    assert jit.is_huge("define a\n" + "\n" * (line + 1)) and not jit.is_huge("define a\n" + "\n" * 100)
    assert not jit.is_huge("define a\n" + "\n" * (line // 2) + "\ndefine b\n" + "\n" * (line // 2))
    optimise, calls = jit.optimise, []

    def spy(mod, level=3, light=False):
        calls.append(light)
        optimise(mod, level, light)
    monkeypatch.setattr(jit, "optimise", spy)
    monkeypatch.setattr(jit, "LIGHT_ABOVE_LINES", 0)
    monkeypatch.setenv("ANYCUDA_JIT", "optimised")
    _run(gen.random_kernel(400, 19, name="gen_light19"), 2, 64, rng)
    assert calls and all(calls)
