"""anycuda's stand-ins for the machine-code steps of NVIDIA's toolchain (anycuda.shim.standins,
anycuda.ptxas): NVRTC asked for a cubin gives a fatbinary container of the PTX that NVIDIA's
NVRTC makes for the same architecture, and passes everything else through; ptxas checks PTX
and writes such a container. The containers are read back with anycuda.fatbin and run."""
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from anycuda import fatbin, ptxas
from anycuda.ptx import parse
from anycuda.shim import standins
from anycuda.shim.build import shim_dir

KERNEL = r'''
template <typename T> __global__ void scale(T *x, T a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
template __global__ void scale<float>(float *, float, int);
extern "C" __global__ void add_one(int *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}
'''


def _real_nvrtc() -> str:
    """The path of NVIDIA's libnvrtc.so.13, or skip."""
    for folder in standins.nvrtc_folders():
        path = os.path.join(folder, "libnvrtc.so.13")
        if os.path.exists(path):
            return path
    pytest.skip("needs NVIDIA's NVRTC 13 (pip install nvidia-cuda-nvrtc, or the CUDA toolkit)")


# Runs in a subprocess (the stand-in reads ANYCUDA_NVRTC_DIRS once): compiles KERNEL through the
# stand-in with the options given, and through the real NVRTC for the same virtual architecture,
# and prints what each gave as JSON.
PROBE = r'''
import ctypes, json, sys
standin = ctypes.CDLL(sys.argv[1])
real = ctypes.CDLL(sys.argv[2])
source, options = sys.argv[3].encode(), [o.encode() for o in json.loads(sys.argv[4])]
virtual = [o.replace(b"sm_", b"compute_") for o in options]

def compile(lib, opts, names=()):
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source, b"k.cu", 0, None, None) == 0
    for name in names:
        assert lib.nvrtcAddNameExpression(prog, name) == 0
    array = (ctypes.c_char_p * len(opts))(*opts)
    result = lib.nvrtcCompileProgram(prog, len(opts), array)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value + 1)
    lib.nvrtcGetProgramLog(prog, log)
    out = {"result": result, "log": log.value.decode()}
    if result == 0:
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetPTX(prog, ptx)
        out["ptx"] = ptx.value.decode()
        size = ctypes.c_size_t(12345)
        out["cubin_size_result"] = lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        out["cubin_size"] = size.value
        if out["cubin_size_result"] == 0 and size.value:
            cubin = ctypes.create_string_buffer(b"\xcc" * size.value, size.value)   # poisoned
            out["cubin_result"] = lib.nvrtcGetCUBIN(prog, cubin)
            out["cubin"] = cubin.raw.hex()
        lowered = ctypes.c_char_p()
        out["lowered"] = [lib.nvrtcGetLoweredName(prog, n, ctypes.byref(lowered)) == 0 and lowered.value.decode()
                          for n in names]
    assert lib.nvrtcDestroyProgram(ctypes.byref(prog)) == 0
    return out

names = [b"scale<float>"]
print(json.dumps({"standin": compile(standin, options, names), "real": compile(real, virtual, names)}))
'''


