"""set and setp on half-precision sources, hand-written in PTX: every compare operator on
f16/bf16 scalars and on packed f16x2/bf16x2 pairs (each lane compared on its own), with
BoolOp and .ftz, against a Python model of the PTX ISA's definition."""
from __future__ import annotations

import numpy as np
import pytest

from test_compiler_ptx import launch

ORDERED = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}
CMPS = list(ORDERED) + [c + "u" for c in ORDERED] + ["num", "nan"]

def _widen(x):
    with np.errstate(invalid="ignore"):        # signalling NaNs stay NaN
        return x.astype(np.float64)


def _f16(bits):
    return _widen((bits & 0xFFFF).astype(np.uint16).view(np.float16))


def _bf16(bits):
    return _widen(((bits & 0xFFFF).astype(np.uint32) << 16).view(np.float32))


def _f32(bits):
    return _widen(bits.view(np.float32))


def _ftz16(x):
    return np.where(np.abs(x) < 2.0 ** -14, 0.0, x)


def cmp_ref(cmp, x, y):
    nan = np.isnan(x) | np.isnan(y)
    if cmp == "num":
        return ~nan
    if cmp == "nan":
        return nan
    with np.errstate(invalid="ignore"):
        if cmp.endswith("u") and cmp[:-1] in ORDERED:
            return ORDERED[cmp[:-1]](x, y) | nan
        return ORDERED[cmp](x, y) & ~nan


def lanes(bits, kind):
    conv = _f16 if kind == "f16" else _bf16
    return conv(bits), conv(bits >> 16)


# one output column per form: (PTX computing a u32 %r9 from a = %r1, b = %r2, their halves
# %h1..%h4 and the predicate c = %p1; model(cmp, a, b, c) on the uint32 operands)
FORMS = [
    ("set.{c}.f16x2.f16x2 %r9, %r1, %r2;",
     lambda c, a, b, p: _pack(c, a, b, "f16", 0x3C00)),
    ("set.{c}.u32.f16x2 %r9, %r1, %r2;",
     lambda c, a, b, p: _pack(c, a, b, "f16", 0xFFFF)),
    ("set.{c}.bf16x2.bf16x2 %r9, %r1, %r2;",
     lambda c, a, b, p: _pack(c, a, b, "bf16", 0x3F80)),
    ("set.{c}.s32.bf16x2 %r9, %r1, %r2;",
     lambda c, a, b, p: _pack(c, a, b, "bf16", 0xFFFF)),
    ("set.{c}.and.f16x2.f16x2 %r9, %r1, %r2, %p1;",
     lambda c, a, b, p: _pack(c, a, b, "f16", 0x3C00, lambda t: t & p)),
    ("set.{c}.ftz.f16x2.f16x2 %r9, %r1, %r2;",
     lambda c, a, b, p: _pack(c, a, b, "f16", 0x3C00, ftz=True)),
    ("setp.{c}.f16x2 %p2|%p3, %r1, %r2; selp.u32 %r9, 1, 0, %p2; selp.u32 %r8, 2, 0, %p3; or.b32 %r9, %r9, %r8;",
     lambda c, a, b, p: _pack(c, a, b, "f16", 1, lane_shift=1)),
    ("setp.{c}.xor.bf16x2 %p2|%p3, %r1, %r2, !%p1; selp.u32 %r9, 1, 0, %p2; selp.u32 %r8, 2, 0, %p3; "
     "or.b32 %r9, %r9, %r8;",
     lambda c, a, b, p: _pack(c, a, b, "bf16", 1, lambda t: t ^ ~p, lane_shift=1)),
    ("setp.{c}.ftz.f16x2 %p2|%p3, %r1, %r2; selp.u32 %r9, 1, 0, %p2; selp.u32 %r8, 2, 0, %p3; or.b32 %r9, %r9, %r8;",
     lambda c, a, b, p: _pack(c, a, b, "f16", 1, ftz=True, lane_shift=1)),
    ("set.{c}.f16.f16 %h5, %h1, %h3; cvt.u32.u16 %r9, %h5;",
     lambda c, a, b, p: np.where(cmp_ref(c, _f16(a), _f16(b)), 0x3C00, 0)),
    ("set.{c}.or.u16.f16 %h5, %h2, %h4, %p1; cvt.u32.u16 %r9, %h5;",
     lambda c, a, b, p: np.where(cmp_ref(c, _f16(a >> 16), _f16(b >> 16)) | p, 0xFFFF, 0)),
    ("set.{c}.u32.bf16 %r9, %h1, %h3;",
     lambda c, a, b, p: np.where(cmp_ref(c, _bf16(a), _bf16(b)), 0xFFFFFFFF, 0)),
    ("set.{c}.bf16.f32 %h5, %r1, %r2; cvt.u32.u16 %r9, %h5;",
     lambda c, a, b, p: np.where(cmp_ref(c, _f32(a), _f32(b)), 0x3F80, 0)),
    ("set.{c}.f32.f32 %r9, %r1, %r2;",
     lambda c, a, b, p: np.where(cmp_ref(c, _f32(a), _f32(b)), 0x3F800000, 0)),
    ("setp.{c}.ftz.f16 %p2|%p3, %h1, %h3; selp.u32 %r9, 1, 0, %p2; selp.u32 %r8, 2, 0, %p3; or.b32 %r9, %r9, %r8;",
     lambda c, a, b, p: np.where(cmp_ref(c, _ftz16(_f16(a)), _ftz16(_f16(b))), 1, 2)),
]


