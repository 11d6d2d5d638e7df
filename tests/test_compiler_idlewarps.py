"""Warps with nothing to do in a stretch of a block program (compiler/vector/idlewarps.py): the
loop over a stretch's warps stops after the last warp with a lane in its work, where what the
stretch keeps past its barrier is the same for every warp.

Kernels in hand-written PTX (the shapes exactly as the analysis sees them) run against numpy
on random inputs with poisoned outputs, and the counts of warps each stretch runs are read
from the block program's IR.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler import pipeline
from anycuda.compiler.analysis import shapevalues
from anycuda.compiler.vector import idlewarps, unrolling
from anycuda.ptx import parse
from conformance import TREE_REDUCTION

HEADER = """.version 8.0
.target sm_80
.address_size 64
"""

# the kernels' start: s[t] = in[i], i the thread's index in the grid, %r10 = &s[t]
LOAD = """  .reg .b32 %r<12>; .reg .pred %p<3>; .reg .b64 %rd<8>;
  .shared .align 4 .b8 s[4096];
  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r8, [%rd4];
  shl.b32 %r9, %r1, 2;
  mov.u32 %r10, s;
  add.s32 %r10, %r10, %r9;
  st.shared.u32 [%r10], %r8;
"""


def _kernel(name, prefix, after="add.s32 %r7, %r7, %r5;"):
    """s[t] = in[i]; barrier; `prefix`; if (t < 40) s[t] = s[t + 1] + r5; barrier; out[i] =
    s[t] (`after` on the way)."""
    return f""".visible .entry {name}(.param .u64 in, .param .u64 out)
{{
{LOAD}  bar.sync 0;
  {prefix}
  setp.ge.u32 %p1, %r1, 40;
  @%p1 bra SKIP;
  ld.shared.u32 %r6, [%r10+4];
  add.s32 %r6, %r6, %r5;
  st.shared.u32 [%r10], %r6;
SKIP:
  bar.sync 0;
  ld.shared.u32 %r7, [%r10];
  {after}
  add.s64 %rd5, %rd2, %rd3;
  st.global.u32 [%rd5], %r7;
  ret;
}}
"""


def _guard_known_earlier(name, entry):
    """s[t] = in[i]; p = t >= 40 (in the entry code where `entry`, else in the first step's
    prefix); barrier; twice: if (!p) s[t] = s[t + 1] + 7; barrier; then out[i] = s[t]."""
    test = "setp.ge.u32 %p1, %r1, 40;"
    steps = "".join(f"""  @%p1 bra {label};
  ld.shared.u32 %r6, [%r10+4];
  add.s32 %r6, %r6, 7;
  st.shared.u32 [%r10], %r6;
{label}:
  bar.sync 0;
