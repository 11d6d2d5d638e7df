"""Scattered atomics held in a table (compiler/ops/atomictable.py): `atomicAdd(&bins[data[i]], 1)`
and its kin combined per address in the block's frame (or the worker's), performed at the block's
end. Results against numpy on fresh random inputs with every operation and type a table holds,
thread and warp-region paths, entries handed over where addresses share a slot, a thread reading
or writing what it added, and which kernels take a table read from the lowered module."""
import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.lowering.module import ModuleLowering
from anycuda.cudac import compile_to_ptx
from anycuda import CudaError, CUresult
from anycuda.ptx import parse
from conformance import poison

# (kernel, CUDA type, call, numpy dtype, numpy ufunc combining values per bin)
FORMS = [
    ("bins_u32", "unsigned", "atomicAdd", np.uint32, np.add),
    ("bins_i32", "int", "atomicAdd", np.int32, np.add),
    ("bins_u64", "unsigned long long", "atomicAdd", np.uint64, np.add),
    ("bins_f32", "float", "atomicAdd", np.float32, np.add),
    ("bins_f64", "double", "atomicAdd", np.float64, np.add),
    ("bins_max_i32", "int", "atomicMax", np.int32, np.maximum),
    ("bins_min_u32", "unsigned", "atomicMin", np.uint32, np.minimum),
    ("bins_or_u64", "unsigned long long", "atomicOr", np.uint64, np.bitwise_or),
    ("bins_xor_i32", "int", "atomicXor", np.int32, np.bitwise_xor),
]


def _forms():
    out = []
    for name, ct, call, _, _ in FORMS:
        # one element a thread (a thread loop without a loop) and grid-stride (a warp region
        # whose lanes loop), each adding values[i] to bins[key[i] * stride]
        out.append(f"""extern "C" __global__ void {name}(const int* key, const {ct}* v, {ct}* bins, int stride, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {call}(&bins[key[i] * stride], v[i]);
}}
extern "C" __global__ void {name}_stride(const int* key, const {ct}* v, {ct}* bins, int stride, int n) {{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        {call}(&bins[key[i] * stride], v[i]);
}}""")
    return "\n".join(out)


SOURCE = _forms() + r"""
// a thread reads the bin it added to: it must see its own add
extern "C" __global__ void add_then_read(const int* key, unsigned* bins, unsigned* seen, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { atomicAdd(&bins[key[i]], 1u); seen[i] = bins[key[i]]; }
}
// the same in a grid-stride loop (a warp region: the loads are gathers), half the lanes
// reading (a masked gather)
extern "C" __global__ void add_then_read_stride(const int* key, unsigned* bins, unsigned* seen, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        atomicAdd(&bins[key[i]], 1u);
        if (key[i] & 1) seen[i] = bins[key[i]]; else seen[i] = 1u;
    }
}
// ... and writes it: its own add comes first (each thread its own element)
extern "C" __global__ void add_then_double(int* x, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        atomicAdd(&x[i], 5);
        x[i] = 2 * x[i];
    }
}
// the kernel reads what it counts through a float view (another type, the same bytes)
extern "C" __global__ void add_then_read_bytes(const int* key, unsigned* bins, unsigned char* seen, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { atomicAdd(&bins[key[i]], 1u); seen[i] = ((unsigned char*)bins)[4 * key[i]]; }
}
// an atomic on a pointer the kernel was given: a bad one fails the launch
extern "C" __global__ void add_at(unsigned long long where, const int* key, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd((unsigned*)where + key[i], 1u);
}
// not held: a used result, a fence, two forms, a volatile load
extern "C" __global__ void tickets(const int* key, unsigned* bins, unsigned* order, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) order[i] = atomicAdd(&bins[key[i]], 1u);
}
extern "C" __global__ void fenced(const int* key, unsigned* bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { atomicAdd(&bins[key[i]], 1u); __threadfence(); }
}
extern "C" __global__ void two_forms(const int* key, unsigned* bins, float* sums, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { atomicAdd(&bins[key[i]], 1u); atomicAdd(&sums[key[i]], 1.0f); }
}
extern "C" __global__ void volatile_read(const int* key, unsigned* bins, unsigned* seen, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { atomicAdd(&bins[key[i]], 1u); seen[i] = *(volatile unsigned*)&bins[key[i]]; }
}
"""

