"""Lane reloads (compiler/vector/lanereloads.py): in a warp region's loop over the lanes of an
atomic, a lane's address or operand is computed again from the memory a vector load read it
from, not taken from a stack copy of the vector. That holds only while the memory still
holds it: the analysis declines a load in the atomic's own state space (unless .nc), a store
between the load and the atomic, and a register read as alike that changes before the
atomic. Results are checked against numpy (np.bincount, and a warp-by-warp simulation where
the atomics write what the loads read); outputs are poisoned or zeroed first."""
import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.analysis import uniformity
from anycuda.compiler.vector import lanereloads, laneshapes
from anycuda.compiler.types import space_of
from anycuda.ptx.parser import parse
from conformance import poison

HEAD = """
.version 8.0
.target sm_80
.address_size 64
"""

# histogram256 as nvcc writes it: a shared histogram per block of the bytes of a grid-stride
# loop (`atomicAdd(&h[data[i]], 1)`), copied to out[ctaid * 256 + bin]; SKIP may leave some
# elements out (lanes that part around the load and the atomic)
HISTOGRAM = HEAD + r"""
.visible .entry hist(.param .u64 pdata, .param .u64 pout, .param .u32 pn)
{
    .reg .pred %p<4>;
    .reg .b16 %rs<2>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b8 h[1024];
    ld.param.u64 %rd1, [pdata];
    ld.param.u64 %rd2, [pout];
    ld.param.u32 %r1, [pn];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, h;
    mov.u32 %r8, 0;
    mov.u32 %r5, %r2;
CLEAR:
    setp.ge.s32 %p1, %r5, 256;
    @%p1 bra CLEARED;
    shl.b32 %r6, %r5, 2;
    add.s32 %r7, %r4, %r6;
    st.shared.u32 [%r7], %r8;
    add.s32 %r5, %r5, %r3;
    bra.uni CLEAR;
CLEARED:
    bar.sync 0;
    mov.u32 %r9, %ctaid.x;
    mov.u32 %r10, %nctaid.x;
    mad.lo.s32 %r11, %r9, %r3, %r2;
    mul.lo.s32 %r12, %r10, %r3;
    setp.ge.s32 %p2, %r11, %r1;
    @%p2 bra COUNTED;
LOOP:
    cvt.s64.s32 %rd3, %r11;
SKIP
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u8 %rs1, [%rd4];
    mul.wide.u16 %r13, %rs1, 4;
    add.s32 %r14, %r4, %r13;
BETWEEN
    atom.shared.add.u32 %r15, [%r14], 1;
NEXT:
    add.s32 %r11, %r11, %r12;
    setp.lt.s32 %p3, %r11, %r1;
    @%p3 bra LOOP;
COUNTED:
    bar.sync 0;
    mov.u32 %r5, %r2;
COPY:
    setp.ge.s32 %p1, %r5, 256;
    @%p1 bra DONE;
    shl.b32 %r6, %r5, 2;
    add.s32 %r7, %r4, %r6;
    ld.shared.u32 %r16, [%r7];
    mad.lo.s32 %r17, %r9, 256, %r5;
    mul.wide.u32 %rd5, %r17, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.u32 [%rd6], %r16;
    add.s32 %r5, %r5, %r3;
    bra.uni COPY;
DONE:
    ret;
}
"""

# elements i with (i * 0x9E3779B1) >> 30 == 0 are not counted: a branch on the lanes' own values
# around straight code, which lockstep runs for the other lanes under a mask
SKIP = """    mul.lo.s32 %r18, %r11, -1640531535;
    shr.u32 %r19, %r18, 30;
    setp.eq.u32 %p1, %r19, 0;
    @%p1 bra NEXT;"""


def _histogram(between="", skip=""):
    return HISTOGRAM.replace("BETWEEN", between).replace("SKIP", skip)


