#include <cuda_fp16.h>

// C = A B for n x n row-major matrices (float; double and half below), tiled as people write
// it; any n (loads past the edge read zeros, and only outputs inside the matrix are written).

// One output per thread, T x T threads, T x T tiles of A and B in shared memory.
#define GEMM_TILED(NAME, REAL, T)                                                          \
    extern "C" __global__ void NAME(const REAL* A, const REAL* B, REAL* C, int n) {        \
        __shared__ REAL As[T][T];                                                          \
        __shared__ REAL Bs[T][T];                                                          \
        int tx = threadIdx.x, ty = threadIdx.y;                                            \
        int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;                          \
        REAL acc = 0;                                                                      \
        for (int t = 0; t < n; t += T) {                                                   \
            As[ty][tx] = row < n && t + tx < n ? A[row * n + t + tx] : (REAL)0;            \
            Bs[ty][tx] = t + ty < n && col < n ? B[(t + ty) * n + col] : (REAL)0;          \
            __syncthreads();                                                               \
            for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];                      \
            __syncthreads();                                                               \
        }                                                                                  \
        if (row < n && col < n) C[row * n + col] = acc;                                    \
    }

GEMM_TILED(sgemm_tiled_16x16, float, 16)
GEMM_TILED(sgemm_tiled_32x32, float, 32)
GEMM_TILED(dgemm_tiled_16x16, double, 16)

// Half matrices as people multiply them without tensor cores: half tiles in shared memory,
// products summed in float, the output rounded to half once.
extern "C" __global__ void hgemm_tiled_16x16(const __half* A, const __half* B, __half* C, int n) {
    __shared__ __half As[16][16];
    __shared__ __half Bs[16][16];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int t = 0; t < n; t += 16) {
        As[ty][tx] = row < n && t + tx < n ? A[row * n + t + tx] : __float2half(0.0f);
        Bs[ty][tx] = t + ty < n && col < n ? B[(t + ty) * n + col] : __float2half(0.0f);
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc += __half2float(As[ty][k]) * __half2float(Bs[k][tx]);
        __syncthreads();
    }
    if (row < n && col < n) C[row * n + col] = __float2half(acc);
}

// 32 x 8 threads for a 32 x 32 tile: each thread loads and computes rows ty, ty+8, ty+16, ty+24.
extern "C" __global__ void sgemm_tiled_32x8(const float* A, const float* B, float* C, int n) {
    __shared__ float As[32][32];
    __shared__ float Bs[32][32];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row0 = blockIdx.y * 32, col = blockIdx.x * 32 + tx;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int t = 0; t < n; t += 32) {
        for (int r = ty; r < 32; r += 8) {
            As[r][tx] = row0 + r < n && t + tx < n ? A[(row0 + r) * n + t + tx] : 0.0f;
            Bs[r][tx] = t + r < n && col < n ? B[(t + r) * n + col] : 0.0f;
        }
        __syncthreads();
        for (int k = 0; k < 32; ++k) {
            float b = Bs[k][tx];
            for (int i = 0; i < 4; ++i) acc[i] += As[ty + 8 * i][k] * b;
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i) {
        int row = row0 + ty + 8 * i;
        if (row < n && col < n) C[row * n + col] = acc[i];
    }
}

// Register blocking: 16 x 16 threads for a 64 x 64 tile, each thread a 4 x 4 block of
// outputs (rows ty + 16i, columns tx + 16j), from 64 x BK tiles of A and BK x 64 of B.
#define BK 16
extern "C" __global__ void sgemm_regblock_64x64(const float* A, const float* B, float* C, int n) {
    __shared__ float As[64][BK];
    __shared__ float Bs[BK][64];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
    float acc[4][4] = {};
    for (int t = 0; t < n; t += BK) {
        for (int e = tid; e < 64 * BK; e += 256) {
            int ar = e / BK, ac = e % BK, br = e / 64, bc = e % 64;
            As[ar][ac] = row0 + ar < n && t + ac < n ? A[(row0 + ar) * n + t + ac] : 0.0f;
            Bs[br][bc] = t + br < n && col0 + bc < n ? B[(t + br) * n + col0 + bc] : 0.0f;
        }
        __syncthreads();
        for (int k = 0; k < BK; ++k) {
            float a[4], b[4];
            for (int i = 0; i < 4; ++i) a[i] = As[ty + 16 * i][k];
            for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx + 16 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            int row = row0 + ty + 16 * i, col = col0 + tx + 16 * j;
            if (row < n && col < n) C[row * n + col] = acc[i][j];
        }
}
