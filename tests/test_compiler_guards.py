"""Probed branches (compiler/analysis/guards.py): a block whose threads all pass the kernel's
`if (i >= n) return;`, and the border test after it, runs the body without them. Checked
against numpy on random sizes that leave a partial last block, with the memory past the end
poisoned: it must stay untouched."""
import numpy as np
import pytest

import anycuda as ac
from llvmlite import ir
from anycuda.compiler import abi
from anycuda.compiler.analysis import guards
from anycuda.compiler.lowering.function import FunctionLowering
from anycuda.compiler.lowering.module import ModuleLowering
from anycuda.cudac import compile_to_ptx
from anycuda.ptx import parse
from conformance import poison

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
    found = guards.find_probed_branches(body, _params(GE_TAKEN))
    assert len(found) == 1 and body[found[0]].opcode == "bra"


@pytest.mark.parametrize("before", [
    "st.global.u32 [%rd2], %r1;",          # memory written before the guard
    "ld.global.u32 %r1, [%rd2];",          # the guard would depend on memory another block may change
    "atom.global.add.u32 %r1, [%rd2], 1;",
    "mov.u32 %r1, %clock;",                # not the same when run twice
])
def test_no_guard_after_an_instruction_with_effects(before):
    ptx = GE_TAKEN.replace("    mov.u32 %r2, %ctaid.x;", "    " + before + "\n    mov.u32 %r2, %ctaid.x;")
    assert guards.find_probed_branches(_body(ptx), _params(ptx)) == []


# i = blockIdx.x * blockDim.x + threadIdx.x; return when i >= n; %rd5 = &in[i], %rd4 = 4 * i
INDEX_AND_EXIT_GUARD = """    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra $done;
    cvta.to.global.u64 %rd3, %rd1;
    mul.wide.s32 %rd4, %r5, 4;
    add.s64 %rd5, %rd3, %rd4;
"""

# out[i] = in[i] on the border (i == 0 or i == n - 1), else in[i-1] + in[i] + in[i+1], for
# i < n: an exit guard, then a load of in[i], then the border test (nvcc's shape for a stencil)
BORDER = HEADER + """
.visible .entry border(.param .u64 in, .param .u64 out, .param .u32 n) {
    .reg .pred %p<6>; .reg .b32 %r<8>; .reg .f32 %f<6>; .reg .b64 %rd<8>;
""" + INDEX_AND_EXIT_GUARD + """    ld.global.f32 %f1, [%rd5];
    cvta.to.global.u64 %rd6, %rd2;
    add.s64 %rd7, %rd6, %rd4;
    setp.eq.s32 %p2, %r5, 0;
    add.s32 %r6, %r1, -1;
    setp.eq.s32 %p3, %r5, %r6;
    or.pred %p4, %p2, %p3;
    @%p4 bra $edge;
    ld.global.f32 %f2, [%rd5+-4];
    ld.global.f32 %f3, [%rd5+4];
    add.rn.f32 %f4, %f2, %f1;
    add.rn.f32 %f5, %f4, %f3;
    st.global.f32 [%rd7], %f5;
    bra.uni $done;
$edge:
    st.global.f32 [%rd7], %f1;
$done:
    ret;
}
"""


def test_a_border_test_after_a_load_is_probed():
    body = _body(BORDER)
    found = guards.find_probed_branches(body, _params(BORDER))
    assert [body[p].guard.reg.name for p in found] == ["%p1", "%p4"]


def test_a_branch_on_loaded_data_is_not_probed():
    ptx = BORDER.replace("setp.eq.s32 %p2, %r5, 0;", "setp.eq.f32 %p2, %f1, 0f00000000;")
    body = _body(ptx)
    assert [body[p].guard.reg.name for p in guards.find_probed_branches(body, _params(ptx))] == ["%p1"]


