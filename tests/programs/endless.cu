// A kernel that never ends, as a user's bug would have it: `anycuda run --launch-timeout`
// stops it (tests/test_launch_timeout.py).
#include <cstdio>

__global__ void endless(int n, int* out) {
    int s = 0;
    while (n > 0) { s += n; if (s == 12345678) out[0] = s; }
    out[threadIdx.x] = s;
}

__global__ void fill(int* out, int value) { out[threadIdx.x] = value; }

int main() {
    int* d;
    cudaMalloc(&d, 1024);
    int attr = -1;
    cudaDeviceGetAttribute(&attr, cudaDevAttrKernelExecTimeout, 0);
    printf("kernelExecTimeout %d\n", attr);
    endless<<<4, 128>>>(1, d);
    printf("launched\n");
    cudaError_t e = cudaDeviceSynchronize();
    printf("synchronize: %s\n", cudaGetErrorName(e));
    printf("then cudaMalloc: %s\n", cudaGetErrorName(cudaMalloc(&d, 16)));
    cudaDeviceReset();
    cudaMalloc(&d, 256);
    fill<<<1, 64>>>(d, 9);
    int host[64];
    e = cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost);
    int good = 0;
    for (int i = 0; i < 64; ++i) good += host[i] == 9;
    printf("after cudaDeviceReset: %s, %d of 64 filled\n", cudaGetErrorName(e), good);
    return 0;
}
