"""anycuda's cuFFT, called as the C library calls it (anycuda.libraries.cufft.functions), against
numpy.fft on fresh random inputs with poisoned outputs: the six transform types, ranks 1-3,
batches, advanced layouts (strides, distances, embeds), in-place real transforms with their
padding, unnormalised inverses, stream order and every argument rule."""
import threading

import numpy as np
import pytest

import anycuda as ac
from anycuda.libraries.cufft import functions
from anycuda.libraries.cufft.status import CufftError, Result
from library_calls import caller, device, peek, read, stream_handle

call = caller(functions.table())
C2C, R2C, C2R, Z2Z, D2Z, Z2D = 0x29, 0x2A, 0x2C, 0x69, 0x6A, 0x6C
FORWARD, INVERSE = -1, 1
SINGLE = {C2C: True, R2C: True, C2R: True, Z2Z: False, D2Z: False, Z2D: False}


def complex_type(kind):
    return np.complex64 if SINGLE[kind] else np.complex128


def real_type(kind):
    return np.float32 if SINGLE[kind] else np.float64


def plan(rank_sizes, kind, batch=1, inembed=None, istride=1, idist=0, onembed=None, ostride=1, odist=0):
    out = np.zeros(1, np.int32)
    n = np.array(rank_sizes, np.int32)
    emb = lambda e: device(np.array(e, np.int32)) if e is not None else 0
    call("cufftPlanMany", out.ctypes.data, len(rank_sizes), n.ctypes.data, emb(inembed), istride, idist,
         emb(onembed), ostride, odist, kind, batch)
    return int(out[0])


def tolerance(kind):
    return dict(rtol=1e-4, atol=1e-3) if SINGLE[kind] else dict(rtol=1e-10, atol=1e-9)


def exec_name(kind):
    return {C2C: "C2C", R2C: "R2C", C2R: "C2R", Z2Z: "Z2Z", D2Z: "D2Z", Z2D: "Z2D"}[kind]


def execute(handle, kind, src, dst, direction=FORWARD):
    if kind in (C2C, Z2Z):
        call(f"cufftExec{exec_name(kind)}", handle, src, dst, direction)
    else:
        call(f"cufftExec{exec_name(kind)}", handle, src, dst)


@pytest.mark.parametrize("kind", [C2C, Z2Z])
@pytest.mark.parametrize("shape", [(97,), (12, 10), (4, 6, 10)])
def test_complex_transforms_both_directions(rng, kind, shape):
    batch = 3
    x = (rng.standard_normal((batch, *shape)) + 1j * rng.standard_normal((batch, *shape))).astype(complex_type(kind))
    h = plan(shape, kind, batch)
    axes = tuple(range(1, len(shape) + 1))
    for direction, want in ((FORWARD, np.fft.fftn(x, axes=axes)), (INVERSE, np.fft.ifftn(x, axes=axes) * np.prod(shape))):
        dst = device(np.full(x.size + 8, np.nan, x.dtype))
        execute(h, kind, device(x), dst, direction)
        got = read(dst, x.size + 8, x.dtype)
        np.testing.assert_allclose(got[:x.size].reshape(x.shape), want, **tolerance(kind))
        assert np.all(np.isnan(got[x.size:])), "written past the output"
    call("cufftDestroy", h)


@pytest.mark.parametrize("kind", [R2C, D2Z])
@pytest.mark.parametrize("shape", [(30,), (9, 14), (5, 4, 7)])
def test_real_to_complex_out_of_place_and_in_place(rng, kind, shape):
    batch = 2
    x = rng.standard_normal((batch, *shape)).astype(real_type(kind))
    want = np.fft.rfftn(x, axes=tuple(range(1, len(shape) + 1)))
    h = plan(shape, kind, batch)
    dst = device(np.full(want.size, np.nan, want.dtype.type(0).astype(complex_type(kind)).dtype))
    execute(h, kind, device(x), dst)
    np.testing.assert_allclose(read(dst, want.size, complex_type(kind)).reshape(want.shape), want, **tolerance(kind))
    # in place: the real rows padded to 2 (n // 2 + 1)
    half = shape[-1] // 2 + 1
    padded = np.full((batch, *shape[:-1], 2 * half), np.nan, real_type(kind))
    padded[..., :shape[-1]] = x
    both = device(padded)
    execute(h, kind, both, both)
    np.testing.assert_allclose(read(both, want.size, complex_type(kind)).reshape(want.shape), want, **tolerance(kind))


@pytest.mark.parametrize("kind", [C2R, Z2D])
@pytest.mark.parametrize("shape", [(30,), (9, 14), (5, 4, 7)])
def test_complex_to_real_is_the_unnormalised_inverse(rng, kind, shape):
    batch = 2
    x = rng.standard_normal((batch, *shape))
    axes = tuple(range(1, len(shape) + 1))
    spectrum = np.fft.rfftn(x, axes=axes).astype(complex_type(kind))
    h = plan(shape, kind, batch)
    src = device(spectrum)
    dst = device(np.full(x.size, np.nan, real_type(kind)))
    execute(h, kind, src, dst)
    np.testing.assert_allclose(read(dst, x.size, real_type(kind)).reshape(x.shape), x * np.prod(shape),
                               **tolerance(kind))
    assert np.array_equal(read(src, spectrum.size, spectrum.dtype).reshape(spectrum.shape), spectrum)   # input kept