HELD = ({name for name, *_ in FORMS} | {name + "_stride" for name, *_ in FORMS}
        | {"add_then_read", "add_then_read_stride", "add_then_double", "add_then_read_bytes", "add_at"})
NOT_HELD = {"tickets", "fenced", "two_forms", "volatile_read"}


@pytest.fixture(scope="module")
def mod(compile_cuda):
    return compile_cuda(SOURCE, name="atomictable.cu")


def _values(rng, dtype, n, ufunc):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return (rng.standard_normal(n) * 100).astype(dtype)
    if ufunc is np.add:
        return rng.integers(0, 1000, n).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


def _expected(start, keys, vals, stride, ufunc):
    want = start.copy()
    if ufunc is np.add and want.dtype.kind == "f":
        want = want.astype(np.float64)
        np.add.at(want, keys * stride, vals.astype(np.float64))
        return want
    ufunc.at(want, keys * stride, vals)
    return want


def _skewed_keys(rng, n, bins):
    """Many hits on few bins, as real histograms have."""
    return np.minimum(rng.exponential(bins / 6, n), bins - 1).astype(np.int32)


@pytest.mark.parametrize("bins", [300, 200])
@pytest.mark.parametrize("spelling", ["", "_stride"])
@pytest.mark.parametrize("name,ct,call,dtype,ufunc", FORMS, ids=[f[0] for f in FORMS])
def test_every_form_per_address(mod, rng, name, ct, call, dtype, ufunc, spelling, bins):
    """300 bins: more than the table's entries, some handed over (the table dense until its
    span passes 256 elements); 200: the table stays dense (a warp region's lanes add straight
    into their entries)."""
    n = 60_000 + int(rng.integers(0, 256))
    keys = _skewed_keys(rng, n, bins)
    vals = _values(rng, dtype, n, ufunc)
    start = _values(rng, dtype, bins, ufunc)
    out = ac.asarray(start)
    grid = (n + 255) // 256 if not spelling else 7
    mod.get_function(name + spelling)((grid,), (256,), (ac.asarray(keys), ac.asarray(vals), out, np.int32(1),
                                                        np.int32(n)))
    ac.synchronize()
    got, want = out.get(), _expected(start, keys, vals, 1, ufunc)
    if np.dtype(dtype).kind == "f":
        scale = np.abs(start).astype(np.float64) + np.bincount(keys, np.abs(vals.astype(np.float64)), bins)
        assert np.all(np.abs(got - want) <= 1e-5 * scale + 1e-30)
    else:
        assert np.array_equal(got, want)


