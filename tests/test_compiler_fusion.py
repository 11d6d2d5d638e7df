"""A float mul whose product only one add/sub of the same basic block reads is fused into it
(one rounding), as ptxas does: an H200 gives `x * y - z`, written as mul.f32 and sub.f32, as
one fma (tests/golden/arith_float.npz). With .rn, a second use of the product, a source
written in between or a label in between, the two roundings stay. The step function and
the warp's vector code (after a shuffle) must agree."""
import numpy as np
import pytest

import anycuda as ac
from conformance import poison

def _kernel(name, body, target="sm_50"):
    """PTX of `name`(a, b, c, out) with x = a[tid] in %f1, y = b[tid] in %f2, z = c[tid] in
    %f3, the byte offset tid * 4 in %rd5 and out in %rd4, then `body`."""
    return f"""
.version 7.0
.target {target}
.address_size 64
.visible .entry {name}(.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 out)
{{
    .reg .b32 %r<8>;
    .reg .f32 %f<20>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd3, [c];
    ld.param.u64 %rd4, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 4;
    add.u64 %rd6, %rd1, %rd5;
    add.u64 %rd7, %rd2, %rd5;
    add.u64 %rd8, %rd3, %rd5;
    ld.global.f32 %f1, [%rd6];
    ld.global.f32 %f2, [%rd7];
    ld.global.f32 %f3, [%rd8];
{body}
    ret;
}}
"""


# out[4i..4i+3] = x*y - z, z - x*y, x*y + z (.ftz), and x*y - z with .rn (not fused)
FUSED_PTX = _kernel("fused", """
    mul.f32 %f4, %f1, %f2;
    sub.f32 %f5, %f4, %f3;
    mul.f32 %f6, %f1, %f2;
    sub.f32 %f7, %f3, %f6;
    mul.ftz.f32 %f8, %f1, %f2;
    add.ftz.f32 %f9, %f8, %f3;
    mul.rn.f32 %f10, %f1, %f2;
    sub.rn.f32 %f11, %f10, %f3;
    mul.wide.u32 %rd9, %r1, 16;
    add.u64 %rd10, %rd4, %rd9;
    st.global.v4.f32 [%rd10], {%f5, %f7, %f9, %f11};""")

# out[4i] = p - z where p = x*y is also stored (two uses: not fused); out[4i+1] = q - z where
# q = x*y but a source is overwritten before the sub (not fused); out[4i+2] with a label
# between a third product and its sub (not fused); out[4i+3] = p
UNFUSED_PTX = _kernel("unfused", """
    mul.f32 %f4, %f1, %f2;
    sub.f32 %f5, %f4, %f3;
    mov.f32 %f12, %f1;
    mul.f32 %f6, %f12, %f2;
    mov.f32 %f12, 0f00000000;
    sub.f32 %f7, %f6, %f3;
    add.f32 %f7, %f7, %f12;
    mul.f32 %f8, %f1, %f2;
$next:
    sub.f32 %f9, %f8, %f3;
    mul.wide.u32 %rd9, %r1, 16;
    add.u64 %rd10, %rd4, %rd9;
    st.global.v4.f32 [%rd10], {%f5, %f7, %f9, %f4};""")

# between two butterfly shuffles (where full warps run as vector code): out[i] = r[i ^ 2] with
# r[j] = x[j ^ 1] * y[j] - z[j]
SHUFFLED_PTX = _kernel("shuffled", """
    mov.b32 %r2, %f1;
    shfl.sync.bfly.b32 %r3, %r2, 1, 31, -1;
    mov.b32 %f4, %r3;
    mul.f32 %f5, %f4, %f2;
    sub.f32 %f6, %f5, %f3;
    mov.b32 %r4, %f6;
    shfl.sync.bfly.b32 %r5, %r4, 2, 31, -1;
    mov.b32 %f7, %r5;
    add.u64 %rd9, %rd4, %rd5;
    st.global.f32 [%rd9], %f7;""", target="sm_70")


def _inputs(rng, n):
    """x and y just above 1 (their product needs more than 24 bits), z near x*y: fused and
    unfused results differ in most elements."""
    x = (1 + rng.integers(1, 2 ** 20, n) * 2.0 ** -20).astype(np.float32)
    y = (1 + rng.integers(1, 2 ** 20, n) * 2.0 ** -20).astype(np.float32)
    z = (x.astype(np.float64) * y).astype(np.float32)
    return x, y, z


def _fma(x, y, z):
    """x*y + z rounded once to f32 (exact in f64: a 48-bit product plus a nearby f32)."""
    return (x.astype(np.float64) * y + z).astype(np.float32)


def _run(ptx, name, x, y, z, block, per):
    out = poison(len(x) * per, np.float32)
    ac.RawModule(ptx=ptx, name=f"{name}.ptx").get_function(name)(
        (1,), (block,), (ac.asarray(x), ac.asarray(y), ac.asarray(z), out))
    return out.get().reshape(len(x), per)


def test_products_are_fused_as_ptxas_fuses_them(rng):
    x, y, z = _inputs(rng, 128)
    got = _run(FUSED_PTX, "fused", x, y, z, 128, 4)
    twice = (x * y) - z                                    # numpy rounds the product first
    assert (_fma(x, y, -z) != twice).mean() > 0.5          # the inputs tell the two apart
    assert np.array_equal(got[:, 0], _fma(x, y, -z))
    assert np.array_equal(got[:, 1], _fma(-x, y, z))
    assert np.array_equal(got[:, 2], _fma(x, y, z))
    assert np.array_equal(got[:, 3], twice)                # .rn: two roundings


def test_products_that_stay_separate(rng):
    x, y, z = _inputs(rng, 128)
    got = _run(UNFUSED_PTX, "unfused", x, y, z, 128, 4)
    twice = (x * y) - z
    assert np.array_equal(got[:, 0], twice)                # the product is stored too
    assert np.array_equal(got[:, 1], twice)                # a source rewritten in between
    assert np.array_equal(got[:, 2], twice)                # a label in between
    assert np.array_equal(got[:, 3], x * y)


@pytest.mark.parametrize("block", [64, 48])
def test_vector_code_between_shuffles_fuses_too(rng, block):
    """Full warps (vector code) and the partial warp (the step function) give one answer."""
    x, y, z = _inputs(rng, block)
    got = _run(SHUFFLED_PTX, "shuffled", x, y, z, block, 1)[:, 0]
    t = np.arange(block)
    r = _fma(x[t ^ 1], y, -z)
    assert np.array_equal(got, r[t ^ 2])
