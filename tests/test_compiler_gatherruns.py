"""The vectoriser's gathers and scatters tested for runs (compiler/cpu/gatherruns.py): what
the text rewrite makes of them, that the module stays valid, and that kernels whose loads
and stores go through an index compute what numpy does, their outputs poisoned first, for
indices that make a warp's addresses one run, one address, some of each, or none, with
lanes off at the ends, and for an index a lane that is off never loads."""
import llvmlite.binding as llvm
import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.cpu import maskedaccesses
from conformance import poison
from test_compiler_guarded_access import fenced
from test_compiler_streamstores import _optimised_ir

# A loop of one block with a gather under a variable mask, one under the constant mask with
# every lane on, and a scatter, of addresses from 32-bit indices; a gather outside a loop.
GATHERS = r"""
define i64 @f(ptr %p, <8 x i64> %idx, <8 x i32> %idx32, i64 %n, <8 x i1> %m) {
entry:
  %outside = getelementptr float, ptr %p, <8 x i64> %idx
  %g0 = tail call <8 x float> @llvm.masked.gather.v8f32.v8p0(<8 x ptr> align 4 %outside, <8 x i1> %m, <8 x float> poison)
  br label %vector.body

vector.body:                                      ; preds = %vector.body, %entry
  %i = phi i64 [ 0, %entry ], [ %i.next, %vector.body ]
  %s = phi <8 x float> [ %g0, %entry ], [ %sum, %vector.body ]
  %ext = sext <8 x i32> %idx32 to <8 x i64>
  %at = getelementptr float, ptr %p, <8 x i64> %ext
  %"g 1" = tail call <8 x float> @llvm.masked.gather.v8f32.v8p0(<8 x ptr> align 4 %at, <8 x i1> %m, <8 x float> zeroinitializer), !noalias !0
  %g2 = tail call <8 x float> @llvm.masked.gather.v8f32.v8p0(<8 x ptr> align 4 %at, <8 x i1> splat (i1 true), <8 x float> poison)
  %sum = fadd <8 x float> %"g 1", %g2
  tail call void @llvm.masked.scatter.v8f32.v8p0(<8 x float> %sum, <8 x ptr> align 4 %at, <8 x i1> %m)
  %i.next = add i64 %i, 8
  %done = icmp uge i64 %i.next, %n
  br i1 %done, label %exit, label %vector.body

exit:                                             ; preds = %vector.body
  %last = phi i64 [ %i.next, %vector.body ]
  ret i64 %last
}

declare <8 x float> @llvm.masked.gather.v8f32.v8p0(<8 x ptr>, <8 x i1>, <8 x float>)
declare void @llvm.masked.scatter.v8f32.v8p0(<8 x float>, <8 x ptr>, <8 x i1>)

!0 = !{!1}
!1 = distinct !{!1, !2}
!2 = distinct !{!2}
"""


