"""Jump-ahead for MT19937: the state 2^2048 words further on, as cuRAND's generators are spaced.

MT19937 is linear over GF(2): one step is a matrix F on its 19937-bit state, and every bit of
its words obeys F's characteristic polynomial P (degree 19937). So the words from position D on
are sum_i h_i x[i + k] with h = x^D mod P, a sum of windows of the sequence chosen by the bits of h
(Haramoto et al., "Efficient jump ahead for F2-linear random number generators", 2008).

cuRAND's host generator starts its 8192 MT19937 generators 2^2048 words apart in the one sequence
of init_genrand(seed) (found by asking NVIDIA's host library: generator 1's words are those of
generator 0 jumped by 2^2048 and by no smaller power of two; NOTES.md). The polynomial for that
distance is JUMP_2048, computed by `jump_polynomial(2048)` (P from the sequence by Berlekamp-Massey,
then 2048 squarings modulo P, ~10 s; tests/test_curand_mt19937.py checks it).

`jump(window, polynomial)` takes the 624 words from some position (untempered) and gives the 624
words D further on. In machine code (anycuda's JIT) a jump costs ~0.2 ms; without the JIT numpy
does the same sum in ~15 ms.
"""
from __future__ import annotations

import ctypes
import threading
from functools import lru_cache

import numpy as np

N, DEGREE = 624, 19937
UPPER, LOWER, MATRIX_A = 0x80000000, 0x7FFFFFFF, 0x9908B0DF

