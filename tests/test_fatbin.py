"""Fatbinaries as nvcc 13 writes them: zstd (default), LZ4, uncompressed, -rdc=true,
several architectures, SASS only; and malformed containers, which must all give
FatbinError."""
import shutil
import struct
import subprocess

import pytest

from anycuda import fatbin
from anycuda.elf import section_bytes

SOURCE = r'''
#include <cstdio>
__global__ void saxpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
int main() { saxpy<<<1, 1>>>(nullptr, nullptr, 1.0f, 0); return 0; }
'''

FLAVOURS = {
    "zstd": [],
    "lz4": ["--compress-mode=speed"],
    "plain": ["--no-compress"],
    "rdc": ["-rdc=true"],
    "two_archs": ["-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_86,code=compute_86"],
    "sass_only": ["-gencode", "arch=compute_75,code=sm_75"],
}


def _code_lines(ptx):
    """PTX without comments, indentation and blank lines: the copy nvcc embeds blanks the
    comment lines and compacts whitespace, so only the code itself can be compared."""
    return [" ".join(line.split()) for line in (raw.split("//")[0] for raw in ptx.splitlines()) if line.strip()]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH: no binaries to read")
    d = tmp_path_factory.mktemp("fatbin")
    src = d / "saxpy.cu"
    src.write_text(SOURCE)
    out = {}
    for name, flags in FLAVOURS.items():
        exe = d / name
        subprocess.run(["nvcc", *flags, "-o", str(exe), str(src)], check=True, capture_output=True)
        out[name] = exe
    ptx = d / "ref.ptx"
    subprocess.run(["nvcc", "-ptx", "-o", str(ptx), str(src)], check=True, capture_output=True)
    out["ref_ptx"] = ptx.read_text()
    return out


@pytest.mark.parametrize("flavour, compression", [("zstd", "zstd"), ("lz4", "lz4"), ("plain", None)])
def test_default_binaries_carry_the_ptx(built, flavour, compression):
    entries = fatbin.entries_from_elf(built[flavour])
    ptx = fatbin.require_ptx(entries)
    assert ptx.compressed == compression and ptx.sm == 75 and ptx.ptx_version == (9, 0)
    assert _code_lines(ptx.ptx_text()) == _code_lines(built["ref_ptx"])
    assert any(e.kind == "elf" for e in entries)


def test_rdc_binary_keeps_ptx_in_relfatbin(built):
    data = built["rdc"].read_bytes()
    assert section_bytes(data, "__nv_relfatbin")
    assert "saxpy" in fatbin.require_ptx(fatbin.entries_from_elf(built["rdc"])).ptx_text()


def test_newest_architecture_is_chosen(built):
    entries = fatbin.entries_from_elf(built["two_archs"])
    assert {e.sm for e in entries if e.kind == "ptx"} == {86}
    assert fatbin.choose_ptx(entries).sm == 86


def test_sass_only_binary_asks_for_a_rebuild(built):
    entries = fatbin.entries_from_elf(built["sass_only"])
    with pytest.raises(fatbin.FatbinError) as e:
        fatbin.require_ptx(entries)
    assert "code=compute_75" in str(e.value)


def test_every_truncation_and_corruption_is_a_fatbin_error(built):
    section = section_bytes(built["zstd"].read_bytes(), ".nv_fatbin")
    entries = fatbin.parse_containers(section)
    assert fatbin.choose_ptx(entries) is not None
    first_size = 16 + struct.unpack_from("<Q", section, 8)[0]
    for cut in range(0, first_size, 7):
        with pytest.raises(fatbin.FatbinError):
            fatbin.parse_container(section[:cut])
    bad_magic = b"\x00\x11" + section[2:]
    with pytest.raises(fatbin.FatbinError):
        fatbin.parse_containers(bad_magic)
    too_big = section[:8] + struct.pack("<Q", 1 << 40) + section[16:]
    with pytest.raises(fatbin.FatbinError):
        fatbin.parse_container(too_big)
    # corrupt the compressed PTX payload of the second container
    second = (first_size + 7) // 8 * 8
    ptx_at = section.index(b"\x28\xb5\x2f\xfd", second)
    corrupt = section[:ptx_at + 8] + bytes(64) + section[ptx_at + 72:]
    with pytest.raises(fatbin.FatbinError):
        fatbin.parse_containers(corrupt)


