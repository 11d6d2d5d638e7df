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
