"""memcheck (compiler/ops/memcheck.py, runtime/sanitizer.py): our own buggy kernels, in PTX
through the Python API and in CUDA C++ built by nvcc through `anycuda run --sanitize=memcheck`.
Each report is checked for its kernel, thread and block, address, size, nearest allocation
and line against what the kernel's definition says must fail; clean kernels give the same
results as unchecked runs and no report."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.ops import memcheck
from anycuda.runtime.errors import CudaError, CUresult

HERE = Path(__file__).parent
NVCC = shutil.which("nvcc")

HEADER = ".version 7.0\n.target sm_70\n.address_size 64\n"

REPORT = re.compile(
    r"========= Invalid (?P<space>__\w+__) (?P<kind>read|write|atomic) of size (?P<size>\d+) bytes\n"
    r"=========     at (?P<function>.+?)\+0x[0-9a-f]+ in (?P<where>\S+)\n"
    r"=========     by thread \((?P<tid>[\d,]+)\) in block \((?P<block>[\d,]+)\)\n"
    r"=========     Address 0x(?P<address>[0-9a-f]+) is (?P<why>out of bounds|misaligned)\n"
    r"(?:=========     and is (?P<distance>[\d,]+) bytes (?P<side>before|after) the nearest allocation "
    r"at 0x(?P<near>[0-9a-f]+) of size (?P<near_size>[\d,]+) bytes\n)?")


def reports(text: str, pattern=REPORT) -> list:
    """The memcheck reports in `text` (another tool's, by its `pattern`), as dicts of the
    pattern's groups (indices as int tuples)."""
    out = []
    for m in pattern.finditer(text):
        r = m.groupdict()
        r["size"] = int(r["size"])
        r["address"] = int(r["address"], 16)
        r["tid"] = tuple(int(v) for v in r["tid"].split(","))
        r["block"] = tuple(int(v) for v in r["block"].split(","))
        if r.get("near") is not None:
            r["near"], r["near_size"] = int(r["near"], 16), int(r["near_size"].replace(",", ""))
            r["distance"] = int(r["distance"].replace(",", ""))
        out.append(r)
    return out


def assert_no_report(capsys):
    """Nothing of the sanitizer's on stderr (where a slow compile may say it is compiling)."""
    err = capsys.readouterr().err
    assert "=========" not in err, err


@pytest.fixture
def checked(monkeypatch):
    monkeypatch.setenv("ANYCUDA_SANITIZE", "memcheck")
    monkeypatch.setenv("ANYCUDA_SANITIZE_PRINT_LIMIT", "100000")


def _kernel(ptx: str, name: str, header: str = HEADER):
    return ac.RawModule(ptx=header + ptx, name="bugs.ptx").get_function(name)


def _line(ptx: str, text: str) -> str:
    """'bugs.ptx:N' of the one line of module `ptx` (as _kernel loads it) holding `text`."""
    (n,) = [i + 1 for i, line in enumerate((HEADER + ptx).splitlines()) if text in line]
    return f"bugs.ptx:{n}"


def _launch_failing(kernel, grid, block, args, code=CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, shared=0):
    with pytest.raises(CudaError) as e:
        kernel(grid, block, args, shared_mem=shared)
        ac.synchronize()              # launches are asynchronous: the fault is reported here
    assert e.value.code == code, e.value
    return str(e.value)


# ---------------------------------------------------------------- global memory

STORE_EACH = """
.visible .entry store_each(.param .u64 out)
{
  .reg .b32 %r<6>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.s32 %rd2, %r4, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r4;
  ret;
}
"""


def test_global_write_after_the_end_names_each_thread(checked, capsys, rng):
    n = int(rng.integers(40, 200))
    block = 64
    grid = (n + block - 1) // block + 1          # a whole block more than the data
    out = ac.zeros(n, np.int32)
    _launch_failing(_kernel(STORE_EACH, "store_each"), (grid,), (block,), (out,))
    got = reports(capsys.readouterr().err)
    base = out.data.ptr
    # the blocks after the first failing one may not run (the launch has failed), so the
    # reports are those of the failing threads of the blocks that ran: the first at least
    assert got, "no report"
    first_block = n // block
    seen = {(r["block"][0], r["tid"][0]) for r in got}
    assert {(first_block, t) for t in range(n % block, block)} <= seen
    for r in got:
        i = r["block"][0] * block + r["tid"][0]
        assert i >= n
        assert (r["space"], r["kind"], r["size"], r["why"]) == ("__global__", "write", 4, "out of bounds")
        assert r["function"] == "store_each" and r["where"] == _line(STORE_EACH, "st.global")
        assert r["address"] == base + 4 * i
        _names_the_nearest(r, base, 4 * n)
    assert np.array_equal(out.get(), np.arange(n, dtype=np.int32))      # in-bounds stores were made


def _names_the_nearest(r, base, nbytes):
    """A report past the end of the allocation at `base` names that allocation, or one that
    starts nearer to the address (an array another test of this process left just after it:
    compute-sanitizer, too, names the nearest allocation)."""
    past = r["address"] - (base + nbytes)
    if r["side"] == "after":
        assert (r["distance"], r["near"], r["near_size"]) == (past, base, nbytes)
    else:
        assert r["side"] == "before" and r["near"] == r["address"] + r["distance"] and r["distance"] <= past, r


LOAD_BEFORE = """
.visible .entry load_before(.param .u64 out, .param .u64 in, .param .u32 back)
{
  .reg .b32 %r<6>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [in]; ld.param.u32 %r5, [back];
  mov.u32 %r1, %tid.x;
  sub.s32 %r2, %r1, %r5;
  mul.wide.s32 %rd3, %r2, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r3, [%rd4];
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd6, %rd1, %rd5;
  st.global.u32 [%rd6], %r3;
  ret;
}
"""


def test_global_read_before_the_start(checked, capsys, rng):
    back = int(rng.integers(1, 9))
    data = rng.integers(0, 1 << 30, 32).astype(np.int32)
    src, out = ac.asarray(data), ac.full(32, -1, np.int32)
    _launch_failing(_kernel(LOAD_BEFORE, "load_before"), (1,), (32,), (out, src, np.uint32(back)))
    got = sorted(reports(capsys.readouterr().err), key=lambda r: r["tid"])
    assert [r["tid"] for r in got] == [(t, 0, 0) for t in range(back)]
    for r in got:
        t = r["tid"][0]
        assert (r["kind"], r["size"], r["where"]) == ("read", 4, _line(LOAD_BEFORE, "ld.global"))
        assert r["address"] == src.data.ptr + 4 * (t - back)
        assert (r["side"], r["distance"], r["near"]) == ("before", 4 * (back - t), src.data.ptr)
    got_out = out.get()
    assert np.array_equal(got_out[back:], data[:32 - back])
    assert (got_out[:back] == -1).all()           # the failing threads ended before their store


def test_clean_kernel_same_results_and_no_report(monkeypatch, capsys, rng):
    n = int(rng.integers(100, 3000))
    data = rng.integers(-1000, 1000, n).astype(np.int32)
    results = {}
    for mode in ("", "memcheck"):
        monkeypatch.setenv("ANYCUDA_SANITIZE", mode)
        src, out = ac.asarray(data), ac.full(n, 12345, np.int32)
        _kernel(LOAD_BEFORE.replace("load_before", f"shifted_{mode or 'plain'}"), f"shifted_{mode or 'plain'}")(
            (1,), (min(n, 1024),), (out, src, np.uint32(0)))
        results[mode] = out.get()
    assert_no_report(capsys)
    assert np.array_equal(results[""], results["memcheck"])
    assert np.array_equal(results["memcheck"][:min(n, 1024)], data[:min(n, 1024)])


MISALIGNED = """
.visible .entry misaligned(.param .u64 p, .param .u32 offset)
{
  .reg .b32 %r<2>; .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [offset];
  cvt.u64.u32 %rd2, %r1;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.u64 %rd4, [%rd3];
  st.global.u64 [%rd1], %rd4;
  ret;
}
"""


@pytest.mark.parametrize("offset", [4, 2, 1])
def test_misaligned_load(checked, capsys, offset):
    buf = ac.zeros(8, np.uint64)
    message = _launch_failing(_kernel(MISALIGNED, "misaligned"), (2,), (3,), (buf, np.uint32(offset)),
                              CUresult.CUDA_ERROR_MISALIGNED_ADDRESS)
    got = reports(capsys.readouterr().err)
    assert {(r["block"][0], r["tid"][0]) for r in got} <= {(b, t) for b in (0, 1) for t in range(3)}
    r = got[0]
    linear = f"block {r['block'][0]}, thread {r['tid'][0]}"
    assert f"kernel misaligned, {linear}: misaligned memory access at address 0x{buf.data.ptr + offset:x}" in message
    assert (r["kind"], r["size"], r["why"], r["address"]) == ("read", 8, "misaligned", buf.data.ptr + offset)


# a word one byte into a 4-byte module variable: misaligned, and past the variable's end
STRADDLE = """
.global .align 4 .u32 x;
.visible .entry straddle(.param .u64 out, .param .u32 offset)
{
  .reg .b32 %r<3>; .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [offset];
  mov.u64 %rd2, x; cvt.u64.u32 %rd3, %r1; add.s64 %rd4, %rd2, %rd3;
  st.u32 [%rd4], 42;
  ld.global.u32 %r2, [x];
  st.global.u32 [%rd1], %r2;
  ret;
}
"""


def test_a_misaligned_access_past_its_variable_is_reported_misaligned(checked, capsys):
    """As a GPU faults (cudaErrorMisalignedAddress) and compute-sanitizer names it: misaligned
    comes before out of bounds (NVIDIA's memcheck_demo writes an int one byte into an int)."""
    out = ac.zeros(1, np.uint32)
    kernel = _kernel(STRADDLE, "straddle")
    kernel((1,), (1,), (out, np.uint32(0)))
    assert out.get()[0] == 42
    _launch_failing(kernel, (1,), (1,), (out, np.uint32(1)), CUresult.CUDA_ERROR_MISALIGNED_ADDRESS)
    (r,) = reports(capsys.readouterr().err)
    assert (r["kind"], r["size"], r["why"]) == ("write", 4, "misaligned")


def test_the_nearest_allocation_may_be_a_module_variable(checked, capsys):
    """An access just past a `.global` variable names the variable as the nearest allocation
    (its address and size), not the nearest cudaMalloc block."""
    module = ac.RawModule(ptx=HEADER + STRADDLE.replace("straddle", "past_x"), name="past_x.ptx")
    out = ac.zeros(1, np.uint32)
    _launch_failing(module.get_function("past_x"), (1,), (1,), (out, np.uint32(8)))
    (r,) = reports(capsys.readouterr().err)
    x = module.get_global("x")
    assert (r["why"], r["address"], r["side"], r["distance"]) == ("out of bounds", x.ptr + 8, "after", 4)
    assert (r["near"], r["near_size"]) == (x.ptr, 4)


VECTOR_AND_ATOMIC = """
.visible .entry vector_tail(.param .u64 p, .param .u32 index)
{
  .reg .b32 %r<2>; .reg .f32 %f<5>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [index];
  mul.wide.u32 %rd2, %r1, 16;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd3];
  st.global.f32 [%rd1], %f4;
  ret;
}
.visible .entry atomic_past(.param .u64 p, .param .u32 index)
{
  .reg .b32 %r<3>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [index];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  atom.global.add.u32 %r2, [%rd3], 1;
  ret;
}
"""


def test_vector_load_partly_outside(checked, capsys):
    buf = ac.zeros(10, np.float32)              # 40 bytes: the third 16-byte vector runs 8 past the end
    k = _kernel(VECTOR_AND_ATOMIC, "vector_tail")
    k((1,), (1,), (buf, np.uint32(1)))          # bytes 16..31: inside
    _launch_failing(k, (1,), (1,), (buf, np.uint32(2)))
    (r,) = reports(capsys.readouterr().err)
    assert (r["kind"], r["size"], r["address"]) == ("read", 16, buf.data.ptr + 32)


def test_atomic_out_of_bounds(checked, capsys):
    buf = ac.zeros(16, np.uint32)
    k = _kernel(VECTOR_AND_ATOMIC, "atomic_past")
    k((1,), (1,), (buf, np.uint32(15)))
    _launch_failing(k, (1,), (1,), (buf, np.uint32(16)))
    (r,) = reports(capsys.readouterr().err)
    assert (r["kind"], r["size"], r["address"], r["distance"]) == ("atomic", 4, buf.data.ptr + 64, 0)
    assert buf.get()[15] == 1 and buf.get().sum() == 1


WILD_LOAD = """
.visible .entry wild_load(.param .u64 out, .param .u64 at)
{
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [at];
  ld{space}.u{bits} %rd3, [%rd2];
  st.global.u64 [%rd1], %rd3;
  ret;
}
"""


@pytest.mark.parametrize("space", [".global", ""])
@pytest.mark.parametrize("size", [1, 4, 8])
def test_an_access_that_ends_at_the_top_of_the_address_space(checked, capsys, space, size):
    """The `size` bytes at 2**64 - size (aligned) end at the top of the address space: their
    end, computed in 64 bits, wraps to 0, which lies below every window's and allocation's end."""
    ac.zeros(4, np.int32)                   # an allocation for the address to seem inside of
    out = ac.full(1, -1, np.int64)
    at = (1 << 64) - size
    # (ld widens into a register wider than its type, as the ISA allows)
    ptx = WILD_LOAD.replace("{space}", space).replace("{bits}", str(8 * size))
    _launch_failing(_kernel(ptx, "wild_load"), (1,), (1,), (out, np.uint64(at)))
    (r,) = reports(capsys.readouterr().err)
    # (a generic access outside every window is named a global one, as compute-sanitizer does)
    assert (r["space"], r["kind"], r["size"], r["address"], r["why"]) == ("__global__", "read", size, at, "out of bounds")
    assert out.get()[0] == -1


# ---------------------------------------------------------------- shared, local, constant, generic

SHARED = """
.visible .entry shared_past(.param .u64 out, .param .u32 limit)
{
  .reg .pred %p<2>; .reg .b32 %r<6>; .reg .b64 %rd<6>;
  .shared .align 4 .b8 tile[64];
  ld.param.u64 %rd1, [out]; ld.param.u32 %r5, [limit];
  mov.u32 %r1, %tid.x;
  setp.ge.u32 %p1, %r1, %r5;
  @%p1 bra DONE;
  mov.u64 %rd2, tile;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.shared.u32 [%rd4], %r1;
DONE:
  bar.sync 0;
  ret;
}
.visible .entry dynamic_past(.param .u32 index)
{
  .reg .b32 %r<4>;
  .extern .shared .align 16 .b8 dyn[];
  ld.param.u32 %r1, [index];
  mov.u32 %r2, dyn;
  shl.b32 %r3, %r1, 2;
  add.u32 %r2, %r2, %r3;
  st.shared.u32 [%r2], %r1;
  ret;
}
"""


def test_shared_static_past_the_end(checked, capsys):
    out = ac.zeros(1, np.int32)
    k = _kernel(SHARED, "shared_past")
    k((1,), (32,), (out, np.uint32(16)))               # 16 words: the whole array, nothing more
    _launch_failing(k, (2,), (32,), (out, np.uint32(20)))
    got = reports(capsys.readouterr().err)
    assert {(r["block"][0], r["tid"][0]) for r in got} <= {(b, t) for b in (0, 1) for t in range(16, 20)}
    assert {r["tid"][0] for r in got} == {16, 17, 18, 19}
    for r in got:
        assert (r["space"], r["kind"], r["size"], r["where"], r["near"]) == ("__shared__", "write", 4, _line(SHARED, "st.shared.u32 [%rd4]"), None)


def test_shared_dynamic_size_is_the_launch_s(checked, capsys):
    k = _kernel(SHARED, "dynamic_past")
    k((1,), (1,), (np.uint32(63),), shared_mem=256)     # the last word of 256 bytes
    _launch_failing(k, (1,), (1,), (np.uint32(64),), shared=256)
    (r,) = reports(capsys.readouterr().err)
    assert (r["space"], r["size"], r["why"]) == ("__shared__", 4, "out of bounds")


LOCAL_AND_GENERIC = """
.visible .entry local_past(.param .u64 out, .param .u32 index)
{
  .local .align 4 .b8 buf[32];
  .reg .b32 %r<4>; .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [index];
  mov.u64 %rd2, buf;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.local.u32 [%rd4], %r1;
  ld.local.u32 %r2, [buf];
  st.global.u32 [%rd1], %r2;
  ret;
}
.visible .entry generic_shared(.param .u64 out)
{
  .shared .align 4 .b8 words[128];
  .reg .b32 %r<4>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mov.u64 %rd2, words;
  cvta.shared.u64 %rd3, %rd2;
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd5, %rd3, %rd4;
  st.u32 [%rd5], %r1;
  bar.sync 0;
  ld.u32 %r2, [%rd5];
  add.s64 %rd6, %rd1, %rd4;
  st.u32 [%rd6], %r2;
  ret;
}
"""


@pytest.mark.parametrize("barrier", [False, True], ids=["stack slot", "frame"])
def test_local_past_the_frame(checked, capsys, barrier):
    # with a barrier the thread's .local variables live in its frame, else in a stack slot
    ptx = LOCAL_AND_GENERIC.replace("ld.local.u32 %r2, [buf];", "bar.sync 0;\n  ld.local.u32 %r2, [buf];") \
        if barrier else LOCAL_AND_GENERIC
    out = ac.full(1, -1, np.int32)
    k = _kernel(ptx, "local_past")
    k((1,), (1,), (out, np.uint32(0)))
    assert out.get()[0] == 0
    _launch_failing(k, (1,), (4,), (out, np.uint32(8)))
    got = reports(capsys.readouterr().err)
    assert sorted(r["tid"][0] for r in got) == [0, 1, 2, 3]
    assert all((r["space"], r["kind"], r["where"]) == ("__local__", "write", _line(LOCAL_AND_GENERIC, "st.local")) for r in got)


def test_generic_addresses_into_shared_and_global_pass(checked, capsys):
    n = 32
    out = ac.full(n, -1, np.int32)
    _kernel(LOCAL_AND_GENERIC, "generic_shared")((1,), (n,), (out,))
    assert np.array_equal(out.get(), np.arange(n, dtype=np.int32))
    assert_no_report(capsys)
    with pytest.raises(CudaError):
        _kernel(LOCAL_AND_GENERIC, "generic_shared")((1,), (n + 1,), (out,))   # word 32 is past `words`
        ac.synchronize()
    got = reports(capsys.readouterr().err)
    assert [(r["space"], r["tid"][0]) for r in got] == [("__global__", 32)]   # generic: reported as compute-sanitizer does


MODULE_VARIABLES = """
.global .align 4 .b8 table[16] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0};
.const .align 4 .b8 weights[8] = {5, 0, 0, 0, 6, 0, 0, 0};
.visible .entry variables(.param .u64 out, .param .u32 index)
{
  .reg .b32 %r<6>; .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [index];
  mov.u64 %rd2, table;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r2, [%rd4];
  ld.const.u32 %r3, [weights+4];
  mul.lo.u32 %r4, %r2, %r3;
  st.global.u32 [%rd1], %r4;
  ret;
}
"""


def test_module_variables_are_in_bounds(checked, capsys):
    out = ac.zeros(1, np.uint32)
    k = _kernel(MODULE_VARIABLES, "variables")
    for i in range(4):
        k((1,), (1,), (out, np.uint32(i)))
        assert out.get()[0] == 6 * (i + 1)
    assert_no_report(capsys)
    # far past: one module variable running into the next (they lie side by side) is not caught
    _launch_failing(k, (1,), (1,), (out, np.uint32(1 << 24)))
    (r,) = reports(capsys.readouterr().err)
    assert (r["space"], r["kind"], r["where"]) == ("__global__", "read", _line(MODULE_VARIABLES, "ld.global"))


LDMATRIX = """
.visible .entry rows(.param .u64 out, .param .u32 off)
{
  .reg .b32 %r<10>; .reg .b64 %rd<4>;
  .shared .align 16 .b8 tile[512];
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [off];
  mov.u32 %r2, %tid.x;
  shl.b32 %r3, %r2, 4;
  add.u32 %r3, %r3, %r1;
  mov.u32 %r4, tile;
  add.u32 %r4, %r4, %r3;
  ldmatrix.sync.aligned.m8n8.SHAPE.shared.b16 REGS, [%r4];
  mul.wide.u32 %rd2, %r2, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r5;
  ret;
}
"""


@pytest.mark.parametrize("shape, regs", [("x4", "{%r5, %r6, %r7, %r8}"), ("x1", "{%r5}")])
def test_ldmatrix_rows_of_the_lanes_that_name_one(checked, capsys, shape, regs):
    ptx = LDMATRIX.replace("SHAPE", shape).replace("REGS", regs)
    k = _kernel(ptx, "rows", HEADER.replace("sm_70", "sm_80"))
    out = ac.zeros(32, np.uint32)
    k((1,), (32,), (out, np.uint32(0)))                      # 32 rows of 16 bytes: the whole tile
    assert_no_report(capsys)
    if shape == "x1":          # only lanes 0-7 name rows: the others' addresses (past the tile) are unused
        k((1,), (32,), (out, np.uint32(384)))
        assert_no_report(capsys)
        return
    _launch_failing(k, (1,), (32,), (out, np.uint32(16)))
    (r,) = reports(capsys.readouterr().err)
    assert (r["space"], r["kind"], r["size"], r["tid"]) == ("__shared__", "read", 16, (31, 0, 0))


DEVICE_MALLOC = """
.extern .func (.param .b64 func_retval0) malloc(.param .b64 malloc_param_0);
.visible .entry heap(.param .u64 out, .param .u32 index)
{
  .reg .b32 %r<3>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [index];
  mov.u64 %rd5, 64;
  {
  .param .b64 p0;
  st.param.b64 [p0], %rd5;
  .param .b64 r0;
  call.uni (r0), malloc, (p0);
  ld.param.b64 %rd2, [r0];
  }
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.u32 [%rd4], %r1;
  st.global.u64 [%rd1], %rd2;
  ret;
}
.visible .entry later(.param .u64 block, .param .u64 out)
{
  .reg .b32 %r<2>; .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [block]; ld.param.u64 %rd2, [out];
  ld.global.u32 %r1, [%rd1+60];
  st.global.u32 [%rd2], %r1;
  ret;
}
"""


def test_device_malloc_blocks_are_in_bounds_in_later_launches_too(checked, capsys):
    out = ac.zeros(1, np.uint64)
    k = _kernel(DEVICE_MALLOC, "heap")
    k((1,), (1,), (out, np.uint32(15)))                     # the last word of 64 bytes
    block = int(out.get()[0])
    got = ac.zeros(1, np.uint32)
    _kernel(DEVICE_MALLOC, "later")((1,), (1,), (np.uint64(block), got))
    assert got.get()[0] == 15
    assert_no_report(capsys)
    _launch_failing(k, (1,), (1,), (out, np.uint32(16)))
    (r,) = reports(capsys.readouterr().err)
    assert (r["space"], r["kind"], r["size"]) == ("__global__", "write", 4)


LOC = """
.file 1 "/src/buggy.cu"
.visible .entry with_lines(.param .u64 out)
{
  .reg .b32 %r<2>; .reg .b64 %rd<4>;
  .loc 1 7 3
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  .loc 1 42 5
  st.global.u32 [%rd3], %r1;
  ret;
}
"""


def test_host_backtrace_names_the_launching_python_code(checked, capsys):
    out = ac.zeros(2, np.int32)
    _launch_failing(_kernel(LOC, "with_lines"), (1,), (3,), (out,))
    frames = re.findall(r"========= {9}Host Frame: (.*)", capsys.readouterr().err)
    assert "_launch_failing" in frames[0] and "test_host_backtrace_names_the_launching_python_code" in frames[1]


def test_source_line_from_loc(checked, capsys):
    out = ac.zeros(2, np.int32)
    _launch_failing(_kernel(LOC, "with_lines"), (1,), (3,), (out,))
    (r,) = reports(capsys.readouterr().err)
    assert (r["where"], r["tid"]) == ("/src/buggy.cu:42", (2, 0, 0))


def test_unknown_tool_is_refused(monkeypatch):
    monkeypatch.setenv("ANYCUDA_SANITIZE", "memchek")
    with pytest.raises(ValueError, match="unknown tool"):
        memcheck.mode()
    monkeypatch.setenv("ANYCUDA_SANITIZE", "syncheck")
    with pytest.raises(ValueError, match="memcheck, initcheck, racecheck, synccheck"):
        memcheck.mode()


def test_bad_free_is_reported(checked, capsys):
    from anycuda.driver import api
    api.cuInit(0)
    api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
    p = api.cuMemAlloc(256)
    with pytest.raises(CudaError) as e:
        api.cuMemFree(p + 16)
    assert e.value.code == CUresult.CUDA_ERROR_INVALID_VALUE
    err = capsys.readouterr().err
    assert "Program hit CUDA_ERROR_INVALID_VALUE (error 1)" in err and "on CUDA API call to cuMemFree." in err
    api.cuMemFree(p)


LEAKING = """
import anycuda as ac, numpy as np
from anycuda.driver import api
api.cuInit(0)
api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
kept = api.cuMemAlloc(1000)
freed = api.cuMemAlloc(64)
api.cuMemFree(freed)
print(f"kept 0x{kept:x}")
"""


@pytest.mark.parametrize("leak_check", ["full", "no"])
def test_leak_check_and_exit_status(tmp_path, leak_check):
    env = dict(os.environ, ANYCUDA_SANITIZE="memcheck", ANYCUDA_SANITIZE_LEAK_CHECK=leak_check,
               ANYCUDA_SANITIZE_ERROR_EXITCODE="7")
    r = subprocess.run([sys.executable, "-c", LEAKING], capture_output=True, text=True, timeout=300, env=env)
    kept = re.search(r"kept (0x[0-9a-f]+)", r.stdout).group(1)
    if leak_check == "full":
        assert f"========= Leaked 1,000 bytes at {kept}" in r.stderr
        assert r.stderr.count("Leaked") == 1
        assert "========= ERROR SUMMARY: 1 error" in r.stderr
        assert r.returncode == 7
    else:
        assert "Leaked" not in r.stderr and "========= ERROR SUMMARY: 0 errors" in r.stderr
        assert r.returncode == 0


# ---------------------------------------------------------------- nvcc-built programs, anycuda run

def bug_lines(program: str = "memcheck_bugs", pattern: str = r"BUG:(\w+)") -> dict:
    """{what a `BUG:` marker names: its line} of tests/programs/<program>.cu."""
    lines = (HERE / "programs" / f"{program}.cu").read_text().splitlines()
    return {m.group(1): i + 1 for i, line in enumerate(lines) for m in [re.search(pattern, line)] if m}


def built(tmp_path_factory, program: str):
    """tests/programs/<program>.cu built by nvcc with -lineinfo (the reports' lines) and
    -rdynamic (the host frames' names); skipped without nvcc."""
    if NVCC is None:
        pytest.skip("needs nvcc (the CUDA toolkit) on PATH")
    exe = tmp_path_factory.mktemp(program) / program
    r = subprocess.run([NVCC, "-lineinfo", "-Xcompiler", "-rdynamic", "-o", str(exe),
                        str(HERE / "programs" / f"{program}.cu")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.fixture(scope="module")
def buggy(tmp_path_factory):
    return built(tmp_path_factory, "memcheck_bugs")


def _run(exe, case, *options):
    return subprocess.run([sys.executable, "-m", "anycuda.cli", "run", *options, "--", str(exe), case],
                          capture_output=True, text=True, timeout=300)


# case -> (kernel as demangled, space, kind, size, failing (block, thread) pairs, why, CUDA error)
CASES = {
    "global_write": ("write_past_end(int*, int)", "__global__", "write", 4,
                     {((0, 0, 0), (t, 0, 0)) for t in range(100, 128)}, "out of bounds", "cudaErrorIllegalAddress"),
    "global_read": ("read_before_start(int*, int const*)", "__global__", "read", 4,
                    {((0, 0, 0), (t, 0, 0)) for t in range(3)}, "out of bounds", "cudaErrorIllegalAddress"),
    "shared": ("shared_overflow(int*, int)", "__shared__", "write", 4,
               {((0, 0, 0), (t, 0, 0)) for t in range(32, 40)}, "out of bounds", "cudaErrorIllegalAddress"),
    "local": ("local_overflow(int*, int)", "__local__", "write", 4,
              {((0, 0, 0), (t, 0, 0)) for t in range(32)}, "out of bounds", "cudaErrorIllegalAddress"),
    "misaligned": ("misaligned_store(char*)", "__global__", "write", 4,
                   {((0, 0, 0), (0, 0, 0))}, "misaligned", "cudaErrorMisalignedAddress"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_program_bug_reported(buggy, case):
    kernel, space, kind, size, threads, why, cuda_error = CASES[case]
    r = _run(buggy, case, "--sanitize=memcheck", "--print-limit", "1000", "--error-exitcode", "3")
    got = reports(r.stderr)
    assert got, r.stderr
    assert {(r_["block"], r_["tid"]) for r_ in got} == threads
    line = bug_lines()[case]
    for rep in got:
        assert (rep["function"], rep["space"], rep["kind"], rep["size"], rep["why"]) == (kernel, space, kind, size, why)
        assert rep["where"].endswith(f"memcheck_bugs.cu:{line}"), rep["where"]
    if case == "global_write":
        assert sorted(rep["distance"] for rep in got) == [4 * i for i in range(28)]
        assert {rep["near_size"] for rep in got} == {400}
    if case == "global_read":
        assert sorted(rep["distance"] for rep in got) == [4, 8, 12]
        assert {rep["side"] for rep in got} == {"before"}
    frames = re.findall(r"========= {9}Host Frame: (.*)", r.stderr)
    assert any("(main+" in frame for frame in frames), r.stderr      # -rdynamic: the program's own names
    assert f"{case}: {cuda_error}" in r.stdout
    assert f"========= ERROR SUMMARY: {len(threads)} error" in r.stderr
    assert r.returncode == 3


def test_program_clean_and_bad_free(buggy):
    plain = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", str(buggy), "clean"],
                           capture_output=True, text=True, timeout=300)
    r = _run(buggy, "clean", "--sanitize=memcheck", "--leak-check", "full", "--error-exitcode", "3")
    assert r.returncode == 0 and "========= ERROR SUMMARY: 0 errors" in r.stderr, r.stderr
    assert r.stdout == plain.stdout and "clean: sum 499500.0" in r.stdout
    r = _run(buggy, "bad_free", "--sanitize=memcheck", "--leak-check", "full", "--error-exitcode", "3")
    assert "on CUDA API call to cuMemFree." in r.stderr and "bad_free: cudaErrorInvalidValue" in r.stdout
    assert "Leaked" not in r.stderr and "========= ERROR SUMMARY: 1 error" in r.stderr
    assert r.returncode == 3


def test_run_refuses_unknown_tool_and_stray_options(buggy):
    r = _run(buggy, "clean", "--sanitize=memchek")
    assert r.returncode == 2 and "unknown tool" in r.stderr
    r = _run(buggy, "clean", "--leak-check", "full")
    assert r.returncode == 2 and "go with --sanitize" in r.stderr
