// Compute-bound kernels in the spellings people write them: all-pairs n-body straight from
// global memory (suite.py's nbody stages tiles in shared memory), Monte Carlo estimates of
// pi with curand_kernel.h (XORWOW states kept between launches; Philox started inside the
// kernel), and a 5x5 2-D convolution with its filter in constant memory, read straight from
// global memory and through a shared-memory tile with a halo.
#include <curand_kernel.h>

extern "C" __global__ void nbody_naive(const float4* pos, float4* acc, int n, float eps2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 p = pos[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int j = 0; j < n; ++j) {
        float4 q = pos[j];
        float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
        float inv = rsqrtf(dx * dx + dy * dy + dz * dz + eps2);
        float s = q.w * inv * inv * inv;
        ax += dx * s;
        ay += dy * s;
        az += dz * s;
    }
    acc[i] = make_float4(ax, ay, az, 0.0f);
}

// ---- Monte Carlo: a thread draws `samples` points of the unit square and counts those
// inside the quarter circle; a block's counts are summed in shared memory, one atomicAdd a block.
__device__ void add_block_count(unsigned count, unsigned long long* hits) {
    __shared__ unsigned total;
    if (threadIdx.x == 0) total = 0;
    __syncthreads();
    atomicAdd(&total, count);
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(hits, (unsigned long long)total);
}

extern "C" __global__ void mc_setup_xorwow(curandState* states, unsigned long long seed) {
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    curand_init(seed, id, 0, &states[id]);
}

extern "C" __global__ void mc_pi_xorwow(curandState* states, unsigned long long* hits, int samples) {
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    curandState s = states[id];
    unsigned count = 0;
    for (int k = 0; k < samples; ++k) {
        float x = curand_uniform(&s), y = curand_uniform(&s);
        if (x * x + y * y <= 1.0f) ++count;
    }
    states[id] = s;                        // the next launch continues the sequences
    add_block_count(count, hits);
}

extern "C" __global__ void mc_pi_philox(unsigned long long seed, unsigned long long offset,
                                        unsigned long long* hits, int samples) {
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    curandStatePhilox4_32_10_t s;
    curand_init(seed, id, offset, &s);
    unsigned count = 0;
    for (int k = 0; k < samples; k += 2) {
        float4 r = curand_uniform4(&s);    // two points a call
        count += (r.x * r.x + r.y * r.y <= 1.0f) + (r.z * r.z + r.w * r.w <= 1.0f);
    }
    add_block_count(count, hits);
}

// ---- 5x5 convolution of a w x h image, zero outside it.
#define R 2
#define K (2 * R + 1)
__constant__ float mask[K * K];

extern "C" __global__ void conv2d_global(const float* in, float* out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float s = 0.0f;
    for (int dy = -R; dy <= R; ++dy)
        for (int dx = -R; dx <= R; ++dx) {
            int xx = x + dx, yy = y + dy;
            if (xx >= 0 && xx < w && yy >= 0 && yy < h) s += mask[(dy + R) * K + dx + R] * in[yy * w + xx];
        }
    out[y * w + x] = s;
}

#define TILE 16
extern "C" __global__ void conv2d_tiled(const float* in, float* out, int w, int h) {
    __shared__ float tile[TILE + 2 * R][TILE + 2 * R];
    int x0 = blockIdx.x * TILE - R, y0 = blockIdx.y * TILE - R;
    // the block's threads load the tile and its halo, several loads each
    for (int t = threadIdx.y * TILE + threadIdx.x; t < (TILE + 2 * R) * (TILE + 2 * R); t += TILE * TILE) {
        int ty = t / (TILE + 2 * R), tx = t % (TILE + 2 * R), xx = x0 + tx, yy = y0 + ty;
        tile[ty][tx] = xx >= 0 && xx < w && yy >= 0 && yy < h ? in[yy * w + xx] : 0.0f;
    }
    __syncthreads();
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    if (x >= w || y >= h) return;
    float s = 0.0f;
    for (int dy = 0; dy < K; ++dy)
        for (int dx = 0; dx < K; ++dx) s += mask[dy * K + dx] * tile[threadIdx.y + dy][threadIdx.x + dx];
    out[y * w + x] = s;
}
