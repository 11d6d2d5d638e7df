"""Each integer/bit helper of anycuda.compiler.ops.bitops, JIT-compiled on its own and compared
with a plain-Python model of the PTX ISA pseudo-code on random and edge-case inputs."""
from __future__ import annotations

import re

import numpy as np
import pytest
import llvmlite.ir as ir

import anycuda as ac
from anycuda.compiler.ops import bitops
from llvm_harness import Kernels

I8, I16, I32, I64 = (ir.IntType(n) for n in (8, 16, 32, 64))
ITYPE = {8: I8, 16: I16, 32: I32, 64: I64}
UDT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
N = 3000
SEED = 20240611

EDGE_POS = [0, 1, 2, 7, 8, 15, 16, 23, 24, 31, 32, 33, 47, 48, 63, 64, 65, 127, 128, 200, 255, 256,
            257, 0x1FF, 0x100 + 31, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFE0]


def sx(v, w):
    v &= (1 << w) - 1
    return v - (1 << w) if v >> (w - 1) else v


def edge_values(w):
    m = (1 << w) - 1
    vals = {0, 1, 2, 3, m, m - 1, 1 << (w - 1), (1 << (w - 1)) - 1, (1 << (w - 1)) + 1, 0x7F, 0x80, 0xFF,
            0x5555555555555555 & m, 0xAAAAAAAAAAAAAAAA & m, 0x0123456789ABCDEF & m, 0xFEDCBA9876543210 & m}
    return sorted(v & m for v in vals)


