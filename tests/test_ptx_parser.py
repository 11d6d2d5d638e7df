"""The PTX parser on hand-written forms: declarations, scopes, operands, directives."""
import pytest

from anycuda.ptx import PtxError, parse
from anycuda.ptx import ir

SAMPLE = r"""
//
// a comment block
//
.version 9.0
.target sm_90a, texmode_independent
.address_size 64
.file 1 "kernel.cu"

.global .align 4 .b8 coef[8] = {0, 0, 128, 63, 0, 0};
.global .align 8 .u64 table[2] = {f, generic(coef)};
.extern .shared .align 16 .b8 dyn[];
.const .f32 half = 0f3F000000;

.func (.param .b32 r) f(.param .b32 x, .param .align 8 .b8 s[16])
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    ld.param.u32 %r2, [s+-4];
    st.param.b32 [r+0], %r1;
    ret;
}

.visible .entry k(.param .u64 .ptr .global .align 16 p)
.maxntid 256, 1, 1
.minnctapersm 2
{
    .reg .pred %p<2>;
    .reg .b32 %r<5>;
    .reg .f32 %f<2>;
    .reg .b64 %rd<3>;
    .loc 1 7 3
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    setp.lt.s32 %p0|%p1, %r1, 5;
    @!%p0 bra $L__done;
    { .reg .b16 low, high;
      mov.b32 {low, high}, %r1;
      mov.b16 %r2, low;
    }
    {
    .param .b32 param0;
    .param .align 8 .b8 param1[16];
    .param .b32 retval0;
    st.param.b32 [param0], %r1;
    call.uni (retval0),
    f,
    (
    param0,
    param1
    );
    ld.param.b32 %r3, [retval0];
    }
    ld.global.nc.L1::no_allocate.v2.f32 {%f0, %f1}, [%rd1+8];
    mov.f32 %f0, 0d3FF0000000000000;
$L__done:
    ret;
}
"""


def test_module_structure():
    m = parse(SAMPLE, "sample.ptx")
    assert m.version == (9, 0) and m.target == ("sm_90a", "texmode_independent") and m.address_size == 64
    assert m.files == {1: "kernel.cu"}
    coef, table, dyn, half = m.variables
    assert coef.count == 8 and coef.init == (0, 0, 128, 63, 0, 0) and coef.align == 4
    assert table.init == (ir.Sym("f"), ir.GenericSym("coef"))
    assert dyn.linkage == "extern" and dyn.count == 0
    assert half.init == (0.5,)
    f, k = m.functions
    assert f.rets[0].name == "r" and [p.name for p in f.params] == ["x", "s"] and f.params[1].count == 16
    assert k.is_kernel and k.linkage == "visible" and k.params[0].attrs == ("ptr", "global", "align 16") and k.params[0].align is None
    assert k.directives == {"maxntid": (256, 1, 1), "minnctapersm": (2,)}


def test_body_statements():
    k = parse(SAMPLE).function("k")
    regs = [s.name for s in k.body if isinstance(s, ir.VarDecl) and s.space == "reg"]
    assert regs[:2] == ["%p0", "%p1"] and "%rd2" in regs and "%rd3" not in regs
    insts = [s for s in k.body if isinstance(s, ir.Instruction)]
    ld = insts[0]
    assert (ld.opcode, ld.mods) == ("ld", ("param", "u64")) and ld.operands[1] == ir.Addr(ir.Sym("p"), 0)
    assert ld.debug == ir.DebugLoc(1, 7, 3)
    assert insts[1].operands[1] == ir.SpecialReg("tid", "x")
    assert insts[2].operands[0] == ir.Pair(ir.Reg("%p0"), ir.Reg("%p1"))
    bra = insts[3]
    assert bra.guard == ir.Guard(ir.Reg("%p0"), True) and bra.operands == (ir.Sym("$L__done"),)
    unpack = insts[4]
    low, high = unpack.operands[0].items
    assert low.name.startswith("low$s") and high.name.startswith("high$s")
    call = next(i for i in insts if i.opcode == "call")
    rets, target, args = call.operands
    assert target == ir.Sym("f") and len(args.items) == 2 and rets.items[0].name.startswith("retval0$s")
    vec = next(i for i in insts if i.opcode == "ld" and "nc" in i.mods)
    assert vec.mods == ("global", "nc", "L1::no_allocate", "v2", "f32")
    assert vec.operands[1] == ir.Addr(ir.Reg("%rd1"), 8)
    mov = insts[-2]
    assert mov.operands[1] == ir.Imm(1.0, 0x3FF0000000000000, 64)
    assert isinstance(k.body[-2], ir.Label) and k.body[-2].name == "$L__done"


