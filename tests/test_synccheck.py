"""synccheck (compiler/simt/synccheck.py, runtime/syncreport.py): our own kernels that misuse
barriers and warp collectives, in PTX through the Python API and in CUDA C++ built by nvcc with
-lineinfo through `anycuda run --sanitize=synccheck`. Each report is checked for its kind, its
kernel and line, the thread and block it names, the other thread involved and its count; the
correct kernels (uniform barriers, full-mask shuffles, partial masks taken by exactly the lanes
they name) report nothing and give numpy's results. Block sizes, grids and the lanes that part
are drawn at random; anycuda runs a block's threads in index order, so the first thread found
waiting is the lowest one."""
import re
import subprocess
import sys

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.lowering.module import ModuleLowering
from anycuda.compiler.ops import memcheck
from anycuda.ptx.parser import parse
from anycuda.runtime.errors import CudaError, CUresult
from test_sanitizer import _run, bug_lines, built

HEADER = ".version 7.0\n.target sm_70\n.address_size 64\n"

REPORT = re.compile(
    r"========= Barrier error detected\. (?P<kind>Divergent thread\(s\) in block|Divergent thread\(s\) in warp|"
    r"Invalid arguments)\n"
    r"=========     at (?P<function>.+?)\+0x[0-9a-f]+ in (?P<where>\S+)\n"
    r"=========     by thread \((?P<tid>[\d,]+)\) in block \((?P<block>[\d,]+)\)\n"
    r"=========     (?P<detail>[^\n]+)\n")


def reports(text: str) -> list:
    out = []
    for m in REPORT.finditer(text):
        r = m.groupdict()
        r["tid"] = tuple(int(v) for v in r["tid"].split(","))
        r["block"] = tuple(int(v) for v in r["block"].split(","))
        out.append(r)
    return out


@pytest.fixture
def synccheck(monkeypatch):
    monkeypatch.setenv("ANYCUDA_SANITIZE", "synccheck")
    monkeypatch.setenv("ANYCUDA_SANITIZE_PRINT_LIMIT", "100000")


# out[t] = what thread t computed (7 where it computed nothing); %r1 the linear thread index,
# %r4 its lane, %r2 the kernel's `k`, %r3 its `mask`; BODY in between, its lines tagged `// tag`
TEMPLATE = """
.visible .entry KERNEL(.param .u64 out, .param .u32 k, .param .u32 mask)
{
  .reg .pred %p<4>; .reg .b32 %r<20>; .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out]; ld.param.u32 %r2, [k]; ld.param.u32 %r3, [mask];
  mov.u32 %r1, %tid.x; mov.u32 %r5, %tid.y; mov.u32 %r6, %ntid.x;
  mad.lo.u32 %r1, %r5, %r6, %r1;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  mov.u32 %r9, 7;
  and.b32 %r4, %r1, 31;
BODY
DONE:
  st.global.u32 [%rd3], %r9;
  ret;
}
"""


def _kernel(name: str, body: str):
    """(the kernel, {tag: 'bugs.ptx:N'} of its tagged lines)."""
    ptx = HEADER + TEMPLATE.replace("KERNEL", name).replace("BODY", body)
    lines = {m.group(1): f"bugs.ptx:{i + 1}" for i, line in enumerate(ptx.splitlines())
             for m in [re.search(r"// (\w+)$", line)] if m}
    return ac.RawModule(ptx=ptx, name="bugs.ptx").get_function(name), lines


def _launch(kernel, grid, block, k, mask=0xFFFFFFFF, shape=None):
    """out after a launch of `grid` blocks of `block` threads (as `shape` when given)."""
    out = ac.asarray(np.full(block, -1, np.int32))          # poisoned
    kernel((grid,), shape or (block,), (out, np.uint32(k), np.uint32(mask)))
    return out.get()


def _draw(rng):
    return int(rng.integers(1, 4)), 32 * int(rng.integers(2, 5))


# ---------------------------------------------------------------- barriers

