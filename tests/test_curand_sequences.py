"""cuRAND's sequences, one state at a time (the device API's curand_init + curand()), against
reference loops written here from the published algorithms, and against published values."""
import numpy as np
import pytest

from anycuda.libraries.curand import device
from anycuda.libraries.curand.generators import mrg32k3a, mt19937, mt19937_jump, philox, sobol, xorwow
from anycuda.libraries.curand.generators.mt19937_jump import N
from anycuda.libraries.curand.kinds import RngType

M32 = 0xFFFFFFFF


# ---- XORWOW ------------------------------------------------------------------------------
def ref_xorwow_seed(seed):
    s0, s1 = (seed & M32) ^ 0xAAD26B49, (seed >> 32) ^ 0xF7DCEFDD
    t0, t1 = (1099087573 * s0) & M32, (2591861531 * s1) & M32
    return [(123456789 + t0) & M32, 362436069 ^ t0, (521288629 + t1) & M32, 88675123 ^ t1,
            (5783321 + t0) & M32], (6615241 + t1 + t0) & M32


def ref_xorwow_step(v):
    t = v[0] ^ (v[0] >> 2)
    return v[1:] + [(v[4] ^ (v[4] << 4) ^ t ^ (t << 1)) & M32]


def ref_xorwow(seed, skip, count):
    """Plain stepping: `skip` steps, then `count` results."""
    v, d = ref_xorwow_seed(seed)
    out = []
    for i in range(skip + count):
        v = ref_xorwow_step(v)
        d = (d + 362437) & M32
        if i >= skip:
            out.append((v[4] + d) & M32)
    return out


def ref_xorwow_jump(v, n):
    """v after n steps by a GF(2) matrix on Python integers (rows as 160-bit masks), squaring by
    a different route than the module's (the transition's rows, not its columns)."""
    def to_int(words):
        return sum(w << (32 * i) for i, w in enumerate(words))

    def from_int(x):
        return [(x >> (32 * i)) & M32 for i in range(5)]
    cols = [to_int(ref_xorwow_step(from_int(1 << j))) for j in range(160)]

    def mul(a, b):                         # (a b) as column images: a applied to each column of b
        return [apply(a, c) for c in b]

    def apply(m, x):
        r, j = 0, 0
        while x:
            if x & 1:
                r ^= m[j]
            x >>= 1
            j += 1
        return r
    result = [1 << j for j in range(160)]
    while n:
        if n & 1:
            result = mul(cols, result)
        cols = mul(cols, cols)
        n >>= 1
    return from_int(apply(result, to_int(v)))


@pytest.mark.parametrize("seed", [0, 1, 1234, 0xDEADBEEFCAFEF00D])
def test_xorwow_matches_plain_stepping(seed):
    assert list(xorwow.device_sequence(seed, 0, 0, 50)) == ref_xorwow(seed, 0, 50)
    assert list(xorwow.device_sequence(seed, 0, 777, 20)) == ref_xorwow(seed, 777, 20)


@pytest.mark.parametrize("subsequence,offset", [(1, 0), (3, 5), (4097, 123456789)])
def test_xorwow_subsequences_are_jumps_of_2_to_67(subsequence, offset):
    v, d = ref_xorwow_seed(42)
    v = ref_xorwow_jump(v, (subsequence << 67) + offset)
    d = (d + 362437 * offset) & M32
    expected = []
    for _ in range(10):
        v = ref_xorwow_step(v)
        d = (d + 362437) & M32
        expected.append((v[4] + d) & M32)
    assert list(xorwow.device_sequence(42, subsequence, offset, 10)) == expected


# ---- Philox4x32-10 -------------------------------------------------------------------------
def ref_philox(counter, key):
    c = [(counter >> (32 * i)) & M32 for i in range(4)]
    k0, k1 = key & M32, key >> 32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & M32, (p0 >> 32) ^ c[3] ^ k1, p0 & M32]
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c


