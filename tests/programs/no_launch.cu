// A program that uses the runtime but never launches its kernel: it must still exit cleanly
// (the runtime unloads its modules from an exit handler, after the JIT's own library is torn down).
#include <cstdio>

__global__ void never_launched(float* x) { x[threadIdx.x] = 1.0f; }

int main() {
    int count = -1;
    cudaError_t e = cudaGetDeviceCount(&count);
    float* d = nullptr;
    cudaError_t m = cudaMalloc(&d, 1024);
    cudaError_t f = cudaFree(d);
    printf("devices=%d %s %s %s\n", count, cudaGetErrorName(e), cudaGetErrorName(m), cudaGetErrorName(f));
    return 0;
}
