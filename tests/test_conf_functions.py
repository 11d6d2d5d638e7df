"""Device functions that stay calls: recursion, function pointers, struct returns, local arrays."""
import math

import numpy as np

import anycuda as ac
from conformance import load_cuda, poison


def test_recursion_pointers_and_struct_returns(rng):
    n = 256
    v = rng.integers(-100, 100, 64).astype(np.int32)
    out, fout, dout = poison((n, 4), np.int64), poison((n, 2), np.float32), poison(n, np.float64)
    load_cuda("functions").get_function("calls")((2,), (128,), (ac.asarray(v), out, fout, dout, np.int32(n)))
    g, f = out.get(), fout.get()
    fib = [0, 1]
    for _ in range(20):
        fib.append(fib[-1] + fib[-2])
    for t in range(n):
        assert g[t, 0] == math.factorial(t % 21)
        assert g[t, 1] == fib[t % 16]
        assert g[t, 2] == v[: 1 + t % 64].sum()
        assert g[t, 3] == t + 3
        x = np.float32(t + 0.5)
        assert f[t, 0] == [2 * x, x * x, -x][t % 3]
        assert f[t, 1] == np.float32(((t * 7) & 31) * t + (t & 31) * t)
    assert np.array_equal(dout.get(), np.full(n, 4.5))


def _tree(depth, k):
    return sum((j * 2654435761) % 1000 for j in range(k << depth, (k + 1) << depth))


def _chain(n, acc):
    while n:
        acc = (acc * 0.5 if n & 1 else acc) + n
        n -= 1
    return acc


def test_struct_passing_deep_recursion_and_indirect_calls(rng):
    n = 96
    v = rng.integers(-800, 800, n + 8) / 8.0        # eighths: every product and sum below is exact
    sel = rng.integers(0, 32, n).astype(np.int32)
    out, dout = poison((n, 8), np.int64), poison((n, 12), np.float64)
    load_cuda("functions").get_function("calls2")((2,), (48,), (ac.asarray(v), ac.asarray(sel), out, dout, np.int32(n)))
    g, d = out.get(), dout.get()
    ops = [lambda x, k: x ** k, lambda x, k: x * k, lambda x, k: x + k, lambda x, k: -x - k]
    for t in range(n):
        x = v[t]
        c = (t - 5 + 128) % 256 - 128
        f = [1.5, -2.0, 0.25, 1.5]
        wd = [x, 2 * x, -x, 3.0]
        assert list(d[t, :4]) == [wd[j] * f[j] + t * 100 for j in range(4)], f"row {t}: struct return"
        assert g[t, 0] == (t << 33) + c + t + (t + 6), f"row {t}: struct fields"
        assert d[t, 4] == (4321 if t & 1 else 2143), f"row {t}: float4 return"
        assert g[t, 1] == int(np.trunc(x * 10)) and d[t, 5] == x * 10 - np.trunc(x * 10), f"row {t}: out-parameters"
        assert g[t, 2] == _tree(10 + t % 3, t), f"row {t}: tree recursion depth {10 + t % 3}"
        assert g[t, 3] == int((t * 7 % 200) % 2 == 0), f"row {t}: mutual recursion"
        assert d[t, 6] == _chain(12 + t % 9, x), f"row {t}: linear recursion"
        assert d[t, 7] == ops[sel[t] & 3](x, t % 5), f"row {t}: __constant__ function table"
        k = t % 7
        assert d[t, 8] == sum(ops[1 + (t & 1)](v[j], k) for j in range(4)), f"row {t}: local function table"
        assert d[t, 9] == sum(ops[(sel[t] >> 2) & 3](v[4 + j], 2) for j in range(3)), f"row {t}: pointer argument"
        area = x * x if sel[t] & 16 else 0.5 * x * 3.0
        assert d[t, 10] == area * 10 + (4 if sel[t] & 16 else 3) and d[t, 11] == area, f"row {t}: virtual calls"
