"""Thread-linear saves (affine.thread_linear_forms, FunctionLowering._linear_part): a saved
register computed as k * threadIdx.x + m * n * threadIdx.y + something else (a tiled kernel's
row-major index) is stored without its thread-linear part and gets it back on resume. The
transformation is exact for any value; when what is stored is alike in every thread, a uniform
round rebuilds the register from one value (the affine resume's stride 0), and when it is not,
the round reloads it. numpy is the reference; outputs are poisoned first."""
from pathlib import Path

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.analysis import affine
from anycuda.ptx.parser import parse
from conformance import force_affine_check, poison

# The benchmark's tiled SGEMM (16 x 16 tiles; C = A B for n x n row-major matrices) and two
# kernels of this file. TAG makes the source unique per test, so that tests that change the
# compiler share no compiled copy with the others.
SGEMM = (Path(__file__).parents[1] / "benchmarks" / "kernels" / "cuda" / "sgemm.cu").read_text()
SOURCE = "// TAG\n" + SGEMM + r"""
// each thread sums a column stretch of a 2-D block's window; odd columns start `skew` rows
// lower: the index minus its thread-linear part differs between threads
// (unsigned, so that nvcc keeps the 32-bit index rather than a pointer)
extern "C" __global__ void skewed_windows(const int* x, int* out, unsigned n, int steps, unsigned skew) {
    __shared__ int s[1024];
    int t = threadIdx.y * blockDim.x + threadIdx.x;
    unsigned i = threadIdx.y * n + threadIdx.x + blockIdx.x * blockDim.x;
    if (threadIdx.x & 1) i += skew * n;
    int acc = 0;
    for (int k = 0; k < steps; ++k) {
        s[t] = x[i];
        __syncthreads();
        acc += s[(t + 1) % (blockDim.x * blockDim.y)] * (k + 1);
        __syncthreads();
        i += n;
    }
    out[(blockIdx.x * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x] = acc;
}

// a block-strided walk indexed by the linear thread index threadIdx.y * blockDim.x + threadIdx.x
extern "C" __global__ void block_windows(const int* x, int* out, int steps) {
    __shared__ int s[1024];
    unsigned nt = blockDim.x * blockDim.y;
    unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
    unsigned i = blockIdx.x * nt + t;
    int acc = 0;
    for (int k = 0; k < steps; ++k) {
        s[t] = x[i];
        __syncthreads();
        acc += s[(t + 1) % nt] * (k + 1);
        __syncthreads();
        i += gridDim.x * nt;
    }
    out[blockIdx.x * nt + t] = acc;
}
"""


def _block_windows(mod, rng, grid, block, steps):
    nt = block[0] * block[1]
    x = rng.integers(-100, 100, grid * nt * steps).astype(np.int32)
    out = poison(grid * nt, np.int32)
    mod.get_function("block_windows")((grid,), block, (ac.asarray(x), out, np.int32(steps)))
    want = np.zeros((grid, nt), np.int64)
    for k in range(steps):
        s = x[k * grid * nt:(k + 1) * grid * nt].reshape(grid, nt)
        want += np.roll(s, -1, axis=1) * (k + 1)
    return out.get(), want.astype(np.int32).ravel()


def _module(tag):
    return ac.RawModule(code=SOURCE.replace("TAG", tag))


