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

// __reduce_*_sync needs sm_80; the tests load this file with -arch=sm_80 for them.
extern "C" __global__ void reductions(const unsigned* in, unsigned* out) {
#if __CUDA_ARCH__ >= 800
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = in[t];
    out[8 * t] = __reduce_add_sync(0xffffffff, v);
    out[8 * t + 1] = __reduce_min_sync(0xffffffff, v);
    out[8 * t + 2] = __reduce_max_sync(0xffffffff, (int)v);
    out[8 * t + 3] = __reduce_and_sync(0xffffffff, v);
    out[8 * t + 4] = __reduce_or_sync(0xffffffff, v);
    out[8 * t + 5] = __reduce_xor_sync(0xffffffff, v);
    out[8 * t + 6] = __reduce_min_sync(0xffffffff, (int)v);
    out[8 * t + 7] = __reduce_max_sync(0xffffffff, v);
#endif
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

// The four shuffles for other types: 64-bit values travel as two 32-bit halves.
template <typename T>
__device__ void shuffle_all(const T* in, const int* lanes, T* out, int width) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    T v = in[t];
    int l = lanes[t];
    T* o = out + 4 * t;
    o[0] = __shfl_sync(0xffffffff, v, l, width);
    o[1] = __shfl_up_sync(0xffffffff, v, (unsigned)l & 31u, width);
    o[2] = __shfl_down_sync(0xffffffff, v, (unsigned)l & 31u, width);
    o[3] = __shfl_xor_sync(0xffffffff, v, l & 31, width);
}
extern "C" __global__ void shuffles_f32(const float* in, const int* l, float* out, int w) { shuffle_all(in, l, out, w); }
extern "C" __global__ void shuffles_f64(const double* in, const int* l, double* out, int w) { shuffle_all(in, l, out, w); }
extern "C" __global__ void shuffles_i64(const long long* in, const int* l, long long* out, int w) { shuffle_all(in, l, out, w); }
extern "C" __global__ void shuffles_u32(const unsigned* in, const int* l, unsigned* out, int w) { shuffle_all(in, l, out, w); }

// Warp collectives in a partial last warp (block size not a multiple of 32): the active
// mask holds the existing lanes only, and reductions use it as the member mask.
extern "C" __global__ void partial_warp(const int* in, unsigned* out) {
    int t = threadIdx.x, lane = t & 31;
    int v = in[blockIdx.x * blockDim.x + t];
    unsigned m = __activemask();
    int k = __popc(m);
    int sum = v;                      // tree sum over the k existing lanes
    for (int o = 16; o > 0; o >>= 1) {
        int u = __shfl_down_sync(m, sum, o);
        if (lane + o < k) sum += u;
    }
    sum = __shfl_sync(m, sum, 0);
    unsigned* o = out + 5 * (blockIdx.x * blockDim.x + t);
    o[0] = m;
    o[1] = sum;
    o[2] = __ballot_sync(m, v > 0);
    o[3] = __all_sync(m, v > -1000000);
    o[4] = __any_sync(m, v == 12345);
}

// Votes and shuffles inside nested divergent branches, each with its exact member mask.
extern "C" __global__ void divergent_votes(const int* in, unsigned* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
    int v = in[t];
    unsigned* o = out + 4 * t;
    o[0] = o[1] = o[2] = o[3] = 0xdeadbeef;
    if (lane % 3 == 0) {
        const unsigned m3 = 0x49249249u;           // lanes 0, 3, 6, ..., 30
        o[0] = __ballot_sync(m3, v & 1);
        o[1] = __activemask();
        o[2] = (unsigned)__shfl_sync(m3, v, (lane + 3) % 33);   // stays on a multiple of 3
    } else if (lane < 16) {
        o[0] = __activemask();
        if (lane & 4) {
            o[1] = __activemask();
            o[2] = __any_sync(__activemask(), v > 0);
        }
    } else {
        o[3] = __shfl_sync(0xffff0000u & ~0x49249249u, v, 16);   // lanes 16, 17, 19, 20, ...
    }
}

// Matches on 64-bit keys and in a partial warp.
extern "C" __global__ void matches64(const long long* key, unsigned* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned m = __activemask();
    int pred;
    out[2 * t] = __match_any_sync(m, key[t]);
    unsigned all = __match_all_sync(m, key[t] >> 40, &pred);
    out[2 * t + 1] = pred ? all : 0xdeadbeef;
}

// Cooperative-groups tiles of 16 and 4 next to the 8 above.
extern "C" __global__ void tiles16(const int* in, int* out) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[t];
    int* o = out + 5 * t;
    o[0] = cg::reduce(tile, v, cg::plus<int>());
    o[1] = cg::reduce(tile, v, cg::greater<int>());
    o[2] = tile.shfl_up(v, 3);
    o[3] = tile.meta_group_rank() * 100 + tile.thread_rank();
    int s = v;                        // the hand-written tile reduction
    for (int d = tile.size() / 2; d > 0; d /= 2) s += tile.shfl_xor(s, d);
    o[4] = s;
}