JUMP_2048 = int(
    "18e7b5c7b8969d4f7f593b919e6e116e059dd7867149039a770470533c4200099aa95bac3575109994664706e1adcb03"
    "dd8ab7cc27f1b18590da7389c4413dd72ebdd060f825d37909a85630f51a5eae6d2ee91baeb9d6cf1554841ad73ec5da"
    "e0636f70e621129ddd95652830920213e4d72722db10384ee8c5261170de1eadcd9a1a0671df6f51e423003e6ce7146c"
    "2a5f60804875e9bb905165945e968d2bb572d0400273301dbd9d079b28ee2b49745102cb87c010c82fa865bcaf61fc01"
    "e690a3fd5895e7ce2d753d1270da0222295d50affcad6d053d0d0f959ed09b25e950720fe51870e5bfc7c17ca3a61951"
    "995030fea390e73d66259e23ffa1b7571189c341970a502ab51d50ff36db10aef96c42111002135126cd1efcdc6fab68"
    "5640d3e72fe4cbac2454923dc638a3be5411730a4863744cfd8fa95de922b01da8240840b58281bf053a130ff6d2e4cb"
    "7914628dcbeb55da550e668e3328a9c288162792a20fb2894c4cf6423d8d8c7d9eec67f9035508fac6a90569379ee1fe"
    "690f4c12b9e301368e73ed41ecccaba83565fdf3897279ac662c063f824373c7ac64b340c63753515fb1a27b8a33721d"
    "318dbf69ccfd2cf23ebd05143046b6e6bd60cc9164116e5c3abba5b38f611d74b98ed7c80be83f0a7a3051c8104a2ea0"
    "783fb93b2a1a0718780ff0c5f2da4646b437d6abcf00fc0c29cf6b156ce0969c6ca98bd6404ea6f698aae6565b9b6644"
    "4c53e11a3d8c8d2b4e04077a3eb949a60881a651ec104c1ab99aa6324c829beee1dcfc4f92c9a7ee9bc96820dee18fdb"
    "d0931d116eefd9861db7f11311d2fffff9bfa22a8e3e0df706746ca0a0bb8f8220abbc413395dc4407f326d432925e03"
    "a9a0896c5986f41de85314fd4d32bac864c190906179723d6b9a3eec76c677605cb66a04a18836b0f93d2c2be3420574"
    "aa646316404596ac0aa8d0c0d48b915ba3b5a2aef83c3eddcffc79abe6d235e13c9e9b79eff67e00f2e6134487e26763"
    "49d33f2f49bf8733673f5001a7c3d97562a12bf0790e012e32af359d957185b570884063956dd9540fedad9c1b9ed071"
    "015f441011bf00a5441588ba14cda68fb0fbab1aa0bdca0a89143b6a808206f1142ad18d2b85bcdbacc64c6c55a08d55"
    "31492579f03889337bf8bc49cb24f4456ad908960ba8d6fdf7d5470223d3e51762a54a15a2e7f2a4a6805f5f29655498"
    "922b901362f9bf2290cd6e3dacee518213c6bfd12d94f6b42467ab4120875065b4dd874c664809ea39a7bcb4ae5b8cfa"
    "0fd2aefe0fb24b595478fc18d58b8a16e5b025ed3a54b691f5618fb43eaaf0738e7ef1b760906d7fcc2fce74f0fa3f2b"
    "29760647f024d032e02b6d3bcad322edb09ada0a5206e0c4c367da377338e042395da7669d3bca2b0a9122560eabdd23"
    "66d6b60dc85277940c53c5d865a69fa20fe8dece91db74dd434c91675d2f30b8de1c4ed464d438de1d2abd7a0ba7217d"
    "17b69b33ae206a45d43283e7a01ba4451369583c6f08c641b0e4780ffee5cc92236effbe4205b31890c828f15cf06af3"
    "b6f8f6403d92a56aa199cd8938fdbddd43d916f6c39505a0f3159ef4c6ca5bd0c7dcb91df501ef6b6ac0f19fa93b8325"
    "2531388c9f7ca5b8c6ed3b50ab88d8838a8ef00a0ce389ebb58731e3e8ab71618aaf57f83952999b922bbcd379891623"
    "993bde309705b9b82ad21a09474eadd2f6bc09bf97a7a1a02327c099747d6f704f88490926577147aa94e29fe4b28b83"
    "8b2d64d3134a9026b7adccf945e270d130a058904a42e4e97d95200906ec35a327914cf91f07e4c88522b8fbeb0ca51c"
    "51cc210f95e0334e1077ca44a03727302f13e4cbd66fc66cc26a385e3eeac0257f57f5b2524232be22f90c4458d1aa05"
    "558e240d066e0c9baa8078bfbf40e48567009a4af1b505e78d0b7e811f45af924d221de46187c8b08ee1affbf2c17be4"
    "253f10b5978f59db9622e51d3b2d2828fe0df1e1cd943fa706d567c414e989a02aff8fd0517c18faf0853b425b23fdbf"
    "879e39005cbf9f2ac742c6795ff95ae05de3d85f666ce86f8a3c9e6e65ed292890a2d9f5178f182825a19170a9d4c234"
    "0f96999f77abfd7f4daf8bb511dc44ab1fe45714684b8d0d3fe37601ae13d1753f6ae62d15a9ed14de7e88d3556339e9"
    "d033d176544c55ebb7eb5ba6d0903f075b37786975e5b250b51d98da82f4d067590b18c4f568fd7ccd1edb9765d326f8"
    "280750be6001c8ae5c158f34a00f9d3b096f22916488220cd31bdee2fe640f558973b073897730fc1c10177313feae42"
    "aa896bc87536ac03cf8c18da42831c0832bc4a7b0f4501088cd43a89426c0b9cdc6837a8abbcfdbe85825ea0b66414f6"
    "161086e8e9e944661e9b4ed4fa4ce1063139cd7193059610a664e004b4a154d7ae9a52e2d4217d83b9ff2df70f5a9342"
    "fc2dd86aadc96e539ae4c773153db774b45a628f0e07d1e446e8e6a901da2731ed145c6efa97067b8316ab083abe126e"
    "49dd5f5b4adc52014e3fe247b1a96cf958415754efc238a87fa13c936971f2b84f01830053c3a4711258eb20ec14b22a"
    "cda2fef7f7c6fc069800dacf5f525c08bb024747ff1894a9de75f24fda5b25c6411f4e21cda86577e4ca1cdc536ed73e"
    "07f2cdb83eb2d7b71775b67030f9d920cf7eaa4fba5b2a7ef39ab55a3ee4bda818be5ecdaa1a059bd55e4f85fe7c56d5"
    "29a409c4efc71beecf11ed86e09ee9676296fa84b00d29d2ae87de56f750d9f9807a304ab8c64ebae31c227a864ec148"
    "5e5f9816adf819786cb01faa757c9062a35c317fe539933c652927f19db10a057db881c48e0e5c4fc4844e2776e7360b"
    "edbb8668421b3b4b12ae5758df55b3a9aa1f3152cde3558e1c9776153fd94b6418060fb0550c3095ac6b1794e7be8e04"
    "7fb68d86deb24a30708e62ca3e3d20ee0b99ecb3eccad1bcf4fcd2832b01abc64557bce7bfae94ae9f02291f10d41793"
    "abcf8c8145a32081ad53f0654a52389508f2940d59a547e5b6d2d2316d37d10d6b865e67066f7127b136b751997023ef"
    "ebc1af0ecd7f91faa45918c31bb4533365f2d219e249b01b4b5c446bdf51acb49699c037a31f525e2854605bd7e18d12"
    "caf21d8161af815859b32b6e1b4664d909d1824f03487f3df7af3755861c47e28f9375b56a5e694ca9cf551c9d29964e"
    "85945cba9c409bb6ed50543909f39299d2383f8033170cc4286ea128ac894622e7e166fc552b89d64fd1fdbd7a2adabb"
    "9ac2a056f7ecb3e3ae4142b8442359d90488ebd0780ebea7fe0209237d9296259e4c372ad603726191a4a343475a39a7"
    "837010471f50a48af69ea37b43256858e4817bc6f069d962dcefeb2a010814d0de45177832883ec589b473ee0e618d15"
    "ee839a822b73cdb1f9d5385de39b09b465516a180811412fe4840addda0d1b088964f0ed5e27a49c23c3fd38c5d3d763"
    "177900cd404a5f234297f90caa50d266e05bdd9ec524f7cae112524a22d3bf7e2993d87ca39bc018088eb5cd8", 16)

