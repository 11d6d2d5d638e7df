"""Kernels specialised to their launches' index parameters (runtime/specialisation.py,
compiler/analysis/indexparams.py, compiler/constantprop.py): which parameters are chosen, the
constants folded with PTX's semantics, and a CuPy-style broadcast kernel (shape and strides
in struct parameters) run by its own code and by its variants, against numpy, on fresh
random arrays with poisoned outputs."""
import struct
import time

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler import constantprop
from anycuda.compiler.analysis.indexparams import index_parameters
from anycuda.compiler.build import tiers
from anycuda.cudac import compile_to_ptx
from anycuda.ptx import ir as pir
from anycuda.ptx import parse
from anycuda.runtime import specialisation
from anycuda.runtime.program import load_program

# CuPy's CArray and CIndexer as its elementwise kernels take them: a pointer, a size, a shape
# and byte strides; the index split by shape[1] (by a mask and a shift where it is a power of
# two, as CuPy's CIndexer does), each operand's address from the strides
SOURCE = r"""
struct Arr { char* p; long long size; long long shape[2]; long long strides[2]; };
struct Ix { long long size; long long shape[2]; };
extern "C" __global__ void broadcast_mul(Arr a, Arr b, Arr out, Ix ix) {
    unsigned c = (unsigned)ix.shape[1];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < ix.size;
         i += (long long)blockDim.x * gridDim.x) {
        unsigned k = (unsigned)i, q, r;
        if ((c & (c - 1)) == 0) { r = k & (c - 1); q = k >> __popc(c - 1); }
        else { q = k / c; r = k - q * c; }
        float x = *(const float*)(a.p + (q * a.strides[0] + r * a.strides[1]));
        float y = *(const float*)(b.p + (q * b.strides[0] + r * b.strides[1]));
        *(float*)(out.p + (q * out.strides[0] + r * out.strides[1])) = x * y;
    }
}
"""
NAME = "broadcast_mul"


@pytest.fixture(autouse=True)
def at_once(monkeypatch):
    """Variants however short the launches (this file's take a millisecond or so)."""
    monkeypatch.setattr(specialisation, "SPECIALISE_AFTER_SECONDS", 0.0)


@pytest.fixture(scope="module")
def ptx():
    return compile_to_ptx(SOURCE, name="specialise.cu")


def _kernel(ptx):
    return load_program(ptx, "specialise.ptx").kernel(NAME)


def _arr(ptr, size, shape, strides):
    return struct.pack("<Qqqqqq", ptr, size, *shape, *strides)