""" for label in ("ONE", "TWO"))
    return f""".visible .entry {name}(.param .u64 in, .param .u64 out)
{{
{LOAD}  {test if entry else ""}
  bar.sync 0;
  {"" if entry else test}
{steps}  ld.shared.u32 %r7, [%r10];
  add.s64 %rd5, %rd2, %rd3;
  st.global.u32 [%rd5], %r7;
  ret;
}}
"""


PTX = HEADER + "\n".join([
    # a constant written before the test and read after the barrier: kept alike for every warp
    _kernel("constant_kept", "mov.u32 %r5, 7;"),
    # the steps' guard written before them, once: in the entry code, or in the first's prefix
    _guard_known_earlier("guard_in_entry", True),
    _guard_known_earlier("guard_in_a_prefix", False),
    # a value of each thread's own written there: the idle warps would keep a stale one
    _kernel("varying_kept", "mul.lo.u32 %r5, %r1, 3;"),
    # the step's own register read after the barrier: every warp runs the stretch
    _kernel("span_kept", "mov.u32 %r5, 7;", after="add.s32 %r7, %r7, %r6;"),
])


def _busy_counts(kernel, threads) -> list:
    """The number of warps each stretch after the first runs, as the block program stores it."""
    text = pipeline.block_program_ir(PTX, "idle.ptx", kernel, threads)
    return [int(n) for n in re.findall(r"store i32 (\d+), i32\* %\"busy\.warps", text)]


def _run(kernel, threads, rng, poison):
    blocks = 3
    x = rng.integers(-1000, 1000, blocks * threads).astype(np.int32)
    out = poison(x.size, np.int32)
    ac.RawModule(ptx=PTX, name="idle.ptx").get_function(kernel)((blocks,), (threads,), (ac.asarray(x), out))
    return x.reshape(blocks, threads), out.get().reshape(blocks, threads)


def _step(x, r5):
    """s after `if (t < 40) s[t] = s[t + 1] + r5` (reading the values from before the step)."""
    s = x.copy()
    s[:, :40] = x[:, 1:41] + r5[:40]
    return s


@pytest.mark.parametrize("threads", [64, 256, 1024])
def test_a_constant_kept_past_the_barrier(rng, poison, threads):
    # t < 40: warps 0 and 1 (at 64 threads, all of them: no count to store)
    assert _busy_counts("constant_kept", threads) == ([2] if threads > 64 else [])
    x, got = _run("constant_kept", threads, rng, poison)
    np.testing.assert_array_equal(got, _step(x, np.full(threads, 7)) + 7)


@pytest.mark.parametrize("threads", [128, 256])
def test_a_value_of_each_thread_keeps_every_warp(rng, poison, threads):
    assert _busy_counts("varying_kept", threads) == [threads // 32]
    x, got = _run("varying_kept", threads, rng, poison)
    t = np.arange(threads)
    np.testing.assert_array_equal(got, _step(x, 3 * t) + 3 * t)


def test_a_register_of_the_step_kept_keeps_every_warp(rng, poison):
    threads = 256
    fn = parse(PTX, "idle.ptx").function("span_kept")
    cut = next(p for p, st in enumerate(fn.body) if getattr(st, "opcode", None) == "bar") + 1
    end = next(p for p, st in enumerate(fn.body) if p > cut and getattr(st, "opcode", None) == "bar") + 1
    values = shapevalues.BlockValues(fn.body, (threads, 1, 1))
    assert idlewarps.busy_warps(fn.body, cut, end, (threads, 1, 1), values, {"%r6", "%r10"}) is None
    assert idlewarps.busy_warps(fn.body, cut, end, (threads, 1, 1), values, {"%r10"}).warps == 2
    assert _busy_counts("span_kept", threads) == []
    x, got = _run("span_kept", threads, rng, poison)
    # r6 is the step's sum in the lanes that ran it, and whatever it held before elsewhere
    step = _step(x, np.full(threads, 7))
    np.testing.assert_array_equal(got[:, :40], 2 * step[:, :40])


def test_the_tree_reduction_runs_fewer_warps_each_halving(compile_cuda):
    ptx = ac.compile_to_ptx(TREE_REDUCTION, name="tree.cu")
    text = pipeline.block_program_ir(ptx, "tree.ptx", "tree", 512)
    counts = [int(n) for n in re.findall(r"store i32 (\d+), i32\* %\"busy\.warps", text)]
    # s = 256 .. 1 after the load, then thread 0's store (in the IR's order: last first)
    assert sorted(counts, reverse=True) == [8, 4, 2, 1, 1, 1, 1, 1, 1, 1]
    fn = unrolling.unroll_shape_loops(parse(ptx, "tree.ptx").function("tree"), (512, 1, 1))
    assert fn is not None


WARP_TAIL = r"""
extern "C" __global__ void warp_tail(const float* in, float* out) {
    __shared__ float s[256];
    unsigned int tid = threadIdx.x;
    s[tid] = in[blockIdx.x * 256 + tid];
    __syncthreads();
    for (unsigned int k = 128; k > 32; k >>= 1) {
        if (tid < k) s[tid] += s[tid + k];
        __syncthreads();
    }
    if (tid < 32) {
        volatile float* v = s;
        v[tid] += v[tid + 32]; v[tid] += v[tid + 16]; v[tid] += v[tid + 8];
        v[tid] += v[tid + 4]; v[tid] += v[tid + 2]; v[tid] += v[tid + 1];
    }
    if (tid == 0) out[blockIdx.x] = s[0];
}
"""


def test_a_stretch_of_two_spans_runs_the_warps_either_has(rng, poison):
    # the warp-synchronous tail: `if (tid < 32) {...}` then `if (tid == 0) out[...] = s[0]`,
    # one stretch after the last barrier, whose pieces both run in the first warp
    ptx = ac.compile_to_ptx(WARP_TAIL, name="tail.cu")
    text = pipeline.block_program_ir(ptx, "tail.ptx", "warp_tail", 256)
    counts = [int(n) for n in re.findall(r"store i32 (\d+), i32\* %\"busy\.warps", text)]
    assert sorted(counts) == [1, 2, 4]
    x = rng.standard_normal(3 * 256).astype(np.float32)
    out = poison(3, np.float32)
    ac.RawModule(ptx=ptx, name="tail.ptx").get_function("warp_tail")((3,), (256,), (ac.asarray(x), out))
    np.testing.assert_allclose(out.get(), x.reshape(3, 256).astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("threads, counts", [(64, [1]), (128, [1, 2]), (256, [1, 2, 4])])
def test_a_tail_after_a_loop_the_shape_skips_runs_one_warp(rng, poison, threads, counts):
    # the tail's loop bound from the block's size: blocks of 64 never enter the loop, whose
    # barrier then is dead code (unrolling.fold_shape_branches drops it) and cuts no stretch
    ptx = ac.compile_to_ptx(WARP_TAIL.replace("256 + tid", "blockDim.x + tid").replace(
        "k = 128", "k = blockDim.x / 2"), name="tail_any.cu")
    text = pipeline.block_program_ir(ptx, "tail_any.ptx", "warp_tail", threads)
    assert sorted(int(n) for n in re.findall(r"store i32 (\d+), i32\* %\"busy\.warps", text)) == counts
    x = rng.standard_normal(3 * threads).astype(np.float32)
    out = poison(3, np.float32)
    ac.RawModule(ptx=ptx, name="tail_any.ptx").get_function("warp_tail")((3,), (threads,), (ac.asarray(x), out))
    np.testing.assert_allclose(out.get(), x.reshape(3, threads).astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)

@pytest.mark.parametrize("kernel", ["guard_in_entry", "guard_in_a_prefix"])
@pytest.mark.parametrize("threads", [128, 256])
def test_a_guard_written_once_before_the_stretch(rng, poison, kernel, threads):
    # nvcc computes `t < d` once and branches on it in later stretches too (a Blelloch scan's
    # down-sweep): each thread's value is known where it was written, so the steps run 2 warps
    # (but the one whose prefix writes the guard: every warp keeps its own)
    first = 2 if kernel == "guard_in_entry" else threads // 32
    assert sorted(_busy_counts(kernel, threads)) == sorted([first, 2])
    x, got = _run(kernel, threads, rng, poison)
    np.testing.assert_array_equal(got, _step(_step(x, np.full(threads, 7)), np.full(threads, 7)))
