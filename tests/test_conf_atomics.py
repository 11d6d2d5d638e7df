"""Atomics with real contention (blocks run concurrently on all cores): integer results
exact, float sums within rounding, returned old values unique, CAS loops, shared memory, the
inc/dec wrap rules, block/system scopes, `red` forms, __half2 adds, fences."""
import numpy as np
import pytest

import anycuda as ac
from conformance import load_cuda, poison


@pytest.mark.parametrize("slots", [1, 8, 16])
def test_global_atomics_under_contention(rng, slots):
    n = 256 * 256
    vals = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    i32 = ac.asarray(np.concatenate([np.zeros(2 * slots), np.full(slots, 2 ** 31 - 1), np.full(slots, -2 ** 31)]).astype(np.int32))
    u32 = ac.asarray(np.concatenate([np.full(slots, 0xFFFFFFFF), np.zeros(slots), np.zeros(slots),
                                     np.full(slots, 0xFFFFFFFF), np.zeros(slots)]).astype(np.uint32))
    u64 = ac.zeros(2 * slots, np.uint64)
    f32, f64 = ac.zeros(slots, np.float32), ac.zeros(slots, np.float64)
    load_cuda("atomics").get_function("global_atomics")((256,), (256,), (i32, u32, u64, f32, f64, ac.asarray(vals), np.int32(n), np.int32(slots)))
    g32, gu, g64 = i32.get().astype(np.int64), u32.get().astype(np.int64), u64.get()
    v = vals.astype(np.int64).reshape(-1, slots)            # column s holds the values of slot s
    uv = v & 0xFFFFFFFF
    wrap = lambda x: (x + 2 ** 31) % 2 ** 32 - 2 ** 31
    assert np.array_equal(g32[:slots], wrap(v.sum(0)))
    assert np.array_equal(g32[slots:2 * slots], wrap(-v.sum(0)))
    assert np.array_equal(g32[2 * slots:3 * slots], v.min(0))
    assert np.array_equal(g32[3 * slots:], v.max(0))
    assert np.array_equal(gu[:slots], np.bitwise_and.reduce(uv | 0x80000000, 0))
    assert np.array_equal(gu[slots:2 * slots], np.bitwise_or.reduce(1 << (uv & 31), 0))
    assert np.array_equal(gu[2 * slots:3 * slots], np.bitwise_xor.reduce(uv, 0))
    assert np.array_equal(gu[3 * slots:4 * slots], uv.min(0))
    assert np.array_equal(gu[4 * slots:], uv.max(0))
    assert np.array_equal(g64[:slots], uv.sum(0).astype(np.uint64))
    as_u64 = [max(int(x) % 2 ** 64 for x in v[:, s]) for s in range(slots)]   # unsigned compare
    assert [int(x) for x in g64[slots:]] == as_u64
    assert np.allclose(f32.get(), (uv & 0xff).sum(0), rtol=1e-6)
    assert np.array_equal(f64.get(), (v * 0.5).sum(0))    # sums of halves of integers are exact in f64


