"""anycuda's libcuda.so.1: a C program written against cuda.h and a Python program using
ctypes run kernels through it, with CUDA's error codes for misuse."""
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from anycuda.shim.build import shim_dir
from conformance import load_cuda

HERE = Path(__file__).parent


def _cuda_include():
    nvcc = shutil.which("nvcc")
    candidates = []
    if nvcc:
        root = Path(os.path.realpath(nvcc)).parent.parent
        candidates += [root / "include", *map(Path, glob.glob(str(root / "targets" / "*" / "include")))]
    candidates += [Path(p) for p in glob.glob("/usr/local/cuda*/include")]
    for c in candidates:
        if (c / "cuda.h").exists():
            return c
    try:
        import nvidia
        for root in nvidia.__path__:
            if (Path(root) / "cu13" / "include" / "cuda.h").exists():
                return Path(root) / "cu13" / "include"
    except ImportError:
        pass
    return None


@pytest.fixture(scope="module")
def saxpy_ptx(tmp_path_factory):
    src = 'extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) ' \
          '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }'
    load_cuda("arith_int")               # skips when there is no CUDA C++ compiler
    from anycuda.cudac import compile_to_ptx
    path = tmp_path_factory.mktemp("ptx") / "saxpy.ptx"
    path.write_text(compile_to_ptx(src))
    return path


def _build_and_run(tmp_path, program, ptx, runs=1, args=(), cflags=()):
    """Compile tests/programs/<program>.c against cuda.h and anycuda's libcuda.so.1 and run it
    under `anycuda run` (several times: the process must also exit cleanly every time)."""
    include = _cuda_include()
    cc = shutil.which("gcc") or shutil.which("cc")
    if include is None or cc is None:
        pytest.skip("needs cuda.h (CUDA toolkit or the nvidia-cuda-runtime wheel) and a C compiler")
    exe = tmp_path / program
    subprocess.run([cc, "-w", *cflags, f"-I{include}", "-o", str(exe), str(HERE / "programs" / f"{program}.c"),
                    f"-L{shim_dir()}", "-l:libcuda.so.1"], check=True)
    for _ in range(runs):
        r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", str(exe), str(ptx), *args],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_c_program_through_the_driver_api(tmp_path, saxpy_ptx):
    r = _build_and_run(tmp_path, "driver_saxpy", saxpy_ptx, runs=3)
    out = r.stdout
    assert "saxpy OK" in out and "compute 8.6" in out
    assert "missing kernel -> CUDA_ERROR_NOT_FOUND" in out
    assert "block of 2048 -> CUDA_ERROR_INVALID_VALUE" in out
    assert "double free -> CUDA_ERROR_INVALID_VALUE" in out


def test_c_program_using_events_streams_and_attributes(tmp_path, saxpy_ptx):
    r = _build_and_run(tmp_path, "driver_features", saxpy_ptx)
    assert "device 0, max threads 1024, occupancy 8, memtype 2, managed 1, callbacks 5, elapsed>=0 1, " \
           "managed[7] 23.0, query 0" in r.stdout
    assert "features OK" in r.stdout


