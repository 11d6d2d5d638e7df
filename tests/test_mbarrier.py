"""mbarrier objects (compiler/ops/mbarrier.py) and the scheduler's waits after a failed test
(compiler/simt/mbarrierwaits.py), on hand-written PTX: the counts and phases of one object
step by step, tokens of an earlier phase, parity waits, arrive_drop, transaction counts,
threads that spin on a phase that later threads of their block complete (blocks that are
not whole warps, several blocks), a loop that arrives itself between tests, deadlocks and
misplaced objects as launch errors; and the ordering instructions around them (fence.proxy,
fence.mbarrier_init, setmaxnreg, griddepcontrol) and elect.sync.
"""
from __future__ import annotations

import numpy as np
import pytest

from anycuda.compiler.lowering.module import ModuleLowering
from anycuda.compiler.pipeline import block_program_ir
from anycuda.compiler.vector import blockprograms
from anycuda.ptx import PtxError, parse
from anycuda.runtime.errors import CudaError, CUresult
from conformance import ptx_launcher

HEADER = ".version 8.3\n.target sm_90\n.address_size 64\n"
POISON = 0xCDCDCDCD


launch = ptx_launcher(HEADER, "mbarrier.ptx")


def poisoned(n, dtype=np.uint32):
    return np.full(n, POISON, dtype)


# One thread walks an object through its phases, storing after each step what the ISA says
# it must see: out[i] in the order of the comments.
STEPS = """
.visible .entry steps(.param .u64 pout)
{
  .reg .b32 %r<8>; .reg .b64 %rd<16>; .reg .pred %p<4>;
  .shared .align 8 .b64 bar;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, bar;
  mbarrier.init.shared.b64 [%r1], 2;
  fence.mbarrier_init.release.cluster;
  mbarrier.arrive.shared.b64 %rd2, [%r1];              // token of phase 0, 2 pending before
  mbarrier.pending_count.b64 %r2, %rd2;
  st.global.u32 [%rd1], %r2;                           // 0: 2
  mbarrier.test_wait.shared.b64 %p1, [%r1], %rd2;
  selp.u32 %r3, 1, 0, %p1; st.global.u32 [%rd1+4], %r3;     // 1: phase 0 not complete
  mbarrier.arrive.release.cta.shared::cta.b64 %rd3, [%r1];   // completes phase 0
  mbarrier.pending_count.b64 %r2, %rd3;
  st.global.u32 [%rd1+8], %r2;                         // 2: 1 pending before it
  mbarrier.test_wait.acquire.cta.shared.b64 %p1, [%r1], %rd2;
  selp.u32 %r3, 1, 0, %p1; st.global.u32 [%rd1+12], %r3;    // 3: the old token: complete
  mbarrier.test_wait.parity.shared.b64 %p1, [%r1], 0;
  selp.u32 %r3, 1, 0, %p1; st.global.u32 [%rd1+16], %r3;    // 4: parity 0 complete
  mbarrier.try_wait.parity.shared.b64 %p1, [%r1], 1;
  selp.u32 %r3, 1, 0, %p1; st.global.u32 [%rd1+20], %r3;    // 5: parity 1 (phase 1) not
  mbarrier.arrive.shared.b64 %rd4, [%r1], 2;           // a count of 2 completes phase 1
  mbarrier.try_wait.parity.relaxed.cta.shared.b64 %p1, [%r1], 1, 1000;
  selp.u32 %r3, 1, 0, %p1; st.global.u32 [%rd1+24], %r3;    // 6: now it is
  mbarrier.try_wait.shared.b64 %p1, [%r1], %rd4, 500;
  selp.u32 %r3, 1, 0, %p1; st.global.u32 [%rd1+28], %r3;    // 7: and by token
  mbarrier.arrive_drop.shared.b64 %rd5, [%r1];         // phase 2: one arrives and leaves
  mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r1];   // completes phase 2
  mbarrier.arrive.shared.b64 %rd7, [%r1];              // phase 3 expects one: completes it
  mbarrier.pending_count.b64 %r2, %rd7;
  st.global.u32 [%rd1+32], %r2;                        // 8: 1
  mbarrier.test_wait.shared.b64 %p1, [%r1], %rd7;
  selp.u32 %r3, 1, 0, %p1; st.global.u32 [%rd1+36], %r3;    // 9: complete
  mbarrier.arrive.expect_tx.shared.b64 %rd8, [%r1], 24;     // phase 4: arrived, 24 bytes due
  mbarrier.test_wait.shared.b64 %p1, [%r1], %rd8;
  selp.u32 %r3, 1, 0, %p1; st.global.u32 [%rd1+40], %r3;    // 10: not complete
  mbarrier.complete_tx.shared.b64 [%r1], 16;
  mbarrier.expect_tx.relaxed.cta.shared.b64 [%r1], 8;
  mbarrier.complete_tx.shared.b64 [%r1], 8;
  mbarrier.test_wait.shared.b64 %p1, [%r1], %rd8;
  selp.u32 %r3, 1, 0, %p1; st.global.u32 [%rd1+44], %r3;    // 11: 8 bytes still due
  mbarrier.complete_tx.shared.b64 [%r1], 8;
  mbarrier.test_wait.shared.b64 %p1, [%r1], %rd8;
  selp.u32 %r3, 1, 0, %p1; st.global.u32 [%rd1+48], %r3;    // 12: complete
  mbarrier.inval.shared.b64 [%r1];
  ret;
}
"""


