// Row-wise kernels of LLM training (softmax, layernorm) in the other spellings llm.c and
// its readers use: a warp per row with plain shuffles, a warp per row through cooperative
// groups (an online softmax; cg::reduce, streaming loads and stores as llm.c's
// layernorm_forward_kernel3 writes them), and a block per row with a shared-memory sum.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

// NVRTC has no <math.h> (no INFINITY): minus infinity by its bits
#define NEG_INF (-__int_as_float(0x7f800000))

__device__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

// A warp per row, three passes over it: the maximum, the exponentials and their sum, the scaling.
extern "C" __global__ void softmax_warp(float* out, const float* inp, int N, int C) {
    int lane = threadIdx.x % 32;
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (row >= N) return;                  // whole warps leave together
    const float* x = inp + (size_t)row * C;
    float* y = out + (size_t)row * C;
    float m = NEG_INF;
    for (int i = lane; i < C; i += 32) m = fmaxf(m, x[i]);
    m = warp_max(m);
    float s = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float e = expf(x[i] - m);
        y[i] = e;
        s += e;
    }
    float inv = 1.0f / warp_sum(s);
    for (int i = lane; i < C; i += 32) y[i] *= inv;
}

// A warp per row with cooperative groups, the online softmax: one pass keeps a running
// maximum and a sum rescaled to it, a second writes exp(x - max) / sum.
extern "C" __global__ void softmax_online_cg(float* out, const float* inp, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (row >= N) return;
    const float* x = inp + (size_t)row * C;
    float* y = out + (size_t)row * C;
    float maxval = NEG_INF, sumval = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        float v = x[i], m = fmaxf(maxval, v);
        sumval = sumval * expf(maxval - m) + expf(v - m);
        maxval = m;
    }
    float rowmax = cg::reduce(warp, maxval, cg::greater<float>());
    sumval *= maxval == NEG_INF ? 0.0f : expf(maxval - rowmax);   // a lane with no elements adds nothing
    float inv = 1.0f / cg::reduce(warp, sumval, cg::plus<float>());
    for (int i = warp.thread_rank(); i < C; i += warp.size()) __stcs(y + i, expf(__ldcs(x + i) - rowmax) * inv);
}

// A warp per row with cooperative groups, llm.c's layernorm_forward_kernel3 spelling.
extern "C" __global__ void layernorm_cg(float* out, float* mean, float* rstd, const float* inp,
                                        const float* weight, const float* bias, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (idx >= N) return;
    const float* x = inp + (size_t)idx * C;
    float sum = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) sum += x[i];
    float m = cg::reduce(warp, sum, cg::plus<float>()) / C;
    if (warp.thread_rank() == 0) __stcs(mean + idx, m);
    sum = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        float diff = x[i] - m;
        sum += diff * diff;
    }
    float s = rsqrtf(cg::reduce(warp, sum, cg::plus<float>()) / C + 1e-5f);
    if (warp.thread_rank() == 0) __stcs(rstd + idx, s);
    float* o = out + (size_t)idx * C;
    for (int c = warp.thread_rank(); c < C; c += warp.size()) {
        float n = s * (__ldcs(x + c) - m);
        __stcs(o + c, n * weight[c] + bias[c]);
    }
}

// The block's sum: each warp's through shuffles, then the warps' sums through shared memory.
__device__ float block_sum(float v, float* shared) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_sum(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < warps ? shared[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();                       // shared is reused by the next call
    return v;
}

// A block per row: every thread strides over the row; the sums go through block_sum.
extern "C" __global__ void layernorm_block(float* out, float* mean, float* rstd, const float* inp,
                                           const float* weight, const float* bias, int N, int C) {
    __shared__ float shared[32];
    int row = blockIdx.x;
    const float* x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int i = threadIdx.x; i < C; i += blockDim.x) s += x[i];
    float m = block_sum(s, shared) / C;
    float v = 0.0f;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        float d = x[i] - m;
        v += d * d;
    }
    float r = rsqrtf(block_sum(v, shared) / C + 1e-5f);
    if (threadIdx.x == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
    float* y = out + (size_t)row * C;
    for (int i = threadIdx.x; i < C; i += blockDim.x) y[i] = r * (x[i] - m) * weight[i] + bias[i];
}
