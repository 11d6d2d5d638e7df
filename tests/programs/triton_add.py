"""A Triton kernel, unchanged, on CuPy's memory: Triton generates PTX and assembles it with the
ptxas that TRITON_PTXAS_PATH names (anycuda's under `anycuda run`). Prints JSON for the test."""
import json

import numpy as np
import triton
import triton.language as tl

import cupy as cp


@triton.jit
def scaled_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


class Tensor:
    """What Triton asks of an argument it passes as a pointer."""
    def __init__(self, array):
        self.array, self.dtype = array, array.dtype

    def data_ptr(self):
        return self.array.data.ptr


rng = np.random.default_rng()
n = 10_001
x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
out = cp.full(n, cp.nan, cp.float32)
scaled_add[(triton.cdiv(n, 512),)](Tensor(cp.asarray(x)), Tensor(cp.asarray(y)), Tensor(out), n, 2.5, BLOCK=512)
print(json.dumps({"x": x.tolist(), "y": y.tolist(), "a": 2.5, "out": out.get().tolist()}))
