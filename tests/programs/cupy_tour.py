"""CuPy, unchanged, through its public API: each case computes with CuPy and with numpy on fresh
random inputs and reports whether they agree. Prints one JSON object {case: {"ok", "detail"}};
`python cupy_tour.py CASE...` runs only those cases."""
import json
import sys
import traceback

import numpy as np

import cupy as cp

rng = np.random.default_rng()
CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def same(got, want, what, rtol=1e-5, atol=1e-6):
    got = cp.asnumpy(got) if isinstance(got, cp.ndarray) else np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape}, numpy {want.shape}")
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@case
def creation_and_elementwise():
    x = rng.standard_normal(3001).astype(np.float32)
    y = rng.standard_normal(3001).astype(np.float32)
    dx, dy = cp.asarray(x), cp.asarray(y)
    same(cp.arange(7, 100, 3), np.arange(7, 100, 3), "arange")
    same(cp.linspace(-1, 2, 33), np.linspace(-1, 2, 33), "linspace")
    same(cp.full((3, 5), 2.5, cp.float64), np.full((3, 5), 2.5), "full")
    same(dx * 2 + dy, x * 2 + y, "axpy")
    same(cp.sin(dx) * cp.exp(dy / 4), np.sin(x) * np.exp(y / 4), "sin*exp", rtol=1e-4)
    same(cp.where(dx > dy, dx, -dy), np.where(x > y, x, -y), "where")
    same(cp.clip(dx, -0.5, 0.5), np.clip(x, -0.5, 0.5), "clip")
    same(cp.maximum(dx, dy), np.maximum(x, y), "maximum")
    same((dx * 100).astype(cp.int32) // 7, (x * 100).astype(np.int32) // 7, "astype and floor division")
    m = rng.integers(-50, 50, (37, 29)).astype(np.int64)
    same(cp.asarray(m).T.copy(), m.T, "transpose copy")
    same(cp.asarray(m)[::3, 1::2] + 1, m[::3, 1::2] + 1, "strided view")
    same(cp.asarray(m) + cp.arange(29), m + np.arange(29), "broadcast")


@case
def reductions():
    from cupy._core import _accelerator
    x = rng.random(100_003).astype(np.float32)
    m = rng.standard_normal((123, 77))
    before = _accelerator.get_reduction_accelerators()
    try:
        for accelerators in ([], ["cub"]):          # CuPy's own reduction kernels, then CUB's
            _accelerator.set_reduction_accelerators(accelerators)
            _accelerator.set_routine_accelerators(accelerators)
            d, dm = cp.asarray(x), cp.asarray(m)
            tag = f" ({'+'.join(accelerators) or 'cupy'})"
            same(d.sum(), x.sum(dtype=np.float64), "sum" + tag, rtol=1e-5)
            same(d.max(), x.max(), "max" + tag)
            same(d.argmin(), x.argmin(), "argmin" + tag)
            same(dm.mean(axis=0), m.mean(axis=0), "mean axis 0" + tag)
            same(dm.std(axis=1), m.std(axis=1), "std axis 1" + tag)
            same(dm.prod(axis=1), m.prod(axis=1), "prod" + tag, rtol=1e-9)
            same(cp.count_nonzero(dm > 0), np.count_nonzero(m > 0), "count_nonzero" + tag)
            same(cp.all(dm < 100), True, "all" + tag)
    finally:
        _accelerator.set_reduction_accelerators(before)


@case
def scans():
    x = rng.integers(0, 10, 50_001).astype(np.int64)
    f = rng.random(1000)
    same(cp.cumsum(cp.asarray(x)), np.cumsum(x), "cumsum")
    same(cp.cumprod(cp.asarray(f[:50] + 0.5)), np.cumprod(f[:50] + 0.5), "cumprod", rtol=1e-9)
    m = rng.random((40, 30))
    same(cp.cumsum(cp.asarray(m), axis=1), np.cumsum(m, axis=1), "cumsum axis 1", rtol=1e-9)
    same(cp.diff(cp.asarray(f)), np.diff(f), "diff")


@case
def sorting():
    x = rng.standard_normal(20_000).astype(np.float32)
    i = rng.integers(0, 300, 5000)
    d = cp.asarray(x)
    same(cp.sort(d), np.sort(x), "sort")
    same(d[cp.argsort(d)], x[np.argsort(x)], "argsort order")
    same(cp.unique(cp.asarray(i)), np.unique(i), "unique")
    values, counts = cp.unique(cp.asarray(i), return_counts=True)
    same(counts, np.unique(i, return_counts=True)[1], "unique counts")
    m = rng.integers(0, 1000, (30, 50))
    same(cp.sort(cp.asarray(m), axis=1), np.sort(m, axis=1), "sort axis 1")
    same(cp.searchsorted(cp.sort(d), cp.asarray(x[:100])), np.searchsorted(np.sort(x), x[:100]), "searchsorted")


@case
def indexing():
    x = rng.standard_normal(5000)
    idx = rng.integers(0, 5000, 777)
    d = cp.asarray(x)
    same(d[cp.asarray(idx)], x[idx], "fancy gather")
    same(d[d > 0.3], x[x > 0.3], "boolean mask")
    e, y = d.copy(), x.copy()
    e[e < 0] = 0
    y[y < 0] = 0
    same(e, y, "masked assignment")
    m = rng.random((60, 70))
    rows, cols = rng.integers(0, 60, 50), rng.integers(0, 70, 50)
    same(cp.asarray(m)[cp.asarray(rows), cp.asarray(cols)], m[rows, cols], "2-D fancy")
    same(cp.nonzero(cp.asarray(m) > 0.9)[1], np.nonzero(m > 0.9)[1], "nonzero")
    import cupyx
    acc = cp.zeros(10)
    cupyx.scatter_add(acc, cp.asarray(idx % 10), 1.0)
    same(acc, np.bincount(idx % 10, minlength=10).astype(float), "scatter_add")


@case
def raw_kernels_and_modules():
    kernel = cp.RawKernel(r'''
    extern "C" __global__ void axpb(const float* x, float* y, float a, float b, int n) {
        int i = blockDim.x * blockIdx.x + threadIdx.x;
        if (i < n) y[i] = a * x[i] + b;
    }''', "axpb")
    x = rng.random(1000).astype(np.float32)
    y = cp.full(1000, cp.nan, cp.float32)
    kernel((4,), (256,), (cp.asarray(x), y, np.float32(3), np.float32(-1), np.int32(1000)))
    same(y, x * np.float32(3) - 1, "RawKernel")
    module = cp.RawModule(code=r'''
    template <typename T> __global__ void twice(T* x, int n) {
        int i = blockDim.x * blockIdx.x + threadIdx.x;
        if (i < n) x[i] = x[i] + x[i];
    }''', options=("-std=c++17",), name_expressions=["twice<float>", "twice<int>", "twice<double>"])
    for dtype, name in ((np.float32, "twice<float>"), (np.int32, "twice<int>"), (np.float64, "twice<double>")):
        v = (rng.random(300) * 100).astype(dtype)
        d = cp.asarray(v)
        module.get_function(name)((2,), (256,), (d, np.int32(300)))
        same(d, v + v, name)


@case
def elementwise_and_reduction_kernels():
    squared_diff = cp.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "squared_diff")
    x, y = rng.random(999).astype(np.float32), rng.random(999).astype(np.float32)
    same(squared_diff(cp.asarray(x), cp.asarray(y)), (x - y) ** 2, "ElementwiseKernel")
    l2 = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")
    m = rng.random((20, 500))
    same(l2(cp.asarray(m), axis=1), np.sqrt((m * m).sum(axis=1)), "ReductionKernel axis 1")
    same(l2(cp.asarray(m)), np.sqrt((m * m).sum()), "ReductionKernel")


