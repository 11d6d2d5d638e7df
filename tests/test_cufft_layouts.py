"""cuFFT's advanced data layouts for all six transform types, checked element by element.

Where each element lives is computed here from the documented formula, independently of
anycuda's own view code: element (b, x, y, z) of a batch is at
b * dist + ((x * embed[1] + y) * embed[2] + z) * stride, and for real transforms the complex
side holds n[-1] // 2 + 1 elements in its last dimension. Every destination starts full of NaN;
after the transform the layout's elements must match numpy.fft and everything else must still
be NaN (nothing outside the layout written); an out-of-place input must be left as it was
(anycuda keeps even a C2R input intact, which cuFFT does not promise).
"""
import numpy as np
import pytest

from anycuda.libraries.cufft import functions
from library_calls import caller, device, read

call = caller(functions.table())
FORWARD, INVERSE = -1, 1

# type -> (name, input dtype, output dtype, shape side of input, of output): "full" is n,
# "half" is n with its last size n // 2 + 1
TYPES = {
    0x29: ("C2C", np.complex64, np.complex64, "full", "full"),
    0x69: ("Z2Z", np.complex128, np.complex128, "full", "full"),
    0x2A: ("R2C", np.float32, np.complex64, "full", "half"),
    0x6A: ("D2Z", np.float64, np.complex128, "full", "half"),
    0x2C: ("C2R", np.complex64, np.float32, "half", "full"),
    0x6C: ("Z2D", np.complex128, np.float64, "half", "full"),
}


def shape_of(sizes, side):
    return tuple(sizes) if side == "full" else tuple(sizes[:-1]) + (sizes[-1] // 2 + 1,)


def offsets(shape, batch, embed, stride, dist):
    """The element offset of every (b, *index) of a layout, from cuFFT's formula."""
    idx = np.indices((batch, *shape))
    linear = idx[1]
    for axis in range(1, len(shape)):
        linear = linear * embed[axis] + idx[axis + 1]
    return idx[0] * dist + linear * stride


def tolerance(dtype):
    single = np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.complex64))
    return dict(rtol=2e-4, atol=2e-3) if single else dict(rtol=1e-10, atol=1e-9)


def data_and_reference(rng, kind, sizes, batch, direction):
    """(input values (batch, *in shape), expected output (batch, *out shape))."""
    name, src, dst, _, _ = TYPES[kind]
    axes = tuple(range(1, len(sizes) + 1))
    shape = (batch, *sizes)
    if name in ("C2C", "Z2Z"):
        x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(src)
        want = np.fft.fftn(x, axes=axes) if direction == FORWARD else np.fft.ifftn(x, axes=axes) * np.prod(sizes)
        return x, want
    real = rng.standard_normal(shape)
    if name in ("R2C", "D2Z"):
        x = real.astype(src)
        return x, np.fft.rfftn(x.astype(np.float64), axes=axes)
    spectrum = np.fft.rfftn(real, axes=axes).astype(src)
    return spectrum, real * np.prod(sizes)


def make_plan(sizes, kind, batch, inner, outer, api="cufftPlanMany"):
    """A plan through cufftPlanMany (32-bit) or cufftCreate + cufftMakePlanMany64."""
    n = np.array(sizes, np.int64 if api.endswith("64") else np.int32)
    dt = n.dtype

    def emb(layout):
        return device(np.array(layout[0], dt)) if layout else 0
    (istride, idist), (ostride, odist) = ((inner[1], inner[2]) if inner else (1, 0)), \
                                         ((outer[1], outer[2]) if outer else (1, 0))
    out = np.zeros(1, np.int32)
    if api == "cufftPlanMany":
        call(api, out.ctypes.data, len(sizes), n.ctypes.data, emb(inner), istride, idist, emb(outer), ostride,
             odist, kind, batch)
        return int(out[0])
    call("cufftCreate", out.ctypes.data)
    work = np.full(1, 7, np.uint64)
    call(api, int(out[0]), len(sizes), n.ctypes.data, emb(inner), istride, idist, emb(outer), ostride, odist,
         kind, batch, work.ctypes.data)
    return int(out[0])


def execute(handle, kind, src, dst, direction=FORWARD):
    name = TYPES[kind][0]
    if name in ("C2C", "Z2Z"):
        call(f"cufftExec{name}", handle, src, dst, direction)
    else:
        call(f"cufftExec{name}", handle, src, dst)


def padded_layout(shape, pad, stride, gap):
    """embed = shape grown by `pad` (its first entry unused), stride, and a distance leaving
    `gap` unused elements between batches."""
    embed = (shape[0] + 5,) + tuple(s + pad for s in shape[1:])
    span = (offsets(shape, 1, embed, stride, 0).max() + 1)
    return embed, stride, int(span + gap)


LAYOUTS = {
    # name: function(shape, batch) -> (embed, stride, dist)
    "padded": lambda shape, batch: padded_layout(shape, 2, 1, 3),
    "strided": lambda shape, batch: padded_layout(shape, 1, 3, 1),
    "interleaved": lambda shape, batch: (shape, batch, 1),       # element (b, i) at i * batch + b
}


