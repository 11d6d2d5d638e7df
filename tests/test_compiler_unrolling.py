"""Loops the block shape fixes, unrolled for block programs (compiler/vector/unrolling.py) and
the values behind their trip counts (compiler/analysis/shapevalues.py).

Kernels run against numpy on fresh random inputs with poisoned outputs, at several block
sizes; each test also says which way the kernel ran (a block program, or the rounds for a
loop whose count the shape does not fix).
"""
from __future__ import annotations

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler import pipeline
from anycuda.compiler.analysis import shapevalues
from anycuda.compiler.vector import unrolling
from anycuda.ptx import ir, parse

SOURCE = r"""
// the classic shared-memory tree, spelled with a signed stride halved by division: the
// loop's count is log2(blockDim.x)
extern "C" __global__ void tree_sum(const float* in, float* out, int n) {
    extern __shared__ float partial[];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    partial[t] = 0.0f;
    if (i < n) partial[t] = in[i];
    __syncthreads();
    for (int stride = blockDim.x >> 1; stride != 0; stride /= 2) {
        if (t < stride) partial[t] = partial[t] + partial[t + stride];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = partial[0];
}

// threads leaving inside the loop once their part is done (a return there is no loop exit)
extern "C" __global__ void tree_sum_leaving(const float* in, float* out) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    sdata[tid] = in[blockIdx.x * blockDim.x + tid];
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid >= 2 * s) return;
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// lanes leaving inside an if: after it the mask is not the one before it
extern "C" __global__ void leave_in_if(const int* in, int* out) {
    __shared__ int s[1024];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = -7;
    __syncthreads();
    int v = in[i];
    if ((t & 3) == 0) {
        if (v < 0) return;
        v *= 2;
    }
    s[t] = v;
    __syncthreads();
    out[i] = s[(t + 1) % blockDim.x] + v;
}

// two nested loops, the inner one's count set by the outer one's counter
extern "C" __global__ void block_sort(const int* in, int* out) {
    extern __shared__ int keys[];
    int* s = keys;
    unsigned t = threadIdx.x, base = blockIdx.x * blockDim.x;
    s[t] = in[base + t];
    __syncthreads();
    for (unsigned k = 2; k <= blockDim.x; k <<= 1) {
        for (unsigned j = k >> 1; j > 0; j >>= 1) {
            unsigned p = t ^ j;
            if (p > t) {
                int a = s[t], b = s[p];
                bool up = (t & k) == 0;
                if ((a > b) == up) { s[t] = b; s[p] = a; }
            }
            __syncthreads();
        }
    }
    out[base + t] = s[t];
}

// a loop left in its middle, counting up to the block's size (a Hillis-Steele scan)
extern "C" __global__ void doubling_scan(const float* in, float* out) {
    extern __shared__ float sdata[];
    float* s = sdata;
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = in[i];
    __syncthreads();
    for (unsigned d = 1;; d *= 2) {
        if (d >= blockDim.x) break;
        float v = t >= d ? s[t - d] : 0.0f;
        __syncthreads();
        s[t] += v;
        __syncthreads();
    }
    out[i] = s[t];
}

// the same tree with its width from a parameter: the shape does not fix the count
extern "C" __global__ void tree_sum_width(const float* in, float* out, unsigned width) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = in[i];
    __syncthreads();
    for (unsigned int s = width / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// a count that differs between threads: no block program
extern "C" __global__ void per_thread_count(int* out) {
    __shared__ int seen[1024];
    int t = threadIdx.x, total = 0;
    seen[t] = t;
    __syncthreads();
    for (int k = 0; k < (t & 7); ++k) total += seen[(t + k + 1) % blockDim.x];
    out[blockIdx.x * blockDim.x + t] = total;
}
"""


@pytest.fixture
def module(compile_cuda):
    return compile_cuda(SOURCE, name="unrolling.cu")


def _ran_as_program(kernel, threads) -> bool:
    return kernel.kernel._programs.get((threads, 1, 1)) is not None