@case
def cupyx_jit():
    from cupyx import jit

    @jit.rawkernel()
    def elementwise_copy(x, y, size):
        tid = jit.blockIdx.x * jit.blockDim.x + jit.threadIdx.x
        ntid = jit.gridDim.x * jit.blockDim.x
        for i in range(tid, size, ntid):
            y[i] = x[i] * 2

    x = rng.random(4321).astype(np.float32)
    y = cp.zeros_like(cp.asarray(x))
    elementwise_copy((8,), (128,), (cp.asarray(x), y, cp.uint32(x.size)))
    same(y, x * 2, "cupyx.jit.rawkernel")


@case
def streams_and_events():
    x = rng.random(200_000).astype(np.float32)
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    with s1:
        start.record()
        a = cp.asarray(x) * 3
        end.record()
    with s2:
        b = cp.asarray(x) + 1
    s1.synchronize()
    s2.synchronize()
    end.synchronize()
    ms = cp.cuda.get_elapsed_time(start, end)
    assert ms >= 0, ms
    same(a, x * 3, "stream 1")
    same(b, x + 1, "stream 2")
    assert end.done and s1.done


@case
def memory_pool_and_pinned_memory():
    pool = cp.get_default_memory_pool()
    before = pool.used_bytes()
    a = cp.zeros(1 << 20, cp.uint8)
    assert pool.used_bytes() >= before + (1 << 20), (pool.used_bytes(), before)
    del a
    pool.free_all_blocks()
    assert pool.total_bytes() <= pool.used_bytes() + (1 << 20)
    x = rng.random(10_000)
    pinned = cp.cuda.alloc_pinned_memory(x.nbytes)
    host = np.frombuffer(pinned, x.dtype, x.size)
    host[:] = x
    stream = cp.cuda.Stream()
    d = cp.empty_like(cp.asarray(x))
    d.set(host, stream=stream)
    back = np.empty_like(x)
    d.get(stream=stream, out=back)
    stream.synchronize()
    same(back, x, "pinned round trip")
    import cupyx
    z = cupyx.zeros_pinned(100)
    assert z.sum() == 0 and z.shape == (100,)


