"""saxpy with cuda.core: compile CUDA C++ with NVRTC to PTX (`--cubin`: to machine code, as
cuda.core users ask on a GPU), or load PTX given on the command line;
launch on a stream, copy back; prints the results as JSON for the test to check."""
import ctypes
import json
import sys

import numpy as np
from cuda.core import (Device, LaunchConfig, LegacyPinnedMemoryResource, ObjectCode, Program,
                       ProgramOptions, launch)

SOURCE = r"""
extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *out, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"""

dev = Device()
dev.set_current()
stream = dev.create_stream()
if len(sys.argv) > 1 and sys.argv[1] != "--cubin":
    code = ObjectCode.from_ptx(sys.argv[1])          # a str is a file name: cuLibraryLoadFromFile
else:
    target = "cubin" if sys.argv[1:] == ["--cubin"] else "ptx"
    code = Program(SOURCE, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(target)
kernel = code.get_kernel("saxpy")

n = 3000
nbytes = n * 4
rng = np.random.default_rng(7)
x = rng.random(n, dtype=np.float32)
y = rng.random(n, dtype=np.float32)

pinned = LegacyPinnedMemoryResource()
host = [pinned.allocate(nbytes) for _ in range(3)]
hx, hy, hout = (np.ctypeslib.as_array((ctypes.c_float * n).from_address(int(b.handle))) for b in host)
hx[:], hy[:], hout[:] = x, y, np.nan
dx, dy, dout = (dev.allocate(nbytes, stream=stream) for _ in range(3))
dx.copy_from(host[0], stream=stream)
dy.copy_from(host[1], stream=stream)
config = LaunchConfig(grid=(n + 255) // 256, block=256)
launch(stream, config, kernel, np.float32(2.5), dx, dy, dout, np.uint64(n))
host[2].copy_from(dout, stream=stream)
stream.sync()
print(json.dumps({"x": x.tolist(), "y": y.tolist(), "a": 2.5, "out": hout.tolist(), "device": dev.name}))