def operands(rng, w, k, n=N, edges=None):
    """k columns of w-bit unsigned operands: random bits, small numbers and every pair of
    edge values in the first rows."""
    edges = edge_values(w) if edges is None else edges
    cols = [rng.integers(0, 2 ** w, n, dtype=np.uint64) for _ in range(k)]
    for c in cols[: k // 2 + 1]:
        small = rng.random(n) < 0.2
        c[small] = rng.integers(0, 40, small.sum())
    grid = np.array(np.meshgrid(*[np.array(edges, np.uint64)] * min(k, 2))).reshape(min(k, 2), -1)
    m = min(grid.shape[1], n)
    for j in range(min(k, 2)):
        cols[j][:m] = grid[j][:m]
    return [c.astype(UDT[w]) for c in cols]


def positions(rng, n=N):
    p = rng.integers(0, 300, n, dtype=np.uint64)
    p[: n // 4] = rng.integers(0, 2 ** 32, n // 4, dtype=np.uint64)
    p[: len(EDGE_POS)] = EDGE_POS
    return p.astype(np.uint32)


def check(got, want, w, label, *inputs):
    want = np.array([int(x) & ((1 << w) - 1) for x in want], dtype=np.uint64)
    got = got.astype(np.uint64)
    bad = np.nonzero(got != want)[0]
    if len(bad):
        i = bad[0]
        args = ", ".join(hex(int(a[i] if np.ndim(a) else a)) for a in inputs)
        raise AssertionError(f"{label}({args}) = {int(got[i]):#x}, want {int(want[i]):#x} "
                             f"({len(bad)} of {len(got)} differ)")


@pytest.fixture(scope="module")
def K():
    k = Kernels("bitops")
    for w in (8, 16, 32, 64):
        t = ITYPE[w]
        for op in ("shl", "shr_u", "shr_s"):
            k.add(f"shift_{op}_{w}", [t, I32], t, lambda b, a, n, op=op: bitops.shift(b, a, n, op))
        for s in (False, True):
            k.add(f"div_{w}_{s}", [t, t], t, lambda b, x, y, s=s: bitops.int_div(b, x, y, s))
            if w == 32:
                k.add(f"uniform_div_{s}", [t, t], t, lambda b, x, y, s=s: bitops.uniform_quotient(b, x, y, s))
                k.add(f"uniform_rem_{s}", [t, t], t, lambda b, x, y, s=s: bitops.uniform_remainder(b, x, y, s))
            k.add(f"rem_{w}_{s}", [t, t], t, lambda b, x, y, s=s: bitops.int_rem(b, x, y, s))
            k.add(f"mulhi_{w}_{s}", [t, t], t, lambda b, x, y, s=s: bitops.mul_hi(b, x, y, s))
            k.add(f"sad_{w}_{s}", [t, t, t], t, lambda b, x, y, z, s=s: bitops.sad(b, x, y, z, s))
            if w < 64:
                k.add(f"mulwide_{w}_{s}", [t, t], ITYPE[2 * w], lambda b, x, y, s=s: bitops.mul_wide(b, x, y, s))
    for w in (32, 64):
        t = ITYPE[w]
        for s in (False, True):
            k.add(f"bfe_{w}_{s}", [t, I32, I32], t, lambda b, a, p, l, s=s: bitops.bfe(b, a, p, l, s))
            for sh in (False, True):
                k.add(f"bfind_{w}_{s}_{sh}", [t], I32, lambda b, a, s=s, sh=sh: bitops.bfind(b, a, s, sh))
        k.add(f"bfi_{w}", [t, t, I32, I32], t, bitops.bfi)
        k.add(f"brev_{w}", [t], t, bitops.brev)
        k.add(f"popc_{w}", [t], I32, bitops.popc)
        k.add(f"clz_{w}", [t], I32, bitops.clz)
    for mode in (None, "f4e", "b4e", "rc8", "ecl", "ecr", "rc16"):
        k.add(f"prmt_{mode}", [I32, I32, I32], I32, lambda b, x, y, z, m=mode: bitops.prmt(b, x, y, z, m))
    for left in (False, True):
        for clamp in (False, True):
            k.add(f"shf_{left}_{clamp}", [I32, I32, I32], I32,
                  lambda b, x, y, z, l=left, c=clamp: bitops.shf(b, x, y, z, l, c))
    for clamp in (False, True):
        k.add(f"bmsk_{clamp}", [I32, I32], I32, lambda b, x, y, c=clamp: bitops.bmsk(b, x, y, c))
        for s in (False, True):
            k.add(f"szext_{clamp}_{s}", [I32, I32], I32, lambda b, x, y, c=clamp, s=s: bitops.szext(b, x, y, c, s))
    k.add("fns", [I32, I32, I32], I32, bitops.fns)
    for lut in range(256):
        k.add(f"lop3_{lut}", [I32, I32, I32], I32, lambda b, x, y, z, l=lut: bitops.lop3(b, x, y, z, l))
    for s in (False, True):
        for hi in (False, True):
            k.add(f"mul24_{s}_{hi}", [I32, I32], I32, lambda b, x, y, s=s, h=hi: bitops.mul24(b, x, y, s, h))
            k.add(f"mad24_{s}_{hi}", [I32, I32, I32], I32,
                  lambda b, x, y, z, s=s, h=hi: bitops.mad24(b, x, y, z, s, h))
        for t in (False, True):
            k.add(f"dp4a_{s}_{t}", [I32, I32, I32], I32, lambda b, x, y, z, s=s, t=t: bitops.dp4a(b, x, y, z, s, t))
            for hi in (False, True):
                k.add(f"dp2a_{s}_{t}_{hi}", [I32, I32, I32], I32,
                      lambda b, x, y, z, s=s, t=t, h=hi: bitops.dp2a(b, x, y, z, s, t, h))
    return k.build()


@pytest.fixture
def rng():
    return np.random.default_rng(SEED)


# ------------------------------------------------------------------ shifts

@pytest.mark.parametrize("w", [8, 16, 32, 64])
@pytest.mark.parametrize("op", ["shl", "shr_u", "shr_s"])
def test_shift(K, rng, w, op):
    (a,) = operands(rng, w, 1)
    n = positions(rng)
    n[len(EDGE_POS): len(EDGE_POS) + 70] = np.arange(70)
    got = K(f"shift_{op}_{w}", a, n)
    m = (1 << w) - 1

    def ref(x, k):
        x = int(x)
        if op == "shl":
            return (x << k) & m if k < w else 0
        if op == "shr_u":
            return x >> k if k < w else 0
        return sx(x, w) >> min(k, w - 1)
    check(got, [ref(x, int(k)) for x, k in zip(a, n)], w, f"shift.{op}.{w}", a, n)


# ------------------------------------------------------------------ division

@pytest.mark.parametrize("w", [8, 16, 32, 64])
@pytest.mark.parametrize("signed", [False, True])
def test_div_rem(K, rng, w, signed):
    a, d = _division_operands(rng, w)
    q_want, r_want = _quotients_and_remainders(a, d, w, signed)
    check(K(f"div_{w}_{signed}", a, d), q_want, w, "div", a, d)
    check(K(f"rem_{w}_{signed}", a, d), r_want, w, "rem", a, d)


@pytest.mark.parametrize("signed", [False, True])
def test_division_through_a_reciprocal(K, rng, signed):
    """bitops.uniform_quotient and uniform_remainder (a reciprocal made in doubles and made
    exact, then multiplications a lane) give int_div's and int_rem's answers for every pair:
    edges, random bits, small numbers, divisors 0, 1, -1 and 2^32 - 1, the powers of two and
    their neighbours, and random divisors of every size."""
    a, d = _division_operands(rng, 32)
    d[-1000:-400] = rng.integers(0, 2 ** 32, 600, dtype=np.uint64).astype(np.uint32) >> rng.integers(0, 32, 600).astype(np.uint32)
    d[-450:-400] = 1
    edges = [v for k in range(1, 32) for v in (2 ** k - 1, 2 ** k, 2 ** k + 1)]   # (where M d - 2^64 is 0 or nearly d)
    d[-1000 - len(edges):-1000] = edges
    q_want, r_want = _quotients_and_remainders(a, d, 32, signed)
    check(K(f"uniform_div_{signed}", a, d), q_want, 32, "uniform_div", a, d)
    check(K(f"uniform_rem_{signed}", a, d), r_want, 32, "uniform_rem", a, d)


def _division_operands(rng, w):
    a, d = operands(rng, w, 2)
    d[-200:] = 0
    d[-400:-200] = (1 << w) - 1                  # -1
    a[-400:-300] = 1 << (w - 1)                  # INT_MIN / -1
    return a, d


def _quotients_and_remainders(a, d, w, signed):
    """What a GPU answers for a / d and a % d of w-bit lanes."""
    m = (1 << w) - 1
    q_want, r_want = [], []
    for x, y in zip(a, d):
        x, y = int(x), int(y)
        if y == 0:      # NVIDIA GPUs: every bit set, quotient and remainder alike
            q_want.append(m)
            r_want.append(m)
        elif signed:
            xs, ys = sx(x, w), sx(y, w)
            q = abs(xs) // abs(ys) * (1 if (xs < 0) == (ys < 0) else -1)
            q_want.append(q)
            r_want.append(xs - q * ys)
        else:
            q_want.append(x // y)
            r_want.append(x % y)
    return q_want, r_want


# ------------------------------------------------------------------ multiplication

@pytest.mark.parametrize("w", [8, 16, 32, 64])
@pytest.mark.parametrize("signed", [False, True])
def test_mul_hi_wide_sad(K, rng, w, signed):
    a, c, e = operands(rng, w, 3)
    conv = (lambda v: sx(int(v), w)) if signed else int
    prods = [conv(x) * conv(y) for x, y in zip(a, c)]
    check(K(f"mulhi_{w}_{signed}", a, c), [p >> w for p in prods], w, "mul.hi", a, c)
    if w < 64:
        check(K(f"mulwide_{w}_{signed}", a, c), prods, 2 * w, "mul.wide", a, c)
    sad = [int(z) + abs(conv(x) - conv(y)) for x, y, z in zip(a, c, e)]
    check(K(f"sad_{w}_{signed}", a, c, e), sad, w, "sad", a, c, e)


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("hi", [False, True])
def test_mul24_mad24(K, rng, signed, hi):
    a, c, e = operands(rng, 32, 3)
    conv = (lambda v: sx(int(v) & 0xFFFFFF, 24)) if signed else (lambda v: int(v) & 0xFFFFFF)
    prods = [conv(x) * conv(y) for x, y in zip(a, c)]
    want = [(p >> 16) if hi else p for p in prods]
    check(K(f"mul24_{signed}_{hi}", a, c), want, 32, "mul24", a, c)
    check(K(f"mad24_{signed}_{hi}", a, c, e), [v + int(z) for v, z in zip(want, e)], 32, "mad24", a, c, e)


# ------------------------------------------------------------------ bit fields

def bfe_ref(a, pos, ln, signed, w):
    msb = w - 1
    pos, ln = pos & 0xFF, ln & 0xFF
    sbit = (a >> min(pos + ln - 1, msb)) & 1 if signed and ln else 0
    return sum(((a >> (pos + i)) & 1 if i < ln and pos + i <= msb else sbit) << i for i in range(w))


def bfi_ref(a, base, pos, ln, w):
    pos, ln = pos & 0xFF, ln & 0xFF
    i = 0
    while i < ln and pos + i <= w - 1:
        base = base & ~(1 << (pos + i)) | (((a >> i) & 1) << (pos + i))
        i += 1
    return base


@pytest.mark.parametrize("w", [32, 64])
@pytest.mark.parametrize("signed", [False, True])
def test_bfe(K, rng, w, signed):
    (a,) = operands(rng, w, 1, n=1500)
    p, l = positions(rng, 1500), positions(rng, 1500)
    rng.shuffle(l)
    got = K(f"bfe_{w}_{signed}", a, p, l)
    check(got, [bfe_ref(int(x), int(q), int(r), signed, w) for x, q, r in zip(a, p, l)], w, "bfe", a, p, l)


@pytest.mark.parametrize("w", [32, 64])
def test_bfi(K, rng, w):
    a, base = operands(rng, w, 2, n=1500)
    p, l = positions(rng, 1500), positions(rng, 1500)
    rng.shuffle(p)
    got = K(f"bfi_{w}", a, base, p, l)
    check(got, [bfi_ref(int(x), int(y), int(q), int(r), w) for x, y, q, r in zip(a, base, p, l)],
          w, "bfi", a, base, p, l)


# prmt modes: source byte for result bytes 0..3, by the two low bits of the selector
# (the PTX ISA's table lists them b3 first; these are the same rows read from b0)
PRMT_MODES = {
    "f4e": [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
    "b4e": [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]],
    "rc8": [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]],
    "ecl": [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]],
    "ecr": [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]],
    "rc16": [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]],
}