def _probe(options, source=KERNEL, env=None, stderr=None):
    real = _real_nvrtc()
    standin = shim_dir() / "libnvrtc.so.13"
    env = dict(os.environ, ANYCUDA_NVRTC_DIRS=os.path.dirname(real), **(env or {}))
    r = subprocess.run([sys.executable, "-c", PROBE, str(standin), real, source, json.dumps(options)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    if stderr is not None:
        stderr.append(r.stderr)
    return json.loads(r.stdout)


@pytest.mark.parametrize("options, sm", [
    (["-arch=sm_86"], 86),
    (["--gpu-architecture=sm_90a", "-std=c++17"], 90),
    (["-std=c++17", "-arch", "sm_75", "--use_fast_math"], 75),
])
def test_nvrtc_asked_for_machine_code_gives_a_container_of_the_same_ptx(options, sm):
    got = _probe(options)
    standin, real = got["standin"], got["real"]
    assert standin["result"] == real["result"] == 0, standin["log"]
    assert standin["ptx"] == real["ptx"]                       # NVIDIA's own PTX, same architecture
    assert standin["cubin_size_result"] == standin["cubin_result"] == 0
    (entry,), end = fatbin.parse_container(bytes.fromhex(standin["cubin"]))
    assert end == len(bytes.fromhex(standin["cubin"]))
    assert (entry.kind, entry.sm) == ("ptx", sm)
    assert entry.ptx_text() == real["ptx"]
    version = parse(real["ptx"]).version
    assert bytes.fromhex(standin["cubin"]) == fatbin.ptx_container(real["ptx"], sm, version)   # one layout, C and Python
    assert standin["lowered"] == real["lowered"] and standin["lowered"][0].startswith("_Z")


def test_nvrtc_asked_for_ptx_is_nvidias_nvrtc_unchanged():
    """Without a real architecture nothing is rewritten: no cubin, as NVIDIA's NVRTC says."""
    got = _probe(["-arch=compute_80"])
    standin, real = got["standin"], got["real"]
    assert standin["ptx"] == real["ptx"]
    assert standin["cubin_size_result"] == real["cubin_size_result"]
    assert standin["cubin_size"] == real["cubin_size"] == 0


def test_nvrtc_standin_traces_compiles_under_anycuda_log():
    said = []
    _probe(["-std=c++17", "-arch=sm_86"], env={"ANYCUDA_LOG": "nvrtc"}, stderr=said)
    assert re.search(r"nvrtcCompileProgram\(-std=c\+\+17 -arch=compute_86\) -> 0 in \d+\.\d\d s", said[0]), said[0]
    assert said[0].count("nvrtcCompileProgram") == 1             # the real NVRTC's own compile is not ours


def test_nvrtc_compile_errors_are_nvidias():
    got = _probe(["-arch=sm_86"], source="__global__ void broken(int *x) { x[0] = undeclared; }")
    standin, real = got["standin"], got["real"]
    assert standin["result"] == real["result"] == 6            # NVRTC_ERROR_COMPILATION
    assert "undeclared" in standin["log"] and standin["log"] == real["log"]


def test_nvrtc_standin_without_a_real_nvrtc_says_so(tmp_path):
    """Found nowhere, every call is an error with NVRTC's code for it, and one line says why."""
    standin = shim_dir() / "libnvrtc.so.13"
    program = textwrap.dedent(f"""
        import ctypes
        lib = ctypes.CDLL({str(standin)!r})
        major, minor = ctypes.c_int(), ctypes.c_int()
        print(lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)))
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        print(lib.nvrtcGetErrorString(11).decode())
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_PATH", "CUDA_HOME", "LD_LIBRARY_PATH")}
    env["ANYCUDA_NVRTC_DIRS"] = str(tmp_path)
    if os.path.exists("/usr/local/cuda/lib64/libnvrtc.so.13"):
        pytest.skip("a CUDA toolkit in /usr/local/cuda is always searched")
    r = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "11" and "no NVIDIA NVRTC" in lines[1]
    assert r.stderr.count("no NVIDIA NVRTC (libnvrtc.so.13) found") == 1


# ---------------------------------------------------------------- ptxas

PTX = r"""
.version 8.0
.target sm_80
.address_size 64

.visible .entry twice(.param .u64 p, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r5, %r3, %r4, %r2;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
    add.f32 %f1, %f1, %f1;
    st.global.f32 [%rd4], %f1;
DONE:
    ret;
}
""".replace(".reg .b64 %rd<5>;", ".reg .b64 %rd<5>;\n    .reg .f32 %f<2>;")


def _ptxas(*args, cwd):
    return subprocess.run([sys.executable, "-m", "anycuda.ptxas", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_ptxas_reports_a_cuda_release_as_nvidias_does():
    r = _ptxas("--version", cwd=None)
    assert r.returncode == 0
    assert re.search(r"release (\d+\.\d+)", r.stdout).group(1) == ptxas.RELEASE


def test_ptxas_as_triton_calls_it_writes_a_container_that_runs(tmp_path):
    """Triton: ptxas -lineinfo -v --fmad=true --gpu-name=sm_90a in.ptx -o out.cubin."""
    import anycuda as ac
    (tmp_path / "k.ptx").write_text(PTX)
    out = tmp_path / "k.cubin"
    out.write_bytes(b"stale")
    r = _ptxas("-lineinfo", "-v", "--fmad=true", "--gpu-name=sm_90a", "-O3", "k.ptx", "-o", out.name, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (entry,), _ = fatbin.parse_container(out.read_bytes())
    assert (entry.kind, entry.sm, entry.ptx_version) == ("ptx", 90, (8, 0))
    assert entry.ptx_text() == PTX
    kernel = ac.RawModule(ptx=entry.ptx_text()).get_function("twice")
    x = np.random.default_rng().random(1000, dtype=np.float32)
    d = ac.asarray(x)
    kernel((4,), (256,), (d, np.int32(1000)))
    np.testing.assert_array_equal(d.get(), x + x)


@pytest.mark.parametrize("bad, words", [
    (PTX.replace("add.f32 %f1, %f1, %f1;", "frobnicate.f32 %f1;"), "frobnicate"),
    (PTX.replace(".version 8.0\n", ""), ".version"),
])
def test_ptxas_refuses_invalid_ptx_as_ptxas_does(tmp_path, bad, words):
    (tmp_path / "bad.ptx").write_text(bad)
    r = _ptxas("--gpu-name", "sm_80", "bad.ptx", "-o", "bad.cubin", cwd=tmp_path)
    assert r.returncode == 255
    assert "ptxas error" in r.stderr and words in r.stderr
    assert not (tmp_path / "bad.cubin").exists()


def test_ptxas_usage_errors(tmp_path):
    r = _ptxas("-o", cwd=tmp_path)
    assert r.returncode == 255 and "expects a value" in r.stderr
    r = _ptxas("missing.ptx", "-o", "x.cubin", cwd=tmp_path)
    assert r.returncode == 255 and "Unable to open input file 'missing.ptx'" in r.stderr


def test_run_points_triton_at_anycudas_ptxas_and_nvrtc_at_its_wheels():
    env = {k: v for k, v in os.environ.items() if k not in ("ANYCUDA_PTXAS", "ANYCUDA_NVRTC")}
    probe = "import os, json; print(json.dumps({k: os.environ.get(k, '') for k in " \
            "('TRITON_PTXAS_PATH', 'ANYCUDA_NVRTC_DIRS', 'LD_PRELOAD')}))"
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", sys.executable, "-c", probe],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert os.path.basename(got["TRITON_PTXAS_PATH"]) == "anycuda-ptxas"
    assert "libnvrtc.so.13" in got["LD_PRELOAD"] and "libnvrtc.so.12" in got["LD_PRELOAD"]
    assert got["ANYCUDA_NVRTC_DIRS"].split(os.pathsep)[:len(standins.nvrtc_folders())] == standins.nvrtc_folders()