# a weighted count in global memory: atomicAdd(&out[idx[i]], w[i]) over a grid-stride loop,
# the index and weight read with LOAD (ld.global.nc: memory the kernel does not write)
SCATTER_ADD = HEAD + r"""
.visible .entry scatter_add(.param .u64 pidx, .param .u64 pw, .param .u64 pout, .param .u32 pn)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [pidx];
    ld.param.u64 %rd2, [pw];
    ld.param.u64 %rd3, [pout];
    ld.param.u32 %r1, [pn];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %nctaid.x;
    mad.lo.s32 %r6, %r4, %r3, %r2;
    mul.lo.s32 %r7, %r5, %r3;
    setp.ge.s32 %p1, %r6, %r1;
    @%p1 bra DONE;
    bar.sync 0;
LOOP:
    mul.wide.s32 %rd4, %r6, 4;
    add.s64 %rd5, %rd1, %rd4;
    LOAD.u32 %r8, [%rd5];
    add.s64 %rd6, %rd2, %rd4;
    LOAD.u32 %r9, [%rd6];
    and.b32 %r10, %r8, 1023;
    mul.wide.u32 %rd7, %r10, 4;
    add.s64 %rd8, %rd3, %rd7;
    atom.global.add.u32 %r11, [%rd8], %r9;
    add.s32 %r6, %r6, %r7;
    setp.lt.s32 %p2, %r6, %r1;
    @%p2 bra LOOP;
DONE:
    ret;
}
"""

# one warp per block bumps, in shared memory, the entries that the entries it reads name:
# s[s[i] & 255] += 1 for i = lane, lane + 32, ...; the load and the atomics share memory
BUMP_SHARED = HEAD + r"""
.visible .entry bump(.param .u64 pin, .param .u64 pout)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b8 s[1024];
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pout];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, s;
    mov.u32 %r3, %r1;
FILL:
    mul.wide.u32 %rd3, %r3, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r4, [%rd4];
    shl.b32 %r5, %r3, 2;
    add.s32 %r6, %r2, %r5;
    st.shared.u32 [%r6], %r4;
    add.s32 %r3, %r3, 32;
    setp.lt.u32 %p1, %r3, 256;
    @%p1 bra FILL;
    bar.sync 0;
    mov.u32 %r3, %r1;
BUMP:
    shl.b32 %r7, %r3, 2;
    add.s32 %r8, %r2, %r7;
    ld.shared.u32 %r9, [%r8];
    and.b32 %r10, %r9, 255;
    shl.b32 %r11, %r10, 2;
    add.s32 %r12, %r2, %r11;
    atom.shared.add.u32 %r13, [%r12], 1;
    add.s32 %r3, %r3, 32;
    setp.lt.u32 %p2, %r3, 256;
    @%p2 bra BUMP;
    bar.sync 0;
    mov.u32 %r3, %r1;
COPY:
    shl.b32 %r14, %r3, 2;
    add.s32 %r15, %r2, %r14;
    ld.shared.u32 %r16, [%r15];
    mul.wide.u32 %rd5, %r3, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.u32 [%rd6], %r16;
    add.s32 %r3, %r3, 32;
    setp.lt.u32 %p3, %r3, 256;
    @%p3 bra COPY;
    ret;
}
"""


def _loop_reload(source, label, register):
    """find_reload of `register` as the atomic in the straight code after `label` reads it."""
    fn = parse(source, "k.ptx").functions[0]
    body = fn.body
    start = next(i for i, st in enumerate(body) if getattr(st, "name", None) == label) + 1
    end = next(i for i in range(start, len(body)) if getattr(body[i], "opcode", None) == "bra")
    positions = [p for p in range(start, end + 1) if hasattr(body[p], "opcode")]     # (no labels)
    at = next(i for i, p in enumerate(positions) if body[p].opcode in ("atom", "red"))
    bits = lambda r: 64 if r.startswith("%rd") else 16 if r.startswith("%rs") else 1 if r.startswith("%p") else 32
    strides = laneshapes.lane_strides(body, bits, uniformity.constant_registers(body))
    space = space_of(body[positions[at]])
    return body, lanereloads.find_reload(body, positions, at, register, strides, space)


def test_histogram_address_is_reloaded_from_the_bytes():
    body, reload = _loop_reload(_histogram(), "LOOP", "%r14")
    assert [body[p].opcode for p in reload.positions] == ["ld", "mul", "add"]
    assert [body[p].opcode for p in reload.loads] == ["ld"]


@pytest.mark.parametrize("between", [
    "    add.s32 %r4, %r4, 0;",                  # the histogram's offset, read as alike, changes
    "    st.global.u8 [%rd2], %rs1;",            # a store after the load
    "    add.s64 %rd4, %rd4, 1;",                # the load's address changes
    "    add.s32 %r14, %r14, %r8;",              # the address is not the chain's alone: %r8 is
])
def test_histogram_reload_declined(between):
    _, reload = _loop_reload(_histogram(between), "LOOP", "%r14")
    if "%r8" in between:
        # %r8 is 0 in every lane and unchanged: the chain goes through the add
        assert reload is not None
    else:
        assert reload is None


