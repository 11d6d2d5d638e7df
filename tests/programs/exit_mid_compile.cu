// A program that ends while anycuda's compile server still optimises its kernel: the quick
// code has run it (the launch is synchronised), the result is printed, and main returns the
// status given on the command line. Barriers and shuffles in an unrolled loop make the
// optimising compile take many times longer than the quick one.
#include <cstdio>
#include <cstdlib>

template <int Rounds>
__global__ void rounds(float* out, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i;
#pragma unroll
    for (int r = 0; r < Rounds; ++r) {
        tile[threadIdx.x] = v;
        __syncthreads();
        v += tile[(threadIdx.x + r + 1) % blockDim.x];
        v += __shfl_xor_sync(0xffffffff, v, r % 32);
        __syncthreads();
    }
    if (i < n) out[i] = v;
}

int main(int argc, char** argv) {
    const int n = 1024;
    float* out = nullptr;
    cudaMalloc(&out, n * sizeof(float));
    rounds<32><<<n / 256, 256>>>(out, n);
    cudaError_t e = cudaDeviceSynchronize();
    float first = -1.0f;
    cudaMemcpy(&first, out, sizeof first, cudaMemcpyDeviceToHost);
    printf("ran %s, out[0] is %s\n", cudaGetErrorName(e), first >= 0.0f ? "set" : "unset");
    fflush(stdout);
    fprintf(stderr, "the program's own line\n");
    return argc > 1 ? atoi(argv[1]) : 0;
}
