"""CuPy's own NCCL binding (cupy.cuda.nccl), unchanged, over the devices of one process under
`anycuda run` (ANYCUDA_DEVICES=3): ncclCommInitAll, a grouped all-reduce on every device's
legacy default stream, a broadcast and an all-gather on streams of their own. Inputs from the
file argv[1] (float32, 3 x N); prints the results as JSON lists."""
import json
import sys

import cupy as cp
import numpy as np
from cupy.cuda import nccl

data = np.fromfile(sys.argv[1], np.float32).reshape(3, -1)
n = data.shape[1]
comms = nccl.NcclCommunicator.initAll(3)
xs, ys, gathered, streams = [], [], [], []
for d in range(3):
    with cp.cuda.Device(d):
        xs.append(cp.asarray(data[d]))
        ys.append(cp.full(n, cp.nan, cp.float32))
        gathered.append(cp.full(3 * n, cp.nan, cp.float32))
        # blocking streams: their all-gather reads what the all-reduce on the legacy stream wrote
        streams.append(cp.cuda.Stream())
nccl.groupStart()
for d in range(3):
    with cp.cuda.Device(d):
        comms[d].allReduce(xs[d].data.ptr, ys[d].data.ptr, n, nccl.NCCL_FLOAT32, nccl.NCCL_MAX,
                           cp.cuda.Stream.null.ptr)
nccl.groupEnd()
nccl.groupStart()
for d in range(3):
    with cp.cuda.Device(d):
        comms[d].bcast(xs[d].data.ptr, n, nccl.NCCL_FLOAT32, 2, streams[d].ptr)
        comms[d].allGather(ys[d].data.ptr, gathered[d].data.ptr, n, nccl.NCCL_FLOAT32, streams[d].ptr)
nccl.groupEnd()
out = {"version": nccl.get_version(), "ranks": [c.rank_id() for c in comms]}
for d in range(3):
    with cp.cuda.Device(d):
        streams[d].synchronize()
        out[f"max{d}"] = ys[d].get().tolist()
        out[f"bcast{d}"] = xs[d].get().tolist()
        out[f"gathered{d}"] = gathered[d].get().tolist()
print(json.dumps(out))
