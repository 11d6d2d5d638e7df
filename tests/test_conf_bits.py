"""Bit manipulation against plain-Python models of the PTX ISA definitions."""
import numpy as np

import anycuda as ac
from conformance import load_cuda, poison

M32 = 0xFFFFFFFF


def _bit(v, i):
    return (v >> i) & 1


def bfe(a, pos, ln, signed):
    pos, ln = pos & 0xFF, ln & 0xFF
    sbit = _bit(a, min(pos + ln - 1, 31)) if signed and ln else 0
    return sum((_bit(a, pos + i) if i < ln and pos + i <= 31 else sbit) << i for i in range(32))


def bfi(a, b, pos, ln):
    pos, ln = pos & 0xFF, ln & 0xFF
    f = b
    for i in range(ln):
        if pos + i > 31:
            break
        f = f & ~(1 << (pos + i)) | (_bit(a, i) << (pos + i))
    return f & M32


def bfind(a, signed):
    if signed and a >> 31:
        a = ~a & M32
    return a.bit_length() - 1 if a else M32


def byte_perm(x, y, s):
    src = x | (y << 32)
    return sum(((src >> (8 * ((s >> (4 * k)) & 7))) & 0xFF) << (8 * k) for k in range(4))


def funnel(lo, hi, s, left, clamp):
    n = min(s, 32) if clamp else s & 31
    v = (hi << 32) | lo
    return ((v << n) >> 32) & M32 if left else (v >> n) & M32


def lop3(a, b, c, lut):
    return sum(((lut >> ((_bit(a, i) << 2) | (_bit(b, i) << 1) | _bit(c, i))) & 1) << i for i in range(32))


def brev(v, w):
    return int(format(v, f"0{w}b")[::-1], 2)


def test_bit_operations(rng):
    n = 1024
    a = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    c = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    c[:n // 2] &= 0x3F3F          # small positions/lengths are the interesting ones
    w = rng.integers(0, 2 ** 64, n, dtype=np.uint64)
    a[:3] = [0, 1, 0x80000000]
    w[:2] = [0, 1 << 63]
    out = poison((n, 20), np.uint32)
    load_cuda("bits").get_function("bit_ops")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), ac.asarray(w), out, np.int32(n)))
    g = out.get()
    for i in range(n):
        x, y, s, v = int(a[i]), int(b[i]), int(c[i]), int(w[i])
        want = [bin(x).count("1"), 32 - x.bit_length(), (x & -x).bit_length(), brev(x, 32),
                byte_perm(x, y, s & 0x7777), funnel(x, y, s, True, False), funnel(x, y, s, False, False),
                funnel(x, y, s, True, True), funnel(x, y, s, False, True),
                bin(v).count("1"), 64 - v.bit_length(), (v & -v).bit_length(), (brev(v, 64) >> 17) & M32,
                bfe(x, s & 0xFF, (s >> 8) & 0xFF, False), bfe(x, s & 0xFF, (s >> 8) & 0xFF, True),
                bfi(x, y, s & 0xFF, (s >> 8) & 0xFF), bfind(x, False), bfind(x, True),
                31 - bfind(x, False) if x else M32, x ^ y ^ s]
        assert [int(v) for v in g[i]] == want, f"row {i}: {[int(v) for v in g[i]]} != {want}"


def test_lop3_truth_tables(rng):
    n = 256
    a, b, c = (rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    out = poison((n, 8), np.uint32)
    load_cuda("bits").get_function("lop3_table")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
    g = out.get()
    for i in range(0, n, 7):
        for k, lut in enumerate((0x00, 0xFF, 0xE8, 0x80, 0x1E, 0xCA, 0x6A, 0x5B)):
            assert int(g[i, k]) == lop3(int(a[i]), int(b[i]), int(c[i]), lut)


def test_dot_products_and_sad(rng):
    n = 512
    a, b, c = (rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32) for _ in range(3))
    out = poison((n, 5), np.int32)
    load_cuda("bits").get_function("dot_products")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
    g = out.get().astype(np.int64)
    A, B = a.view(np.int8).reshape(n, 4).astype(np.int64), b.view(np.int8).reshape(n, 4).astype(np.int64)
    Au, Bu = a.view(np.uint8).reshape(n, 4).astype(np.int64), b.view(np.uint8).reshape(n, 4).astype(np.int64)
    A16 = a.view(np.int16).reshape(n, 2).astype(np.int64)
    wrap = lambda v: (v + 2 ** 31) % 2 ** 32 - 2 ** 31
    cc = c.astype(np.int64)
    assert np.array_equal(g[:, 0], wrap((A * B).sum(1) + cc))
    assert np.array_equal(g[:, 1], wrap((Au * Bu).sum(1) + cc))
    assert np.array_equal(g[:, 2], wrap(A16[:, 0] * B[:, 0] + A16[:, 1] * B[:, 1] + cc))
    assert np.array_equal(g[:, 3], wrap(A16[:, 0] * B[:, 2] + A16[:, 1] * B[:, 3] + cc))
    assert np.array_equal(g[:, 4], wrap(np.abs(a.astype(np.int64) - b.astype(np.int64)) + (cc & M32)))