def test_returned_old_values_are_unique_tickets():
    n = 100_000
    counter, order = ac.zeros(1, np.uint32), poison(n, np.uint32)
    load_cuda("atomics").get_function("tickets")(((n + 255) // 256,), (256,), (counter, order, np.int32(n)))
    assert counter.get()[0] == n
    assert np.array_equal(np.sort(order.get()), np.arange(n, dtype=np.uint32))


def test_inc_dec_exch_and_cas_loops():
    n, limit = 1000, 17
    inc, dec = ac.zeros(1, np.uint32), ac.zeros(1, np.uint32)
    exch, cas, cas64 = ac.full(1, -1, np.int32), ac.zeros(1, np.int32), ac.zeros(1, np.uint64)
    load_cuda("atomics").get_function("inc_dec_exch_cas")((8,), (125,), (inc, dec, exch, cas, cas64, np.uint32(limit), np.int32(n)))
    # inc: old >= limit ? 0 : old + 1, applied n times from 0; dec: (old == 0 || old > limit) ? limit : old - 1
    i = d = 0
    for _ in range(n):
        i = 0 if i >= limit else i + 1
        d = limit if d == 0 or d > limit else d - 1
    assert inc.get()[0] == i and dec.get()[0] == d
    assert 0 <= exch.get()[0] < n
    assert cas.get()[0] == n * (n - 1) // 2
    assert cas64.get()[0] == 3 * n * (n - 1) // 2


def test_float_max_through_cas(rng):
    n = 50_000
    x = rng.standard_normal(n).astype(np.float32)
    out = ac.full(1, -np.inf, np.float32)
    load_cuda("atomics").get_function("float_max")(((n + 255) // 256,), (256,), (ac.asarray(x), out, np.int32(n)))
    assert out.get()[0] == x.max()


def test_shared_memory_histogram(rng):
    n = 1 << 20
    data = rng.integers(0, 256, n, dtype=np.uint8)
    data[: n // 4] = 7               # a hot bin: heavy contention on one shared counter
    bins = ac.zeros(256, np.uint32)
    load_cuda("atomics").get_function("shared_histogram")((32,), (256,), (ac.asarray(data), bins, np.int32(n)))
    assert np.array_equal(bins.get(), np.bincount(data, minlength=256).astype(np.uint32))


def _wrap(x, bits):
    return (np.asarray(x, dtype=object) + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)


@pytest.mark.parametrize("slots", [1, 16])
def test_wider_atomics_and_scopes(rng, slots):
    n = 256 * 256
    vals = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    u32 = ac.zeros(3 * slots, np.uint32)
    s64 = ac.asarray(np.concatenate([np.full(slots, 2 ** 63 - 1), np.full(slots, -2 ** 63)]).astype(np.int64))
    b64 = ac.asarray(np.concatenate([np.full(slots, 2 ** 64 - 1, np.uint64), np.zeros(2 * slots, np.uint64)]))
    fx = ac.full(1, -1.0, np.float32)
    load_cuda("atomics").get_function("wide_atomics")((256,), (256,), (u32, s64, b64, fx, ac.asarray(vals), np.int32(n),
                                                                       np.int32(slots)))
    v = vals.reshape(-1, slots)
    uv = v.view(np.uint64)
    assert np.array_equal(u32.get()[:slots], (uv & 0xFFFFFFFF).sum(0) % 2 ** 32)
    assert np.array_equal(u32.get()[slots:2 * slots], np.full(slots, n // slots))
    assert np.array_equal(u32.get()[2 * slots:], np.full(slots, 3 * n // slots))
    assert np.array_equal(s64.get()[:slots], v.min(0))
    assert np.array_equal(s64.get()[slots:], v.max(0))
    g = b64.get()
    assert np.array_equal(g[:slots], np.bitwise_and.reduce(uv | np.uint64(0xF0F0F0F000000000), 0))
    assert np.array_equal(g[slots:2 * slots], np.bitwise_or.reduce(np.uint64(1) << (uv & np.uint64(63)), 0))
    assert np.array_equal(g[2 * slots:], np.bitwise_xor.reduce(uv, 0))
    assert fx.get()[0] == 2.5


@pytest.mark.parametrize("limit,dec0", [(37, 5), (0, 3), (1, 100), (0xFFFFFFFF, 2)])
def test_every_atomic_returns_the_old_value(rng, limit, dec0):
    n = 256 * 64
    f = dict(fcount=ac.zeros(1, np.float32), dcount=ac.zeros(1, np.float64), ucount=ac.full(1, 2 ** 40, np.uint64),
             down=ac.full(1, n, np.int32), inc=ac.zeros(1, np.uint32), dec=ac.full(1, dec0, np.uint32),
             exch=ac.full(1, -7, np.int32), orbits=ac.zeros(n // 32, np.uint32),
             andbits=ac.full(n // 32, 0xFFFFFFFF, np.uint32), xorbits=ac.asarray(np.full(n // 32, 0x0F0F0F0F, np.uint32)),
             cas=ac.zeros(1, np.int32))
    o = dict(o_f=poison(n, np.float32), o_d=poison(n, np.float64), o_u=poison(n, np.uint64), o_down=poison(n, np.int32),
             o_inc=poison(n, np.uint32), o_dec=poison(n, np.uint32), o_exch=poison(n, np.int32), o_or=poison(n, np.uint32),
             o_and=poison(n, np.uint32), o_xor=poison(n, np.uint32), o_cas=poison(n, np.int32))
    args = list(f.values()) + [np.uint32(limit)] + list(o.values()) + [np.int32(n)]
    load_cuda("atomics").get_function("returned_olds")((64,), (256,), tuple(args))
    r = {k: a.get() for k, a in o.items()}
    ticket = np.arange(n)
    assert np.array_equal(np.sort(r["o_f"]), ticket.astype(np.float32)) and f["fcount"].get()[0] == n
    assert np.array_equal(np.sort(r["o_d"]), ticket.astype(np.float64)) and f["dcount"].get()[0] == n
    assert np.array_equal(np.sort(r["o_u"]), 2 ** 40 + ticket.astype(np.uint64))
    assert np.array_equal(np.sort(r["o_down"]), ticket + 1) and f["down"].get()[0] == 0
    assert np.array_equal(np.sort(r["o_cas"]), ticket) and f["cas"].get()[0] == n
    # inc and dec step through a fixed sequence whatever the order: the multiset of old values is known
    seq_inc, seq_dec, i, d = [], [], 0, dec0
    for _ in range(n):
        seq_inc.append(i)
        seq_dec.append(d)
        i = 0 if i >= limit else i + 1
        d = limit if d == 0 or d > limit else d - 1
    assert np.array_equal(np.sort(r["o_inc"]), np.sort(seq_inc)) and f["inc"].get()[0] == i
    assert np.array_equal(np.sort(r["o_dec"]), np.sort(seq_dec)) and f["dec"].get()[0] == d
    # exchange: the old values and the final value are the initial value and every thread id, once each
    assert np.array_equal(np.sort(np.append(r["o_exch"], f["exch"].get())), np.append(-7, ticket))
    # or/and/xor of one bit per thread: each old value holds a different number of the word's bits
    for name, final, has_own in (("o_or", 0xFFFFFFFF, False), ("o_and", 0, True)):
        old = r[name].reshape(-1, 32)
        own = (old >> np.arange(32, dtype=np.uint32)) & 1
        assert (own == int(has_own)).all(), name
        pop = np.array([[bin(int(x)).count("1") for x in row] for row in old])
        assert (np.sort(pop, axis=1) == (np.arange(32) if not has_own else np.arange(1, 33))).all(), name
    assert (f["orbits"].get() == 0xFFFFFFFF).all() and (f["andbits"].get() == 0).all()
    xo = r["o_xor"].reshape(-1, 32)
    flipped = xo ^ np.uint32(0x0F0F0F0F)                 # the bits other threads had flipped so far
    own = (flipped >> np.arange(32, dtype=np.uint32)) & 1
    assert (own == 0).all()
    pop = np.sort(np.array([[bin(int(x)).count("1") for x in row] for row in flipped]), axis=1)
    assert (pop == np.arange(32)).all()
    assert (f["xorbits"].get() == 0xF0F0F0F0).all()


@pytest.mark.parametrize("block", [32, 100, 256, 1024])
def test_shared_memory_atomics(rng, block):
    grid, limit = 6, 9
    vals = rng.integers(-2 ** 31, 2 ** 31, (grid, block), dtype=np.int64).astype(np.int32)
    oi, ou, o64 = poison((grid, 4), np.int32), poison((grid, 6), np.uint32), poison((grid, 2), np.uint64)
    of, od, tickets = poison(grid, np.float32), poison(grid, np.float64), poison((grid, block), np.int32)
    load_cuda("atomics").get_function("shared_atomics")((grid,), (block,), (ac.asarray(vals), oi, ou, o64, of, od, tickets,
                                                                            np.uint32(limit)))
    v = vals.astype(np.int64)
    uv = v & 0xFFFFFFFF
    i, d = 0, 0
    for _ in range(block):
        i = 0 if i >= limit else i + 1
        d = limit if d == 0 or d > limit else d - 1
    g = oi.get()
    assert np.array_equal(g[:, 0], _wrap(v.sum(1), 32).astype(np.int64))
    assert np.array_equal(g[:, 1], _wrap(-v.sum(1), 32).astype(np.int64))
    assert np.array_equal(g[:, 2], v.min(1)) and np.array_equal(g[:, 3], v.max(1))
    gu = ou.get().astype(np.int64)
    assert np.array_equal(gu[:, 0], np.bitwise_and.reduce(uv | 0xff00ff00, 1))
    assert np.array_equal(gu[:, 1], np.bitwise_or.reduce(uv & 0x0f0f0f0f, 1))
    assert np.array_equal(gu[:, 2], np.bitwise_xor.reduce(uv, 1))
    assert (gu[:, 3] == i).all() and (gu[:, 4] == d).all()
    assert np.array_equal(gu[:, 5], uv.max(1))
    g64 = o64.get()
    assert np.array_equal(g64[:, 0], uv.sum(1).astype(np.uint64))
    assert np.array_equal(g64[:, 1], (uv & 0xffff).sum(1).astype(np.uint64))
    assert np.array_equal(of.get(), (uv & 0xf).sum(1).astype(np.float32))      # small integers: exact
    assert np.array_equal(od.get(), v.sum(1).astype(np.float64))               # below 2**53: exact
    assert (np.sort(tickets.get(), axis=1) == np.arange(block)).all()


def test_red_instructions(rng):
    """`red` (no result), global, shared and generic addresses, every operation."""
    n, limit = 256 * 256, 1000
    vals = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    gi = ac.asarray(np.array([0, 2 ** 31 - 1, -2 ** 31], np.int32))
    gu = ac.asarray(np.array([0xFFFFFFFF, 0, 0xFFFFFFFF, 0, 0, 0, 0, 0, 0], np.uint32))
    g64, gf, gd = ac.zeros(1, np.uint64), ac.zeros(1, np.float32), ac.zeros(1, np.float64)
    load_cuda("atomics").get_function("red_forms")((256,), (256,), (ac.asarray(vals), gi, gu, g64, gf, gd,
                                                                    np.uint32(limit), np.int32(n)))
    v = vals.astype(np.int64)
    uv = v & 0xFFFFFFFF
    i, d = 0, 0
    for _ in range(n):
        i = 0 if i >= limit else i + 1
        d = limit if d == 0 or d > limit else d - 1
    assert list(gi.get()) == [int(_wrap(v.sum(), 32)), v.min(), v.max()]
    want_u = [uv.min(), uv.max(), np.bitwise_and.reduce(uv | 0x0ff00ff0), np.bitwise_or.reduce(uv & 0x11111111),
              np.bitwise_xor.reduce(uv), i, d, n, (uv & 0xffff).sum() % 2 ** 32]
    assert [int(x) for x in gu.get()] == [int(x) for x in want_u]
    assert g64.get()[0] == uv.sum()
    assert gf.get()[0] == (uv & 0xff).sum()          # every partial sum is an integer below 2**24: exact
    assert gd.get()[0] == v.sum()


def test_half2_atomic_add():
    """Optional (sm_70+): atomicAdd on __half2 adds both halves (atom.add.noftz.f16x2)."""
    n = 1024
    acc = ac.zeros(8, np.float16)
    load_cuda("atomics").get_function("half2_add")((4,), (256,), (acc, np.int32(n)))
    t = np.arange(n)
    want = np.zeros((4, 2))
    np.add.at(want[:, 0], t & 3, 1)
    np.add.at(want[:, 1], t & 3, (t & 7) - 3)
    assert np.array_equal(acc.get().reshape(4, 2).astype(np.float64), want)


@pytest.mark.parametrize("grid", [1, 7, 64])
def test_last_block_sum_with_fences(rng, grid):
    n = 200_000
    x = rng.standard_normal(n).astype(np.float32)
    partial, done, total = poison(grid, np.float32), ac.zeros(1, np.uint32), poison(1, np.float32)
    k = load_cuda("atomics").get_function("last_block_sum")
    for _ in range(2):                        # the counter is reset by the last block: run twice
        k((grid,), (256,), (ac.asarray(x), partial, done, total, np.int32(n)))
        assert np.isclose(total.get()[0], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
        assert done.get()[0] == 0
        assert np.isclose(partial.get().astype(np.float64).sum(), x.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)


def test_double_min_through_64_bit_cas(rng):
    n = 40_000
    x = rng.standard_normal(n) * 1e10 + 5e10           # all positive: unsigned order of the bits is the order
    out, umin = ac.full(1, np.inf, np.float64), ac.full(1, 2 ** 64 - 1, np.uint64)
    load_cuda("atomics").get_function("double_min")(((n + 127) // 128,), (128,), (ac.asarray(x), out, umin, np.int32(n)))
    assert out.get()[0] == x.min()
    assert umin.get()[0] == x.view(np.uint64).min()


def test_16_bit_cas_on_neighbouring_halves():
    n = 64 * 256
    c = ac.asarray(np.array([0, 0, 0, 0, 0xBEEF, 0xBEEF], np.uint16))
    load_cuda("atomics").get_function("cas16_counters")((64,), (256,), (c, np.int32(n)))
    per = n // 4
    want = [(per * (1 + k)) % 2 ** 16 for k in range(4)] + [0xBEEF, 0xBEEF]
    assert [int(x) for x in c.get()] == want
