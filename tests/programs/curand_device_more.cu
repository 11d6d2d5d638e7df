// More of cuRAND's device API compiled into the program's PTX: MRG32k3a (curand_init's skip-ahead
// over subsequences and offsets through the tables of curand_precalc.h) and Sobol32 (curand_init
// from the direction vectors the library hands out, curandGetDirectionVectors32, at an offset).
// Usage: curand_device_more seed offset. Prints "mrg t w0 .. w3" per thread, then "sobol d w0 .. w7"
// per dimension.
#include <curand.h>
#include <curand_kernel.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 64
#define DIMENSIONS 4

__global__ void mrg(unsigned long long seed, unsigned long long offset, unsigned int *out) {
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    curandStateMRG32k3a s;
    curand_init(seed, t, offset, &s);
    for (int i = 0; i < 4; i++)
        out[t * 4 + i] = curand(&s);
}

__global__ void sobol(curandDirectionVectors32_t *vectors, unsigned int offset, unsigned int *out) {
    int d = threadIdx.x;
    curandStateSobol32_t s;
    curand_init(vectors[d], offset, &s);
    for (int i = 0; i < 8; i++)
        out[d * 8 + i] = curand(&s);
}

int main(int argc, char **argv) {
    unsigned long long seed = strtoull(argv[1], NULL, 10), offset = strtoull(argv[2], NULL, 10);
    unsigned int *m, *q;
    curandDirectionVectors32_t *host_vectors, *vectors;
    cudaMallocManaged(&m, THREADS * 4 * sizeof *m);
    cudaMallocManaged(&q, DIMENSIONS * 8 * sizeof *q);
    if (curandGetDirectionVectors32(&host_vectors, CURAND_DIRECTION_VECTORS_32_JOEKUO6) != CURAND_STATUS_SUCCESS) {
        printf("FAILED to get direction vectors\n");
        return 1;
    }
    cudaMalloc(&vectors, DIMENSIONS * sizeof *vectors);
    cudaMemcpy(vectors, host_vectors, DIMENSIONS * sizeof *vectors, cudaMemcpyHostToDevice);
    mrg<<<2, THREADS / 2>>>(seed, offset, m);
    sobol<<<1, DIMENSIONS>>>(vectors, (unsigned int)offset, q);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { printf("FAILED %s\n", cudaGetErrorString(e)); return 1; }
    for (int t = 0; t < THREADS; t++)
        printf("mrg %d %u %u %u %u\n", t, m[t * 4], m[t * 4 + 1], m[t * 4 + 2], m[t * 4 + 3]);
    for (int d = 0; d < DIMENSIONS; d++) {
        printf("sobol %d", d);
        for (int i = 0; i < 8; i++) printf(" %u", q[d * 8 + i]);
        printf("\n");
    }
    return 0;
}
