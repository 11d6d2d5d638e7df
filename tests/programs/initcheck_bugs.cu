// Reads of device memory never written, for anycuda's initcheck, one case per command-line
// argument. Each read that initcheck must report carries a marker comment (BUG:<case>) so that
// the test can find its line. The program prints its results and exits 0: the exit status is
// the sanitizer's to set (--error-exitcode).
#include <cstdio>
#include <cstring>

__global__ void fill(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 3 * i;
}

__global__ void add_one(int *out, const int *in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] + 1;  // BUG:uninit BUG:half
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "clean";
    const int n = 256;
    int host[n], back[n];
    int *a, *b;
    cudaMalloc(&a, n * sizeof(int));
    cudaMalloc(&b, n * sizeof(int));
    if (!strcmp(mode, "clean")) {               // a copy, then a kernel's writes, are read
        for (int i = 0; i < n; ++i) host[i] = i;
        cudaMemcpy(a, host, sizeof host, cudaMemcpyHostToDevice);
        add_one<<<n / 64, 64>>>(b, a, n);
        fill<<<n / 64, 64>>>(a, n);
        add_one<<<n / 64, 64>>>(b, a, n);
    } else if (!strcmp(mode, "uninit")) {       // nothing ever wrote a
        add_one<<<n / 64, 64>>>(b, a, n);
    } else if (!strcmp(mode, "half")) {         // the first half of a is set
        cudaMemset(a, 0, n / 2 * sizeof(int));
        add_one<<<n / 64, 64>>>(b, a, n);
    }
    cudaMemcpy(back, b, sizeof back, cudaMemcpyDeviceToHost);
    long sum = 0;
    for (int i = 0; i < n; ++i) sum += back[i];
    printf("%s: %s sum %ld\n", mode, cudaGetErrorName(cudaDeviceSynchronize()), mode[0] == 'c' ? sum : 0L);
    cudaFree(a);
    cudaFree(b);
    return 0;
}
