"""The Python API: arrays, memory table, argument marshalling, launch configuration errors,
streams and events, the CUDA C++ compiler front door and the command line."""
import subprocess
import sys
import threading

import numpy as np
import pytest

import anycuda as ac
from anycuda.rawmodule import marshal_args
from anycuda.runtime import memory
from anycuda.runtime.program import load_program
from conformance import load_cuda

SAXPY = r'''
extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}'''


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.int64, np.complex64])
def test_array_round_trip(rng, dtype):
    host = (rng.standard_normal((3, 5, 7)) * 100).astype(dtype)
    d = ac.asarray(host)
    assert d.shape == host.shape and d.dtype == host.dtype and d.nbytes == host.nbytes
    assert np.array_equal(d.get(), host)
    assert d.data.ptr % 256 == 0
    assert np.array_equal(ac.zeros((4, 4), dtype).get(), np.zeros((4, 4), dtype))
    assert np.array_equal(ac.ones(3, dtype).get(), np.ones(3, dtype))
    d.set(host * 0)
    assert not d.get().any()
    assert ac.empty(0, dtype).get().size == 0


def test_memory_table():
    a = memory.allocate(1000)
    assert memory.lookup(a.ptr) is a and memory.lookup(a.ptr + 999) is a
    assert memory.lookup(a.ptr + 1000) is not a
    memory.free(a.ptr)
    with pytest.raises(ac.CudaError) as e:
        memory.free(a.ptr)
    assert e.value.code == ac.CUresult.CUDA_ERROR_INVALID_VALUE


def test_argument_marshalling_follows_the_ptx_types():
    prog = load_program(""".version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p, .param .f32 f, .param .s8 c, .param .align 8 .b8 s[12], .param .f64 d) { ret; }
""")
    params = prog.kernel("k").params
    buf = marshal_args(params, (ac.zeros(1), 1.5, -2, b"abcdefghijkl", np.float64(2.0)))
    assert len(buf) == 40
    assert buf[8:12] == np.float32(1.5).tobytes() and buf[12:13] == b"\xfe"
    assert buf[16:28] == b"abcdefghijkl" and buf[32:40] == np.float64(2.0).tobytes()
    for bad in [(ac.zeros(1), np.float64(1.5), -2, b"x" * 12, 1.0),       # f64 scalar for an f32
                (ac.zeros(1), 1.5, 300, b"x" * 12, 1.0),                   # 300 does not fit .s8
                (ac.zeros(1), 1.5, -2, b"x" * 11, 1.0),                    # struct of the wrong size
                (ac.zeros(1), 1.5, -2, b"x" * 12)]:                        # too few
        with pytest.raises(TypeError):
            marshal_args(params, bad)