@pytest.mark.parametrize("threads,n", [(32, 100), (64, 1000), (256, 5000), (1024, 4096)])
def test_tree_reduction(module, rng, poison, threads, n):
    x = rng.standard_normal(n).astype(np.float32)
    blocks = -(-n // threads)
    out = poison(blocks, np.float32)
    k = module.get_function("tree_sum")
    k((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)), shared_mem=4 * threads)
    padded = np.zeros(blocks * threads, np.float32)
    padded[:n] = x
    np.testing.assert_allclose(out.get(), padded.reshape(blocks, threads).sum(1, dtype=np.float64), rtol=1e-4, atol=1e-4)
    assert _ran_as_program(k, threads)


@pytest.mark.parametrize("threads", [64, 512])
def test_threads_returning_inside_the_loop(module, rng, poison, threads):
    blocks = 6
    x = rng.integers(-100, 100, blocks * threads).astype(np.float32)
    out = poison(blocks, np.float32)
    k = module.get_function("tree_sum_leaving")
    k((blocks,), (threads,), (ac.asarray(x), out), shared_mem=4 * threads)
    np.testing.assert_array_equal(out.get(), x.reshape(blocks, threads).sum(1))
    assert _ran_as_program(k, threads)


@pytest.mark.parametrize("threads", [32, 64, 256])
def test_nested_loops_of_a_bitonic_sort(module, rng, poison, threads):
    blocks = 5
    x = rng.integers(-10**6, 10**6, blocks * threads).astype(np.int32)
    out = poison(x.size, np.int32)
    k = module.get_function("block_sort")
    k((blocks,), (threads,), (ac.asarray(x), out), shared_mem=4 * threads)
    np.testing.assert_array_equal(out.get(), np.sort(x.reshape(blocks, threads), axis=1).ravel())
    assert _ran_as_program(k, threads)


@pytest.mark.parametrize("threads", [32, 96, 512])
def test_a_loop_left_in_its_middle(module, rng, poison, threads):
    blocks = 3
    x = rng.integers(-50, 50, blocks * threads).astype(np.float32)      # exact sums
    out = poison(x.size, np.float32)
    k = module.get_function("doubling_scan")
    k((blocks,), (threads,), (ac.asarray(x), out), shared_mem=4 * threads)
    np.testing.assert_array_equal(out.get(), np.cumsum(x.reshape(blocks, threads), axis=1).ravel())
    assert _ran_as_program(k, threads)


def test_a_count_from_a_parameter_stays_a_loop(module, rng, poison):
    """A trip count from a parameter is not unrolled: the block program runs the loop around
    its barrier as a loop of stretches (blockstretches.py)."""
    threads, blocks = 128, 4
    x = rng.standard_normal(blocks * threads).astype(np.float32)
    out = poison(blocks, np.float32)
    k = module.get_function("tree_sum_width")
    k((blocks,), (threads,), (ac.asarray(x), out, np.uint32(threads)), shared_mem=4 * threads)
    np.testing.assert_allclose(out.get(), x.reshape(blocks, threads).sum(1, dtype=np.float64), rtol=1e-4, atol=1e-4)
    assert _ran_as_program(k, threads)


def test_a_count_per_thread_stays_a_loop(module, poison):
    """A trip count each thread has its own of is not unrolled: the block program runs the
    loop as one (blockloops.py)."""
    threads, blocks = 64, 2
    out = poison(blocks * threads, np.int32)
    k = module.get_function("per_thread_count")
    k((blocks,), (threads,), (out,))
    t = np.arange(threads)
    want = np.array([sum((u + j + 1) % threads for j in range(u & 7)) for u in t], np.int32)
    np.testing.assert_array_equal(out.get(), np.tile(want, blocks))
    assert _ran_as_program(k, threads)


HEADER = """.version 8.0
.target sm_80
.address_size 64
"""


@pytest.mark.parametrize("threads", [64, 256])
def test_lanes_leaving_inside_an_if(module, rng, threads):
    blocks = 4
    x = rng.integers(-100, 100, blocks * threads).astype(np.int32)
    out = ac.asarray(np.full(x.size, -123456789, np.int32))          # poison the lanes that leave keep
    k = module.get_function("leave_in_if")
    k((blocks,), (threads,), (ac.asarray(x), out))
    t = np.tile(np.arange(threads), blocks)
    left = (t & 3 == 0) & (x < 0)
    v = np.where(t & 3 == 0, 2 * x, x)
    s = np.where(left, -7, v).reshape(blocks, threads)
    want = np.roll(s, -1, axis=1).ravel() + v
    got = out.get()
    np.testing.assert_array_equal(got[~left], want[~left])
    assert (got[left] == -123456789).all()               # the lanes that left wrote nothing
    assert _ran_as_program(k, threads)


