"""racecheck (compiler/ops/racecheck.py, runtime/racereport.py): our own racy kernels (in shared
and in global memory), in PTX
through the Python API and in CUDA C++ built by nvcc with -lineinfo through `anycuda run
--sanitize=racecheck`. Each report is checked for its kind (the two accesses in the order the
block's threads made them: anycuda runs a block's threads one after another up to each
barrier, in index order), its lines, the first pair of threads and its block, its severity
(one warp: warning; two: error) and its count; the same kernels with a barrier report nothing."""
import re
import subprocess
import sys

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.ops import memcheck
from anycuda.compiler.ops import racecheck as racecheck_ops
from test_sanitizer import HEADER, _run, bug_lines, built

REPORT = re.compile(
    r"========= (?P<severity>Error|Warning): Race reported between (?P<first>Read|Write) access at "
    r"(?P<function>.+?)\+0x[0-9a-f]+ in (?P<first_where>\S+)\n"
    r"=========     and (?P<second>Read|Write) access at .+?\+0x[0-9a-f]+ in (?P<second_where>\S+) "
    r"\[(?P<count>\d+) hazards?\]\n"
    r"=========     first: (?:Read|Write) by thread \((?P<first_thread>[\d,]+)\) and (?:Read|Write) by thread "
    r"\((?P<second_thread>[\d,]+)\) in block \((?P<block>[\d,]+)\) at (?P<space>__shared__|__global__) "
    r"0x(?P<offset>[0-9a-f]+)")


def reports(text: str) -> list:
    out = []
    for m in REPORT.finditer(text):
        r = m.groupdict()
        for k in ("first_thread", "second_thread", "block"):
            r[k] = tuple(int(v) for v in r[k].split(","))
        r["count"], r["offset"] = int(r["count"]), int(r["offset"], 16)
        out.append(r)
    return out


@pytest.fixture
def racecheck(monkeypatch):
    monkeypatch.setenv("ANYCUDA_SANITIZE", "racecheck")
    monkeypatch.setenv("ANYCUDA_SANITIZE_PRINT_LIMIT", "100000")


# thread `a` (linear index) makes access FIRST of word k of the shared array, every thread
# then passes BETWEEN, and thread `b` makes access SECOND of the same word
PAIR = """
.visible .entry pair(.param .u64 out, .param .u32 a, .param .u32 b, .param .u32 k)
{
  .reg .pred %p<3>; .reg .b32 %r<12>; .reg .b64 %rd<6>;
  .shared .align 4 .b8 s[1024];
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [a]; ld.param.u32 %r2, [b]; ld.param.u32 %r3, [k];
  mov.u32 %r4, %tid.x; mov.u32 %r5, %tid.y; mov.u32 %r6, %ntid.x;
  mad.lo.u32 %r7, %r5, %r6, %r4;
  mul.wide.u32 %rd2, %r7, 4;
  add.s64 %rd3, %rd1, %rd2;
  mov.u32 %r8, s; shl.b32 %r9, %r3, 2; add.s32 %r9, %r8, %r9;
  cvt.u64.u32 %rd4, %r9; cvta.shared.u64 %rd5, %rd4;
  setp.ne.u32 %p1, %r7, %r1;
  @%p1 bra NOT_A;
  FIRST // first
NOT_A:
  BETWEEN
  setp.ne.u32 %p2, %r7, %r2;
  @%p2 bra DONE;
  SECOND // second
DONE:
  ret;
}
"""
ACCESSES = {
    "write": "st.shared.u32 [%r9], %r7;",
    "generic_write": "st.u32 [%rd5], %r7;",
    "read": "ld.shared.u32 %r10, [%r9]; st.global.u32 [%rd3], %r10;",
    "atomic": "atom.shared.add.u32 %r10, [%r9], 1; st.global.u32 [%rd3], %r10;",
}
BETWEEN = {"none": "", "bar": "bar.sync 0;", "syncwarp": "bar.warp.sync -1;"}


def _pair(first, second, between, template=None, accesses=None):
    """The pair kernel (PAIR, or GLOBAL_PAIR with GLOBAL_ACCESSES) and {'first', 'second': the
    line of each access}."""
    template, accesses = template or PAIR, accesses or ACCESSES
    ptx = template.replace("FIRST", accesses[first]).replace("SECOND", accesses[second])
    ptx = ptx.replace("BETWEEN", BETWEEN[between])
    lines = (HEADER + ptx).splitlines()
    where = {tag: f"bugs.ptx:{i + 1}" for tag in ("first", "second") for i, line in enumerate(lines)
             if line.endswith("// " + tag)}
    return ac.RawModule(ptx=HEADER + ptx, name="bugs.ptx").get_function("pair"), where


