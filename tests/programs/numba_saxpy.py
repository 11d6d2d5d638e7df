"""numba-cuda, unchanged: a saxpy kernel and a block reduction (shared memory, syncthreads, an
atomic add), device arrays, to_device/copy_to_host. Prints inputs and results as JSON; the test
checks them against numpy."""
import json

import numpy as np
from numba import cuda, float32

BLOCK = 128


@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def block_sums(x, partial, total, counts):
    s = cuda.shared.array(BLOCK, dtype=float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i] if i < x.size else float32(0)
    if i < x.size:
        cuda.atomic.add(counts, int(x[i] * 4), 1)       # a 4-bin histogram of values in [0, 1)
    cuda.syncthreads()
    step = BLOCK // 2
    while step > 0:
        if t < step:
            s[t] += s[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = s[0]
        cuda.atomic.add(total, 0, s[0])


n = 5000
rng = np.random.default_rng(3)
x = rng.random(n, dtype=np.float32)
y = rng.random(n, dtype=np.float32)
blocks = (n + BLOCK - 1) // BLOCK

dx, dy = cuda.to_device(x), cuda.to_device(y)
dout = cuda.device_array(n, np.float32)
saxpy[blocks, BLOCK](np.float32(2.5), dx, dy, dout)
out = dout.copy_to_host()

partial = cuda.device_array(blocks, np.float32)
total = cuda.to_device(np.zeros(1, np.float32))
counts = cuda.to_device(np.zeros(4, np.int32))
block_sums[blocks, BLOCK](dx, partial, total, counts)
cuda.synchronize()

print(json.dumps({"x": x.tolist(), "y": y.tolist(), "a": 2.5, "saxpy": out.tolist(),
                  "block": BLOCK, "partial": partial.copy_to_host().tolist(),
                  "total": float(total.copy_to_host()[0]), "counts": counts.copy_to_host().tolist()}))