_lock = threading.Lock()
_compiled = {}


def extend(window: np.ndarray, count: int) -> np.ndarray:
    """The untempered sequence from a window of 624 words (the last axis; any leading axes are
    independent generators): x[k + 624] = x[k + 397] ^ twist(x[k], x[k + 1]), in steps of the 227
    words that depend only on words already there."""
    lead = window.shape[:-1]
    x = np.empty(lead + (count + N,), np.uint32)
    x[..., :N] = window
    for k in range(0, count, N - 397):
        m = min(N - 397, count - k)
        y = (x[..., k:k + m] & UPPER) | (x[..., k + 1:k + 1 + m] & LOWER)
        x[..., k + N:k + N + m] = x[..., k + 397:k + 397 + m] ^ (y >> 1) ^ ((y & 1) * np.uint32(MATRIX_A))
    return x


def polynomial_words(polynomial: int) -> np.ndarray:
    return np.frombuffer(polynomial.to_bytes(N * 4, "little"), np.uint32).copy()


# ---- the jump --------------------------------------------------------------------------------
_JUMP_IR = """
define void @mt19937_jump(ptr noalias %window, ptr noalias %poly, ptr noalias %out, ptr noalias %seq) {
entry:
  br label %copy
copy:                                   ; seq[0..624) = window, out = 0
  %c = phi i64 [0, %entry], [%c1, %copy]
  %cp = getelementptr i32, ptr %window, i64 %c
  %cv = load i32, ptr %cp
  %cq = getelementptr i32, ptr %seq, i64 %c
  store i32 %cv, ptr %cq
  %zp = getelementptr i32, ptr %out, i64 %c
  store i32 0, ptr %zp
  %c1 = add i64 %c, 1
  %cmore = icmp ult i64 %c1, 624
  br i1 %cmore, label %copy, label %extend
extend:                                 ; the sequence on to word 19937 + 623
  %k = phi i64 [0, %copy], [%k1, %extend]
  %p0 = getelementptr i32, ptr %seq, i64 %k
  %x0 = load i32, ptr %p0
  %k1 = add i64 %k, 1
  %p1 = getelementptr i32, ptr %seq, i64 %k1
  %x1 = load i32, ptr %p1
  %km = add i64 %k, 397
  %pm = getelementptr i32, ptr %seq, i64 %km
  %xm = load i32, ptr %pm
  %hi = and i32 %x0, -2147483648
  %lo = and i32 %x1, 2147483647
  %y = or i32 %hi, %lo
  %ys = lshr i32 %y, 1
  %odd = and i32 %y, 1
  %neg = sub i32 0, %odd
  %mag = and i32 %neg, -1727483681
  %t = xor i32 %xm, %ys
  %v = xor i32 %t, %mag
  %kn = add i64 %k, 624
  %pn = getelementptr i32, ptr %seq, i64 %kn
  store i32 %v, ptr %pn
  %emore = icmp ult i64 %k1, 19937
  br i1 %emore, label %extend, label %bits
bits:                                   ; out ^= seq[i .. i + 624) for every bit i of the polynomial
  %i = phi i64 [0, %extend], [%i1, %next]
  %wi = lshr i64 %i, 5
  %wp = getelementptr i32, ptr %poly, i64 %wi
  %word = load i32, ptr %wp
  %sh = and i64 %i, 31
  %sh32 = trunc i64 %sh to i32
  %bw = lshr i32 %word, %sh32
  %bit = and i32 %bw, 1
  %set = icmp ne i32 %bit, 0
  br i1 %set, label %add, label %next
add:
  %w = phi i64 [0, %bits], [%w1, %add]
  %iw = add i64 %i, %w
  %sp = getelementptr i32, ptr %seq, i64 %iw
  %sv = load i32, ptr %sp
  %op = getelementptr i32, ptr %out, i64 %w
  %ov = load i32, ptr %op
  %nv = xor i32 %ov, %sv
  store i32 %nv, ptr %op
  %w1 = add i64 %w, 1
  %amore = icmp ult i64 %w1, 624
  br i1 %amore, label %add, label %next
next:
  %i1 = add i64 %i, 1
  %bmore = icmp ult i64 %i1, 19937
  br i1 %bmore, label %bits, label %done
done:
  ret void
}
"""


