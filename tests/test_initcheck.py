"""initcheck (compiler/ops/initcheck.py, runtime/shadow.py, runtime/initcheck.py): our own kernels
that read device memory nothing wrote, in PTX through the Python API and in CUDA C++ built by
nvcc through `anycuda run --sanitize=initcheck`. Which threads must be reported follows from
what the test wrote (fresh random sizes each run); each report is checked for its kernel,
thread and block, address, size and line."""
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import anycuda as ac
from anycuda.driver import api
from anycuda.libraries.memory import array as library_view
from anycuda.runtime import sanitizer
from test_sanitizer import HEADER, NVCC, _run, reports as memcheck_reports

HERE = Path(__file__).parent

READ = re.compile(
    r"========= Uninitialized __global__ memory read of size (?P<size>\d+) bytes\n"
    r"=========     at (?P<function>.+?)\+0x[0-9a-f]+ in (?P<where>\S+)\n"
    r"=========     by thread \((?P<tid>[\d,]+)\) in block \((?P<block>[\d,]+)\)\n"
    r"=========     Address 0x(?P<address>[0-9a-f]+)\n")


def reports(text: str) -> list:
    """The initcheck reports in `text`: dicts of READ's groups (indices as int tuples)."""
    return memcheck_reports(text, READ)


@pytest.fixture
def initcheck(monkeypatch, context):
    monkeypatch.setenv("ANYCUDA_SANITIZE", "initcheck")
    monkeypatch.setenv("ANYCUDA_SANITIZE_PRINT_LIMIT", "100000")


# out[i] = in[i] for i < n: one 4-byte read of `in` per thread
COPY = """
.visible .entry copy(.param .u64 out, .param .u64 in, .param .u32 n)
{
  .reg .pred %p; .reg .b32 %r<6>; .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [in]; ld.param.u32 %r5, [n];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  setp.ge.u32 %p, %r4, %r5;
  @%p bra done;
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r1, [%rd4];
  add.s64 %rd5, %rd1, %rd3;
  st.global.u32 [%rd5], %r1;
done:
  ret;
}
"""

# out[i] = i, through a generic address
FILL = """
.visible .entry fill(.param .u64 out)
{
  .reg .b32 %r<5>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.u32 %rd2, %r4, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.u32 [%rd3], %r4;
  ret;
}
"""

# each thread adds 1 to its own word
ATOMIC = """
.visible .entry bump(.param .u64 p)
{
  .reg .b32 %r<3>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  atom.global.add.u32 %r2, [%rd3], 1;
  ret;
}
"""


def _kernel(ptx: str, name: str, rename: str = None):
    text = HEADER + ptx
    if rename:
        text = text.replace(name, rename)
    return ac.RawModule(ptx=text, name="reads.ptx").get_function(rename or name)


def _line(ptx: str, text: str) -> str:
    (n,) = [i + 1 for i, line in enumerate((HEADER + ptx).splitlines()) if text in line]
    return f"reads.ptx:{n}"