SHAPE_BRANCH_PTX = HEADER + """.visible .entry by_width(.param .u64 out)
{
  .reg .b32 %r<4>; .reg .pred %p<2>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %ntid.x;
  mov.u32 %r3, %tid.x;
  mov.u32 %r2, 1;
  setp.eq.u32 %p1, %r1, 64;
  @%p1 bra WIDE;
  mov.u32 %r2, 2;
WIDE:
  bar.sync 0;
  mul.wide.u32 %rd2, %r3, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  ret;
}
"""


@pytest.mark.parametrize("threads,taken", [(64, True), (128, False)])
def test_branches_the_shape_decides_are_folded(poison, threads, taken):
    fn = parse(SHAPE_BRANCH_PTX, "shape.ptx").function("by_width")
    folded = unrolling.fold_shape_branches(fn, (threads, 1, 1))
    branches = [st for st in folded.body if isinstance(st, ir.Instruction) and st.opcode == "bra"]
    assert [st.guard for st in branches] == ([None] if taken else [])
    k = ac.RawModule(ptx=SHAPE_BRANCH_PTX, name="shape.ptx").get_function("by_width")
    out = poison(threads, np.int32)
    k((1,), (threads,), (out,))
    np.testing.assert_array_equal(out.get(), np.full(threads, 1 if taken else 2))
    assert _ran_as_program(k, threads)


# `for (k = blockDim.x / 2; k > 32; k >>= 1) { ...; __syncthreads(); }` as nvcc lays it out: a
# test of the shape before the loop, which blocks of 64 skip whole; its barrier then is dead
# code that must not count (it cut the block program's stretches there)
DEAD_LOOP_PTX = HEADER + """.visible .entry halves(.param .u64 out)
{
  .reg .b32 %r<8>; .reg .pred %p<4>; .reg .b64 %rd<4>;
  .shared .align 4 .b8 s[4096];
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %ntid.x;
  mov.u32 %r3, %tid.x;
  shl.b32 %r4, %r3, 2;
  mov.u32 %r5, s;
  add.s32 %r5, %r5, %r4;
  st.shared.u32 [%r5], %r3;
  bar.sync 0;
  setp.lt.u32 %p1, %r1, 66;
  @%p1 bra TAIL;
HALVE:
  shr.u32 %r1, %r1, 1;
  setp.ge.u32 %p2, %r3, %r1;
  @%p2 bra SKIP;
  shl.b32 %r6, %r1, 2;
  add.s32 %r6, %r5, %r6;
  ld.shared.u32 %r7, [%r6];
  ld.shared.u32 %r2, [%r5];
  add.s32 %r2, %r2, %r7;
  st.shared.u32 [%r5], %r2;
SKIP:
  bar.sync 0;
  setp.gt.u32 %p3, %r1, 65;
  @%p3 bra HALVE;
TAIL:
  ld.shared.u32 %r2, [%r5];
  mul.wide.u32 %rd2, %r3, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  ret;
}
"""


def _barriers(fn) -> int:
    return sum(isinstance(st, ir.Instruction) and st.opcode == "bar" for st in fn.body)


@pytest.mark.parametrize("threads", [64, 128, 256])
def test_code_a_folded_branch_skips_is_dropped(poison, threads):
    fn = parse(DEAD_LOOP_PTX, "dead.ptx").function("halves")
    folded = unrolling.fold_shape_branches(unrolling.unroll_shape_loops(fn, (threads, 1, 1)), (threads, 1, 1))
    labels = {st.name for st in folded.body if isinstance(st, ir.Label)}
    if threads == 64:       # the loop is never entered: its barrier and labels are gone
        assert _barriers(folded) == 1 and not labels & {"HALVE", "SKIP"}
    else:                   # written out, a barrier a halving down to 32 threads
        assert _barriers(folded) == 1 + {128: 1, 256: 2}[threads]
    k = ac.RawModule(ptx=DEAD_LOOP_PTX, name="dead.ptx").get_function("halves")
    out = poison(threads, np.int32)
    k((1,), (threads,), (out,))
    np.testing.assert_array_equal(out.get(), _halved(threads))
    assert _ran_as_program(k, threads)


