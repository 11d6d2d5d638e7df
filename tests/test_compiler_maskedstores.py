"""Plain stores where the vectoriser's masked stores find every lane on
(compiler/cpu/maskedstores.py): which stores are split, that the rewritten module is valid
(the phis that named the split block name its last part, in that function only), and that
kernels whose threads store under a condition compute what numpy does, their outputs
poisoned first, with the rewrite and without it."""
import llvmlite.binding as llvm
import pytest

from anycuda.compiler.cpu import maskedstores
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
    out = maskedstores.rewrite(LOOPS)
    f, g = out.split("define i64 @g", 1)
    assert "%anycuda.msbits.1 = bitcast <8 x i1> %m to i8" in f
    assert "store <8 x float> %v, ptr %a, align 4" in f                     # where every lane is on
    assert f.count("call void @llvm.masked.store.v8f32.p0") == 1            # where some lane is off
    assert "[ %i.next, %anycuda.msjoin.1 ]" in f and "[ %i.next, %vector.body ]" not in f
    assert "[ %i.next, %vector.body ]" in g                                 # another function's block
    mod = llvm.parse_assembly(out)
    mod.verify()


def test_rewrite_leaves_modules_without_looped_masked_stores():
    assert maskedstores.rewrite("define void @g() {\n  ret void\n}\n") == "define void @g() {\n  ret void\n}\n"
    no_loop = LOOPS.replace("%vector.body, %entry", "%entry").replace(
        "br i1 %done, label %exit, label %vector.body", "br label %exit").replace(
        "[ %i.next, %vector.body ]", "[ 8, %entry ]", 1)
    assert maskedstores.rewrite(no_loop) == no_loop


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
