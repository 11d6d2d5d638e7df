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


MALFORMED = [
    # (text, line, fragment, found when): text that does not split into items fails the load;
    # a kernel's body is parsed at its first use (CUDA_MODULE_LOADING=LAZY, the default)
    (GOOD.replace("    ret;\n}\n", ""), 12, "end of input", "load"),
    (GOOD.replace("mov.u32 %r1, %tid.x;", "frobnicate.b32 %r1, %r2;"), 10, "unknown instruction 'frobnicate", "use"),
    (GOOD.replace("mov.u32 %r1, %tid.x;", "mov.u32 %r1 %tid.x;"), 10, "expected", "use"),
    (GOOD.replace("[p];", "[p]"), 10, "expected ';'", "use"),
    (GOOD.replace("{", "{{"), 14, "end of input", "load"),
    (GOOD.replace(".visible", ".global .u32 x = ;\n.visible"), 5, "expected", "load"),
    (GOOD.replace(".version 8.0", ".version 99.9"), 1, "unsupported .version 99.9: anycuda reads PTX ISA 1.0 to 9.5", "load"),
    (GOOD.replace(".version 8.0", ".version 10.0"), 1, "unsupported .version 10.0", "load"),
    (GOOD.replace(".version 8.0", ".version 0.9"), 1, "PTX ISA version 0.9", "load"),
]


@pytest.mark.parametrize("text, line, fragment, when", MALFORMED)
def test_malformed_ptx(text, line, fragment, when):
    if when == "load":
        with pytest.raises(PtxError) as e:
            ac.RawModule(ptx=text, name="bad.ptx")
        assert e.value.line == line, str(e.value)
    else:
        mod = ac.RawModule(ptx=text, name="bad.ptx")
        with pytest.raises(ac.CudaError) as e:
            mod.get_function("k")((1,), (1,), (ac.zeros(1, np.int32),))
        assert e.value.code == ac.CUresult.CUDA_ERROR_INVALID_PTX
    assert fragment in str(e.value) and f"bad.ptx:{line}:" in str(e.value), str(e.value)


@pytest.mark.parametrize("text, line, fragment, when", MALFORMED)
def test_malformed_ptx_fails_the_load_when_eager(monkeypatch, text, line, fragment, when):
    monkeypatch.setenv("CUDA_MODULE_LOADING", "EAGER")
    with pytest.raises(PtxError) as e:
        ac.RawModule(ptx=text, name="bad.ptx")
    assert e.value.line == line and fragment in str(e.value), str(e.value)


def test_all_problems_are_reported_at_once():
    text = GOOD.replace("mov.u32 %r1, %tid.x;", "frob.u32 %r1;\n    blorp.u32 %r2;")
    with pytest.raises(PtxError) as e:
        parse(text)
    assert len(e.value.errors) == 2 and "blorp" in str(e.value)


def _load_and_run(text, name, kernel="k", args=None):
    """Load `text` and launch `kernel`; errors may surface at load, lookup or launch."""
    mod = ac.RawModule(ptx=text, name=name)
    out = ac.zeros(1, np.int32)
    mod.get_function(kernel)((1,), (1,), args or (out,))
    ac.synchronize()
    return out.get()


def test_bad_operand_type_is_reported_with_position():
    # PTX ISA, operand type checking: a signed-integer register may not stand in for .f32
    text = GOOD.replace("mov.u32 %r1, %tid.x;", "add.f32 %r1, %r2, %r2;").replace(".reg .b32 %r<3>;", ".reg .s32 %r<3>;")
    with pytest.raises((PtxError, ac.CudaError)) as e:
        _load_and_run(text, "types.ptx")
    if isinstance(e.value, ac.CudaError):
        assert e.value.code == ac.CUresult.CUDA_ERROR_INVALID_PTX
    assert "types.ptx:10:" in str(e.value) and "declared .s32 but used as .f32" in str(e.value)


def test_float_register_in_an_integer_instruction_is_refused():
    text = GOOD.replace(".reg .b32 %r<3>;", ".reg .b32 %r<3>;\n    .reg .f32 %f<3>;").replace(
        "mov.u32 %r1, %tid.x;", "mov.u32 %r1, %tid.x;\n    add.s32 %f1, %f2, %f2;")
    with pytest.raises((PtxError, ac.CudaError)) as e:
        _load_and_run(text, "ftypes.ptx")
    assert "ftypes.ptx:12:" in str(e.value) and "%f" in str(e.value)


def test_compatible_operand_types_are_accepted():
    # bit-size registers fit any instruction type of their size, and integer types of the same
    # size fit each other (signed/unsigned): these modules are valid and must run
    text = GOOD.replace("mov.u32 %r1, %tid.x;",
                        "mov.b32 %r2, 0f40400000;\n    add.f32 %r1, %r2, %r2;\n    cvt.rzi.s32.f32 %r1, %r1;")
    assert _load_and_run(text, "bits.ptx")[0] == 6
    text = GOOD.replace(".reg .b32 %r<3>;", ".reg .u32 %r<3>;").replace(
        "mov.u32 %r1, %tid.x;", "mov.u32 %r2, 21;\n    add.s32 %r1, %r2, %r2;")
    assert _load_and_run(text, "ints.ptx")[0] == 42


@pytest.mark.parametrize("replacement, fragment", [
    ("add.s32 %r1, %r2;", "add"),                     # an operand missing
    ("add.s32 %r1, %r2, %r2, %r2;", "add"),           # one too many
    ("mov.u32 %r9, %tid.x;", "%r9"),                  # a register never declared
    ("bra NOWHERE;", "NOWHERE"),                      # a label never defined
])
def test_malformed_operands_are_reported_with_their_line(replacement, fragment):
    text = GOOD.replace("mov.u32 %r1, %tid.x;", replacement)
    with pytest.raises((PtxError, ac.CudaError)) as e:
        _load_and_run(text, "ops.ptx")
    assert "ops.ptx:10:" in str(e.value) and fragment in str(e.value), str(e.value)


@pytest.mark.parametrize("replacement", [
    "mad.lo.s32 %r1, %r2, %r2;", "mad.lo.s32 %r1, %r2, %r2, %r2, %r2;", "setp.eq.s32 %p1, %r2;",
    "setp.eq.s32 %p1, %r2, %r2, %p1;",             # a fourth operand needs a BoolOp
    "setp.eq.and.s32 %p1, %r2, %r2;", "set.lt.u32.s32 %r1, %r2;", "selp.b32 %r1, %r2, %r2;",
    "bfi.b32 %r1, %r2, %r2, 0;", "lop3.b32 %r1, %r2, %r2, 0x80;", "cvt.rn.f32.s32 %f1;",
    "ld.global.u32 %r1;", "bra;", "not.b32 %r1;", "min.s32 %r1, %r2;", "shfl.sync.idx.b32 %r1, %r2, 0;",
    "ret %r1;",
])
def test_every_opcode_checks_its_operand_count(replacement):
    text = GOOD.replace(".reg .b32 %r<3>;", ".reg .b32 %r<3>; .reg .f32 %f<2>; .reg .pred %p<2>;").replace(
        "mov.u32 %r1, %tid.x;", replacement)
    opcode = replacement.split(".")[0].split(" ")[0].rstrip(";")
    with pytest.raises((PtxError, ac.CudaError)) as e:
        _load_and_run(text, "count.ptx")
    assert "count.ptx:10:" in str(e.value) and f"'{opcode}' takes" in str(e.value), str(e.value)


def test_operand_count_table_covers_every_handler():
    from anycuda.compiler.ops.instructions import HANDLERS, OPERAND_COUNTS, VARIABLE_FORMS
    unchecked = set(HANDLERS) - set(OPERAND_COUNTS) - VARIABLE_FORMS - {"set", "setp"}
    assert not unchecked, f"opcodes with neither an operand count nor a reason: {sorted(unchecked)}"


@pytest.mark.parametrize("body, opcode", [
    ("    .reg .f32 %f<5>;\n    tex.cube.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f1, %f2, %f3, %f4}];", "tex"),
    # (warpgroup matrix instructions are among those anycuda refuses by name)
    ("    wgmma.fence.sync.aligned;", "wgmma"),
])
def test_unsupported_instruction_fails_only_its_kernel(body, opcode):
    text = GOOD + """
.visible .entry unsupported(.param .u64 p)
{
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
""" + body + """
    ret;
}
"""
    line = text[:text.index(opcode + ".")].count("\n") + 1
    mod = ac.RawModule(ptx=text, name="two.ptx")
    out = ac.zeros(1, np.int32)
    mod.get_function("k")((1,), (5,), (out,))
    assert out.get()[0] in range(5)
    with pytest.raises((PtxError, ac.CudaError)) as e:
        mod.get_function("unsupported")((1,), (1,), (out,))
        ac.synchronize()
    assert opcode in str(e.value) and f"two.ptx:{line}:" in str(e.value), str(e.value)
    mod.get_function("k")((1,), (3,), (out,))          # the good kernel still runs afterwards
    assert out.get()[0] in range(3)


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


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_mutated_ptx_never_crashes_the_index(data):
    """A cut or byte flips of real PTX: the index (ptx/index.py) raises PtxError or splits
    it, and each kernel's unit then parses or raises PtxError."""
    from anycuda.ptx.index import ModuleIndex
    text = _real_ptx()
    cut = data.draw(st.integers(0, len(text)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, max(len(text) - 1, 0)),
                                         st.sampled_from(list("{};\"/*.=()[] \nx0"))), max_size=3))
    mutated = list(text[:cut])
    for pos, ch in flips:
        if pos < len(mutated):
            mutated[pos] = ch
    try:
        index = ModuleIndex("".join(mutated), "mutated.ptx")
    except PtxError:
        return
    for name in index.kernels:
        try:
            parse(index.kernel_unit(name).text)
        except PtxError:
            pass
