"""Device printf formatted as CUDA does, assert() and __trap() reported as CUDA errors, and the
next launch still works (the Python API is not sticky)."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import anycuda as ac
from conformance import load_cuda, poison


def _printed(capfd):
    """(stdout, stderr) so far, both the Python-level and the file-descriptor-level output."""
    sys.stdout.flush()
    cap = capfd.readouterr()
    return cap.out, cap.err


def test_printf_formats(capfd):
    n = 5
    load_cuda("printf").get_function("say")((1,), (32,), (np.int32(n), np.float32(1.5), np.uint64(0)))
    ac.synchronize()
    lines = sorted(_printed(capfd)[0].splitlines())
    want = sorted("t=%d f=%f s=%s c=%c x=%x ll=%d w=%5.2f u=%u %%" % (t, 1.5 * t, "hi", chr(65 + t), 255 + t,
                                                                      -1234567890123 * t, 1.5, 4000000000)
                  for t in range(n))
    assert lines == want


def test_assert_failure_is_cuda_error_assert(capfd):
    v = np.arange(100, dtype=np.int32)
    v[42] = -1
    with pytest.raises(ac.CudaError) as e:
        load_cuda("printf").get_function("check")((4,), (32,), (ac.asarray(v), np.int32(100)))
        ac.synchronize()
    assert e.value.code == ac.CUresult.CUDA_ERROR_ASSERT
    msg = str(e.value) + "".join(_printed(capfd))
    assert "printf.cu" in msg and "Assertion `v[i] >= 0` failed" in msg and "block: [1,0,0], thread: [10,0,0]" in msg
    ok = poison(2, np.int32)
    load_cuda("printf").get_function("maybe_trap")((2,), (1,), (ok, np.int32(-1)))
    assert (ok.get() == 1).all()


def test_trap_is_a_launch_failure():
    out = ac.zeros(8, np.int32)
    with pytest.raises(ac.CudaError) as e:
        load_cuda("printf").get_function("maybe_trap")((8,), (1,), (out, np.int32(5)))
        ac.synchronize()
    assert e.value.code in (ac.CUresult.CUDA_ERROR_LAUNCH_FAILED, ac.CUresult.CUDA_ERROR_ILLEGAL_INSTRUCTION)


def test_errors_on_a_stream_surface_at_its_synchronize():
    s = ac.Stream()
    out = ac.zeros(8, np.int32)
    load_cuda("printf").get_function("maybe_trap")((8,), (1,), (out, np.int32(0)), stream=s)
    with pytest.raises(ac.CudaError):
        s.synchronize()
    load_cuda("printf").get_function("maybe_trap")((8,), (1,), (out, np.int32(-1)), stream=s)
    s.synchronize()
    assert (out.get() == 1).all()


def test_printf_common_conversions_and_pointer(capfd):
    n = 6
    buf = ac.zeros(16, np.int32)
    load_cuda("printf").get_function("say_all")((2,), (4,), (buf, np.int32(n)))
    ac.synchronize()
    out, _ = _printed(capfd)
    p = buf.data.ptr
    want = sorted("%d %f %s %c %x %d %5.2f %s" % (t - 2, np.float32(0.25) * t, "str", chr(ord("a") + t), 0xBEEF + t,
                                                   1 << (t + 32), 3.14159 * t, "0x%x" % (p + 4 * t))
                  for t in range(n))
    assert sorted(out.splitlines()) == want


def test_printf_flags_widths_from_many_blocks(capfd):
    d, big = 1234.5678, 2 ** 64 - 100
    grid, block = 5, 64
    load_cuda("printf").get_function("say_more")((grid,), (block,), (np.float64(d), np.uint64(big)))
    ac.synchronize()
    out, _ = _printed(capfd)
    want = sorted("[%d,%d] %-6d|%06d|%+d|%.3e|%g|%d|%10.4f|%X|%o|%s" % (b, t, t, b * 1000 + t, -t, d * t, d / (t + 1),
                                                                         big + t, d - b, 0xABC * (t + 1), t + 8,
                                                                         "odd" if b & 1 else "even")
                  for b in range(grid) for t in range(block) if t % 16 == 3)
    assert sorted(out.splitlines()) == want


def test_assert_message_names_file_line_function_block_thread(capfd):
    src = (Path(__file__).parent / "kernels" / "printf.cu").read_text().splitlines()
    line = next(i + 1 for i, s in enumerate(src) if "assert(v[i] >= 0)" in s)
    v = np.arange(64, dtype=np.int32)
    v[37] = -5
    with pytest.raises(ac.CudaError) as e:
        load_cuda("printf").get_function("check")((2,), (32,), (ac.asarray(v), np.int32(64)))
        ac.synchronize()
    assert e.value.code.name == "CUDA_ERROR_ASSERT"
    out, err = _printed(capfd)
    msg = str(e.value) + out + err
    # CUDA's <cassert> names the function with __PRETTY_FUNCTION__, the NVRTC stand-in with __func__
    assert re.search(rf"printf\.cu:{line}: (void check\(const int \*, int\)|check): "
                     r"block: \[1,0,0\], thread: \[5,0,0\] Assertion `v\[i\] >= 0` failed\.", msg), msg


def test_assert_in_2d_blocks_then_recovery(capfd):
    with pytest.raises(ac.CudaError) as e:
        load_cuda("printf").get_function("check2d")((2, 2), (4, 3), (np.int32(2), np.int32(1)))
        ac.synchronize()
    assert e.value.code.name == "CUDA_ERROR_ASSERT"
    out, err = _printed(capfd)
    msg = str(e.value) + out + err
    assert ("block: [0,1,0], thread: [2,1,0]" in msg) or ("block: [1,1,0], thread: [2,1,0]" in msg)
    # a healthy launch of the same kernel works afterwards, and so does printf
    load_cuda("printf").get_function("check2d")((2, 2), (4, 3), (np.int32(7), np.int32(1)))
    load_cuda("printf").get_function("say")((1,), (32,), (np.int32(1), np.float32(2.0), np.uint64(0)))
    ac.synchronize()
    out, _ = _printed(capfd)
    assert out.splitlines() == ["t=0 f=0.000000 s=hi c=A x=ff ll=0 w= 2.00 u=4000000000 %"]


def test_trap_then_healthy_launch():
    out = poison(16, np.int32)
    with pytest.raises(ac.CudaError) as e:
        load_cuda("printf").get_function("maybe_trap")((16,), (1,), (out, np.int32(15)))
        ac.synchronize()
    assert e.value.code.name in ("CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION")
    ok = poison(16, np.int32)
    load_cuda("printf").get_function("maybe_trap")((16,), (1,), (ok, np.int32(-1)))
    ac.synchronize()
    assert (ok.get() == 1).all()


def test_printf_string_from_memory_and_line_order(capfd):
    text = np.frombuffer(b"abcdefg\0", np.uint8)
    grid, block, lines = 3, 16, 4
    load_cuda("printf").get_function("say_seq")((grid,), (block,), (ac.asarray(text), np.int32(lines)))
    ac.synchronize()
    out, _ = _printed(capfd)
    got = out.splitlines()
    want = ["%d:%d <%s>" % (t, k, "abcdefg"[(t + k) % 4:]) for t in range(grid * block) for k in range(lines)]
    assert sorted(got) == sorted(want)
    for t in range(grid * block):                   # one thread's lines keep their order
        mine = [g for g in got if g.startswith(f"{t}:")]
        assert mine == [w for w in want if w.startswith(f"{t}:")]
