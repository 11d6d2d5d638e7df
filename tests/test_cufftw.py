"""anycuda's libcufftw: FFTW3's interface on host memory. Called as the C library calls it
(functions.VALUED, addresses as integers) against numpy.fft on fresh random inputs, outputs
poisoned first; and a C program linked against the built libcufftw.so.12
(tests/programs/cufftw_calls.c), every result checked against numpy."""
import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from anycuda.libraries.cufftw import functions
from anycuda.libraries.cufftw.status import CufftwError, Failure

HERE = Path(__file__).parent
FORWARD, BACKWARD, ESTIMATE, MEASURE = -1, 1, 1, 2
PRECISIONS = {"fftw_": (np.complex128, np.float64, 1e-10), "fftwf_": (np.complex64, np.float32, 2e-4)}


def call(name, *args):
    return functions.VALUED[name](*args)


def failure_of(name, *args):
    with pytest.raises(CufftwError) as e:
        call(name, *args)
    return e.value.status


def complex_values(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def close(got, want, tol):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.max(np.abs(want)))))


def ints(*values):
    held = np.array(values, np.int32)
    _kept.append(held)
    return held.ctypes.data


_kept = []


@pytest.fixture(params=sorted(PRECISIONS))
def prefix(request):
    return request.param


@pytest.mark.parametrize("sign", [FORWARD, BACKWARD])
@pytest.mark.parametrize("shape", [(16,), (8, 6), (4, 5, 3)])
def test_complex_transforms_are_unnormalised(prefix, rng, sign, shape):
    dtype, _, tol = PRECISIONS[prefix]
    x = complex_values(rng, shape, dtype)
    kept = x.copy()
    y = np.full(shape, np.nan, dtype)
    plan = call(f"{prefix}plan_dft_{len(shape)}d", *shape, x.ctypes.data, y.ctypes.data, sign, ESTIMATE)
    assert plan and np.all(np.isnan(y)) and np.array_equal(x, kept)        # planning touches neither array
    call(f"{prefix}execute", plan)
    want = np.fft.fftn(kept.astype(np.complex128)) if sign == FORWARD else np.fft.ifftn(kept) * np.prod(shape)
    close(y, want, tol)
    assert y.dtype == dtype
    call(f"{prefix}destroy_plan", plan)


def test_rank_n_plan_in_place(prefix, rng):
    dtype, _, tol = PRECISIONS[prefix]
    x = complex_values(rng, (6, 10), dtype)
    want = np.fft.fft2(x.astype(np.complex128))
    plan = call(f"{prefix}plan_dft", 2, ints(6, 10), x.ctypes.data, x.ctypes.data, FORWARD, MEASURE)
    call(f"{prefix}execute", plan)
    close(x, want, tol)