def prmt_ref(a, b, c, mode):
    src = a | (b << 32)
    byte = lambda k: (src >> (8 * k)) & 0xFF
    if mode is None:
        out = 0
        for k in range(4):
            sel = (c >> (4 * k)) & 0xF
            v = byte(sel & 7)
            if sel & 8:
                v = 0xFF if v & 0x80 else 0
            out |= v << (8 * k)
        return out
    return sum(byte(j) << (8 * k) for k, j in enumerate(PRMT_MODES[mode][c & 3]))


@pytest.mark.parametrize("mode", [None, "f4e", "b4e", "rc8", "ecl", "ecr", "rc16"])
def test_prmt(K, rng, mode):
    a, b, c = operands(rng, 32, 3)
    got = K(f"prmt_{mode}", a, b, c)
    check(got, [prmt_ref(int(x), int(y), int(z), mode) for x, y, z in zip(a, b, c)], 32, f"prmt.{mode}", a, b, c)


@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("clamp", [False, True])
def test_shf(K, rng, left, clamp):
    a, b = operands(rng, 32, 2)
    c = positions(rng)
    got = K(f"shf_{left}_{clamp}", a, b, c)

    def ref(x, y, k):
        n = min(k, 32) if clamp else k & 31
        v = (y << 32) | x
        return (v << n) >> 32 if left else v >> n
    check(got, [ref(int(x), int(y), int(k)) for x, y, k in zip(a, b, c)], 32, "shf", a, b, c)


