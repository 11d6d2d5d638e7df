// cuRAND's device API compiled into the program's own PTX (curand_kernel.h: curand_init with
// its skip-ahead tables, XORWOW, Philox, Box-Muller): each thread its own subsequence. Prints
// every thread's first outputs, one line per thread: "t xorwow... philox... normal".
#include <curand_kernel.h>
#include <stdio.h>

#define N 6

__global__ void draw(unsigned long long seed, unsigned long long offset, unsigned int *xorwow, unsigned int *philox,
                     float *normal) {
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    curandState s;
    curand_init(seed, t, offset, &s);
    curandStatePhilox4_32_10_t p;
    curand_init(seed, t, offset, &p);
    for (int i = 0; i < N; i++) {
        xorwow[t * N + i] = curand(&s);
        philox[t * N + i] = curand(&p);
    }
    normal[t] = curand_normal(&s);
}

int main(int argc, char **argv) {
    const int threads = 96;
    unsigned long long seed = strtoull(argv[1], NULL, 10), offset = strtoull(argv[2], NULL, 10);
    unsigned int *x, *p;
    float *normal;
    cudaMallocManaged(&x, threads * N * sizeof *x);
    cudaMallocManaged(&p, threads * N * sizeof *p);
    cudaMallocManaged(&normal, threads * sizeof *normal);
    draw<<<3, 32>>>(seed, offset, x, p, normal);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { printf("FAILED %s\n", cudaGetErrorString(e)); return 1; }
    for (int t = 0; t < threads; t++) {
        printf("%d", t);
        for (int i = 0; i < N; i++) printf(" %u", x[t * N + i]);
        for (int i = 0; i < N; i++) printf(" %u", p[t * N + i]);
        printf(" %.9g\n", normal[t]);
    }
    return 0;
}