extern "C" __global__ void tiles4(const float* in, float* out) {
    cg::thread_block_tile<4> tile = cg::tiled_partition<4>(cg::this_thread_block());
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[t];
    out[2 * t] = cg::reduce(tile, v, cg::less<float>());
    out[2 * t + 1] = tile.shfl(v, 3);
}

// __syncwarp as a warp-level barrier for shared memory exchanges.
extern "C" __global__ void syncwarp_exchange(const int* in, int* out, int rounds) {
    __shared__ int s[256];
    int t = threadIdx.x, lane = t & 31, w = t & ~31;
    int v = in[blockIdx.x * blockDim.x + t];
    for (int r = 0; r < rounds; ++r) {
        s[t] = v;
        __syncwarp();
        v = s[w + ((lane + 5) & 31)] - r;
        __syncwarp();
    }
    out[blockIdx.x * blockDim.x + t] = v;
}

// Two half-warps run the same collective instruction at the same time, each naming only
// its own half as the member mask: each half gets a result over its own lanes only.
extern "C" __global__ void split_mask_collectives(const int* in, unsigned* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
    int v = in[t];
    unsigned m = lane < 16 ? 0x0000ffffu : 0xffff0000u;
    unsigned* o = out + 8 * t;
    o[0] = __ballot_sync(m, v > 0);
    o[1] = __all_sync(m, v > -900);
    o[2] = __any_sync(m, v > 900);
    o[3] = __match_any_sync(m, v & 3);
    int pred;
    o[4] = __match_all_sync(m, v & 0x100, &pred);
    o[5] = pred;
#if __CUDA_ARCH__ >= 800
    o[6] = __reduce_add_sync(m, (unsigned)v);
    o[7] = __reduce_max_sync(m, v);
#else
    o[6] = o[7] = 0;
#endif
}

// Shuffles and votes with constant operands in a block-uniform loop (nvcc unrolls nothing
// here: `rounds` is a kernel parameter): with every thread of a block of full warps at one of
// them, the scheduler resolves it for all warps at once as a permutation of the lanes (or a
// mask of 32 bits); with a partial warp they take the general rounds. Widths below 32,
// sources beyond a segment (own value, predicate false), a run-time source lane.
// (general rounds until the barrier).
extern "C" __global__ void shuffle_loops(const int* in, int* out, int rounds) {
    int t = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
    int v = in[t], acc = 0;
    for (int r = 0; r < rounds; ++r) {
        v += __shfl_xor_sync(0xffffffff, v, 16);
        v ^= __shfl_down_sync(0xffffffff, v, 3);           // lanes 29..31 read themselves
        v += __shfl_up_sync(0xffffffff, v, 5);              // lanes 0..4 read themselves
        v = v * 3 + __shfl_sync(0xffffffff, v, 7);          // lane 7 to all
        v += __shfl_xor_sync(0xffffffff, v, 2, 8);          // within segments of 8
        v -= __shfl_down_sync(0xffffffff, v, 1, 4);         // segments of 4: their last lane reads itself
        v += __shfl_up_sync(0xffffffff, v, 2, 16);
        v ^= __shfl_sync(0xffffffff, v, 9, 16);             // lane 9 of each half warp
        int s, p;                                           // shfl's own predicate, immediates
        asm volatile("{ .reg .pred q; shfl.sync.down.b32 %0|q, %2, 6, 0x181f, -1; selp.s32 %1, 1, 0, q; }"
                     : "=r"(s), "=r"(p) : "r"(v));
        v += s * 7 + p;
        unsigned b = __ballot_sync(0xffffffff, v & 1);
        int u;
        asm volatile("{ .reg .pred q, x; setp.ne.s32 x, %1, 0; vote.sync.uni.pred q, x, -1; selp.s32 %0, 1, 0, q; }"
                     : "=r"(u) : "r"(v & (1 << (r % 4 + 20))));
        acc += __popc(b) + 3 * __all_sync(0xffffffff, v > 0) + 5 * __any_sync(0xffffffff, (v & 7) == 0)
             + 11 * u + (b & 0xff);
        v += __shfl_sync(0xffffffff, v, lane + r, 8);       // a run-time source lane: general rounds
        __syncthreads();                                    // then uniform rounds again
    }
    out[2 * t] = v;
    out[2 * t + 1] = acc;
}

// The same shuffles after warps leave a loop at different trip counts (the block stops
// agreeing: general rounds), then after a barrier (uniform rounds again).
extern "C" __global__ void shuffle_uneven_loops(const int* in, const int* trips, int* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x, warp = threadIdx.x >> 5;
    int v = in[t];
    for (int r = 0; r < trips[warp]; ++r) {
        v += __shfl_xor_sync(0xffffffff, v, 1);
        v = v * 5 + __shfl_down_sync(0xffffffff, v, 4);
    }
    __syncthreads();
    for (int r = 0; r < trips[0]; ++r)
        v ^= __shfl_up_sync(0xffffffff, v, 3) + __ballot_sync(0xffffffff, v & 2);
    out[t] = v;
}