def bmsk_ref(a, b, clamp):
    M = 0xFFFFFFFF
    a1, b1 = a & 31, b & 31
    mask0 = (M << a1) & M
    s = a1 + b1
    mask1 = (M << s) & M if s < 32 else 0
    pos_ovf = wid_ovf = False
    if clamp:
        if a >= 32:
            pos_ovf, mask0 = True, 0
        wid_ovf = b >= 32
    if s >= 32 or pos_ovf or wid_ovf:
        mask1 = 0
    elif b1 == 0:
        mask1 = M
    return mask0 & ~mask1 & M


@pytest.mark.parametrize("clamp", [False, True])
def test_bmsk(K, rng, clamp):
    a, b = positions(rng), positions(rng)
    rng.shuffle(b)
    ea = np.array(EDGE_POS, np.uint32)
    a[:len(ea) ** 2] = np.repeat(ea, len(ea))
    b[:len(ea) ** 2] = np.tile(ea, len(ea))
    got = K(f"bmsk_{clamp}", a, b)
    check(got, [bmsk_ref(int(x), int(y), clamp) for x, y in zip(a, b)], 32, "bmsk", a, b)


def szext_ref(a, b, clamp, signed):
    M = 0xFFFFFFFF
    b1 = b & 31
    too_large = b >= 32 and clamp
    mask = 0 if too_large else (M << b1) & M
    sign_bit = 0 if (b1 == 0 or too_large or not signed) else (a >> ((b1 - 1) & 31)) & 1
    return (a & ~mask & M) | (mask if sign_bit else 0)