def _halved(threads):
    """The kernel's shared memory at its end: s[t] = t, then halvings while k > 65."""
    s = np.arange(threads)
    k = threads
    while k > 65:
        k >>= 1
        s[:k] += s[k:2 * k]
    return s


def test_an_indirect_branch_keeps_the_code_it_may_reach():
    ptx = HEADER + """.visible .entry pick(.param .u64 out)
{
  .reg .b32 %r<4>; .reg .pred %p<2>; .reg .b64 %rd<2>;
  ts: .branchtargets A, B;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %ntid.x;
  mov.u32 %r2, 0;
  setp.eq.u32 %p1, %r1, 64;
  @%p1 bra B;
  brx.idx %r2, ts;
A:
  mov.u32 %r3, 1;
  st.global.u32 [%rd1], %r3;
  ret;
B:
  mov.u32 %r3, 2;
  st.global.u32 [%rd1], %r3;
  ret;
}
"""
    fn = parse(ptx, "pick.ptx").function("pick")
    folded = unrolling.fold_shape_branches(fn, (64, 1, 1))
    assert len(folded.body) == len(fn.body) and any(isinstance(st, ir.Label) and st.name == "A" for st in folded.body)


LOOPS_PTX = HEADER + """.visible .entry counted(.param .u64 out)
{
  .reg .b32 %r<6>; .reg .pred %p<3>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r3, %tid.x;
  mov.u32 %r1, 0;
  mov.u32 %r2, 0;
  bar.sync 0;
LOOP:
  add.s32 %r1, %r1, 1;
  add.s32 %r2, %r2, %r3;
  setp.lt.s32 %p1, %r1, 10;
  @%p1 bra LOOP;
  mul.wide.u32 %rd2, %r3, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  ret;
}
.visible .entry too_long(.param .u64 out)
{
  .reg .b32 %r<3>; .reg .pred %p<2>;
  mov.u32 %r1, 0;
  bar.sync 0;
LOOP:
  add.s32 %r1, %r1, 1;
  setp.lt.s32 %p1, %r1, 1000;
  @%p1 bra LOOP;
  ret;
}
"""


def test_a_constant_count_is_written_out_and_runs(poison):
    module = parse(LOOPS_PTX, "loops.ptx")
    counted = module.function("counted")
    unrolled = unrolling.unroll_shape_loops(counted, (64, 1, 1))
    adds = [st for st in unrolled.body if isinstance(st, ir.Instruction) and st.opcode == "add"
            and st.operands[0] == ir.Reg("%r1")]
    assert len(adds) == 10 and not any(isinstance(st, ir.Instruction) and st.opcode == "bra" for st in unrolled.body)
    assert pipeline.block_program_ir(LOOPS_PTX, "loops.ptx", "counted", 64)
    m = ac.RawModule(ptx=LOOPS_PTX, name="loops.ptx")
    out = poison(64, np.int32)
    k = m.get_function("counted")
    k((1,), (64,), (out,))
    np.testing.assert_array_equal(out.get(), 10 * np.arange(64))
    assert _ran_as_program(k, 64)


def test_a_loop_past_the_limit_stays_a_loop():
    module = parse(LOOPS_PTX, "loops.ptx")
    fn = module.function("too_long")
    assert unrolling.unroll_shape_loops(fn, (64, 1, 1)) is fn
    assert "loop.end" in pipeline.block_program_ir(LOOPS_PTX, "loops.ptx", "too_long", 64)   # (blockloops.py)


def _instruction(opcode, mods, *operands):
    return ir.Instruction(opcode, tuple(mods), tuple(operands), ir.Loc(1, 1))


R = ir.Reg


def _imm(v):
    return ir.Imm(v)


