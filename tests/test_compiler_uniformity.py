"""Saves proven alike (uniformity.control_uniform, uniformity.uniform_remainders,
FunctionLowering._proven_affine): in a kernel whose threads all take the same path, a tile
loop's counter and an index less its thread-linear part hold one value in every thread at
each barrier, so the scheduler takes thread 0's saved value without comparing the others'
(rounds.affine_spills). Where one branch depends on the thread, the comparison stays
and is what keeps a skewed index right. numpy is the reference; outputs are poisoned first."""
import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.analysis import uniformity
from anycuda.compiler.lowering.module import ModuleLowering
from anycuda.ptx.parser import parse
from conformance import poison

# Each thread walks x from ctaid * n + tid (+ skew in odd threads, after a branch on the
# thread index) by ntid per step; at each step the block exchanges its loads through shared
# memory between two barriers: acc += s[(tid + 1) % ntid] * (k + 1).
WALK = r"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry NAME(.param .u64 px, .param .u64 pout, .param .u32 pn, .param .u32 psteps, .param .u32 pskew)
{
    .reg .pred %p<4>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b8 s[4096];
    ld.param.u64 %rd1, [px];
    ld.param.u64 %rd2, [pout];
    ld.param.u32 %r1, [pn];
    ld.param.u32 %r2, [psteps];
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %ctaid.x;
    mad.lo.s32 %r6, %r5, %r1, %r3;
SKEW
    mov.u32 %r7, 0;
    mov.u32 %r8, 0;
    shl.b32 %r9, %r3, 2;
    mov.u32 %r10, s;
    add.s32 %r11, %r10, %r9;
    setp.lt.s32 %p1, %r7, %r2;
    @!%p1 bra DONE;
LOOP:
    mul.wide.u32 %rd3, %r6, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r12, [%rd4];
    st.shared.u32 [%r11], %r12;
    bar.sync 0;
    add.s32 %r13, %r3, 1;
    rem.u32 %r14, %r13, %r4;
    shl.b32 %r15, %r14, 2;
    add.s32 %r16, %r10, %r15;
    ld.shared.u32 %r17, [%r16];
    add.s32 %r18, %r7, 1;
    mad.lo.s32 %r8, %r17, %r18, %r8;
    bar.sync 0;
    add.s32 %r6, %r6, %r4;
    add.s32 %r7, %r7, 1;
    setp.lt.s32 %p1, %r7, %r2;
    @%p1 bra LOOP;
DONE:
    mad.lo.s32 %r19, %r5, %r4, %r3;
    mul.wide.u32 %rd5, %r19, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.u32 [%rd6], %r8;
    ret;
}
"""
# odd threads start `skew` elements further: a branch on the thread index, around an add
SKEW = """    and.b32 %r20, %r3, 1;
    setp.eq.u32 %p2, %r20, 0;
    @%p2 bra EVEN;
    ld.param.u32 %r21, [pskew];
    add.s32 %r6, %r6, %r21;
EVEN:"""


def _walk(name, skewed):
    return WALK.replace("NAME", name).replace("SKEW", SKEW if skewed else "")


def _run(ptx, name, rng, grid, block, steps, skew):
    n = block * steps + 8
    x = rng.integers(-1000, 1000, grid * n + 8).astype(np.int32)
    out = poison(grid * block, np.int32)
    ac.RawModule(ptx=ptx).get_function(name)((grid,), (block,), (ac.asarray(x), out, np.int32(n),
                                                                  np.int32(steps), np.int32(skew)))
    t = np.arange(block)
    nb = (t + 1) % block
    want = np.zeros((grid, block), np.int64)
    for g in range(grid):
        for k in range(steps):
            start = g * n + nb + k * block + (skew if skew else 0) * (nb & 1)
            want[g] += x[start].astype(np.int64) * (k + 1)
    return out.get(), want.ravel().astype(np.int32)


def _body(ptx):
    return parse(ptx, "walk.ptx").functions[0].body


PARAMS = ["px", "pout", "pn", "psteps", "pskew"]


def test_the_analyses_on_a_uniform_and_a_skewed_walk():
    plain, skewed = _body(_walk("plain", False)), _body(_walk("skewed", True))
    assert uniformity.control_uniform(plain, PARAMS)
    assert not uniformity.control_uniform(skewed, PARAMS)
    # the index less tid.x is ctaid * n + k * ntid in either: its definitions cannot tell the
    # branch, which is why control_uniform must hold before it is relied on
    assert "%r6" in uniformity.uniform_remainders(plain, PARAMS)
    assert "%r6" in uniformity.uniform_remainders(skewed, PARAMS)
    assert "%r7" in uniformity.block_uniform_registers(plain, PARAMS)


BRANCHES = r"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u32 pn)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    ld.param.u32 %r1, [pn];
    mov.u32 %r2, %ctaid.x;
    setp.lt.s32 %p1, %r2, %r1;
    @%p1 bra NEXT;
NEXT:
    mov.u32 %r3, %laneid;
    mov.u32 %r4, %tid.x;
    add.s32 %r5, %r4, %r3;
    add.s32 %r6, %r4, %r1;
    LAST
    bar.sync 0;
    ret;
}
"""


@pytest.mark.parametrize("last,uniform", [
    ("", True),
    ("setp.lt.s32 %p2, %r4, %r1;\n    @%p2 ret;", False),        # a thread-dependent exit
    ("setp.lt.s32 %p2, %r5, %r1;\n    @%p2 bra NEXT;", False),   # a loop back on laneid
    ("setp.lt.s32 %p2, %r2, 3;\n    @%p2 bar.sync 1;", True),    # a barrier on the block index
    ("call.uni f;", False),                                      # a device function may exit
])
def test_which_paths_are_uniform(last, uniform):
    source = BRANCHES.replace("LAST", last)
    if "call" in last:
        source = source.replace(".visible .entry", ".func f()\n{\n    ret;\n}\n.visible .entry")
    fn = [f for f in parse(source, "branches.ptx").functions if f.name == "k"][0]
    assert uniformity.control_uniform(fn.body, ["pn"]) is uniform
    remainders = uniformity.uniform_remainders(fn.body, ["pn"])
    # tid.x + n: the rest is the parameter; tid.x + laneid: the rest differs by lane
    assert "%r6" in remainders and "%r5" not in remainders


def _compare_loops(ptx):
    """The block function's loops that compare the threads' saved values (rounds.affine_spills)."""
    return str(ModuleLowering(parse(ptx, "walk.ptx"), "walk").lower().mod).count("affine.head:")


def test_a_uniform_walk_is_not_compared_and_a_skewed_one_is():
    assert _compare_loops(_walk("plain", False)) == 0
    assert _compare_loops(_walk("skewed", True)) > 0


# (blocks of full warps may run barrier to barrier as warp regions, which save nothing: the
# skewed walks take partial warps, whose rounds compare the saved values)
@pytest.mark.parametrize("grid,block,steps,skew", [(3, 64, 5, 0), (2, 96, 4, 0), (2, 33, 3, 0),
                                                   (3, 48, 5, 3), (2, 100, 4, 1), (2, 33, 3, 2)])
def test_walks_match_numpy(rng, grid, block, steps, skew):
    name = "skewed" if skew else "plain"
    got, want = _run(_walk(name, bool(skew)), name, rng, grid, block, steps, skew)
    np.testing.assert_array_equal(got, want)