@pytest.mark.parametrize("clamp", [False, True])
@pytest.mark.parametrize("signed", [False, True])
def test_szext(K, rng, clamp, signed):
    (a,) = operands(rng, 32, 1)
    n = positions(rng)
    n[len(EDGE_POS): len(EDGE_POS) + 70] = np.arange(70)
    got = K(f"szext_{clamp}_{signed}", a, n)
    check(got, [szext_ref(int(x), int(k), clamp, signed) for x, k in zip(a, n)], 32, "szext", a, n)


def fns_ref(mask, base, offset):
    """The PTX ISA pseudo-code, step by step (a base above 31 scans nothing), except that an
    offset of INT_MIN gives 0, as on an H200 (tests/golden/bits.npz)."""
    d = 0xFFFFFFFF
    if offset == -2 ** 31:
        return 0
    if offset == 0:
        if base < 32 and (mask >> base) & 1:
            d = base
        return d
    pos, count, inc = base, abs(offset) - 1, 1 if offset > 0 else -1
    while 0 <= pos < 32:
        if (mask >> pos) & 1:
            if count == 0:
                return pos
            count -= 1
        pos += inc
    return d


def test_fns(K, rng):
    n = 6000
    (mask,) = operands(rng, 32, 1, n=n)
    sparse = rng.random(n) < 0.4
    mask[sparse] &= rng.integers(0, 2 ** 32, sparse.sum(), dtype=np.uint64).astype(np.uint32)
    base = rng.integers(0, 32, n).astype(np.uint32)
    base[-100:] = rng.integers(32, 2 ** 32, 100, dtype=np.uint64).astype(np.uint32)
    off = rng.integers(-34, 35, n).astype(np.int64)
    off[:200] = rng.choice([0, 1, -1, 32, -32, 33, -33, 2 ** 31 - 1, -2 ** 31], 200)
    # every (base, offset) pair on the ISA's example mask and on all ones
    grid = [(m, bb, o) for m in (0xAAAAAAAA, 0xFFFFFFFF, 0, 1, 0x80000000) for bb in range(32) for o in range(-33, 34)]
    g = np.array(grid, np.int64)
    mask = np.concatenate([mask, g[:, 0].astype(np.uint32)])
    base = np.concatenate([base, g[:, 1].astype(np.uint32)])
    off = np.concatenate([off, g[:, 2]]).astype(np.int32)
    got = K("fns", mask, base, off.view(np.uint32))
    check(got, [fns_ref(int(m), int(bb), int(o)) for m, bb, o in zip(mask, base, off)], 32, "fns", mask, base, off)


