"""The benchmark kernels as Python for numba-cuda, run by Numba's CUDA simulator
(NUMBA_ENABLE_CUDASIM=1, set here before numba is imported). The simulator has no warp
shuffles, so the steps that use them in cuda/*.cu go through shared memory here."""
import math
import os

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

from numba import cuda, float32, int32, uint32  # noqa: E402


@cuda.jit
def saxpy(n, a, x, y):
    i = cuda.grid(1)
    if i < n:
        y[i] = a * x[i] + y[i]


@cuda.jit
def vector_add(a, b, c, n):
    i = cuda.grid(1)
    if i < n:
        c[i] = a[i] + b[i]


@cuda.jit
def sgemm(A, B, C, n):
    As = cuda.shared.array((16, 16), float32)
    Bs = cuda.shared.array((16, 16), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.blockIdx.y * 16 + ty, cuda.blockIdx.x * 16 + tx
    acc = float32(0)
    for t in range(0, n, 16):
        As[ty, tx] = A[row, t + tx]
        Bs[ty, tx] = B[t + ty, col]
        cuda.syncthreads()
        for k in range(16):
            acc += As[ty, k] * Bs[k, tx]
        cuda.syncthreads()
    C[row, col] = acc


@cuda.jit
def reduce_sum(x, out, n):
    s = cuda.shared.array(256, float32)
    tid = cuda.threadIdx.x
    v = float32(0)
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        v += x[i]
    s[tid] = v
    cuda.syncthreads()
    o = cuda.blockDim.x // 2
    while o > 0:
        if tid < o:
            s[tid] += s[tid + o]
        cuda.syncthreads()
        o //= 2
    if tid == 0:
        cuda.atomic.add(out, 0, s[0])


@cuda.jit
def histogram256(data, bins, n):
    h = cuda.shared.array(256, uint32)
    tid = cuda.threadIdx.x
    for i in range(tid, 256, cuda.blockDim.x):
        h[i] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        cuda.atomic.add(h, data[i], 1)
    cuda.syncthreads()
    for i in range(tid, 256, cuda.blockDim.x):
        if h[i]:
            cuda.atomic.add(bins, i, h[i])


@cuda.jit
def stencil5(inp, out, nx, ny):
    x, y = cuda.grid(2)
    if x >= nx or y >= ny:
        return
    if x == 0 or y == 0 or x == nx - 1 or y == ny - 1:
        out[y, x] = inp[y, x]
        return
    out[y, x] = float32(0.5) * inp[y, x] + float32(0.125) * (
        (inp[y, x - 1] + inp[y, x + 1]) + (inp[y - 1, x] + inp[y + 1, x]))


@cuda.jit
def transpose(inp, out, rows, cols):
    tile = cuda.shared.array((32, 33), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x, y = cuda.blockIdx.x * 32 + tx, cuda.blockIdx.y * 32 + ty
    for j in range(0, 32, 8):
        if x < cols and y + j < rows:
            tile[ty + j, tx] = inp[y + j, x]
    cuda.syncthreads()
    x, y = cuda.blockIdx.y * 32 + tx, cuda.blockIdx.x * 32 + ty
    for j in range(0, 32, 8):
        if x < rows and y + j < cols:
            out[y + j, x] = tile[tx, ty + j]


@cuda.jit(device=True)
def _block_inclusive_scan(v, s):
    tid = cuda.threadIdx.x
    s[tid] = v
    cuda.syncthreads()
    o = 1
    while o < cuda.blockDim.x:
        u = s[tid - o] if tid >= o else 0
        cuda.syncthreads()
        s[tid] += u
        cuda.syncthreads()
        o *= 2
    v = s[tid]
    cuda.syncthreads()
    return v


@cuda.jit
def scan_blocks(inp, out, totals, n):
    s = cuda.shared.array(1024, int32)
    tid = cuda.threadIdx.x
    base = (cuda.blockIdx.x * cuda.blockDim.x + tid) * 4
    run = 0
    for k in range(4):
        if base + k < n:
            run += inp[base + k]
    before = _block_inclusive_scan(run, s) - run
    for k in range(4):
        if base + k < n:
            before += inp[base + k]
            out[base + k] = before
    if tid == cuda.blockDim.x - 1:
        totals[cuda.blockIdx.x] = before


@cuda.jit
def scan_totals(totals, m):
    s = cuda.shared.array(1024, int32)
    carry = cuda.shared.array(1, int32)
    tid = cuda.threadIdx.x
    if tid == 0:
        carry[0] = 0
    cuda.syncthreads()
    for start in range(0, m, cuda.blockDim.x):
        i = start + tid
        incl = _block_inclusive_scan(totals[i] if i < m else 0, s) + carry[0]
        if i < m:
            totals[i] = incl
        cuda.syncthreads()
        if tid == cuda.blockDim.x - 1:
            carry[0] = incl
        cuda.syncthreads()


@cuda.jit
def scan_add(out, totals, n):
    b = cuda.blockIdx.x
    if b == 0:
        return
    add = totals[b - 1]
    chunk = cuda.blockDim.x * 4
    for k in range(cuda.threadIdx.x, chunk, cuda.blockDim.x):
        if b * chunk + k < n:
            out[b * chunk + k] += add


@cuda.jit(device=True)
def _block_reduce(v, s, is_max):
    tid = cuda.threadIdx.x
    s[tid] = v
    cuda.syncthreads()
    o = cuda.blockDim.x // 2
    while o > 0:
        if tid < o:
            s[tid] = max(s[tid], s[tid + o]) if is_max else s[tid] + s[tid + o]
        cuda.syncthreads()
        o //= 2
    v = s[0]
    cuda.syncthreads()
    return v


@cuda.jit
def softmax_forward(out, inp, N, C):
    s = cuda.shared.array(1024, float32)
    row, tid, bd = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x
    m = -math.inf
    for i in range(tid, C, bd):
        m = max(m, inp[row, i])
    offset = _block_reduce(m, s, True)
    acc = float32(0)
    for i in range(tid, C, bd):
        e = math.exp(inp[row, i] - offset)
        out[row, i] = e
        acc += e
    inv = float32(1) / _block_reduce(acc, s, False)
    for i in range(tid, C, bd):
        out[row, i] *= inv


@cuda.jit(device=True)
def _warp_sum_in_shared(v, s):
    """The sum of v over this thread's warp, through shared memory (the simulator has no
    shuffles); every lane gets it."""
    tid = cuda.threadIdx.x
    lane, w = tid % 32, tid // 32
    s[tid] = v
    cuda.syncthreads()
    o = 16
    while o > 0:
        if lane < o:
            s[tid] += s[tid + o]
        cuda.syncthreads()
        o //= 2
    v = s[w * 32]
    cuda.syncthreads()
    return v


@cuda.jit
def layernorm_forward(out, mean, rstd, inp, weight, bias, N, C):
    s = cuda.shared.array(1024, float32)
    tid = cuda.threadIdx.x
    lane, w = tid % 32, tid // 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + w
    a = float32(0)
    for i in range(lane, C, 32):
        a += inp[row, i]
    m = _warp_sum_in_shared(a, s) / C
    v = float32(0)
    for i in range(lane, C, 32):
        d = inp[row, i] - m
        v += d * d
    r = float32(1) / math.sqrt(_warp_sum_in_shared(v, s) / C + float32(1e-5))
    if lane == 0:
        mean[row] = m
        rstd[row] = r
    for i in range(lane, C, 32):
        out[row, i] = r * (inp[row, i] - m) * weight[i] + bias[i]


@cuda.jit
def nbody_accel(pos, acc, n, eps2):
    tile = cuda.shared.array((256, 4), float32)
    tid, bd = cuda.threadIdx.x, cuda.blockDim.x
    i = cuda.grid(1)
    px, py, pz = pos[i, 0], pos[i, 1], pos[i, 2]
    ax = ay = az = float32(0)
    for t in range(0, n, bd):
        for c in range(4):
            tile[tid, c] = pos[t + tid, c]
        cuda.syncthreads()
        for j in range(bd):
            dx, dy, dz = tile[j, 0] - px, tile[j, 1] - py, tile[j, 2] - pz
            inv = float32(1) / math.sqrt(dx * dx + dy * dy + dz * dz + eps2)
            s = tile[j, 3] * inv * inv * inv
            ax += dx * s
            ay += dy * s
            az += dz * s
        cuda.syncthreads()
    acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3] = ax, ay, az, float32(0)


@cuda.jit
def bitonic_step(data, j, k):
    i = cuda.grid(1)
    l = i ^ j
    if l > i:
        a, b = data[i], data[l]
        if (a > b) == ((i & k) == 0):
            data[i] = b
            data[l] = a