@case
def runtime_queries():
    rt = cp.cuda.runtime
    count = rt.getDeviceCount()
    props = rt.getDeviceProperties(0)
    free, total = rt.memGetInfo()
    assert count >= 1 and props["major"] >= 7 and props["multiProcessorCount"] >= 1, (count, props["major"])
    assert 0 < free <= total, (free, total)
    assert rt.runtimeGetVersion() >= 12000 and rt.driverGetVersion() >= 12000
    assert cp.cuda.Device(0).compute_capability == f"{props['major']}{props['minor']}"
    assert props["name"], props["name"]


@case
def several_devices():
    n = cp.cuda.runtime.getDeviceCount()
    x = rng.random(1000)
    results = []
    for dev in range(n):
        with cp.cuda.Device(dev):
            d = cp.asarray(x)
            assert d.device.id == dev
            results.append(float((d * (dev + 1)).sum()))
    same(results, [x.sum() * (dev + 1) for dev in range(n)], "per-device sums", rtol=1e-9)
    return {"devices": n}


@case
def cublas_products():
    """matmul, dot, vdot, norm, tensordot and batched products: CuPy calls cuBLAS (anycuda's)."""
    for dtype, tol in ((np.float32, 1e-4), (np.float64, 1e-10), (np.complex64, 1e-4), (np.complex128, 1e-10),
                       (np.float16, 2e-2)):
        a = rng.standard_normal((131, 70)).astype(dtype)
        b = rng.standard_normal((70, 93)).astype(dtype)
        if np.dtype(dtype).kind == "c":
            a = a + 1j * rng.standard_normal(a.shape).astype(dtype)
        want = (a.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64) @ b).astype(dtype)
        same(cp.asarray(a) @ cp.asarray(b), want, f"matmul {np.dtype(dtype).name}", rtol=tol, atol=tol * 10)
        same(cp.asarray(a).T.dot(cp.asarray(a[:, 0])), a.T @ a[:, 0], f"transposed matrix-vector {np.dtype(dtype).name}",
             rtol=tol, atol=tol * 10)
    x = rng.standard_normal((5, 40, 30)).astype(np.float32)
    y = rng.standard_normal((5, 30, 20)).astype(np.float32)
    same(cp.matmul(cp.asarray(x), cp.asarray(y)), x @ y, "batched matmul", rtol=1e-4, atol=1e-4)
    v = rng.standard_normal(1000)
    same(cp.dot(cp.asarray(v), cp.asarray(v[::-1])), v @ v[::-1], "dot", rtol=1e-10)
    same(cp.vdot(cp.asarray(v + 1j), cp.asarray(v)), np.vdot(v + 1j, v), "vdot", rtol=1e-10)
    same(cp.linalg.norm(cp.asarray(v)), np.linalg.norm(v), "norm", rtol=1e-10)
    same(cp.tensordot(cp.asarray(x), cp.asarray(y), axes=([2, 0], [1, 0])), np.tensordot(x, y, axes=([2, 0], [1, 0])),
         "tensordot", rtol=1e-4, atol=1e-4)


