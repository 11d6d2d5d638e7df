// Warp collectives: shuffles with every width, votes, matches, reductions, activemask.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

extern "C" __global__ void shuffles(const int* in, const unsigned* lanes, int* out, int width) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[t];
    unsigned l = lanes[t];
    int* o = out + 4 * t;
    o[0] = __shfl_sync(0xffffffff, v, l, width);
    o[1] = __shfl_up_sync(0xffffffff, v, l % 32, width);
    o[2] = __shfl_down_sync(0xffffffff, v, l % 32, width);
    o[3] = __shfl_xor_sync(0xffffffff, v, l % 32, width);
}

extern "C" __global__ void shuffle_wide(const double* in, double* out, long long* out64) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = __shfl_xor_sync(0xffffffff, in[t], 5);
    long long v = (long long)(in[t] * 1e6);
    out64[t] = __shfl_down_sync(0xffffffff, v, 3);
}

extern "C" __global__ void votes(const int* pred, unsigned* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int p = pred[t];
    unsigned* o = out + 6 * t;
    o[0] = __ballot_sync(0xffffffff, p);
    o[1] = __all_sync(0xffffffff, p);
    o[2] = __any_sync(0xffffffff, p);
    o[3] = __uni_sync(0xffffffff, p);
    o[4] = __activemask();
    o[5] = (threadIdx.x & 1) ? __activemask() : 0;
}

extern "C" __global__ void matches(const int* key, unsigned* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int pred;
    out[2 * t] = __match_any_sync(0xffffffff, key[t]);
    unsigned all = __match_all_sync(0xffffffff, key[t] / 1000, &pred);
    out[2 * t + 1] = pred ? all : 0xdeadbeef;
}

extern "C" __global__ void reductions(const unsigned* in, unsigned* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = in[t];
    out[6 * t] = __reduce_add_sync(0xffffffff, v);
    out[6 * t + 1] = __reduce_min_sync(0xffffffff, v);
    out[6 * t + 2] = __reduce_max_sync(0xffffffff, (int)v);
    out[6 * t + 3] = __reduce_and_sync(0xffffffff, v);
    out[6 * t + 4] = __reduce_or_sync(0xffffffff, v);
    out[6 * t + 5] = __reduce_xor_sync(0xffffffff, v);
}

// Half warps shuffle among themselves with partial member masks.
extern "C" __global__ void partial_masks(const int* in, int* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int v = in[t];
    if (lane < 16) v = __shfl_sync(0x0000ffff, v, 3);
    else v = __shfl_down_sync(0xffff0000, v, 1);
    __syncwarp();
    out[t] = v;
}

// Cooperative-groups tiles: tile-wide reductions and shuffles.
extern "C" __global__ void tiles(const int* in, int* out) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<8> tile = cg::tiled_partition<8>(block);
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[t];
    out[2 * t] = cg::reduce(tile, v, cg::plus<int>());
    out[2 * t + 1] = tile.shfl_down(v, 2);
}

// A block reduction through warp shuffles, as written in real code.
extern "C" __global__ void block_sum(const float* in, float* out, int n) {
    __shared__ float partial[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < (blockDim.x + 31) / 32 ? partial[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
        if (threadIdx.x == 0) out[blockIdx.x] = v;
    }
}
