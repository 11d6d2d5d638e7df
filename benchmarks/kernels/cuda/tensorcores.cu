// C = A B for n x n row-major matrices, A and B half precision, C float (n a multiple of 64):
// the same 64 x 64 block tiles, 32-wide steps of k through shared memory and 32 x 32 warp
// tiles, once with nvcuda::wmma and once with inline PTX (ldmatrix + mma.sync m16n8k16).
// Blocks of 128 threads (4 warps, 2 x 2 over the block tile), grid (n / 64, n / 64).
#include <mma.h>
#include <cuda_fp16.h>

#define BM 64
#define BK 32

// A's 64 x 32 and B's 32 x 64 tiles of this step into shared memory, 16 bytes per copy.
__device__ __forceinline__ void load_tiles(const half *A, const half *B, half (*As)[BK], half (*Bs)[BM],
                                           int n, int row0, int col0, int k0) {
    for (int i = threadIdx.x; i < BM * BK / 8; i += blockDim.x) {
        int ra = i / (BK / 8), ca = (i % (BK / 8)) * 8;
        *(uint4 *)&As[ra][ca] = *(const uint4 *)&A[(size_t)(row0 + ra) * n + k0 + ca];
        int rb = i / (BM / 8), cb = (i % (BM / 8)) * 8;
        *(uint4 *)&Bs[rb][cb] = *(const uint4 *)&B[(size_t)(k0 + rb) * n + col0 + cb];
    }
}

extern "C" __global__ void wmma_gemm(const half *A, const half *B, float *C, int n) {
    using namespace nvcuda;
    __shared__ __align__(32) half As[BM][BK];
    __shared__ __align__(32) half Bs[BK][BM];
    int warp = threadIdx.x / 32;
    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BM;
    int wr = (warp / 2) * 32, wc = (warp % 2) * 32;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    for (int k0 = 0; k0 < n; k0 += BK) {
        load_tiles(A, B, As, Bs, n, row0, col0, k0);
        __syncthreads();
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b[2];
            for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &As[wr + i * 16][kk], BK);
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &Bs[kk][wc + j * 16], BM);
            for (int i = 0; i < 2; ++i)
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(C + (size_t)(row0 + wr + i * 16) * n + col0 + wc + j * 16, acc[i][j], n,
                                    wmma::mem_row_major);
}

extern "C" __global__ void mma_gemm(const half *A, const half *B, float *C, int n) {
    __shared__ __align__(16) half As[BM][BK];
    __shared__ __align__(16) half Bs[BK][BM];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BM;
    int wr = (warp / 2) * 32, wc = (warp % 2) * 32;
    float acc[2][4][4] = {};               // [m16 tile][n8 tile][the ISA's c0..c3]
    for (int k0 = 0; k0 < n; k0 += BK) {
        load_tiles(A, B, As, Bs, n, row0, col0, k0);
        __syncthreads();
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[2][4], b[4][2];
            // A, 16 x 16 per m16 tile: matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15),
            // (8-15, 8-15) are a0..a3; lane l gives the address of row l % 8 of matrix l / 8.
            for (int i = 0; i < 2; ++i) {
                unsigned addr = (unsigned)__cvta_generic_to_shared(&As[wr + i * 16 + lane % 16][kk + (lane / 16) * 8]);
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                             : "=r"(a[i][0]), "=r"(a[i][1]), "=r"(a[i][2]), "=r"(a[i][3]) : "r"(addr) : "memory");
            }
            // B is k-major in shared memory; .trans gives the column fragments mma's .col wants.
            // Matrices (k 0-7, n 0-7), (k 8-15, n 0-7) are b0, b1 of one n8 tile, then the next.
            for (int j = 0; j < 4; j += 2) {
                int m = lane / 8;
                unsigned addr = (unsigned)__cvta_generic_to_shared(
                    &Bs[kk + (m & 1) * 8 + lane % 8][wc + j * 8 + (m >> 1) * 8]);
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                             : "=r"(b[j][0]), "=r"(b[j][1]), "=r"(b[j + 1][0]), "=r"(b[j + 1][1]) : "r"(addr)
                             : "memory");
            }
            for (int i = 0; i < 2; ++i)
                for (int j = 0; j < 4; ++j)
                    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                        "{%8, %9}, {%0, %1, %2, %3};"
                        : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                        : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
        }
        __syncthreads();
    }
    // c0, c1 are row lane / 4, columns 2 (lane % 4) and the next; c2, c3 the same 8 rows down
    int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 4; ++j) {
            size_t r = row0 + wr + i * 16 + g, c = col0 + wc + j * 8 + 2 * t;
            *(float2 *)&C[r * n + c] = make_float2(acc[i][j][0], acc[i][j][1]);
            *(float2 *)&C[(r + 8) * n + c] = make_float2(acc[i][j][2], acc[i][j][3]);
        }
}