def test_one_object_through_its_phases():
    out = poisoned(13)
    launch(STEPS, "steps", (1, 1, 1), (1, 1, 1), out)
    assert out.tolist() == [2, 0, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1]


# Thread T-1 (the last to run in a round) fills data[] and arrives; every other thread spins
# in a try_wait (or test_wait) loop before it reads data[]: each must let the others run.
SPIN = """
.visible .entry spin(.param .u64 pout, .param .u32 use_test)
{
  .reg .b32 %r<16>; .reg .b64 %rd<8>; .reg .pred %p<6>;
  .shared .align 8 .b64 bar;
  .shared .align 4 .b32 data[1024];
  ld.param.u64 %rd1, [pout];
  ld.param.u32 %r9, [use_test];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ntid.x; mov.u32 %r10, %ctaid.x;
  mov.u32 %r3, bar;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra INITED;
  mbarrier.init.shared.b64 [%r3], 1;
INITED:
  bar.sync 0;
  add.u32 %r4, %r2, -1;
  setp.ne.u32 %p2, %r1, %r4;
  @%p2 bra WAIT;
  // the producer: data[i] = 1000 * block + i, then one arrival
  mov.u32 %r5, 0;
FILL:
  mad.lo.u32 %r6, %r10, 1000, %r5;
  mov.u32 %r7, data; mad.lo.u32 %r7, %r5, 4, %r7;
  st.shared.u32 [%r7], %r6;
  add.u32 %r5, %r5, 1;
  setp.lt.u32 %p3, %r5, %r2;
  @%p3 bra FILL;
  mbarrier.arrive.shared.b64 %rd2, [%r3];
  bra READ;
WAIT:
  setp.ne.u32 %p5, %r9, 0;
  @%p5 bra TEST;
SPIN1:
  mbarrier.try_wait.parity.shared.b64 %p4, [%r3], 0;
  @!%p4 bra SPIN1;
  bra READ;
TEST:
  mbarrier.test_wait.parity.shared.b64 %p4, [%r3], 0;
  @!%p4 bra TEST;
READ:
  sub.u32 %r11, %r4, %r1;
  mov.u32 %r7, data; mad.lo.u32 %r7, %r11, 4, %r7;
  ld.shared.u32 %r12, [%r7];
  mad.lo.u32 %r13, %r10, %r2, %r1;
  mul.wide.u32 %rd3, %r13, 4; add.s64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r12;
  ret;
}
"""


@pytest.mark.parametrize("block", [1, 2, 33, 100, 256])
@pytest.mark.parametrize("use_test", [0, 1])
def test_spinning_threads_let_the_producer_run(block, use_test):
    grid = 3
    out = poisoned(grid * block)
    launch(SPIN, "spin", (grid, 1, 1), (block, 1, 1), out, use_test)
    t = np.arange(block)
    want = (1000 * np.arange(grid)[:, None] + (block - 1 - t)[None, :]).ravel()
    assert out.tolist() == want.tolist()


