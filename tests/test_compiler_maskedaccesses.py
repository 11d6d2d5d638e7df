"""Plain stores and loads for the vectoriser's masked ones (compiler/cpu/maskedaccesses.py), and
the plain loads of anycuda's own masked loads (irutil.masked_load): which accesses are split,
that the rewritten module is valid (the phis that named the split block name its last part,
in that function only), and that kernels whose threads store or load under a condition
compute what numpy does, their outputs poisoned first, with the plain forms and without,
where a warp's span runs past its allocation's end into a page that is not mapped."""
import llvmlite.binding as llvm
import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.cpu import maskedaccesses
from conformance import poison
from conftest import is_poison, ran_as_block_program
from test_compiler_guarded_access import fenced
from test_compiler_loopprefetch import STENCIL, checked_stencil3
from test_compiler_streamstores import _optimised_ir

# A loop of one block with a masked store between a phi that names the block and the back
# branch, an exit whose phi names it too, and a second function with a block of the same
# name and no masked store.
LOOPS = r"""
define i64 @f(ptr %p, <8 x float> %v, i64 %n, <8 x i1> %m) {
entry:
  br label %vector.body

vector.body:                                      ; preds = %vector.body, %entry
  %i = phi i64 [ 0, %entry ], [ %i.next, %vector.body ]
  %a = getelementptr float, ptr %p, i64 %i
  tail call void @llvm.masked.store.v8f32.p0(<8 x float> %v, ptr align 4 %a, <8 x i1> %m), !noalias !0
  %i.next = add i64 %i, 8
  %done = icmp uge i64 %i.next, %n
  br i1 %done, label %exit, label %vector.body

exit:                                             ; preds = %vector.body
  %last = phi i64 [ %i.next, %vector.body ]
  ret i64 %last
}

define i64 @g(i64 %n) {
entry:
  br label %vector.body

vector.body:                                      ; preds = %vector.body, %entry
  %i = phi i64 [ 0, %entry ], [ %i.next, %vector.body ]
  %i.next = add i64 %i, 8
  %done = icmp uge i64 %i.next, %n
  br i1 %done, label %exit, label %vector.body

exit:                                             ; preds = %vector.body
  ret i64 %i.next
}

declare void @llvm.masked.store.v8f32.p0(<8 x float>, ptr, <8 x i1>)

!0 = !{!1}
!1 = distinct !{!1, !2}
!2 = distinct !{!2}
"""


def test_rewrite_splits_masked_stores_in_loops():
    out = maskedaccesses.rewrite(LOOPS)
    f, g = out.split("define i64 @g", 1)
    assert "%anycuda.msbits.1 = bitcast <8 x i1> %m to i8" in f
    assert "store <8 x float> %v, ptr %a, align 4" in f                     # where every lane is on
    assert f.count("call void @llvm.masked.store.v8f32.p0") == 1            # where some lane is off
    assert "[ %i.next, %anycuda.msjoin.1 ]" in f and "[ %i.next, %vector.body ]" not in f
    assert "[ %i.next, %vector.body ]" in g                                 # another function's block
    mod = llvm.parse_assembly(out)
    mod.verify()


def test_rewrite_leaves_modules_without_looped_masked_stores():
    assert maskedaccesses.rewrite("define void @g() {\n  ret void\n}\n") == "define void @g() {\n  ret void\n}\n"
    no_loop = LOOPS.replace("%vector.body, %entry", "%entry").replace(
        "br i1 %done, label %exit, label %vector.body", "br label %exit").replace(
        "[ %i.next, %vector.body ]", "[ 8, %entry ]", 1)
    assert maskedaccesses.rewrite(no_loop) == no_loop


def test_guarded_stores_split_in_a_kernels_code(monkeypatch, tmp_path):
    """The thread-per-point stencil's stores under its guard and boundary test are masked
    stores of the vectorised rows: each is split where masked stores are slow, none where
    they are not."""
    monkeypatch.setenv("ANYCUDA_MASKED_STORES", "blend")
    code = _optimised_ir(monkeypatch, tmp_path, STENCIL)
    assert "%anycuda.mswhole." in code
    monkeypatch.setenv("ANYCUDA_MASKED_STORES", "masked")
    assert "%anycuda.mswhole." not in _optimised_ir(monkeypatch, tmp_path, STENCIL)