@pytest.mark.parametrize("kind", list(TYPES), ids=lambda k: TYPES[k][0])
@pytest.mark.parametrize("sizes", [(12,), (7,), (6, 9), (4, 5, 6)], ids=str)
@pytest.mark.parametrize("in_layout,out_layout", [("padded", "strided"), ("interleaved", "padded"),
                                                  ("strided", "interleaved")])
def test_advanced_layout_out_of_place(rng, kind, sizes, in_layout, out_layout):
    name, src_t, dst_t, in_side, out_side = TYPES[kind]
    batch = 3
    in_shape, out_shape = shape_of(sizes, in_side), shape_of(sizes, out_side)
    inner, outer = LAYOUTS[in_layout](in_shape, batch), LAYOUTS[out_layout](out_shape, batch)
    x, want = data_and_reference(rng, kind, sizes, batch, FORWARD)
    at_in, at_out = offsets(in_shape, batch, *inner), offsets(out_shape, batch, *outer)
    source = np.full(at_in.max() + 4, np.nan, src_t)
    source[at_in] = x
    dest_len = at_out.max() + 4
    src, dst = device(source), device(np.full(dest_len, np.nan, dst_t))
    h = make_plan(sizes, kind, batch, inner, outer)
    execute(h, kind, src, dst)
    got = read(dst, dest_len, dst_t)
    np.testing.assert_allclose(got[at_out], want, **tolerance(dst_t))
    outside = np.ones(dest_len, bool)
    outside[at_out] = False
    assert np.all(np.isnan(got[outside])), "written outside the output layout"
    assert np.array_equal(read(src, source.size, src_t), source, equal_nan=True), "input changed"
    call("cufftDestroy", h)


@pytest.mark.parametrize("kind", [0x29, 0x69], ids=["C2C", "Z2Z"])
@pytest.mark.parametrize("sizes", [(10,), (6, 5), (3, 4, 5)], ids=str)
def test_advanced_layout_in_place_complex(rng, kind, sizes):
    _, t, _, _, _ = TYPES[kind]
    batch = 2
    layout = padded_layout(sizes, 1, 2, 2)
    x, _ = data_and_reference(rng, kind, sizes, batch, FORWARD)
    at = offsets(sizes, batch, *layout)
    buf = np.full(at.max() + 3, np.nan, t)
    buf[at] = x
    ptr = device(buf)
    h = make_plan(sizes, kind, batch, layout, layout, api="cufftMakePlanMany64")
    axes = tuple(range(1, len(sizes) + 1))
    execute(h, kind, ptr, ptr, FORWARD)
    got = read(ptr, buf.size, t)
    np.testing.assert_allclose(got[at], np.fft.fftn(x, axes=axes), **tolerance(t))
    execute(h, kind, ptr, ptr, INVERSE)              # unnormalised: the round trip is n * x
    got = read(ptr, buf.size, t)
    np.testing.assert_allclose(got[at], x * np.prod(sizes), **tolerance(t))
    outside = np.ones(buf.size, bool)
    outside[at] = False
    assert np.all(np.isnan(got[outside]))