def test_module_images_in_memory(built):
    """What cuModuleLoadData receives: a container, or the wrapper the runtime registers."""
    import ctypes

    from anycuda.driver.api import ptx_from_image
    from anycuda.runtime.errors import CudaError
    section = section_bytes(built["zstd"].read_bytes(), ".nv_fatbin")
    second = ((16 + struct.unpack_from("<Q", section, 8)[0]) + 7) // 8 * 8
    buf = ctypes.create_string_buffer(section[second:], len(section) - second)
    ptx = ptx_from_image(ctypes.addressof(buf)).decode()
    assert ".entry _Z5saxpyPKfPffi" in ptx
    wrapper = ctypes.create_string_buffer(struct.pack("<IIQQ", fatbin.WRAPPER_MAGIC, 1, ctypes.addressof(buf), 0))
    assert ptx_from_image(ctypes.addressof(wrapper)).decode() == ptx
    sass = section_bytes(built["sass_only"].read_bytes(), ".nv_fatbin")
    sbuf = ctypes.create_string_buffer(sass, len(sass))
    with pytest.raises(CudaError) as e:
        ptx_from_image(ctypes.addressof(sbuf))
    assert e.value.code.name == "CUDA_ERROR_NO_BINARY_FOR_GPU"


MACHINE_CODE_ONLY = r'''
__device__ int table[4] = {7, 8, 9, 10};
__device__ float zeros[3];
__constant__ int weights[2] = {3, 5};
extern "C" __global__ void scale(int* out) { out[threadIdx.x] = table[threadIdx.x] * weights[1]; }
extern "C" __global__ void other(int* out) { out[0] = zeros[0] == 0.0f; }
'''


@pytest.fixture(scope="module")
def sass_only_fatbin(tmp_path_factory):
    """A fatbinary container with SASS for sm_75 alone (no PTX)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    d = tmp_path_factory.mktemp("sass")
    src = d / "sass.cu"
    src.write_text(MACHINE_CODE_ONLY)
    out = d / "sass.fatbin"
    subprocess.run(["nvcc", "-fatbin", "-gencode", "arch=compute_75,code=sm_75", "-o", str(out), str(src)],
                   check=True, capture_output=True)
    return out.read_bytes()


def test_a_container_of_machine_code_alone_loads_lazily(sass_only_fatbin, monkeypatch):
    """As CUDA's lazy loading: the module loads, its variables hold their initial bytes, its
    kernels can be looked up, and launching one fails with CUDA_ERROR_NO_BINARY_FOR_GPU
    (cuBLAS registers such containers beside those with PTX)."""
    import ctypes

    import numpy as np
    from anycuda.driver import api
    from anycuda.runtime.errors import CudaError, CUresult
    monkeypatch.delenv("CUDA_MODULE_LOADING", raising=False)
    buf = ctypes.create_string_buffer(sass_only_fatbin, len(sass_only_fatbin))
    image = api.image_at(ctypes.addressof(buf))
    assert sorted(image.machine_code_only) == ["other", "scale"]
    api.cuInit(0)
    api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
    try:
        mod = api.cuModuleLoadData(image)
        for name, expected in (("table", [7, 8, 9, 10]), ("weights", [3, 5]), ("zeros", [0, 0, 0])):
            address, size = api.cuModuleGetGlobal(mod, name)
            assert size == 4 * len(expected)
            assert list(np.frombuffer(ctypes.string_at(address, size), np.int32)) == expected
        func = api.cuModuleGetFunction(mod, "scale")
        out = np.zeros(4, np.int32)
        with pytest.raises(CudaError) as e:
            api.cuLaunchKernel(func, (1, 1, 1), (4, 1, 1), 0, 0, struct.pack("<Q", out.ctypes.data))
            api.cuCtxSynchronize()
        assert e.value.code == CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU and "sm_75" in str(e.value)
        with pytest.raises(CudaError) as missing:
            api.cuModuleGetFunction(mod, "nothing")
        assert missing.value.code == CUresult.CUDA_ERROR_NOT_FOUND
        api.cuModuleUnload(mod)
    finally:
        api.cuDevicePrimaryCtxRelease(0)
    monkeypatch.setenv("CUDA_MODULE_LOADING", "EAGER")
    with pytest.raises(CudaError) as eager:
        api.image_at(ctypes.addressof(buf))
    assert eager.value.code == CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU
