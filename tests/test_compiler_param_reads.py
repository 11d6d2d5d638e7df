"""Scalar kernel parameters read more than once (compiler/lowering/function.py kernel_param_value): the
value passed in is converted to the read's type once, in the entry block, so that every read
sees it, wherever it is: in two sibling branches, or again at the resume point after a
barrier. Reduced from kernels of NVIDIA's cuBLAS 13 (syr, symv, gemv, sgemmEx), whose loads
failed LLVM's verifier ("Instruction does not dominate all uses" on a bitcast to double or
float) when the conversion was made at the first read and cached. Also: a conversion anycuda
does not implement (cvt to a pair of fp8 values) fails its kernel with a PtxError naming it."""
from __future__ import annotations

import numpy as np
import pytest

import anycuda as ac
from conformance import poison

HEADER = ".version 9.0\n.target sm_120\n.address_size 64\n"


def two_paths(t: str) -> str:
    """out[i] = in[i] < 0 ? in[i] * a : in[i] + a, `a` read by ld.param in each branch."""
    size, reg = (8, "fd") if t == "f64" else (4, "f")
    zero = "0d0000000000000000" if t == "f64" else "0f00000000"
    return HEADER + f"""
.visible .entry two_paths(.param .u64 out_p, .param .u64 in_p, .param .{t} a, .param .u32 n)
{{
  .reg .pred %p<3>; .reg .b32 %r<6>; .reg .b64 %rd<8>; .reg .{t} %{reg}<6>;
  ld.param.u64 %rd1, [out_p]; ld.param.u64 %rd2, [in_p]; ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.s32 %p1, %r5, %r1;
  @%p1 bra DONE;
  mul.wide.s32 %rd4, %r5, {size}; add.s64 %rd5, %rd2, %rd4;
  ld.global.{t} %{reg}1, [%rd5];
  setp.lt.{t} %p2, %{reg}1, {zero};
  @%p2 bra NEG;
  ld.param.{t} %{reg}2, [a];
  add.{t} %{reg}3, %{reg}1, %{reg}2;
  bra.uni STORE;
NEG:
  ld.param.{t} %{reg}4, [a];
  mul.{t} %{reg}3, %{reg}1, %{reg}4;
STORE:
  add.s64 %rd7, %rd1, %rd4;
  st.global.{t} [%rd7], %{reg}3;
DONE:
  ret;
}}
"""


# out[i] = alpha * in[ntid.x - 1 - i] + beta in one block: alpha and beta live across bar.sync
ACROSS_A_BARRIER = HEADER + """
.visible .entry reverse_scale(.param .u64 out_p, .param .u64 in_p, .param .f64 alpha, .param .f64 beta)
{
  .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .b64 %fd<6>;
  .shared .align 8 .b8 tile[8192];
  ld.param.f64 %fd1, [alpha]; ld.param.f64 %fd2, [beta];
  ld.param.u64 %rd1, [in_p]; ld.param.u64 %rd2, [out_p];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ntid.x;
  mul.wide.u32 %rd5, %r1, 8; add.s64 %rd6, %rd1, %rd5;
  ld.global.f64 %fd3, [%rd6];
  mov.u32 %r3, tile; shl.b32 %r4, %r1, 3; add.s32 %r5, %r3, %r4;
  st.shared.f64 [%r5], %fd3;
  bar.sync 0;
  sub.s32 %r6, %r2, %r1; shl.b32 %r7, %r6, 3; add.s32 %r7, %r3, %r7;
  ld.shared.f64 %fd4, [%r7+-8];
  fma.rn.f64 %fd5, %fd1, %fd4, %fd2;
  add.s64 %rd7, %rd2, %rd5;
  st.global.f64 [%rd7], %fd5;
  ret;
}
"""

PACK_FP8 = HEADER + """
.visible .entry pack_fp8(.param .u64 out_p, .param .f32 a, .param .f32 b)
{
  .reg .b16 %h<2>; .reg .b32 %f<3>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out_p]; ld.param.f32 %f1, [a]; ld.param.f32 %f2, [b];
  cvt.rn.satfinite.e4m3x2.f32 %h1, %f1, %f2;
  st.global.b16 [%rd1], %h1;
  ret;
}
"""


@pytest.fixture(params=["optimised", "quick"])
def jit(request, monkeypatch):
    monkeypatch.setenv("ANYCUDA_JIT", request.param)
    monkeypatch.setenv("ANYCUDA_CACHE", "0")
    return request.param


@pytest.mark.parametrize("t", ["f64", "f32"])
def test_a_parameter_read_in_two_branches(jit, rng, t):
    dtype = np.float64 if t == "f64" else np.float32
    n = 1000
    x = rng.standard_normal(n).astype(dtype)
    a = dtype(rng.standard_normal())
    out = poison(n, dtype)
    kernel = ac.RawModule(ptx=two_paths(t)).get_function("two_paths")
    kernel(((n + 127) // 128,), (128,), (out, ac.asarray(x), a, np.uint32(n)))
    np.testing.assert_array_equal(out.get(), np.where(x < 0, x * a, x + a))


def test_parameters_live_across_a_barrier(jit, rng):
    threads = 256
    x = rng.standard_normal(threads)
    alpha, beta = rng.standard_normal(2)
    out = poison(threads, np.float64)
    kernel = ac.RawModule(ptx=ACROSS_A_BARRIER).get_function("reverse_scale")
    kernel((1,), (threads,), (out, ac.asarray(x), np.float64(alpha), np.float64(beta)))
    # fma rounds once: its result lies within an ulp of the magnitudes summed of the exact value
    exact = np.longdouble(alpha) * x[::-1].astype(np.longdouble) + np.longdouble(beta)
    error = np.abs(out.get().astype(np.longdouble) - exact)
    assert (error <= 2.3e-16 * (np.abs(alpha * x[::-1]) + abs(beta))).all()


def test_an_fp8_pair_conversion_is_refused_by_name():
    out = ac.zeros(1, np.uint16)
    with pytest.raises(ac.CudaError) as e:
        ac.RawModule(ptx=PACK_FP8, name="fp8.ptx").get_function("pack_fp8")((1,), (1,), (out, np.float32(1), np.float32(2)))
    assert e.value.code == ac.CUresult.CUDA_ERROR_INVALID_PTX
    line = PACK_FP8[:PACK_FP8.index("cvt.rn")].count("\n") + 1
    assert "e4m3x2" in str(e.value) and "not supported" in str(e.value) and f"fp8.ptx:{line}:" in str(e.value)
