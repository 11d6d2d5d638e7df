"""Runs of warp shuffles as vector code (compiler/vector/warpruns.py): when a warp's 32 lanes all
wait at the first shuffle of a straight-line run of shuffles, the scheduler computes the
whole run for the warp as <32 x T> vectors and resumes the lanes after its last shuffle.
The references are numpy emulations of each shuffle as the CUDA documentation defines it;
outputs are poisoned first. Blocks of partial warps take the shuffle-by-shuffle path, which
the same references check."""
import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.lowering.module import ModuleLowering
from anycuda.ptx.parser import parse
from conformance import poison

FULL = 0xFFFFFFFF
SOURCE = r"""
#define FULL 0xffffffffu
// a warp scan, a warp max, a warp sum by shfl_down and two broadcasts; the first three
// live on across a barrier. The lane comes from the linear thread index, so that in a 2-D
// block the lane tests read threadIdx.y too.
extern "C" __global__ void warp_ops(const int* xi, const float* xf, int* scan, float* top, int* down,
                                    int* bcast) {
    unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
    unsigned g = blockIdx.x * blockDim.x * blockDim.y + t;
    int lane = t & 31;
    int s = xi[g];
    for (int o = 1; o < 32; o <<= 1) {
        int u = __shfl_up_sync(FULL, s, o);
        if (lane >= o) s += u;
    }
    float m = xf[g];
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(FULL, m, o));
    int d = xi[g];
    for (int o = 1; o < 32; o <<= 1) d += __shfl_down_sync(FULL, d, o);
    __syncthreads();
    scan[g] = s;
    top[g] = m;
    down[g] = d;
    bcast[g] = __shfl_sync(FULL, s, 3) + __shfl_sync(FULL, d, 7);
}

// only the first `busy` threads (whole warps) scan, the others wait at the barrier: the
// scanning warps are brought through the run while the rest of the block stands still
extern "C" __global__ void some_warps_scan(const int* xi, int* scan, int busy) {
    unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
    int s = xi[g];
    if (threadIdx.x < busy) {
        for (int o = 1; o < 32; o <<= 1) {
            int u = __shfl_up_sync(FULL, s, o);
            if ((threadIdx.x & 31) >= o) s += u;
        }
    }
    __syncthreads();
    scan[g] = s;
}
"""


def _shfl(v, mode, b, c=31):
    """One shuffle over each warp (rows of 32 lanes) per the CUDA/PTX definition: a source
    lane out of range, or beyond the clamp, reads the lane itself."""
    lane = np.arange(32)
    if mode == "up":
        src = np.where(lane - b >= 0, lane - b, lane)
    elif mode == "down":
        src = np.where(lane + b <= c, lane + b, lane)
    elif mode == "bfly":
        src = lane ^ b
    else:
        src = np.full(32, b)
    return v[:, src]


def _warp_ops_reference(xi, xf):
    lane = np.arange(32)
    s = xi.reshape(-1, 32).astype(np.int64)
    for o in (1, 2, 4, 8, 16):
        s = s + np.where(lane >= o, _shfl(s, "up", o), 0)
    m = xf.reshape(-1, 32)
    for o in (16, 8, 4, 2, 1):
        m = np.fmax(m, _shfl(m, "bfly", o))
    d = xi.reshape(-1, 32).astype(np.int64)
    for o in (1, 2, 4, 8, 16):
        d = d + _shfl(d, "down", o)
    b = _shfl(s, "idx", 3) + _shfl(d, "idx", 7)
    return [a.ravel() for a in (s.astype(np.int32), m, d.astype(np.int32), b.astype(np.int32))]


def _advances(ptx):
    """(advance functions with vector code, advance functions abandoned) of the lowered module."""
    mod = ModuleLowering(parse(ptx, "runs.ptx"), "runs.ptx").lower().mod
    advances = [fn for fn in mod.functions if ".advance" in fn.name]
    abandoned = [fn for fn in advances if [blk.name for blk in fn.blocks] == ["unused"]]
    return len(advances) - len(abandoned), len(abandoned)