def test_lop3_every_table(K, rng):
    a, b, c = operands(rng, 32, 3, n=200)
    for lut in range(256):
        got = K(f"lop3_{lut}", a, b, c)
        want = []
        for x, y, z in zip(a, b, c):
            x, y, z = int(x), int(y), int(z)
            r = 0
            for i in range(32):
                idx = (((x >> i) & 1) << 2) | (((y >> i) & 1) << 1) | ((z >> i) & 1)
                r |= ((lut >> idx) & 1) << i
            want.append(r)
        check(got, want, 32, f"lop3.{lut:#x}", a, b, c)


def test_lop3_is_minimal_for_simple_tables():
    """Trivial truth tables become a single operation (or none)."""
    m = ir.Module()
    fn = ir.Function(m, ir.FunctionType(I32, [I32, I32, I32]), "f")
    cases = {0xF0: 0, 0xCC: 0, 0xAA: 0, 0x00: 0, 0xFF: 0, 0x0F: 1, 0x80: 2, 0xFE: 2, 0x96: 2, 0x3C: 1,
             0xC0: 1, 0xFC: 1}
    for lut, most in cases.items():
        blk = fn.append_basic_block(f"b{lut}")
        b = ir.IRBuilder(blk)
        bitops.lop3(b, *fn.args, lut)
        assert len(blk.instructions) <= most, (hex(lut), [str(i) for i in blk.instructions])


# ------------------------------------------------------------------ counting

@pytest.mark.parametrize("w", [32, 64])
def test_counts(K, rng, w):
    (a,) = operands(rng, w, 1)
    # also every single bit and every single run of sign bits
    ones = np.array([1 << i for i in range(w)] + [((1 << w) - 1) >> i for i in range(w)], np.uint64)
    a[-len(ones):] = ones.astype(UDT[w])
    ints = [int(x) for x in a]
    check(K(f"popc_{w}", a), [bin(x).count("1") for x in ints], 32, "popc", a)
    check(K(f"clz_{w}", a), [w - x.bit_length() for x in ints], 32, "clz", a)
    check(K(f"brev_{w}", a), [int(f"{x:0{w}b}"[::-1], 2) for x in ints], w, "brev", a)
    for signed in (False, True):
        for sh in (False, True):
            want = []
            for x in ints:
                if signed and x >> (w - 1):
                    x = ~x & ((1 << w) - 1)
                d = x.bit_length() - 1 if x else 0xFFFFFFFF
                if sh and d != 0xFFFFFFFF:
                    d = w - 1 - d
                want.append(d)
            check(K(f"bfind_{w}_{signed}_{sh}", a), want, 32, f"bfind.{signed}.{sh}", a)


# ------------------------------------------------------------------ dot products

