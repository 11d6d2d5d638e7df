"""The strict front end (ptx/forms.py, ptx/parser.py): a statement the PTX ISA does not define
for its opcode (wrong types, modifiers with types they do not take, missing required
modifiers, wrong state spaces, wrong operand kinds or counts) is a PtxError naming its line
and column; a `.version` newer than anycuda reads is CUDA_ERROR_UNSUPPORTED_PTX_VERSION and
an unknown `.target` CUDA_ERROR_INVALID_PTX from the driver API. ptxas, where it is on PATH,
is the independent reference: it refuses every broken statement here and accepts every valid
one. Real PTX (the examples, the conformance kernels compiled by NVRTC or nvcc) still parses."""
import shutil
import subprocess

import pytest

from anycuda import cudac
from anycuda.driver import api
from anycuda.ptx import PtxError, UnsupportedVersion, forms, ir, opcodes, parse
from anycuda.ptx.modifiers import MODIFIERS, TYPES
from anycuda.runtime.errors import CudaError, CUresult

HEADER = ".version 9.0\n.target sm_100a\n.address_size 64\n.global .u32 gvar;\n"
REGISTERS = (" .reg .b32 %r<4>; .reg .b64 %rd<3>; .reg .f32 %f<3>; .reg .f64 %fd<3>; .reg .pred %p<3>;"
             " .reg .b16 %rs<2>; .reg .f16 %h<2>;\n")
LINE = 8          # the line of the statement under test


def _kernel(statement: str) -> str:
    return HEADER + ".visible .entry k(.param .u64 p)\n{\n" + REGISTERS + "  " + statement + ";\n  ret;\n}\n"


# (statement, what the error says): each refused by ptxas 13 too (test_ptxas_agrees)
BROKEN = [
    ("add.b1 %r1, %r2, %r3", "add: unknown type .b1"),
    ("mul.lo.f32 %f1, %f2, %f1", "mul: .lo does not apply to .f32"),
    ("fma.rn.u32 %r1, %r2, %r3, %r1", "fma: unknown type .u32"),
    ("ld.frobspace.u32 %r1, [%rd1]", "ld: unknown modifier .frobspace"),
    ("st.const.u32 [%rd1], %r1", "st: unknown modifier .const"),                   # .const is read-only
    ("atom.local.add.u32 %r1, [%rd1], %r2", "atom: unknown modifier .local"),
    ("ld.global.u32 %r1, %rd1", "ld: operand 2 must be a memory address [...], found a register"),
    ("add.u32 %r1, %r2", "'add' takes 3 operands, got 2"),
    ("add.u32 5, %r2, %r3", "add: operand 1 must be a destination register, found an immediate"),
    ("add.sat.u32 %r1, %r2, %r3", "add: .sat does not apply to .u32"),
    ("add %r1, %r2, %r3", "add: a type is required"),
    ("add.u32.s32 %r1, %r2, %r3", "add: .u32.s32 is no mixed-precision form"),
    ("mul.u32 %r1, %r2, %r3", "mul.u32 requires .hi, .lo or .wide"),
    ("fma.f32 %f1, %f1, %f1, %f1", "fma.f32 requires a rounding mode"),
    ("mov.u32 %r1", "'mov' takes 2 operands, got 1"),
    ("mov.u32 [%rd1], %r1", "mov: operand 1 must be a destination register, found an address"),
    ("mov.u32 %r1, [%rd1]", "mov: operand 2 must be a value, found an address"),
    ("st.global.u32 %r1, [%rd1]", "st: operand 1 must be a memory address [...], found a register"),
    ("bra 5", "bra: operand 1 must be a label, found an immediate"),
    ("ld.global.v4.f32 {%f1, %f2}, [%rd1]", "ld.v4: operand 1 must be a vector of 4"),
    ("add.rn.rz.f32 %f1, %f1, %f1", "add: .rn and .rz exclude each other"),
    ("ld.global.shared.u32 %r1, [%rd1]", "ld: .global and .shared exclude each other"),
    ("mul.wide.u64 %rd1, %rd2, %rd2", "mul: .wide does not apply to .u64"),
    ("mad.hi.sat.u32 %r1, %r2, %r2, %r2", "mad: .sat does not apply to .u32"),
    ("mad.f32 %f1, %f1, %f1, %f1", "mad.f32 requires a rounding mode"),
    ("div.approx.f64 %fd1, %fd1, %fd1", "div: .approx does not apply to .f64"),
    ("div.f32 %f1, %f1, %f1", "div.f32 requires a rounding mode, .approx or .full"),
    ("sin.f32 %f1, %f2", "sin.f32 requires .approx"),
    ("sqrt.f32 %f1, %f2", "sqrt.f32 requires a rounding mode or .approx"),
    ("add.ftz.f64 %fd1, %fd1, %fd1", "add: .ftz does not apply to .f64"),
    ("abs.ftz.s32 %r1, %r2", "abs: .ftz does not apply to .s32"),
    ("add.cc.f32 %f1, %f1, %f1", "add: .cc does not apply to .f32"),
    ("setp.eq.s32 %p1, %r1", "'setp' takes 3 operands, got 2"),
    ("ld.global.u32.u32 %r1, [%rd1]", "ld: 1 type(s) expected, found .u32.u32"),
    ("cvt.f32 %f1, %r1", "cvt: 2 to 3 type(s) expected, found .f32"),
    ("shl.b32 %r1, %r2, [%rd1]", "shl: operand 3 must be a value, found an address"),
    ("ld.global.ca.ca.u32 %r1, [%rd1]", "ld: .ca written twice"),
    ("atom.global.add.exch.u32 %r1, [%rd1], %r2", "atom: .add and .exch exclude each other"),
    ("red.global.add.u32 %r1, %r2", "red: operand 1 must be a memory address [...], found a register"),
    ("membar.gl.u32", "membar: unknown type .u32"),
    ("bar.sync", "'bar' takes 1 to 4 operands, got 0"),
    ("ret %r1", "'ret' takes 0 operands, got 1"),
    ("rcp.approx.f16 %h1, %h1", "rcp: unknown type .f16"),
    ("selp.b32 %r1, %r2, %r2", "'selp' takes 4 operands, got 3"),
    ("mul24.u32 %r1, %r2, %r2", "mul24.u32 requires .hi or .lo"),
    ("min.u32 %r1, %r2, %r3, %r1", "'min' takes 3 operands, got 4"),                # three sources: .f32 only
]