# Every thread arrives and then waits on the same phase; then a second round on the same
# object (the next phase, waited on by token); the last arrival of a phase is the last thread.
ROUNDS = """
.visible .entry rounds(.param .u64 pout)
{
  .reg .b32 %r<16>; .reg .b64 %rd<8>; .reg .pred %p<4>;
  .shared .align 8 .b64 bar;
  .shared .align 4 .b32 slot[1024];
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ntid.x;
  mov.u32 %r3, bar;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared.b64 [%r3], %r2;
  bar.sync 0;
  mov.u32 %r8, 0;                       // the sum of every thread's slot, over two rounds
  mov.u32 %r9, 0;
ROUND:
  mov.u32 %r4, slot; mad.lo.u32 %r4, %r1, 4, %r4;
  add.u32 %r5, %r1, %r9; mul.lo.u32 %r5, %r5, 3;
  st.shared.u32 [%r4], %r5;
  mbarrier.arrive.shared.b64 %rd2, [%r3];
WAIT:
  mbarrier.try_wait.shared.b64 %p2, [%r3], %rd2;
  @!%p2 bra WAIT;
  mov.u32 %r6, 0;
SUM:
  mov.u32 %r4, slot; mad.lo.u32 %r4, %r6, 4, %r4;
  ld.shared.u32 %r7, [%r4];
  add.u32 %r8, %r8, %r7;
  add.u32 %r6, %r6, 1;
  setp.lt.u32 %p3, %r6, %r2;
  @%p3 bra SUM;
  bar.sync 0;                           // every sum read before the slots change
  add.u32 %r9, %r9, 1;
  setp.lt.u32 %p3, %r9, 2;
  @%p3 bra ROUND;
  mov.u32 %r10, %ctaid.x;
  mad.lo.u32 %r11, %r10, %r2, %r1;
  mul.wide.u32 %rd3, %r11, 4; add.s64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r8;
  ret;
}
"""


@pytest.mark.parametrize("block", [1, 31, 64, 97])
def test_arrive_then_wait_in_rounds(block):
    grid = 2
    out = poisoned(grid * block)
    launch(ROUNDS, "rounds", (grid, 1, 1), (block, 1, 1), out)
    t = np.arange(block)
    want = int((3 * t).sum() + (3 * (t + 1)).sum())
    assert out.tolist() == [want] * (grid * block)


# One thread arrives itself between failed tests: a forced round must let it go on.
SELF = """
.visible .entry self_arrive(.param .u64 pout)
{
  .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<4>;
  .shared .align 8 .b64 bar;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, bar;
  mbarrier.init.shared.b64 [%r1], 5;
  mov.u32 %r2, 0;
  mbarrier.arrive.shared.b64 %rd2, [%r1];
LOOP:
  mbarrier.test_wait.shared.b64 %p1, [%r1], %rd2;
  @%p1 bra DONE;
  add.u32 %r2, %r2, 1;
  mbarrier.arrive.shared.b64 %rd3, [%r1];
  bra LOOP;
DONE:
  st.global.u32 [%rd1], %r2;
  ret;
}
"""


def test_a_thread_that_arrives_between_its_tests():
    out = poisoned(1)
    launch(SELF, "self_arrive", (1, 1, 1), (1, 1, 1), out)
    assert out.tolist() == [4]


# try_wait under a guard, in a device function that is inlined into its kernel
GUARDED = """
.func wait_on(.param .b32 addr)
{
  .reg .b32 %r<4>; .reg .pred %p<4>;
  ld.param.b32 %r1, [addr];
W:
  mbarrier.try_wait.parity.shared.b64 %p1, [%r1], 0;
  @!%p1 bra W;
  ret;
}

.visible .entry guarded(.param .u64 pout)
{
  .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<4>;
  .shared .align 8 .b64 bar;
  .shared .align 4 .b32 value;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x; mov.u32 %r3, bar;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared.b64 [%r3], 1;
  bar.sync 0;
  mov.pred %p3, 0;
  setp.eq.u32 %p2, %r1, 40;
  @%p2 bra PRODUCE;
  @%p2 mbarrier.try_wait.parity.shared.b64 %p3, [%r3], 0;   // never runs: %p3 stays false
  { .param .b32 a; st.param.b32 [a], %r3; call.uni wait_on, (a); }
  bra READ;
PRODUCE:
  st.shared.u32 [value], 77;
  mbarrier.arrive.shared.b64 %rd2, [%r3];
READ:
  ld.shared.u32 %r4, [value];
  selp.u32 %r5, 1000, 0, %p3;
  add.u32 %r4, %r4, %r5;
  mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r4;
  ret;
}
"""


def test_guarded_test_and_a_wait_in_a_device_function():
    out = poisoned(41)
    launch(GUARDED, "guarded", (1, 1, 1), (41, 1, 1), out)
    assert out.tolist() == [77] * 41


DEADLOCK = """
.visible .entry deadlock(.param .u64 pout)
{
  .reg .b32 %r<4>; .reg .b64 %rd<4>; .reg .pred %p<4>;
  .shared .align 8 .b64 bar;
  mov.u32 %r1, bar;
  mov.u32 %r2, %ntid.x; add.u32 %r2, %r2, 1;
  mbarrier.init.shared.b64 [%r1], %r2;         // one arrival more than the block has threads
  mbarrier.arrive.shared.b64 %rd1, [%r1];
W:
  mbarrier.try_wait.shared.b64 %p1, [%r1], %rd1;
  @!%p1 bra W;
  ret;
}
"""