def _machine_jump():
    """The jump as machine code through anycuda's JIT, or None where that fails."""
    with _lock:
        if "jump" not in _compiled:
            try:
                from ....compiler.build import jit
                loaded = jit.LoadedObject(jit.compile_to_object(_JUMP_IR, "curand_mt19937_jump"))
                prototype = ctypes.CFUNCTYPE(None, *(ctypes.c_void_p,) * 4)
                _compiled["code"] = loaded            # kept for the process, as the kernels are
                _compiled["jump"] = prototype(loaded.address("mt19937_jump"))
            except Exception as e:                    # noqa: BLE001 -- numpy serves
                _compiled["jump"], _compiled["error"] = None, e
        return _compiled["jump"]


def jump(window: np.ndarray, words: np.ndarray, out: np.ndarray = None) -> np.ndarray:
    """The 624 words D positions after `window` (624 untempered words), D given by `words`, the
    polynomial x^D mod P as 624 little-endian 32-bit words; into `out` (contiguous) if given.
    The machine code holds no state: threads may jump at once."""
    window = np.ascontiguousarray(window, np.uint32)
    out = np.empty(N, np.uint32) if out is None else out
    machine = _machine_jump()
    if machine is not None:
        scratch = np.empty(N + DEGREE + 1, np.uint32)
        machine(window.ctypes.data, words.ctypes.data, out.ctypes.data, scratch.ctypes.data)
        return out
    seq = extend(window, DEGREE)
    chosen = np.unpackbits(words.view(np.uint8), bitorder="little")[:DEGREE].astype(bool)
    windows = np.lib.stride_tricks.sliding_window_view(seq, N)[:DEGREE]
    out[:] = np.bitwise_xor.reduce(windows[chosen], axis=0)
    return out


@lru_cache(maxsize=8)
def stride_words(log2_generators: int) -> np.ndarray:
    """The polynomial of a jump over 2^log2_generators of cuRAND's generators (2^(2048 + that)
    words): JUMP_2048 squared that many times modulo P."""
    h = JUMP_2048
    if log2_generators:
        p = characteristic_polynomial()
        for _ in range(log2_generators):
            h = _reduce(_spread_bits(h), p)
    return polynomial_words(h)


# ---- where the polynomials come from -----------------------------------------------------------
def init_genrand(seed: int) -> np.ndarray:
    """Matsumoto and Nishimura's seeding of the 624-word state from a 32-bit seed."""
    state = [seed & 0xFFFFFFFF]
    for i in range(1, N):
        prev = state[-1]
        state.append((1812433253 * (prev ^ (prev >> 30)) + i) & 0xFFFFFFFF)
    return np.array(state, np.uint32)


@lru_cache(maxsize=1)
def characteristic_polynomial() -> int:
    """P, from one bit of the sequence by Berlekamp-Massey (the bit's minimal polynomial is F's
    characteristic polynomial: MT19937's is primitive). Bit i of the result is P's x^i."""
    x = extend(init_genrand(5489), 2 * DEGREE + 64)[N:]
    connection, previous, length, gap, window = 1, 1, 0, 1, 0
    for i, bit in enumerate((x & 1).tolist()):
        window = (window << 1) | bit                     # bit j of window is s[i - j]
        if (connection & window).bit_count() & 1 == 0:
            gap += 1
        elif 2 * length <= i:
            connection, previous, length, gap = connection ^ (previous << gap), connection, i + 1 - length, 1
        else:
            connection ^= previous << gap
            gap += 1
    assert length == DEGREE, length
    return int(format(connection, f"0{DEGREE + 1}b")[::-1], 2)     # x^L C(1/x)


def _spread_bits(value: int) -> int:
    """value(x)^2 over GF(2): bit i moves to bit 2i."""
    spread = np.unpackbits(np.frombuffer(value.to_bytes((value.bit_length() + 7) // 8 or 1, "little"), np.uint8),
                           bitorder="little")
    doubled = np.zeros(2 * spread.size, np.uint8)
    doubled[::2] = spread
    return int.from_bytes(np.packbits(doubled, bitorder="little").tobytes(), "little")


def _reduce(h: int, p: int) -> int:
    while h.bit_length() > DEGREE:
        h ^= p << (h.bit_length() - 1 - DEGREE)
    return h


def power_of_x(exponent: int, characteristic: int = None) -> int:
    """x^exponent mod P, by squaring and multiplying by x from the exponent's top bit down."""
    p = characteristic if characteristic is not None else characteristic_polynomial()
    h = 1
    for bit in format(exponent, "b"):
        h = _spread_bits(h)
        h = _reduce(h << 1 if bit == "1" else h, p)
    return h


def jump_polynomial(log2_distance: int, characteristic: int = None) -> int:
    """x^(2^log2_distance) mod P: the polynomial of a jump by 2^log2_distance words."""
    return power_of_x(1 << log2_distance, characteristic)
