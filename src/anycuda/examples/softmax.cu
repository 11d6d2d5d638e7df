// Row-wise softmax as written in LLM training code: one block per row, warp-shuffle
// max and sum, shared memory between warps.
extern "C" __global__ void softmax_rows(const float* x, float* y, int cols) {
    __shared__ float scratch[32];
    const float* row = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) / 32;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, row[i]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, off));
    if (lane == 0) scratch[warp] = m;
    __syncthreads();
    m = lane < nwarps ? scratch[lane] : -INFINITY;
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, off));
    __syncthreads();
    float s = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) s += expf(row[i] - m);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off);
    if (lane == 0) scratch[warp] = s;
    __syncthreads();
    s = lane < nwarps ? scratch[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) out[i] = expf(row[i] - m) / s;
}
