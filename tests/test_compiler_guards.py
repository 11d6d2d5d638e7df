"""Exit guards (compiler/guards.py): a block whose threads all pass the kernel's
`if (i >= n) return;` runs the body without it. Checked against numpy on random sizes that
leave a partial last block, with the memory past the end poisoned: it must stay untouched."""
import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler import guards
from anycuda.ptx import parse

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"

# y[i] = a * x[i] + y[i] for i < n (rounded twice, as numpy does), in nvcc's shape: index,
# compare, branch to a bare ret
SAXPY = HEADER + """
.visible .entry saxpy(.param .u32 n, .param .f32 a, .param .u64 x, .param .u64 y) {
    .reg .pred %p<2>; .reg .b32 %r<6>; .reg .f32 %f<5>; .reg .b64 %rd<9>;
    ld.param.u32 %r1, [n];
    ld.param.f32 %f1, [a];
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [y];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.GUARD.s32 %p1, %r5, %r1;
    @BRANCH bra $exit;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.s32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    ld.global.f32 %f3, [%rd7];
    mul.rn.f32 %f2, %f1, %f2;
    add.rn.f32 %f4, %f2, %f3;
    st.global.f32 [%rd7], %f4;
$exit:
    ret;
}
"""
GE_TAKEN = SAXPY.replace("GUARD", "ge").replace("BRANCH", "%p1")     # leave when i >= n
LT_NEGATED = SAXPY.replace("GUARD", "lt").replace("BRANCH", "!%p1")  # leave when !(i < n)


def _saxpy_matches_numpy(ptx, n, block, rng):
    k = ac.RawModule(ptx=ptx, name="saxpy.ptx").get_function("saxpy")
    total = n + 3 * block                         # room past the end, poisoned
    x = rng.standard_normal(total).astype(np.float32)
    y = rng.standard_normal(total).astype(np.float32)
    y[n:] = np.float32(-7.25)
    a = np.float32(rng.standard_normal())
    dx, dy = ac.asarray(x), ac.asarray(y)
    k(((n + block - 1) // block,), (block,), (np.uint32(n), a, dx, dy))
    got = dy.get()
    want = y.copy()
    want[:n] = a * x[:n] + y[:n]
    np.testing.assert_array_equal(got[:n], want[:n])
    assert (got[n:] == np.float32(-7.25)).all(), "a thread past n ran the body"


@pytest.mark.parametrize("ptx", [GE_TAKEN, LT_NEGATED], ids=["ge", "negated-lt"])
@pytest.mark.parametrize("block", [32, 256, 96])
def test_guarded_elementwise_kernel_matches_numpy(ptx, block):
    rng = np.random.default_rng()
    for n in (1, block - 1, block, 5 * block + int(rng.integers(1, block)), int(rng.integers(1000, 5000))):
        _saxpy_matches_numpy(ptx, n, block, rng)


def test_a_guard_that_is_not_a_prefix_of_the_block():
    """Threads leaving in the middle of every block (odd indices): the probe sees it and the
    block runs the kernel as written."""
    ptx = HEADER + """
.visible .entry odd(.param .u64 out) {
    .reg .pred %p<2>; .reg .b32 %r<6>; .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    and.b32 %r5, %r4, 1;
    setp.ne.s32 %p1, %r5, 0;
    @%p1 bra $done;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r4, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r4;
$done:
    ret;
}
"""
    k = ac.RawModule(ptx=ptx, name="odd.ptx").get_function("odd")
    out = ac.asarray(np.full(8 * 64, -1, np.int32))
    k((8,), (64,), (out,))
    want = np.arange(8 * 64, dtype=np.int32)
    want[1::2] = -1
    np.testing.assert_array_equal(out.get(), want)


def _body(ptx):
    return parse(ptx).functions[0].body


def _params(ptx):
    return {d.name for d in parse(ptx).functions[0].params}


def test_the_guard_is_found_in_nvcc_shape():
    body = _body(GE_TAKEN)
    pos = guards.find_exit_guard(body, _params(GE_TAKEN))
    assert pos is not None and body[pos].opcode == "bra"


@pytest.mark.parametrize("before", [
    "st.global.u32 [%rd2], %r1;",          # memory written before the guard
    "ld.global.u32 %r1, [%rd2];",          # memory that another block may change
    "atom.global.add.u32 %r1, [%rd2], 1;",
])
def test_no_guard_after_an_instruction_with_effects(before):
    ptx = GE_TAKEN.replace("    mov.u32 %r2, %ctaid.x;", "    " + before + "\n    mov.u32 %r2, %ctaid.x;")
    assert guards.find_exit_guard(_body(ptx), _params(ptx)) is None


def test_no_guard_when_the_branch_does_not_leave():
    ptx = GE_TAKEN.replace("$exit:\n    ret;", "$exit:\n    st.global.f32 [%rd2], %f1;\n    ret;")
    assert guards.find_exit_guard(_body(ptx), _params(ptx)) is None
