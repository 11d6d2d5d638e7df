"""The compiler and block scheduler on hand-written PTX: forms that CUDA C++ rarely
produces but PTX allows (named and reducing barriers, predicated collectives, exit inside a
device function, brx.idx, calls with register arguments), and the failure paths.

Device pointers are host addresses on the CPU target, so numpy buffers are passed directly.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

from anycuda.ptx import PtxError
from anycuda.runtime.errors import CudaError, CUresult
from conformance import ptx_launcher
from anycuda.runtime.program import load_program

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"


launch = ptx_launcher(HEADER, "test.ptx")


def test_bar_red_popc_and_or(rng=np.random.default_rng()):
    ptx = """
.visible .entry k(.param .u64 pin, .param .u64 pout)
{
  .reg .b32 %r<8>; .reg .b64 %rd<6>; .reg .pred %p<4>;
  ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r2, [%rd4];
  setp.ne.u32 %p1, %r2, 0;
  bar.red.popc.u32 %r3, 0, %p1;
  bar.red.and.pred %p2, 0, %p1;
  bar.red.or.pred %p3, 0, %p1;
  selp.u32 %r4, 1, 0, %p2; selp.u32 %r5, 1, 0, %p3;
  mul.wide.u32 %rd3, %r1, 12; add.s64 %rd5, %rd2, %rd3;
  st.global.u32 [%rd5], %r3; st.global.u32 [%rd5+4], %r4; st.global.u32 [%rd5+8], %r5;
  ret;
}"""
    for n, density in ((100, 0.5), (64, 1.0), (33, 0.0)):
        flags = (rng.random(n) < density).astype(np.uint32)
        out = np.full((n, 3), 0xDEADBEEF, np.uint32)
        launch(ptx, "k", (1, 1, 1), (n, 1, 1), flags, out)
        assert (out[:, 0] == flags.sum()).all()
        assert (out[:, 1] == int(flags.all())).all()
        assert (out[:, 2] == int(flags.any())).all()


def test_exit_before_barrier_does_not_hang():
    """Threads that exit do not count at a later bar.sync (CUDA's rule)."""
    ptx = """
.visible .entry k(.param .u64 pout, .param .u32 pn)
{
  .reg .b32 %r<8>; .reg .b64 %rd<6>; .reg .pred %p<3>;
  .shared .align 4 .b32 s[256];
  ld.param.u64 %rd1, [pout]; ld.param.u32 %r7, [pn];
  mov.u32 %r1, %tid.x;
  setp.ge.u32 %p1, %r1, %r7;
  @%p1 exit;
  shl.b32 %r2, %r1, 2; mov.u32 %r3, s; add.s32 %r3, %r3, %r2;
  st.shared.u32 [%r3], %r1;
  bar.sync 0;
  sub.s32 %r4, %r7, 1; sub.s32 %r4, %r4, %r1; shl.b32 %r4, %r4, 2; mov.u32 %r5, s; add.s32 %r5, %r5, %r4;
  ld.shared.u32 %r6, [%r5];
  mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], %r6;
  ret;
}"""
    out = np.full(256, 0xFFFFFFFF, np.uint32)
    launch(ptx, "k", (1, 1, 1), (256, 1, 1), out, 100)
    assert (out[:100] == np.arange(99, -1, -1)).all()
    assert (out[100:] == 0xFFFFFFFF).all()


def test_barrier_in_loop_with_divergent_trip_counts():
    ptx = """
.visible .entry k(.param .u64 pout, .param .u32 iters)
{
  .reg .b32 %r<12>; .reg .b64 %rd<6>; .reg .pred %p<3>;
  .shared .align 4 .b32 acc[64];
  ld.param.u64 %rd1, [pout]; ld.param.u32 %r9, [iters];
  mov.u32 %r1, %tid.x; mov.u32 %r2, 0; mov.u32 %r8, 0;
  shl.b32 %r3, %r1, 2; mov.u32 %r4, acc; add.s32 %r4, %r4, %r3;
  st.shared.u32 [%r4], %r1;
  bar.sync 0;
LOOP:
  xor.b32 %r5, %r1, 1; shl.b32 %r5, %r5, 2; mov.u32 %r6, acc; add.s32 %r6, %r6, %r5;
  ld.shared.u32 %r7, [%r6];
  add.s32 %r8, %r8, %r7;
  bar.sync 0;
  st.shared.u32 [%r4], %r8;
  bar.sync 0;
  add.s32 %r2, %r2, 1;
  setp.lt.u32 %p1, %r2, %r9;
  @%p1 bra LOOP;
  mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], %r8;
  ret;
}"""
    iters = 5
    out = np.zeros(64, np.uint32)
    launch(ptx, "k", (3, 1, 1), (64, 1, 1), out, iters)
    # model: every thread adds its partner's previous accumulator each round
    acc = np.arange(64, dtype=np.uint64)
    mine = np.zeros(64, np.uint64)
    for _ in range(iters):
        mine = mine + acc[np.arange(64) ^ 1]
        acc = mine.copy()
    assert (out == (mine & 0xFFFFFFFF)).all()


def test_shfl_partial_mask_in_divergent_branch():
    ptx = """
.visible .entry k(.param .u64 pout)
{
  .reg .b32 %r<8>; .reg .b64 %rd<6>; .reg .pred %p<3>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %laneid;
  mul.lo.u32 %r2, %r1, 10;
  setp.lt.u32 %p1, %r1, 16;
  @!%p1 bra HIGH;
  shfl.sync.idx.b32 %r3|%p2, %r2, 3, 31, 0x0000ffff;
  bra DONE;
HIGH:
  shfl.sync.down.b32 %r3|%p2, %r2, 2, 31, 0xffff0000;
DONE:
  selp.u32 %r4, 1, 0, %p2;
  mov.u32 %r5, %tid.x;
  mul.wide.u32 %rd2, %r5, 8; add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3; st.global.u32 [%rd3+4], %r4;
  ret;
}"""
    out = np.full((64, 2), 0xABABABAB, np.uint32)
    launch(ptx, "k", (1, 1, 1), (64, 1, 1), out)
    lane = np.arange(64) % 32
    exp = np.where(lane < 16, 30, np.where(lane + 2 <= 31, (lane + 2) * 10, lane * 10))
    pred = np.where(lane < 16, 1, (lane + 2 <= 31).astype(int))
    assert (out[:, 0] == exp).all()
    assert (out[:, 1] == pred).all()


def test_activemask_and_ballot_in_partial_last_warp():
    ptx = """
.visible .entry k(.param .u64 pout)
{
  .reg .b32 %r<8>; .reg .b64 %rd<6>; .reg .pred %p<3>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x; and.b32 %r2, %r1, 1; setp.eq.u32 %p1, %r2, 1;
  @!%p1 bra SKIP;
  activemask.b32 %r3;
SKIP:
  @%p1 bra AFTER;
  mov.u32 %r3, 0;
AFTER:
  and.b32 %r6, %r1, 3; setp.eq.u32 %p2, %r6, 0;
  vote.sync.ballot.b32 %r4, %p2, -1;
  mul.wide.u32 %rd2, %r1, 8; add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3; st.global.u32 [%rd3+4], %r4;
  ret;
}"""
    n = 40
    out = np.full((n, 2), 0xABABABAB, np.uint32)
    launch(ptx, "k", (1, 1, 1), (n, 1, 1), out)
    tid = np.arange(n)
    warp_base = tid // 32 * 32
    def mask(sel):
        m = np.zeros(n, np.uint64)
        for t in range(n):
            lanes = [u - warp_base[t] for u in range(warp_base[t], min(warp_base[t] + 32, n)) if sel(u)]
            m[t] = sum(1 << l for l in lanes)
        return m
    odd = mask(lambda u: u % 2 == 1)
    assert (out[:, 0] == np.where(tid % 2 == 1, odd, 0)).all()
    assert (out[:, 1] == mask(lambda u: u % 4 == 0)).all()


def test_exit_inside_device_function_and_register_call_arguments():
    ptx = """
.func (.param .b32 r) maybe_exit(.param .b32 x)
{
  .reg .b32 %r<3>; .reg .pred %p1;
  ld.param.b32 %r1, [x];
  setp.gt.u32 %p1, %r1, 5;
  @%p1 exit;
  add.s32 %r2, %r1, 100;
  st.param.b32 [r], %r2;
  ret;
}
.visible .entry k(.param .u64 pout)
{
  .reg .b32 %r<4>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x;
  { .param .b32 a; .param .b32 res;
    st.param.b32 [a], %r1;
    call.uni (res), maybe_exit, (a);
    ld.param.b32 %r2, [res];
  }
  mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], %r2;
  ret;
}"""
    out = np.full(10, 7, np.uint32)
    launch(ptx, "k", (1, 1, 1), (10, 1, 1), out)
    assert (out[:6] == np.arange(6) + 100).all()
    assert (out[6:] == 7).all()


def test_brx_idx_and_indirect_call():
    ptx = """
.func (.param .b32 r) twice(.param .b32 x)
{ .reg .b32 %r<3>; ld.param.b32 %r1, [x]; shl.b32 %r2, %r1, 1; st.param.b32 [r], %r2; ret; }
.func (.param .b32 r) square(.param .b32 x)
{ .reg .b32 %r<3>; ld.param.b32 %r1, [x]; mul.lo.s32 %r2, %r1, %r1; st.param.b32 [r], %r2; ret; }
.visible .entry k(.param .u64 pout)
{
  .reg .b32 %r<6>; .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x; and.b32 %r2, %r1, 1;
  ts: .branchtargets A, B;
  brx.idx %r2, ts;
A: mov.u64 %rd4, twice; bra.uni CALL;
B: mov.u64 %rd4, square;
CALL:
  { .param .b32 a; .param .b32 res;
    proto: .callprototype (.param .b32 _) _ (.param .b32 _);
    st.param.b32 [a], %r1;
    call (res), %rd4, (a), proto;
    ld.param.b32 %r3, [res];
  }
  mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], %r3;
  ret;
}"""
    out = np.zeros(16, np.uint32)
    launch(ptx, "k", (1, 1, 1), (16, 1, 1), out)
    t = np.arange(16)
    assert (out == np.where(t % 2 == 0, 2 * t, t * t)).all()


def test_trap_is_reported_and_next_launch_works():
    ptx = """
.visible .entry k(.param .u64 pout)
{
  .reg .b32 %r<3>; .reg .b64 %rd<4>; .reg .pred %p1;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %ctaid.x; setp.eq.u32 %p1, %r1, 3;
  @%p1 trap;
  mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], 1;
  ret;
}"""
    out = np.zeros(8, np.uint32)
    with pytest.raises(CudaError) as e:
        launch(ptx, "k", (8, 1, 1), (1, 1, 1), out)
    assert e.value.code == CUresult.CUDA_ERROR_LAUNCH_FAILED
    assert "block 3" in str(e.value)
    out2 = np.zeros(3, np.uint32)
    launch(ptx, "k", (3, 1, 1), (1, 1, 1), out2)
    assert (out2 == 1).all()


def test_unsupported_instruction_fails_only_its_kernel():
    ptx = """
.visible .entry good(.param .u64 pout)
{ .reg .b64 %rd1; ld.param.u64 %rd1, [pout]; st.global.u32 [%rd1], 42; ret; }
.visible .entry bad(.param .u64 pout)
{
  .reg .b64 %rd1; .reg .b32 %r<4>;
  ld.param.u64 %rd1, [pout];
  mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%r0,%r1}, {%r2}, {%r3}, {%r0,%r1};
  ret;
}"""
    out = np.zeros(1, np.uint32)
    prog = launch(ptx, "good", 1, 1, out) if False else None
    prog = load_program(HEADER + ptx, "two.ptx")
    good = prog.kernel("good")
    good.launch((1, 1, 1), (1, 1, 1), struct.pack("<Q", out.ctypes.data))
    assert out[0] == 42
    with pytest.raises(CudaError) as e:
        prog.kernel("bad").launch((1, 1, 1), (1, 1, 1), struct.pack("<Q", out.ctypes.data))
    assert "mma" in str(e.value) and "two.ptx:" in str(e.value)


def test_bad_launch_configurations():
    ptx = ".visible .entry k() { ret; }"
    prog = load_program(HEADER + ptx)
    k = prog.kernel("k")
    for grid, block in (((0, 1, 1), (1, 1, 1)), ((1, 1, 1), (1025, 1, 1)), ((1, 1, 1), (32, 32, 2)),
                        ((1, 70000, 1), (1, 1, 1)), ((1, 1, 1), (1, 1, 65))):
        with pytest.raises(CudaError) as e:
            k.launch(grid, block, b"")
        assert e.value.code == CUresult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(CudaError):
        k.launch((1, 1, 1), (1, 1, 1), b"", shared_mem=1 << 20)


def test_maxntid_above_the_device_limit_does_not_raise_it():
    """.maxntid allows 2048 threads; the device still takes at most 1024 per block."""
    k = load_program(HEADER + ".visible .entry k() .maxntid 1024, 2, 1 { ret; }").kernel("k")
    with pytest.raises(CudaError) as e:
        k.launch((1, 1, 1), (1024, 2, 1), b"")
    assert e.value.code == CUresult.CUDA_ERROR_INVALID_VALUE
    assert k.max_threads_per_block == 1024
    k.launch((1, 1, 1), (512, 2, 1), b"")


BAD_BODY = HEADER + ".visible .entry k()\n{\n  frobnicate.b32 %r1;\n}\n"


def test_malformed_ptx_reports_position_at_first_use():
    """A kernel's body is parsed at its first use (CUDA_MODULE_LOADING=LAZY, the default)."""
    prog = load_program(BAD_BODY, "bad.ptx")
    with pytest.raises(CudaError) as e:
        prog.kernel("k").launch((1, 1, 1), (1, 1, 1), b"")
    assert e.value.code == CUresult.CUDA_ERROR_INVALID_PTX
    assert "bad.ptx:6:" in str(e.value) and "frobnicate" in str(e.value)


def test_malformed_ptx_reports_position_at_load_when_eager(monkeypatch):
    monkeypatch.setenv("CUDA_MODULE_LOADING", "EAGER")
    with pytest.raises(PtxError) as e:
        load_program(BAD_BODY, "bad.ptx")
    assert e.value.line == 6


@pytest.mark.parametrize("address", [0, 16, 0x7FFF_0000_0000])
def test_wild_store_is_an_illegal_address_not_a_crash(address):
    ptx = """
.visible .entry k(.param .u64 p)
{
  .reg .b64 %rd<3>; .reg .b32 %r<2>; .reg .pred %p1;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, %ctaid.x; setp.ne.u32 %p1, %r1, 5;
  @%p1 bra OK;
  st.global.u32 [%rd1], 1;
OK:
  ret;
}"""
    with pytest.raises(CudaError) as e:
        launch(ptx, "k", (8, 1, 1), (32, 1, 1), address)
    assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    assert "block 5" in str(e.value) and f"0x{address:x}" in str(e.value)
    out = np.zeros(1, np.uint32)
    launch(ptx, "k", (1, 1, 1), (1, 1, 1), out)    # the process and the next launch are fine


def test_faults_stay_illegal_addresses_after_a_library_takes_the_signal():
    """A library that installs its own SIGSEGV handler after anycuda's (PoCL's LLVM does, one
    that resets to the default action as it is entered: two workers faulting at once killed
    the process) does not keep it over a launch: every block faults, on both workers, and the
    launch fails as a GPU's would, each time."""
    import ctypes
    import signal
    ptx = """
.visible .entry k(.param .u64 p)
{
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [p];
  st.global.u32 [%rd1], 1;
  ret;
}"""
    out = np.zeros(1, np.uint32)
    launch(ptx, "k", (1, 1, 1), (1, 1, 1), out)           # (anycuda's handler installed)
    libc = ctypes.CDLL(None)
    asked = ctypes.create_string_buffer(256)
    libc.sigaction(int(signal.SIGSEGV), None, asked)
    ours = bytes(asked.raw)
    try:
        for _ in range(3):
            signal.signal(signal.SIGSEGV, signal.SIG_DFL)   # what a library's reset leaves
            with pytest.raises(CudaError) as e:
                launch(ptx, "k", (64, 1, 1), (32, 1, 1), 16)
            assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    finally:
        libc.sigaction(int(signal.SIGSEGV), ours, None)


@pytest.mark.parametrize("body, what", [
    ("add.s32 %f1, %f1, %f1;", "%f1 is declared .f32 but used as .s32"),
    ("add.f32 %r1, %r1, %r1;", "%r1 is declared .u32 but used as .f32"),
    ("and.b32 %p1, %r1, %r1;", "%p1 is declared .pred but used as .b32"),
])
def test_operand_type_mismatch_is_a_ptx_error_at_its_line(body, what):
    ptx = (".visible .entry k()\n{\n  .reg .f32 %f1; .reg .u32 %r1; .reg .pred %p1;\n"
           f"  {body}\n  ret;\n}}\n")
    prog = load_program(HEADER + ptx, "mismatch.ptx")
    with pytest.raises(CudaError) as e:
        prog.kernel("k").launch((1, 1, 1), (1, 1, 1), b"")
    assert what in str(e.value)
    assert "mismatch.ptx:7:" in str(e.value)


def test_noinline_function_with_barrier_and_shuffle_is_inlined():
    ptx = """
.func (.param .b32 r) warp_sum(.param .b32 x)
{
  .reg .b32 %r<8>; .reg .pred %p<2>;
  ld.param.b32 %r1, [x];
  mov.u32 %r2, 16;
LOOP:
  shfl.sync.bfly.b32 %r3|%p1, %r1, %r2, 31, -1;
  add.s32 %r1, %r1, %r3;
  shr.u32 %r2, %r2, 1;
  setp.ne.u32 %p1, %r2, 0;
  @%p1 bra LOOP;
  bar.sync 0;
  st.param.b32 [r], %r1;
  ret;
}
.visible .entry k(.param .u64 pout)
{
  .reg .b32 %r<4>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x;
  { .param .b32 a; .param .b32 res;
    st.param.b32 [a], %r1;
    call.uni (res), warp_sum, (a);
    ld.param.b32 %r2, [res];
  }
  { .param .b32 a; .param .b32 res;
    st.param.b32 [a], %r2;
    call.uni (res), warp_sum, (a);
    ld.param.b32 %r3, [res];
  }
  mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], %r3;
  ret;
}"""
    out = np.zeros(64, np.uint32)
    launch(ptx, "k", (1, 1, 1), (64, 1, 1), out)
    t = np.arange(64)
    first = np.array([t[(i // 32) * 32:(i // 32) * 32 + 32].sum() for i in t])
    assert (out == first * 32).all()


RARE = """
.visible .entry rare(.param .u64 pin, .param .u64 pout)
{
  .reg .b32 %r<40>; .reg .b64 %rd<6>; .reg .pred %p<4>; .reg .f32 %f<4>;
  ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 12; add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r2, [%rd4]; ld.global.u32 %r3, [%rd4+4]; ld.global.u32 %r4, [%rd4+8];
  prmt.b32.f4e %r10, %r2, %r3, %r4;
  prmt.b32.b4e %r11, %r2, %r3, %r4;
  prmt.b32.rc8 %r12, %r2, %r3, %r4;
  prmt.b32.ecl %r13, %r2, %r3, %r4;
  prmt.b32.ecr %r14, %r2, %r3, %r4;
  prmt.b32.rc16 %r15, %r2, %r3, %r4;
  bmsk.clamp.b32 %r16, %r2, %r3;
  bmsk.wrap.b32 %r17, %r2, %r3;
  mad24.lo.u32 %r18, %r2, %r3, %r4;
  mul24.hi.s32 %r19, %r2, %r3;
  set.lt.u32.s32 %r20, %r2, %r3;
  slct.u32.s32 %r21, %r2, %r3, %r4;
  setp.ne.u32 %p3, %r1, %r1;
  setp.lt.and.s32 %p1|%p2, %r2, %r3, %p3;
  selp.u32 %r22, 1, 0, %p1;
  selp.u32 %r23, 1, 0, %p2;
  cnot.b32 %r24, %r4;
  sub.sat.s32 %r25, %r2, %r3;
  mov.b32 %f1, %r2;
  set.gtu.f32.f32 %r26, %f1, %f1;
  mul.wide.u32 %rd3, %r1, 80; add.s64 %rd5, %rd2, %rd3;
  st.global.v4.u32 [%rd5], {%r10, %r11, %r12, %r13};
  st.global.v4.u32 [%rd5+16], {%r14, %r15, %r16, %r17};
  st.global.v4.u32 [%rd5+32], {%r18, %r19, %r20, %r21};
  st.global.v4.u32 [%rd5+48], {%r22, %r23, %r24, %r25};
  st.global.v2.u32 [%rd5+64], {%r26, %r26};
  red.global.add.u32 [%rd2+72], 1;
  ret;
}"""


def _prmt_model(a, b, c, mode):
    src = [(a | (b << 32)) >> (8 * k) & 0xFF for k in range(8)]
    s = c & 3
    if mode == "f4e":
        idx = [(s + k) & 7 for k in range(4)]
    elif mode == "b4e":
        idx = [(s - k) & 7 for k in range(4)]
    elif mode == "rc8":
        idx = [s] * 4
    elif mode == "ecl":
        idx = [max(k, s) for k in range(4)]
    elif mode == "ecr":
        idx = [min(k, s) for k in range(4)]
    else:  # rc16
        idx = [(s & 1) * 2, (s & 1) * 2 + 1] * 2
    return sum(src[i] << (8 * k) for k, i in enumerate(idx))


def _bmsk_model(a, b, clamp):
    """bmsk as the PTX ISA's pseudo-code states it."""
    a1, b1 = a & 31, b & 31
    total = a1 + b1
    mask0 = (0xFFFFFFFF << a1) & 0xFFFFFFFF
    overflow = total >= 32
    if clamp:
        if a >= 32:
            mask0 = 0
        overflow = overflow or a >= 32 or b >= 32
    mask1 = 0 if overflow else (0xFFFFFFFF if b1 == 0 else (0xFFFFFFFF << total) & 0xFFFFFFFF)
    return mask0 & ~mask1 & 0xFFFFFFFF


def test_rarely_emitted_instructions(rng):
    n = 64
    vals = rng.integers(0, 2 ** 32, (n, 3), dtype=np.uint64).astype(np.uint32)
    vals[:8, 2] = np.arange(8)                 # every selector value for the prmt modes
    vals[8:16, 0] = [1, 5, 31, 32, 33, 0x105, 0, 7]   # bmsk positions around the limits
    vals[8:16, 1] = [2, 0, 1, 3, 0x102, 4, 32, 40]
    out = np.full((n, 20), 0xABABABAB, np.uint32)
    out[0, 18] = 0
    launch(RARE, "rare", (1, 1, 1), (n, 1, 1), vals, out)
    s32 = lambda v: v - (1 << 32) if v >> 31 else v
    for t in range(n):
        a, b, c = (int(v) for v in vals[t])
        sa, sb = s32(a), s32(b)
        row = [int(v) for v in out[t]]
        for k, mode in enumerate(("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")):
            assert row[k] == _prmt_model(a, b, c, mode), f"thread {t} prmt.{mode}"
        assert row[6] == _bmsk_model(a, b, clamp=True)
        assert row[7] == _bmsk_model(a, b, clamp=False)
        assert row[8] == ((a & 0xFFFFFF) * (b & 0xFFFFFF) + c) & 0xFFFFFFFF
        x24 = lambda v: (v & 0xFFFFFF) - (1 << 24 if v & 0x800000 else 0)
        assert row[9] == ((x24(a) * x24(b)) >> 16) & 0xFFFFFFFF
        assert row[10] == (0xFFFFFFFF if sa < sb else 0)
        assert row[11] == (a if s32(c) >= 0 else b)
        assert row[12] == 0 and row[13] == 0         # %p3 is false: the AND kills both results
        assert row[14] == (1 if c == 0 else 0)
        assert s32(row[15]) == max(-2 ** 31, min(2 ** 31 - 1, sa - sb))
        f = np.uint32(a).view(np.float32)
        assert row[16] == (0x3F800000 if np.isnan(f) else 0)    # an .f32 destination gets 1.0f
    assert out[0, 18] == n


def test_prmt_modes_have_a_model_for_every_selector():
    # guard against a vacuous model: the six modes differ on some selector
    results = {m: [_prmt_model(0x03020100, 0x07060504, s, m) for s in range(4)]
               for m in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")}
    assert len({tuple(v) for v in results.values()}) == 6


def test_named_barriers_producer_consumer():
    """Warp 0 produces and arrives at barrier 1; warps 1-3 wait on it and consume."""
    ptx = """
.visible .entry k(.param .u64 pout)
{
  .reg .b32 %r<10>; .reg .b64 %rd<6>; .reg .pred %p<3>;
  .shared .align 4 .b32 box[32];
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x; shr.u32 %r2, %r1, 5; and.b32 %r3, %r1, 31;
  shl.b32 %r4, %r3, 2; mov.u32 %r5, box; add.s32 %r5, %r5, %r4;
  setp.ne.u32 %p1, %r2, 0;
  @%p1 bra CONSUME;
  mul.lo.u32 %r6, %r3, %r3;
  st.shared.u32 [%r5], %r6;
  bar.arrive 1, 128;
  bra DONE;
CONSUME:
  bar.sync 1, 128;
  ld.shared.u32 %r7, [%r5];
  add.u32 %r7, %r7, %r2;
  mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], %r7;
DONE:
  ret;
}"""
    out = np.full(128, 0xFFFFFFFF, np.uint32)
    launch(ptx, "k", (2, 1, 1), (128, 1, 1), out)
    t = np.arange(128)
    assert (out[32:] == (t[32:] % 32) ** 2 + t[32:] // 32).all()
    assert (out[:32] == 0xFFFFFFFF).all()


# bar.red over a group: each thread reads its predicate from pin[round * ntid + tid] and writes
# (popc, and, or) to pout[(round * ntid + tid) * 3]; %r10 is the barrier id, %r11 the count.
_BAR_RED_ROUNDS = """
.visible .entry k(.param .u64 pin, .param .u64 pout, .param .u32 rounds)
{
  .reg .b32 %r<16>; .reg .b64 %rd<8>; .reg .pred %p<4>;
  ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout]; ld.param.u32 %r9, [rounds];
  mov.u32 %r1, %tid.x; mov.u32 %r8, %ntid.x; mov.u32 %r2, 0;
  shr.u32 %r12, %r1, 5;
  GROUP
LOOP:
  mad.lo.u32 %r3, %r2, %r8, %r1;
  mul.wide.u32 %rd3, %r3, 4; add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r4, [%rd4];
  setp.ne.u32 %p1, %r4, 0;
  bar.red.popc.u32 %r5, %r10, %r11, %p1;
  bar.red.and.pred %p2, %r10, %r11, %p1;
  bar.red.or.pred %p3, %r10, %r11, %p1;
  selp.u32 %r6, 1, 0, %p2; selp.u32 %r7, 1, 0, %p3;
  mul.wide.u32 %rd3, %r3, 12; add.s64 %rd5, %rd2, %rd3;
  st.global.u32 [%rd5], %r5; st.global.u32 [%rd5+4], %r6; st.global.u32 [%rd5+8], %r7;
  add.u32 %r2, %r2, 1;
  setp.lt.u32 %p1, %r2, %r9;
  @%p1 bra LOOP;
  ret;
}"""


def test_bar_red_with_a_count_per_group_reused_each_round(rng=np.random.default_rng()):
    """Warps 0-1 reduce at barrier 1, warps 2-3 at barrier 2 (64 threads each), round after
    round: each group gets its own popc/and/or, and each barrier is reused once it completes."""
    group = "shr.u32 %r10, %r12, 1; add.u32 %r10, %r10, 1; mov.u32 %r11, 64;"
    ptx = _BAR_RED_ROUNDS.replace("GROUP", group)
    rounds = 6
    flags = (rng.random((rounds, 128)) < [[0.5], [1.0], [0.0], [0.97], [0.03], [0.5]]).astype(np.uint32)
    flags[3, :64] = 1                     # one group all true, the other not, in the same round
    out = np.full((rounds, 128, 3), 0xDEADBEEF, np.uint32)
    launch(ptx, "k", (2, 1, 1), (128, 1, 1), flags, out, rounds)
    for g in (slice(0, 64), slice(64, 128)):
        f = flags[:, g]
        assert (out[:, g, 0] == f.sum(1, keepdims=True)).all()
        assert (out[:, g, 1] == f.all(1, keepdims=True)).all()
        assert (out[:, g, 2] == f.any(1, keepdims=True)).all()


def test_barrier_with_a_count_completes_at_its_count_and_is_reused_at_once():
    """Four warps reduce at one barrier that expects 64 threads: it completes twice, each time
    over two warps (which two is the scheduler's choice, as on a GPU; the sums are the same)."""
    ptx = _BAR_RED_ROUNDS.replace("GROUP", "mov.u32 %r10, 3; mov.u32 %r11, 64;")
    flags = (np.arange(128) % 32 < 5).astype(np.uint32)[None]
    out = np.full((1, 128, 3), 0xDEADBEEF, np.uint32)
    launch(ptx, "k", (1, 1, 1), (128, 1, 1), flags, out, 1)
    assert (out[0] == [10, 0, 1]).all()


def test_warp_with_exited_lanes_arrives_as_a_whole_warp():
    """The ISA counts a barrier's arrivals per warp: warp 1 has lanes 16-31 exited and still
    brings the count of `bar.red 1, 64` to 64 (48 threads take part)."""
    ptx = _BAR_RED_ROUNDS.replace("GROUP", "mov.u32 %r10, 1; mov.u32 %r11, 64;"
                                  "setp.ge.u32 %p1, %r1, 48; @%p1 exit;")
    flags = np.ones((1, 64), np.uint32)
    out = np.full((1, 64, 3), 0xDEADBEEF, np.uint32)
    launch(ptx, "k", (3, 1, 1), (64, 1, 1), flags, out, 1)
    assert (out[0, :48] == [48, 1, 1]).all()
    assert (out[0, 48:] == 0xDEADBEEF).all()


def test_producer_consumer_ping_pong_with_arrive_and_sync():
    """The ISA's producer/consumer pattern, round after round: warp 0 fills a buffer, arrives at
    barrier 0 and waits at barrier 1; warps 1-2 wait at barrier 0, read, and arrive at barrier 1
    (96 threads at each). A producer that did not wait would overwrite unread values."""
    ptx = """
.visible .entry k(.param .u64 pout, .param .u32 rounds)
{
  .reg .b32 %r<16>; .reg .b64 %rd<6>; .reg .pred %p<3>;
  .shared .align 4 .b32 box[32];
  ld.param.u64 %rd1, [pout]; ld.param.u32 %r9, [rounds];
  mov.u32 %r1, %tid.x; shr.u32 %r2, %r1, 5; and.b32 %r3, %r1, 31;
  shl.b32 %r4, %r3, 2; mov.u32 %r5, box; add.s32 %r5, %r5, %r4;
  mov.u32 %r6, 0; mov.u32 %r7, 0;
  setp.ne.u32 %p1, %r2, 0;
LOOP:
  @%p1 bra CONSUME;
  mad.lo.u32 %r8, %r6, 100, %r3;
  st.shared.u32 [%r5], %r8;
  bar.arrive 0, 96;
  bar.sync 1, 96;
  bra NEXT;
CONSUME:
  bar.sync 0, 96;
  ld.shared.u32 %r8, [%r5];
  mad.lo.u32 %r7, %r7, 3, %r8;
  bar.arrive 1, 96;
NEXT:
  add.u32 %r6, %r6, 1;
  setp.lt.u32 %p2, %r6, %r9;
  @%p2 bra LOOP;
  mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], %r7;
  ret;
}"""
    rounds = 7
    out = np.full(96, 0xFFFFFFFF, np.uint32)
    launch(ptx, "k", (2, 1, 1), (96, 1, 1), out, rounds)
    lane = np.arange(96) % 32
    want = np.zeros(96, np.int64)
    for r in range(rounds):
        want = (want * 3 + r * 100 + lane) & 0xFFFFFFFF
    assert (out[32:] == want[32:]).all()
    assert (out[:32] == 0).all()


@pytest.mark.parametrize("case", ["count_never_reached", "warp_split_across_ids", "register_id_per_warp_group",
                                  "arrive_only"])
def test_barrier_deadlock_is_a_launch_error(case):
    """What would hang a GPU ends the launch here: a barrier whose count the live warps cannot
    reach (warps that exited never arrive at a counted barrier), or a warp whose lanes wait at
    different barriers. Arrivals that never complete a barrier, with nobody waiting on it,
    are no deadlock: the threads go on and exit."""
    body = {
        "count_never_reached": "setp.ge.u32 %p1, %r1, 64; @%p1 exit; bar.sync 1, 128;",
        "warp_split_across_ids": "and.b32 %r2, %r1, 31; setp.lt.u32 %p1, %r2, 16; selp.u32 %r3, 1, 2, %p1;"
                                 "barrier.sync %r3, 32;",
        # without a count every warp must arrive at each id: warps 0-1 wait at 1, warps 2-3 at 2
        # (one bar.sync site for all threads, so the block looks uniform until the ids are read)
        "register_id_per_warp_group": "shr.b32 %r2, %r1, 6; add.u32 %r3, %r2, 1; bar.sync %r3;",
        "arrive_only": "bar.arrive 1, 128;",
    }[case]
    ptx = f"""
.visible .entry k(.param .u64 pout)
{{
  .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .pred %p<3>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x;
  {body}
  mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], %r1;
  ret;
}}"""
    out = np.zeros(128, np.uint32)
    if case == "arrive_only":
        launch(ptx, "k", (2, 1, 1), (128, 1, 1), out)
        assert (out == np.arange(128)).all()
        return
    with pytest.raises(CudaError) as e:
        launch(ptx, "k", (4, 1, 1), (128, 1, 1), out)
    assert e.value.code == CUresult.CUDA_ERROR_LAUNCH_FAILED
    assert "kernel k, block" in str(e.value) and "barrier deadlock" in str(e.value)


def test_barrier_deadlock_names_its_block():
    """Only block 3 of 6 deadlocks (its threads wait for a count that its live warps cannot
    reach): the error names that block, though the kernel has no calls and its threads'
    frames are reused from earlier blocks."""
    ptx = """
.visible .entry k(.param .u64 pout)
{
  .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .pred %p<3>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x; mov.u32 %r4, %ctaid.x;
  setp.eq.u32 %p2, %r4, 3; setp.ge.u32 %p1, %r1, 64; and.pred %p1, %p1, %p2;
  @%p1 exit;
  bar.sync 0;
  mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], %r1;
  bar.sync 1, 128;
  ret;
}"""
    out = np.zeros(128, np.uint32)
    with pytest.raises(CudaError) as e:
        launch(ptx, "k", (6, 1, 1), (128, 1, 1), out)
    assert "kernel k, block 3" in str(e.value) and "barrier deadlock" in str(e.value)


def test_ldu_isspacep_smid_and_approximate_functions():
    ptx = """
.visible .entry k(.param .u64 pin, .param .u64 pout)
{
  .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<3>; .reg .f32 %f<6>;
  .shared .align 4 .b32 s[4];
  ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout];
  ldu.global.f32 %f1, [%rd1];
  tanh.approx.f32 %f2, %f1;
  ex2.approx.ftz.f32 %f3, %f1;
  lg2.approx.f32 %f4, %f1;
  mov.u64 %rd3, s; cvta.shared.u64 %rd4, %rd3;
  isspacep.shared %p1, %rd4;
  isspacep.shared %p2, %rd2;
  selp.u32 %r1, 1, 0, %p1; selp.u32 %r2, 1, 0, %p2;
  mov.u32 %r3, %smid; mov.u32 %r4, %nsmid;
  setp.lt.u32 %p1, %r3, %r4; selp.u32 %r5, 1, 0, %p1;
  cvta.to.shared.u64 %rd5, %rd4;
  cvt.u32.u64 %r6, %rd5;
  st.global.f32 [%rd2], %f2; st.global.f32 [%rd2+4], %f3; st.global.f32 [%rd2+8], %f4;
  st.global.u32 [%rd2+12], %r1; st.global.u32 [%rd2+16], %r2; st.global.u32 [%rd2+20], %r5;
  st.global.u32 [%rd2+24], %r6;
  ret;
}"""
    x = np.array([0.75], np.float32)
    out = np.zeros(7, np.uint32)
    launch(ptx, "k", (1, 1, 1), (1, 1, 1), x, out)
    f = out[:3].view(np.float32)
    assert abs(f[0] - np.tanh(0.75)) < 2 ** -10.987 * 2      # PTX: max relative error 2^-10.987
    assert abs(f[1] - 2 ** 0.75) < 2e-6 and abs(f[2] - np.log2(0.75)) < 2e-6
    assert list(out[3:]) == [1, 0, 1, 0]


def test_shared_atomics_of_every_lowering_form(rng):
    """Atomics on the block's own shared memory are plain read-modify-writes (a block runs on
    one CPU thread): float min/max, exchange, compare-and-swap, inc/dec and f16x2 add on
    .shared, each with the old value returned to every thread, checked against a serial model
    in thread order."""
    ptx = """
.visible .entry k(.param .u64 pin, .param .u64 pout, .param .u64 pold)
{
  .reg .b32 %r<16>; .reg .b64 %rd<8>; .reg .f32 %f<8>;
  .shared .align 8 .b32 s[8];
  ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout]; ld.param.u64 %rd5, [pold];
  mov.u32 %r1, %tid.x;
  setp.eq.u32 %p1, %r1, 0;
  @!%p1 bra START;
  mov.f32 %f1, 0f00000000; st.shared.f32 [s], %f1; st.shared.f32 [s+4], %f1;
  st.shared.u32 [s+8], 0; st.shared.u32 [s+12], 0; st.shared.u32 [s+16], 5;
  st.shared.u32 [s+20], 0; st.shared.u32 [s+24], 0;
START:
  bar.sync 0;
  mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f2, [%rd4];
  atom.shared.max.f32 %f3, [s], %f2;
  atom.shared.min.f32 %f4, [s+4], %f2;
  atom.shared.exch.b32 %r2, [s+8], %r1;
  atom.shared.cas.b32 %r3, [s+12], %r1, %r1;
  add.u32 %r4, %r3, 0;
  atom.shared.inc.u32 %r5, [s+16], 7;
  atom.shared.dec.u32 %r6, [s+20], 3;
  mov.b32 %r7, 0x3c003c00;
  atom.shared.add.noftz.f16x2 %r8, [s+24], %r7;
  mul.wide.u32 %rd6, %r1, 28; add.s64 %rd7, %rd5, %rd6;
  st.global.f32 [%rd7], %f3; st.global.f32 [%rd7+4], %f4; st.global.u32 [%rd7+8], %r2;
  st.global.u32 [%rd7+12], %r4; st.global.u32 [%rd7+16], %r5; st.global.u32 [%rd7+20], %r6;
  st.global.u32 [%rd7+24], %r8;
  bar.sync 0;
  @!%p1 bra DONE;
  ld.shared.v4.u32 {%r9, %r10, %r11, %r12}, [s];
  st.global.v4.u32 [%rd2], {%r9, %r10, %r11, %r12};
  ld.shared.v2.u32 {%r13, %r14}, [s+16]; st.global.v2.u32 [%rd2+16], {%r13, %r14};
  ld.shared.u32 %r15, [s+24]; st.global.u32 [%rd2+24], %r15;
DONE:
  ret;
}""".replace(".reg .f32 %f<8>;", ".reg .f32 %f<8>; .reg .pred %p<2>;")
    n = 64
    x = rng.standard_normal(n).astype(np.float32)
    out = np.full(7, 0xCDCDCDCD, np.uint32)
    old = np.full((n, 7), 0xCDCDCDCD, np.uint32)
    launch(ptx, "k", (1, 1, 1), (n, 1, 1), x, out, old)
    # serial model: threads in order 0..n-1 (a block's threads run one after another here,
    # and any order is valid on a GPU, so only order-free facts are checked per thread)
    f32 = lambda v: np.float32(v).view(np.uint32)
    assert out[0] == f32(max(0.0, x.max())) and out[1] == f32(min(0.0, x.min()))
    assert out[3] == 0                                           # cas(0, t, t) never changes 0
    inc, dec = 5, 0
    for _ in range(n):
        inc = 0 if inc >= 7 else inc + 1
        dec = 3 if dec == 0 or dec > 3 else dec - 1
    assert out[4] == inc and out[5] == dec
    assert out[6] == 0x54005400                                  # 64.0 in both halves
    # exchange: the old values and the final one are the initial 0 and every thread's index
    assert sorted(old[:, 2].tolist() + [int(out[2])]) == sorted([0] + list(range(n)))
    assert (old[:, 3] == 0).all()
    assert sorted(old[:, 6] & 0xFFFF) == sorted(int(np.float16(k).view(np.uint16)) for k in range(n))
    assert old[:, 6].tolist() == [(h << 16) | h for h in (old[:, 6] & 0xFFFF).tolist()]


def test_grid_stride_loop_with_uneven_trip_counts_then_barrier(rng=np.random.default_rng()):
    """A grid-stride loop runs in lockstep across a block (a yield at its back edge): threads
    that leave it at different iterations, or never enter it, meet at a barrier after it."""
    from anycuda.compiler.analysis import gridstride
    from anycuda.ptx import parse
    ptx = """
.visible .entry k(.param .u64 pin, .param .u64 pout, .param .u64 pblk, .param .u32 pn)
{
  .reg .b32 %r<20>; .reg .b64 %rd<12>; .reg .pred %p<4>;
  .shared .align 4 .b32 s[128];
  ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout]; ld.param.u64 %rd3, [pblk];
  ld.param.u32 %r1, [pn];
  mov.u32 %r2, %tid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %ctaid.x; mov.u32 %r5, %nctaid.x;
  mad.lo.s32 %r6, %r4, %r3, %r2;
  mov.u32 %r7, %r6;
  mov.u32 %r8, 0; mov.u32 %r9, 0;
  setp.ge.s32 %p1, %r7, %r1;
  @%p1 bra AFTER;
  mul.lo.s32 %r10, %r5, %r3;
LOOP:
  mul.wide.s32 %rd4, %r7, 4; add.s64 %rd5, %rd1, %rd4;
  ld.global.u32 %r11, [%rd5];
  add.s32 %r8, %r8, %r11;
  add.s32 %r9, %r9, 1;
  add.s32 %r7, %r7, %r10;
  setp.lt.s32 %p2, %r7, %r1;
  @%p2 bra LOOP;
AFTER:
  shl.b32 %r12, %r2, 2; mov.u32 %r13, s; add.s32 %r14, %r13, %r12;
  st.shared.u32 [%r14], %r8;
  mul.wide.s32 %rd6, %r6, 8; add.s64 %rd7, %rd2, %rd6;
  st.global.v2.u32 [%rd7], {%r8, %r9};
  bar.sync 0;
  setp.ne.u32 %p3, %r2, 0;
  @%p3 bra DONE;
  mov.u32 %r15, 0; mov.u32 %r16, 0;
SUM:
  shl.b32 %r17, %r16, 2; add.s32 %r18, %r13, %r17;
  ld.shared.u32 %r19, [%r18];
  add.s32 %r15, %r15, %r19;
  add.s32 %r16, %r16, 1;
  setp.lt.u32 %p3, %r16, %r3;
  @%p3 bra SUM;
  mul.wide.u32 %rd8, %r4, 4; add.s64 %rd9, %rd3, %rd8;
  st.global.u32 [%rd9], %r15;
DONE:
  ret;
}"""
    fn = next(f for f in parse(HEADER + ptx).functions if f.is_kernel)
    # the grid-stride loop gets a yield; the counted loop over shared memory does not
    assert len(gridstride.grid_stride_yields(fn.body, {}, [p.name for p in fn.params])) == 1
    grid, block = 3, 96
    for n in (1000, 100, 0, 3 * 96 * 4):
        x = rng.integers(0, 1000, max(n, 1)).astype(np.int32)
        out = np.full((grid * block, 2), -1, np.int32)
        blk = np.full(grid, -1, np.int32)
        launch(ptx, "k", (grid, 1, 1), (block, 1, 1), x, out, blk, n)
        g = np.arange(grid * block)
        want = np.array([x[t:n:grid * block].sum() for t in g], np.int32)
        trips = np.array([len(range(t, n, grid * block)) for t in g], np.int32)
        assert (out[:, 0] == want).all() and (out[:, 1] == trips).all()
        assert (blk == want.reshape(grid, block).sum(axis=1)).all()