@pytest.mark.parametrize("block", [1, 40])
def test_a_phase_that_cannot_complete_is_a_launch_error(block):
    out = poisoned(1)
    with pytest.raises(CudaError) as e:
        launch(DEADLOCK, "deadlock", (2, 1, 1), (block, 1, 1), out)
    assert e.value.code == CUresult.CUDA_ERROR_LAUNCH_FAILED and "mbarrier deadlock" in str(e.value)


MISPLACED = """
.visible .entry misplaced(.param .u64 pout, .param .u32 how)
{
  .reg .b32 %r<4>; .reg .b64 %rd<4>; .reg .pred %p<4>;
  .shared .align 8 .b64 bar[2];
  ld.param.u64 %rd1, [pout];
  ld.param.u32 %r1, [how];
  setp.eq.u32 %p1, %r1, 0;
  @%p1 mbarrier.arrive.b64 %rd2, [%rd1];              // a generic address in global memory
  setp.eq.u32 %p1, %r1, 1;
  mov.u32 %r2, bar;
  @%p1 mbarrier.init.shared.b64 [%r2+4], 1;          // misaligned
  setp.eq.u32 %p1, %r1, 2;
  @%p1 mbarrier.init.shared.b64 [%r2+65536], 1;      // past the block's shared memory
  ret;
}
"""


@pytest.mark.parametrize("how", [0, 1, 2])
def test_an_object_outside_shared_memory_is_an_illegal_address(how):
    out = poisoned(4)
    with pytest.raises(CudaError) as e:
        launch(MISPLACED, "misplaced", (1, 1, 1), (1, 1, 1), out, how)
    assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS


def test_a_generic_address_in_shared_memory_is_the_object():
    ptx = """
.visible .entry generic(.param .u64 pout)
{
  .reg .b32 %r<4>; .reg .b64 %rd<8>; .reg .pred %p<4>;
  .shared .align 8 .b64 bar;
  ld.param.u64 %rd1, [pout];
  mov.u64 %rd2, bar; cvta.shared.u64 %rd3, %rd2;
  mbarrier.init.b64 [%rd3], 1;
  mbarrier.arrive.b64 %rd4, [%rd3];
  mbarrier.test_wait.b64 %p1, [%rd3], %rd4;
  selp.u32 %r1, 1, 0, %p1;
  st.global.u32 [%rd1], %r1;
  ret;
}
"""
    out = poisoned(1)
    launch(ptx, "generic", (1, 1, 1), (1, 1, 1), out)
    assert out.tolist() == [1]


def test_fences_and_hints_around_mbarriers():
    ptx = """
.visible .entry hints(.param .u64 pout)
{
  .reg .b32 %r<4>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [pout];
  griddepcontrol.wait;
  setmaxnreg.inc.sync.aligned.u32 232;
  fence.proxy.async;
  fence.proxy.async.shared::cta;
  fence.proxy.async.global;
  fence.mbarrier_init.release.cluster;
  setmaxnreg.dec.sync.aligned.u32 40;
  st.global.u32 [%rd1], 7;
  griddepcontrol.launch_dependents;
  ret;
}
"""
    out = poisoned(1)
    launch(ptx, "hints", (1, 1, 1), (1, 1, 1), out)
    assert out.tolist() == [7]


ELECT = """
.visible .entry elect(.param .u64 pout, .param .u32 mask)
{
  .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .pred %p<4>;
  ld.param.u64 %rd1, [pout];
  ld.param.u32 %r1, [mask];
  mov.u32 %r2, %tid.x; mov.u32 %r3, %laneid;
  mul.wide.u32 %rd2, %r2, 8; add.s64 %rd3, %rd1, %rd2;
  shr.u32 %r4, %r1, %r3; and.b32 %r4, %r4, 1;
  setp.eq.u32 %p1, %r4, 0;
  @%p1 bra DONE;                        // only the members take part
  elect.sync %r5|%p2, %r1;
  selp.u32 %r6, 1, 0, %p2;
  st.global.v2.u32 [%rd3], {%r5, %r6};
DONE:
  ret;
}
"""


@pytest.mark.parametrize("block, mask", [(64, 0xFFFFFFFF), (70, 0xFFFFFFFF), (96, 0xF0F0F0F0), (45, 0x00010200)])
def test_elect_sync_picks_the_lowest_member(block, mask):
    out = poisoned(2 * block)
    launch(ELECT, "elect", (2, 1, 1), (block, 1, 1), out, mask)
    got = out.reshape(block, 2)
    for t in range(block):
        lane, first = t % 32, t - t % 32
        members = [u - first for u in range(first, min(first + 32, block)) if mask >> (u - first) & 1]
        if not mask >> lane & 1:
            assert got[t].tolist() == [POISON, POISON]
        else:
            assert got[t].tolist() == [members[0], int(lane == members[0])]


