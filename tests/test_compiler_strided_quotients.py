"""Quotients a warp region keeps as one value in lockstep (laneshapes.QUOTIENT): a grid-stride
loop's `x[i / C] * y[i % C]`, where no lane of a warp passes a multiple of C, loads x[i / C]
once and y[i % C] as one vector; a warp whose lanes pass one leaves lockstep for the rest of
its turn, and a divisor under laneshapes.QUOTIENT_WARPS warps' span sends the warp to the
region without the form (warpregions.EntryRegion.plain). Checked against numpy on poisoned
outputs for divisors around each of those limits, of each integer type."""
import numpy as np
import pytest
from llvmlite import ir

import anycuda as ac
from anycuda.compiler.vector import lockstep
from conformance import made_regions, poison

SOURCE = r"""
extern "C" __global__ void broadcast(float* out, const float* x, const float* y, int n, int C) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        out[i] = x[i / C] * y[i % C];
}
extern "C" __global__ void broadcast_u64(float* out, const float* x, const float* y, size_t n, size_t C) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
        out[i] = x[i / C] * y[i % C];
}
extern "C" __global__ void pairs(unsigned* q, unsigned* r, unsigned n, unsigned C) {
    // a dividend that steps by two lanes' worth, unsigned
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        q[i] = (2 * i + 1) / C;       // (nvcc: an or of 2 * i and 1)
        r[i] = (2 * i + 1) % C;
    }
}
extern "C" __global__ void signed_pairs(int* q, int* r, int n, int C) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        q[i] = (i - 1000) / C;
        r[i] = (i - 1000) % C;
    }
}
extern "C" __global__ void in_place(float* x, const float* y, int n, int C) {
    // an update a warp must not apply twice where its lanes pass a multiple of C after it stored
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        x[i] = x[i] * 2.0f + y[i % C];
}
"""

# around 31 lanes' span, the least divisor the form takes (4 warps: 128) and well above
DIVISORS = [1, 3, 31, 32, 33, 127, 128, 129, 200, 1000, 4099]
LAUNCHES = [((7,), (128,)), ((3,), (96,)), ((2,), (100,))]     # (the last: a partial warp, thread by thread)


def _module():
    return ac.RawModule(code=SOURCE)


def test_the_form_and_the_plain_region_are_made():
    made, mod = made_regions(SOURCE)
    assert {"broadcast", "broadcast_u64", "pairs", "signed_pairs", "in_place"} <= set(made)
    plain = [fn.name for fn in mod.functions if fn.name.endswith(".plain") and [b.name for b in fn.blocks] != ["unused"]]
    # (broadcast_u64's too: nvcc divides in 32 bits where both operands fit, by a register
    # converted from the parameter)
    assert sorted(plain) == [f"ptx.k{k}.step.plain" for k in range(5)]


