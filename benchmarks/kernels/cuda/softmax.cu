// Row-wise softmax forward as LLM training code writes it (llm.c style): one block per row,
// a block-wide max and sum through warp shuffles and shared memory, exp(x - max) / sum.
__device__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

// NVRTC has no <math.h> (no INFINITY): minus infinity by its bits
#define NEG_INF (-__int_as_float(0x7f800000))

extern "C" __global__ void softmax_forward(float* out, const float* inp, int N, int C) {
    __shared__ float shared[32];
    int row = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int warps = blockDim.x >> 5;
    const float* x = inp + (size_t)row * C;
    float* y = out + (size_t)row * C;

    float m = NEG_INF;
    for (int i = tid; i < C; i += blockDim.x) m = fmaxf(m, x[i]);
    m = warp_max(m);
    if (lane == 0) shared[warp] = m;
    __syncthreads();
    if (tid < 32) {
        m = warp_max(tid < warps ? shared[tid] : NEG_INF);
        if (tid == 0) shared[0] = m;
    }
    __syncthreads();
    float offset = shared[0];
    __syncthreads();

    float s = 0.0f;
    for (int i = tid; i < C; i += blockDim.x) {
        float e = expf(x[i] - offset);
        y[i] = e;
        s += e;
    }
    s = warp_sum(s);
    if (lane == 0) shared[warp] = s;
    __syncthreads();
    if (tid < 32) {
        s = warp_sum(tid < warps ? shared[tid] : 0.0f);
        if (tid == 0) shared[0] = s;
    }
    __syncthreads();
    float inv = 1.0f / shared[0];
    for (int i = tid; i < C; i += blockDim.x) y[i] *= inv;
}