@pytest.mark.parametrize("stride", [256, 64, 1 << 14])
def test_addresses_that_share_an_entry(mod, rng, stride):
    """Bins `stride` elements apart meet in the table's entries (256 of them, by element
    index): each newcomer performs the entry it takes over; the totals stay exact."""
    n, bins = 50_000 + int(rng.integers(0, 256)), 40
    keys = rng.integers(0, bins, n).astype(np.int32)
    vals = rng.integers(0, 1 << 20, n).astype(np.uint32)
    out = ac.asarray(np.zeros(bins * stride, np.uint32))
    for spelling, grid in (("", (n + 255) // 256), ("_stride", 5)):
        out.set(np.zeros(bins * stride, np.uint32))
        mod.get_function("bins_u32" + spelling)((grid,), (256,), (ac.asarray(keys), ac.asarray(vals), out,
                                                                  np.int32(stride), np.int32(n)))
        ac.synchronize()
        assert np.array_equal(out.get(), _expected(np.zeros(bins * stride, np.uint32), keys, vals, stride, np.add))


@pytest.mark.parametrize("far", [255, 256, 4096])
def test_a_dense_span_grown_and_given_up(mod, rng, far):
    """Keys in rising runs grow the span a dense table fills (its entries for the elements
    between filled at the identity); one far key (255: the span still 256 elements; 256 or
    more: it is not) and the table goes on with the other keys. Bins no key reaches keep
    their values."""
    n = 40_000 + int(rng.integers(0, 256))
    keys = np.sort(rng.integers(0, 200, n)).astype(np.int32)
    keys[rng.choice(n, 50, replace=False)] = far
    vals = rng.integers(0, 1 << 20, n).astype(np.uint32)
    start = rng.integers(0, 1 << 30, far + 64).astype(np.uint32)
    for spelling, grid in (("", (n + 255) // 256), ("_stride", 3)):
        out = ac.asarray(start)
        mod.get_function("bins_u32" + spelling)((grid,), (256,), (ac.asarray(keys), ac.asarray(vals), out,
                                                                  np.int32(1), np.int32(n)))
        ac.synchronize()
        assert np.array_equal(out.get(), _expected(start, keys, vals, 1, np.add))


@pytest.mark.parametrize("workers", [None, 1])
@pytest.mark.parametrize("block", [64, 96, 256])
def test_held_from_block_to_block(mod, rng, request, workers, block):
    """Many blocks per worker and a partial last block, one worker or all: what each worker
    carried is performed at the end of its run."""
    if workers:
        request.getfixturevalue("one_worker")
    n = 300_000 + int(rng.integers(0, block))
    keys = _skewed_keys(rng, n, 256)
    vals = np.ones(n, np.uint32)
    out = ac.asarray(np.full(256, 3, np.uint32))
    mod.get_function("bins_u32")(((n + block - 1) // block,), (block,),
                                 (ac.asarray(keys), ac.asarray(vals), out, np.int32(1), np.int32(n)))
    ac.synchronize()
    assert np.array_equal(out.get(), 3 + np.bincount(keys, minlength=256).astype(np.uint32))


def test_a_thread_sees_what_it_added(mod, rng):
    n = 30_000 + int(rng.integers(0, 256))
    keys = rng.integers(0, 64, n).astype(np.int32)
    bins, seen = ac.zeros(64, np.uint32), poison(n, np.uint32)
    mod.get_function("add_then_read")(((n + 255) // 256,), (256,), (ac.asarray(keys), bins, seen, np.int32(n)))
    ac.synchronize()
    counts = np.bincount(keys, minlength=64)
    assert np.array_equal(bins.get(), counts)
    s = seen.get()
    assert s.min() >= 1 and np.all(s <= counts[keys])
    bins, seen = ac.zeros(64, np.uint32), poison(n, np.uint32)
    mod.get_function("add_then_read_stride")((5,), (128,), (ac.asarray(keys), bins, seen, np.int32(n)))
    ac.synchronize()
    assert np.array_equal(bins.get(), counts)
    s = seen.get()
    assert s.min() >= 1 and np.all(s <= counts[keys])
    # the low byte of a count, over 256 bins (no bin reaches 256 here)
    keys = rng.integers(0, 256, n).astype(np.int32)
    seen_bytes, bins = poison(n, np.uint8), ac.zeros(256, np.uint32)
    mod.get_function("add_then_read_bytes")(((n + 255) // 256,), (256,),
                                            (ac.asarray(keys), bins, seen_bytes, np.int32(n)))
    ac.synchronize()
    assert np.bincount(keys).max() < 256 and seen_bytes.get().min() >= 1


def test_a_thread_writes_after_what_it_added(mod, rng):
    n = 20_000 + int(rng.integers(0, 256))
    x0 = rng.integers(-1000, 1000, n).astype(np.int32)
    x = ac.asarray(x0)
    mod.get_function("add_then_double")((9,), (128,), (x, np.int32(n)))
    ac.synchronize()
    assert np.array_equal(x.get(), 2 * (x0 + 5))


def test_subnormal_inputs_are_flushed(mod, rng):
    """A global add.f32 flushes subnormal inputs (as an H200 does): held ones too."""
    n = 10_000
    keys = rng.integers(0, 8, n).astype(np.int32)
    vals = np.float32(1e-40) * rng.integers(1, 8, n).astype(np.float32)
    out = ac.zeros(8, np.float32)
    mod.get_function("bins_f32")(((n + 255) // 256,), (256,),
                                 (ac.asarray(keys), ac.asarray(vals), out, np.int32(1), np.int32(n)))
    ac.synchronize()
    assert np.all(out.get() == 0)


def test_a_bad_address_fails_the_launch(mod, rng):
    n = 1000
    keys = ac.asarray(rng.integers(0, 8, n).astype(np.int32))
    for where in (0, 1 << 47):
        mod.get_function("add_at")(((n + 255) // 256,), (256,), (np.uint64(where), keys, np.int32(n)))
        with pytest.raises(CudaError) as e:
            ac.synchronize()
        assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    bins = ac.zeros(8, np.uint32)            # and the next launch runs
    mod.get_function("add_at")(((n + 255) // 256,), (256,), (np.uint64(bins.data.ptr), keys, np.int32(n)))
    ac.synchronize()
    assert np.array_equal(bins.get(), np.bincount(keys.get(), minlength=8))


def test_kernels_not_held_stay_right(mod, rng):
    n = 20_000 + int(rng.integers(0, 256))
    keys = rng.integers(0, 16, n).astype(np.int32)
    counts = np.bincount(keys, minlength=16)
    grid = ((n + 255) // 256,)
    bins, order = ac.zeros(16, np.uint32), poison(n, np.uint32)
    mod.get_function("tickets")(grid, (256,), (ac.asarray(keys), bins, order, np.int32(n)))
    ac.synchronize()
    o = order.get()
    for k in range(16):                      # each bin's tickets are 0..count-1
        assert np.array_equal(np.sort(o[keys == k]), np.arange(counts[k]))
    bins, sums = ac.zeros(16, np.uint32), ac.zeros(16, np.float32)
    mod.get_function("two_forms")(grid, (256,), (ac.asarray(keys), bins, sums, np.int32(n)))
    ac.synchronize()
    assert np.array_equal(bins.get(), counts) and np.array_equal(sums.get(), counts.astype(np.float32))


def test_which_kernels_hold_their_atomics():
    lowered = ModuleLowering(parse(compile_to_ptx(SOURCE, name="atomictable.cu"), "atomictable.ptx"),
                             "atomictable.ptx").lower()
    names = {g.name for g in lowered.mod.global_values}
    held = {name for name, info in lowered.kernels.items()
            if info.export.replace("anycuda.launch.", "ptx.k") + ".step.table.add" in names}
    assert held == HELD
    assert NOT_HELD <= set(lowered.kernels)


def test_held_kernels_run_in_warp_regions_holding_in_the_workers_table():
    """A kernel that holds its atomics in a table runs its warps through a region even
    without a loop (the loop over threads would not vectorise around the table's add), and
    where its worker carries the table from block to block, its blocks add into the worker's
    table itself: no block merges its own into it (no .combined.merge call is left)."""
    lowered = ModuleLowering(parse(compile_to_ptx(SOURCE, name="atomictable.cu"), "atomictable.ptx"),
                             "atomictable.ptx").lower()
    text = str(lowered.mod)
    for name in ("bins_u32", "bins_f32", "add_at"):
        prefix = lowered.kernels[name].export.replace("anycuda.launch.", "ptx.k")
        region = lowered.mod.get_global(prefix + ".step.region0")
        assert len(region.blocks) > 1, name            # (one left unmade has a lone block)
        assert f'call void @"{prefix}.combined.merge"' not in text, name