@pytest.mark.parametrize("forward,inverse", [(0x2A, 0x2C), (0x6A, 0x6C)], ids=["R2C+C2R", "D2Z+Z2D"])
@pytest.mark.parametrize("sizes", [(9,), (10,), (4, 7), (3, 4, 6)], ids=str)
def test_advanced_layout_in_place_real(rng, forward, inverse, sizes):
    """In place with advanced layouts: the real side's rows are 2 (n // 2 + 1) reals long,
    the complex side's n // 2 + 1 complexes, the real distance twice the complex one."""
    real_t, complex_t = TYPES[forward][1], TYPES[forward][2]
    batch = 2
    half = sizes[-1] // 2 + 1
    c_shape = shape_of(sizes, "half")
    c_embed = (sizes[0],) + c_shape[1:]
    r_embed = c_embed[:-1] + (2 * half,) if len(sizes) > 1 else c_embed
    c_dist = int(np.prod(c_shape)) + 1                     # one spare complex between batches
    real_layout, complex_layout = (r_embed, 1, 2 * c_dist), (c_embed, 1, c_dist)
    x = rng.standard_normal((batch, *sizes)).astype(real_t)
    at_r, at_c = offsets(sizes, batch, *real_layout), offsets(c_shape, batch, *complex_layout)
    nbytes = batch * c_dist * np.dtype(complex_t).itemsize
    buf = np.full(nbytes // np.dtype(real_t).itemsize, np.nan, real_t)
    buf[at_r] = x
    ptr = device(buf)
    fwd = make_plan(sizes, forward, batch, real_layout, complex_layout)
    inv = make_plan(sizes, inverse, batch, complex_layout, real_layout)
    execute(fwd, forward, ptr, ptr)
    spectrum = read(ptr, batch * c_dist, complex_t)
    axes = tuple(range(1, len(sizes) + 1))
    np.testing.assert_allclose(spectrum[at_c], np.fft.rfftn(x, axes=axes), **tolerance(complex_t))
    execute(inv, inverse, ptr, ptr)
    np.testing.assert_allclose(read(ptr, buf.size, real_t)[at_r], x * np.prod(sizes), **tolerance(real_t))


@pytest.mark.parametrize("kind", list(TYPES), ids=lambda k: TYPES[k][0])
def test_null_embed_means_the_basic_layout(rng, kind):
    """inembed or onembed NULL: the basic layout, strides and distances ignored."""
    name, src_t, dst_t, in_side, out_side = TYPES[kind]
    sizes, batch = (6, 8), 2
    x, want = data_and_reference(rng, kind, sizes, batch, FORWARD)
    n = np.array(sizes, np.int32)
    out = np.zeros(1, np.int32)
    call("cufftPlanMany", out.ctypes.data, 2, n.ctypes.data, 0, 5, 1000, 0, 7, 999, kind, batch)
    count = want.size
    dst = device(np.full(count + 5, np.nan, dst_t))
    execute(int(out[0]), kind, device(x), dst)
    got = read(dst, count + 5, dst_t)
    np.testing.assert_allclose(got[:count].reshape(want.shape), want, **tolerance(dst_t))
    assert np.all(np.isnan(got[count:]))


@pytest.mark.parametrize("kind", list(TYPES), ids=lambda k: TYPES[k][0])
def test_plan_forms_agree(rng, kind):
    """cufftPlan1d/2d/3d and cufftCreate + cufftMakePlan1d/2d/3d give the basic layout."""
    name, src_t, dst_t, _, _ = TYPES[kind]
    for sizes, batch in (((16,), 3), ((6, 10), 1), ((4, 6, 5), 1)):
        x, want = data_and_reference(rng, kind, sizes, batch, FORWARD)
        for made in (False, True):
            out = np.zeros(1, np.int32)
            if made:
                call("cufftCreate", out.ctypes.data)
                work = np.zeros(1, np.uint64)
                if len(sizes) == 1:
                    call("cufftMakePlan1d", int(out[0]), sizes[0], kind, batch, work.ctypes.data)
                else:
                    call(f"cufftMakePlan{len(sizes)}d", int(out[0]), *sizes, kind, work.ctypes.data)
            elif len(sizes) == 1:
                call("cufftPlan1d", out.ctypes.data, sizes[0], kind, batch)
            else:
                call(f"cufftPlan{len(sizes)}d", out.ctypes.data, *sizes, kind)
            dst = device(np.full(want.size + 3, np.nan, dst_t))
            execute(int(out[0]), kind, device(x), dst)
            got = read(dst, want.size + 3, dst_t)
            np.testing.assert_allclose(got[:want.size].reshape(want.shape), want, **tolerance(dst_t))
            assert np.all(np.isnan(got[want.size:]))
            call("cufftDestroy", int(out[0]))


def test_overlapping_input_batches(rng):
    """A distance shorter than a transform reads overlapping frames (a short-time spectrum):
    frames of 96 samples every 32, each to its own padded row."""
    signal = rng.standard_normal(1024).astype(np.float32)
    frames, rows = (1024 - 96) // 32 + 1, 49 + 3
    h = make_plan((96,), 0x2A, frames, ((1024,), 1, 32), ((rows,), 1, rows))
    dst = device(np.full(frames * rows, np.nan, np.complex64))
    execute(h, 0x2A, device(signal), dst)
    got = read(dst, frames * rows, np.complex64).reshape(frames, rows)
    want = np.fft.rfft(np.lib.stride_tricks.sliding_window_view(signal, 96)[::32].astype(np.float64), axis=-1)
    np.testing.assert_allclose(got[:, :49], want, rtol=2e-4, atol=2e-3)
    assert np.all(np.isnan(got[:, 49:]))


@pytest.mark.parametrize("kind", [0x69, 0x6A, 0x6C], ids=["Z2Z", "D2Z", "Z2D"])
@pytest.mark.parametrize("sizes", [(1,), (1009,), (17, 19), (2, 1, 13)], ids=str)
def test_prime_and_unit_sizes(rng, kind, sizes):
    """Sizes pocketfft does by Bluestein's algorithm (large primes), and sizes of 1."""
    _, _, dst_t, _, out_side = TYPES[kind]
    x, want = data_and_reference(rng, kind, sizes, 2, FORWARD)
    count = want.size
    dst = device(np.full(count + 2, np.nan, dst_t))
    execute(make_plan(sizes, kind, 2, None, None), kind, device(x), dst)
    got = read(dst, count + 2, dst_t)
    np.testing.assert_allclose(got[:count].reshape(want.shape), want, rtol=1e-9, atol=1e-8)
    assert np.all(np.isnan(got[count:]))