CTYPES_PROGRAM = r'''
import ctypes, sys
import numpy as np
cuda = ctypes.CDLL("libcuda.so.1")
def check(r):
    if r:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(r, ctypes.byref(name))
        raise SystemExit(f"CUDA error {name.value.decode()}")
check(cuda.cuInit(0))
dev, ctx, mod, fn = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
check(cuda.cuDeviceGet(ctypes.byref(dev), 0))
check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
check(cuda.cuCtxSetCurrent(ctx))
check(cuda.cuModuleLoadData(ctypes.byref(mod), open(sys.argv[1], "rb").read() + b"\0"))
check(cuda.cuModuleGetFunction(ctypes.byref(fn), mod, b"saxpy"))
n = 1000
x = np.arange(n, dtype=np.float32); y = np.ones(n, np.float32)
dx, dy = ctypes.c_uint64(), ctypes.c_uint64()
check(cuda.cuMemAlloc_v2(ctypes.byref(dx), ctypes.c_size_t(4 * n)))
check(cuda.cuMemAlloc_v2(ctypes.byref(dy), ctypes.c_size_t(4 * n)))
check(cuda.cuMemcpyHtoD_v2(dx, x.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(4 * n)))
check(cuda.cuMemcpyHtoD_v2(dy, y.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(4 * n)))
a, nn = ctypes.c_float(3.0), ctypes.c_int(n)
args = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in (dx, dy, a, nn)])
check(cuda.cuLaunchKernel(fn, 4, 1, 1, 256, 1, 1, 0, None, args, None))
check(cuda.cuCtxSynchronize())
check(cuda.cuMemcpyDtoH_v2(y.ctypes.data_as(ctypes.c_void_p), dy, ctypes.c_size_t(4 * n)))
assert np.array_equal(y, 3 * x + 1), y[:5]
bad = ctypes.c_void_p()
assert cuda.cuModuleGetFunction(ctypes.byref(bad), mod, b"nope") == 500
fp, status = ctypes.c_void_p(), ctypes.c_int(-1)
check(cuda.cuGetProcAddress_v2(b"cuMemAlloc", ctypes.byref(fp), 13000, 0, ctypes.byref(status)))
assert status.value == 0 and fp.value == ctypes.cast(cuda.cuMemAlloc_v2, ctypes.c_void_p).value
assert cuda.cuGetProcAddress_v2(b"cuNoSuchThing", ctypes.byref(fp), 13000, 0, ctypes.byref(status)) == 500
assert status.value == 1 and not fp.value
# the signature a caller gets follows the CUDA version it asks for (cuCtxCreate_v4 is 12.5's)
address = lambda f: ctypes.cast(f, ctypes.c_void_p).value
check(cuda.cuGetProcAddress_v2(b"cuCtxCreate", ctypes.byref(fp), 12000, 0, ctypes.byref(status)))
assert fp.value == address(cuda.cuCtxCreate_v2)
check(cuda.cuGetProcAddress_v2(b"cuCtxCreate", ctypes.byref(fp), 13000, 0, ctypes.byref(status)))
assert fp.value == address(cuda.cuCtxCreate_v4)
# a real driver function anycuda lacks resolves to a stub that answers CUDA_ERROR_NOT_SUPPORTED
check(cuda.cuGetProcAddress_v2(b"cuMipmappedArrayGetSparseProperties", ctypes.byref(fp), 13000, 0,
                               ctypes.byref(status)))
stub = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint)(fp.value)
assert stub(None, 0) == 801 and stub(None, 0) == 801
# a NULL where the driver writes its answer is CUDA_ERROR_INVALID_VALUE, not a crash
assert cuda.cuGraphCreate(None, 0) == 1 and cuda.cuMemAlloc_v2(None, ctypes.c_size_t(16)) == 1
# a device found by the PCI bus id it reports; a stream's context
bus, found = ctypes.create_string_buffer(32), ctypes.c_int(-1)
check(cuda.cuDeviceGetPCIBusId(bus, 32, dev))
check(cuda.cuDeviceGetByPCIBusId(ctypes.byref(found), bus.value))
assert found.value == dev.value, (bus.value, found.value)
assert cuda.cuDeviceGetByPCIBusId(ctypes.byref(found), b"0000:7f:00.0") == 1
assert cuda.cuDeviceGetByPCIBusId(ctypes.byref(found), b"not a bus id") == 1
stream, owner = ctypes.c_void_p(), ctypes.c_void_p()
check(cuda.cuStreamCreate(ctypes.byref(stream), 0))
check(cuda.cuStreamGetCtx(stream, ctypes.byref(owner)))
assert owner.value == ctx.value
check(cuda.cuStreamGetCtx(None, ctypes.byref(owner)))
assert owner.value == ctx.value
check(cuda.cuStreamDestroy_v2(stream))
# hints about managed memory: checked as CUDA checks them (device, advice, range), then done
managed = ctypes.c_uint64()
check(cuda.cuMemAllocManaged(ctypes.byref(managed), ctypes.c_size_t(4096), 1))
size = ctypes.c_size_t(4096)
check(cuda.cuMemPrefetchAsync(managed, size, 0, None))
check(cuda.cuMemPrefetchAsync(managed, size, -1, None))                  # CU_DEVICE_CPU
assert cuda.cuMemPrefetchAsync(managed, size, 10 ** 8, None) == 101     # CUDA_ERROR_INVALID_DEVICE
assert cuda.cuMemPrefetchAsync(managed, ctypes.c_size_t(8192), 0, None) == 1
check(cuda.cuMemAdvise(managed, size, 1, 0))                             # SET_READ_MOSTLY
assert cuda.cuMemAdvise(managed, size, -1, 0) == 1 and cuda.cuMemAdvise(managed, size, 7, 0) == 1
assert cuda.cuMemAdvise(managed, size, 3, 5) == 101                      # SET_PREFERRED_LOCATION, no device 5
# a kernel that faults makes its context unusable (sticky), as on a GPU, until it is reset
trap = b""".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry boom() { trap; }\n"""
tmod, tfn = ctypes.c_void_p(), ctypes.c_void_p()
check(cuda.cuModuleLoadData(ctypes.byref(tmod), trap + b"\0"))
check(cuda.cuModuleGetFunction(ctypes.byref(tfn), tmod, b"boom"))
check(cuda.cuLaunchKernel(tfn, 1, 1, 1, 1, 1, 1, 0, None, None, None))     # returns at once
assert cuda.cuCtxSynchronize() == 719                                   # CUDA_ERROR_LAUNCH_FAILED
assert cuda.cuMemAlloc_v2(ctypes.byref(dx), ctypes.c_size_t(16)) == 719
check(cuda.cuDevicePrimaryCtxReset_v2(dev))
check(cuda.cuMemAlloc_v2(ctypes.byref(dx), ctypes.c_size_t(16)))
print("ctypes OK")
'''


