// The 5-point Jacobi step of stencil.cu with the block's tile and a one-point halo staged
// in shared memory first; one kernel per block shape (BX x BY threads). The border is copied.
#define STENCIL5_SMEM(BX, BY)                                                                \
    extern "C" __global__ void stencil5_smem_##BX##x##BY(const float* in, float* out, int nx, int ny) { \
        __shared__ float t[BY + 2][BX + 2];                                                   \
        int tx = threadIdx.x + 1, ty = threadIdx.y + 1;                                       \
        int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y;             \
        int i = y * nx + x;                                                                   \
        bool inside = x < nx && y < ny;                                                       \
        if (inside) {                                                                         \
            t[ty][tx] = in[i];                                                                \
            if (threadIdx.x == 0 && x > 0) t[ty][0] = in[i - 1];                              \
            if (threadIdx.x == BX - 1 && x + 1 < nx) t[ty][BX + 1] = in[i + 1];               \
            if (threadIdx.y == 0 && y > 0) t[0][tx] = in[i - nx];                             \
            if (threadIdx.y == BY - 1 && y + 1 < ny) t[BY + 1][tx] = in[i + nx];              \
        }                                                                                     \
        __syncthreads();                                                                      \
        if (!inside) return;                                                                  \
        if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)                                   \
            out[i] = t[ty][tx];                                                               \
        else                                                                                  \
            out[i] = 0.5f * t[ty][tx] + 0.125f * ((t[ty][tx - 1] + t[ty][tx + 1]) + (t[ty - 1][tx] + t[ty + 1][tx])); \
    }

STENCIL5_SMEM(16, 16)
STENCIL5_SMEM(32, 8)