# prmt's special modes: for each 2-bit selector, the source byte (0-3 from a, 4-7 from b)
# that lands in result bytes 0..3 (PTX ISA, table "prmt modes", listed b0 first)
PRMT_MODES = {
    "f4e": [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
    "b4e": [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]],
    "rc8": [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]],
    "ecl": [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]],
    "ecr": [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]],
    "rc16": [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]],
}


def prmt(x, y, s, mode=None):
    src = x | (y << 32)
    byte = lambda k: (src >> (8 * k)) & 0xFF
    if mode is None:
        out = 0
        for k in range(4):
            sel = (s >> (4 * k)) & 0xF
            v = byte(sel & 7)
            if sel & 8:
                v = 0xFF if v & 0x80 else 0
            out |= v << (8 * k)
        return out
    return sum(byte(j) << (8 * k) for k, j in enumerate(PRMT_MODES[mode][s & 3]))


def test_prmt_generic_and_modes(rng):
    n = 1024
    a, b, c = (rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    out = poison((n, 7), np.uint32)
    load_cuda("bits").get_function("prmt_modes")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
    g = out.get()
    for i in range(n):
        x, y, s = int(a[i]), int(b[i]), int(c[i])
        want = [prmt(x, y, s)] + [prmt(x, y, s, m) for m in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")]
        assert [int(v) for v in g[i]] == want, f"row {i} (a={x:#x}, b={y:#x}, c={s:#x})"


def bfe_w(a, pos, ln, signed, width):
    msb = width - 1
    sbit = _bit(a, min(pos + ln - 1, msb)) if signed and ln else 0
    return sum((_bit(a, pos + i) if i < ln and pos + i <= msb else sbit) << i for i in range(width))


def bfi_w(a, b, pos, ln, width):
    for i in range(ln):
        if pos + i > width - 1:
            break
        b = b & ~(1 << (pos + i)) | (_bit(a, i) << (pos + i))
    return b


def bmsk(a, b, clamp):
    a1, b1 = a & 31, b & 31
    mask0 = (M32 << a1) & M32
    s = a1 + b1
    mask1 = (M32 << s) & M32 if s < 32 else 0
    over = s >= 32
    if clamp:
        if a >= 32:
            over, mask0 = True, 0
        if b >= 32:
            over = True
    if over:
        mask1 = 0
    elif b1 == 0:
        mask1 = M32
    return mask0 & ~mask1 & M32


def szext(a, b, clamp, signed):
    b1 = b & 31
    too_large = b >= 32 and clamp
    mask = 0 if too_large else (M32 << b1) & M32
    sign = bool(b1 and not too_large and signed and _bit(a, (b1 - 1) & 31))
    return (a & ~mask & M32) | (mask if sign else 0)


def fns(mask, base, offset):
    if offset == -2 ** 31:          # an H200 gives 0 (the ISA's pseudo-code would find nothing)
        return 0
    if offset == 0:
        return base if _bit(mask, base) else M32
    pos, count, inc = base, abs(offset) - 1, 1 if offset > 0 else -1
    while 0 <= pos < 32:
        if _bit(mask, pos):
            if count == 0:
                return pos
            count -= 1
        pos += inc
    return M32


def test_bitfields_masks_and_extensions(rng):
    n = 1024
    w = rng.integers(0, 2 ** 64, n, dtype=np.uint64)
    a = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    c = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    c[: n // 2] &= 0x4747            # mostly positions/lengths below 72
    c[:6] = [0, 0x2000, 0x0020, 0x2020, 0x3F3F, 0xFFFF]
    off = rng.integers(-34, 35, n).astype(np.int32)
    a[::5] &= rng.integers(0, 2 ** 32, len(a[::5]), dtype=np.uint64).astype(np.uint32)   # sparser masks
    out = poison((n, 12), np.uint64)
    load_cuda("bits").get_function("bitfields_more")((n // 128,), (128,), (ac.asarray(w), ac.asarray(a), ac.asarray(c),
                                                                         ac.asarray(off), out, np.int32(n)))
    g = out.get()
    M64 = 2 ** 64 - 1
    for i in range(n):
        v, x, s, o = int(w[i]), int(a[i]), int(c[i]), int(off[i])
        pos, ln = s & 0xFF, (s >> 8) & 0xFF
        v2 = (~v * 3) & M64
        vs = v >> (s & 63)
        sv = (v - (1 << 64) if v >> 63 else v) >> (s & 63)
        sv_bits = ~sv & M64 if sv < 0 else sv
        want = [bfe_w(v, pos, ln, False, 64), bfe_w(v, pos, ln, True, 64), bfi_w(v, v2, pos, ln, 64),
                bmsk(pos & 63, ln & 63, True), bmsk(pos & 63, ln & 63, False),
                bfe(x, pos, ln, False), bfe(x, pos, ln, True), bfi(x, s, pos, ln),
                bin(x & s).count("1") + 64 - v.bit_length(), int(x & s == 0),
                vs.bit_length() - 1 if vs else M32,
                63 - (sv_bits.bit_length() - 1) if sv_bits else M32]
        got = [int(u) for u in g[i]]
        assert got == want, f"row {i} (w={v:#x}, a={x:#x}, c={s:#x}, off={o}): " + ", ".join(
            f"col {j}: {gv:#x} != {wv:#x}" for j, (gv, wv) in enumerate(zip(got, want)) if gv != wv)


def test_szext(rng):
    n = 512
    a = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    k = rng.integers(0, 70, n).astype(np.uint32)
    k[:8] = [0, 1, 31, 32, 33, 63, 64, 2 ** 32 - 1]
    out = poison((n, 4), np.uint32)
    load_cuda("bits").get_function("szext_ops")((n // 128,), (128,), (ac.asarray(a), ac.asarray(k), out, np.int32(n)))
    g = out.get()
    for i in range(n):
        x, b = int(a[i]), int(k[i])
        want = [szext(x, b, True, True), szext(x, b, False, True), szext(x, b, True, False), szext(x, b, False, False)]
        assert [int(v) for v in g[i]] == want, f"row {i} (a={x:#x}, b={b})"


def test_find_nth_set_bit(rng):
    n = 1024
    a = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    a[::3] &= rng.integers(0, 2 ** 32, len(a[::3]), dtype=np.uint64).astype(np.uint32)
    a[:2] = [0, 0xFFFFFFFF]
    base = rng.integers(0, 32, n).astype(np.uint32)
    off = rng.integers(-34, 35, n).astype(np.int32)
    off[2:8] = [0, 0, 1, -1, -2 ** 31, -2 ** 31]
    out = poison(n, np.uint32)
    load_cuda("bits").get_function("fns_ops")((n // 128,), (128,), (ac.asarray(a), ac.asarray(base), ac.asarray(off),
                                                                   out, np.int32(n)))
    g = out.get()
    for i in range(n):
        want = fns(int(a[i]), int(base[i]), int(off[i]))
        assert int(g[i]) == want, f"row {i}: __fns({int(a[i]):#x}, {int(base[i])}, {int(off[i])})"


def test_lop3_random_truth_tables(rng):
    n = 2048
    a, b, c = (rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    lut = rng.integers(0, 256, n).astype(np.int32)
    lut[:256] = rng.permutation(256)            # every table at least once
    out = poison(n, np.uint32)
    load_cuda("bits").get_function("lop3_any")((n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c),
                                                                    ac.asarray(lut), out, np.int32(n)))
    g = out.get()
    for i in range(n):
        want = lop3(int(a[i]), int(b[i]), int(c[i]), int(lut[i]))
        assert int(g[i]) == want, f"row {i}: lut {int(lut[i]):#04x}: {int(g[i]):#x} != {want:#x}"
