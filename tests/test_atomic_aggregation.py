"""Atomics a block combines (compiler/ops/aggregation.py): `atomicAdd(total, x)` and its kin
from every thread into one address become one atomic per block. Results against numpy on
fresh random inputs, for every operation and type that may be combined; the forms that must
not be combined (per-lane addresses, a used result, memory accesses after the atomic, a
kernel with sites) checked to stay correct, and which kernels were combined read from the
lowered module."""
import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.lowering.module import ModuleLowering
from anycuda.cudac import compile_to_ptx
from anycuda.ptx import parse
from conformance import poison

# (kernel, element type, CUDA call, numpy reduction of the values, numpy dtype)
UNIFORM = [
    ("add_i32", "int", "atomicAdd", "sum", np.int32),
    ("add_u32", "unsigned", "atomicAdd", "sum", np.uint32),
    ("add_u64", "unsigned long long", "atomicAdd", "sum", np.uint64),
    ("add_f32", "float", "atomicAdd", "sum", np.float32),
    ("add_f64", "double", "atomicAdd", "sum", np.float64),
    ("min_i32", "int", "atomicMin", "min", np.int32),
    ("max_i32", "int", "atomicMax", "max", np.int32),
    ("min_u32", "unsigned", "atomicMin", "min", np.uint32),
    ("max_u32", "unsigned", "atomicMax", "max", np.uint32),
    ("min_i64", "long long", "atomicMin", "min", np.int64),
    ("max_i64", "long long", "atomicMax", "max", np.int64),
    ("min_u64", "unsigned long long", "atomicMin", "min", np.uint64),
    ("max_u64", "unsigned long long", "atomicMax", "max", np.uint64),
    ("and_u32", "unsigned", "atomicAnd", "and", np.uint32),
    ("or_u32", "unsigned", "atomicOr", "or", np.uint32),
    ("xor_u32", "unsigned", "atomicXor", "xor", np.uint32),
    ("and_u64", "unsigned long long", "atomicAnd", "and", np.uint64),
    ("or_u64", "unsigned long long", "atomicOr", "or", np.uint64),
    ("xor_u64", "unsigned long long", "atomicXor", "xor", np.uint64),
]


def _uniform_kernels():
    out = []
    for name, ct, call, _, _ in UNIFORM:
        # guard spelling: `if (i < n)`; early-return spelling for the same operation
        out.append(f"""extern "C" __global__ void {name}(const {ct}* in, {ct}* out, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {call}(out, in[i]);
}}
extern "C" __global__ void {name}_ret(const {ct}* in, {ct}* out, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    {call}(out, in[i]);
}}""")
    return "\n".join(out)


SOURCE = _uniform_kernels() + r"""
// the address differs between blocks but not within one: combined per block
extern "C" __global__ void per_block(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&out[blockIdx.x % 3], in[i]);
}
// the address differs between lanes (a few bins): per lane
extern "C" __global__ void per_lane(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&out[in[i] & 3], in[i]);
}
// the old value is used: per lane, and the olds are 0..n-1
extern "C" __global__ void tickets(unsigned* counter, unsigned* order, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) order[i] = atomicAdd(counter, 1u);
}
// the thread reads the total after its atomic: it must see its own add
extern "C" __global__ void read_after(int* total, int* seen, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { atomicAdd(total, 1); seen[i] = *(volatile int*)total; }
}
// a store after the atomic
extern "C" __global__ void store_after(const float* in, float* out, float* twice, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { atomicAdd(out, in[i]); twice[i] = 2.0f * in[i]; }
}
// `red` written out (nvcc writes `atom` with an unused destination for atomicAdd)
extern "C" __global__ void red_add_u64(const unsigned long long* in, unsigned long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) asm volatile("red.global.add.u64 [%0], %1;" :: "l"(out), "l"(in[i]) : "memory");
}
// a fence before the combined atomic: combined per block, not carried from block to block
extern "C" __global__ void fenced(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { __threadfence(); atomicAdd(out, in[i]); }
}
// another atomic whose result is used: the combined one is not carried either
extern "C" __global__ void with_ticket(const int* in, int* out, unsigned* counter, unsigned* first, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0) first[blockIdx.x] = atomicAdd(counter, 1u);
    if (i < n) atomicAdd(out, in[i]);
}
// a grid-stride loop (a kernel with sites): per lane
extern "C" __global__ void grid_stride(const float* in, float* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(out, in[i]);
}
"""

