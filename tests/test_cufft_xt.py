"""anycuda's cufftXt (anycuda.libraries.cufft.xt), called as the C library calls it: plans of
cudaDataType precisions (half and bfloat16 included) against numpy.fft, memory descriptors on
one GPU and on several (ANYCUDA_DEVICES), their natural and permuted orders read through the C
structures' own offsets, and the argument rules. Outputs are poisoned first."""
import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from anycuda.libraries.cufft import functions
from anycuda.libraries.cufft.status import CufftError, Result
from anycuda.runtime import device as devices
from library_calls import caller, device, read

HERE = Path(__file__).parent
call = caller(functions.table())
FORWARD, INVERSE = -1, 1
# cudaDataType (library_types.h)
R_32F, R_64F, R_16F, C_16F, C_32F, C_64F, R_16BF, C_16BF = 0, 1, 2, 6, 4, 5, 14, 15
# cufftXtSubFormat, cufftXtCopyType (cufftXt.h)
INPUT, OUTPUT, INPLACE, INPLACE_SHUFFLED = 0, 1, 2, 3
H2D, D2H, D2D = 0, 1, 2
C2C, R2C = 0x29, 0x2A

# cudalibxt.h on x86-64, written out: cudaLibXtDesc {int version; cudaXtDesc *descriptor;
# libFormat library; int subFormat; void *libDescriptor} and cudaXtDesc {int version; int nGPUs;
# int GPUs[64]; void *data[64]; size_t size[64]; void *cudaXtState}
LIB_DESCRIPTOR, LIB_LIBRARY, LIB_SUBFORMAT = 8, 16, 20
XT_NGPUS, XT_GPUS, XT_DATA, XT_SIZE = 4, 8, 8 + 4 * 64, 8 + 4 * 64 + 8 * 64


def _int(address, offset, ctype=ctypes.c_int):
    return ctype.from_address(address + offset).value


