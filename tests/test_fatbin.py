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