EARLY_EXIT = """
  setp.ge.u32 %p1, %r1, %r2;
  @%p1 bra DONE;
  bar.sync 0; // bar
  mov.u32 %r9, 1;
"""


BARRIERS = {"bar_sync": "bar.sync 0;", "aligned": "barrier.sync.aligned 0;", "bar_red": "bar.red.popc.u32 %r9, 0, %p1;",
            "syncthreads_and": "bar.red.and.pred %p2, 0, %p1;"}


@pytest.mark.parametrize("barrier", sorted(BARRIERS))
def test_exit_before_barrier_is_block_divergence(synccheck, capsys, rng, barrier):
    grid, block = _draw(rng)
    k = int(rng.integers(1, block))
    kernel, lines = _kernel("early_exit", EARLY_EXIT.replace("bar.sync 0;", BARRIERS[barrier]))
    shape = (block,) if rng.integers(2) else (32, block // 32)       # a 2-D block names (x,y,z)
    got = _launch(kernel, grid, block, k, shape=shape)
    assert np.array_equal(got, np.where(np.arange(block) < k, 1, 7))
    rs = reports(capsys.readouterr().err)
    assert len(rs) == grid                          # once per block, each its own use of the barrier
    assert sorted(r["block"] for r in rs) == [(b, 0, 0) for b in range(grid)]
    for r in rs:
        assert (r["kind"], r["function"], r["where"], r["tid"]) == \
            ("Divergent thread(s) in block", "early_exit", lines["bar"], (0, 0, 0))
        assert r["detail"] == f"thread ({k % shape[0]},{k // shape[0]},0) exited without reaching this barrier"


TWO_SITES = """
  setp.ge.u32 %p1, %r1, %r2;
  @%p1 bra OTHER;
  bar.sync 0; // first
  bra.uni JOIN;
OTHER:
  bar.sync 0; // second
JOIN:
  mov.u32 %r9, 1;
"""


def test_two_barrier_instructions_are_warp_and_block_divergence(synccheck, capsys, rng):
    block = 32 * int(rng.integers(2, 5))
    k = int(rng.integers(1, block))
    if rng.integers(2):
        k = 32 * int(rng.integers(1, block // 32))    # a warp boundary: block divergence only
    kernel, lines = _kernel("two_sites", TWO_SITES)
    got = _launch(kernel, 1, block, k)
    assert np.array_equal(got, np.ones(block, np.int32))
    rs = reports(capsys.readouterr().err)
    expected = []
    if k % 32:           # the warp holding k: its lanes below k at the first, the others at the second
        w = k // 32 * 32
        expected.append(("Divergent thread(s) in warp", lines["first"], (w, 0, 0),
                         f"thread ({k},0,0) of the same warp waits at two_sites+0x"))
    other = max(k, 32)   # the first thread at the second barrier outside thread 0's warp
    if other < block:
        expected.append(("Divergent thread(s) in block", lines["first"], (0, 0, 0),
                         f"thread ({other},0,0) waits at two_sites+0x"))
    assert [(r["kind"], r["where"], r["tid"], r["detail"][:len(e[3])]) for r, e in zip(rs, expected)] == expected
    assert len(rs) == len(expected)
    for r in rs:
        assert r["detail"].endswith(f" in {lines['second']}")


def test_barriers_with_different_ids_deadlock_and_are_reported(synccheck, capsys, rng):
    block = 32 * int(rng.integers(2, 5))
    k = int(rng.integers(1, block))
    body = TWO_SITES.replace("bar.sync 0; // second", "bar.sync 1; // second")
    kernel, lines = _kernel("two_ids", body)
    with pytest.raises(CudaError) as e:
        _launch(kernel, 1, block, k)
    assert e.value.code == CUresult.CUDA_ERROR_LAUNCH_FAILED and "barrier deadlock" in str(e.value)
    (r,) = reports(capsys.readouterr().err)
    kind = "Divergent thread(s) in warp" if k < 32 else "Divergent thread(s) in block"
    assert (r["kind"], r["where"], r["tid"]) == (kind, lines["first"], (0, 0, 0))
    assert r["detail"].startswith(f"thread ({k},0,0)") and r["detail"].endswith(f" in {lines['second']}")


def test_counted_barrier_with_part_of_a_warp(synccheck, capsys, rng):
    # threads below k wait at bar.sync 1, 64: a warp that has lanes at and past k arrives
    # with exited lanes
    k = int(rng.integers(33, 64))
    body = EARLY_EXIT.replace("bar.sync 0;", "bar.sync 1, 64;")
    kernel, lines = _kernel("counted", body)
    got = _launch(kernel, 1, 128, k)
    assert np.array_equal(got, np.where(np.arange(128) < k, 1, 7))
    (r,) = reports(capsys.readouterr().err)
    assert (r["kind"], r["where"], r["tid"]) == ("Divergent thread(s) in warp", lines["bar"], (32, 0, 0))
    assert r["detail"] == f"thread ({k},0,0) of the same warp exited without reaching this barrier"


def test_warps_giving_one_barrier_different_counts(synccheck, capsys):
    # warp 0 says 64 threads, warps 1 and 2 say 96: warps 0 and 1 complete the barrier, warp 2
    # is left waiting for a use that no other warp reaches
    body = "setp.ge.u32 %p1, %r1, 32;\n  selp.b32 %r5, 96, 64, %p1;\n  bar.sync 1, %r5; // bar\n  mov.u32 %r9, 1;"
    kernel, lines = _kernel("counts", body)
    with pytest.raises(CudaError) as e:
        _launch(kernel, 1, 96, 0)
    assert e.value.code == CUresult.CUDA_ERROR_LAUNCH_FAILED
    differs, short = reports(capsys.readouterr().err)
    assert (differs["kind"], differs["where"], differs["tid"]) == ("Invalid arguments", lines["bar"], (32, 0, 0))
    assert differs["detail"] == "thread count 96 differs from 64, given by the warps that arrived before"
    assert (short["where"], short["tid"]) == (lines["bar"], (64, 0, 0))
    assert "thread count can never be reached" in short["detail"]


def test_unreachable_thread_count(synccheck, capsys):
    body = EARLY_EXIT.replace("bar.sync 0;", "bar.sync 1, 128;")
    kernel, lines = _kernel("short", body)
    with pytest.raises(CudaError) as e:
        _launch(kernel, 1, 128, 64)
    assert e.value.code == CUresult.CUDA_ERROR_LAUNCH_FAILED
    (r,) = reports(capsys.readouterr().err)
    assert (r["kind"], r["where"], r["tid"]) == ("Invalid arguments", lines["bar"], (0, 0, 0))
    assert "thread count can never be reached" in r["detail"]


# ---------------------------------------------------------------- warp collectives

COLLECTIVES = {
    "syncwarp": "bar.warp.sync %r3; // coll\n  mov.u32 %r9, 1;",
    "shfl": "shfl.sync.bfly.b32 %r9, %r1, 1, 31, %r3; // coll",
    "vote": "setp.eq.u32 %p2, %r4, 3;\n  vote.sync.ballot.b32 %r9, %p2, %r3; // coll",
    "redux": "redux.sync.add.u32 %r9, %r1, %r3; // coll",
    "match": "match.any.sync.b32 %r9, %r4, %r3; // coll",
}
PART = """
  setp.ge.u32 %p1, %r4, %r2;
  @%p1 bra DONE;
  COLL
"""


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_lane_named_in_mask_that_exited(synccheck, capsys, rng, name):
    grid, block = _draw(rng)
    k = int(rng.integers(1, 32))         # lanes k.. of each warp exit; the mask names all 32
    kernel, lines = _kernel(name, PART.replace("COLL", COLLECTIVES[name]))
    _launch(kernel, grid, block, k)
    rs = reports(capsys.readouterr().err)
    assert len(rs) == grid * block // 32        # once per warp
    assert {(r["block"][0], r["tid"][0]) for r in rs} == {(b, w) for b in range(grid) for w in range(0, block, 32)}
    missing = (0xFFFFFFFF >> k) << k
    for r in rs:
        assert (r["kind"], r["function"], r["where"]) == ("Invalid arguments", name, lines["coll"])
        lane = r["tid"][0] + k
        assert r["detail"] == (f"member mask 0xffffffff names lane {k} (thread ({lane},0,0)), which has exited; "
                               f"lanes not taking part: 0x{missing:08x}")


@pytest.mark.parametrize("constant", [False, True], ids=["mask_in_register", "constant_mask"])
@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_lane_outside_its_own_mask(synccheck, capsys, rng, name, constant):
    grid, block = _draw(rng)
    j = int(rng.integers(0, 32))
    mask = 0xFFFFFFFF ^ (1 << j)         # every lane calls, lane j is left out of the mask
    body = COLLECTIVES[name].replace("%r3;", f"0x{mask:08x};") if constant else COLLECTIVES[name]
    kernel, lines = _kernel(name + "_c" * constant, body)
    got = _launch(kernel, grid, block, 0, mask)
    if name == "syncwarp":               # each thread still ends (none is left waiting)
        assert np.array_equal(got, np.ones(block, np.int32))
    rs = reports(capsys.readouterr().err)
    assert len(rs) == grid * block // 32
    assert {(r["block"][0], r["tid"][0]) for r in rs} == {(b, w + j) for b in range(grid) for w in range(0, block, 32)}
    for r in rs:
        assert (r["kind"], r["where"]) == ("Invalid arguments", lines["coll"])
        assert r["detail"] == f"the calling lane {j} is not in its member mask 0x{mask:08x}"


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_lane_outside_its_own_mask_still_ends_unchecked(monkeypatch, capsys, rng, name):
    """Unchecked, a lane left out of its own mask takes part in the collective (its result
    is undefined) rather than waiting forever: every thread ends, nothing is reported."""
    monkeypatch.setenv("ANYCUDA_SANITIZE", "")
    grid, block = _draw(rng)
    j = int(rng.integers(0, 32))
    kernel, _ = _kernel(name + "_plain", COLLECTIVES[name] + "\n  mov.u32 %r9, 1;")
    got = _launch(kernel, grid, block, 0, 0xFFFFFFFF ^ (1 << j))
    assert np.array_equal(got, np.ones(block, np.int32))
    assert "=========" not in capsys.readouterr().err


def test_lanes_of_one_instruction_with_different_masks(synccheck, capsys, rng):
    # lanes below 16 give the full mask, lanes from 16 the upper half: lane 0's group is the
    # whole warp, and each of lanes 16..31 gives another mask
    block = 32 * int(rng.integers(1, 4))
    body = "setp.lt.u32 %p1, %r4, 16;\n  selp.b32 %r3, -1, 0xffff0000, %p1;\n  " + COLLECTIVES["shfl"]
    kernel, lines = _kernel("differ", body)
    _launch(kernel, 1, block, 0)
    rs = reports(capsys.readouterr().err)
    assert sorted(r["tid"][0] for r in rs) == [w + lane for w in range(0, block, 32) for lane in range(16, 32)]
    for r in rs:
        w = r["tid"][0] // 32 * 32
        assert (r["kind"], r["where"]) == ("Invalid arguments", lines["coll"])
        assert r["detail"] == (f"member mask 0xffff0000 differs from mask 0xffffffff of thread ({w},0,0) "
                               "at the same instruction")


def test_print_limit_counts_every_error(synccheck, monkeypatch, capsys, rng):
    limit = int(rng.integers(1, 10))
    monkeypatch.setenv("ANYCUDA_SANITIZE_PRINT_LIMIT", str(limit))
    body = "setp.lt.u32 %p1, %r4, 16;\n  selp.b32 %r3, -1, 0xffff0000, %p1;\n  " + COLLECTIVES["shfl"]
    kernel, _ = _kernel("differ_limited", body)
    _launch(kernel, 1, 64, 0)                  # 16 errors per warp
    err = capsys.readouterr().err
    assert len(reports(err)) == limit
    assert f"({32 - limit} more errors of kernel differ_limited not printed)" in err


def test_collective_while_named_lanes_wait_at_a_barrier(synccheck, capsys):
    body = """
  setp.ge.u32 %p1, %r4, 16;
  @%p1 bra B;
  shfl.sync.idx.b32 %r9, %r1, 0, 31, -1; // coll
  bra.uni DONE;
B:
  bar.sync 0; // bar
"""
    kernel, lines = _kernel("mixed", body)
    _launch(kernel, 1, 32, 0)
    shfl, bar = reports(capsys.readouterr().err)
    assert (shfl["kind"], shfl["where"], shfl["tid"]) == ("Invalid arguments", lines["coll"], (0, 0, 0))
    assert shfl["detail"].startswith("member mask 0xffffffff names lane 16 (thread (16,0,0)), which waits at mixed+0x")
    assert f" in {lines['bar']} instead" in shfl["detail"]
    assert (bar["kind"], bar["where"], bar["tid"]) == ("Divergent thread(s) in block", lines["bar"], (16, 0, 0))


# ---------------------------------------------------------------- correct kernels

REVERSE = """
.visible .entry reverse(.param .u64 out, .param .u64 in)
{
  .reg .pred %p<3>; .reg .b32 %r<20>; .reg .b64 %rd<8>;
  .shared .align 4 .b8 s[4096];
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [in];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ntid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r3, [%rd4];
  mov.u32 %r4, s; shl.b32 %r5, %r1, 2; add.s32 %r6, %r4, %r5;
  st.shared.u32 [%r6], %r3;
  bar.sync 0;
  sub.u32 %r7, %r2, %r1; sub.u32 %r7, %r7, 1; shl.b32 %r7, %r7, 2; add.s32 %r7, %r4, %r7;
  ld.shared.u32 %r8, [%r7];
  setp.lt.u32 %p1, %r8, 500;
  bar.red.popc.u32 %r9, 0, %p1;
  // a full-mask butterfly sum over the warp
  shfl.sync.bfly.b32 %r10, %r8, 16, 31, -1; add.u32 %r8, %r8, %r10;
  shfl.sync.bfly.b32 %r10, %r8, 8, 31, -1; add.u32 %r8, %r8, %r10;
  shfl.sync.bfly.b32 %r10, %r8, 4, 31, -1; add.u32 %r8, %r8, %r10;
  shfl.sync.bfly.b32 %r10, %r8, 2, 31, -1; add.u32 %r8, %r8, %r10;
  shfl.sync.bfly.b32 %r10, %r8, 1, 31, -1; add.u32 %r8, %r8, %r10;
  // lanes 0-15 of each warp alone: a half-warp sum with the mask naming exactly them;
  // lanes 16-31 take a second, disjoint half-warp at the same instruction
  and.b32 %r11, %r1, 31; setp.lt.u32 %p2, %r11, 16;
  selp.b32 %r12, 0xffff, 0xffff0000, %p2;
  shfl.sync.bfly.b32 %r13, %r11, 1, 31, %r12;
  bar.warp.sync %r12;
  @!%p2 bra HIGH;
  shfl.sync.down.b32 %r14, %r3, 1, 0x101f, 0xffff;
  bar.warp.sync -1;
  bra.uni JOIN;
HIGH:
  mov.u32 %r14, 0;
  bar.warp.sync -1;
JOIN:
  add.s64 %rd5, %rd1, %rd3;
  mul.wide.u32 %rd6, %r2, 4;
  add.s64 %rd7, %rd5, %rd6;
  st.global.u32 [%rd5], %r8;
  st.global.u32 [%rd7], %r9;
  add.s64 %rd7, %rd7, %rd6; st.global.u32 [%rd7], %r13;
  add.s64 %rd7, %rd7, %rd6; st.global.u32 [%rd7], %r14;
  ret;
}
"""


@pytest.mark.parametrize("tool", ["synccheck", ""])
def test_correct_kernel_reports_nothing_and_is_right(monkeypatch, capsys, rng, tool):
    monkeypatch.setenv("ANYCUDA_SANITIZE", tool)
    n = 32 * int(rng.integers(1, 9))
    x = rng.integers(0, 1000, n).astype(np.int32)
    out = ac.asarray(np.full(4 * n, -1, np.int32))
    ac.RawModule(ptx=HEADER + REVERSE, name="ok.ptx").get_function("reverse")((1,), (n,), (out, ac.asarray(x)))
    got = out.get().reshape(4, n)
    err = capsys.readouterr().err
    assert "Barrier error" not in err
    rev = x[::-1]
    assert np.array_equal(got[0], np.repeat(rev.reshape(-1, 32).sum(axis=1), 32))
    assert np.array_equal(got[1], np.full(n, (x < 500).sum()))
    lanes = np.arange(n) % 32
    assert np.array_equal(got[2], lanes ^ 1)
    down = np.where(lanes < 15, np.roll(x, -1), x)        # width 16: lane 15 reads its own
    assert np.array_equal(got[3], np.where(lanes < 16, down, 0))


PRODUCER_CONSUMER = """
.visible .entry handoff(.param .u64 out, .param .u64 in)
{
  .reg .pred %p<3>; .reg .b32 %r<20>; .reg .b64 %rd<8>;
  .shared .align 4 .b8 s[256];
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [in];
  mov.u32 %r1, %tid.x;
  mov.u32 %r4, s;
  setp.ge.u32 %p1, %r1, 64;
  @%p1 bra CONSUMER;
  mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r3, [%rd4];
  shl.b32 %r5, %r1, 2; add.s32 %r6, %r4, %r5;
  st.shared.u32 [%r6], %r3;
  bar.arrive 1, 128;
  ret;
CONSUMER:
  bar.sync 1, 128;
  sub.u32 %r7, %r1, 64; shl.b32 %r5, %r7, 2; add.s32 %r6, %r4, %r5;
  ld.shared.u32 %r8, [%r6];
  mul.wide.u32 %rd3, %r7, 4; add.s64 %rd5, %rd1, %rd3;
  st.global.u32 [%rd5], %r8;
  ret;
}
"""


def test_named_barrier_producers_and_consumers_report_nothing(synccheck, capsys, rng):
    # warps 0-1 fill shared memory and arrive at barrier 1, warps 2-3 wait there and read:
    # different instructions, different warps, a thread count: all as the ISA allows
    grid = int(rng.integers(1, 4))
    x = rng.integers(0, 1 << 30, 64).astype(np.int32)
    out = ac.asarray(np.full(64, -1, np.int32))
    ac.RawModule(ptx=HEADER + PRODUCER_CONSUMER, name="ok.ptx").get_function("handoff")((grid,), (128,),
                                                                                       (out, ac.asarray(x)))
    assert np.array_equal(out.get(), x)
    assert "Barrier error" not in capsys.readouterr().err


def test_uniform_barrier_kernels_report_nothing(synccheck, capsys, rng):
    grid, block = _draw(rng)
    kernel, _ = _kernel("uniform", EARLY_EXIT)
    got = _launch(kernel, grid, block, block)               # no thread exits early
    assert np.array_equal(got, np.ones(block, np.int32))
    kernel, _ = _kernel("uniform_sync", COLLECTIVES["syncwarp"])
    assert np.array_equal(_launch(kernel, grid, block, 0), np.ones(block, np.int32))
    assert "=========" not in capsys.readouterr().err.replace("========= ERROR SUMMARY", "")


def test_unchecked_kernels_carry_no_checks(monkeypatch):
    """Nothing of synccheck is compiled into a kernel built without the tool."""
    body = TWO_SITES + PART.replace("COLL", COLLECTIVES["shfl"])
    ptx = HEADER + TEMPLATE.replace("KERNEL", "k").replace("BODY", body)
    irs = {}
    for tool in ("", "synccheck"):
        monkeypatch.setenv("ANYCUDA_SANITIZE", tool)
        irs[tool] = str(ModuleLowering(parse(ptx, "k.ptx"), "k.ptx").lower().mod)
    assert "anycuda.synccheck" in irs["synccheck"] and "anycuda.synccheck" not in irs[""]


def test_synccheck_is_a_tool():
    assert memcheck.mode("synccheck") == "synccheck" and memcheck.mode(" SyncCheck ") == "synccheck"


# ---------------------------------------------------------------- nvcc-built, anycuda run

@pytest.fixture(scope="module")
def buggy(tmp_path_factory):
    return built(tmp_path_factory, "synccheck_bugs")


def _lines() -> dict:
    return bug_lines("synccheck_bugs", r"BUG:(\w+)")


def test_program_early_return_before_syncthreads(buggy):
    r = _run(buggy, "early_return", "--sanitize=synccheck", "--error-exitcode", "5")
    rs = reports(r.stderr)
    # 3 blocks of 128 threads, n = 300: block 2 has threads 44.. past the end
    assert len(rs) == 1, r.stderr
    (rep,) = rs
    assert rep["kind"] == "Divergent thread(s) in block"
    assert rep["function"] == "scale_shared(float*, int)"
    assert rep["where"].endswith(f"synccheck_bugs.cu:{_lines()['sync']}")
    assert (rep["tid"], rep["block"]) == ((0, 0, 0), (2, 0, 0))
    assert rep["detail"] == "thread (44,0,0) exited without reaching this barrier"
    assert "ERROR SUMMARY: 1 error" in r.stderr and r.returncode == 5


def test_program_barrier_in_a_device_function(buggy):
    r = _run(buggy, "staged", "--sanitize=synccheck")
    (rep,) = reports(r.stderr)
    # threads 40..63 skip the call of the function that holds the barrier (its own line)
    assert rep["kind"] == "Divergent thread(s) in block" and rep["function"] == "staged(float*, int)"
    assert rep["where"].endswith(f"synccheck_bugs.cu:{_lines()['stage']}")
    assert (rep["tid"], rep["block"]) == ((0, 0, 0), (0, 0, 0))
    assert rep["detail"] == "thread (40,0,0) exited without reaching this barrier"
    assert "staged: cudaSuccess" in r.stdout


def test_program_shuffle_in_half_warp(buggy):
    r = _run(buggy, "half_shuffle", "--sanitize=synccheck")
    rs = reports(r.stderr)
    assert len(rs) == 2, r.stderr                      # one per warp of the one block of 64
    for rep, w in zip(rs, (0, 32)):
        assert (rep["kind"], rep["tid"], rep["block"]) == ("Invalid arguments", (w, 0, 0), (0, 0, 0))
        assert rep["function"] == "half_shuffle(int*)"
        assert rep["where"].endswith(f"synccheck_bugs.cu:{_lines()['shfl']}")
        assert rep["detail"].startswith(f"member mask 0xffffffff names lane 16 (thread ({w + 16},0,0)), "
                                        "which has exited")
    assert "ERROR SUMMARY: 2 errors" in r.stderr and r.returncode == 0


def test_program_clean(buggy):
    plain = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", str(buggy), "clean"],
                           capture_output=True, text=True, timeout=300)
    r = _run(buggy, "clean", "--sanitize=synccheck", "--error-exitcode", "5")
    assert reports(r.stderr) == [] and "ERROR SUMMARY: 0 errors" in r.stderr and r.returncode == 0
    expected = sum(range(256))
    assert r.stdout == plain.stdout == f"clean: cudaSuccess sum {expected} half {sum(range(16))}\n"
