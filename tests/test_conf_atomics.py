"""Atomics with real contention (blocks run concurrently on all cores): integer results
exact, float sums within rounding, returned old values unique, CAS loops, shared memory."""
import numpy as np

import anycuda as ac
from conformance import load_cuda, poison


def test_global_atomics_under_contention(rng):
    n, slots = 256 * 256, 8
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