def test_an_unknown_mbarrier_modifier_is_refused_by_name():
    ptx = """
.visible .entry bad()
{
  .reg .b64 %rd<2>; .shared .align 8 .b64 bar;
  mbarrier.arrive.noComplete.shared.b64 %rd1, [bar], 1;
  ret;
}
"""
    with pytest.raises((CudaError, PtxError)) as e:
        launch(ptx, "bad", (1, 1, 1), (1, 1, 1))
    assert "noComplete" in str(e.value)


@pytest.mark.parametrize("ptx, name", [(SPIN, "spin"), (ROUNDS, "rounds"), (STEPS, "steps")], ids=["spin", "rounds", "steps"])
def test_the_vector_paths_leave_mbarriers_to_the_scalar_path(ptx, name):
    """No warp region holds an mbarrier instruction or its wait (their allow-lists do not
    name them: a region that would reach one is not made), nor does a block program."""
    module = ModuleLowering(parse(HEADER + ptx, "m.ptx"), "m.ptx").lower().mod
    regions = [fn for fn in module.functions if ".region" in fn.name and [blk.name for blk in fn.blocks] != ["unused"]]
    assert regions == []
    with pytest.raises(blockprograms.NotVectorisable):
        block_program_ir(HEADER + ptx, "m.ptx", name, 64)


@pytest.mark.parametrize("body, opcode", [("mbarrier.init.shared.b64 [bar];", "mbarrier.init"),
                                          ("mbarrier.try_wait.shared.b64 %p1, [bar];", "mbarrier.try_wait"),
                                          ("elect.sync %r1|%p1;", "elect")])
def test_a_wrong_operand_count_is_refused_with_its_line(body, opcode):
    ptx = f"""
.visible .entry bad()
{{
  .reg .b32 %r<2>; .reg .pred %p<2>; .shared .align 8 .b64 bar;
  {body}
  ret;
}}
"""
    with pytest.raises((CudaError, PtxError)) as e:
        launch(ptx, "bad", (1, 1, 1), (1, 1, 1))
    assert f"'{opcode}' takes" in str(e.value) and "mbarrier.ptx:8:" in str(e.value), str(e.value)


# Warp 0 meets at a named barrier of its own (bar.sync 1, 32) before it produces, while the
# other warps already spin on the phase it will complete: a barrier that completes with
# waiters about is progress, not a deadlock. With `stuck`, warp 0 waits at bar.sync 0 for the
# spinning warps instead: a deadlock on a GPU too, a launch error here.
NAMED = """
.visible .entry named(.param .u64 pout, .param .u32 stuck)
{
  .reg .b32 %r<16>; .reg .b64 %rd<8>; .reg .pred %p<6>;
  .shared .align 8 .b64 bar;
  .shared .align 4 .b32 value;
  ld.param.u64 %rd1, [pout]; ld.param.u32 %r9, [stuck];
  mov.u32 %r1, %tid.x; mov.u32 %r3, bar;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared.b64 [%r3], 32;
  bar.sync 0;
  setp.ge.u32 %p2, %r1, 32;
  @%p2 bra WAIT;
  setp.ne.u32 %p4, %r9, 0;
  @%p4 bar.sync 0;
  bar.sync 1, 32;
  @%p1 st.shared.u32 [value], 99;
  bar.sync 1, 32;
  mbarrier.arrive.shared.b64 %rd2, [%r3];
WAIT:
  mbarrier.try_wait.parity.shared.b64 %p3, [%r3], 0;
  @!%p3 bra WAIT;
  ld.shared.u32 %r4, [value];
  mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r4;
  ret;
}
"""


@pytest.mark.parametrize("block", [64, 96, 100])
def test_a_named_barrier_among_spinning_warps(block):
    out = poisoned(block)
    launch(NAMED, "named", (2, 1, 1), (block, 1, 1), out, 0)
    assert out.tolist() == [99] * block


def test_a_barrier_that_waits_for_spinning_warps_is_a_deadlock():
    out = poisoned(64)
    with pytest.raises(CudaError) as e:
        launch(NAMED, "named", (1, 1, 1), (64, 1, 1), out, 1)
    assert e.value.code == CUresult.CUDA_ERROR_LAUNCH_FAILED and "mbarrier deadlock" in str(e.value)