def test_saxpy_from_source_and_from_ptx(rng):
    mod = ac.RawModule(code=SAXPY)
    n = 10_001
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dy = ac.asarray(y)
    mod.get_function("saxpy")(((n + 255) // 256,), 256, (ac.asarray(x), dy, np.float32(3), np.int32(n)))
    assert np.allclose(dy.get(), 3 * x + y, rtol=1e-6, atol=1e-6)
    again = ac.RawModule(ptx=mod.ptx)
    again.get_function("saxpy")(((n + 255) // 256,), 256, (ac.asarray(x), dy, -3.0, n))
    assert np.allclose(dy.get(), y, rtol=1e-5, atol=1e-6)
    with pytest.raises(ac.CudaError) as e:
        mod.get_function("nope")
    assert e.value.code == ac.CUresult.CUDA_ERROR_NOT_FOUND and "saxpy" in str(e.value)


@pytest.mark.parametrize("grid, block", [((0,), (1,)), ((1,), (1025,)), ((1,), (32, 32, 2)), ((1, 1, 1, 1), (1,)),
                                         ((1,), (0,)), ((2 ** 31,), (1,))])
def test_bad_launch_configurations(grid, block):
    k = ac.RawModule(code=SAXPY).get_function("saxpy")
    with pytest.raises(ac.CudaError) as e:
        k(grid, block, (ac.zeros(1), ac.zeros(1), 1.0, 1))
    assert e.value.code == ac.CUresult.CUDA_ERROR_INVALID_VALUE


def test_too_much_shared_memory():
    k = ac.RawModule(code=SAXPY).get_function("saxpy")
    with pytest.raises(ac.CudaError):
        k((1,), (1,), (ac.zeros(1), ac.zeros(1), 1.0, 1), shared_mem=64 * 1024)
    k.max_dynamic_shared_size_bytes = 64 * 1024         # opt in, as with cudaFuncSetAttribute
    k((1,), (1,), (ac.zeros(1), ac.zeros(1), 1.0, 1), shared_mem=64 * 1024)
    # lowered again: the configuration that ran is refused, by the kernel object and by the
    # launch itself (which keeps checked configurations)
    k.max_dynamic_shared_size_bytes = 1024
    with pytest.raises(ac.CudaError):
        k((1,), (1,), (ac.zeros(1), ac.zeros(1), 1.0, 1), shared_mem=64 * 1024)
    with pytest.raises(ac.CudaError):
        k.kernel.launch((1, 1, 1), (1, 1, 1), bytes(k.param_size), 64 * 1024)


def test_streams_keep_order_and_default_stream_waits():
    order = []
    s1, s2 = ac.Stream(), ac.Stream()
    gate = threading.Event()
    s1.enqueue(gate.wait)
    s1.enqueue(order.append, "s1-a")
    s2.enqueue(order.append, "s2-a")
    s2.synchronize()
    assert order == ["s2-a"] and not s1.query()
    gate.set()
    ac.default_stream.enqueue(order.append, "default")    # waits for s1's work first
    ac.default_stream.synchronize()
    assert order == ["s2-a", "s1-a", "default"]


def test_events_time_stream_work():
    s = ac.Stream()
    start, end = ac.Event(), ac.Event()
    start.record(s)
    k = ac.RawModule(code=SAXPY).get_function("saxpy")
    n = 1 << 20
    k((n // 256,), (256,), (ac.zeros(n), ac.zeros(n), 1.0, n), stream=s)
    end.record(s)
    end.synchronize()
    assert ac.get_elapsed_time(start, end) >= 0


def test_compile_errors_carry_the_log():
    load_cuda("arith_int")        # skips when no compiler exists
    with pytest.raises(ac.CompileError) as e:
        ac.RawModule(code='extern "C" __global__ void k() { this is not C++; }')
    assert "error" in str(e.value)


def test_compile_cache_is_used(tmp_path, monkeypatch):
    load_cuda("arith_int")
    from anycuda import cudac
    monkeypatch.setenv("ANYCUDA_CACHE_DIR", str(tmp_path))
    first = cudac.compile_to_ptx(SAXPY)
    files = list(tmp_path.rglob("*.ptx"))
    assert len(files) == 1
    calls = []
    monkeypatch.setattr(cudac, "_compile_nvcc", lambda *a: calls.append(a) or "")
    monkeypatch.setattr(cudac, "_compile_nvrtc", lambda *a: calls.append(a) or ("", {}))     # (ptx, lowered names)
    assert cudac.compile_to_ptx(SAXPY) == first and not calls
    files[0].write_text("garbage")                 # a corrupt entry is compiled again
    cudac.compile_to_ptx(SAXPY)
    assert calls


def test_command_line():
    info = subprocess.run([sys.executable, "-m", "anycuda.cli", "info"], capture_output=True, text=True, timeout=120)
    assert info.returncode == 0 and "compute capability" in info.stdout and "multiprocessors" in info.stdout
    assert "libcuda.so.1" in info.stdout
    demo = subprocess.run([sys.executable, "-m", "anycuda.cli", "demo", "vector_add", "histogram"],
                          capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "2 of 2 examples correct" in demo.stdout


def test_driver_answers_that_the_runtime_in_nvidias_cuda13_libraries_needs():
    """cuMemFree(0) and cuMemFreeHost(NULL) succeed (free(NULL), as NVIDIA's driver: that
    runtime passes cudaFree(0) on), and function attributes 16 and 17 (past CUDA 13.0's
    CU_FUNC_ATTRIBUTE_MAX), which its cudaFuncGetAttributes reads, are answered."""
    from anycuda.driver import api
    ptx = (".version 8.0\n.target sm_80\n.address_size 64\n"
           ".visible .entry nothing()\n{\n\tret;\n}\n")
    api.cuInit(0)
    api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
    try:
        api.cuMemFree(0)
        api.cuMemFreeHost(0)
        mod = api.cuModuleLoadData(ptx.encode())
        func = api.cuModuleGetFunction(mod, "nothing")
        assert [api.cuFuncGetAttribute(a, func) for a in (16, 17)] == [0, 0]
        api.cuModuleUnload(mod)
    finally:
        api.cuDevicePrimaryCtxRelease(0)
