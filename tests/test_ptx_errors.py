"""Malformed PTX through the Python API: a PtxError with line:col, never a crash. A random
cut or byte flip of real PTX must also end in PtxError (or compile, if still valid)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import anycuda as ac
from anycuda.ptx import PtxError, parse
from conformance import load_cuda

GOOD = """.version 8.0
.target sm_80
.address_size 64

.visible .entry k(.param .u64 p)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""


@pytest.mark.parametrize("text, line, fragment", [
    (GOOD.replace("    ret;\n}\n", ""), 12, "end of input"),
    (GOOD.replace("mov.u32 %r1, %tid.x;", "frobnicate.b32 %r1, %r2;"), 10, "unknown instruction 'frobnicate"),
    (GOOD.replace("mov.u32 %r1, %tid.x;", "mov.u32 %r1 %tid.x;"), 10, "expected"),
    (GOOD.replace("[p];", "[p]"), 10, "expected ';'"),
    (GOOD.replace("{", "{{"), 14, "end of input"),
])
def test_malformed_ptx(text, line, fragment):
    with pytest.raises(PtxError) as e:
        ac.RawModule(ptx=text, name="bad.ptx")
    assert e.value.line == line, str(e.value)
    assert fragment in str(e.value) and "bad.ptx:" in str(e.value)


def test_all_problems_are_reported_at_once():
    text = GOOD.replace("mov.u32 %r1, %tid.x;", "frob.u32 %r1;\n    blorp.u32 %r2;")
    with pytest.raises(PtxError) as e:
        parse(text)
    assert len(e.value.errors) == 2 and "blorp" in str(e.value)


def test_bad_operand_type_is_reported_with_position():
    text = GOOD.replace("mov.u32 %r1, %tid.x;", "add.f32 %r1, %r2, %r2;").replace(".reg .b32 %r<3>;", ".reg .s32 %r<3>;")
    mod = ac.RawModule(ptx=text, name="types.ptx")
    with pytest.raises(ac.CudaError) as e:
        mod.get_function("k")((1,), (1,), (ac.zeros(1, np.int32),))
    assert e.value.code == ac.CUresult.CUDA_ERROR_INVALID_PTX
    assert "types.ptx:10:" in str(e.value) and "declared .s32 but used as .f32" in str(e.value)


def test_unsupported_instruction_fails_only_its_kernel():
    text = GOOD + """
.visible .entry uses_texture(.param .u64 p)
{
    .reg .f32 %f<5>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f1, %f2}];
    ret;
}
"""
    mod = ac.RawModule(ptx=text, name="two.ptx")
    out = ac.zeros(1, np.int32)
    mod.get_function("k")((1,), (5,), (out,))
    assert out.get()[0] in range(5)
    with pytest.raises(ac.CudaError) as e:
        mod.get_function("uses_texture")((1,), (1,), (out,))
    assert "tex" in str(e.value) and "two.ptx:20:" in str(e.value)


def _real_ptx():
    load_cuda("arith_int")            # skips when there is no CUDA C++ compiler
    return load_cuda("arith_int").ptx


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_mutated_ptx_never_crashes(data):
    text = _real_ptx()
    cut = data.draw(st.integers(0, len(text)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, max(len(text) - 1, 0)), st.characters(max_codepoint=127)),
                               max_size=3))
    mutated = list(text[:cut])
    for pos, ch in flips:
        if pos < len(mutated):
            mutated[pos] = ch
    try:
        parse("".join(mutated))
    except PtxError:
        pass