@pytest.mark.parametrize("stores", ["blend", "masked"])
@pytest.mark.parametrize("shape,block", [((24, 20, 40), (32, 2, 2)), ((5, 9, 67), (16, 4, 1))])
def test_guarded_stores_right_either_way(monkeypatch, tmp_path, rng, stores, shape, block):
    """Rows whose every lane stores (a plain store) and rows at the edges (the masked store):
    against numpy, with the rewrite (blend: masked stores slow) and without."""
    monkeypatch.setenv("ANYCUDA_JIT", "optimised")
    monkeypatch.setenv("ANYCUDA_MASKED_STORES", stores)
    monkeypatch.setenv("ANYCUDA_CACHE_DIR", str(tmp_path))          # (the choice is in no cache's key:
                                                                    # a cache of its own)
    checked_stencil3(rng, shape, block, STENCIL + f"// masked stores: {stores}\n")   # (a source of its own)


# A loop of one block with a masked load and a masked store, a load whose mask is a constant,
# and a value name in quotes.
LOADS = r"""
define i64 @f(ptr %p, ptr %q, i64 %n, <8 x i1> %m) {
entry:
  br label %vector.body

vector.body:                                      ; preds = %vector.body, %entry
  %i = phi i64 [ 0, %entry ], [ %i.next, %vector.body ]
  %a = getelementptr float, ptr %p, i64 %i
  %"v x" = tail call <8 x float> @llvm.masked.load.v8f32.p0(ptr align 4 %a, <8 x i1> %m, <8 x float> poison), !noalias !0
  %c = tail call <8 x float> @llvm.masked.load.v8f32.p0(ptr align 4 %a, <8 x i1> splat (i1 true), <8 x float> poison)
  %w = fadd <8 x float> %"v x", %c
  %b = getelementptr float, ptr %q, i64 %i
  tail call void @llvm.masked.store.v8f32.p0(<8 x float> %w, ptr align 4 %b, <8 x i1> %m)
  %i.next = add i64 %i, 8
  %done = icmp uge i64 %i.next, %n
  br i1 %done, label %exit, label %vector.body

exit:                                             ; preds = %vector.body
  %last = phi i64 [ %i.next, %vector.body ]
  ret i64 %last
}

declare <8 x float> @llvm.masked.load.v8f32.p0(ptr, <8 x i1>, <8 x float>)
declare void @llvm.masked.store.v8f32.p0(<8 x float>, ptr, <8 x i1>)

!0 = !{!1}
!1 = distinct !{!1, !2}
!2 = distinct !{!2}
"""


def test_rewrite_splits_masked_loads_in_loops():
    """A masked load in a loop: a plain load of the span, blended, where some lane is on and
    the 32 bytes lie in one page; the masked load otherwise; the store after it split too
    (one pass), a constant mask's load left alone; loads only, or stores only, as asked."""
    out = maskedaccesses.rewrite(LOADS)
    assert "%anycuda.mlbits.1.some = icmp ne i8 %anycuda.mlbits.1, 0" in out
    assert "%anycuda.mlat.1.end = add i64 %anycuda.mlat.1, 31" in out
    assert '%"v x.anycuda.plain" = load <8 x float>, ptr %a, align 4' in out
    assert '%"v x.anycuda.whole" = select <8 x i1> %m, <8 x float> %"v x.anycuda.plain", <8 x float> poison' in out
    assert '%"v x" = phi <8 x float> [ %"v x.anycuda.whole", %anycuda.mlwhole.1 ], [ %"v x.anycuda.part", %anycuda.mlpart.1 ]' in out
    assert out.count("call <8 x float> @llvm.masked.load.v8f32.p0") == 2         # the partial's, the constant's
    assert "%anycuda.msbits.2 = bitcast <8 x i1> %m to i8" in out
    assert "[ %i.next, %anycuda.msjoin.2 ]" in out
    llvm.parse_assembly(out).verify()
    loads_only = maskedaccesses.rewrite(LOADS, stores=False)
    assert "anycuda.mlwhole.1" in loads_only and "anycuda.ms" not in loads_only
    llvm.parse_assembly(loads_only).verify()
    stores_only = maskedaccesses.rewrite(LOADS, loads=False)
    assert "anycuda.ml" not in stores_only and "anycuda.mswhole.1" in stores_only


def test_guarded_loads_split_in_a_kernels_code(monkeypatch, tmp_path):
    """The thread-per-point stencil's neighbours, read under its boundary test, are masked
    loads of the vectorised rows: each is split where masked loads are slow, none where
    they are not."""
    monkeypatch.setenv("ANYCUDA_MASKED_LOADS", "plain")
    assert "%anycuda.mlwhole." in _optimised_ir(monkeypatch, tmp_path, STENCIL)
    monkeypatch.setenv("ANYCUDA_MASKED_LOADS", "masked")
    assert "%anycuda.mlwhole." not in _optimised_ir(monkeypatch, tmp_path, STENCIL)


