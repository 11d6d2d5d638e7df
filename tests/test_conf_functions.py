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