@pytest.mark.parametrize("block", [32, 128, 96])
def test_border_kernel_matches_numpy(block):
    """Blocks inside the array take the probed copy, the first and last ones (border, partial
    block) the kernel as written; the data-dependent variant exercises the general path."""
    rng = np.random.default_rng()
    k = ac.RawModule(ptx=BORDER, name="border.ptx").get_function("border")
    for n in (1, 2, block, 3 * block + int(rng.integers(1, block)), int(rng.integers(2000, 6000))):
        x = rng.standard_normal(n + 2 * block).astype(np.float32)
        out = np.full(n + 2 * block, np.float32(-7.25))
        dout = ac.asarray(out)
        k(((n + block - 1) // block,), (block,), (ac.asarray(x), dout, np.uint32(n)))
        want = x[:n].copy()
        if n > 2:
            want[1:n - 1] = (x[:n - 2] + x[1:n - 1]) + x[2:n]
        got = dout.get()
        np.testing.assert_array_equal(got[:n], want)
        assert (got[n:] == np.float32(-7.25)).all(), "a thread past n ran the body"



# out[i] = in[i] + (i + 1 < n ? in[i + 1] : 0) for i < n: the second probed branch's target is
# reached only from it, so the stretch goes on past its label (the load after it)
PAIR = HEADER + """
.visible .entry pair(.param .u64 in, .param .u64 out, .param .u32 n) {
    .reg .pred %p<3>; .reg .b32 %r<10>; .reg .b64 %rd<8>;
""" + INDEX_AND_EXIT_GUARD + """    mov.u32 %r6, 0;
    add.s32 %r7, %r5, 1;
    setp.ge.s32 %p2, %r7, %r1;
    @%p2 bra $skip;
    ld.global.u32 %r6, [%rd5+4];
$skip:
    ld.global.u32 %r8, [%rd5];
    add.s32 %r9, %r8, %r6;
    cvta.to.global.u64 %rd6, %rd2;
    add.s64 %rd7, %rd6, %rd4;
    st.global.u32 [%rd7], %r9;
$done:
    ret;
}
"""


def test_the_stretch_goes_on_past_a_label_only_probed_branches_reach():
    third = PAIR.replace(".reg .pred %p<3>;", ".reg .pred %p<4>;").replace(
        "$skip:\n", "$skip:\n    setp.eq.s32 %p3, %r5, 0;\n    @%p3 bra $done;\n")
    body = _body(third)
    assert [body[p].guard.reg.name for p in guards.find_probed_branches(body, _params(third))] == \
        ["%p1", "%p2", "%p3"]
    # another way into $skip (a branch after it): the stretch ends there
    looped = third.replace("$done:\n    ret;", "    @%p1 bra $skip;\n$done:\n    ret;")
    body = _body(looped)
    assert [body[p].guard.reg.name for p in guards.find_probed_branches(body, _params(looped))] == ["%p1", "%p2"]


@pytest.mark.parametrize("block", [32, 256, 96])
def test_pair_kernel_matches_numpy(block):
    """Only the block holding the last element takes its second branch: the others run the
    copy without it, where the load of in[i + 1] is unconditional."""
    rng = np.random.default_rng()
    k = ac.RawModule(ptx=PAIR, name="pair.ptx").get_function("pair")
    for n in (1, block, 4 * block + int(rng.integers(1, block)), int(rng.integers(2000, 6000))):
        x = rng.integers(-2**30, 2**30, n + block, dtype=np.int64).astype(np.int32)
        x[n:] = 1 << 20                           # past the end: must not be read
        out = np.full(n + 2 * block, -7, np.int32)
        dout = ac.asarray(out)
        k(((n + block - 1) // block,), (block,), (ac.asarray(x), dout, np.uint32(n)))
        want = x[:n].copy()
        want[:n - 1] += x[1:n]
        got = dout.get()
        np.testing.assert_array_equal(got[:n], want)
        assert (got[n:] == -7).all(), "a thread past n stored"


# A kernel with barriers and shuffles: scan's first kernel in small (each thread sums four
# guarded loads, a warp scan, a barrier, the block's warp totals, a barrier), with its
# stores after the barriers guarded by the predicates of its loads
CHUNK_SCAN = r"""
extern "C" __global__ void chunk_scan(const int* in, int* out, int* totals, int n) {
    __shared__ int warp_totals[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int base = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    int v[4], run = 0;
    for (int k = 0; k < 4; ++k) {
        run += base + k < n ? in[base + k] : 0;
        v[k] = run;
    }
    int incl = run;
    for (int o = 1; o < 32; o <<= 1) {
        int u = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += u;
    }
    if (lane == 31) warp_totals[warp] = incl;
    __syncthreads();
    int before = incl - run;
    for (int w = 0; w < warp; ++w) before += warp_totals[w];
    for (int k = 0; k < 4; ++k)
        if (base + k < n) out[base + k] = v[k] + before;
    if (threadIdx.x == blockDim.x - 1) totals[blockIdx.x] = before + run;
}
"""


def _chunk_scan_reference(x, n, block):
    per_block = 4 * block
    blocks = (n + per_block - 1) // per_block
    padded = np.zeros(blocks * per_block, np.int64)
    padded[:n] = x[:n]
    scans = np.cumsum(padded.reshape(blocks, per_block), axis=1)
    return scans.reshape(-1)[:n].astype(np.int32), scans[:, -1].astype(np.int32)


def test_which_branches_are_known():
    """The stretch's branches; a later one on a stretch predicate written once; a later range
    guard of launch-fixed values that reads the block index; not: a predicate written twice,
    one of loaded data, a range guard of the thread index alone, a branch before the
    definition it reads."""
    ptx = PAIR.replace(".reg .pred %p<3>;", ".reg .pred %p<9>;").replace("%r<10>", "%r<12>").replace(
        "$done:\n", """    @%p2 bra $done;
    setp.eq.s32 %p3, %r5, 0;
    @%p3 bra $done;
    setp.eq.s32 %p3, %r5, 1;
    @%p3 bra $done;
    add.s32 %r11, %r5, 3;
    setp.lt.u32 %p4, %r11, %r1;
    @%p4 bra $done;
    setp.lt.u32 %p5, %r8, %r1;
    @%p5 bra $done;
    setp.lt.u32 %p6, %r4, 32;
    @%p6 bra $done;
    @%p7 bra $done;
    setp.lt.u32 %p7, %r5, %r1;
$done:
""")
    body = _body(ptx)
    known = guards.known_branches(body, _params(ptx))
    assert [body[p].guard.reg.name for p in known] == ["%p1", "%p2", "%p2", "%p4"]


def test_the_rounds_that_reach_a_known_branch(compile_cuda, monkeypatch):
    """chunk_scan: the first round (the guarded loads) and the one after the barrier (the
    guarded stores) reach known branches; the rounds between the shuffles do not."""
    compile_cuda(CHUNK_SCAN)                      # skips the test without a CUDA compiler
    seen = {}
    lower = FunctionLowering.lower

    def lower_and_keep(self):
        lower(self)
        if self.is_kernel:
            seen.update(rounds=self.guarded_rounds, sites=self.sites)
    monkeypatch.setattr(FunctionLowering, "lower", lower_and_keep)
    mod = ModuleLowering(parse(compile_to_ptx(CHUNK_SCAN), "chunk.ptx"), "chunk.ptx").lower().mod
    bars = [i + 1 for i, k in enumerate(seen["sites"]) if k == abi.SITE["bar_sync"]]
    assert set(seen["rounds"]) == {0, bars[-1]}
    # the loads' four guards, and the stores' four on the same predicates
    assert seen["rounds"][0] == 0b1111 and seen["rounds"][bars[-1]] == 0b11110000
    assert any(fn.name.endswith(".probe") for fn in mod.functions)


def _untouched(a):
    return a == np.frombuffer(b"\xcd" * 4, np.int32)[0]


@pytest.mark.parametrize("block", [256, 64, 96])
def test_a_kernel_with_barriers_matches_numpy(compile_cuda, rng, block):
    """Whole blocks pass the probe and run their first and last rounds without the guards;
    the block holding n's end takes the kernel as written. Outputs past n stay poisoned."""
    k = compile_cuda(CHUNK_SCAN).get_function("chunk_scan")
    per_block = 4 * block
    for n in (1, per_block, 3 * per_block + int(rng.integers(1, per_block)), int(rng.integers(20000, 40000))):
        blocks = (n + per_block - 1) // per_block
        x = rng.integers(-1000, 1000, blocks * per_block + 64).astype(np.int32)
        x[n:] = 1 << 20                           # past the end: must not be read
        out = poison(x.size, np.int32)
        totals = poison(blocks, np.int32)
        k((blocks,), (block,), (ac.asarray(x), out, totals, np.int32(n)))
        want, want_totals = _chunk_scan_reference(x, n, block)
        got = out.get()
        np.testing.assert_array_equal(got[:n], want)
        np.testing.assert_array_equal(totals.get(), want_totals)
        assert _untouched(got[n:]).all(), "a thread past n stored"


def test_the_settled_copy_is_what_runs(compile_cuda, rng, monkeypatch):
    """With a probe that always passes (and a fresh compile), the block holding n's end runs
    the settled copy too and stores past n: the copy without the guards is what a passing
    block runs. (Without warp regions: the loop after the barrier would give full warps a
    region, which runs the guards as branches, in place of the round with the stores.)"""
    from anycuda.compiler.vector import warpregions
    monkeypatch.setenv("ANYCUDA_CACHE", "0")
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")      # (a block program would take the kernel, loops and all)
    monkeypatch.setattr(warpregions, "emit_regions", lambda f: {})
    monkeypatch.setattr(FunctionLowering, "_emit_probe", lambda self: self.b.ret(ir.Constant(ir.IntType(32), -1)))
    k = ac.RawModule(code=CHUNK_SCAN + "// the probe always passes\n").get_function("chunk_scan")
    block, n = 64, 5 * 256 + 100
    x = rng.integers(-1000, 1000, 6 * 256).astype(np.int32)
    out = poison(x.size, np.int32)
    k((6,), (block,), (ac.asarray(x), out, poison(6, np.int32), np.int32(n)))
    got = out.get()
    want, _ = _chunk_scan_reference(x, n, block)
    np.testing.assert_array_equal(got[:n], want)
    assert not _untouched(got[n:]).any()


STENCIL3D = r"""
// 7-point stencil over 3-D blocks; a border test every block at an edge of the grid takes in
// its first row of threads (x, y or z = 0) or its last (x, y or z = the far edge)
extern "C" __global__ void jacobi3d(const float* in, float* out, int nx, int ny, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y,
        z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= nx || y >= ny || z >= nz) return;
    size_t sy = nx, sz = (size_t)nx * ny, i = z * sz + y * sy + x;
    if (x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1) { out[i] = in[i]; return; }
    out[i] = 0.4f * in[i] + 0.1f * (((in[i - 1] + in[i + 1]) + (in[i - sy] + in[i + sy])) + (in[i - sz] + in[i + sz]));
}
"""


def test_the_probe_ends_with_the_row_that_answers_it(compile_cuda, rng):
    """The probe of a block function returns at the end of the first row of threads after
    which its answer is known (a thread took a branch its caller asks about), not after the
    block's last thread: blocks at the grid's edges take the border test in their first or
    their last row, or (partial blocks) leave early. Against numpy."""
    compile_cuda(STENCIL3D)                       # skips the test without a CUDA compiler
    mod = ModuleLowering(parse(compile_to_ptx(STENCIL3D), "j.ptx"), "j.ptx").lower().mod
    probes = [fn for fn in mod.functions if fn.name.endswith(".probe")]
    assert probes and all(str(fn).count("ret i32") >= 2 for fn in probes)
    k = compile_cuda(STENCIL3D, name="jacobi3d.cu").get_function("jacobi3d")
    for nz, ny, nx in ((13, 17, 70), (8, 8, 64), (9, 5, 33)):
        u = rng.random((nz, ny, nx), dtype=np.float32)
        want = u.copy()
        c = slice(1, -1)
        want[c, c, c] = np.float32(0.4) * u[c, c, c] + np.float32(0.1) * (
            ((u[c, c, :-2] + u[c, c, 2:]) + (u[c, :-2, c] + u[c, 2:, c])) + (u[:-2, c, c] + u[2:, c, c]))
        out = ac.asarray(np.full_like(u, np.nan))
        block = (32, 4, 4)
        grid = tuple(-(-n // b) for n, b in zip((nx, ny, nz), block))
        k(grid, block, (ac.asarray(u), out, np.int32(nx), np.int32(ny), np.int32(nz)))
        np.testing.assert_allclose(out.get(), want, rtol=1e-6, atol=1e-7)     # (nvcc contracts to FMAs)