def _threads(rng, block, same_warp):
    """Two linear thread indices a < b of a block of `block` threads, in one warp or in two."""
    while True:
        a, b = sorted(int(v) for v in rng.choice(block, 2, replace=False))
        if (a // 32 == b // 32) == same_warp:
            return a, b


def _xyz(linear, shape):
    return (linear % shape[0], linear // shape[0] % shape[1], 0)


# (first, second) -> (earlier access's word, later's word) in the report, or None: no hazard
KINDS = {("write", "write"): ("Write", "Write"), ("read", "write"): ("Read", "Write"),
         ("write", "read"): ("Write", "Read"), ("generic_write", "read"): ("Write", "Read"),
         ("read", "generic_write"): ("Read", "Write"), ("atomic", "read"): ("Write", "Read"),
         ("write", "atomic"): ("Write", "Write"), ("atomic", "atomic"): None, ("read", "read"): None}


@pytest.mark.parametrize("first,second", [p for p, kind in sorted(KINDS.items()) if kind])
def test_pair_ordered_by_a_barrier_is_not(racecheck, capsys, rng, first, second):
    a, b = _threads(rng, 128, bool(rng.integers(2)))
    kernel, _ = _pair(first, second, "bar")
    out = ac.zeros(128, np.int32)
    for _ in range(2):                      # a second launch finds no stale shadow
        kernel((3,), (128,), (out, np.uint32(a), np.uint32(b), np.uint32(rng.integers(256))))
    out.get()
    assert "Race reported" not in capsys.readouterr().err


def test_syncwarp_orders_one_warp_only(racecheck, capsys, rng):
    kernel, _ = _pair("write", "read", "syncwarp")
    out = ac.zeros(128, np.int32)
    a, b = _threads(rng, 128, True)
    kernel((1,), (128,), (out, np.uint32(a), np.uint32(b), np.uint32(7)))
    out.get()
    assert "Race reported" not in capsys.readouterr().err
    a, b = _threads(rng, 128, False)
    kernel((1,), (128,), (out, np.uint32(a), np.uint32(b), np.uint32(7)))
    out.get()
    (r,) = reports(capsys.readouterr().err)
    assert r["severity"] == "Error" and (r["first"], r["second"]) == ("Write", "Read")


# the same pair in global memory: word k of buffer `buf` (a .global access, or a generic one)
GLOBAL_PAIR = PAIR.replace(".param .u32 k)", ".param .u32 k, .param .u64 buf)").replace(
    "mov.u32 %r8, s; shl.b32 %r9, %r3, 2; add.s32 %r9, %r8, %r9;\n  cvt.u64.u32 %rd4, %r9; cvta.shared.u64 %rd5, %rd4;",
    "ld.param.u64 %rd4, [buf]; mul.wide.u32 %rd5, %r3, 4; add.s64 %rd5, %rd4, %rd5;")
GLOBAL_ACCESSES = {
    "write": "st.global.u32 [%rd5], %r7;",
    "generic_write": "st.u32 [%rd5], %r7;",
    "read": "ld.global.u32 %r10, [%rd5]; st.global.u32 [%rd3], %r10;",
    "atomic": "atom.global.add.u32 %r10, [%rd5], 1; st.global.u32 [%rd3], %r10;",
}


def _global_pair(first, second, between):
    assert GLOBAL_PAIR != PAIR
    return _pair(first, second, between, GLOBAL_PAIR, GLOBAL_ACCESSES)


@pytest.mark.parametrize("first,second", sorted(KINDS))
@pytest.mark.parametrize("same_warp", [False, True], ids=["two_warps", "one_warp"])
@pytest.mark.parametrize("space", ["shared", "global"])
def test_pair_without_barrier_is_a_hazard(racecheck, capsys, rng, first, second, same_warp, space):
    """Two threads of a block at one word, nothing between: one report, the two accesses in
    the order the threads made them, at the word's offset in the shared window or at its
    global address; every block has the hazard (none is reported between blocks, which all
    touch the same global word)."""
    shape = (32, 4) if rng.integers(2) else (128, 1)
    a, b = _threads(rng, 128, same_warp)
    k = int(rng.integers(0, 256))
    grid = int(rng.integers(1, 4))
    out = ac.zeros(128, np.int32)
    args = (out, np.uint32(a), np.uint32(b), np.uint32(k))
    if space == "shared":
        kernel, where = _pair(first, second, "none")
        at = 4 * k
    else:
        kernel, where = _global_pair(first, second, "none")
        buf = ac.asarray(rng.integers(0, 100, 256).astype(np.int32))
        args, at = args + (buf,), buf.data.ptr + 4 * k
    kernel((grid,), shape, args)
    out.get()                               # (the launch has run: its report is out)
    got = reports(capsys.readouterr().err)
    if KINDS[(first, second)] is None:
        assert got == []
        return
    (r,) = got
    assert (r["first"], r["second"]) == KINDS[(first, second)]
    assert (r["first_where"], r["second_where"]) == (where["first"], where["second"])
    assert r["function"] == "pair" and r["offset"] == at and r["space"] == f"__{space}__"
    assert (r["first_thread"], r["second_thread"]) == (_xyz(a, shape), _xyz(b, shape))
    assert r["severity"] == ("Warning" if same_warp else "Error")
    assert r["count"] == grid                   # once per block: each block's shadow is its own
    assert r["block"][0] in range(grid) and r["block"][1:] == (0, 0)     # blocks run in parallel: any may be first


def _hash_top(addresses, bits):
    """The top `bits` bits of the global shadow's hash of each address's 8-byte word."""
    words = np.asarray(addresses, np.uint64) >> np.uint64(3)
    return (words * np.uint64(racecheck_ops.WORD_HASH)) >> np.uint64(64 - bits)


def test_racy_word_meeting_another_in_the_global_shadow_is_kept(racecheck, capsys, rng):
    """The racy word and the word its reader stores the value to (out[a]) hash to the same
    entries of the global shadow: the hazard is still found. With one run of entries per hash
    it was forgotten (the store took the run), about once in 4,000 random runs of the pair tests."""
    a, b = _threads(rng, 128, False)
    out = ac.zeros(128, np.int32)
    n = 1 << 18
    buf = ac.zeros(n, np.int32)
    store_at = out.data.ptr + 4 * a
    words = buf.data.ptr + 4 * np.arange(n, dtype=np.uint64)
    bits = racecheck_ops.SET_BITS + 2          # alike in more bits than a set has
    same = (_hash_top(words, bits) == _hash_top([store_at], bits)[0]) & (words % 8 == store_at % 8)
    (candidates,) = np.nonzero(same)
    assert len(candidates) > 0
    k = int(rng.choice(candidates))
    kernel, where = _global_pair("read", "generic_write", "none")
    kernel((1,), (128,), (out, np.uint32(a), np.uint32(b), np.uint32(k), buf))
    out.get()
    (r,) = reports(capsys.readouterr().err)
    assert (r["first"], r["second"]) == ("Read", "Write") and r["offset"] == buf.data.ptr + 4 * k
    assert (r["first_thread"], r["second_thread"]) == ((a, 0, 0), (b, 0, 0))


@pytest.mark.parametrize("first,second", [p for p, kind in sorted(KINDS.items()) if kind])
def test_global_pair_ordered_by_a_barrier_is_not(racecheck, capsys, rng, first, second):
    a, b = _threads(rng, 128, bool(rng.integers(2)))
    kernel, _ = _global_pair(first, second, "bar")
    out = ac.zeros(128, np.int32)
    buf = ac.zeros(256, np.int32)
    for _ in range(2):
        kernel((3,), (128,), (out, np.uint32(a), np.uint32(b), np.uint32(rng.integers(256)), buf))
    out.get()
    assert "Race reported" not in capsys.readouterr().err


def test_global_word_written_by_one_thread_of_each_block_is_not(racecheck, capsys, rng):
    """Thread t of every block writes the same word, then reads it: one thread per block, so
    no hazard inside a block; blocks are not compared."""
    t = int(rng.integers(0, 128))
    kernel, _ = _global_pair("write", "read", "none")
    out = ac.zeros(128, np.int32)
    buf = ac.zeros(256, np.int32)
    kernel((6,), (128,), (out, np.uint32(t), np.uint32(t), np.uint32(rng.integers(256)), buf))
    out.get()
    assert "Race reported" not in capsys.readouterr().err


# each thread reads, writes, reads back and writes again only its own elements (a grid-stride
# loop): a word of `out` and a byte of `flags` (neighbouring threads' bytes are adjacent),
# through .global and generic accesses
OWN = """
.visible .entry own(.param .u64 out, .param .u64 in, .param .u64 flags, .param .u32 n)
{
  .reg .pred %p<2>; .reg .b32 %r<16>; .reg .b64 %rd<10>; .reg .b16 %h<4>;
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [in]; ld.param.u64 %rd3, [flags]; ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %ctaid.x; mov.u32 %r5, %nctaid.x;
  mad.lo.u32 %r6, %r4, %r3, %r2;
  mul.lo.u32 %r7, %r3, %r5;
LOOP:
  setp.ge.u32 %p1, %r6, %r1;
  @%p1 bra DONE;
  mul.wide.u32 %rd4, %r6, 4;
  add.s64 %rd5, %rd2, %rd4;
  add.s64 %rd6, %rd1, %rd4;
  ld.global.u32 %r8, [%rd5];
  st.global.u32 [%rd6], %r8;
  ld.u32 %r9, [%rd6];
  mad.lo.u32 %r10, %r9, 2, 1;
  st.global.u32 [%rd6], %r10;
  cvt.u64.u32 %rd7, %r6;
  add.s64 %rd8, %rd3, %rd7;
  ld.global.u8 %h1, [%rd8];
  add.u16 %h2, %h1, 1;
  st.u8 [%rd8], %h2;
  add.u32 %r6, %r6, %r7;
  bra LOOP;
DONE:
  ret;
}
"""


def test_global_own_elements_only_is_not(racecheck, capsys, rng):
    """Every thread touches only its own elements, more bytes of them than the global shadow
    has entries (colliding bytes forget each other, never make a hazard): nothing reported,
    and the results are right."""
    from anycuda.compiler import abi
    n = abi.RACE_GLOBAL_ENTRIES // 2 + int(rng.integers(0, 1000))
    x = rng.integers(0, 1000, n).astype(np.int32)
    flags = rng.integers(0, 200, n).astype(np.uint8)
    out = ac.asarray(np.full(n, -1, np.int32))          # poisoned
    dflags = ac.asarray(flags)
    kernel = ac.RawModule(ptx=HEADER + OWN, name="own.ptx").get_function("own")
    kernel((int(rng.integers(1, 4)),), (int(rng.choice([64, 128, 256])),), (out, ac.asarray(x), dflags, np.uint32(n)))
    assert np.array_equal(out.get(), 2 * x + 1) and np.array_equal(dflags.get(), flags + 1)
    assert "=========" not in capsys.readouterr().err


# an inclusive scan step: s[t] += s[t - 1], the barrier between the read and the write left out
SCAN = """
.visible .entry scan_step(.param .u64 out, .param .u64 in)
{
  .reg .pred %p<2>; .reg .b32 %r<10>; .reg .b64 %rd<8>;
  .shared .align 4 .b8 s[1024];
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [in];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r2, [%rd4];
  mov.u32 %r3, s;
  shl.b32 %r4, %r1, 2;
  add.s32 %r5, %r3, %r4;
  st.shared.u32 [%r5], %r2;
  bar.sync 0;
  mov.u32 %r6, 0;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra SKIP;
  ld.shared.u32 %r6, [%r5+-4]; // read
SKIP:
  BETWEEN
  ld.shared.u32 %r7, [%r5];
  add.u32 %r8, %r7, %r6;
  st.shared.u32 [%r5], %r8; // write
  add.s64 %rd5, %rd1, %rd3;
  st.global.u32 [%rd5], %r8;
  ret;
}
"""


def test_scan_without_barrier_reports_each_neighbour(racecheck, capsys, rng):
    n = 32 * int(rng.integers(2, 9))
    ptx = HEADER + SCAN.replace("BETWEEN", "")
    x = rng.integers(0, 1000, n).astype(np.int32)
    out = ac.zeros(n, np.int32)
    ac.RawModule(ptx=ptx, name="bugs.ptx").get_function("scan_step")((1,), (n,), (out, ac.asarray(x)))
    out.get()
    got = {r["severity"]: r for r in reports(capsys.readouterr().err)}
    lines = ptx.splitlines()
    read, write = (f"bugs.ptx:{[i + 1 for i, s in enumerate(lines) if s.endswith('// ' + t)][0]}"
                   for t in ("read", "write"))
    # thread t reads what thread t - 1 wrote: within a warp (warnings) and across warps (errors)
    assert set(got) == {"Warning", "Error"}
    for r in got.values():
        assert (r["first"], r["second"], r["first_where"], r["second_where"]) == ("Write", "Read", write, read)
    assert got["Warning"]["count"] == n - n // 32 and got["Error"]["count"] == n // 32 - 1
    assert (got["Warning"]["first_thread"], got["Warning"]["second_thread"]) == ((0, 0, 0), (1, 0, 0))
    assert (got["Error"]["first_thread"], got["Error"]["second_thread"]) == ((31, 0, 0), (32, 0, 0))


def test_scan_with_barrier_is_clean_and_right(racecheck, capsys, rng):
    n = 32 * int(rng.integers(2, 9))
    ptx = HEADER + SCAN.replace("BETWEEN", "bar.sync 0;")
    x = rng.integers(0, 1000, n).astype(np.int32)
    out = ac.asarray(np.full(n, -1, np.int32))          # poisoned
    ac.RawModule(ptx=ptx, name="bugs.ptx").get_function("scan_step")((2,), (n,), (out, ac.asarray(x)))
    got = out.get()
    assert "=========" not in capsys.readouterr().err
    assert np.array_equal(got, x + np.concatenate(([0], x[:-1])))


def test_racecheck_is_a_tool():
    assert memcheck.mode("racecheck") == "racecheck" and memcheck.mode(" RaceCheck ") == "racecheck"


# ---------------------------------------------------------------- nvcc-built, anycuda run

def _bug_lines() -> dict:
    return bug_lines("racecheck_bugs", r"BUG:(\w+:\w+)")


@pytest.fixture(scope="module")
def buggy(tmp_path_factory):
    return built(tmp_path_factory, "racecheck_bugs")


def test_program_reduction_without_first_barrier(buggy):
    r = _run(buggy, "raw", "--sanitize=racecheck", "--error-exitcode", "4")
    (rep,) = reports(r.stderr)
    lines = _bug_lines()
    # threads 0..127 read s[t + 128] before threads 128..255 store it: each a hazard, all errors
    assert rep["function"] == "reduce_no_first_barrier(float const*, float*)"
    assert (rep["first"], rep["second"], rep["severity"], rep["count"]) == ("Read", "Write", "Error", 128)
    assert rep["first_where"].endswith(f"racecheck_bugs.cu:{lines['raw:read']}")
    assert rep["second_where"].endswith(f"racecheck_bugs.cu:{lines['raw:write']}")
    assert (rep["first_thread"], rep["second_thread"], rep["offset"]) == ((0, 0, 0), (128, 0, 0), 512)
    assert "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)" in r.stderr
    assert r.returncode == 4


def test_program_scan_and_clean(buggy):
    r = _run(buggy, "scan", "--sanitize=racecheck")
    got = {rep["severity"]: rep for rep in reports(r.stderr)}
    lines = _bug_lines()
    for rep in got.values():
        assert rep["first_where"].endswith(f"racecheck_bugs.cu:{lines['scan:write']}")
        assert rep["second_where"].endswith(f"racecheck_bugs.cu:{lines['scan:read']}")
    assert (got["Warning"]["count"], got["Error"]["count"]) == (256 - 8, 7)
    assert "RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)" in r.stderr and r.returncode == 0
    plain = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", str(buggy), "clean"],
                           capture_output=True, text=True, timeout=300)
    r = _run(buggy, "clean", "--sanitize=racecheck", "--error-exitcode", "4")
    assert "Race reported" not in r.stderr and r.returncode == 0
    assert "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" in r.stderr
    assert r.stdout == plain.stdout == f"clean: cudaSuccess sum {sum(i % 7 for i in range(256)):.1f}\n"


def test_program_scan_in_global_memory(buggy):
    """A thread reads its left neighbour's global element while that neighbour writes it:
    read-after-write hazards at the element's address, within warps (warnings) and across
    them (errors), as the same scan in shared memory gives."""
    r = _run(buggy, "gscan", "--sanitize=racecheck", "--error-exitcode", "4")
    got = {rep["severity"]: rep for rep in reports(r.stderr)}
    lines = _bug_lines()
    for rep in got.values():
        assert rep["function"] == "scan_global_no_barrier(int const*, int*)" and rep["space"] == "__global__"
        assert (rep["first"], rep["second"]) == ("Write", "Read")
        assert rep["first_where"].endswith(f"racecheck_bugs.cu:{lines['gscan:write']}")
        assert rep["second_where"].endswith(f"racecheck_bugs.cu:{lines['gscan:read']}")
    assert (got["Warning"]["count"], got["Error"]["count"]) == (256 - 8, 7)
    assert (got["Warning"]["first_thread"], got["Warning"]["second_thread"]) == ((0, 0, 0), (1, 0, 0))
    assert (got["Error"]["first_thread"], got["Error"]["second_thread"]) == ((31, 0, 0), (32, 0, 0))
    # the elements' addresses: thread t read element t - 1, 4 bytes apart
    assert got["Error"]["offset"] - got["Warning"]["offset"] == 4 * 31
    assert "RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)" in r.stderr and r.returncode == 4
