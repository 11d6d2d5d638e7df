// Sums written the ways people write them.

// The classic shared-memory tree: one element per thread, one partial sum per block;
// the host launches it again on the partials until one value is left. In float and double.
#define REDUCE_TREE(NAME, REAL)                                                            \
    extern "C" __global__ void NAME(const REAL* in, REAL* out, int n) {                    \
        extern __shared__ REAL sdata_##NAME[];                                             \
        unsigned int tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;         \
        sdata_##NAME[tid] = i < n ? in[i] : (REAL)0;                                       \
        __syncthreads();                                                                   \
        for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {                            \
            if (tid < s) sdata_##NAME[tid] += sdata_##NAME[tid + s];                       \
            __syncthreads();                                                               \
        }                                                                                  \
        if (tid == 0) out[blockIdx.x] = sdata_##NAME[0];                                   \
    }

REDUCE_TREE(reduce_tree, float)
REDUCE_TREE(reduce_tree_f64, double)

// The same tree whose last warp sums without barriers through a volatile pointer (the
// warp-synchronous tail of NVIDIA's older reduction samples), blocks of 256.
__device__ void warp_tail_sum(volatile float* s, unsigned tid) {
    s[tid] += s[tid + 32]; s[tid] += s[tid + 16]; s[tid] += s[tid + 8];
    s[tid] += s[tid + 4];  s[tid] += s[tid + 2];  s[tid] += s[tid + 1];
}

extern "C" __global__ void reduce_tree_warpsync(const float* in, float* out, int n) {
    __shared__ float sdata[256];
    unsigned int tid = threadIdx.x, i = blockIdx.x * 256 + tid;
    sdata[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = 128; s > 32; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid < 32) warp_tail_sum(sdata, tid);
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// Warp shuffles: a grid-stride sum per thread, a shuffle tree per warp, the warps' sums
// through shared memory, one partial per block; a second launch of one block sums those.
__inline__ __device__ float warp_sum(float v) {
    for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffff, v, offset);
    return v;
}

__inline__ __device__ float block_sum(float v) {
    static __shared__ float shared[32];
    int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize;
    v = warp_sum(v);
    if (lane == 0) shared[wid] = v;
    __syncthreads();
    v = threadIdx.x < blockDim.x / warpSize ? shared[lane] : 0.0f;
    if (wid == 0) v = warp_sum(v);
    return v;
}

extern "C" __global__ void reduce_shfl(const float* in, float* out, int n) {
    float sum = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) sum += in[i];
    sum = block_sum(sum);
    if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

// One atomicAdd per element into a single total.
extern "C" __global__ void reduce_atomic_f32(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, in[i]);
}

extern "C" __global__ void reduce_atomic_i32(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, in[i]);
}

// CUB's block reduction, the two-pass form CUB-based code takes: a grid-stride sum per
// thread, cub::BlockReduce over the block, one partial per block; the same kernel on one
// block sums the partials.
#include <cub/block/block_reduce.cuh>
#define CUB_THREADS 256

extern "C" __global__ void reduce_cub(const float* in, float* out, int n) {
    typedef cub::BlockReduce<float, CUB_THREADS> BlockReduce;
    __shared__ typename BlockReduce::TempStorage temp;
    float sum = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) sum += in[i];
    float total = BlockReduce(temp).Sum(sum);
    if (threadIdx.x == 0) out[blockIdx.x] = total;
}