class Desc:
    """A cudaLibXtDesc as a program reads it."""

    def __init__(self, address):
        self.address = address
        self.body = _int(address, LIB_DESCRIPTOR, ctypes.c_uint64)

    @property
    def sub_format(self):
        return _int(self.address, LIB_SUBFORMAT)

    @property
    def gpus(self):
        return [_int(self.body, XT_GPUS + 4 * i) for i in range(_int(self.body, XT_NGPUS))]

    def size(self, i):
        return _int(self.body, XT_SIZE + 8 * i, ctypes.c_uint64)

    def part(self, i, dtype, count=None):
        """The first `count` elements of GPU i's part (all it holds if None)."""
        data = _int(self.body, XT_DATA + 8 * i, ctypes.c_uint64)
        return read(data, self.size(i) // np.dtype(dtype).itemsize if count is None else count, dtype)


def created(gpus=None):
    out = np.zeros(1, np.int32)
    call("cufftCreate", out.ctypes.data)
    h = int(out[0])
    if gpus is not None:
        which = np.array(gpus, np.int32)
        call("cufftXtSetGPUs", h, len(gpus), which.ctypes.data)
    return h


def xt_plan(shape, types, batch=1, gpus=None, h=None):
    h = created(gpus) if h is None else h
    n = np.array(shape, np.int64)
    work = np.full(1, 77, np.uint64)
    in_type, out_type, exec_type = types
    call("cufftXtMakePlanMany", h, len(shape), n.ctypes.data, 0, 1, 0, in_type, 0, 1, 0, out_type, batch,
         work.ctypes.data, exec_type)
    assert work[0] == 0
    return h


def malloc(h, sub_format):
    out = np.zeros(1, np.uint64)
    call("cufftXtMalloc", h, out.ctypes.data, sub_format)
    return Desc(int(out[0]))


def complex_random(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def test_descriptor_structures_have_the_headers_layout(rng):
    h = xt_plan((16,), (C_32F, C_32F, C_32F))
    d = malloc(h, INPLACE)
    assert _int(d.address, LIB_LIBRARY) == 0 and d.sub_format == INPLACE        # LIB_FORMAT_CUFFT
    assert d.gpus == [0]
    assert _int(d.body, XT_SIZE, ctypes.c_uint64) == 16 * 8
    call("cufftXtFree", d.address)


@pytest.mark.parametrize("precision", ["32F", "64F"])
def test_make_plan_many_single_and_double(rng, precision):
    real, cplx, ctype, rtype = {"32F": (R_32F, C_32F, np.complex64, np.float32),
                                "64F": (R_64F, C_64F, np.complex128, np.float64)}[precision]
    tol = dict(rtol=1e-4, atol=1e-3) if precision == "32F" else dict(rtol=1e-10, atol=1e-9)
    shape, batch = (6, 10), 3
    x = complex_random(rng, (batch, *shape), ctype)
    h = xt_plan(shape, (cplx, cplx, cplx), batch)
    for direction, want in ((FORWARD, np.fft.fftn(x, axes=(1, 2))),
                            (INVERSE, np.fft.ifftn(x, axes=(1, 2)) * x[0].size)):
        dst = device(np.full(x.size, np.nan, ctype))
        call("cufftXtExec", h, device(x), dst, direction)
        np.testing.assert_allclose(read(dst, x.size, ctype).reshape(x.shape), want, **tol)
    r = rng.standard_normal((batch, 20)).astype(rtype)
    h = xt_plan((20,), (real, cplx, cplx), batch)
    dst = device(np.full(batch * 11, np.nan, ctype))
    call("cufftXtExec", h, device(r), dst, 12345)                       # real transforms ignore the direction
    np.testing.assert_allclose(read(dst, batch * 11, ctype).reshape(batch, 11), np.fft.rfft(r), **tol)
    h = xt_plan((20,), (cplx, real, cplx), batch)
    spectrum = np.fft.rfft(r).astype(ctype)
    dst = device(np.full(r.size, np.nan, rtype))
    call("cufftXtExec", h, device(spectrum), dst, FORWARD)
    np.testing.assert_allclose(read(dst, r.size, rtype).reshape(r.shape), r * 20, **tol)


def _bf16_bits(values):
    """bfloat16 bits of float32 values, truncated: inputs only need to be bfloat16 values."""
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


# precision -> (real type, complex type, stored as, value of stored)
HALVES = {"16F": (R_16F, C_16F, lambda v: np.asarray(v, np.float16), lambda s: s.astype(np.float32)),
          "16BF": (R_16BF, C_16BF, _bf16_bits, _bf16_values)}


def _pairs(z, store):
    """Complex values as interleaved stored (re, im) pairs."""
    return np.stack([store(z.real), store(z.imag)], axis=-1)


@pytest.mark.parametrize("precision", ["16F", "16BF"])
def test_half_precision_transforms(rng, precision):
    real, cplx, store, value = HALVES[precision]
    relative = 4e-3 if precision == "16F" else 3e-2               # 11 and 8 significant bits
    shape, batch = (8, 16), 2
    stored = _pairs(complex_random(rng, (batch, *shape), np.complex64), store)
    x = value(stored[..., 0]) + 1j * value(stored[..., 1])
    h = xt_plan(shape, (cplx, cplx, cplx), batch)
    poison = np.full(stored.shape, 0x7E00 if precision == "16F" else 0x7FC1, np.uint16)
    dst = device(poison)
    call("cufftXtExec", h, device(stored), dst, FORWARD)
    got = read(dst, stored.size, stored.dtype if precision == "16F" else np.uint16).reshape(stored.shape)
    got = value(got[..., 0]) + 1j * value(got[..., 1])
    want = np.fft.fftn(x.astype(np.complex128), axes=(1, 2))
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= relative * scale
    both = device(stored)                                                # in place: the same bits
    call("cufftXtExec", h, both, both, FORWARD)
    assert np.array_equal(read(both, stored.size, np.uint16), read(dst, stored.size, np.uint16))
    # real to complex and back
    r = store(rng.standard_normal((batch, 32)))
    rv = value(r).astype(np.float64)
    h = xt_plan((32,), (real, cplx, cplx), batch)
    dst = device(np.full((batch, 17, 2), poison.flat[0], np.uint16))
    call("cufftXtExec", h, device(r), dst, FORWARD)
    half = read(dst, batch * 34, np.float16 if precision == "16F" else np.uint16).reshape(batch, 17, 2)
    half = value(half[..., 0]) + 1j * value(half[..., 1])
    want = np.fft.rfft(rv)
    assert np.abs(half - want).max() <= relative * np.abs(want).max()
    h = xt_plan((32,), (cplx, real, cplx), batch)
    dst = device(np.full(r.shape, poison.flat[0], np.uint16))
    call("cufftXtExec", h, device(_pairs(want, store)), dst, FORWARD)
    back = value(read(dst, r.size, np.float16 if precision == "16F" else np.uint16).reshape(r.shape))
    assert np.abs(back - 32 * rv).max() <= relative * 32 * np.abs(rv).max() * 4


@pytest.mark.parametrize("types,sizes,result", [
    ((C_16F, C_16F, C_16F), (12,), Result.NOT_SUPPORTED),            # half sizes are powers of two
    ((C_16BF, C_16BF, C_16BF), (8, 6), Result.NOT_SUPPORTED),
    ((C_32F, C_64F, C_64F), (8,), Result.INVALID_TYPE),              # mixed precisions
    ((R_32F, R_32F, C_32F), (8,), Result.INVALID_TYPE),              # real to real
    ((C_16F, R_16F, C_32F), (8,), Result.INVALID_TYPE),              # execution type of another precision
])
def test_make_plan_many_rules(types, sizes, result):
    h = created()
    with pytest.raises(CufftError) as e:
        xt_plan(sizes, types, h=h)
    assert e.value.status == result


def test_one_gpu_descriptors(rng):
    n0, n1 = 12, 10
    x = complex_random(rng, (n0, n1), np.complex64)
    h = xt_plan((n0, n1), (C_32F, C_32F, C_32F))
    d = malloc(h, INPLACE)
    call("cufftXtMemcpy", h, d.address, device(x), H2D)
    call("cufftXtExecDescriptorC2C", h, d.address, d.address, FORWARD)
    out = device(np.full(x.size, np.nan, np.complex64))
    call("cufftXtMemcpy", h, out, d.address, D2H)
    np.testing.assert_allclose(read(out, x.size, np.complex64).reshape(x.shape), np.fft.fft2(x), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(d.part(0, np.complex64).reshape(x.shape), np.fft.fft2(x), rtol=1e-4, atol=1e-3)
    # out of place from a descriptor to another, real to complex: input and output sizes differ
    r = rng.standard_normal((n0, n1)).astype(np.float32)
    hr = xt_plan((n0, n1), (R_32F, C_32F, C_32F))
    src, dst = malloc(hr, INPUT), malloc(hr, OUTPUT)
    assert _int(src.body, XT_SIZE, ctypes.c_uint64) == r.nbytes
    assert _int(dst.body, XT_SIZE, ctypes.c_uint64) == n0 * (n1 // 2 + 1) * 8
    call("cufftXtMemcpy", hr, src.address, device(r), H2D)
    call("cufftXtExecDescriptor", hr, src.address, dst.address, FORWARD)
    out = device(np.full(n0 * (n1 // 2 + 1), np.nan, np.complex64))
    call("cufftXtMemcpy", hr, out, dst.address, D2H)
    np.testing.assert_allclose(read(out, n0 * (n1 // 2 + 1), np.complex64).reshape(n0, -1), np.fft.rfft2(r),
                               rtol=1e-4, atol=1e-3)
    for desc in (d, src, dst):
        call("cufftXtFree", desc.address)
    with pytest.raises(CufftError) as e:
        call("cufftXtFree", d.address)
    assert e.value.status == Result.INVALID_VALUE


@pytest.fixture
def four_devices(monkeypatch):
    monkeypatch.setenv("ANYCUDA_DEVICES", "4")
    devices.device_count.cache_clear()
    yield
    monkeypatch.delenv("ANYCUDA_DEVICES")
    devices.device_count.cache_clear()


def _slabs(count, parts):
    """The docs' split: the first count % parts get one more."""
    sizes = [count // parts + (i < count % parts) for i in range(parts)]
    starts = np.cumsum([0] + sizes)
    return [slice(a, b) for a, b in zip(starts[:-1], starts[1:])]


@pytest.mark.parametrize("shape", [(7, 9), (5, 6, 4)])
def test_single_transform_on_three_gpus_natural_and_permuted_order(rng, four_devices, shape):
    gpus = [2, 0, 3]
    x = complex_random(rng, shape, np.complex128)
    h = xt_plan(shape, (C_64F, C_64F, C_64F), gpus=gpus)
    d = malloc(h, INPLACE)
    assert d.gpus == gpus
    call("cufftXtMemcpy", h, d.address, device(x), H2D)
    for i, (rows, cols) in enumerate(zip(_slabs(shape[0], 3), _slabs(shape[1], 3))):   # natural: slabs of X
        assert d.size(i) >= 16 * max(x[rows].size, x[:, cols].size)
        assert np.array_equal(d.part(i, np.complex128, x[rows].size), x[rows].reshape(-1))
    call("cufftXtExecDescriptorZ2Z", h, d.address, d.address, FORWARD)
    assert d.sub_format == INPLACE_SHUFFLED
    spectrum = np.fft.fftn(x)
    for i, cols in enumerate(_slabs(shape[1], 3)):                       # permuted: slabs of Y, (X, Y, Z) inside
        np.testing.assert_allclose(d.part(i, np.complex128, spectrum[:, cols].size), spectrum[:, cols].reshape(-1),
                                   rtol=1e-10, atol=1e-9)
    out = device(np.full(x.size, np.nan, np.complex128))
    call("cufftXtMemcpy", h, out, d.address, D2H)                        # to the host in natural order
    np.testing.assert_allclose(read(out, x.size, np.complex128).reshape(shape), spectrum, rtol=1e-10, atol=1e-9)
    call("cufftXtExecDescriptorZ2Z", h, d.address, d.address, INVERSE)   # back to natural order
    assert d.sub_format == INPLACE
    for i, rows in enumerate(_slabs(shape[0], 3)):
        np.testing.assert_allclose(d.part(i, np.complex128, x[rows].size), x[rows].reshape(-1) * x.size,
                                   rtol=1e-10, atol=1e-8)
    # device to device: into a descriptor in permuted order
    e = malloc(h, INPLACE_SHUFFLED)
    call("cufftXtMemcpy", h, e.address, d.address, D2D)
    for i, cols in enumerate(_slabs(shape[1], 3)):
        np.testing.assert_allclose(e.part(i, np.complex128, x[:, cols].size), (x * x.size)[:, cols].reshape(-1),
                                   rtol=1e-10, atol=1e-8)
    call("cufftXtFree", d.address)
    call("cufftXtFree", e.address)


def test_batched_real_transforms_on_two_gpus(rng, four_devices):
    batch, n0, n1 = 5, 4, 6
    half = n1 // 2 + 1
    x = rng.standard_normal((batch, n0, n1))
    padded = np.full((batch, n0, 2 * half), np.nan)                     # in place: rows padded to 2 (n // 2 + 1)
    padded[..., :n1] = x
    h = xt_plan((n0, n1), (R_64F, C_64F, C_64F), batch, gpus=[1, 3])
    d = malloc(h, INPLACE)
    call("cufftXtMemcpy", h, d.address, device(padded), H2D)
    for i, b in enumerate(_slabs(batch, 2)):                             # whole transforms per GPU: 3 and 2
        np.testing.assert_array_equal(d.part(i, np.float64), padded[b].reshape(-1))
    call("cufftXtExecDescriptorD2Z", h, d.address, d.address)
    assert d.sub_format == INPLACE                                       # batches are not permuted
    want = np.fft.rfft2(x)
    for i, b in enumerate(_slabs(batch, 2)):
        np.testing.assert_allclose(d.part(i, np.complex128), want[b].reshape(-1), rtol=1e-10, atol=1e-9)
    out = device(np.full(want.size, np.nan, np.complex128))
    call("cufftXtMemcpy", h, out, d.address, D2H)
    np.testing.assert_allclose(read(out, want.size, np.complex128).reshape(want.shape), want, rtol=1e-10, atol=1e-9)
    call("cufftXtFree", d.address)


def test_multi_gpu_rules(four_devices):
    h = created([0, 1])
    with pytest.raises(CufftError) as e:                                 # single 1-D: cuFFT's own permutation
        xt_plan((64,), (C_32F, C_32F, C_32F), h=h)
    assert e.value.status == Result.NOT_SUPPORTED
    with pytest.raises(CufftError) as e:                                 # half precision on one GPU only
        xt_plan((8, 8), (C_16F, C_16F, C_16F), h=created([0, 1]))
    assert e.value.status == Result.NOT_SUPPORTED
    for gpus, result in (([0, 4], Result.INVALID_DEVICE), ([1, 1], Result.INVALID_VALUE)):
        which = np.array(gpus, np.int32)
        with pytest.raises(CufftError) as e:
            call("cufftXtSetGPUs", created(), 2, which.ctypes.data)
        assert e.value.status == result, gpus
    made = xt_plan((8, 8), (C_32F, C_32F, C_32F), gpus=[0, 1])
    which = np.array([0, 1], np.int32)
    with pytest.raises(CufftError) as e:                                 # after the plan is made
        call("cufftXtSetGPUs", made, 2, which.ctypes.data)
    assert e.value.status == Result.INVALID_PLAN
    d = malloc(made, INPLACE)
    with pytest.raises(CufftError) as e:                                 # multi-GPU plans run on descriptors
        call("cufftXtExec", made, d.part(0, np.uint8).ctypes.data, d.part(0, np.uint8).ctypes.data, FORWARD)
    assert e.value.status == Result.INVALID_VALUE
    other = malloc(made, INPLACE)
    with pytest.raises(CufftError) as e:                                 # in place only
        call("cufftXtExecDescriptorC2C", made, d.address, other.address, FORWARD)
    assert e.value.status == Result.INVALID_VALUE
    with pytest.raises(CufftError) as e:
        call("cufftXtExecDescriptorR2C", made, d.address, d.address)     # a C2C plan
    assert e.value.status == Result.INVALID_VALUE
    with pytest.raises(CufftError) as e:                                 # another plan's shape
        call("cufftXtMemcpy", xt_plan((4, 4), (C_32F, C_32F, C_32F), gpus=[0, 1]), d.address, device(np.zeros(64)), H2D)
    assert e.value.status == Result.INVALID_VALUE
    call("cufftXtFree", d.address)
    call("cufftXtFree", other.address)


def test_callbacks_are_refused_with_a_reason():
    h = xt_plan((16,), (C_32F, C_32F, C_32F))
    routine = np.zeros(1, np.uint64)
    for name, args in (("cufftXtSetCallback", (h, routine.ctypes.data, 0, 0)),
                       ("cufftXtSetJITCallback", (h, 0, 0, 0, 0, 0)),
                       ("cufftXtSetCallbackSharedSize", (h, 0, 1024))):
        with pytest.raises(CufftError) as e:
            call(name, *args)
        assert e.value.status == Result.NOT_SUPPORTED and "device code" in str(e.value), name
    call("cufftXtClearCallback", h, 0)                                   # nothing set, nothing to clear
    with pytest.raises(CufftError) as e:
        call("cufftXtClearCallback", h, 9)
    assert e.value.status == Result.INVALID_VALUE


def test_descriptor_rules():
    h = xt_plan((16,), (C_32F, C_32F, C_32F))
    out = np.zeros(1, np.uint64)
    for sub_format, result in ((4, Result.NOT_SUPPORTED), (5, Result.NOT_SUPPORTED), (9, Result.INVALID_VALUE),
                              (-1, Result.INVALID_VALUE)):
        with pytest.raises(CufftError) as e:
            call("cufftXtMalloc", h, out.ctypes.data, sub_format)
        assert e.value.status == result, sub_format
    d = malloc(h, INPLACE)
    with pytest.raises(CufftError) as e:
        call("cufftXtMemcpy", h, d.address, device(np.zeros(16, np.complex64)), 7)
    assert e.value.status == Result.INVALID_VALUE
    with pytest.raises(CufftError) as e:
        call("cufftXtExecDescriptorC2C", h, d.address, 12345, FORWARD)   # not a descriptor
    assert e.value.status == Result.INVALID_VALUE
    call("cufftXtFree", d.address)


# ---------------------------------------------------------------- a C program on the built library

@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_c_program_through_libcufft(tmp_path, rng):
    """Linked by soname without a run path, run by `anycuda run` with two devices."""
    lib = subprocess.run([sys.executable, "-m", "anycuda.cli", "shim-path"], capture_output=True, text=True,
                         check=True).stdout.strip()
    program = tmp_path / "cufft_xt_calls"
    subprocess.run(["gcc", "-Wall", "-Werror", str(HERE / "programs" / "cufft_xt_calls.c"), "-o", str(program),
                    f"-L{lib}", "-l:libcufft.so.12", "-lm"], check=True)
    pool = rng.standard_normal(32 + 96)
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", str(program)], input=pool.tobytes(),
                       capture_output=True, timeout=300, env={**os.environ, "ANYCUDA_DEVICES": "2"})
    assert r.returncode == 0, r.stderr.decode()
    out = np.frombuffer(r.stdout, np.float64)
    signal = pool[:32].astype(np.float32).reshape(2, 16)
    grid = pool[32:].view(np.complex128).reshape(6, 8)
    assert out[0] == 0                                                   # no work area
    assert list(out[1:4]) == [2, 1, 0]                                   # nGPUs, GPUs
    assert out[4] == INPLACE_SHUFFLED
    np.testing.assert_allclose(out[5:101].view(np.complex128).reshape(6, 8), np.fft.fft2(grid), rtol=1e-10, atol=1e-9)
    assert out[101] == INPLACE
    np.testing.assert_allclose(out[102:198].view(np.complex128).reshape(6, 8), grid * 48, rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(out[198:234].view(np.complex128).reshape(2, 9), np.fft.rfft(signal), rtol=1e-4,
                               atol=1e-4)
    assert out[234] == Result.NOT_SUPPORTED
    assert len(out) == 235