def _copy(src, n: int, block: int = 64):
    """Launch COPY over `n` elements of `src`; the output, once the launch is done."""
    out = ac.full(n, -1, np.int32)
    _kernel(COPY, "copy")(((n + block - 1) // block,), (block,), (out, src, np.uint32(n)))
    return out.get()


def _read_indices(got, block: int = 64) -> list:
    return sorted(r["block"][0] * block + r["tid"][0] for r in got)


def test_read_of_never_written_memory_names_each_thread(initcheck, capsys, rng):
    n = int(rng.integers(40, 300))
    src = ac.empty(n, np.int32)
    before = sanitizer.errors_found()
    _copy(src, n)                                  # the launch succeeds: initcheck fails nothing
    got = reports(capsys.readouterr().err)
    assert _read_indices(got) == list(range(n))
    for r in got:
        i = r["block"][0] * 64 + r["tid"][0]
        assert (r["function"], r["size"], r["where"]) == ("copy", 4, _line(COPY, "ld.global"))
        assert r["address"] == src.data.ptr + 4 * i
    assert sanitizer.errors_found() - before == n


def test_memset_of_half_reports_only_the_other_half(initcheck, capsys, rng):
    n = int(rng.integers(64, 300))
    k = int(rng.integers(1, n))
    value = int(rng.integers(1, 1 << 31))
    src = ac.empty(n, np.int32)
    api.cuMemsetD32(src.data.ptr, value, k)
    out = _copy(src, n)
    assert _read_indices(reports(capsys.readouterr().err)) == list(range(k, n))
    assert (out[:k] == value).all()


def test_word_written_in_part_is_reported(initcheck, capsys, rng):
    n = 64
    j = int(rng.integers(0, n))
    src = ac.empty(n, np.int32)
    api.cuMemsetD8(src.data.ptr, 0, 4 * j)
    api.cuMemsetD8(src.data.ptr + 4 * j, 0, int(rng.integers(1, 4)))          # 1 to 3 of its 4 bytes
    api.cuMemsetD8(src.data.ptr + 4 * (j + 1), 0, 4 * (n - j - 1))
    _copy(src, n)
    (r,) = reports(capsys.readouterr().err)
    assert (r["tid"][0] + 64 * r["block"][0], r["size"], r["address"]) == (j, 4, src.data.ptr + 4 * j)


def test_kernel_writes_then_another_kernel_reads(initcheck, capsys, rng):
    blocks = int(rng.integers(1, 6))
    n = 64 * blocks
    src = ac.empty(n, np.int32)
    _kernel(FILL, "fill")((blocks,), (64,), (src,))
    out = _copy(src, n)                             # after the first: same stream
    assert reports(capsys.readouterr().err) == []
    assert np.array_equal(out, np.arange(n, dtype=np.int32))


def test_copies_count_as_writes(initcheck, capsys, rng):
    n = int(rng.integers(64, 500))
    data = rng.integers(-1000, 1000, n).astype(np.int32)
    host_to_device = ac.asarray(data)
    device_to_device = ac.empty(n, np.int32)
    api.cuMemcpy(device_to_device.data.ptr, host_to_device.data.ptr, 4 * n)
    for src in (host_to_device, device_to_device):
        assert np.array_equal(_copy(src, n), data)
    assert reports(capsys.readouterr().err) == []


def test_2d_copy_leaves_the_pitch_padding_unwritten(initcheck, capsys, rng):
    width, pitch, height = int(rng.integers(1, 16)), 16, int(rng.integers(2, 9))
    data = rng.integers(0, 100, (height, width)).astype(np.int32)
    dst = ac.empty(pitch * height, np.int32)
    api.cuMemcpy2D(data.ctypes.data, 4 * width, dst.data.ptr, 4 * pitch, 4 * width, height)
    out = _copy(dst, pitch * height).reshape(height, pitch)
    assert _read_indices(reports(capsys.readouterr().err)) == \
        [row * pitch + col for row in range(height) for col in range(width, pitch)]
    assert np.array_equal(out[:, :width], data)


def test_atomic_reads_then_writes(initcheck, capsys, rng):
    n = int(rng.integers(2, 64))
    words = ac.empty(n, np.int32)
    _kernel(ATOMIC, "bump")((1,), (n,), (words,))
    assert (words.get() == 1).all()                 # memory zero-filled here: the atomics were made
    got = reports(capsys.readouterr().err)
    assert sorted(r["tid"][0] for r in got) == list(range(n))
    assert {(r["size"], r["where"]) for r in got} == {(4, _line(ATOMIC, "atom.global"))}
    _copy(words, n)                                 # the atomics wrote them
    assert reports(capsys.readouterr().err) == []


# each thread loads four words at once
VECTOR = """
.visible .entry quads(.param .u64 out, .param .u64 in)
{
  .reg .b32 %r<6>; .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [in];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 16;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd4];
  add.s64 %rd5, %rd1, %rd3;
  st.global.v4.u32 [%rd5], {%r2, %r3, %r4, %r5};
  ret;
}
"""


def test_vector_load_with_one_word_unwritten(initcheck, capsys, rng):
    n = int(rng.integers(2, 64))
    holes = set(int(j) for j in rng.choice(4 * n, size=int(rng.integers(1, n + 1)), replace=False))
    src, out = ac.empty(4 * n, np.int32), ac.empty(4 * n, np.int32)
    for j in set(range(4 * n)) - holes:
        api.cuMemsetD32(src.data.ptr + 4 * j, j, 1)
    _kernel(VECTOR, "quads")((1,), (n,), (out, src))
    out.get()
    got = reports(capsys.readouterr().err)
    assert sorted(r["tid"][0] for r in got) == sorted({j // 4 for j in holes})
    for r in got:
        assert (r["size"], r["address"]) == (16, src.data.ptr + 16 * r["tid"][0])
    _copy(out, 4 * n)                                # the vector stores wrote all four words
    assert reports(capsys.readouterr().err) == []


def test_managed_memory_counts_as_written(initcheck, capsys):
    n = 64
    p = api.cuMemAllocManaged(4 * n, 1)
    try:
        _copy(p, n)
        assert reports(capsys.readouterr().err) == []
    finally:
        api.cuMemFree(p)


def test_library_views_count_as_written(initcheck, capsys, rng):
    n = int(rng.integers(64, 300))
    src = ac.empty(n, np.int32)
    m = int(rng.integers(1, n))
    library_view(src.data.ptr, m, np.int32)[:] = 5          # what a library call writes its output through
    _copy(src, n)
    assert _read_indices(reports(capsys.readouterr().err)) == list(range(m, n))


def test_clean_kernel_same_results_and_no_report(monkeypatch, context, capsys, rng):
    n = int(rng.integers(100, 2000))
    data = rng.integers(-1000, 1000, n).astype(np.int32)
    results = {}
    for mode in ("", "initcheck"):
        monkeypatch.setenv("ANYCUDA_SANITIZE", mode)
        src, out = ac.asarray(data), ac.full(n, 12345, np.int32)
        name = f"copy_{mode or 'plain'}"
        _kernel(COPY, "copy", name)(((n + 63) // 64,), (64,), (out, src, np.uint32(n)))
        results[mode] = out.get()
    assert "=========" not in capsys.readouterr().err
    assert np.array_equal(results[""], data) and np.array_equal(results["initcheck"], data)


def test_tool_is_part_of_the_compile_cache_key(monkeypatch, context, fresh_cache, capsys):
    src = ac.empty(64, np.int32)
    monkeypatch.setenv("ANYCUDA_SANITIZE", "")
    _copy(src, 64)                                   # compiled unchecked, cached on disk
    assert reports(capsys.readouterr().err) == []
    monkeypatch.setenv("ANYCUDA_SANITIZE", "initcheck")
    monkeypatch.setenv("ANYCUDA_SANITIZE_PRINT_LIMIT", "1000")
    src = ac.empty(64, np.int32)                     # tracked: made under initcheck
    _copy(src, 64)
    assert len(reports(capsys.readouterr().err)) == 64


# ---------------------------------------------------------------- an nvcc-built program, anycuda run

@pytest.fixture(scope="module")
def program(tmp_path_factory):
    if NVCC is None:
        pytest.skip("needs nvcc (the CUDA toolkit) on PATH")
    exe = tmp_path_factory.mktemp("initcheck") / "initcheck_bugs"
    r = subprocess.run([NVCC, "-lineinfo", "-o", str(exe), str(HERE / "programs" / "initcheck_bugs.cu")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return exe


def _bug_line() -> int:
    lines = (HERE / "programs" / "initcheck_bugs.cu").read_text().splitlines()
    (n,) = [i + 1 for i, line in enumerate(lines) if "BUG:uninit" in line]
    return n


@pytest.mark.parametrize("case, first", [("uninit", 0), ("half", 128)])
def test_program_reads_reported(program, case, first):
    r = _run(program, case, "--sanitize=initcheck", "--print-limit", "1000", "--error-exitcode", "3")
    got = reports(r.stderr)
    assert sorted(64 * rep["block"][0] + rep["tid"][0] for rep in got) == list(range(first, 256)), r.stderr
    for rep in got:
        assert (rep["function"], rep["size"]) == ("add_one(int*, int const*, int)", 4)
        assert rep["where"].endswith(f"initcheck_bugs.cu:{_bug_line()}"), rep["where"]
    assert f"{case}: cudaSuccess" in r.stdout
    assert f"========= ERROR SUMMARY: {256 - first} errors" in r.stderr
    assert r.returncode == 3


def test_program_clean(program):
    plain = _run(program, "clean")
    r = _run(program, "clean", "--sanitize=initcheck", "--error-exitcode", "3")
    assert r.returncode == 0 and "========= ERROR SUMMARY: 0 errors" in r.stderr, r.stderr
    assert r.stdout == plain.stdout and f"clean: cudaSuccess sum {3 * sum(range(256)) + 256}" in r.stdout