def _launch_case(k, rng, R, C, how):
    """One launch of out = a * b over (R, C): `how` picks a's layout (a column broadcast
    along rows, a full array, a transposed view, rows in reverse); b is a row broadcast."""
    a_host = rng.standard_normal((R, C) if how != "column" else (R,)).astype(np.float32)
    b_host = rng.standard_normal(C).astype(np.float32)
    if how == "column":
        a, a_strides, a_view = ac.asarray(a_host), (4, 0), a_host[:, None]
        a_ptr = a.data.ptr
    elif how == "full":
        a, a_strides, a_view = ac.asarray(a_host), (4 * C, 4), a_host
        a_ptr = a.data.ptr
    elif how == "transposed":
        t = np.ascontiguousarray(a_host.T)               # (C, R) in memory, read as its transpose
        a, a_strides, a_view = ac.asarray(t), (4, 4 * R), a_host
        a_ptr = a.data.ptr
    else:                                                # rows in reverse: the last row first
        a, a_strides, a_view = ac.asarray(a_host), (-4 * C, 4), a_host[::-1]
        a_ptr = a.data.ptr + 4 * C * (R - 1)
    b = ac.asarray(b_host)
    out = ac.asarray(np.full(R * C, np.nan, np.float32))
    params = (_arr(a_ptr, R * C, (R, C), a_strides) + _arr(b.data.ptr, C, (R, C), (0, 4))
              + _arr(out.data.ptr, R * C, (R, C), (4 * C, 4)) + struct.pack("<qqq", R * C, R, C))
    k.launch(((R * C + 127) // 128, 1, 1), (128, 1, 1), params + bytes(k.param_size - len(params)))
    ac.synchronize()
    np.testing.assert_array_equal(out.get().reshape(R, C), a_view * b_host[None, :])
    return a, b, out


def test_the_index_parameters_are_the_shape_and_strides(ptx):
    """shape[1] (divisor, mask) and the six strides (multipliers); not the pointers, the
    arrays' sizes or shape[0]. (The loop's bound, ix.size, is one here: nvcc divides by it
    to count the loop's turns.)"""
    kernel = next(f for f in parse(ptx, "s.ptx").functions if f.name == NAME)
    got = {(p.name.rsplit("_", 1)[1], p.offset) for p in index_parameters(kernel.body)}
    assert got - {("3", 0)} == {("3", 16), ("0", 32), ("0", 40), ("1", 32), ("1", 40), ("2", 32), ("2", 40)}


@pytest.mark.parametrize("R,C", [(300, 1000), (129, 256), (64, 37)])
def test_launches_run_a_variant_once_their_values_recur(ptx, rng, R, C):
    """The first SPECIALISE_AFTER - 1 launches with one set of values run the kernel's own
    code, the next (optimised: compiled at that launch) and later ones its variant; each
    launch's output against numpy. C = 256 takes CuPy's power-of-two path."""
    k = _kernel(ptx)
    for n in range(specialisation.SPECIALISE_AFTER + 1):
        _launch_case(k, rng, R, C, "column")
        assert k._variants.made() == (1 if n + 1 >= specialisation.SPECIALISE_AFTER else 0)


def test_other_values_run_other_variants_and_every_one_stays_right(ptx, rng):
    """Layouts with other strides (full, transposed, reversed rows) each get a variant of
    their own; past MOST_VARIANTS the kernel's own code runs them; every launch right."""
    k = _kernel(ptx)
    layouts = ["column", "full", "transposed", "reversed", "column"]
    shapes = [(40, 100), (40, 100), (40, 100), (40, 100), (50, 64)]
    for (R, C), how in zip(shapes, layouts):
        for _ in range(specialisation.SPECIALISE_AFTER + 1):
            _launch_case(k, rng, R, C, how)
    assert k._variants.made() == specialisation.MOST_VARIANTS
    for (R, C), how in zip(shapes, layouts):          # and again, variants and own code alike
        _launch_case(k, rng, R, C, how)


def test_tiered_the_compile_server_makes_the_variant(ptx, rng, monkeypatch, fresh_cache):
    """Tiered (the default), the launches go on with the kernel's own code until the compile
    server's variant arrives; then they run it, as right. (A server of its own: one that
    earlier tests of this process queued long jobs on would make it wait behind them.)"""
    monkeypatch.setenv("ANYCUDA_JIT", "tiered")
    monkeypatch.setattr(tiers, "_the_server", [])
    k = _kernel(ptx)
    deadline = time.monotonic() + 300
    while getattr(k._variants, "made", lambda: 0)() == 0:
        _launch_case(k, rng, 40, 100, "column")
        assert None not in k._variants._entries.values(), "the compile server's variant failed"
        assert time.monotonic() < deadline, "the variant never arrived"
        time.sleep(0.05)
    _launch_case(k, rng, 40, 100, "column")


def test_short_launches_keep_the_kernels_own_code(ptx, rng, monkeypatch):
    """Launches that ran less than SPECIALISE_AFTER_SECONDS together ask for no variant."""
    monkeypatch.setattr(specialisation, "SPECIALISE_AFTER_SECONDS", 3600.0)
    k = _kernel(ptx)
    for _ in range(specialisation.SPECIALISE_AFTER + 2):
        _launch_case(k, rng, 20, 30, "full")
    assert k._variants.made() == 0


def test_switched_off(ptx, rng, monkeypatch):
    monkeypatch.setenv("ANYCUDA_SPECIALISE", "0")
    k = _kernel(ptx)
    for _ in range(specialisation.SPECIALISE_AFTER + 1):
        _launch_case(k, rng, 33, 100, "full")
    assert k._variants is None


def _body(text):
    ptx = (".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"
           ".reg .b32 %r<40>;\n.reg .b64 %rd<20>;\n" + text + "\nret;\n}\n")
    return parse(ptx, "k.ptx").functions[0].body


def _movs(body):
    return {st.operands[0].name: st.operands[1].value for st in body if isinstance(st, pir.Instruction)
            and st.opcode == "mov" and isinstance(st.operands[1], pir.Imm)}


def test_constants_fold_with_ptx_semantics():
    """Each folded value against its 32/64-bit arithmetic worked out by numpy's fixed-width
    integers (wrap-around, shifts past the width, sign extension and truncation)."""
    body = constantprop.propagate(_body("""
        mov.u32 %r1, 1000;
        add.s32 %r2, %r1, -1;
        and.b32 %r3, %r2, %r1;
        popc.b32 %r4, %r2;
        mul.lo.s32 %r5, %r1, 5000000;
        shl.b32 %r6, %r1, 33;
        mov.u32 %r7, -8;
        shr.s32 %r8, %r7, 40;
        shr.u32 %r9, %r7, 1;
        cvt.s64.s32 %rd1, %r7;
        cvt.u64.u32 %rd2, %r7;
        cvt.u32.u64 %r10, %rd1;
        sub.s64 %rd3, %rd2, %rd1;
        min.s32 %r12, %r7, %r1;
        max.u32 %r13, %r7, %r1;
        neg.s32 %r14, %r1;
        not.b32 %r15, %r1;
        xor.b32 %r16, %r1, 255;
        or.b32 %r17, %r1, 7;"""))
    got = _movs(body)
    i32, u32 = np.int32, np.uint32
    with np.errstate(over="ignore"):
        want = {"%r2": 999, "%r3": 999 & 1000, "%r4": bin(999).count("1"), "%r5": int(i32(1000) * i32(5000000)),
                "%r6": 0, "%r8": -1, "%r9": int(u32(0xFFFFFFF8) >> u32(1)), "%rd1": -8,
                "%rd2": 0xFFFFFFF8, "%r10": 0xFFFFFFF8,
                "%rd3": 0xFFFFFFF8 + 8, "%r12": -8, "%r13": 0xFFFFFFF8, "%r14": -1000,
                "%r15": int(~u32(1000)), "%r16": 1000 ^ 255, "%r17": 1000 | 7}
    for r, v in want.items():
        bits = 64 if r.startswith("%rd") else 32
        assert got[r] % (1 << bits) == v % (1 << bits), (r, got[r], v)


def test_constants_reach_the_instructions_that_read_them():
    """A divisor and a stride as immediates (the stride moved to the second operand), a
    register written twice left alone, a guarded instruction given the immediate but not
    folded."""
    text = """
        mov.u32 %r1, %tid.x;
        mov.u64 %rd1, 4000;
        mov.u32 %r2, 1000;
        div.u32 %r3, %r1, %r2;
        cvt.u64.u32 %rd2, %r3;
        mul.lo.s64 %rd3, %rd1, %rd2;
        mov.u32 %r4, 5;
        mov.u32 %r4, 6;
        add.s32 %r5, %r1, %r4;
        @%p1 add.s32 %r6, %r2, 1;
        mad.wide.u32 %rd5, %r1, %r2, %rd1;"""
    ptx = (".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"
           ".reg .b32 %r<40>;\n.reg .b64 %rd<20>;\n.reg .pred %p<4>;\n" + text + "\nret;\n}\n")
    body = constantprop.propagate(parse(ptx, "k.ptx").functions[0].body)
    by_dest = {st.operands[0].name: st for st in body if isinstance(st, pir.Instruction) and st.operands
               and isinstance(st.operands[0], pir.Reg)}
    assert by_dest["%r3"].operands[2] == pir.Imm(1000)
    assert by_dest["%rd3"].operands[1:] == (pir.Reg("%rd2"), pir.Imm(4000))
    assert by_dest["%r5"].operands[2] == pir.Reg("%r4")          # written twice: not a constant
    assert by_dest["%r6"].opcode == "add" and by_dest["%r6"].operands[1] == pir.Imm(1000)
    assert by_dest["%rd5"].operands[1:] == (pir.Reg("%r1"), pir.Imm(1000), pir.Reg("%rd1"))   # (a 64-bit addend)


def test_parameters_become_constants():
    """with_parameters makes the named parameter slots' loads constants, sign as the load's
    type reads them, and leaves the others loads, and a load wider than the bytes given."""
    ptx = (".version 8.0\n.target sm_80\n.address_size 64\n"
           ".visible .entry k(.param .align 8 .b8 k_param_0[16], .param .u64 k_param_1)\n{\n"
           ".reg .b32 %r<9>;\n.reg .b64 %rd<9>;\n"
           "ld.param.u64 %rd1, [k_param_0+8];\nld.param.s32 %r1, [k_param_0];\nld.param.u64 %rd2, [k_param_1];\n"
           "ld.param.u64 %rd4, [k_param_0];\nmul.lo.s64 %rd3, %rd1, %rd2;\nret;\n}\n")
    body = constantprop.with_parameters(parse(ptx, "k.ptx").functions[0].body,
                                        {("k_param_0", 8): (2 ** 64 - 4, 8), ("k_param_0", 0): (0xFFFFFFFF, 4)})
    got = _movs(body)
    assert got["%r1"] == -1 and got["%rd1"] % 2 ** 64 == 2 ** 64 - 4
    loads = [st.operands[0] for st in body if isinstance(st, pir.Instruction) and st.opcode == "ld"]
    assert loads == [pir.Reg("%rd2"), pir.Reg("%rd4")]