# valid forms, each accepted by ptxas 13 too
VALID = [
    "add.sat.s32 %r1, %r2, %r3", "add.rn.sat.f32 %f1, %f2, %f1", "add.rn.f32.f16 %f1, %h1, %f2",
    "sub.rn.f32.bf16 %f1, %rs1, %f2", "mul.wide.s32 %rd1, %r1, %r2", "mul.rn.f32 %f1, %f1, %f1",
    "mad.hi.sat.s32 %r1, %r2, %r2, %r2", "fma.rn.ftz.sat.f32 %f1, %f1, %f1, %f1", "div.full.f32 %f1, %f1, %f1",
    "div.u32 %r1, %r2, %r2", "rcp.approx.ftz.f64 %fd1, %fd1", "sqrt.approx.f32 %f1, %f2",
    "ld.global.v4.f32 {%f1, %f2, %f1, %f2}, [%rd1]", "st.global.v2.u32 [%rd1+8], {%r1, 7}",
    "atom.global.cas.b32 %r1, [%rd1], %r2, %r3", "red.global.add.u32 [%rd1], 1",
    "setp.lt.and.s32 %p1|%p2, %r1, %r2, %p1", "setp.ne.s32 %p1, %r1, 0", "selp.b32 %r1, %r2, 3, %p1",
    "shfl.sync.bfly.b32 %r1|%p1, %r2, 1, 31, -1", "vote.sync.ballot.b32 %r1, !%p1, -1",
    "cvt.rn.f16x2.f32 %r1, %f1, %f2", "cvt.rzi.s32.f32 %r1, %f1", "mov.u64 %rd1, gvar",
    "cvta.to.global.u64 %rd1, %rd2", "bar.sync 0", "bar.red.popc.u32 %r1, 0, %p1", "lop3.b32 %r1, %r2, %r3, %r1, 0x96",
    "prmt.b32 %r1, %r2, %r3, 0x3210", "bfi.b32 %r1, %r2, %r3, 4, 8", "ld.param.u64 %rd1, [p]",
    "mul.lo.u16 %rs1, %rs1, %rs1", "mul24.hi.u32 %r1, %r2, %r2", "ex2.approx.ftz.f32 %f1, %f1",
    "max.NaN.f32 %f1, %f1, %f2", "min.f32 %f1, %f2, %f1, %f2", "max.relu.s32 %r1, %r2, %r3",
    "atom.global.add.u32 %r1, [%rd1], %r2", "fence.acq_rel.gpu", "membar.gl", "activemask.b32 %r1",
    "redux.sync.add.u32 %r1, %r2, -1",
]