@pytest.mark.parametrize("C", DIVISORS)
@pytest.mark.parametrize("grid, block", LAUNCHES)
def test_broadcast_matches_numpy(rng, C, grid, block):
    R = int(rng.integers(20, 60))
    n = R * C + int(rng.integers(0, C))          # (a last row cut short)
    x, y = rng.random(R + 1, dtype=np.float32), rng.random(C, dtype=np.float32)
    want = x[np.arange(n) // C] * y[np.arange(n) % C]
    m = _module()
    for name, t in (("broadcast", np.int32), ("broadcast_u64", np.uint64)):
        out = poison(n, np.float32)
        m.get_function(name)(grid, block, (out, ac.asarray(x), ac.asarray(y), t(n), t(C)))
        np.testing.assert_array_equal(out.get(), want, err_msg=f"{name} C={C}")


@pytest.mark.parametrize("C", [-5, -200, -4099, 7, 300])
def test_signed_quotients(rng, C):
    """Toward zero, of dividends that start negative; a negative divisor is under the
    form's least (signed): the plain region."""
    n = int(rng.integers(6000, 9000))
    q, r = poison(n, np.int32), poison(n, np.int32)
    _module().get_function("signed_pairs")((5,), (128,), (q, r, np.int32(n), np.int32(C)))
    a = np.arange(n, dtype=np.int64) - 1000
    quotient = np.sign(a) * np.sign(C) * (np.abs(a) // abs(C))
    np.testing.assert_array_equal(q.get(), quotient)
    np.testing.assert_array_equal(r.get(), a - quotient * C)


@pytest.mark.parametrize("C", [3, 100, 129, 255, 256, 257, 1001])
def test_dividends_that_step_by_two(rng, C):
    n = int(rng.integers(4000, 9000))
    q, r = poison(n, np.uint32), poison(n, np.uint32)
    _module().get_function("pairs")((4,), (128,), (q, r, np.uint32(n), np.uint32(C)))
    a = 2 * np.arange(n, dtype=np.uint64) + 1
    np.testing.assert_array_equal(q.get(), a // C)
    np.testing.assert_array_equal(r.get(), a % C)


@pytest.mark.parametrize("C", [5, 130, 200, 1000])
def test_an_in_place_update_runs_once(rng, C):
    n = int(rng.integers(30000, 50000))
    x0, y = rng.random(n, dtype=np.float32), rng.random(C, dtype=np.float32)
    x = ac.asarray(x0)
    _module().get_function("in_place")((8,), (128,), (x, ac.asarray(y), np.int32(n), np.int32(C)))
    np.testing.assert_array_equal(x.get(), x0 * np.float32(2) + y[np.arange(n) % C])


def test_the_check_is_what_keeps_quotients_right(rng, monkeypatch, tmp_path):
    """With the check made to answer yes, warps whose lanes pass a multiple of C take one
    quotient for all of them: the output goes wrong. So the form runs, and its check is what
    keeps it right."""
    monkeypatch.setenv("ANYCUDA_CACHE_DIR", str(tmp_path))          # (a fresh compile)
    monkeypatch.setattr(lockstep.Lockstep, "_no_multiple_passed", lambda self, *check: ir.Constant(ir.IntType(1), 1))
    C, R = 200, 40
    x, y = rng.random(R, dtype=np.float32), rng.random(C, dtype=np.float32)
    out = poison(R * C, np.float32)
    ac.RawModule(code=SOURCE.replace("broadcast(", "broadcast_forced(")).get_function("broadcast_forced")(
        (4,), (128,), (out, ac.asarray(x), ac.asarray(y), np.int32(R * C), np.int32(C)))
    want = x[np.arange(R * C) // C] * y[np.arange(R * C) % C]
    assert not np.array_equal(out.get(), want)



BLOCK_SUM = r"""
extern "C" __global__ void strided_then_block_sum(const float* x, const float* y, float* out, float* sums,
                                                  int n, int C) {
    // the entry region of a kernel with barriers after the loop (warpregions.emit_regions)
    __shared__ float s[256];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        float v = x[i / C] * y[i % C];
        out[i] = v;
        acc += v;
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = s[0];
}
"""


def test_a_kernel_with_barriers_after_its_loop():
    made, mod = made_regions(BLOCK_SUM)
    assert "strided_then_block_sum" in made
    assert any(fn.name.endswith(".plain") and [b.name for b in fn.blocks] != ["unused"] for fn in mod.functions)


@pytest.mark.parametrize("C", [5, 127, 128, 200, 1000, 5000])
def test_a_kernel_with_barriers_matches_numpy(rng, C):
    blocks, R = 6, int(rng.integers(20, 40))
    n = R * C + int(rng.integers(0, C))
    x = rng.integers(0, 4, R + 1).astype(np.float32)       # (small integers: the sums are exact)
    y = rng.integers(0, 4, C).astype(np.float32)
    out, sums = poison(n, np.float32), poison(blocks, np.float32)
    ac.RawModule(code=BLOCK_SUM).get_function("strided_then_block_sum")(
        (blocks,), (256,), (ac.asarray(x), ac.asarray(y), out, sums, np.int32(n), np.int32(C)))
    want = x[np.arange(n) // C] * y[np.arange(n) % C]
    np.testing.assert_array_equal(out.get(), want)
    block_of = (np.arange(n) // 256) % blocks                   # the grid-stride loop's block of each i
    np.testing.assert_array_equal(sums.get(), np.bincount(block_of, weights=want, minlength=blocks).astype(np.float32))


FAR = r"""
extern "C" __global__ void far_quotients(unsigned long long* q, unsigned long long* r, size_t base, size_t n,
                                         size_t C) {
    // dividends on both sides of 2^32: nvcc's 32-bit division below, its 64-bit one above
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x) {
        size_t a = base + i;
        q[i] = a / C;
        r[i] = a % C;
    }
}
extern "C" __global__ void far_signed(long long* q, long long* r, long long base, long long n, long long C) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
        long long a = base + i;
        q[i] = a / C;
        r[i] = a % C;
    }
}
"""


@pytest.mark.parametrize("C", [7, 200, 1000, 2 ** 32 + 1000, 2 ** 40 + 3])
def test_quotients_of_64_bit_indices(rng, C):
    n, base = int(rng.integers(20000, 30000)), 2 ** 32 - int(rng.integers(5000, 15000))
    m = ac.RawModule(code=FAR)
    q, r = poison(n, np.uint64), poison(n, np.uint64)
    m.get_function("far_quotients")((4,), (128,), (q, r, np.uint64(base), np.uint64(n), np.uint64(C)))
    a = np.uint64(base) + np.arange(n, dtype=np.uint64)
    np.testing.assert_array_equal(q.get(), a // np.uint64(C))
    np.testing.assert_array_equal(r.get(), a % np.uint64(C))
    for sign in (1, -1):
        q, r = poison(n, np.int64), poison(n, np.int64)
        m.get_function("far_signed")((4,), (128,), (q, r, np.int64(sign * base), np.int64(n), np.int64(C)))
        a = sign * base + np.arange(n, dtype=np.int64)
        want = np.sign(a) * (np.abs(a) // C)            # toward zero, C > 0
        np.testing.assert_array_equal(q.get(), want)
        np.testing.assert_array_equal(r.get(), a - want * C)


STEPS = r"""
#define STEP(K) \
extern "C" __global__ void step_##K(int* q, int* r, int n, int c, int C) { \
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) { \
        q[i] = (K * i + c) / C; \
        r[i] = (K * i + c) % C; \
    } \
}
STEP(1) STEP(2) STEP(3) STEP(5)
"""


@pytest.mark.parametrize("trial", range(6))
def test_random_steps_offsets_and_launches(rng, trial):
    """Dividends k * i + c (c negative too: the first warps fail the check's sign), divisors
    about the form's least for each k, launches of whole warps and not, against numpy."""
    m = ac.RawModule(code=STEPS)
    for k in (1, 2, 3, 5):
        least = 128 * k
        C = int(rng.choice([rng.integers(1, least), least, least + 1, rng.integers(least, 20 * least)]))
        C *= int(rng.choice([1, 1, 1, -1]))
        n, c = int(rng.integers(3000, 9000)), int(rng.integers(-5000, 5000))
        block = int(rng.choice([32, 64, 96, 128, 256, 100]))
        grid = int(rng.integers(1, 9))
        q, r = poison(n, np.int32), poison(n, np.int32)
        m.get_function(f"step_{k}")((grid,), (block,), (q, r, np.int32(n), np.int32(c), np.int32(C)))
        a = k * np.arange(n, dtype=np.int64) + c
        want = np.sign(a) * np.sign(C) * (np.abs(a) // abs(C))
        np.testing.assert_array_equal(q.get(), want, err_msg=f"k={k} C={C} c={c} {grid}x{block}")
        np.testing.assert_array_equal(r.get(), a - want * C, err_msg=f"k={k} C={C} c={c} {grid}x{block}")
