// LayerNorm forward as LLM training code writes it (llm.c style): one warp per row of C
// channels, mean and variance through warp shuffles; saves mean and rstd for the backward.
__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

extern "C" __global__ void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                             const float* weight, const float* bias, int N, int C) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;                  // whole warps leave together
    const float* x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int i = lane; i < C; i += 32) s += x[i];
    float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float d = x[i] - m;
        v += d * d;
    }
    float r = rsqrtf(warp_sum(v) / C + 1e-5f);
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
    float* y = out + (size_t)row * C;
    for (int i = lane; i < C; i += 32) y[i] = r * (x[i] - m) * weight[i] + bias[i];
}