@case
def cufft_transforms():
    """cupy.fft through cuFFT (anycuda's): complex, real, n-dimensional, on chosen axes, both precisions."""
    x = rng.standard_normal((6, 40)) + 1j * rng.standard_normal((6, 40))
    same(cp.fft.fft(cp.asarray(x)), np.fft.fft(x), "fft", rtol=1e-10, atol=1e-10)
    same(cp.fft.ifft(cp.asarray(x), axis=0), np.fft.ifft(x, axis=0), "ifft on axis 0", rtol=1e-10, atol=1e-12)
    same(cp.fft.fft2(cp.asarray(x.astype(np.complex64))), np.fft.fft2(x).astype(np.complex64), "fft2 single",
         rtol=1e-4, atol=1e-3)
    r = rng.standard_normal((8, 12, 10))
    same(cp.fft.rfftn(cp.asarray(r)), np.fft.rfftn(r), "rfftn", rtol=1e-10, atol=1e-10)
    same(cp.fft.irfft(cp.asarray(np.fft.rfft(r[0, 0])), 10), r[0, 0], "irfft", rtol=1e-10, atol=1e-12)
    same(cp.fft.fftn(cp.asarray(r + 0j), axes=(0, 2)), np.fft.fftn(r, axes=(0, 2)), "fftn on axes (0, 2)",
         rtol=1e-10, atol=1e-10)


@case
def curand_random():
    """cupy.random through cuRAND (anycuda's): seeded repeatability and each distribution's moments."""
    cp.random.seed(1234)
    u = cp.random.rand(200000)
    cp.random.seed(1234)
    same(cp.random.rand(200000), cp.asnumpy(u), "the same seed gives the same numbers", rtol=0, atol=0)
    checks = {"uniform": (u, 0.5, 1 / 12),
              "normal": (cp.random.normal(1.0, 2.0, 200000), 1.0, 4.0),
              "lognormal log": (cp.log(cp.random.lognormal(0.0, 0.5, 200000)), 0.0, 0.25),
              "poisson": (cp.random.poisson(6.0, 200000).astype(cp.float64), 6.0, 6.0),
              "standard normal f32": (cp.random.standard_normal(200001, dtype=cp.float32).astype(cp.float64), 0.0, 1.0)}
    for what, (x, mean, var) in checks.items():
        got = (float(x.mean()), float(x.var()))
        if abs(got[0] - mean) > 0.02 * max(1.0, abs(mean)) or abs(got[1] - var) > 0.03 * var:
            raise AssertionError(f"{what}: mean {got[0]}, variance {got[1]}; want {mean}, {var}")
    k = cp.random.randint(0, 10, 100000)
    counts = np.bincount(cp.asnumpy(k), minlength=10)
    if counts.min() < 9000 or counts.max() > 11000:
        raise AssertionError(f"randint counts {counts}")


@case
def strided_views_specialised():
    """Elementwise kernels on broadcast, transposed, reversed and stepped views, each launched
    six times: from the fourth on (the variant asked for at once here), anycuda runs them
    specialised to their shapes and strides (runtime/specialisation.py); every result against
    numpy. Answers how many kernels have a variant linked (0 where the compile server has not
    delivered yet, as tiered code may)."""
    import gc
    from anycuda.runtime import program, specialisation
    specialisation.SPECIALISE_AFTER_SECONDS = 0.0
    a = rng.standard_normal((300, 257)).astype(np.float32)
    row, col = a[:1, :], a[:, :1]
    d = rng.standard_normal((16, 24, 32)).astype(np.float64)
    da, dd = cp.asarray(a), cp.asarray(d)
    for _ in range(6):
        same(da * cp.asarray(row), a * row, "row broadcast")
        same(da + cp.asarray(col), a + col, "column broadcast")
        same(da.T * 2.0 + 1.0, a.T * 2.0 + 1.0, "transposed")
        same(da[::-1, ::-2] - 3.0, a[::-1, ::-2] - 3.0, "reversed, stepped")
        same(cp.exp(da[10:290:3, 7:250]), np.exp(a[10:290:3, 7:250]), "stepped slice")
        same(dd.transpose(2, 0, 1) * 0.5, d.transpose(2, 0, 1) * 0.5, "3-D transpose")
        same(dd[:, ::2, :] + dd[:, 1::2, :], d[:, ::2, :] + d[:, 1::2, :], "even and odd rows")
    cp.cuda.Device().synchronize()
    images = [o for o in gc.get_objects() if isinstance(o, program.KernelImage)]
    return {"variants": sum(o._variants.made() for o in images
                            if isinstance(o._variants, specialisation.Variants))}


def main(names):
    out = {}
    for name in names or CASES:
        try:
            extra = CASES[name]()
            out[name] = {"ok": True, "detail": extra}
        except Exception:                       # noqa: BLE001 -- reported per case
            out[name] = {"ok": False, "detail": traceback.format_exc()[-3000:]}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
