// Two kernels launched a number of times the command line gives: `profile_launches A B N`
// launches scale A times and shift B times on N floats, then prints the array's sum and a
// checksum of its first values on stdout (the profile goes to stderr alone).
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

namespace demo {
template <typename T>
__global__ void scale(T *x, T factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= factor;
}
}

__global__ void shift(float *x, float by, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] += by;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: profile_launches SCALES SHIFTS N\n");
        return 2;
    }
    int scales = atoi(argv[1]), shifts = atoi(argv[2]), n = atoi(argv[3]);
    float *h = (float *)malloc(n * sizeof(float)), *d;
    for (int i = 0; i < n; i++) h[i] = (float)(i % 7);
    cudaMalloc(&d, n * sizeof(float));
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    int blocks = (n + 255) / 256;
    for (int k = 0; k < scales; k++) demo::scale<float><<<blocks, 256>>>(d, 1.0f, n);
    for (int k = 0; k < shifts; k++) shift<<<8, 128>>>(d, 1.0f, n);
    cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "CUDA error %s\n", cudaGetErrorString(e));
        return 1;
    }
    double sum = 0;
    for (int i = 0; i < n; i++) sum += h[i];
    printf("sum %.1f first %.1f %.1f\n", sum, h[0], h[1]);
    cudaFree(d);
    free(h);
    return 0;
}