def test_rewrite_tests_gathers_and_scatters_in_loops_for_runs():
    """Each gather in the loop: where its first and last lanes' addresses are a run's span apart
    or equal (scalars), the test of every lane; a vector load where the frozen addresses step
    by 4 bytes (a masked load under a variable mask, a plain one under the whole mask), one element
    broadcast where they are one address (and some lane is on, under a variable mask), the
    gather otherwise; the scatter a store where they step; the gather outside the loop and
    the masked accesses (not asked for) as they were."""
    out = maskedaccesses.rewrite(GATHERS, stores=False, loads=False)
    f = out.split("vector.body:", 1)[1]
    # first lanes 0 and 7 as scalars from the 32-bit indices: 28 bytes apart, or none
    assert "%anycuda.ag.1.end1.lane = extractelement <8 x i32> %idx32, i64 7" in f
    assert "%anycuda.ag.1.end1.1 = sext i32 %anycuda.ag.1.end1.lane to i64" in f
    assert "%anycuda.ag.1.end1.0 = getelementptr float, ptr %p, i64 %anycuda.ag.1.end1.1" in f
    assert "%anycuda.ag.1.could.run = icmp eq i64 %anycuda.ag.1.span, 28" in f
    assert "br i1 %anycuda.ag.1.could, label %anycuda.ag.1.test.block, label %anycuda.ag.1.gather.block" in f
    # then every lane, the addresses made again in the test's block and frozen
    assert "%anycuda.ag.1.tested1 = sext <8 x i32> %idx32 to <8 x i64>" in f
    assert "%anycuda.ag.1.frozen = freeze <8 x ptr> %anycuda.ag.1.tested0" in f
    assert ("%anycuda.ag.1.run.lanes = icmp eq <8 x i64> %anycuda.ag.1.offsets, "
            "<i64 0, i64 4, i64 8, i64 12, i64 16, i64 20, i64 24, i64 28>") in f
    # the gather with its addresses made in its own block
    assert "%anycuda.ag.1.address0 = getelementptr float, ptr %p, <8 x i64> %anycuda.ag.1.address1" in f
    assert '%"g 1.anycuda.gathered" = tail call <8 x float> @llvm.masked.gather.v8f32.v8p0(<8 x ptr> align 4 %anycuda.ag.1.address0' in f
    # the second gather's and the scatter's too, their addresses made before the first split
    assert "%g2.anycuda.gathered = tail call <8 x float> @llvm.masked.gather.v8f32.v8p0(<8 x ptr> align 4 %anycuda.ag.2.address0" in f
    assert "@llvm.masked.scatter.v8f32.v8p0(<8 x float> %sum, <8 x ptr> align 4 %anycuda.as.3.address0" in f
    assert ('%"g 1.anycuda.run" = call <8 x float> @llvm.masked.load.v8f32.p0(ptr align 4 %anycuda.ag.1.first, '
            '<8 x i1> %m, <8 x float> zeroinitializer)') in f
    assert "%anycuda.ag.1.same.some = and i1 %anycuda.ag.1.same, %anycuda.ag.1.some" in f
    assert ('%"g 1.anycuda.one" = select <8 x i1> %m, <8 x float> %anycuda.ag.1.splat, '
            '<8 x float> zeroinitializer') in f
    assert ('%"g 1" = phi <8 x float> [ %"g 1.anycuda.run", %anycuda.ag.1.run.block ], '
            '[ %"g 1.anycuda.one", %anycuda.ag.1.one.block ], [ %"g 1.anycuda.gathered", %anycuda.ag.1.gather.block ]') in f
    assert "%g2.anycuda.run = load <8 x float>, ptr %anycuda.ag.2.first, align 4" in f
    assert "br i1 %anycuda.ag.2.same, label %anycuda.ag.2.one.block" in f
    assert ("call void @llvm.masked.store.v8f32.p0(<8 x float> %sum, ptr align 4 %anycuda.as.3.first, "
            "<8 x i1> %m)") in f
    assert f.count("call <8 x float> @llvm.masked.gather.") == 2 and f.count("call void @llvm.masked.scatter.") == 1
    assert "[ %sum, %anycuda.as.3.join.block ]" in f and "[ %i.next, %anycuda.as.3.join.block ]" in f
    assert "%anycuda.ag" not in out.split("vector.body:", 1)[0]                # not the one outside
    llvm.parse_assembly(out).verify()
    assert maskedaccesses.rewrite(GATHERS, stores=False, loads=False, gathers=False) == GATHERS


GATHER_SOURCE = r"""
template <typename T>
__device__ void gather_at(const T* in, const int* idx, T* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[idx[i]];
}
template <typename T>
__device__ void scatter_at(const T* in, const int* idx, T* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[idx[i]] = in[i];
}
extern "C" __global__ void gather_f32(const float* in, const int* idx, float* out, int n) { gather_at(in, idx, out, n); }
extern "C" __global__ void gather_f64(const double* in, const int* idx, double* out, int n) { gather_at(in, idx, out, n); }
extern "C" __global__ void gather_i32(const int* in, const int* idx, int* out, int n) { gather_at(in, idx, out, n); }
extern "C" __global__ void scatter_f32(const float* in, const int* idx, float* out, int n) { scatter_at(in, idx, out, n); }

// llm.c's encoder: a token's row and a position's, from divisions of the flat index
extern "C" __global__ void embedding(float* out, const int* tokens, const float* wte, const float* wpe,
                                     int B, int T, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * T * C) return;
    int bt = i / C, c = i % C, t = bt % T;
    out[i] = wte[tokens[bt] * C + c] + wpe[t * C + c];
}
"""


def _indices(rng, n, pattern, m):
    """Indices into an array of m elements: runs of consecutive ones at random starts, runs of
    one index, random ones, or a mixture by pieces of random lengths."""
    if pattern == "runs":
        pieces = [(rng.integers(0, m - 64) + np.arange(k)) for k in rng.integers(1, 64, n)]
    elif pattern == "alike":
        pieces = [np.full(k, rng.integers(0, m)) for k in rng.integers(1, 64, n)]
    elif pattern == "random":
        return rng.integers(0, m, n).astype(np.int32)
    else:
        pieces = [_indices(rng, int(k), p, m) for k, p in zip(rng.integers(1, 80, n), rng.choice(["runs", "alike", "random"], n))]
    return np.concatenate(pieces)[:n].astype(np.int32)