@pytest.mark.parametrize("shape", [(12,), (6, 9), (4, 5, 6)])
def test_real_transforms_out_of_place(prefix, rng, shape):
    cdtype, rdtype, tol = PRECISIONS[prefix]
    x = rng.standard_normal(shape).astype(rdtype)
    half = shape[:-1] + (shape[-1] // 2 + 1,)
    spectrum = np.full(half, np.nan, cdtype)
    plan = call(f"{prefix}plan_dft_r2c_{len(shape)}d", *shape, x.ctypes.data, spectrum.ctypes.data, ESTIMATE)
    call(f"{prefix}execute", plan)
    close(spectrum, np.fft.rfftn(x.astype(np.float64)), tol)
    back = np.full(shape, np.nan, rdtype)
    kept = spectrum.copy()
    inverse = call(f"{prefix}plan_dft_c2r", len(shape), ints(*shape), spectrum.ctypes.data, back.ctypes.data, ESTIMATE)
    call(f"{prefix}execute", inverse)
    close(back, x * np.prod(shape), tol)              # the inverse is unnormalised
    assert np.array_equal(spectrum, kept)             # and leaves its input as it was


def test_real_transform_in_place_uses_the_padded_layout(prefix, rng):
    cdtype, rdtype, tol = PRECISIONS[prefix]
    rows, n = 3, 10
    padded = np.full((rows, 2 * (n // 2 + 1)), np.nan, rdtype)
    padded[:, :n] = rng.standard_normal((rows, n))
    signal = padded[:, :n].copy()
    plan = call(f"{prefix}plan_dft_r2c_2d", rows, n, padded.ctypes.data, padded.ctypes.data, ESTIMATE)
    call(f"{prefix}execute", plan)
    close(padded.view(cdtype), np.fft.rfft2(signal.astype(np.float64)), tol)


def test_many_with_strides_and_embeds(prefix, rng):
    dtype, _, tol = PRECISIONS[prefix]
    n, howmany, istride, idist = 10, 3, 2, 23
    x = complex_values(rng, howmany * idist, dtype)
    out = np.full((howmany, 12), np.nan, dtype)                # onembed 12: two poisoned slots per transform
    plan = call(f"{prefix}plan_many_dft", 1, ints(n), howmany, x.ctypes.data, 0, istride, idist, out.ctypes.data,
                ints(12), 1, 12, FORWARD, ESTIMATE)
    call(f"{prefix}execute", plan)
    signals = np.stack([x[b * idist:b * idist + n * istride:istride] for b in range(howmany)]).astype(np.complex128)
    close(out[:, :n], np.fft.fft(signals, axis=1), tol)
    assert np.all(np.isnan(out[:, n:]))


def test_many_real_transforms(prefix, rng):
    cdtype, rdtype, tol = PRECISIONS[prefix]
    x = rng.standard_normal((4, 16)).astype(rdtype)
    y = np.full((4, 9), np.nan, cdtype)
    plan = call(f"{prefix}plan_many_dft_r2c", 1, ints(16), 4, x.ctypes.data, 0, 1, 16, y.ctypes.data, 0, 1, 9,
                ESTIMATE)
    call(f"{prefix}execute", plan)
    close(y, np.fft.rfft(x.astype(np.float64), axis=1), tol)
    back = np.full((4, 16), np.nan, rdtype)
    plan = call(f"{prefix}plan_many_dft_c2r", 1, ints(16), 4, y.ctypes.data, 0, 1, 9, back.ctypes.data, 0, 1, 16,
                ESTIMATE)
    call(f"{prefix}execute", plan)
    close(back, 16 * x, tol)


@pytest.mark.parametrize("form,width", [("guru", np.int32), ("guru64", np.int64)])
def test_guru_transposes_through_its_strides(prefix, rng, form, width):
    """2 x (6 x 4) transforms read from the transposed layout and written row-major."""
    dtype, _, tol = PRECISIONS[prefix]
    x = complex_values(rng, (4, 6, 2), dtype)            # x[j, i, b]: element (i, j) of batch b
    y = np.full((2, 6, 4), np.nan, dtype)
    dims = np.array([(6, 2, 4), (4, 12, 1)], width)      # (n, input stride, output stride)
    batch = np.array([(2, 1, 24)], width)
    plan = call(f"{prefix}plan_{form}_dft", 2, dims.ctypes.data, 1, batch.ctypes.data, x.ctypes.data,
                y.ctypes.data, BACKWARD, ESTIMATE)
    call(f"{prefix}execute", plan)
    logical = np.transpose(x, (2, 1, 0)).astype(np.complex128)
    close(y, np.fft.ifft2(logical) * 24, tol)


def test_execute_dft_runs_the_plan_on_other_arrays(prefix, rng):
    dtype, _, tol = PRECISIONS[prefix]
    a, b = complex_values(rng, 32, dtype), complex_values(rng, 32, dtype)
    ya, yb = np.full(32, np.nan, dtype), np.full(32, np.nan, dtype)
    plan = call(f"{prefix}plan_dft_1d", 32, a.ctypes.data, ya.ctypes.data, FORWARD, ESTIMATE)
    call(f"{prefix}execute_dft", plan, b.ctypes.data, yb.ctypes.data)
    close(yb, np.fft.fft(b.astype(np.complex128)), tol)
    assert np.all(np.isnan(ya))
    assert failure_of(f"{prefix}execute_dft_r2c", plan, b.ctypes.data, yb.ctypes.data) == Failure.INVALID


@pytest.mark.parametrize("name,args,why", [
    ("plan_dft_1d", (0, 1, 1, FORWARD, ESTIMATE), "size 0"),
    ("plan_dft_1d", (8, 1, 1, 0, ESTIMATE), "sign 0"),
    ("plan_dft_2d", (4, -1, 1, 1, FORWARD, ESTIMATE), "a negative size"),
    ("plan_dft", (0, 0, 1, 1, FORWARD, ESTIMATE), "rank 0"),
    ("plan_dft", (4, 8, 1, 1, FORWARD, ESTIMATE), "rank 4"),
    ("plan_many_dft", (1, 8, -1, 1, 0, 1, 8, 1, 0, 1, 8, FORWARD, ESTIMATE), "a negative howmany"),
    ("plan_guru_dft", (1, 0, 0, 0, 1, 1, FORWARD, ESTIMATE), "NULL dims"),
])
def test_planners_refuse_what_fftw_refuses(prefix, name, args, why):
    args = tuple(ints(8, 8, 8, 8) if name in ("plan_dft", "plan_many_dft") and i == 1 else a
                 for i, a in enumerate(args))
    assert failure_of(prefix + name, *args) == Failure.INVALID, why


def test_destroyed_plans_are_refused(prefix):
    x = np.zeros(8, np.complex128)
    plan = call(f"{prefix}plan_dft_1d", 8, x.ctypes.data, x.ctypes.data, FORWARD, ESTIMATE)
    call(f"{prefix}destroy_plan", plan)
    assert failure_of(f"{prefix}execute", plan) == Failure.INVALID
    call(f"{prefix}destroy_plan", 0)                   # NULL: nothing to do


def test_malloc_is_aligned_and_freed(prefix):
    for name, count in (("malloc", 100), ("alloc_real", 7), ("alloc_complex", 7)):
        address = call(prefix + name, count)
        assert address and address % 16 == 0
        ctypes.memset(address, 0x5A, count)
        call(prefix + "free", address)


def test_flops_and_cost_are_reported(prefix):
    x = np.zeros(64, np.complex128)
    plan = call(f"{prefix}plan_dft_1d", 64, x.ctypes.data, x.ctypes.data, FORWARD, ESTIMATE)
    counts = np.full(3, np.nan)
    call(f"{prefix}flops", plan, *(counts[i:].ctypes.data for i in range(3)))
    assert counts[0] + counts[1] == pytest.approx(5 * 64 * 6) and counts[2] == 0
    assert call(f"{prefix}cost", plan) == 0.0
    assert call(f"{prefix}import_wisdom_from_file", 0) == 0      # no wisdom: FFTW's answer for a failed import


# ---------------------------------------------------------------- a C program on the built library

def _shim_folder():
    return Path(subprocess.run([sys.executable, "-m", "anycuda.cli", "shim-path"], capture_output=True, text=True,
                               check=True).stdout.strip())


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_c_program_through_libcufftw(tmp_path, rng):
    """Linked by soname without a run path: `anycuda run` is what makes the loader find ours."""
    lib = _shim_folder()
    program = tmp_path / "cufftw_calls"
    subprocess.run(["gcc", "-Wall", "-Werror", str(HERE / "programs" / "cufftw_calls.c"), "-o", str(program),
                    f"-L{lib}", "-l:libcufftw.so.12", "-lm"], check=True)
    pool = rng.standard_normal(2000)
    r = subprocess.run([sys.executable, "-m", "anycuda.cli", "run", "--", str(program)], input=pool.tobytes(),
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    out = Output(np.frombuffer(r.stdout, np.float64))
    inputs = Output(pool)

    def complex_input(count):
        return inputs.take(2 * count).view(np.complex128)

    x = complex_input(16)
    assert out.take(1)[0] == 1                                    # planning left both arrays alone
    close(out.take(32).view(np.complex128), np.fft.fft(x), 1e-10)
    close(out.take(32).view(np.complex128), np.fft.fft(complex_input(16)), 1e-10)
    assert out.take(1)[0] == 1                                    # fftw_malloc aligned
    grid = complex_input(48).reshape(8, 6)
    close(out.take(96).view(np.complex128).reshape(8, 6), np.fft.ifft2(grid) * 48, 1e-10)
    cube = inputs.take(120).reshape(4, 5, 6)
    close(out.take(160).view(np.complex128).reshape(4, 5, 4), np.fft.rfftn(cube), 1e-10)
    half = complex_input(7).copy()
    half[0], half[6] = half[0].real, half[6].real
    close(out.take(12), np.fft.irfft(half, 12) * 12, 1e-10)
    strided = inputs.take(126).astype(np.float32).astype(np.float64).view(np.complex128)
    signals = np.stack([strided[b * 21:b * 21 + 20:2] for b in range(3)])
    close(out.take(60).view(np.complex128).reshape(3, 10), np.fft.fft(signals, axis=1), 2e-5)
    columns = inputs.take(16).reshape(8, 2)
    close(out.take(20).view(np.complex128).reshape(2, 5), np.fft.rfft(columns.T, axis=1), 1e-10)
    assert out.take(1)[0] == 1                                    # refused arguments gave NULL plans
    assert out.at == len(out.values)


class Output:
    def __init__(self, values):
        self.values, self.at = values, 0

    def take(self, count):
        v = self.values[self.at:self.at + count]
        self.at += count
        return v
