"""Runs of consecutive warp matrix instructions lowered as one collective (compiler/ops/matrixruns.py):
which runs the body gets, and that a run computes what its instructions one by one do, results of
earlier members forwarded to later ones, with every lane of the warp (the whole-warp moves of
compiler/ops/fragmentmoves.py) and with half of it (the lane-by-lane moves)."""
from __future__ import annotations

import numpy as np
import pytest

from anycuda.compiler.analysis.suspensions import MATRIX_RUN
from anycuda.compiler.ops import matrixruns
from anycuda.ptx import parse
from conformance import ptx_launcher
from test_mma import _isa, from_fragments, sequential, to_fragments

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"
launch = ptx_launcher(HEADER, "runs.ptx")

MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"

# One warp: A (16 x 16, row-major) and B transposed (8 x 16) through shared memory, A by
# ldmatrix.x4 and B by ldmatrix.x2 as mma's fragments, then D = A B + 0 and D = A B + D: four
# matrix instructions in a row, the second mma reading the first one's D. Lanes from `LEAVE` on
# exit before them.
KERNEL = """
.visible .entry k(.param .u64 pa, .param .u64 pbt, .param .u64 pd)
{
.reg .b32 %a<4>; .reg .b32 %b<2>; .reg .f32 %d<4>; .reg .f32 %e<4>;
.reg .b32 %r<12>; .reg .b64 %rd<8>; .reg .pred %p;
.shared .align 16 .b8 sa[512];
.shared .align 16 .b8 sb[256];
mov.u32 %r1, %tid.x;
ld.param.u64 %rd1, [pa]; ld.param.u64 %rd2, [pbt]; ld.param.u64 %rd3, [pd];
mul.wide.u32 %rd4, %r1, 16; add.u64 %rd5, %rd1, %rd4; ld.global.v4.u32 {%r4, %r5, %r6, %r7}, [%rd5];
mov.u32 %r2, sa; mul.lo.u32 %r3, %r1, 16; add.u32 %r3, %r2, %r3; st.shared.v4.u32 [%r3], {%r4, %r5, %r6, %r7};
mul.wide.u32 %rd4, %r1, 8; add.u64 %rd5, %rd2, %rd4; ld.global.v2.u32 {%r4, %r5}, [%rd5];
mov.u32 %r2, sb; mul.lo.u32 %r3, %r1, 8; add.u32 %r3, %r2, %r3; st.shared.v2.u32 [%r3], {%r4, %r5};
bar.sync 0;
setp.ge.u32 %p, %r1, LEAVE;
@%p exit;
and.b32 %r4, %r1, 15; shr.u32 %r5, %r1, 4; mul.lo.u32 %r4, %r4, 32; mul.lo.u32 %r5, %r5, 16;
add.u32 %r4, %r4, %r5; mov.u32 %r2, sa; add.u32 %r8, %r2, %r4;
and.b32 %r4, %r1, 7; shr.u32 %r5, %r1, 3; and.b32 %r5, %r5, 1; mul.lo.u32 %r4, %r4, 32; mul.lo.u32 %r5, %r5, 16;
add.u32 %r4, %r4, %r5; mov.u32 %r2, sb; add.u32 %r9, %r2, %r4;
mov.f32 %e0, 0f00000000; mov.f32 %e1, 0f00000000; mov.f32 %e2, 0f00000000; mov.f32 %e3, 0f00000000;
ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%a0, %a1, %a2, %a3}, [%r8];
ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%b0, %b1}, [%r9];
MMA {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%e0, %e1, %e2, %e3};
MMA {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%d0, %d1, %d2, %d3};
mul.wide.u32 %rd4, %r1, 16; add.u64 %rd5, %rd3, %rd4; st.global.v4.f32 [%rd5], {%d0, %d1, %d2, %d3};
ret;
}
""".replace("MMA", MMA)


def _body(text):
    return parse(HEADER + text, "runs.ptx").functions[0].body


def _runs(text):
    body, members = matrixruns.grouped(_body(text))
    return [[m.opcode for m in members[id(st)]] for st in body if getattr(st, "opcode", None) == MATRIX_RUN]


def test_consecutive_matrix_instructions_become_one_run():
    assert _runs(KERNEL.replace("LEAVE", "32")) == [["ldmatrix", "ldmatrix", "mma", "mma"]]


def test_a_run_stops_before_an_address_an_earlier_member_writes_and_at_other_statements():
    text = KERNEL.replace("LEAVE", "32").replace(
        "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%b0, %b1}, [%r9];",
        "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%b0, %r9}, [%r9];\n"
        "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%b0, %b1}, [%r9];")
    assert _runs(text) == [["ldmatrix", "ldmatrix"], ["ldmatrix", "mma", "mma"]]
    guarded = KERNEL.replace("LEAVE", "32").replace(f"{MMA} {{%d0, %d1, %d2, %d3}}, {{%a0, %a1, %a2, %a3}}, "
                                                    "{%b0, %b1}, {%d0", f"@%p {MMA} {{%d0, %d1, %d2, %d3}}, "
                                                    "{%a0, %a1, %a2, %a3}, {%b0, %b1}, {%d0")
    assert _runs(guarded) == [["ldmatrix", "ldmatrix", "mma"]]


def _expected(A, B, lanes):
    """D fragments [32 x 4] of the kernel when lanes >= `lanes` have left: their rows of the
    ldmatrix tiles and their fragment elements count as zeros (compiler/ops/matrix.py)."""
    la, lb, lc = _isa("m16n8k16", "a", "16"), _isa("m16n8k16", "b", "16"), _isa("m16n8k16", "c", "f32")
    A, B = A.copy(), B.copy()
    if lanes < 32:
        A[:, 8:] = 0           # matrices 2 and 3 of the x4 load (columns 8-15): rows from lanes 16-31
    fa, fb = to_fragments(A, la), to_fragments(B, lb)
    fa[lanes:], fb[lanes:] = 0, 0
    A, B = from_fragments(fa, la), from_fragments(fb, lb)
    d1 = to_fragments(sequential(A, B, np.zeros((16, 8), np.float32)), lc)
    d1[lanes:] = 0             # a lane that left gives zeros as the second product's C too
    return to_fragments(sequential(A, B, from_fragments(d1, lc)), lc)


@pytest.mark.parametrize("lanes", [32, 16])
def test_a_run_computes_its_instructions_in_order(rng, lanes):
    A = rng.standard_normal((16, 16)).astype(np.float16)
    B = rng.standard_normal((16, 8)).astype(np.float16)
    d = np.full((32, 4), np.nan, np.float32)
    launch(KERNEL.replace("LEAVE", str(lanes)), "k", (1, 1, 1), (32, 1, 1), A, np.ascontiguousarray(B.T), d)
    want = _expected(A, B, lanes)
    assert np.array_equal(d[:lanes], want[:lanes])
    assert np.isnan(d[lanes:]).all()