@pytest.mark.parametrize("opcode,mods,a,b,want", [
    ("shr", ("u32",), 0x80000000, 4, 0x08000000),
    ("shr", ("s32",), 0x80000000, 4, 0xF8000000),           # arithmetic: the sign comes in
    ("shr", ("s32",), 0x80000000, 40, 0xFFFFFFFF),          # past the width: all sign
    ("shr", ("u32",), 0x80000000, 40, 0),
    ("shl", ("b32",), 3, 31, 0x80000000),
    ("shl", ("b64",), 3, 64, 0),
    ("div", ("s32",), (-7) & 0xFFFFFFFF, 2, (-3) & 0xFFFFFFFF),   # towards zero, as C
    ("rem", ("s32",), (-7) & 0xFFFFFFFF, 2, (-1) & 0xFFFFFFFF),
    ("div", ("u32",), 0xFFFFFFF9, 2, 0x7FFFFFFC),
    ("min", ("s32",), 0xFFFFFFFF, 1, 0xFFFFFFFF),
    ("min", ("u32",), 0xFFFFFFFF, 1, 1),
    ("add", ("u32",), 0xFFFFFFFF, 2, 1),                    # wraps at the width
    ("sub", ("s64",), 0, 1, 0xFFFFFFFFFFFFFFFF),
])
def test_integer_operations(opcode, mods, a, b, want):
    env = {"%a": a, "%b": b}
    assert shapevalues.execute(_instruction(opcode, mods, R("%d"), R("%a"), R("%b")), env, (1, 1, 1)) == {"%d": want}


@pytest.mark.parametrize("mods,a,b,want", [
    (("lt", "s32"), 0xFFFFFFFF, 0, 1),          # -1 < 0
    (("lt", "u32"), 0xFFFFFFFF, 0, 0),
    (("lo", "u32"), 1, 2, 1),
    (("ge", "s64"), 5, 5, 1),
    (("ne", "b32"), 5, 5, 0),
])
def test_comparisons(mods, a, b, want):
    st = _instruction("setp", mods, ir.Pair(R("%p"), R("%q")), R("%a"), R("%b"))
    assert shapevalues.execute(st, {"%a": a, "%b": b}, (1, 1, 1)) == {"%p": want, "%q": 1 - want}


def test_conversions_products_and_the_block_shape():
    env = {"%a": 0xFFFFFFFE}
    assert shapevalues.execute(_instruction("cvt", ("s64", "s32"), R("%d"), R("%a")), env, (1, 1, 1)) == \
        {"%d": 0xFFFFFFFFFFFFFFFE}
    assert shapevalues.execute(_instruction("cvt", ("u64", "u32"), R("%d"), R("%a")), env, (1, 1, 1)) == \
        {"%d": 0xFFFFFFFE}
    assert shapevalues.execute(_instruction("mul", ("wide", "s32"), R("%d"), R("%a"), _imm(3)), env, (1, 1, 1)) == \
        {"%d": (-6) & 0xFFFFFFFFFFFFFFFF}
    ntid = ir.SpecialReg("ntid", "x")
    assert shapevalues.execute(_instruction("mov", ("u32",), R("%d"), ntid), {}, (96, 1, 1)) == {"%d": 96}
    assert shapevalues.execute(_instruction("mov", ("u32",), R("%d"), ir.SpecialReg("tid", "x")), {}, (96, 1, 1)) \
        is None
    assert shapevalues.execute(_instruction("add", ("f32",), R("%d"), _imm(1), _imm(2)), {}, (1, 1, 1)) is None
    assert shapevalues.execute(_instruction("div", ("u32",), R("%d"), _imm(1), _imm(0)), {}, (1, 1, 1)) is None


# ---------------------------------------------------------------- loops around warp collectives

WARP_LOOPS = r"""
// the warp sum as people write it, with warpSize (a PTX constant nvcc does not fold: the
// shuffle loop stays a loop in the PTX), after a grid-stride loop
__device__ float warp_total(float v) {
    for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_down_sync(0xffffffff, v, o);
    return v;
}

extern "C" __global__ void warp_loop_sum(const float* in, float* out, int n) {
    __shared__ float sums[32];
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += in[i];
    int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize;
    v = warp_total(v);
    if (lane == 0) sums[wid] = v;
    __syncthreads();
    v = threadIdx.x < blockDim.x / warpSize ? sums[lane] : 0.0f;
    if (wid == 0) v = warp_total(v);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}

// an xor butterfly counted up; the signed divisions by warpSize round towards zero
extern "C" __global__ void warp_loop_butterfly(const int* in, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    for (int m = 1; m < warpSize; m <<= 1) v += __shfl_xor_sync(0xffffffff, v, m);
    out[i] = v / warpSize + in[i] / warpSize + in[i] % warpSize;
}

// a shuffle loop whose count is a parameter stays a loop
extern "C" __global__ void warp_loop_param(const int* in, int* out, int steps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    for (int k = 0; k < steps; ++k) v += __shfl_down_sync(0xffffffff, v, 1);
    out[i] = v;
}
"""