def test_advanced_layouts(rng):
    """Batches interleaved (stride = batch count, distance 1) in, padded rows (embed) out."""
    n0, n1, batch = 6, 10, 4
    x = (rng.standard_normal((batch, n0, n1)) + 1j * rng.standard_normal((batch, n0, n1))).astype(np.complex64)
    interleaved = np.ascontiguousarray(np.moveaxis(x, 0, -1)).reshape(-1)          # element (b, i, j) at (i*n1+j)*batch + b
    out_rows = n1 + 3
    odist = n0 * out_rows + 5
    h = plan((n0, n1), C2C, batch, inembed=(n0, n1), istride=batch, idist=1, onembed=(n0, out_rows), ostride=1,
             odist=odist)
    dst = device(np.full(batch * odist, np.nan, np.complex64))
    execute(h, C2C, device(interleaved), dst)
    got = read(dst, batch * odist, np.complex64)
    want = np.fft.fft2(x)
    for b in range(batch):
        block = got[b * odist:b * odist + n0 * out_rows].reshape(n0, out_rows)
        np.testing.assert_allclose(block[:, :n1], want[b], rtol=1e-4, atol=1e-3)
        assert np.all(np.isnan(block[:, n1:])) and np.all(np.isnan(got[b * odist + n0 * out_rows:(b + 1) * odist]))


def test_plan_functions_agree(rng):
    x = (rng.standard_normal(64) + 1j * rng.standard_normal(64)).astype(np.complex128)
    out, work = np.zeros(1, np.int32), np.full(1, 123, np.uint64)
    call("cufftCreate", out.ctypes.data)
    h = int(out[0])
    call("cufftSetAutoAllocation", h, 0)
    call("cufftMakePlan1d", h, 64, Z2Z, 1, work.ctypes.data)
    assert work[0] == 0                           # anycuda needs no work area
    call("cufftGetSize", h, work.ctypes.data)
    call("cufftEstimate3d", 4, 4, 4, C2C, work.ctypes.data)
    dst = device(np.zeros(64, np.complex128))
    call("cufftExecZ2Z", h, device(x), dst, FORWARD)
    np.testing.assert_allclose(read(dst, 64, np.complex128), np.fft.fft(x), rtol=1e-10, atol=1e-9)
    version = np.zeros(1, np.int32)
    call("cufftGetVersion", version.ctypes.data)
    assert version[0] == 12500


def test_executions_keep_stream_order(rng):
    x = (rng.standard_normal(256) + 1j * rng.standard_normal(256)).astype(np.complex64)
    h = plan((256,), C2C)
    stream = ac.Stream()
    sid = stream_handle(stream)
    call("cufftSetStream", h, sid)
    gate = threading.Event()
    stream.enqueue(gate.wait, 5.0)
    data = device(x)
    execute(h, C2C, data, data, FORWARD)
    execute(h, C2C, data, data, INVERSE)
    assert np.array_equal(peek(data, 256, np.complex64), x)      # nothing ran yet
    gate.set()
    stream.synchronize()
    np.testing.assert_allclose(read(data, 256, np.complex64), 256 * x, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("args,result", [
    (((0,), C2C, 1), Result.INVALID_SIZE),
    (((8,), C2C, 0), Result.INVALID_SIZE),
    (((8,), 0x77, 1), Result.INVALID_TYPE),
    (((2, 2, 2, 2), C2C, 1), Result.INVALID_SIZE),
])
def test_plan_rules(args, result):
    sizes, kind, batch = args
    out = np.zeros(1, np.int32)
    n = np.array(sizes, np.int32)
    with pytest.raises(CufftError) as e:
        call("cufftPlanMany", out.ctypes.data, len(sizes), n.ctypes.data, 0, 1, 0, 0, 1, 0, kind, batch)
    assert e.value.status == result
    assert out[0] == -1


def test_execution_rules():
    h = plan((16,), R2C)
    buf = device(np.zeros(64, np.complex64))
    for name, args, result in (("cufftExecC2C", (h, buf, buf, FORWARD), Result.INVALID_VALUE),    # wrong type
                               ("cufftExecR2C", (h, 0, buf), Result.INVALID_VALUE),               # NULL data
                               ("cufftExecR2C", (9999, buf, buf), Result.INVALID_PLAN)):          # no such plan
        with pytest.raises(CufftError) as e:
            call(name, *args)
        assert e.value.status == result, name
    c = plan((16,), C2C)
    with pytest.raises(CufftError) as e:
        call("cufftExecC2C", c, buf, buf, 0)                                                      # no direction 0
    assert e.value.status == Result.INVALID_VALUE
    out = np.zeros(1, np.int32)
    call("cufftCreate", out.ctypes.data)
    with pytest.raises(CufftError) as e:
        call("cufftExecC2C", int(out[0]), buf, buf, FORWARD)                                      # never made
    assert e.value.status == Result.INVALID_PLAN
    call("cufftDestroy", h)
    with pytest.raises(CufftError) as e:
        call("cufftDestroy", h)
    assert e.value.status == Result.INVALID_PLAN