EDGES = r"""
// a guarded copy: the last warp's lanes past n are off, and their span runs past the array
extern "C" __global__ void scaled_copy(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
// the same through a block's shared memory (a barrier: a block program, anycuda's own masked loads)
extern "C" __global__ void scaled_copy_shared(const float* in, float* out, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) s[threadIdx.x] = in[i];
    __syncthreads();
    if (i < n) out[i] = 2.0f * s[threadIdx.x];
}
"""


@pytest.mark.parametrize("loads", ["plain", "masked"])
@pytest.mark.parametrize("kernel", ["scaled_copy", "scaled_copy_shared"])
def test_guarded_loads_at_an_allocations_end(monkeypatch, tmp_path, rng, loads, kernel):
    """The input is a 4 MB buffer from element 4 on, and a page that is not mapped follows
    it (test_compiler_guarded_access's Fenced): the last warp's span of 32 floats runs 4 past
    the end (as does one of the vectoriser's spans of 8), its lanes there off. A plain load
    of that span would fault; the span's page test keeps the masked load. Values against
    numpy, either way."""
    monkeypatch.setenv("ANYCUDA_JIT", "optimised")
    monkeypatch.setenv("ANYCUDA_MASKED_LOADS", loads)
    monkeypatch.setenv("ANYCUDA_CACHE_DIR", str(tmp_path))
    size = 1 << 20
    x = rng.standard_normal(size).astype(np.float32)
    whole = fenced(x)
    n = size - 4
    out = poison(n, np.float32)
    k = ac.RawModule(code=EDGES + f"// masked loads: {loads}\n").get_function(kernel)
    k((-(-n // 256),), (256,), (np.uint64(whole.ptr + 4 * 4), out, np.int32(n)))
    np.testing.assert_array_equal(out.get(), 2.0 * x[4:])


PATTERNS = r"""
// a store under a pattern of lanes a table gives each warp, after a barrier (a block program)
template <typename T> __device__ void patterned(const unsigned* patterns, const T* in, T* out) {
    __shared__ T s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = in[i] * (T)3;
    __syncthreads();
    if (patterns[i >> 5] >> (threadIdx.x & 31) & 1) out[i] = s[threadIdx.x];
}
extern "C" __global__ void patterned_f32(const unsigned* p, const float* in, float* out) { patterned(p, in, out); }
extern "C" __global__ void patterned_f64(const unsigned* p, const double* in, double* out) { patterned(p, in, out); }
"""


@pytest.mark.parametrize("stores", ["blend", "masked"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_patterned_stores_by_parts(monkeypatch, tmp_path, rng, stores, dtype):
    """A block program's store to global memory under every kind of lane pattern: where
    masked stores are slow (blend), made in parts of 32 bytes (irutil._chunked_masked_store:
    a part whose lanes are all on stored plainly, one with none skipped, the others masked);
    the lanes off keep the poison, the others hold the value, either way."""
    monkeypatch.setenv("ANYCUDA_JIT", "optimised")
    monkeypatch.setenv("ANYCUDA_MASKED_STORES", stores)
    monkeypatch.setenv("ANYCUDA_CACHE_DIR", str(tmp_path))
    fixed = [0, 0xFFFFFFFF, 0x0000FFFF, 0xFFFF0000, 0x55555555, 0xAAAAAAAA, 0x000000FF, 0xFF00FF00, 0x00FF00FF,
             0x0F0F0F0F, 1, 0x80000000, 0x7FFFFFFE, 0xFFFFFF00]
    patterns = np.concatenate([fixed, rng.integers(0, 1 << 32, 50)]).astype(np.uint32)
    n = patterns.size * 32
    n_pad = -(-n // 256) * 256
    patterns = np.concatenate([patterns, np.zeros((n_pad - n) // 32, np.uint32)])
    x = rng.standard_normal(n_pad).astype(dtype)
    out = poison(n_pad, dtype)
    k = ac.RawModule(code=PATTERNS + f"// masked stores: {stores}\n").get_function(
        "patterned_f32" if dtype == np.float32 else "patterned_f64")
    k((n_pad // 256,), (256,), (ac.asarray(patterns), ac.asarray(x), out))
    on = ((patterns.repeat(32) >> np.tile(np.arange(32, dtype=np.uint32), n_pad // 32)) & 1).astype(bool)
    got = out.get()
    np.testing.assert_array_equal(got[on], x[on] * dtype(3))
    assert is_poison(got[~on]).all()
    assert ran_as_block_program(k, 256)