def _matmul(mod, rng, n):
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = poison((n, n), np.float32)
    mod.get_function("sgemm")((n // 16, n // 16), (16, 16), (ac.asarray(a), ac.asarray(b), c, np.int32(n)))
    return c.get(), a.astype(np.float64) @ b.astype(np.float64)


def _skewed(mod, rng, grid, block, steps, skew):
    bx, by = block
    n = grid * bx
    rows = by + steps + skew
    x = rng.integers(-100, 100, rows * n).astype(np.int32)
    out = poison(grid * bx * by, np.int32)
    mod.get_function("skewed_windows")((grid,), (bx, by), (ac.asarray(x), out, np.uint32(n), np.int32(steps),
                                                         np.uint32(skew)))
    want = np.zeros((grid, by, bx), np.int64)
    nt = bx * by
    for g in range(grid):
        start = np.array([[ty * n + tx + g * bx + (skew * n if tx & 1 else 0) for tx in range(bx)]
                          for ty in range(by)]).ravel()
        for k in range(steps):
            s = x[start + k * n]
            want[g] += (np.roll(s, -1) * (k + 1)).reshape(by, bx)       # thread t reads s[(t + 1) % nt]
    assert nt == len(start)
    return out.get(), want.astype(np.int32).ravel()


@pytest.mark.parametrize("n", [16, 48, 96])
def test_tiled_matmul(rng, n):
    got, want = _matmul(_module("plain"), rng, n)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("grid,block,skew", [(3, (8, 4), 0), (2, (8, 4), 3), (2, (32, 2), 1), (1, (5, 3), 2)])
def test_indices_that_are_and_are_not_alike_after_their_linear_part(rng, grid, block, skew):
    got, want = _skewed(_module("plain"), rng, grid, block, 6, skew)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("grid,block", [(3, (8, 4)), (2, (32, 3)), (1, (7, 5))])
def test_a_linear_index_scaled_by_the_block_width(rng, grid, block):
    got, want = _block_windows(_module("plain"), rng, grid, block, 5)
    np.testing.assert_array_equal(got, want)


def test_the_rebuilding_resume_runs_for_linear_registers_and_the_check_guards_it(rng, monkeypatch):
    """With the check's answer forced to yes, the skewed indices take thread 0's stored value
    (wrong sums: the linear registers were saved without their thread part and are rebuilt
    from one value), while the matmul's indices, alike after their linear part, stay right."""
    force_affine_check(monkeypatch)
    mod = _module("forced")
    got, want = _matmul(mod, rng, 48)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    got, want = _block_windows(mod, rng, 2, (8, 4), 5)
    np.testing.assert_array_equal(got, want)
    got, want = _skewed(mod, rng, 2, (8, 4), 6, 3)
    assert not np.array_equal(got, want)


PTX = r"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p, .param .u32 n)
{
    .reg .b32 %r<20>;
    .reg .b64 %rd<2>;
    .reg .f32 %f<2>;
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %tid.y;
    mad.lo.s32 %r4, %r3, %r1, %r2;      // tid.y * n + tid.x
    shl.b32 %r5, %r4, 2;                // 4 (tid.y * n + tid.x)
    mov.u32 %r6, %r4;
    add.s32 %r6, %r6, 16;               // two definitions, one form
    mov.u32 %r14, 0;
    add.s32 %r14, %r14, %r4;            // two definitions, two forms (none, and tid.x + n tid.y)
    mul.lo.s32 %r7, %r2, %r3;           // tid.x * tid.y: not linear
    mov.u32 %r8, %r2;
    mov.u32 %r8, %r3;                   // two definitions, two forms
    ld.global.u32 %r9, [%rd1];
    add.s32 %r10, %r9, %r2;             // a loaded value and tid.x: not a form this analysis takes
    mul.lo.s32 %r11, %r2, %r9;          // tid.x times a loaded value
    sub.s32 %r12, %r5, %r2;             // 3 tid.x + 4 n tid.y
    add.s32 %r13, %r4, 7;
    add.s32 %r13, %r13, %r1;            // a stepped index keeps its form
    mov.u32 %r15, %ntid.x;
    mad.lo.s32 %r16, %r3, %r15, %r2;    // tid.y * ntid.x + tid.x
    mov.u32 %r17, %tid.x;
    mov.b32 %r17, %f1;                  // float bits: no form
    ret;
}
"""


def test_forms_found_by_the_analysis():
    fn = parse(PTX, "forms.ptx").functions[0]
    forms = affine.thread_linear_forms(fn.body, ["p", "n"])
    x, y = ("x", None), ("y", "n")
    assert forms["%r2"] == {x: 1} and forms["%r4"] == {x: 1, y: 1}
    assert forms["%r5"] == {x: 4, ("y", "n"): 4} and forms["%r6"] == {x: 1, y: 1}
    assert forms["%r12"] == {x: 3, y: 4} and forms["%r13"] == {x: 1, y: 1}
    assert forms["%r16"] == {x: 1, ("y", "%ntid.x"): 1}
    for r in ("%r1", "%r7", "%r8", "%r9", "%r10", "%r11", "%r14", "%r17"):
        assert r not in forms, r
