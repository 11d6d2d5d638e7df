"""What a thread keeps across a barrier or shuffle (FunctionLowering._plan_spills): registers recomputed
at one site and saved at another when nvcc reuses them, and saves skipped for registers
unchanged since the last resume (dataflow.written_since_resume). Hand-written PTX pins the
register reuse; the expected values are worked out by hand below."""
import numpy as np

import anycuda as ac
from anycuda.compiler.analysis import dataflow
from anycuda.ptx import parse

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"

# %r1 is the thread index up to the loop, then the loop counter: at the first barrier it is
# recomputed from %tid.x, in the loop it must be saved. %r2 = 3 * tid is read inside the loop,
# where recomputing it from %r1 would read the counter: it must be saved there.
# out[t] = (4 t + 0 + 1 + 2 + 3 + 4) + 3 t = 7 t + 10
REUSE = HEADER + """
.visible .entry reuse(.param .u64 out) {
  .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .pred %p<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mul.lo.s32 %r2, %r1, 3;
  bar.sync 0;
  add.s32 %r3, %r2, %r1;
  mov.u32 %r1, 0;
LOOP:
  add.s32 %r3, %r3, %r1;
  bar.sync 0;
  add.s32 %r1, %r1, 1;
  setp.lt.s32 %p1, %r1, 5;
  @%p1 bra LOOP;
  mov.u32 %r4, %tid.x;
  mul.wide.u32 %rd2, %r4, 4;
  add.s64 %rd3, %rd1, %rd2;
  add.s32 %r5, %r3, %r2;
  st.global.u32 [%rd3], %r5;
  ret;
}
"""

# %r2 = 3 * tid is computed from %r1 before %r1 is set to 7: at the barrier %r1 has one
# definition again, but not the one %r2 read, so %r2 must be saved. out[t] = 3 t + 7
REDEFINED = HEADER + """
.visible .entry redefined(.param .u64 out) {
  .reg .b32 %r<8>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mul.lo.s32 %r2, %r1, 3;
  mov.u32 %r1, 7;
  bar.sync 0;
  mov.u32 %r4, %tid.x;
  mul.wide.u32 %rd2, %r4, 4;
  add.s64 %rd3, %rd1, %rd2;
  add.s32 %r5, %r2, %r1;
  st.global.u32 [%rd3], %r5;
  ret;
}
"""

# %r5 passes three shuffles; between the first two, odd lanes add 100 to it (a guarded write),
# so it is saved at the first two and not at the third, where it still holds what the second
# saved. out[t] = x[t] + (100 if t odd) + the three shuffled values (each the sum of lane t^1's
# %r6 = t ^ 1, added up: 3 * (t ^ 1)).
PASS_THROUGH = HEADER + """
.visible .entry pass_through(.param .u64 x, .param .u64 out) {
  .reg .b32 %r<12>; .reg .b64 %rd<6>; .reg .pred %p<5>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r5, [%rd4];
  mov.u32 %r6, %tid.x;
  mov.u32 %r7, 0;
  shfl.sync.bfly.b32 %r8|%p1, %r6, 1, 31, -1;
  add.s32 %r7, %r7, %r8;
  and.b32 %r9, %r1, 1;
  setp.ne.u32 %p2, %r9, 0;
  @%p2 add.s32 %r5, %r5, 100;
  shfl.sync.bfly.b32 %r8|%p3, %r6, 1, 31, -1;
  add.s32 %r7, %r7, %r8;
  shfl.sync.bfly.b32 %r8|%p4, %r6, 1, 31, -1;
  add.s32 %r7, %r7, %r8;
  add.s32 %r10, %r5, %r7;
  add.s64 %rd5, %rd2, %rd3;
  st.global.u32 [%rd5], %r10;
  ret;
}
"""


def _kernel(ptx, name):
    return ac.RawModule(ptx=ptx, name=name + ".ptx").get_function(name)


def test_a_reused_register_is_recomputed_before_its_reuse_and_saved_after():
    for block in (32, 96, 256):
        out = ac.asarray(np.full(block, -1, np.int32))
        _kernel(REUSE, "reuse")((2,), (block,), (out,))
        t = np.arange(block)
        assert np.array_equal(out.get(), 7 * t + 10), block


def test_a_register_read_before_its_operand_was_redefined_is_saved():
    out = ac.asarray(np.full(64, -1, np.int32))
    _kernel(REDEFINED, "redefined")((1,), (64,), (out,))
    assert np.array_equal(out.get(), 3 * np.arange(64) + 7)


def test_reaching_definitions_tell_the_reuse_apart():
    fn = next(f for f in parse(REUSE).functions if f.is_kernel)
    bars = [pos for pos, st in enumerate(fn.body) if getattr(st, "opcode", None) == "bar"]
    reach = dataflow.reaching_definitions(fn.body, {})
    first, second = bars
    assert reach.only(first, "%r1") is not None and reach.summary(second, "%r1") == dataflow._SEVERAL
    assert reach.only(first, "%r2") == reach.only(second, "%r2") is not None


def test_a_register_unchanged_since_the_last_resume_is_not_saved_again(rng):
    fn = next(f for f in parse(PASS_THROUGH).functions if f.is_kernel)
    shuffles = [pos for pos, st in enumerate(fn.body) if getattr(st, "opcode", None) == "shfl"]
    written = dataflow.written_since_resume(fn.body, {})
    assert ["%r5" in written[pos] for pos in shuffles] == [True, True, False]
    for block in (32, 64, 160):
        x = rng.integers(-1000, 1000, block).astype(np.int32)
        out = ac.asarray(np.full(block, -1, np.int32))
        _kernel(PASS_THROUGH, "pass_through")((1,), (block,), (ac.asarray(x), out))
        t = np.arange(block)
        assert np.array_equal(out.get(), x + 100 * (t & 1) + 3 * (t ^ 1)), block