COMBINED = {name for name, *_ in UNIFORM} | {name + "_ret" for name, *_ in UNIFORM} | {"per_block", "red_add_u64",
                                                                                    "fenced", "with_ticket"}
CARRIED = COMBINED - {"fenced", "with_ticket"}         # from block to block by a worker
NOT_COMBINED = {"per_lane", "tickets", "read_after", "store_after", "grid_stride"}
# not combined per block, but held per address in a table (ops/atomictable.py; test_atomic_table.py)
HELD = {"per_lane", "store_after", "grid_stride"}


@pytest.fixture(scope="module")
def mod(compile_cuda):
    return compile_cuda(SOURCE, name="aggregation.cu")


def _values(rng, dtype, n, op=None):
    dtype = np.dtype(dtype)
    if op in ("and", "or"):
        # one random bit of the low 20 per value (cleared for and): the result keeps the high
        # bits and some low ones, where random values would and to 0 and or to all ones
        bits = (np.ones(n, dtype) << rng.integers(0, 20, n).astype(dtype)).astype(dtype)
        return ~bits if op == "and" else bits
    if dtype.kind == "f":
        return (rng.standard_normal(n) * 100).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


def _expected(op, start, vals):
    dtype = vals.dtype
    if op == "sum":
        if dtype.kind == "f":
            return start + vals.astype(np.float64).sum()
        with np.errstate(over="ignore"):
            return (start + vals.sum(dtype=dtype)).astype(dtype)   # wraps, as the GPU's add
    if op == "min":
        return min(start, vals.min())
    if op == "max":
        return max(start, vals.max())
    reduce = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    return reduce(start, reduce.reduce(vals))


