"""Device printf formatted as CUDA does, assert() and __trap() reported as CUDA errors, and the
next launch still works (the Python API is not sticky)."""
import numpy as np
import pytest

import anycuda as ac
from conformance import load_cuda, poison


def test_printf_formats(capsys):
    n = 5
    load_cuda("printf").get_function("say")((1,), (32,), (np.int32(n), np.float32(1.5), np.uint64(0)))
    ac.synchronize()
    lines = sorted(capsys.readouterr().out.splitlines())
    want = sorted("t=%d f=%f s=%s c=%c x=%x ll=%d w=%5.2f u=%u %%" % (t, 1.5 * t, "hi", chr(65 + t), 255 + t,
                                                                      -1234567890123 * t, 1.5, 4000000000)
                  for t in range(n))
    assert lines == want


def test_assert_failure_is_cuda_error_assert(capsys):
    v = np.arange(100, dtype=np.int32)
    v[42] = -1
    with pytest.raises(ac.CudaError) as e:
        load_cuda("printf").get_function("check")((4,), (32,), (ac.asarray(v), np.int32(100)))
        ac.synchronize()
    assert e.value.code == ac.CUresult.CUDA_ERROR_ASSERT
    msg = str(e.value) + capsys.readouterr().out
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