def test_negative_offsets_and_params_in_functions():
    f = parse(SAMPLE).function("f")
    ld = [s for s in f.body if isinstance(s, ir.Instruction)][1]
    assert ld.operands[1] == ir.Addr(ir.Sym("s"), -4)


@pytest.mark.parametrize("text, line", [
    (".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n  add.s32 %r1, %r2,;\n}\n", 6),
    (".version 8.0\n.visible .entry k()\n{\n  ret;\n", 5),
    (".version 8.0\n.visible .entry k()\n{\n  @ ret;\n}\n", 4),
    (".version 8.0\n.global .u32 x = ;\n", 2),
    (".version 8.0\n§\n", 2),
])
def test_errors_have_positions(text, line):
    with pytest.raises(PtxError) as e:
        parse(text, "t.ptx")
    assert e.value.line == line and str(e.value).startswith(f"t.ptx:{line}:")


NESTED_LABELS = r"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry k()
{
    bra L;
    {
        bra L;
        {
            bra L;
            bra M;
        L:
            ret;
        }
    L:
        ret;
    }
    {
        bra L;
    L:
        ret;
    }
L:
M:
    ret;
}
"""


def test_labels_of_nested_blocks_are_their_own():
    """A label is its block's own, used before or after it: a branch goes to the label of
    its innermost block that defines the name (a sibling's or an inner block's of the same
    name are others), else to the enclosing blocks'."""
    k = parse(NESTED_LABELS).function("k")
    targets = [s.operands[0].name for s in k.body if isinstance(s, ir.Instruction) and s.opcode == "bra"]
    labels = [s.name for s in k.body if isinstance(s, ir.Label)]
    outer, first, inner, inner_m, sibling = targets
    assert outer == "L" and inner_m == "M"
    assert len({outer, first, inner, sibling}) == 4
    assert labels == [inner, first, sibling, "L", "M"]


def test_a_label_defined_twice_in_a_block_is_an_error():
    """As ptxas refuses it (a fuzzed kernel with a label line duplicated reached LLVM as an
    empty basic block); the same name in two blocks is two labels (the test above)."""
    twice = NESTED_LABELS.replace("L:\nM:", "L:\nL:\nM:")
    assert twice != NESTED_LABELS
    with pytest.raises(PtxError, match="duplicate label L"):
        parse(twice)


def test_a_name_past_the_bound_is_an_error(monkeypatch):
    """PTX bounds no name, LLVM does (compiler/build/jit.py raises its bound to the lexer's
    MAX_NAME, 16 Mi characters): a longer name is refused with its length, not its text."""
    from anycuda.ptx import lexer, parser
    monkeypatch.setattr(lexer, "MAX_NAME", 100)
    monkeypatch.setattr(parser, "MAX_NAME", 100)
    with pytest.raises(PtxError, match="a name of 201 characters \\(at most 100\\)"):
        parse(NESTED_LABELS.replace("M", "M" + "m" * 200))


@pytest.mark.parametrize("decl", [".reg .b1024 %x;", ".reg .frobnicate %x;", ".shared .u16x2 s[4];"])
def test_a_declaration_of_no_ptx_type_is_an_error(decl):
    """Was accepted, then a KeyError when the compiler asked its width (fuzz_load_plain,
    replay('load', 1403919745, 1703): `.reg .b1024 %rs<2>`)."""
    with pytest.raises(PtxError, match="no variable is of type"):
        parse(NESTED_LABELS.replace("    bra L;\n    {", "    " + decl + "\n    bra L;\n    {", 1))