@pytest.mark.parametrize("block", [(64, 1), (256, 1), (16, 4), (32, 3), (48, 1), (8, 5)])
def test_warp_runs_match_numpy(rng, block):
    grid = 3
    nt = block[0] * block[1]
    count = grid * nt
    xi = rng.integers(-1000, 1000, count).astype(np.int32)
    xf = rng.standard_normal(count).astype(np.float32)
    xf[rng.integers(0, count, count // 7)] = np.nan         # fmaxf: a NaN gives the other operand
    xf[:32] = np.nan                                        # a warp of NaNs stays NaN
    outs = [poison(count, np.int32), poison(count, np.float32), poison(count, np.int32), poison(count, np.int32)]
    mod = ac.RawModule(code=SOURCE)
    mod.get_function("warp_ops")((grid,), block, (ac.asarray(xi), ac.asarray(xf), *outs))
    got = [o.get() for o in outs]
    if nt % 32:
        # a partial warp's shuffles read absent lanes: undefined in CUDA; compare full warps only
        keep = (np.arange(count) % nt) < nt - nt % 32
        got = [g[keep] for g in got]
        xi, xf = xi[keep], xf[keep]
        if len(xi) == 0:
            return
    want = _warp_ops_reference(xi, xf)
    for g, w, name in zip(got, want, ("scan", "max", "down", "broadcast")):
        np.testing.assert_array_equal(g, w, err_msg=name)


@pytest.mark.parametrize("block,busy", [(128, 64), (96, 32), (64, 64)])
def test_runs_of_some_warps_while_others_wait(rng, block, busy):
    grid = 3
    xi = rng.integers(-1000, 1000, grid * block).astype(np.int32)
    out = poison(grid * block, np.int32)
    ac.RawModule(code=SOURCE).get_function("some_warps_scan")((grid,), (block,), (ac.asarray(xi), out, np.int32(busy)))
    lane = np.arange(32)
    s = xi.reshape(-1, 32).astype(np.int64)
    for o in (1, 2, 4, 8, 16):
        s = s + np.where(lane >= o, _shfl(s, "up", o), 0)
    busy_lanes = (np.arange(grid * block) % block) < busy
    want = np.where(busy_lanes, s.ravel(), xi).astype(np.int32)
    np.testing.assert_array_equal(out.get(), want)


def test_each_run_of_the_kernel_gets_vector_code():
    """warp_ops' scan, max, sum and two broadcasts are four runs, some_warps_scan has one;
    each has an advance function (warp_ops' lane tests recompute the lane from threadIdx.y *
    blockDim.x + threadIdx.x)."""
    mod = ac.RawModule(code=SOURCE)
    assert _advances(mod.ptx) == (5, 0)


# A run of three shuffles written by hand with forms nvcc rarely puts between shuffles: a
# guarded instruction, shifts by immediates, mad.lo, min, not of a shuffle's predicate used
# after the run, a float immediate and fma of a float saved before the run (f3 = 1.5 x + 1.5).
GUARDED = r"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry guarded_run(.param .u64 px, .param .u64 pout, .param .u64 poutf)
{
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    .reg .pred %p<6>;
    .reg .f32 %f<4>;
    ld.param.u64 %rd1, [px];
    ld.param.u64 %rd2, [pout];
    ld.param.u64 %rd3, [poutf];
    mov.u32 %r10, %tid.x;
    mul.wide.u32 %rd4, %r10, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r1, [%rd5];
    cvt.rn.f32.s32 %f2, %r1;
    shfl.sync.bfly.b32 %r2|%p1, %r1, 1, 31, -1;
    setp.lt.s32 %p2, %r2, %r1;
    @%p2 add.s32 %r1, %r1, %r2;
    shl.b32 %r3, %r1, 4;
    shr.s32 %r3, %r3, 2;
    mad.lo.s32 %r3, %r3, 3, 1;
    shfl.sync.down.b32 %r4|%p3, %r3, 2, 31, -1;
    min.s32 %r5, %r4, %r3;
    not.pred %p4, %p3;
    mov.f32 %f1, 0f3FC00000;
    fma.rn.f32 %f3, %f2, %f1, %f1;
    shfl.sync.idx.b32 %r6, %r5, 5, 31, -1;
    selp.b32 %r8, 1000, 0, %p4;
    add.s32 %r9, %r6, %r8;
    add.s64 %rd6, %rd2, %rd4;
    st.global.u32 [%rd6], %r9;
    add.s64 %rd7, %rd3, %rd4;
    st.global.f32 [%rd7], %f3;
    ret;
}
"""


def _guarded_reference(x):
    v = x.reshape(-1, 32).astype(np.int64)
    r2 = _shfl(v, "bfly", 1)
    r1 = np.where(r2 < v, v + r2, v)
    r1 = ((r1 << 4) & FULL).astype(np.uint32).view(np.int32).astype(np.int64) >> 2
    r3 = (r1 * 3 + 1).astype(np.int32).astype(np.int64)
    lane = np.arange(32)
    r4 = _shfl(r3, "down", 2)
    p3 = lane + 2 <= 31
    r5 = np.minimum(r4, r3)
    f3 = (x.astype(np.float64) * 1.5 + 1.5).astype(np.float32)     # exact in double, rounded once
    r6 = _shfl(r5, "idx", 5)
    return (r6 + np.where(~p3, 1000, 0)).astype(np.int32).ravel(), f3.ravel()


def test_a_hand_written_run_with_guards_shifts_and_predicates(rng):
    assert _advances(GUARDED) == (1, 0)
    n = 128
    x = rng.integers(-(1 << 20), 1 << 20, n).astype(np.int32)
    out, outf = poison(n, np.int32), poison(n, np.float32)
    mod = ac.RawModule(ptx=GUARDED)
    mod.get_function("guarded_run")((1,), (n,), (ac.asarray(x), out, outf))
    want, wantf = _guarded_reference(x)
    np.testing.assert_array_equal(out.get(), want)
    np.testing.assert_array_equal(outf.get(), wantf)


def test_the_vector_code_is_what_runs(rng, monkeypatch):
    """With the vector form of min made a max (and a fresh compile), full warps come out
    wrong: their lanes went through the advance function, not through the step function."""
    import dataclasses
    from anycuda.compiler.vector import warpruns
    monkeypatch.setenv("ANYCUDA_CACHE", "0")
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")     # (a block program would take this kernel)
    as_max = lambda w, st: warpruns.VECTOR_OPS["max"](w, dataclasses.replace(st, opcode="max"))
    monkeypatch.setattr(warpruns, "VECTOR_OPS", dict(warpruns.VECTOR_OPS, min=as_max))
    n = 64
    x = rng.integers(-(1 << 20), 1 << 20, n).astype(np.int32)
    out, outf = poison(n, np.int32), poison(n, np.float32)
    mod = ac.RawModule(ptx=GUARDED + "// min made max\n")
    mod.get_function("guarded_run")((1,), (n,), (ac.asarray(x), out, outf))
    want, wantf = _guarded_reference(x)
    assert not np.array_equal(out.get(), want)
    np.testing.assert_array_equal(outf.get(), wantf)


# Registers saved without their thread-linear part (lower: linear_forms) in and out of a run:
# r11 = 3 tid + base (+ 7 where x < 0: two definitions, so it is saved, not recomputed) is
# read inside the run, r13 = r11 + 5 is made inside it and read after it; both are saved as
# the value less 3 tid and get it back on resume.
LINEAR = r"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry linear_run(.param .u64 px, .param .u64 pout, .param .u32 pbase)
{
    .reg .b32 %r<24>;
    .reg .b64 %rd<8>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [px];
    ld.param.u64 %rd2, [pout];
    ld.param.u32 %r20, [pbase];
    mov.u32 %r10, %tid.x;
    mul.wide.u32 %rd4, %r10, 4;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.u32 %r1, [%rd5];
    mad.lo.s32 %r11, %r10, 3, %r20;
    setp.lt.s32 %p1, %r1, 0;
    @%p1 add.s32 %r11, %r11, 7;
    shfl.sync.bfly.b32 %r2, %r1, 4, 31, -1;
    add.s32 %r12, %r2, %r11;
    shfl.sync.up.b32 %r4, %r12, 1, 0, -1;
    add.s32 %r13, %r11, 5;
    shfl.sync.down.b32 %r5, %r4, 3, 31, -1;
    add.s32 %r6, %r5, %r13;
    add.s32 %r7, %r6, %r11;
    add.s64 %rd6, %rd2, %rd4;
    st.global.u32 [%rd6], %r7;
    ret;
}
"""


def test_registers_saved_without_their_thread_linear_part(rng, monkeypatch):
    from anycuda.compiler.lowering.function import FunctionLowering
    seen = {}
    original = FunctionLowering._plan_spills

    def spy(self, body):
        original(self, body)
        seen.update(self.linear_forms)
    monkeypatch.setattr(FunctionLowering, "_plan_spills", spy)
    assert _advances(LINEAR) == (1, 0)
    assert {"%r11", "%r13"} <= set(seen)
    monkeypatch.undo()
    n, base = 96, 1000
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poison(n, np.int32)
    ac.RawModule(ptx=LINEAR).get_function("linear_run")((1,), (n,), (ac.asarray(x), out, np.int32(base)))
    t = np.arange(n).reshape(-1, 32).astype(np.int64)
    v = x.reshape(-1, 32).astype(np.int64)
    r11 = 3 * t + base + np.where(v < 0, 7, 0)
    r4 = _shfl(_shfl(v, "bfly", 4) + r11, "up", 1, 0)
    want = _shfl(r4, "down", 3) + (r11 + 5) + r11
    np.testing.assert_array_equal(out.get(), want.astype(np.int32).ravel())