@pytest.mark.parametrize("counter,key,expected", [           # Random123's published answers
    (0, 0, [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ((1 << 128) - 1, (1 << 64) - 1, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    (0x03707344_13198A2E_85A308D3_243F6A88, 0x299F31D0_A4093822, [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
])
def test_philox_known_answers(counter, key, expected):
    assert ref_philox(counter, key) == expected
    got = philox.blocks(key, np.array([counter & ((1 << 64) - 1)], np.uint64), counter >> 64)[0]
    assert [int(x) for x in got] == expected


@pytest.mark.parametrize("seed,subsequence,offset", [(0, 0, 0), (1234, 7, 3), (2**63 + 5, 2**40, 2**62 + 1),
                                                     (9, 0, 2**66 - 6)])
def test_philox_device_sequence_is_counter_blocks(seed, subsequence, offset):
    expected = []
    for p in range(offset, offset + 13):
        ctr = ((subsequence << 64) + p // 4) % (1 << 128)
        expected.append(ref_philox(ctr, seed)[p % 4])
    assert [int(x) for x in philox.device_sequence(seed, subsequence, offset, 13)] == expected


# ---- MRG32k3a ------------------------------------------------------------------------------
def ref_mrg(s1, s2, count):
    m1, m2 = 4294967087, 4294944443
    out = []
    for _ in range(count):
        p1 = (1403580 * s1[1] - 810728 * s1[0]) % m1
        s1 = [s1[1], s1[2], p1]
        p2 = (527612 * s2[2] - 1370589 * s2[0]) % m2
        s2 = [s2[1], s2[2], p2]
        out.append(p1 - p2 if p1 > p2 else p1 - p2 + m1)
    return out


@pytest.mark.parametrize("seed", [0, 99, 2**40 + 7])
def test_mrg32k3a_matches_plain_recursion(seed):
    x1, x2 = (seed & M32) ^ 0x55555555, ((seed >> 32) ^ 0xAAAAAAAA) & M32
    if seed:
        s1 = [x1 * 12345 % 4294967087, x2 * 12345 % 4294967087, x1 * 12345 % 4294967087]
        s2 = [x2 * 12345 % 4294944443, x1 * 12345 % 4294944443, x2 * 12345 % 4294944443]
    else:
        s1, s2 = [12345] * 3, [12345] * 3
    raw = ref_mrg(s1, s2, 1030)
    assert list(mrg32k3a.device_raw(seed, 0, 0, 30)) == raw[:30]
    assert list(mrg32k3a.device_raw(seed, 0, 1000, 30)) == raw[1000:]
    bits = [int(r * 1.000000048662) for r in raw[:30]]
    assert list(mrg32k3a.device_sequence(seed, 0, 0, 30)) == bits


def test_mrg32k3a_subsequence_is_2_to_76_and_masked_to_51_bits():
    a = mrg32k3a.init(5, 3, 11)
    b = mrg32k3a.init(5, 0, (3 << 76) + 11)
    assert a == b
    assert mrg32k3a.init(5, 3 + (1 << 51), 0) == mrg32k3a.init(5, 3, 0)


# ---- MT19937 --------------------------------------------------------------------------------
def test_mt19937_reference_values():
    # init_genrand(5489): first output 3499211612, 10000th 4123659995 (the C++ standard's check)
    seq = mt19937.temper(mt19937_jump.extend(mt19937_jump.init_genrand(5489), 10000)[N:])
    assert seq[0] == 3499211612 and seq[-1] == 4123659995


# ---- Sobol ------------------------------------------------------------------------------------
def ref_sobol_dimension(poly, m_init, count, bits=32):
    """Bratley and Fox, one dimension, points by Gray code (plain Python)."""
    s = poly.bit_length() - 1
    m = list(m_init[:s])
    for k in range(s, bits):
        new = m[k - s] ^ (m[k - s] << s)
        for i in range(1, s):
            if (poly >> (s - i)) & 1:
                new ^= m[k - i] << i
        m.append(new)
    v = [m[k] << (bits - 1 - k) for k in range(bits)]
    out, x = [], 0
    for i in range(count):
        out.append(x)
        x ^= v[(~i & (i + 1)).bit_length() - 1]           # lowest zero bit of i
    return out


def test_sobol_first_dimension_is_van_der_corput():
    assert [int(x) for x in sobol.device_sequence(0, 0, 4)] == [0, 1 << 31, 3 << 30, 1 << 30]


@pytest.mark.skipif(sobol.available_dimensions() < 6, reason="Joe-Kuo data (SciPy) not installed")
@pytest.mark.parametrize("bits", [32, 64])
def test_sobol_dimensions_follow_joe_kuo(bits):
    # new-joe-kuo-6.21201, dimensions 2..6: (polynomial with both end terms, initial m)
    table = [(0b11, [1]), (0b111, [1, 3]), (0b1011, [1, 3, 1]), (0b1101, [1, 1, 1]), (0b10011, [1, 1, 3, 3])]
    for dim, (poly, m) in enumerate(table, start=1):
        got = [int(x) for x in sobol.device_sequence(dim, 0, 300, bits=bits)]
        assert got == ref_sobol_dimension(poly, m, 300, bits)
    expected = ref_sobol_dimension(0b111, [1, 3], 150, bits)[100:]
    assert [int(x) for x in sobol.device_sequence(2, 100, 50, bits)] == expected


def test_scrambled_sobol_xors_one_constant():
    c = sobol.scramble_constants(1, 32)[0]
    got = sobol.device_sequence(0, 0, 16, scrambled=True)
    assert got[0] == c                                    # point 0 is the constant alone
    assert np.array_equal(got, sobol.points(sobol.scrambled_direction_vectors(1, 32), 0, 16)[0] ^ c)
    assert not np.array_equal(got ^ c, sobol.device_sequence(0, 0, 16))   # the vectors are scrambled too


def xorwow_seed0_word(p):
    """Word p of host XORWOW at seed 0 (4096 subsequences interleaved), through the device API:
    curand_init(0, p % 4096, p // 4096), then one curand()."""
    return int(xorwow.device_sequence(0, p % 4096, p // 4096, 1)[0])


def test_scrambling_words_are_host_xorwow_at_seed_0():
    """R[d, i] = W[1 + 128 d + 2 i] | W[2 + 128 d + 2 i] << 32 gives row b = 63 - i of L_d with the
    bits below b cleared and bit b set; constant d = W[2,560,001 + 2 d] | W[2,560,002 + 2 d] << 32
    (after the 20,000 dimensions' rows, however few dimensions are asked for)."""
    rows, c64 = sobol.scrambling_rows(41), sobol.scramble_constants(41, 64)
    for d, i in [(0, 0), (0, 1), (0, 63), (2, 5), (40, 62), (40, 31)]:
        r = xorwow_seed0_word(1 + 128 * d + 2 * i) | xorwow_seed0_word(2 + 128 * d + 2 * i) << 32
        b = 63 - i
        assert int(rows[d, b]) == (r & ~((1 << b) - 1)) | (1 << b), (d, i)
    for d in (0, 1, 40):
        assert int(c64[d]) == xorwow_seed0_word(2_560_001 + 2 * d) | xorwow_seed0_word(2_560_002 + 2 * d) << 32
    assert np.array_equal(sobol.scramble_constants(3, 64), c64[:3])


def ref_scramble(rows, x):
    """L x over GF(2), bit by bit (plain Python): bit b is the parity of rows[b] & x."""
    return sum((bin(int(rows[b]) & int(x)).count("1") & 1) << b for b in range(64))


def test_scrambled_direction_vectors_structure():
    """Set 104 is L_d applied to the plain 64-bit vectors; L_d is unit lower-triangular, so every
    scrambled vector keeps its plain one's highest bit and the first 2^m points still take every
    value of their top m bits once (the net property); set 102 is set 104's first 32 vectors' high
    halves and the 32-bit constants the 64-bit ones' high halves."""
    dims = min(sobol.available_dimensions(), 50)
    plain, scrambled = sobol.direction_vectors(dims, 64), sobol.scrambled_direction_vectors(dims, 64)
    rows = sobol.scrambling_rows(dims)
    for d in sorted({0, 1, dims - 1} & set(range(dims))):
        for k in (0, 1, 17, 63):
            assert int(scrambled[d, k]) == ref_scramble(rows[d], plain[d, k]), (d, k)
    assert [[int(x).bit_length() for x in row] for row in scrambled] == \
        [[int(x).bit_length() for x in row] for row in plain]
    assert not np.array_equal(scrambled, plain)
    assert np.array_equal(sobol.scrambled_direction_vectors(dims, 32), scrambled[:, :32] >> np.uint64(32))
    assert np.array_equal(sobol.scramble_constants(dims, 32), sobol.scramble_constants(dims, 64) >> np.uint64(32))
    m = 12
    top = sobol.points(scrambled, 0, 1 << m, sobol.scramble_constants(dims, 64)) >> np.uint64(64 - m)
    assert (np.sort(top, axis=1) == np.arange(1 << m, dtype=np.uint64)).all()


def test_scrambled_dimension_1_needs_no_joe_kuo_data(monkeypatch):
    def no_data():
        raise AssertionError("the Joe-Kuo data was read")
    monkeypatch.setattr(sobol, "_joe_kuo", no_data)
    v = sobol.scrambled_direction_vectors.__wrapped__(1, 64)
    assert np.array_equal(v, sobol.scrambled_direction_vectors(1, 64))
    assert int(v[0, 0]) >> 63 == 1 and int(v[0, 63]) == 1   # L e_63 keeps bit 63 on top; L e_0 = e_0


def test_device_api_entry_point():
    assert list(device.sequence(RngType.PSEUDO_XORWOW, 7, 0, 3, 5)) == ref_xorwow(7, 3, 5)
    assert np.array_equal(device.sequence(RngType.PSEUDO_PHILOX4_32_10, 7, 2, 3, 5),
                          philox.sequence(7, 2, 3, 5))
    assert np.array_equal(device.sequence(RngType.PSEUDO_MRG32K3A, 7, 1, 0, 5),
                          mrg32k3a.device_sequence(7, 1, 0, 5))