@pytest.mark.parametrize("pattern", ["runs", "alike", "random", "mixed"])
@pytest.mark.parametrize("kernel,dtype", [("gather_f32", np.float32), ("gather_f64", np.float64), ("gather_i32", np.int32)])
@pytest.mark.parametrize("n,block", [(10_007, 128), (4096, 256), (37, 64)])
def test_gathers_through_an_index(monkeypatch, rng, pattern, kernel, dtype, n, block):
    monkeypatch.setenv("ANYCUDA_JIT", "optimised")
    m = 5000
    x = (rng.standard_normal(m) * 1000).astype(dtype)
    idx = _indices(rng, n, pattern, m)
    out = poison(n, dtype)
    f = ac.RawModule(code=GATHER_SOURCE).get_function(kernel)
    f(((n + block - 1) // block,), (block,), (ac.asarray(x), ac.asarray(idx), out, np.int32(n)))
    np.testing.assert_array_equal(out.get(), x[idx])


@pytest.mark.parametrize("n", [10_007, 4096])
def test_scatters_through_a_permutation_of_runs(monkeypatch, rng, n):
    """out[idx[i]] = in[i] with idx a permutation made of runs of consecutive places (each
    block of them moved elsewhere) and single places: every element written once."""
    monkeypatch.setenv("ANYCUDA_JIT", "optimised")
    cuts = np.sort(rng.choice(np.arange(1, n), n // 20, replace=False))
    pieces = np.split(np.arange(n), cuts)
    order = rng.permutation(len(pieces))
    idx = np.concatenate([pieces[k] for k in order]).astype(np.int32)
    idx[: n // 10] = rng.permutation(idx[: n // 10])           # and some places single
    x = rng.standard_normal(n).astype(np.float32)
    out = poison(n, np.float32)
    f = ac.RawModule(code=GATHER_SOURCE).get_function("scatter_f32")
    f(((n + 127) // 128,), (128,), (ac.asarray(x), ac.asarray(idx), out, np.int32(n)))
    want = np.empty(n, np.float32)
    want[idx] = x
    np.testing.assert_array_equal(out.get(), want)


@pytest.mark.parametrize("B,T,C", [(4, 64, 768), (3, 17, 40), (2, 9, 7), (1, 3, 1000)])
def test_embedding_rows_through_divisions(monkeypatch, rng, B, T, C):
    """The encoder's gathers are one run within a row of C channels and one address for the
    token; rows of C not a multiple of a vector's lanes break both inside a vector."""
    monkeypatch.setenv("ANYCUDA_JIT", "optimised")
    V = 50
    tokens = rng.integers(0, V, (B, T), dtype=np.int32)
    wte = rng.random((V, C), dtype=np.float32)
    wpe = rng.random((T, C), dtype=np.float32)
    out = poison(B * T * C, np.float32)
    f = ac.RawModule(code=GATHER_SOURCE).get_function("embedding")
    n = B * T * C
    f(((n + 255) // 256,), (256,), (out, ac.asarray(tokens), ac.asarray(wte), ac.asarray(wpe),
                                    np.int32(B), np.int32(T), np.int32(C)))
    np.testing.assert_array_equal(out.get().reshape(B, T, C), wte[tokens] + wpe)


def test_gathers_of_lanes_off_past_an_index_arrays_end(monkeypatch, rng):
    """The index array ends at a page that cannot be read, and the last block's threads run
    past it: their lanes load no index (their addresses are poison in the vector code, frozen
    before the test), and the result is numpy's."""
    monkeypatch.setenv("ANYCUDA_JIT", "optimised")
    m, n, block = 3000, 1024, 96
    x = rng.standard_normal(m).astype(np.float32)
    idx = fenced(_indices(rng, n, "mixed", m))
    out = poison(n, np.float32)
    f = ac.RawModule(code=GATHER_SOURCE).get_function("gather_f32")
    f(((n + block - 1) // block,), (block,), (ac.asarray(x), idx.arg, out, np.int32(n)))
    np.testing.assert_array_equal(out.get(), x[idx.host])


def test_a_kernels_gathers_are_tested_for_runs(monkeypatch, tmp_path):
    """Where LLVM vectorises the encoder's loads as gathers on this CPU (AVX-512 and Intel's
    AVX2 do; LLVM scalarises them where gathers are slow), every gather of its vector bodies
    is tested for runs."""
    code = _optimised_ir(monkeypatch, tmp_path, GATHER_SOURCE)
    if "@llvm.masked.gather." not in code:
        pytest.skip("LLVM makes no gathers on this CPU: nothing to test for runs")
    assert "%anycuda.ag." in code and ("freeze <16 x ptr>" in code or "freeze <8 x ptr>" in code)