def _pack(cmp, a, b, kind, one, bop=None, ftz=False, lane_shift=16):
    out = np.zeros(len(a), np.uint64)
    for i, (x, y) in enumerate(zip(lanes(a, kind), lanes(b, kind))):
        if ftz:
            x, y = _ftz16(x), _ftz16(y)
        t = cmp_ref(cmp, x, y)
        if bop is not None:
            t = bop(t)
        out |= np.where(t, one << (lane_shift * i), 0).astype(np.uint64)
    return out


def kernel(cmp):
    body = "\n  ".join(
        f"{form.format(c=cmp)} st.global.u32 [%rd4+{4 * j}], %r9;" for j, (form, _) in enumerate(FORMS))
    return f"""
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pout)
{{
  .reg .b32 %r<10>; .reg .b16 %h<6>; .reg .b64 %rd<6>; .reg .pred %p<4>;
  mov.u32 %r3, %tid.x; mov.u32 %r4, %ctaid.x; mov.u32 %r5, %ntid.x; mad.lo.s32 %r3, %r4, %r5, %r3;
  mul.wide.u32 %rd1, %r3, 4;
  ld.param.u64 %rd2, [pa]; add.s64 %rd2, %rd2, %rd1; ld.global.u32 %r1, [%rd2];
  ld.param.u64 %rd2, [pb]; add.s64 %rd2, %rd2, %rd1; ld.global.u32 %r2, [%rd2];
  ld.param.u64 %rd2, [pc]; add.s64 %rd2, %rd2, %rd1; ld.global.u32 %r6, [%rd2];
  setp.ne.u32 %p1, %r6, 0;
  mov.b32 {{%h1, %h2}}, %r1; mov.b32 {{%h3, %h4}}, %r2;
  mul.wide.u32 %rd1, %r3, {4 * len(FORMS)};
  ld.param.u64 %rd4, [pout]; add.s64 %rd4, %rd4, %rd1;
  {body}
  ret;
}}"""


# half and bf16 bit patterns worth comparing: zeros, infinities, NaNs, subnormals, ones
SPECIAL16 = [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00,
             0x7F80, 0xFF80, 0x7FC0, 0x3F80, 0xBF80, 0x007F, 0x0080]


def operands(rng, n):
    a = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    sp = np.array(SPECIAL16, np.uint32)
    k = len(sp)
    lo_a, lo_b = np.repeat(sp, k), np.tile(sp, k)
    a[:k * k] = lo_a | (lo_b << 16)                  # every pair, in both lanes, both ways round
    b[:k * k] = lo_b | (lo_a << 16)
    same = rng.random(n) < 0.2                       # equal lanes
    b[same] = a[same]
    mixed = rng.random(n) < 0.2                      # one lane equal, the other not
    b[mixed] = (b[mixed] & 0xFFFF0000) | (a[mixed] & 0xFFFF)
    near = rng.random(n) < 0.2                       # neighbouring values
    b[near] = a[near] + rng.integers(-1, 2, near.sum()).astype(np.uint32)
    return a, b


@pytest.mark.parametrize("cmp", CMPS)
def test_half_compares(rng, cmp):
    n = 1024
    a, b = operands(rng, n)
    c = (rng.random(n) < 0.5).astype(np.uint32)
    out = np.full((n, len(FORMS)), 0xDEADBEEF, np.uint32)
    launch(kernel(cmp), "k", (n // 128, 1, 1), (128, 1, 1), a, b, c, out)
    p = c.astype(bool)
    for j, (form, model) in enumerate(FORMS):
        want = np.asarray(model(cmp, a, b, p)).astype(np.uint64) & 0xFFFFFFFF
        bad = np.nonzero(out[:, j] != want)[0]
        assert not len(bad), (f"{form.format(c=cmp)}: rows {bad[:4]}: a={[hex(int(v)) for v in a[bad[:4]]]}, "
                              f"b={[hex(int(v)) for v in b[bad[:4]]]}, c={c[bad[:4]]}: "
                              f"got {[hex(int(v)) for v in out[bad[:4], j]]}, want {[hex(int(v)) for v in want[bad[:4]]]}")