@pytest.mark.parametrize("load,reloaded", [("ld.global.nc", True), ("ld.global", False)])
def test_global_atomics_reload_only_from_memory_they_cannot_write(load, reloaded):
    source = SCATTER_ADD.replace("LOAD", load)
    for register in ("%rd8", "%r9"):
        _, reload = _loop_reload(source, "LOOP", register)
        assert (reload is not None) is reloaded


# red.global.add.f32 of a float weight loaded as it is: atomicAdd(&out[idx[i] & 1023], w[i])
SCATTER_ADD_F32 = SCATTER_ADD.replace("LOAD.u32 %r9", "ld.global.nc.f32 %f1").replace(
    "atom.global.add.u32 %r11, [%rd8], %r9", "red.global.add.f32 [%rd8], %f1").replace(
    ".reg .b64 %rd<12>;", ".reg .b64 %rd<12>;\n    .reg .f32 %f<2>;").replace("LOAD", "ld.global.nc")


def test_a_float_operand_is_reloaded_as_loaded():
    _, reload = _loop_reload(SCATTER_ADD_F32, "LOOP", "%f1")
    assert reload is not None and len(reload.positions) == 1


def test_float_scatter_add_matches_numpy(rng):
    n = 30_000
    idx = rng.integers(0, 1 << 20, n).astype(np.uint32)
    w = rng.integers(-1000, 1000, n).astype(np.float32)          # integers: every order sums exactly
    out = ac.zeros(1024, np.float32)
    ac.RawModule(ptx=SCATTER_ADD_F32).get_function("scatter_add")((3,), (128,),
                                                                   (ac.asarray(idx), ac.asarray(w), out, np.int32(n)))
    np.testing.assert_array_equal(out.get(), np.bincount(idx & 1023, weights=w, minlength=1024).astype(np.float32))


def test_shared_atomics_do_not_reload_from_shared_memory():
    _, reload = _loop_reload(BUMP_SHARED, "BUMP", "%r12")
    assert reload is None


@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("grid,block,n", [(4, 256, 1 << 16), (3, 256, 50_001), (5, 64, 9_999),
                                          (2, 96, 3_333), (3, 33, 1_000)])
def test_histogram_matches_numpy(rng, skip, grid, block, n):
    data = np.minimum(rng.exponential(20.0, n), 255).astype(np.uint8)      # skewed: many repeats
    out = poison(grid * 256, np.uint32)
    ptx = _histogram(skip=SKIP if skip else "")
    ac.RawModule(ptx=ptx).get_function("hist")((grid,), (block,), (ac.asarray(data), out, np.int32(n)))
    got = out.get().reshape(grid, 256).sum(axis=0)
    counted = data
    if skip:
        hashed = (np.arange(n, dtype=np.uint64) * 0x9E3779B1) & 0xFFFFFFFF
        counted = data[(hashed >> 30) != 0]
    np.testing.assert_array_equal(got, np.bincount(counted, minlength=256))


@pytest.mark.parametrize("load", ["ld.global.nc", "ld.global"])
@pytest.mark.parametrize("grid,block,n", [(4, 128, 40_000), (3, 64, 7_777)])
def test_scatter_add_matches_numpy(rng, load, grid, block, n):
    idx = rng.integers(0, 1 << 20, n).astype(np.uint32)
    w = rng.integers(0, 1000, n).astype(np.uint32)
    out = ac.zeros(1024, np.uint32)
    ptx = SCATTER_ADD.replace("LOAD", load)
    ac.RawModule(ptx=ptx).get_function("scatter_add")((grid,), (block,),
                                                      (ac.asarray(idx), ac.asarray(w), out, np.int32(n)))
    want = np.bincount(idx & 1023, weights=w, minlength=1024).astype(np.uint32)
    np.testing.assert_array_equal(out.get(), want)


def test_shared_bumps_read_before_the_warp_writes(rng):
    """Each step, the warp's 32 lanes read their entries, then bump: a lane's entry is the
    one its load found, even where an earlier lane's atomic has changed it since."""
    start = rng.integers(0, 1 << 16, 256).astype(np.uint32)
    start[::7] = np.arange(0, 256, 7) + 1            # entries that name the next lanes'
    out = poison(256, np.uint32)
    ac.RawModule(ptx=BUMP_SHARED).get_function("bump")((1,), (32,), (ac.asarray(start), out))
    s = start.astype(np.int64)
    for step in range(8):
        names = s[step * 32:(step + 1) * 32] & 255
        for lane in range(32):
            s[names[lane]] += 1
    np.testing.assert_array_equal(out.get(), s.astype(np.uint32))