@pytest.mark.parametrize("statement, message", BROKEN)
def test_a_statement_the_isa_does_not_define_is_refused_with_its_line(statement, message):
    with pytest.raises(PtxError) as e:
        parse(_kernel(statement), "forms.ptx")
    found = [(x.line, x.message) for x in e.value.errors]
    assert any(line == LINE and message in text for line, text in found), found
    assert f"forms.ptx:{LINE}:" in str(e.value)


@pytest.mark.parametrize("statement", VALID)
def test_the_isa_forms_are_accepted(statement):
    assert parse(_kernel(statement), "forms.ptx").kernels[0].body


@pytest.mark.parametrize("statement, column", [
    ("add.sat.u32 %r1, %r2, %r3", 6),        # at .sat
    ("add.u32 5, %r2, %r3", 11),             # at the immediate
    ("ld.global.u32 %r1, %rd1", 22),         # at the register that should be an address
    ("add.rn.rz.f32 %f1, %f1, %f1", 9),      # at the second rounding mode
])
def test_the_column_points_at_the_modifier_or_operand(statement, column):
    with pytest.raises(PtxError) as e:
        parse(_kernel(statement), "forms.ptx")
    assert (e.value.line, e.value.col) == (LINE, column), str(e.value)


def _ptxas_accepts(path, text) -> bool:
    path.write_text(text)
    done = subprocess.run([shutil.which("ptxas"), "-arch=sm_100a", str(path), "-o", str(path.with_suffix(".o"))],
                          capture_output=True, text=True, timeout=120)
    return done.returncode == 0


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas (the CUDA toolkit's assembler, the reference) "
                                                          "is not on PATH")
def test_ptxas_agrees(tmp_path):
    """NVIDIA's assembler refuses every broken statement and accepts every valid one."""
    path = tmp_path / "form.ptx"
    assert [s for s, _ in BROKEN if _ptxas_accepts(path, _kernel(s))] == []
    assert [s for s in VALID if not _ptxas_accepts(path, _kernel(s))] == []


@pytest.mark.parametrize("opcode", sorted(opcodes.ALL))
def test_every_opcode_refuses_a_type_it_does_not_take(opcode):
    """Made from the tables, so that an opcode added to them is tried by itself."""
    wrong = sorted(TYPES - MODIFIERS[opcode])[0]
    spec = forms.OPERANDS.get(opcode, ("a",))
    fewest = sum(not kind.endswith("?") for kind in spec)
    with pytest.raises(PtxError) as e:
        parse(_kernel(f"{opcode}.{wrong}{_operands(fewest)}"), "forms.ptx")
    assert e.value.message == f"{opcode}: unknown type .{wrong}" and e.value.line == LINE
    assert e.value.col == 3 + len(opcode), str(e.value)


def _operands(n: int) -> str:
    return " " + ", ".join(["%r1"] * n) if n else ""


@pytest.mark.parametrize("opcode", sorted(forms.OPERANDS))
def test_every_opcode_refuses_a_wrong_operand_count(opcode):
    spec = forms.OPERANDS[opcode]
    fewest = sum(not kind.endswith("?") for kind in spec)
    for n in [len(spec) + 1] + ([fewest - 1] if fewest else []):
        with pytest.raises(PtxError) as e:
            parse(_kernel(f"{opcode}{_operands(n)}"), "forms.ptx")
        assert any(x.message.startswith(f"'{opcode}' takes") and x.message.endswith(f"got {n}") and x.line == LINE
                   for x in e.value.errors), (n, str(e.value))


def test_the_opcodes_whose_operands_are_not_checked_are_the_named_ones():
    """forms.py's docstring names the families left to their modifiers' check."""
    unchecked = {op for op in opcodes.ALL - set(forms.OPERANDS) if op != "call"}
    families = ("v", "wgmma", "tcgen05", "multimem", "cp.async.bulk.", "cp.reduce", "tensormap",
                "clusterlaunchcontrol", "st.async", "red.async", "st.bulk")
    assert sorted(op for op in unchecked if not op.startswith(families)) == []