@pytest.fixture
def warp_loops(compile_cuda):
    return compile_cuda(WARP_LOOPS, name="warp_loops.cu")


def _shuffles_in_loops(fn) -> list:
    """The shuffles of `fn` that some loop (a back edge's span of the text) holds."""
    from anycuda.compiler.analysis.cfg import build_cfg
    blocks = build_cfg(fn.body, {})
    spans = [(blocks[s].start, b.instructions[-1][0]) for b in blocks for s in b.succs if s <= b.index]
    return [p for p, st in enumerate(fn.body) if isinstance(st, ir.Instruction) and st.opcode == "shfl"
            and any(lo <= p <= hi for lo, hi in spans)]


def test_warp_loops_are_written_out_with_constant_offsets():
    from anycuda.compiler.vector import warpruns
    ptx = ac.compile_to_ptx(WARP_LOOPS, name="warp_loops.cu")
    module = parse(ptx, "warp_loops.ptx")
    for name, shuffles in (("warp_loop_sum", 10), ("warp_loop_butterfly", 5)):
        fn = module.function(name)
        assert _shuffles_in_loops(fn)                       # nvcc left them in loops
        done = unrolling.unroll_warp_loops(fn)
        found = [st for st in done.body if isinstance(st, ir.Instruction) and st.opcode == "shfl"]
        assert len(found) == shuffles and not _shuffles_in_loops(done)
        assert all(warpruns.fixed_shuffle(st, {}) for st in found)        # immediates now
    summed = unrolling.unroll_warp_loops(module.function("warp_loop_sum")).body
    ops = [(st.opcode, st.mods) for st in summed if isinstance(st, ir.Instruction)]
    assert ("rem", ("u32",)) not in ops and ("div", ("u32",)) not in ops      # a mask and a shift
    assert any(op == "bra" for op, _ in ops)                # the grid-stride loop stays
    butterfly = unrolling.unroll_warp_loops(module.function("warp_loop_butterfly")).body
    assert ("div", ("s32",)) in [(st.opcode, st.mods) for st in butterfly if isinstance(st, ir.Instruction)]
    param = module.function("warp_loop_param")
    assert _shuffles_in_loops(unrolling.unroll_warp_loops(param))


