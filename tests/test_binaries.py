"""Unmodified nvcc-built programs run through `anycuda run`: the CUDA runtime (linked
statically, the default, or NVIDIA's libcudart.so shared) finds anycuda's libcuda.so.1 and
runs on the CPU. Each program is our own small CUDA source in tests/programs/, built with
nvcc at test time; its output is checked against values computed here."""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conformance import normalised_jacobi

HERE = Path(__file__).parent
NVCC = shutil.which("nvcc")

pytestmark = pytest.mark.skipif(NVCC is None, reason="needs nvcc (the CUDA toolkit) on PATH")

MODES = {
    "static": [],                       # nvcc's default: cudart linked into the program
    "shared": ["-cudart", "shared"],    # NVIDIA's libcudart.so.13 on top of our libcuda.so.1
    "rdc": ["-rdc=true"],               # relocatable device code: fatbin wrapper v2, PTX in __nv_relfatbin
    "sass": ["-gencode", "arch=compute_80,code=sm_80"],      # machine code only, no PTX
    "ptds": ["--default-stream", "per-thread"],               # the runtime calls the _ptsz/_ptds entry points
}


def _toolkit_libraries():
    """Folders that hold the libcudart.so of the toolkit nvcc belongs to (for -cudart
    shared), as nvcc itself reports its library folders."""
    r = subprocess.run([NVCC, "-dryrun", "-cudart", "shared", "-o", "x", "x.cu"], capture_output=True, text=True)
    folders = re.findall(r'"-L([^"]+)"', "\n".join(l for l in r.stderr.splitlines() if "LIBRARIES=" in l))
    return [f for f in folders if list(Path(f).glob("libcudart.so*"))]


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """build(program, mode) -> path of tests/programs/<program>.cu built by nvcc (once)."""
    out = tmp_path_factory.mktemp("programs")
    built = {}

    def build_(program: str, mode: str = "static") -> Path:
        if (program, mode) not in built:
            exe = out / f"{program}-{mode}"
            r = subprocess.run([NVCC, *MODES[mode], "-o", str(exe), str(HERE / "programs" / f"{program}.cu")],
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr
            built[program, mode] = exe
        return built[program, mode]
    return build_


def run(exe, *args, check=True):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(_toolkit_libraries() + [p for p in (env.get("LD_LIBRARY_PATH"),) if p])
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", str(exe), *map(str, args)],
                       capture_output=True, text=True, timeout=300, env=env)
    if check:
        assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def _saxpy(build, tmp_path, rng, mode):
    n = 100_003                          # not a multiple of the block size: the last block is partial
    a = np.float32(rng.uniform(-4, 4))
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    src, dst = tmp_path / "in.bin", tmp_path / "out.bin"
    src.write_bytes(np.array([n], np.int32).tobytes() + a.tobytes() + x.tobytes() + y.tobytes())
    r = run(build("saxpy", mode), src, dst)
    assert f"saxpy done n={n}" in r.stdout
    got = np.fromfile(dst, np.float32)
    assert got.shape == (n,)
    unfused = a * x + y                                    # float32 multiply, then add
    fused = (np.float64(a) * x.astype(np.float64) + y).astype(np.float32)   # nvcc may contract to fma
    bad = ~((got == unfused) | (got == fused))
    assert not bad.any(), f"{bad.sum()} wrong, first at {np.argmax(bad)}: {got[bad][:4]} vs {unfused[bad][:4]}"


def test_saxpy_static_cudart(build, tmp_path, rng):
    _saxpy(build, tmp_path, rng, "static")


def test_saxpy_shared_cudart(build, tmp_path, rng):
    _require("shared")
    _saxpy(build, tmp_path, rng, "shared")


def test_saxpy_relocatable_device_code(build, tmp_path, rng):
    _saxpy(build, tmp_path, rng, "rdc")


@pytest.mark.parametrize("mode", ["static", "rdc"])
def test_constant_and_device_symbols(build, mode):
    r = run(build("symbols", mode))
    lines = r.stdout.splitlines()
    assert lines[0] == "counter 300 table_size 32 table[5] 9"
    x = ((np.arange(300) % 17) * 0.25 - 2.0).astype(np.float64)
    c = [1.5, -2.0, 0.5, 0.125]
    table = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    want = c[0] + x * (c[1] + x * (c[2] + x * c[3])) + table[np.arange(300) % 8]
    got = np.array([float(v) for v in lines[1:]])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _require(mode):
    if mode == "shared" and not _toolkit_libraries():
        pytest.skip("the CUDA toolkit next to nvcc has no libcudart.so")


@pytest.mark.parametrize("mode", ["static", "shared"])
def test_device_printf(build, mode):
    _require(mode)
    r = run(build("printf", mode))
    lines = r.stdout.splitlines()
    assert lines[0] == "host before" and lines[7] == "host after: no error"
    want = {f"block {b} thread {t} value {100 + 3 * b + t} {0.5 * t:.2f} ok" for b in range(2) for t in range(3)}
    assert set(lines[1:7]) == want
    assert lines[8:] == ["bye from the device"]


@pytest.mark.parametrize("mode", ["static", "shared"])
def test_launch_errors_and_sticky_fault(build, mode):
    _require(mode)
    r = run(build("errors", mode))
    out = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    assert out["malloc"] == "cudaSuccess"
    # a configuration the device cannot run: the driver's CUDA_ERROR_INVALID_VALUE, which the
    # runtime passes on, as this program printed on an H200 (driver 580, CUDA 13.0)
    assert out["bad config"] == "cudaErrorInvalidValue"        # a block of 2048 threads
    assert out["after clear"] == "cudaSuccess"                 # ... and cudaGetLastError clears it
    assert out["too much shared"] == "cudaErrorInvalidValue"
    assert out["empty grid"] == "cudaErrorInvalidValue"
    assert out["bad config ex"] == "cudaErrorInvalidValue"     # cudaLaunchKernelEx
    assert out["driver api bad config"] == "1"                 # the program's own cuLaunchKernel
    assert out["good launch"] == "cudaSuccess" and out["copy"] == "cudaSuccess"
    assert "h[63] 7" in r.stdout
    # an out-of-bounds store: reported at the next synchronisation, and sticky, as on a GPU
    assert out["fault sync"] == "cudaErrorIllegalAddress"
    assert out["last error"] == "cudaErrorIllegalAddress"
    assert out["malloc after fault"] == "cudaErrorIllegalAddress"


