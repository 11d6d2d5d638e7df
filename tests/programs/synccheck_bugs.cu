// Kernels that misuse __syncthreads and warp shuffles, for anycuda's synccheck tests
// (tests/test_synccheck.py), and a correct one. Lines marked BUG: are where a report must point.
#include <cstdio>
#include <cstring>

// threads past the end leave before the barrier that the others wait at
__global__ void scale_shared(float *x, int n) {
    __shared__ float s[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    s[threadIdx.x] = x[i];
    __syncthreads();                                         // BUG:sync
    x[i] = 2.0f * s[(threadIdx.x + 1) % blockDim.x];
}

// lanes 16-31 leave; lanes 0-15 shuffle with a mask that still names the whole warp
__global__ void half_shuffle(int *out) {
    int lane = threadIdx.x % 32;
    if (lane >= 16)
        return;
    int v = __shfl_sync(0xffffffffu, lane * 3, 0);           // BUG:shfl
    out[threadIdx.x] = v;
}

// a stage of a computation with its own barrier, which only the threads that have work call
__device__ __noinline__ void stage(float *s, int t) {
    s[t] = 2.0f * s[t];
    __syncthreads();                                         // BUG:stage
}

__global__ void staged(float *x, int n) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = t;
    if (t < n)
        stage(s, t);
    x[t] = s[63 - t];
}

// correct: a block reduction with uniform barriers and full-mask shuffles, then a half-warp
// shuffle whose mask names exactly the lanes that take it
__global__ void reduce(const int *in, int *out, int *half) {
    __shared__ int warp_sums[8];
    int t = threadIdx.x, lane = t % 32;
    int v = in[t];
    for (int d = 16; d > 0; d /= 2)
        v += __shfl_down_sync(0xffffffffu, v, d);
    if (lane == 0)
        warp_sums[t / 32] = v;
    __syncthreads();
    if (t < 32) {
        int w = lane < (int)(blockDim.x / 32) ? warp_sums[lane] : 0;
        for (int d = 16; d > 0; d /= 2)
            w += __shfl_down_sync(0xffffffffu, w, d);
        if (t == 0)
            *out = w;
    }
    if (t < 16) {
        int h = t;
        for (int d = 8; d > 0; d /= 2)
            h += __shfl_xor_sync(0x0000ffffu, h, d);
        if (t == 0)
            *half = h;
    }
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "clean";
    cudaError_t e;
    if (!strcmp(which, "early_return")) {
        float *x;
        cudaMalloc(&x, 384 * sizeof(float));
        cudaMemset(x, 0, 384 * sizeof(float));
        scale_shared<<<3, 128>>>(x, 300);
        e = cudaDeviceSynchronize();
        printf("%s: %s\n", which, cudaGetErrorName(e));
        cudaFree(x);
    } else if (!strcmp(which, "half_shuffle")) {
        int *out;
        cudaMalloc(&out, 64 * sizeof(int));
        half_shuffle<<<1, 64>>>(out);
        e = cudaDeviceSynchronize();
        printf("%s: %s\n", which, cudaGetErrorName(e));
        cudaFree(out);
    } else if (!strcmp(which, "staged")) {
        float *x;
        cudaMalloc(&x, 64 * sizeof(float));
        staged<<<1, 64>>>(x, 40);
        e = cudaDeviceSynchronize();
        printf("%s: %s\n", which, cudaGetErrorName(e));
        cudaFree(x);
    } else {
        int h[256], *din, *dout, sum = -1, half = -1;
        for (int i = 0; i < 256; i++) h[i] = i;
        cudaMalloc(&din, sizeof h); cudaMalloc(&dout, 2 * sizeof(int));
        cudaMemcpy(din, h, sizeof h, cudaMemcpyHostToDevice);
        reduce<<<1, 256>>>(din, dout, dout + 1);
        e = cudaDeviceSynchronize();
        cudaMemcpy(&sum, dout, sizeof sum, cudaMemcpyDeviceToHost);
        cudaMemcpy(&half, dout + 1, sizeof half, cudaMemcpyDeviceToHost);
        printf("%s: %s sum %d half %d\n", which, cudaGetErrorName(e), sum, half);
        cudaFree(din); cudaFree(dout);
    }
    return 0;
}