def test_python_program_through_ctypes(tmp_path, saxpy_ptx):
    script = tmp_path / "use_driver.py"
    script.write_text(CTYPES_PROGRAM)
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", sys.executable, str(script), str(saxpy_ptx)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ctypes OK" in r.stdout, r.stdout + r.stderr
    assert r.stderr.count("cuMipmappedArrayGetSparseProperties is not supported yet") == 1      # named once


@pytest.mark.parametrize("module", ["anycuda.cli", "anycuda"])
def test_shim_path_command(module):
    r = subprocess.run([sys.executable, "-m", module, "shim-path"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and (Path(r.stdout.strip()) / "libcuda.so.1").exists()


def test_md2_follows_rfc_1319():
    from anycuda.driver.integrity import MD2
    vectors = {b"": "8350e5a3e24c153df2275c9f80692773", b"abc": "da853b0d3f88d99b30283a69e6ded6bb",
               b"message digest": "ab4f496bfb2a530b219ff33031fe06b0",
               b"abcdefghijklmnopqrstuvwxyz": "4e8ddff3650292ab5a4108c3aa47940b",
               b"1234567890" * 8: "d5976f79d83d3a0dc9806c3c66f3efd8"}
    for message, digest in vectors.items():
        assert MD2(message).hexdigest() == digest
        h = MD2()
        for i in range(0, len(message), 7):          # fed in pieces: the same digest
            h.update(message[i:i + 7])
        assert h.hexdigest() == digest


def test_integrity_answer_is_an_hmac_of_the_process_record():
    import hmac
    import struct
    from anycuda.driver.integrity import KEY, MD2, answer
    facts = dict(driver_version=13000, process=1234, thread=0xABCDEF01, cudart_table=0x7F0000001000,
                 integrity_table=0x7F0000002000, function=0x7F0000003000,
                 devices=[(bytes(range(16)), 0, 1, 2)])
    record = struct.pack("<IIIIQQQQ", 13000, 12345, 1234, 0xABCDEF01, 0x7F0000001000, 0x7F0000002000,
                         0x7F0000003000, 1_700_000_000) + bytes(range(16)) + struct.pack("<iii", 0, 1, 2)
    inner = MD2(bytes(k ^ 0x36 for k in KEY) + record).digest()          # RFC 2104 by hand
    outer = MD2(bytes(k ^ 0x5C for k in KEY) + inner).digest()
    assert answer(12345, 1_700_000_000, **facts) == struct.unpack("<QQ", outer)
    assert outer == hmac.new(KEY, record, MD2).digest()
    assert answer(12340, 1, **facts) != answer(12342, 1, **facts)       # versions ending in 0 and 1: fixed
    assert answer(12340, 1, **facts) == answer(99990, 5, **{**facts, "process": 1})


EXPORT_TABLE_PROGRAM = r'''
import ctypes
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
table = ctypes.c_void_p()
bogus = bytes(range(16))
assert cuda.cuGetExportTable(ctypes.byref(table), bogus) == 801 and not table.value
assert cuda.cuGetExportTable(ctypes.byref(table), bogus) == 801
checks = bytes.fromhex("263e88607cd2614392f6bbd5006dfa7e")
assert cuda.cuGetExportTable(ctypes.byref(table), checks) == 0
slots = ctypes.cast(table, ctypes.POINTER(ctypes.c_void_p))
assert slots[0] == 4 * 8                                   # the table's size in bytes
empty = ctypes.CFUNCTYPE(ctypes.c_int)(slots[1])           # a slot anycuda leaves empty
assert empty() == 801 and empty() == 801
# context-local storage: values per (context, key); their destructors run when the context is reset
cls = bytes.fromhex("c693336e1121df11a8c368f355d89593")
assert cuda.cuGetExportTable(ctypes.byref(table), cls) == 0
slots = ctypes.cast(table, ctypes.POINTER(ctypes.c_void_p))
put = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(slots[0])
get = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p)(slots[2])
destroyed = []
dtor = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
    lambda ctx, key, value: destroyed.append((key, value)))
ctx, value = ctypes.c_void_p(), ctypes.c_void_p()
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0 and cuda.cuCtxSetCurrent(ctx) == 0
assert put(ctx, 0x1234, 0x5678, ctypes.cast(dtor, ctypes.c_void_p)) == 0
assert get(ctypes.byref(value), None, 0x1234) == 0 and value.value == 0x5678     # NULL: the current context
assert cuda.cuDevicePrimaryCtxReset_v2(0) == 0
assert destroyed == [(0x1234, 0x5678)]
assert get(ctypes.byref(value), ctx, 0x1234) == 400                               # gone with the reset
# the context identity table (NVIDIA's CUDA 13 libraries' runtime asks for it): slot 4, a context's id
identity = bytes.fromhex("21318c60971432488ca641ff7324c8f2")
assert cuda.cuGetExportTable(ctypes.byref(table), identity) == 0
slots = ctypes.cast(table, ctypes.POINTER(ctypes.c_void_p))
assert slots[0] == 5 * 8
context_id = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_ulonglong))(slots[4])
first, again, other = ctypes.c_ulonglong(), ctypes.c_ulonglong(), ctypes.c_ulonglong()
created = ctypes.c_void_p()
assert cuda.cuCtxCreate_v2(ctypes.byref(created), 0, 0) == 0
assert context_id(ctx, ctypes.byref(first)) == 0 and context_id(ctx, ctypes.byref(again)) == 0
assert context_id(created, ctypes.byref(other)) == 0
assert first.value == again.value != other.value
current = ctypes.c_ulonglong()
assert context_id(None, ctypes.byref(current)) == 0 and current.value == other.value    # NULL: the current one
print("tables OK")
'''


def _python_under_anycuda(tmp_path, program: str, done: str):
    """`program` run by a Python under `anycuda run` (its libcuda.so.1 through ctypes); it must
    end well and print `done`."""
    script = tmp_path / "program.py"
    script.write_text(program)
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", sys.executable, str(script)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and done in r.stdout, r.stdout + r.stderr
    return r


def test_unknown_export_tables_and_empty_slots_are_named_once(tmp_path):
    r = _python_under_anycuda(tmp_path, EXPORT_TABLE_PROGRAM, "tables OK")
    assert r.stderr.count("export table 000102030405060708090a0b0c0d0e0f") == 1
    assert r.stderr.count("export table CONTEXT_CHECKS slot 1 is not implemented") == 1


NAMED_STUBS_PROGRAM = r'''
import ctypes
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
# a driver function anycuda lacks is still a symbol of libcuda.so.1 (NVIDIA's cuBLASLt looks its
# driver functions up with dlsym): it answers CUDA_ERROR_NOT_SUPPORTED and is named once
wait = cuda.cuStreamWaitValue32
assert wait(None, 0, 0, 0) == 801 and wait(None, 0, 0, 0) == 801
# CUDA 13's forms that name a context (0: the current one)
ctx, created, device = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int(-1)
assert cuda.cuCtxGetDevice_v2(ctypes.byref(device), None) == 201           # no current context yet
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cuda.cuCtxGetDevice_v2(ctypes.byref(device), ctx) == 0 and device.value == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
assert cuda.cuCtxGetDevice_v2(ctypes.byref(device), None) == 0 and device.value == 0
assert cuda.cuCtxSynchronize_v2(ctx) == 0 and cuda.cuCtxSynchronize_v2(None) == 0
# a caller built for CUDA 12 asking for cuCtxGetDevice gets the one-argument form
fn = ctypes.c_void_p()
assert cuda.cuGetProcAddress_v2(b"cuCtxGetDevice", ctypes.byref(fn), 12080, 0, None) == 0
assert fn.value == ctypes.cast(cuda.cuCtxGetDevice, ctypes.c_void_p).value
assert cuda.cuGetProcAddress_v2(b"cuCtxGetDevice", ctypes.byref(fn), 13000, 0, None) == 0
assert fn.value == ctypes.cast(cuda.cuCtxGetDevice_v2, ctypes.c_void_p).value
print("stubs OK")
'''


def test_driver_functions_anycuda_lacks_are_exported_stubs(tmp_path):
    r = _python_under_anycuda(tmp_path, NAMED_STUBS_PROGRAM, "stubs OK")
    assert r.stderr.count("cuStreamWaitValue32 is not supported yet") == 1