def _cuda12_runtime():
    """The folder of NVIDIA's libcudart.so.12 from the nvidia-cuda-runtime-cu12 wheel, or None."""
    try:
        import nvidia.cuda_runtime
    except ImportError:
        return None
    found = [p for p in map(Path, nvidia.cuda_runtime.__path__) if (p / "lib" / "libcudart.so.12").exists()]
    return found[0] / "lib" if found else None


@pytest.mark.parametrize("mode", ["static", "shared"])
def test_cuda12_runtime(tmp_path, rng, mode):
    """NVIDIA's CUDA 12 runtime (which nvcc 13 no longer links), linked into the program or shared,
    registers a fatbinary, copies to a __constant__ symbol and launches through anycuda's libcuda;
    a bad configuration is cudaErrorInvalidConfiguration, the CUDA 12 runtime's own answer (the
    CUDA 13.0 runtime passes the driver's CUDA_ERROR_INVALID_VALUE on instead, test above)."""
    lib = _cuda12_runtime()
    if lib is None:
        pytest.skip("needs the nvidia-cuda-runtime-cu12 wheel (in the test extra)")
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("needs a C++ compiler")
    fatbin, exe = tmp_path / "kernel.fatbin", tmp_path / "runtime12"
    r = subprocess.run([NVCC, "-fatbin", "-gencode", "arch=compute_80,code=compute_80", "-o", str(fatbin),
                        str(HERE / "programs" / "runtime12_kernel.cu")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    runtime = [str(lib / "libcudart_static.a"), "-lpthread", "-ldl", "-lrt"] if mode == "static" else \
        [str(lib / "libcudart.so.12"), f"-Wl,-rpath,{lib}"]
    r = subprocess.run([compiler, "-o", str(exe), str(HERE / "programs" / "runtime12.cpp"), *runtime],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    scale, n = int(rng.integers(2, 50)), int(rng.integers(700, 1024))
    out = dict(line.split(": ", 1) for line in run(exe, fatbin, scale, n).stdout.splitlines() if ": " in line)
    assert out["runtime"] == "12"
    assert out["malloc"] == out["symbol"] == out["launch"] == out["copy"] == "cudaSuccess"
    assert int(out["sum"]) == scale * n * (n - 1) // 2
    assert out["bad config"] == out["last error"] == "cudaErrorInvalidConfiguration"
    assert out["after clear"] == "cudaSuccess"


def test_streams_events_and_host_functions(build):
    r = run(build("streams"))
    lines = r.stdout.splitlines()
    assert lines[0] == "query cudaSuccess elapsed_ok 1 callbacks 11"
    n, half = 4096, 2048
    h = (np.arange(n) % 100).astype(np.float64)
    want = h.copy()
    want[:half] *= 2
    want[half:] = 3 * h[half:] + want[:half]
    assert lines[1] == f"h[1] {want[1]:g} h[2049] {want[half + 1]:g} sum {want.sum():.1f}"


def test_runtime_api_tour(build):
    r = run(build("runtime_api"))
    assert r.stdout.splitlines() == [
        "count 1 dev 0 warp 32 32 maxthreads 1024 name_nonempty 1",
        "meminfo 1",
        "memset -1",                            # every byte 0xff
        "d2d 0 999",
        "managed 255",
        f"reverse {99 * 1.5:g} 0",               # s[n - 1 - t] for t = 0 and 99
        "func maxthreads 1024",
        "occupancy block 1",
        "active blocks 1",
        f"pitch 1 back {3 * 10 + 9:g}",
        "ptr type 2",                           # cudaMemoryTypeDevice
        "done",
    ]


def test_relocatable_device_code_over_two_units(tmp_path):
    """-rdc=true with two translation units: the PTX of both is linked (extern functions and
    variables, one template instantiation in both, a private helper and printf strings each)."""
    exe = tmp_path / "rdc_two_units"
    r = subprocess.run([NVCC, "-rdc=true", "-o", str(exe), str(HERE / "programs" / "rdc_main.cu"),
                        str(HERE / "programs" / "rdc_lib.cu")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = run(exe).stdout.splitlines()
    factor = 2.5
    assert lines == [
        "launch cudaSuccess",
        f"main unit: factor {factor:.2f}",
        "lib unit: calls 100",
        "lib cudaSuccess",
        f"h[7] {7 * factor + 1:g} tags[7] {2 * 7 + 1000} calls 100 lib_tag {2 * 3 * 10 + 100}",
    ]


LINK_A = """
.version 8.0
.target sm_75
.address_size 64
.extern .func (.param .b32 out) add_base(.param .b32 x);
.extern .global .align 4 .u32 base;
.global .align 4 .u32 hidden = 5;
.weak .func (.param .b32 out) twice(.param .b32 x)
{
.reg .b32 %r<3>;
ld.param.u32 %r1, [x];
add.s32 %r2, %r1, %r1;
st.param.b32 [out], %r2;
ret;
}
.visible .entry k(.param .u64 p)
{
.reg .b32 %r<5>;
.reg .b64 %rd<3>;
ld.param.u64 %rd1, [p];
cvta.to.global.u64 %rd2, %rd1;
ld.global.u32 %r1, [hidden];
{ .param .b32 a; st.param.b32 [a], %r1; .param .b32 b;
call.uni (b), twice, (a); ld.param.b32 %r2, [b]; }
{ .param .b32 a; st.param.b32 [a], %r2; .param .b32 b;
call.uni (b), add_base, (a); ld.param.b32 %r3, [b]; }
st.global.u32 [%rd2], %r3;
ret;
}
"""

LINK_B = """
.version 8.3
.target sm_75
.address_size 64
.visible .global .align 4 .u32 base = 100;
.global .align 4 .u32 hidden = 7;
.weak .func (.param .b32 out) twice(.param .b32 x)
{
.reg .b32 %r<3>;
ld.param.u32 %r1, [x];
mul.lo.s32 %r2, %r1, 3;
st.param.b32 [out], %r2;
ret;
}
.visible .func (.param .b32 out) add_base(.param .b32 x)
{
.reg .b32 %r<4>;
ld.param.u32 %r1, [x];
ld.global.u32 %r2, [base];
ld.global.u32 %r3, [hidden];
add.s32 %r1, %r1, %r2;
add.s32 %r1, %r1, %r3;
st.param.b32 [out], %r1;
ret;
}
"""


def test_ptx_linker_resolves_externs_keeps_one_weak_and_renames_private_symbols():
    import anycuda as ac
    from anycuda.driver.linker import link
    from anycuda.runtime.errors import CudaError
    text = link([LINK_A, LINK_B])
    assert text.startswith(".version 8.3\n.target sm_75\n.address_size 64\n")
    assert ".extern" not in text                     # both externs are defined by module 1
    assert text.count(".weak .func") == 1            # the first definition of twice wins
    assert "hidden_m0" in text and "hidden_m1" in text
    kernel = ac.RawModule(ptx=text).get_function("k")
    out = ac.asarray(np.zeros(1, np.uint32))
    kernel((1,), (1,), (out,))
    # module 0's twice (5 + 5), then add_base: + base (100) + module 1's own hidden (7)
    assert int(out.get()[0]) == 5 + 5 + 100 + 7
    with pytest.raises(CudaError, match="base is defined in modules 0 and 1"):
        link([LINK_B.replace("= 100", "= 1").replace(".weak .func", ".func") + "", LINK_B])


def test_stream_ordered_allocation_hints_limits_and_assert(build):
    r = run(build("async_alloc"))
    # s[j] = lut[j % 4] * (j / 4) with lut = 1, 2, 3, 4; p[i] = s[16383 - i]
    s = lambda j: [1, 2, 3, 4][j % 4] * (j // 4)
    source = HERE / "programs" / "async_alloc.cu"
    line = source.read_text().splitlines().index("__global__ void checker(int v) { assert(v < 10); }") + 1
    assert r.stdout.splitlines() == [
        f"threshold {1 << 20} out {s(16383)} {s(16382)} {s(16383 - 63)}",
        f"limit {1 << 22}",
        "assert holds: cudaSuccess",
        f"{source}:{line}: void checker(int): block: [0,0,0], thread: [0,0,0] Assertion `v < 10` failed.",
        "assert fails: cudaErrorAssert",
        "malloc after: cudaErrorAssert",
    ]


def test_binary_without_ptx_is_explained(build, tmp_path):
    src = tmp_path / "in.bin"
    src.write_bytes(np.array([4], np.int32).tobytes() + np.zeros(9, np.float32).tobytes())
    r = run(build("saxpy", "sass"), src, tmp_path / "out.bin", check=False)
    assert r.returncode != 0
    assert r.stderr.count("carries no PTX (only SASS for sm_80)") == 1, r.stderr
    assert "no kernel image is available" in r.stderr            # what the CUDA runtime makes of it


@pytest.mark.slow
def test_thrust_sort_and_transform_reduce(build):
    values, s = [], 12345
    for _ in range(5000):                  # the program's own generator
        s = (s * 1103515245 + 12345) & 0xFFFFFFFF
        values.append((s >> 8) % 100000)
    values.sort()
    r = run(build("thrust_sort"))
    assert r.stdout.strip() == (f"first {values[0]} last {values[-1]} median {values[2500]} "
                                f"sumsq {sum(v * v for v in values)}")


def test_graphs_by_stream_capture(build):
    r = run(build("graphs"))
    launches, n = 4, 1000
    per_launch = 2 * 3                     # a = 0 + 2, b = 0 + 3, acc += a * b
    assert r.stdout.splitlines() == [
        "capturing 1",
        "capturing after 0, nothing ran yet 1",
        f"host calls {launches} acc[0] {launches * per_launch} sum {launches * per_launch * n}",
    ]


@pytest.mark.parametrize("mode", ["static", "ptds"])
def test_host_threads_device_reset_and_per_thread_stream(build, mode):
    r = run(build("threads", mode))
    assert r.stdout.splitlines() == [
        "threads " + " ".join(str((t + 1) * 999) for t in range(4)),
        f"again {10 * 999} cudaSuccess",
        f"ptds {2 * 10}",
    ]


MANAGED_LINES = ["before 5", f"after {5 + 8} vec[7] {7 * 0.5:g} cudaSuccess", f"host write {100 + 8}"]


def test_managed_variables(build):
    assert run(build("managed_vars")).stdout.splitlines() == MANAGED_LINES


def test_managed_variables_are_one_copy_for_every_device(build, two_devices):
    assert run(build("managed_vars")).stdout.splitlines() == MANAGED_LINES + [f"device 1 {100 + 16}"]


LINK_PROGRAM = r'''
import ctypes, sys
import numpy as np
cuda = ctypes.CDLL("libcuda.so.1")
def check(r):
    assert r == 0, f"CUDA error {r}"
check(cuda.cuInit(0))
ctx = ctypes.c_void_p()
check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0))
check(cuda.cuCtxSetCurrent(ctx))

def link(inputs):
    state, image, size = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_size_t()
    check(cuda.cuLinkCreate_v2(0, None, None, ctypes.byref(state)))
    for kind, data in inputs:
        if isinstance(data, str):
            check(cuda.cuLinkAddFile_v2(state, kind, data.encode(), 0, None, None))
        else:
            check(cuda.cuLinkAddData_v2(state, kind, data, ctypes.c_size_t(len(data)), b"input", 0, None, None))
    check(cuda.cuLinkComplete(state, ctypes.byref(image), ctypes.byref(size)))
    module = ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), image))
    check(cuda.cuLinkDestroy(state))
    return module

def run(module, name, args):
    fn = ctypes.c_void_p()
    check(cuda.cuModuleGetFunction(ctypes.byref(fn), module, name))
    params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
    check(cuda.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params, None))
    check(cuda.cuCtxSynchronize())

out = ctypes.c_uint64()
check(cuda.cuMemAlloc_v2(ctypes.byref(out), ctypes.c_size_t(8)))
value = ctypes.c_uint32()
# two PTX modules
module = link([(1, open(sys.argv[1], "rb").read()), (1, open(sys.argv[2], "rb").read())])
run(module, b"k", [out])
check(cuda.cuMemcpyDtoH_v2(ctypes.byref(value), out, ctypes.c_size_t(4)))
print("ptx", value.value)
# PTX calling into a relocatable object, and into the same object in a static library
for kind, path in [(3, sys.argv[4]), (4, sys.argv[5])]:
    module = link([(1, open(sys.argv[3], "rb").read()), (kind, path)])
    run(module, b"use_lib", [out])
    f = ctypes.c_float()
    check(cuda.cuMemcpyDtoH_v2(ctypes.byref(f), out, ctypes.c_size_t(4)))
    print("kind", kind, f.value)
state = ctypes.c_void_p()
check(cuda.cuLinkCreate_v2(0, None, None, ctypes.byref(state)))
print("missing file", cuda.cuLinkAddFile_v2(state, 1, b"/nonexistent.ptx", 0, None, None))
'''

USE_LIB = r'''
extern __device__ float scale_by(float v);
extern "C" __global__ void use_lib(float *out) { *out = scale_by(4.0f); }
'''


def test_driver_linker_combines_ptx_objects_and_libraries(tmp_path):
    """cuLinkCreate/AddData/AddFile/Complete: PTX with PTX, and PTX with a relocatable object
    (-rdc=true -c) or a static library of it; the linked image loads with cuModuleLoadData."""
    (tmp_path / "a.ptx").write_text(LINK_A)
    (tmp_path / "b.ptx").write_text(LINK_B)
    (tmp_path / "use_lib.cu").write_text(USE_LIB)
    for args in (["-rdc=true", "--ptx", "-o", "use_lib.ptx", "use_lib.cu"],
                 ["-rdc=true", "-c", "-o", "lib.o", str(HERE / "programs" / "rdc_lib.cu")]):
        r = subprocess.run([NVCC, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    subprocess.run(["ar", "rcs", "liblib.a", "lib.o"], cwd=tmp_path, check=True)
    script = tmp_path / "link.py"
    script.write_text(LINK_PROGRAM)
    r = run(sys.executable, script, *(tmp_path / f for f in ("a.ptx", "b.ptx", "use_lib.ptx", "lib.o", "liblib.a")))
    assert r.stdout.splitlines() == [
        f"ptx {5 + 5 + 100 + 7}",
        f"kind 3 {4 * 2.5 + 1}",                 # scale_by: v * factor + 1 with factor 2.5
        f"kind 4 {4 * 2.5 + 1}",
        "missing file 301",                      # CUDA_ERROR_FILE_NOT_FOUND
    ]


def test_graph_built_from_nodes_and_3d_copies(build):
    r = run(build("graph_nodes"))
    assert r.stdout.splitlines() == [
        f"graph h[0] {5 + 7} h[511] {5 + 7} host calls 2",       # the memset node zeroes each time
        f"3d pitch_ok 1 back {100 * 1 + 10 * 2 + 3} {100 * 0 + 10 * 1 + 2}",
    ]


# ---------------------------------------------------------------- several devices and occupancy

def _host_memory():
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024


@pytest.fixture
def two_devices(monkeypatch):
    """ANYCUDA_DEVICES=2 over 3 worker threads: device 0 gets 2 of them, device 1 gets 1.
    A process reads both once; this one forgets what it read, before and after."""
    from anycuda.runtime import device
    monkeypatch.setenv("ANYCUDA_DEVICES", "2")
    monkeypatch.setenv("ANYCUDA_NUM_THREADS", "3")
    device.device_count.cache_clear()
    device.worker_count.cache_clear()
    yield
    monkeypatch.undo()
    device.device_count.cache_clear()
    device.worker_count.cache_clear()


def test_two_devices_peer_access_copies_and_streams(build, two_devices):
    r = run(build("multi_device"))
    lines = r.stdout.splitlines()
    total = _host_memory() // 2                      # each device: half the host's memory
    # the 3-D box: dst[z][y][x] (5 x 4 x 3, poisoned with -1) at (0, 1, 1) gets
    # src[z + 1][y + 2][x + 1] of src[z][y][x] = 100 z + 10 y + x, for x < 3, y < 3, z < 2
    dst = np.full((3, 4, 5), -1)
    z, y, x = np.meshgrid(np.arange(2), np.arange(3), np.arange(3), indexing="ij")
    dst[z + 1, y + 1, x] = 100 * (z + 1) + 10 * (y + 2) + (x + 1)
    n = 3000
    both = (5000 + np.arange(n) + 2 * (1000 + np.arange(n))) - (1000 + np.arange(n))
    assert lines == [
        "count 2",
        f"device 0 sms 2 bus 0 total {total}",
        f"device 1 sms 1 bus 1 total {total}",
        "set invalid 101",                            # cudaErrorInvalidDevice
        "can access 1 1 0",                           # a device is not its own peer
        "peer access 0 704 0 0 705 0",                # ...AlreadyEnabled, ...NotEnabled
        "current 1",
        f"meminfo drop 1 totals {total} {total}",
        "launch other device's stream 400",           # cudaErrorInvalidResourceHandle
        "record other device's event 400",
        f"both ways h[0] {both[0]} h[{n - 1}] {both[-1]} sum {both.sum()}",
        f"peer sync h[7] {both[7]}",
        "elapsed ok 1 across devices 400",
        "3d " + " ".join(str(v) for v in dst.ravel()),
        "owners 0 1 types 2 2",                       # cudaMemoryTypeDevice
        f"default streams {63} {10 + 63}",
        f"counters {7 + 10 * 3} {7 + 11 * 4} distinct 1",     # each device its own variables
        "done",
    ]


def _fields(line, prefix):
    assert line.startswith(prefix + " "), line
    words = line[len(prefix) + 1:].split()
    return dict(zip(words[::2], map(int, words[1::2])))


def _pairs(line, prefix):
    assert line.startswith(prefix + " "), line
    return [tuple(int(v) for v in item.replace(",", ":").split(":")) for item in line[len(prefix) + 1:].split()]


def test_occupancy_calls_agree_with_the_device_attributes(build, two_devices):
    r = run(build("occupancy"))
    lines = r.stdout.splitlines()
    dev = _fields(lines[0], "device")
    funcs = {}
    for line in lines[1:5]:
        name, rest = line.split()[1], " ".join(line.split()[2:])
        funcs[name] = _fields("x " + rest, "x")
    assert dev["sms"] == 2 and dev["warp"] == 32 and dev["maxthreads"] == 1024
    assert funcs["with_static"]["static"] == 16 * 1024 and funcs["bounded"]["maxthreads"] == 256
    assert funcs["with_static"]["maxdyn"] == dev["smem_block"] - 16 * 1024

    def blocks(block, shared, func):
        """CUDA's occupancy rule from the attributes printed: whole warps, threads, blocks,
        registers (given out per warp in 256s) and shared memory (in 128-byte units)."""
        f = funcs[func]
        if block > f["maxthreads"]:
            return 0
        warps = -(-block // dev["warp"])
        regs_per_warp = -(-f["regs"] * dev["warp"] // 256) * 256
        n = min(dev["maxthreads_sm"] // dev["warp"] // warps, dev["maxblocks_sm"], dev["regs_sm"] // regs_per_warp // warps)
        used = f["static"] + shared + dev["reserved"]
        return min(n, dev["smem_sm"] // (-(-used // 128) * 128)) if used else n

    plain = _pairs(lines[5], "plain")
    assert [b for b, _ in plain] == list(range(32, 1025, 32))
    for b, n in plain:
        assert n == blocks(b, 0, "plain") and 0 < n * b <= dev["maxthreads_sm"]
    assert _pairs(lines[6], "odd") == [(b, blocks(b, 0, "plain")) for b in (1, 17, 33, 100, 1000, 1025)]
    assert _pairs(lines[7], "static") == [(b, blocks(b, 0, "with_static")) for b in (64, 256, 1024)]
    assert _pairs(lines[8], "bounded") == [(b, blocks(b, 0, "bounded")) for b in (128, 256, 512)]
    assert _pairs(lines[8], "bounded")[-1] == (512, 0)           # past __launch_bounds__
    sweep = (0, 1000, 4096, 10000, 16384, 30000, 49152, 65536)
    dynamic = _pairs(lines[9], "dynamic")
    optin = _pairs(lines[10], "dynamic optin")
    maxdyn = funcs["with_dynamic"]["maxdyn"]
    assert dynamic == [(s, blocks(128, s, "with_dynamic") if s <= maxdyn else 0) for s in sweep]
    assert optin == [(s, blocks(128, s, "with_dynamic")) for s in sweep]
    for counts in (dynamic, optin):                              # more shared memory, no more blocks
        assert all(a[1] >= b[1] for a, b in zip(counts, counts[1:]))
    assert dynamic[-1] == (65536, 0) and optin[-1][1] >= 1
    for n, b, avail, fit in _pairs(lines[11], "available"):
        assert avail <= dev["smem_optin"]
        if blocks(b, 0, "with_dynamic") >= n:                   # the blocks fit at all
            assert fit >= n and avail % 128 == 0
            assert blocks(b, avail + 128, "with_dynamic") < n or avail + 128 > dev["smem_optin"]
        else:
            assert avail == 0

    def best(func, shared=lambda b: 0, limit=1024):
        """The largest block size (whole warps, capped by limit) with the most resident threads."""
        sizes = sorted({min(limit, b) for b in range(32, -(-limit // 32) * 32 + 1, 32)})
        occupancy = {b: b * blocks(b, shared(b), func) for b in sizes}
        top = max(occupancy.values())
        size = max(b for b in sizes if occupancy[b] == top)
        return blocks(size, shared(size), func) * dev["sms"], size

    def potential(line, prefix):
        """(min grid size, block size) from `prefix GRID BLOCK`."""
        grid, block = line[len(prefix) + 1:].split()
        assert line == f"{prefix} {grid} {block}"
        return int(grid), int(block)

    assert potential(lines[12], "potential plain") == best("plain")
    assert potential(lines[13], "potential plain limit200") == best("plain", limit=200)
    assert potential(lines[14], "potential bounded") == best("bounded", limit=256)
    assert potential(lines[15], "potential dynamic40000") == best("with_dynamic", lambda b: 40000)
    assert potential(lines[16], "potential variable") == best("with_dynamic", lambda b: 32 * b)
    assert lines[17] == "driver potential callback 0 %d %d" % best("with_dynamic", lambda b: 16 * b)
    assert lines[18] == "driver potential fixed 0 %d %d" % best("with_dynamic", lambda b: 20000, limit=512)
    assert lines[19] == f"driver available 0 {dev['smem_sm'] // 4 // 128 * 128}"
    assert lines[20] == f"ran {2.0 * 10006:g}"
    grid, block = best("plain")
    assert lines[21] == f"device1 sms 1 potential {grid // dev['sms']} {block}"
    assert lines[22:] == ["done"]


def test_python_api_and_info_list_the_devices(two_devices, capsys):
    import anycuda
    from anycuda import cli
    assert anycuda.get_device_count() == 2
    d0, d1 = anycuda.Device(0), anycuda.Device(1)
    assert (d0.attributes["MultiProcessorCount"], d1.attributes["MultiProcessorCount"]) == (2, 1)
    assert d0.mem_info[1] == d1.mem_info[1] == _host_memory() // 2
    assert d0.can_access_peer(d1) and not d1.can_access_peer(1)
    with pytest.raises(anycuda.CudaError) as e:
        anycuda.Device(2)
    assert e.value.code == anycuda.CUresult.CUDA_ERROR_INVALID_DEVICE
    assert anycuda.Device().id == 0
    with anycuda.Device(1):
        assert anycuda.Device().id == 1
    assert anycuda.Device().id == 0
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "Device 0:" in out and "Device 1:" in out and "Device 2:" not in out


NSMID_PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry nsmid(.param .u64 out) {
    .reg .b32 %r<2>; .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %nsmid;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""


def test_python_api_launches_use_their_device_share_of_workers(two_devices):
    import anycuda
    import numpy as np
    for dev, workers in ((0, 2), (1, 1)):
        with anycuda.Device(dev):
            k = anycuda.RawModule(ptx=NSMID_PTX, name="nsmid.ptx").get_function("nsmid")
            out = anycuda.asarray(np.full(1, -1, np.int32))
            k((8,), (1,), (out,))
            anycuda.synchronize()
            assert out.get()[0] == workers, f"device {dev}"


DRIVER_DEVICES_PROGRAM = r'''
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
def check(r):
    assert r == 0, f"CUDA error {r}"
check(cuda.cuInit(0))
n = ctypes.c_int()
check(cuda.cuDeviceGetCount(ctypes.byref(n)))
ctx = [ctypes.c_void_p(), ctypes.c_void_p()]
for d in range(2):
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx[d]), d))
print("count", n.value, "distinct", int(ctx[0].value != ctx[1].value))
check(cuda.cuCtxSetCurrent(ctx[0]))
print("enable self", cuda.cuCtxEnablePeerAccess(ctx[0], 0), "flags", cuda.cuCtxEnablePeerAccess(ctx[1], 1),
      "ok", cuda.cuCtxEnablePeerAccess(ctx[1], 0), "again", cuda.cuCtxEnablePeerAccess(ctx[1], 0),
      "bad", cuda.cuCtxEnablePeerAccess(ctypes.c_void_p(12345), 0))
print("disable", cuda.cuCtxDisablePeerAccess(ctx[1]), "again", cuda.cuCtxDisablePeerAccess(ctx[1]))
v = ctypes.c_int()
r1 = cuda.cuDeviceGetP2PAttribute(ctypes.byref(v), 2, 0, 1)
print("p2p", r1, v.value, "self", cuda.cuDeviceGetP2PAttribute(ctypes.byref(v), 2, 1, 1))
free, total = ctypes.c_size_t(), ctypes.c_size_t()
p = ctypes.c_uint64()
check(cuda.cuCtxSetCurrent(ctx[1]))
check(cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)))
check(cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)))
print("too big", cuda.cuMemAlloc_v2(ctypes.byref(ctypes.c_uint64()), ctypes.c_size_t(free.value + 4096)))
check(cuda.cuCtxSetCurrent(ctx[0]))
dev, owner = ctypes.c_int(), ctypes.c_void_p()
check(cuda.cuPointerGetAttribute(ctypes.byref(dev), 9, ctypes.c_uint64(p.value + 10)))
check(cuda.cuPointerGetAttribute(ctypes.byref(owner), 1, p))
print("owner device", dev.value, "context", int(owner.value == ctx[1].value))
q = ctypes.c_uint64()
check(cuda.cuMemAlloc_v2(ctypes.byref(q), ctypes.c_size_t(16)))
data = (ctypes.c_int * 4)(1, 2, 3, 4)
check(cuda.cuMemcpyHtoD_v2(p, data, ctypes.c_size_t(16)))
check(cuda.cuMemcpyPeer(q, ctx[0], p, ctx[1], ctypes.c_size_t(16)))
back = (ctypes.c_int * 4)()
check(cuda.cuMemcpyDtoH_v2(back, q, ctypes.c_size_t(16)))
print("peer copy", list(back), "bad context", cuda.cuMemcpyPeer(q, ctypes.c_void_p(12345), p, ctx[1], ctypes.c_size_t(16)))
ptx = b"""
.version 7.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p) .maxntid 128, 1, 1 {
  .shared .align 4 .b8 buf[20000];
  ret;
}
"""
mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
check(cuda.cuModuleLoadData(ctypes.byref(mod), ptx))
check(cuda.cuModuleGetFunction(ctypes.byref(fn), mod, b"k"))
blocks, grid, block = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
maxthreads = ctypes.c_int()
check(cuda.cuFuncGetAttribute(ctypes.byref(maxthreads), 0, fn))
check(cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(blocks), fn, 128, ctypes.c_size_t(0)))
print("maxthreads", maxthreads.value, "blocks", blocks.value, "bad flags",
      cuda.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(ctypes.byref(blocks), fn, 128, ctypes.c_size_t(0), 7))
B2D = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_int)
calls = []
def per_block(b):
    calls.append(b)
    return 64 * b
check(cuda.cuOccupancyMaxPotentialBlockSize(ctypes.byref(grid), ctypes.byref(block), fn, B2D(per_block), ctypes.c_size_t(0), 0))
print("potential", grid.value, block.value, "asked", max(calls), min(calls))
avail = ctypes.c_size_t()
check(cuda.cuOccupancyAvailableDynamicSMemPerBlock(ctypes.byref(avail), fn, 2, 128))
print("available", avail.value)
'''


def test_driver_peer_contexts_memory_and_occupancy_by_hand(tmp_path, two_devices):
    """The driver API directly (ctypes): primary contexts per device, cuCtxEnable/Disable-
    PeerAccess and cuMemcpyPeer error codes, a device's memory share, the owner of a pointer,
    and occupancy of a PTX kernel with .maxntid 128 and 20000 bytes of static shared memory,
    with a block-size-to-shared-memory callback."""
    script = tmp_path / "devices.py"
    script.write_text(DRIVER_DEVICES_PROGRAM)
    r = run(sys.executable, script)
    smem_sm, granule, sms = 100 * 1024, 128, 2           # what device 0 reports (2 of 3 workers)
    up = lambda v: -(-v // granule) * granule

    def blocks(b, dynamic):
        return min(2048 // (32 * -(-b // 32)), 32, smem_sm // up(20000 + dynamic))
    best = max((b * blocks(b, 64 * b), b) for b in (32, 64, 96, 128))[1]
    assert r.stdout.splitlines() == [
        "count 2 distinct 1",
        "enable self 201 flags 1 ok 0 again 704 bad 201",   # INVALID_CONTEXT, INVALID_VALUE, ALREADY_ENABLED
        "disable 0 again 705",                               # PEER_ACCESS_NOT_ENABLED
        "p2p 0 1 self 101",                                  # a device has no link to itself: INVALID_DEVICE
        "too big 2",                                         # past device 1's share: OUT_OF_MEMORY
        "owner device 1 context 1",
        "peer copy [1, 2, 3, 4] bad context 201",
        f"maxthreads 128 blocks {blocks(128, 0)} bad flags 1",
        f"potential {blocks(best, 64 * best) * sms} {best} asked 128 32",
        f"available {min(smem_sm // 2 // granule * granule - 20000, 48 * 1024 - 20000)}",
    ]


@pytest.mark.parametrize("mode", ["static", "shared"])
def test_program_that_launches_nothing_exits_cleanly(build, mode):
    """The runtime unloads its modules from an exit handler that runs after LLVM's static
    destructors; freeing JIT code then crashed the process (exit 139) after all its output."""
    r = run(build("no_launch", mode))
    assert "devices=1 cudaSuccess cudaSuccess cudaSuccess" in r.stdout


def test_a_program_that_exits_mid_compile_keeps_its_exit_status_and_output(build):
    """The program's kernel ran on quick code and main returns while the compile server still
    optimises it: the program exits at once with its own status, and its output is its own
    (the server printed a BrokenPipeError traceback when its reply found the program gone,
    and held the program's pipes open, so a caller waited for the optimiser)."""
    from anycuda.shim.build import shim_dir
    shim_dir()                              # built beforehand: building it says so on stderr
    exe = build("exit_mid_compile")
    env = dict(os.environ, ANYCUDA_JIT="tiered", ANYCUDA_CACHE="0", ANYCUDA_QUIET="1")
    for status in (0, 3):
        p = subprocess.Popen([sys.executable, "-m", "anycuda.cli", "run", "--", str(exe), str(status)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        last = p.stdout.readline()          # printed just before main returns
        ran = time.perf_counter()
        out, err = p.communicate(timeout=300)      # returns once the program has exited and its pipes closed
        assert p.returncode == status, err
        assert last + out == "ran cudaSuccess, out[0] is set\n" and err == "the program's own line\n", err
        assert time.perf_counter() - ran < 3, "the exit waited for the optimiser"


@pytest.mark.parametrize("mode", ["static", "shared"])
def test_textures_surfaces_and_cuda_arrays(build, tmp_path, rng, mode):
    """CUDA arrays (2-D, 3-D, layered; copies in, out and between them), tex1Dfetch on linear
    memory, tex2D point and linear with every address mode, normalised coordinates, uchar4
    read as normalised floats and as elements, tex2Dgather, tex3D, tex2DLayered, surf2Dread and
    surf2Dwrite with boundary modes, txq/suq: each output against tests/texture_reference.py."""
    import texture_reference
    exe = build("textures", mode)
    out = tmp_path / "out.bin"
    r = run(exe, int(rng.integers(1, 2 ** 31)), out)
    assert "resource desc round trip: same" in r.stdout and "textures done" in r.stdout, r.stdout
    texture_reference.check_program(texture_reference.records(out.read_bytes()))
    r = run(exe, "trap")                 # a surface read past the row with cudaBoundaryModeTrap
    assert "out of range: cudaErrorIllegalAddress" in r.stdout


# ---------------------------------------------------------------- cooperative launches

def _normalised_jacobi(n=10007, steps=12):
    """What tests/programs/cooperative.cu computes: its input, normalised by its sum, after
    `steps` Jacobi smoothing steps with fixed ends."""
    return normalised_jacobi((0.25 + ((np.arange(n) * 37) % 101) / 16.0).astype(np.float32), steps)


@pytest.mark.parametrize("mode", ["static", "shared", "rdc"])
def test_cooperative_launch_and_grid_sync(build, tmp_path, mode):
    """cudaLaunchCooperativeKernel and cudaLaunchKernelEx with the cooperative attribute run a
    kernel whose phases meet at grid.sync(), on the largest co-resident grid; one more block
    is cudaErrorCooperativeLaunchTooLarge; grid.is_valid() only in a cooperative launch."""
    _require(mode)
    out = tmp_path / "u.bin"
    r = run(build("cooperative", mode), out)
    lines = r.stdout.splitlines()
    m = re.fullmatch(r"cooperative attribute 1 sms (\d+) blocks per sm 16 grid (\d+)", lines[0])
    assert m and int(m[2]) == 16 * int(m[1]), lines[0]          # 2048 threads per SM / 128
    assert lines[1:] == [
        f"grid {int(m[2]) + 1}: cudaErrorCooperativeLaunchTooLarge",
        "cudaLaunchCooperativeKernel: max relative error below 1e-4",
        "cudaLaunchKernelEx: max relative error below 1e-4",
        "normal launch: grid valid 0",
        "cooperative launch: grid valid 1",
    ]
    np.testing.assert_allclose(np.fromfile(out, np.float32), _normalised_jacobi(), rtol=2e-5)


def test_grid_barrier_deadlock_and_grid_sync_outside_a_cooperative_launch(build, monkeypatch):
    """A block that leaves before the grid barrier: a GPU hangs, anycuda fails the launch after
    ANYCUDA_GRID_SYNC_TIMEOUT; grid.sync() in a normal launch traps (cooperative groups'
    check), as on a GPU."""
    monkeypatch.setenv("ANYCUDA_GRID_SYNC_TIMEOUT", "1")
    r = run(build("cooperative"), "deadlock")
    assert r.stdout.splitlines() == ["deadlock: cudaErrorLaunchFailure"]
    assert "grid barrier deadlock" in r.stderr
    r = run(build("cooperative"), "invalid-sync")
    assert r.stdout.splitlines() == ["invalid-sync: cudaErrorLaunchFailure"]
    assert "trap" in r.stderr


def test_cooperative_launch_from_the_programs_own_openmp_region(tmp_path):
    """Blocks of a cooperative launch run on a libgomp team of their own; launched from inside
    the program's OpenMP parallel region that team would be nested (one thread) and the
    blocks could never all reach the grid barrier."""
    exe = tmp_path / "cooperative-openmp"
    r = subprocess.run([NVCC, "-Xcompiler", "-fopenmp", "-o", str(exe), str(HERE / "programs" / "cooperative.cu")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = run(exe, "openmp")
    grid = int(re.search(r"of (\d+) blocks", r.stdout)[1])
    assert r.stdout.splitlines() == [f"openmp: cudaSuccess, {grid} of {grid} blocks passed the grid barrier"]


def _device_1_stream_held_until(release):
    """A stream of device 1 whose work waits for the host to set `release` (60 s at most)."""
    import anycuda
    with anycuda.Device(1):
        s1 = anycuda.Stream()
        s1.launch_host_func(lambda _: release.wait(60))
    return s1


def test_a_device_synchronises_with_its_own_streams_only(two_devices):
    """Device(0).synchronize() (cudaDeviceSynchronize on device 0) does not wait for work
    queued on device 1's streams, which here waits for the host until after that call."""
    import threading
    import time
    import anycuda
    release = threading.Event()
    s1 = _device_1_stream_held_until(release)
    with anycuda.Device(0):
        s0 = anycuda.Stream()
        ran = []
        s0.launch_host_func(ran.append, 0)
        t = time.perf_counter()
        anycuda.Device(0).synchronize()
        elapsed = time.perf_counter() - t
    assert ran == [0] and not s1.query() and elapsed < 30
    release.set()
    anycuda.Device(1).synchronize()
    assert s1.query()


def test_default_stream_work_waits_for_its_own_device_only(two_devices):
    """A copy on device 0's legacy default stream does not wait for device 1's blocking
    stream (whose work here waits for the host until after the copy)."""
    import threading
    import time
    import numpy as np
    import anycuda
    release = threading.Event()
    s1 = _device_1_stream_held_until(release)
    with anycuda.Device(0):
        t = time.perf_counter()
        a = anycuda.asarray(np.arange(5, dtype=np.int32))      # a copy on the default stream
        elapsed = time.perf_counter() - t
        assert a.get().tolist() == [0, 1, 2, 3, 4]
    assert not s1.query() and elapsed < 30
    release.set()
    anycuda.Device(1).synchronize()


@pytest.mark.parametrize("mode", ["static", "shared"])
def test_launches_return_at_once_as_in_the_async_api_sample(build, mode):
    _require(mode)
    r = run(build("async_api", mode))
    iterations = int(re.search(r"CPU executed (\d+) iterations while waiting", r.stdout).group(1))
    assert iterations > 0, r.stdout            # the host went on while the kernel and copies ran
    out = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    assert out["wrong values"] == "0"
    assert out["host alloc"] == "cudaSuccess" and out["device pointer"] == "cudaSuccess"
    # a kernel waiting for a flag in mapped host memory that the host sets after the launch
    assert out["query after launch"] == "cudaErrorNotReady"
    assert out["synchronize"] == "cudaSuccess" and out["kernel saw flag"] == "1"
    assert out["query after synchronize"] == "cudaSuccess"


def test_device_reset_after_a_fault_lets_the_program_go_on(build):
    r = run(build("reset_after_fault"))
    out = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    assert out["fault"] == "cudaErrorIllegalAddress" and out["malloc after fault"] == "cudaErrorIllegalAddress"
    assert out["reset"] == "cudaSuccess"
    assert all(out[k] == "cudaSuccess" for k in ("malloc after reset", "launch after reset", "copy after reset"))
    assert out["wrong values"] == "0"