@pytest.mark.parametrize("a_signed", [False, True])
@pytest.mark.parametrize("b_signed", [False, True])
def test_dp4a_dp2a(K, rng, a_signed, b_signed):
    a, b, c = operands(rng, 32, 3)

    def parts(v, size, signed):
        v = int(v)
        out = [(v >> (size * i)) & ((1 << size) - 1) for i in range(32 // size)]
        return [sx(p, size) for p in out] if signed else out
    want = [int(z) + sum(x * y for x, y in zip(parts(p, 8, a_signed), parts(q, 8, b_signed)))
            for p, q, z in zip(a, b, c)]
    check(K(f"dp4a_{a_signed}_{b_signed}", a, b, c), want, 32, "dp4a", a, b, c)
    for hi in (False, True):
        want = [int(z) + sum(x * y for x, y in zip(parts(p, 16, a_signed), parts(q, 8, b_signed)[2 * hi:]))
                for p, q, z in zip(a, b, c)]
        check(K(f"dp2a_{a_signed}_{b_signed}_{hi}", a, b, c), want, 32, "dp2a", a, b, c)


# ------------------------------------------------------------------ division by a parameter

DIVIDED_BY_PARAMETERS = r"""
// `i / C` and `i % C` by kernel parameters, signed and unsigned (a row and a column of a
// flat index), and by a value each thread has of its own
extern "C" __global__ void flat_index(const int* a, const unsigned* own, int sc, unsigned uc,
                                      int* sq, int* sr, unsigned* uq, unsigned* ur, unsigned* oq, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int x = a[i];
    sq[i] = x / sc;
    sr[i] = x % sc;
    uq[i] = (unsigned)x / uc;
    ur[i] = (unsigned)x % uc;
    oq[i] = (unsigned)x / own[i];
}
"""


def test_a_kernel_dividing_by_its_parameters(compile_cuda, rng, poison, monkeypatch, tmp_path):
    """A kernel's own code divides by a parameter through the reciprocal (made without an
    integer division, which LLVM would not move out of the loop over the threads; then
    products that vectorise over them),
    with a GPU's answers for divisors of every size and sign, 0 included; a thread's own
    divisor still divides thread by thread."""
    from test_compiler_streamstores import _optimised_ir
    k = compile_cuda(DIVIDED_BY_PARAMETERS, name="flatindex.cu").get_function("flat_index")
    n = 3000
    a = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    a[:6] = [-2 ** 31, -2 ** 31 + 1, -1, 0, 1, 2 ** 31 - 1]
    own = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32) >> rng.integers(0, 32, n).astype(np.uint32)
    for sc, uc in [(1, 1), (-1, 2), (0, 0), (7, 7), (-1000, 2 ** 31), (2 ** 31 - 1, 2 ** 32 - 1),
                   (-2 ** 31, 3), *zip(rng.integers(-2 ** 31, 2 ** 31, 4), rng.integers(1, 2 ** 32, 4, dtype=np.uint64))]:
        outs = [poison(n, t) for t in (np.int32, np.int32, np.uint32, np.uint32, np.uint32)]
        k(((n + 255) // 256,), (256,), (ac.asarray(a), ac.asarray(own), np.int32(sc), np.uint32(uc), *outs, np.int32(n)))
        sq, sr = _quotients_and_remainders(a.view(np.uint32), np.full(n, int(sc) % 2 ** 32, np.uint32), 32, True)
        uq, ur = _quotients_and_remainders(a.view(np.uint32), np.full(n, int(uc), np.uint32), 32, False)
        oq, _ = _quotients_and_remainders(a.view(np.uint32), own, 32, False)
        if sc == 0:       # nvcc writes x % c as x - (x / c) * c: x itself for c = 0, where x / 0 is all ones
            sr = [int(x) for x in a]
        if uc == 0:
            ur = [int(x) for x in a.view(np.uint32)]
        for got, want, label in zip(outs, (sq, sr, uq, ur, oq), ("s/", "s%", "u/", "u%", "own/")):
            check(got.get().view(np.uint32), want, 32, f"{label} by {sc}, {uc}", a)
    code = _optimised_ir(monkeypatch, tmp_path, DIVIDED_BY_PARAMETERS)
    assert "fdiv double 0x43F0000000000000" in code and "udiv i64 -1," not in code   # the reciprocal
    assert re.search(r"= mul nuw[a-z ]* <\d+ x i64>", code)      # its products, over the block's threads