@pytest.mark.parametrize("threads,blocks,n", [(32, 3, 1000), (256, 7, 100_003), (512, 2, 5000), (1024, 1, 777)])
def test_warp_loop_sum(warp_loops, rng, poison, threads, blocks, n):
    x = rng.integers(-1000, 1000, n).astype(np.float32)            # exact sums
    out = poison(blocks, np.float32)
    warp_loops.get_function("warp_loop_sum")((blocks,), (threads,), (ac.asarray(x), out, np.int32(n)))
    stride = threads * blocks
    padded = np.zeros(-(-n // stride) * stride, np.float32)
    padded[:n] = x
    want = padded.reshape(-1, blocks, threads).sum(axis=(0, 2))
    np.testing.assert_array_equal(out.get(), want)


@pytest.mark.parametrize("threads", [32, 96, 256])
def test_warp_loop_butterfly(warp_loops, rng, poison, threads):
    blocks = 3
    x = rng.integers(-10**6, 10**6, blocks * threads).astype(np.int32)
    out = poison(x.size, np.int32)
    warp_loops.get_function("warp_loop_butterfly")((blocks,), (threads,), (ac.asarray(x), out))
    totals = np.repeat(x.reshape(-1, 32).sum(1), 32)
    towards_zero = lambda a: (np.abs(a) // 32) * np.sign(a)       # noqa: E731  (C's division)
    want = towards_zero(totals) + towards_zero(x) + (x - towards_zero(x) * 32)
    np.testing.assert_array_equal(out.get(), want)


@pytest.mark.parametrize("steps", [0, 3, 40])
def test_a_warp_loop_counted_by_a_parameter(warp_loops, rng, poison, steps):
    threads, blocks = 64, 2
    x = rng.integers(-1000, 1000, blocks * threads).astype(np.int32)
    out = poison(x.size, np.int32)
    warp_loops.get_function("warp_loop_param")((blocks,), (threads,), (ac.asarray(x), out, np.int32(steps)))
    v = x.reshape(-1, 32).astype(np.int64)
    for _ in range(steps):
        v = v + np.concatenate([v[:, 1:], v[:, -1:]], axis=1)      # lane 31 reads its own value
    np.testing.assert_array_equal(out.get(), (v.astype(np.int32)).ravel())


@pytest.mark.parametrize("opcode,mods", [("add", ("sat", "s32")), ("add", ("cc", "u32")), ("sub", ("cc", "u32")),
                                         ("mad", ("lo", "cc", "u32"))])
def test_operations_with_more_than_their_value_are_not_known(opcode, mods):
    """A saturating add clamps, a .cc one also writes the carry: constant propagation leaves
    them unknown, and known_operands does not make them a `mov` of a wrapped sum."""
    operands = (R("%d"), _imm(0x7FFFFFFF), _imm(5)) + ((_imm(1),) if opcode == "mad" else ())
    st = _instruction(opcode, mods, *operands)
    assert shapevalues.execute(st, {}, (1, 1, 1)) is None
    body = unrolling._known_operands([st])
    assert body[0].opcode == opcode


NEGATIVE_PTX = HEADER + """.visible .entry negatives(.param .u64 out)
{
  .reg .b32 %r<12>; .reg .pred %p<3>; .reg .b64 %rd<6>; .reg .b64 %s<3>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, -5;
  add.s32 %r3, %r2, %r2;
  setp.lt.s32 %p1, %r1, %r2;
  selp.s32 %r4, 1, 0, %p1;
  div.s32 %r5, %r3, 4;
  mov.b64 %s1, -3;
  mul.lo.s64 %s2, %s1, 7;
  cvt.u32.u64 %r6, %s2;
  mov.u32 %r8, -1;
  shfl.sync.bfly.b32 %r7, %r1, %r4, 31, %r8;
  mul.wide.u32 %rd2, %r1, 24;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v2.u32 [%rd3], {%r3, %r4};
  st.global.v2.u32 [%rd3+8], {%r5, %r6};
  st.global.v2.u32 [%rd3+16], {%r7, %r2};
  ret;
}
"""


def test_negative_constants_written_in(poison):
    """Registers known to hold negative values (kept as unsigned bits) become immediates and
    movs (known_operands): a signed compare, a signed division towards zero, a 64-bit product,
    a conversion and a shuffle's operands compute what they did as registers."""
    fn = parse(NEGATIVE_PTX, "neg.ptx").function("negatives")
    done = unrolling.unroll_warp_loops(fn)
    writers = {st.operands[0].name: st.opcode for st in done.body
               if isinstance(st, ir.Instruction) and st.operands and isinstance(st.operands[0], ir.Reg)}
    assert all(writers[r] == "mov" for r in ("%r3", "%r5", "%s2"))          # each result known
    assert writers["%r4"] == "selp"                                         # (tid < -5: per thread)
    shuffle = next(st for st in done.body if isinstance(st, ir.Instruction) and st.opcode == "shfl")
    assert all(isinstance(op, ir.Imm) for op in shuffle.operands[3:])      # clamp and member mask
    k = ac.RawModule(ptx=NEGATIVE_PTX, name="neg.ptx").get_function("negatives")
    out = poison(32 * 6, np.int32)
    k((1,), (32,), (out,))
    got = out.get().reshape(32, 6)
    t = np.arange(32)
    np.testing.assert_array_equal(got[:, 0], -10)
    np.testing.assert_array_equal(got[:, 1], 0)                 # tid < -5 never holds
    np.testing.assert_array_equal(got[:, 2], -2)                # -10 / 4 towards zero
    np.testing.assert_array_equal(got[:, 3], -21)
    np.testing.assert_array_equal(got[:, 4], t)                 # lane ^ 0
    np.testing.assert_array_equal(got[:, 5], -5)
