"""Lane strides (compiler/vector/laneshapes.py): which registers a warp's lanes hold as
base + lane * stride in lockstep, and the conditions the checked forms name."""
import pytest

from anycuda.compiler.analysis import uniformity
from anycuda.compiler.vector import laneshapes
from anycuda.ptx import parse

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"

# layernorm's row loop as nvcc writes it: a warp per row, lanes step by 32 channels
ROWS = HEADER + """
.visible .entry rows(.param .u64 x, .param .u32 C) {
    .reg .pred %p<3>; .reg .b32 %r<12>; .reg .b64 %rd<12>; .reg .f32 %f<4>;
    ld.param.u64 %rd1, [x];
    ld.param.u32 %r1, [C];
    mov.u32 %r2, %tid.x;
    and.b32 %r3, %r2, 31;
    shr.u32 %r4, %r2, 5;
    mov.u32 %r5, %ctaid.x;
    mov.u32 %r6, %ntid.x;
    shr.u32 %r7, %r6, 5;
    mad.lo.s32 %r8, %r7, %r5, %r4;
    cvt.s64.s32 %rd2, %r8;
    cvt.s64.s32 %rd3, %r1;
    mul.lo.s64 %rd4, %rd3, %rd2;
    cvt.u64.u32 %rd5, %r3;
    add.s64 %rd6, %rd4, %rd5;
    shl.b64 %rd7, %rd6, 2;
    add.s64 %rd8, %rd1, %rd7;
    mov.u32 %r9, %r3;
    mov.f32 %f1, 0f00000000;
$loop:
    ld.global.f32 %f2, [%rd8];
    add.f32 %f1, %f1, %f2;
    add.s64 %rd8, %rd8, 128;
    add.s32 %r9, %r9, 32;
    setp.lt.s32 %p1, %r9, %r1;
    @%p1 bra $loop;
    mul.wide.u32 %rd9, %r3, 4;
    mul.lo.s32 %r10, %r3, %r1;
    ld.global.f32 %f3, [%rd1];
    @%p1 add.s32 %r11, %r3, 1;
    ret;
}
"""


def _strides(src):
    fn = parse(src).functions[0]
    bits = lambda r: 64 if r.startswith("%rd") else 1 if r.startswith("%p") else 32
    return laneshapes.lane_strides(fn.body, bits, uniformity.constant_registers(fn.body)), fn.body


def test_row_loop_strides():
    s, _ = _strides(ROWS)
    V = laneshapes.VARYING
    want = {"%rd1": 0, "%r1": 0, "%r2": 1, "%r3": 1, "%r4": 0, "%r5": 0, "%r6": 0, "%r7": 0, "%r8": 0,
            "%rd2": 0, "%rd3": 0, "%rd4": 0, "%rd5": 1, "%rd6": 1, "%rd7": 4, "%rd8": 4, "%r9": 1,
            "%f1": V, "%f2": V, "%p1": V, "%rd9": 4, "%r10": V, "%f3": 0, "%r11": V}
    assert s == want


def test_checked_forms():
    s, body = _strides(ROWS)
    by_text = {st.text.split()[0] + " " + st.operands[0].name: st for st in body
               if hasattr(st, "operands") and st.operands and hasattr(st.operands[0], "name")}
    check = lambda key: laneshapes.instruction_stride(by_text[key], s, lambda r: 64 if r.startswith("%rd") else 32,
                                                      {})[1]
    assert check("mov.u32 %r2") == (laneshapes.THREAD_INDEX,)
    assert check("and.b32 %r3")[0::2] == (laneshapes.LOW_BITS, 31)
    assert check("shr.u32 %r4")[0::2] == (laneshapes.LOW_BITS, 31)
    assert check("cvt.u64.u32 %rd5")[0] == laneshapes.EXTEND and check("cvt.u64.u32 %rd5")[2:] == (False, 1)
    assert check("mul.wide.u32 %rd9")[2:] == (False, 1)
    assert check("cvt.s64.s32 %rd2") is None          # (a stride-0 value widens as it is)
    assert check("add.s64 %rd6") is None