def _launch(kernel, n, block, *args):
    kernel(((n + block - 1) // block if n else 1,), (block,), args)
    ac.synchronize()


@pytest.mark.parametrize("spelling", ["", "_ret"])
@pytest.mark.parametrize("name,ct,call,op,dtype", UNIFORM, ids=[u[0] for u in UNIFORM])
def test_uniform_address_every_operation(mod, rng, name, ct, call, op, dtype, spelling):
    n = 50_000 + int(rng.integers(0, 256))        # a partial last block: some lanes inactive
    vals = _values(rng, dtype, n, op)
    start = _values(rng, dtype, 1)[0]
    out = ac.asarray(np.array([start], dtype))
    _launch(mod.get_function(name + spelling), n, 256, ac.asarray(vals), out, np.int32(n))
    got, want = out.get()[0], _expected(op, start, vals)
    if np.dtype(dtype).kind == "f":
        scale = abs(start) + np.abs(vals.astype(np.float64)).sum()
        assert abs(float(got) - float(want)) <= 1e-5 * scale, (got, want)
    else:
        assert got == want


def test_no_active_thread_leaves_the_total_alone(mod):
    # n = 0: every lane of the one block is guarded out; the total must not be touched (no
    # add of an identity: a subnormal would be flushed, -0.0 turned into +0.0)
    for start in (np.float32(1e-40), np.float32(-0.0)):
        out = ac.asarray(np.array([start], np.float32))
        _launch(mod.get_function("add_f32"), 0, 256, poison(256, np.float32), out, np.int32(0))
        assert out.get().view(np.uint32)[0] == np.array([start], np.float32).view(np.uint32)[0]
    out = ac.asarray(np.array([7], np.int32))
    _launch(mod.get_function("min_i32"), 0, 256, poison(256, np.int32), out, np.int32(0))
    assert out.get()[0] == 7


@pytest.mark.parametrize("case", ["nan", "inf", "inf-inf", "neg-zero", "subnormal"])
def test_float_add_special_values(mod, rng, case):
    n = 10_000
    vals = (rng.standard_normal(n)).astype(np.float32)
    start = np.float32(0.0)
    if case == "nan":
        vals[int(rng.integers(0, n))] = np.nan
    elif case == "inf":
        vals[int(rng.integers(0, n))] = np.inf
    elif case == "inf-inf":
        vals[int(rng.integers(0, n // 2))] = np.inf
        vals[n // 2 + int(rng.integers(0, n // 2))] = -np.inf
    elif case == "neg-zero":
        vals[:] = -0.0
        start = np.float32(-0.0)
    else:
        # subnormal inputs of a global add.f32 are flushed to zero (as an H200 does)
        vals[:] = np.float32(1e-40) * rng.integers(1, 8, n).astype(np.float32)
    out = ac.asarray(np.array([start], np.float32))
    _launch(mod.get_function("add_f32"), n, 256, ac.asarray(vals), out, np.int32(n))
    got = out.get()[0]
    if case in ("nan", "inf-inf"):
        assert np.isnan(got)
    elif case == "inf":
        assert got == np.inf
    elif case == "neg-zero":
        assert got == 0 and np.signbit(got)
    else:
        assert got == 0 and not np.signbit(got)


def test_block_uniform_address(mod, rng):
    n, block = 30_000 + int(rng.integers(0, 256)), 256
    vals = rng.integers(-1000, 1000, n, dtype=np.int32)
    start = rng.integers(-1000, 1000, 3, dtype=np.int32)
    out = ac.asarray(start)
    _launch(mod.get_function("per_block"), n, block, ac.asarray(vals), out, np.int32(n))
    blocks = np.arange(n) // block % 3
    want = start + np.array([vals[blocks == k].sum() for k in range(3)], np.int32)
    assert np.array_equal(out.get(), want)


def test_red_form(mod, rng):
    n = 40_000 + int(rng.integers(0, 256))
    vals = rng.integers(0, 2 ** 63, n, dtype=np.uint64)
    start = np.uint64(rng.integers(0, 2 ** 63))
    out = ac.asarray(np.array([start], np.uint64))
    _launch(mod.get_function("red_add_u64"), n, 256, ac.asarray(vals), out, np.int32(n))
    assert out.get()[0] == _expected("sum", start, vals)


def test_per_lane_addresses(mod, rng):
    n = 40_000 + int(rng.integers(0, 256))
    vals = rng.integers(-1000, 1000, n, dtype=np.int32)
    out = ac.zeros(4, np.int32)
    _launch(mod.get_function("per_lane"), n, 256, ac.asarray(vals), out, np.int32(n))
    want = np.array([vals[(vals & 3) == k].sum() for k in range(4)], np.int32)
    assert np.array_equal(out.get(), want)


def test_used_results_are_a_serialisation(mod, rng):
    n = 20_000 + int(rng.integers(0, 256))
    counter, order = ac.zeros(1, np.uint32), poison(n, np.uint32)
    _launch(mod.get_function("tickets"), n, 256, counter, order, np.int32(n))
    assert counter.get()[0] == n
    assert np.array_equal(np.sort(order.get()), np.arange(n, dtype=np.uint32))


def test_a_thread_sees_its_own_atomic(mod, rng):
    n = 20_000 + int(rng.integers(0, 256))
    total, seen = ac.zeros(1, np.int32), poison(n, np.int32)
    _launch(mod.get_function("read_after"), n, 256, total, seen, np.int32(n))
    assert total.get()[0] == n
    s = seen.get()
    assert s.min() >= 1 and s.max() <= n


def test_store_after_and_grid_stride(mod, rng):
    n = 30_000 + int(rng.integers(0, 256))
    vals = rng.standard_normal(n).astype(np.float32)
    out, twice = ac.zeros(1, np.float32), poison(n, np.float32)
    _launch(mod.get_function("store_after"), n, 256, ac.asarray(vals), out, twice, np.int32(n))
    assert np.array_equal(twice.get(), 2 * vals)
    assert abs(out.get()[0] - vals.astype(np.float64).sum()) <= 1e-5 * np.abs(vals).sum()
    out = ac.zeros(1, np.float32)
    mod.get_function("grid_stride")((13,), (128,), (ac.asarray(vals), out, np.int32(n)))
    ac.synchronize()
    assert abs(out.get()[0] - vals.astype(np.float64).sum()) <= 1e-5 * np.abs(vals).sum()


def test_which_kernels_are_combined():
    """The lowering combines exactly the kernels whose atomics may be (a block's hooks exist)."""
    lowered = ModuleLowering(parse(compile_to_ptx(SOURCE, name="aggregation.cu"), "aggregation.ptx"),
                             "aggregation.ptx").lower()
    names = {g.name for g in lowered.mod.global_values}

    def having(suffix):
        return {name for name, info in lowered.kernels.items()
                if info.export.replace("anycuda.launch.", "ptx.k") + suffix in names}
    held = having(".step.table.add")
    assert held == HELD
    combined = having(".combined.flush") - held
    assert combined == COMBINED
    assert not combined & NOT_COMBINED and NOT_COMBINED <= set(lowered.kernels)
    assert having(".combined.merge") - held == CARRIED


@pytest.mark.parametrize("workers", [None, 1])
@pytest.mark.parametrize("block", [64, 256, 96])
def test_totals_carried_from_block_to_block(mod, rng, request, workers, block):
    """Many blocks per worker, a partial last block, one worker or all: the carried totals
    are performed at the end of each run of blocks (exact for integers); the kernels that may
    not carry them give the same."""
    if workers:
        request.getfixturevalue("one_worker")
    n = 200_000 + int(rng.integers(0, block))
    vals = rng.integers(-10**6, 10**6, n, dtype=np.int32)
    for name in ("add_i32", "add_i32_ret", "fenced"):
        start = np.int32(rng.integers(-1000, 1000))
        out = ac.asarray(np.array([start], np.int32))
        _launch(mod.get_function(name), n, block, ac.asarray(vals), out, np.int32(n))
        assert out.get()[0] == _expected("sum", start, vals), name
    blocks = (n + block - 1) // block
    out, counter, first = ac.zeros(1, np.int32), ac.zeros(1, np.uint32), poison(blocks, np.uint32)
    _launch(mod.get_function("with_ticket"), n, block, ac.asarray(vals), out, counter, first, np.int32(n))
    assert out.get()[0] == _expected("sum", np.int32(0), vals)
    assert np.array_equal(np.sort(first.get()), np.arange(blocks, dtype=np.uint32))


# ---------------------------------------------------------------- warp regions (laneatomics.py)
# Each thread loops over `per` elements: a site-less kernel with a loop runs in a warp region,
# where an atomic whose active lanes share one address is one atomic for the warp.
LOOPS = r"""
#define LOOP(NAME, T, BODY) extern "C" __global__ void NAME(const T* in, T* out, T* olds, int n, int per) { \
    int i = blockIdx.x * blockDim.x + threadIdx.x; \
    for (int k = 0; k < per; ++k) { int j = i * per + k; if (j < n) { BODY; } } }
LOOP(loop_add_f32, float, olds[j] = atomicAdd(out, in[j]))
LOOP(loop_add_u64, unsigned long long, olds[j] = atomicAdd(out, in[j]))
LOOP(loop_add_i32, int, olds[j] = atomicAdd(out, in[j]))
LOOP(loop_sum_f64, double, atomicAdd(out, in[j]))
LOOP(loop_max_i32, int, olds[j] = atomicMax(out, in[j]))
LOOP(loop_min_u32, unsigned, atomicMin(out, in[j]))
LOOP(loop_and_u32, unsigned, atomicAnd(out, in[j]))
LOOP(loop_or_u64, unsigned long long, atomicOr(out, in[j]))
LOOP(loop_xor_i32, int, olds[j] = atomicXor(out, in[j]))
LOOP(loop_bins_i32, int, olds[j] = atomicAdd(&out[in[j] & 7], 1))
"""
# kernel -> (dtype, numpy reduction)
LOOP_KERNELS = {
    "loop_add_f32": (np.float32, "sum"), "loop_add_u64": (np.uint64, "sum"), "loop_add_i32": (np.int32, "sum"),
    "loop_sum_f64": (np.float64, "sum"), "loop_max_i32": (np.int32, "max"), "loop_min_u32": (np.uint32, "min"),
    "loop_and_u32": (np.uint32, "and"), "loop_or_u64": (np.uint64, "or"), "loop_xor_i32": (np.int32, "xor"),
}


# the loop kernels whose results are unused and whose loads follow the atomic: held in a table
HELD_LOOPS = {"loop_sum_f64", "loop_min_u32", "loop_and_u32", "loop_or_u64"}


@pytest.fixture(scope="module")
def loops(compile_cuda):
    return compile_cuda(LOOPS, name="aggregation_loops.cu")


def _run_loop(loops, name, vals, out, n, per=4):
    olds = poison(n, vals.dtype)
    loops.get_function(name)(((n + 256 * per - 1) // (256 * per),), (256,),
                             (ac.asarray(vals), out, olds, np.int32(n), np.int32(per)))
    ac.synchronize()
    return olds.get()


@pytest.mark.parametrize("name", sorted(LOOP_KERNELS))
def test_warp_combined_totals(loops, rng, name):
    dtype, op = LOOP_KERNELS[name]
    n = 30_000 + int(rng.integers(0, 1000))      # the last warps partly inactive
    vals = _values(rng, dtype, n, op)
    start = _values(rng, dtype, 1)[0]
    out = ac.asarray(np.array([start], dtype))
    _run_loop(loops, name, vals, out, n)
    got, want = out.get()[0], _expected(op, start, vals)
    if np.dtype(dtype).kind == "f":
        assert abs(float(got) - float(want)) <= 1e-5 * (abs(start) + np.abs(vals.astype(np.float64)).sum())
    else:
        assert got == want


@pytest.mark.parametrize("name,dtype", [("loop_add_i32", np.int32), ("loop_add_u64", np.uint64),
                                        ("loop_add_f32", np.float32)])
def test_warp_combined_olds_are_a_serialisation(loops, rng, name, dtype):
    """Adds of positive values: sorted by the old value each returned, every old is the one
    before plus that one's value (floats: small integers, exact)."""
    n = 20_000 + int(rng.integers(0, 1000))
    vals = rng.integers(1, 50, n).astype(dtype)
    start = dtype(int(rng.integers(0, 1000)))
    out = ac.asarray(np.array([start], dtype))
    olds = _run_loop(loops, name, vals, out, n)
    order = np.argsort(olds, kind="stable")
    chain = np.concatenate([[start], olds[order][:-1] + vals[order][:-1]]).astype(dtype)
    assert np.array_equal(olds[order], chain)
    assert out.get()[0] == olds[order][-1] + vals[order][-1]


def test_warp_combined_tickets_with_unit_adds(loops, rng):
    n = 25_000 + int(rng.integers(0, 1000))
    out = ac.zeros(1, np.int32)
    olds = _run_loop(loops, "loop_add_i32", np.ones(n, np.int32), out, n)
    assert out.get()[0] == n
    assert np.array_equal(np.sort(olds), np.arange(n, dtype=np.int32))


def test_warp_combined_max_olds_and_xor(loops, rng):
    n = 20_000 + int(rng.integers(0, 1000))
    vals = rng.integers(-10 ** 6, 10 ** 6, n, dtype=np.int32)
    out = ac.asarray(np.array([-2 ** 31], np.int32))
    olds = _run_loop(loops, "loop_max_i32", vals, out, n)
    assert out.get()[0] == vals.max()
    # each old is the initial value (at least the first lane's) or one of the values
    assert olds.max() <= vals.max() and (olds == -2 ** 31).any() and np.isin(olds[olds != -2 ** 31], vals).all()
    out = ac.zeros(1, np.int32)
    olds = _run_loop(loops, "loop_xor_i32", vals, out, n)
    assert out.get()[0] == np.bitwise_xor.reduce(vals)
    # the olds are the xors of the prefixes of one order: each old xor its value is another old or the total
    nxt = set((olds ^ vals).tolist())
    assert (set(olds.tolist()) - {0}) <= nxt and np.bitwise_xor.reduce(vals) in nxt


def test_warp_lanes_apart_stay_per_lane(loops, rng):
    n = 30_000 + int(rng.integers(0, 1000))
    vals = rng.integers(0, 1000, n, dtype=np.int32)
    vals[: n // 3] = 5                                   # a hot bin
    out = ac.zeros(8, np.int32)
    olds = _run_loop(loops, "loop_bins_i32", vals, out, n)
    assert np.array_equal(out.get(), np.bincount(vals & 7, minlength=8))
    for k in range(8):                                   # each bin's tickets are 0..count-1
        assert np.array_equal(np.sort(olds[(vals & 7) == k]), np.arange((vals & 7 == k).sum()))


def test_warp_regions_emit_the_combined_form(monkeypatch):
    """The warp region of each loop kernel makes the one-address form (its run-time check
    chooses it), a histogram's does not; the lowering is read in-process, where the region's
    ops are emitted."""
    from anycuda.compiler.vector import laneatomics
    made, made_held = [], []
    original, original_total = laneatomics.combined, laneatomics.warp_total
    monkeypatch.setattr(laneatomics, "combined", lambda w, *a: made.append(w.f.pfn.name) or original(w, *a))
    # (a kernel whose atomics are held in a table takes the warp's total into it: regionops._held_atomics)
    monkeypatch.setattr(laneatomics, "warp_total",
                        lambda w, *a: made_held.append(w.f.pfn.name) or original_total(w, *a))
    ModuleLowering(parse(compile_to_ptx(LOOPS, name="aggregation_loops.cu"), "loops.ptx"), "loops.ptx").lower()
    assert set(LOOP_KERNELS) - set(made) <= HELD_LOOPS
    assert HELD_LOOPS <= set(made_held)
    # bins computed from loaded data (a histogram) keep the lane loop without the check
    assert "loop_bins_i32" not in made