@pytest.mark.parametrize("opcode", sorted(op for op in forms.OPERANDS if (forms.type_counts(op) or (0,))[0] >= 1))
def test_an_opcode_that_names_a_type_refuses_none(opcode):
    with pytest.raises(PtxError) as e:
        parse(_kernel(f"{opcode} " + ", ".join(["%r1"] * len(forms.OPERANDS[opcode]))), "forms.ptx")
    assert any(x.message == f"{opcode}: a type is required (.u32, .f32, ...)" for x in e.value.errors), str(e.value)


def test_every_problem_of_a_kernel_is_reported_at_once():
    text = _kernel("add.sat.u32 %r1, %r2, %r3;\n  mul.lo.f32 %f1, %f1, %f1;\n  ld.global.u32 %r1, %rd1")
    with pytest.raises(PtxError) as e:
        parse(text, "forms.ptx")
    assert [x.line for x in e.value.errors] == [LINE, LINE + 1, LINE + 2]


# ---------------------------------------------------------------- .version and .target

def _module(version="9.0", target="sm_90"):
    return (f".version {version}\n.target {target}\n.address_size 64\n"
            ".visible .entry nothing()\n{\n  ret;\n}\n").encode()


def _load_code(image) -> int:
    try:
        api.cuModuleUnload(api.cuModuleLoadData(image))
    except CudaError as e:
        return e.code, e.message
    return CUresult.CUDA_SUCCESS, ""


@pytest.mark.parametrize("version", ["9.6", "10.0", "99.9"])
def test_a_newer_isa_is_unsupported_ptx_version(context, version):
    """As NVIDIA's driver answers PTX from a toolkit newer than itself (ptxas: "Unsupported
    .version 99.9; current version is '9.0'")."""
    code, message = _load_code(_module(version))
    assert code == CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION == 222
    assert f"module.ptx:1:10: unsupported .version {version}" in message
    with pytest.raises(UnsupportedVersion):
        parse(_module(version).decode())


@pytest.mark.parametrize("target", ["sm_999", "sm_90,frobnicate", "compute_90", "sm_75b"])
def test_an_unknown_target_is_invalid_ptx(context, target):
    """ptxas ends with "fatal: Unsupported .target 'sm_999'", a failed PTX compilation, which
    the driver reports as CUDA_ERROR_INVALID_PTX; UNSUPPORTED_PTX_VERSION is its answer to a
    too new .version alone."""
    code, message = _load_code(_module(target=target))
    assert code == CUresult.CUDA_ERROR_INVALID_PTX
    bad = target.split(",")[-1]
    assert "module.ptx:2:" in message and f"unsupported .target '{bad}'" in message, message


@pytest.mark.parametrize("version, target", [("9.5", "sm_90"), ("9.0", "sm_120a"), ("8.0", "sm_100f"),
                                             ("7.0", "sm_75, texmode_independent"), ("1.4", "sm_13, map_f64_to_f32")])
def test_known_versions_and_targets_load(context, version, target):
    assert _load_code(_module(version, target)) == (CUresult.CUDA_SUCCESS, "")


# ---------------------------------------------------------------- real PTX

def test_real_ptx_passes_the_strict_front_end():
    """The bundled examples and the conformance kernels as NVRTC or nvcc write them: every
    statement of every function is checked and none is refused (scripts/ptx_corpus.py runs
    the larger corpus: nvcc for several architectures, numba-cuda, the cuBLAS wheel)."""
    from pathlib import Path
    import anycuda
    texts = [p.read_text() for p in sorted((Path(anycuda.__file__).parent / "examples").glob("*.ptx"))]
    kernels = Path(__file__).parent / "kernels"
    if cudac.find_nvrtc() or cudac.find_nvcc():
        texts += [cudac.compile_to_ptx(p.read_text(), name=p.name) for p in sorted(kernels.glob("*.cu"))]
    checked = 0
    for text in texts:
        module = parse(text, "real.ptx")
        checked += sum(isinstance(s, ir.Instruction) for f in module.functions for s in (f.body or ()))
    assert checked > (5000 if len(texts) > 5 else 300), checked