@pytest.mark.parametrize("text,stride", [
    ("mul.lo.s32 %r2, %r1, -3;", -3),
    ("mul.wide.u16 %r2, %rs1, -13107;", 52429),       # the immediate as a u16
    ("mul.wide.s16 %r2, %rs1, -13107;", -13107),
    ("shl.b32 %r2, %r1, 3;", 8),
    ("neg.s32 %r2, %r1;", -1),
    ("xor.b32 %r2, %r1, 64;", 1),                      # checked: no lane carries into bit 6
    ("sub.s32 %r2, 5, %r1;", -1),
    ("shr.u32 %r2, %r1, 3;", None),                    # 31 lanes cross a multiple of 8
    ("shl.b32 %r3, %r1, 2;\n    or.b32 %r2, %r3, 3;", 4),       # bits below the stride's: no check
    ("shl.b32 %r3, %r1, 2;\n    xor.b32 %r2, %r3, 2;", 4),
    ("shl.b32 %r3, %r1, 2;\n    and.b32 %r2, %r3, 3;", 0),
    ("shl.b32 %r3, %r1, 2;\n    and.b32 %r2, %r3, -4;", 4),
    ("shl.b32 %r3, %r1, 2;\n    and.b32 %r2, %r3, -2;", 4),
    ("mul.lo.s32 %r3, %r1, -8;\n    or.b32 %r2, %r3, 5;", -8),
    ("shl.b32 %r3, %r1, 2;\n    or.b32 %r2, %r3, 4;", None),    # a bit the lanes step through
    ("or.b32 %r2, %r1, 1;", None),
    ("and.b32 %r2, %r1, 15;", None),
    ("cvt.rn.f32.u32 %f2, %r1;", None),
    ("mul.lo.s32 %r2, %r1, %r1;", None),
])
def test_one_instruction(text, stride):
    src = HEADER + f"""
.visible .entry one() {{
    .reg .b32 %r<4>; .reg .b16 %rs<3>; .reg .f32 %f<3>;
    mov.u32 %r1, %laneid;
    cvt.u16.u32 %rs1, %r1;
    {text}
    ret;
}}"""
    s, _ = _strides(src)
    dst = text.split(";")[-2].split()[1].rstrip(",")       # (the last instruction's)
    assert s[dst] == stride


def test_definitions_that_disagree_or_loop_alone():
    src = HEADER + """
.visible .entry two(.param .u32 n) {
    .reg .pred %p<2>; .reg .b32 %r<6>;
    mov.u32 %r1, %laneid;
    ld.param.u32 %r2, [n];
    setp.eq.s32 %p1, %r2, 0;
    mov.u32 %r3, %r1;
    @%p1 mov.u32 %r3, %r2;
    add.s32 %r4, %r4, 1;
    @%p1 shl.b32 %r5, %r1, 1;
    ret;
}"""
    s, _ = _strides(src)
    assert s["%p1"] == 0                        # a guard alike in every lane keeps strides
    assert s["%r3"] is laneshapes.VARYING       # stride 1 and stride 0 definitions
    assert s["%r4"] is laneshapes.VARYING       # only its own value feeds it
    assert s["%r5"] == 2


@pytest.mark.parametrize("text,stride", [
    ("div.s32 %r3, %r1, %r2;", 0),                     # by a divisor the region tests first
    ("rem.u32 %r3, %r1, %r2;", 1),
    ("div.u32 %r3, %r1, 128;", 0),                     # the least immediate: 4 warps' span
    ("div.u32 %r3, %r1, 127;", None),                  # most warps would pass a multiple
    ("div.s32 %r3, %r1, -4096;", None),
    ("div.u32 %r3, %r1, %r4;", None),                  # a divisor the region does not test
    ("div.u32 %r3, %r4, %r1;", None),                  # a strided divisor
    ("sub.s32 %r4, 0, %r1;\n    div.s32 %r3, %r4, %r2;", None),     # a dividend that falls
])
def test_quotient_forms(text, stride):
    src = HEADER + f"""
.visible .entry one(.param .u32 C) {{
    .reg .b32 %r<6>;
    mov.u32 %r1, %laneid;
    ld.param.u32 %r2, [C];
    mov.u32 %r4, %r2;
    {text}
    ret;
}}"""
    fn = parse(src).functions[0]
    s = laneshapes.lane_strides(fn.body, lambda r: 32, {}, divisors=frozenset({"%r2"}))
    assert s["%r3"] == stride
    if stride is not None:
        st = next(st for st in fn.body if getattr(st, "opcode", None) in ("div", "rem"))
        check = laneshapes.instruction_stride(st, s, lambda r: 32, {}, divisors=frozenset({"%r2"}))[1]
        assert check[0] == laneshapes.QUOTIENT and check[3:] == (st.mods[-1], 1)
