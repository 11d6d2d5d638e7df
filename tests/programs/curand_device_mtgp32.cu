// cuRAND's MTGP32 device API under anycuda: curandMakeMTGP32Constants and
// curandMakeMTGP32KernelState (host code of curand_mtgp32_host.h, compiled into the program with
// NVIDIA's parameter sets) copy tables and states to the device, then kernels call curand() on one
// state per block, whose threads share it through a common index and __syncthreads.
// Usage: curand_device_mtgp32 seed threads_per_block. Prints "b w0 w1 ..." per block: the block's
// words in the order the threads drew them (round by round, thread by thread).
#include <curand_kernel.h>
#include <curand_mtgp32_host.h>
#include <curand_mtgp32dc_p_11213.h>
#include <stdio.h>
#include <stdlib.h>

#define BLOCKS 3
#define ROUNDS 3

__global__ void draw(curandStateMtgp32 *state, unsigned int *out) {
    for (int r = 0; r < ROUNDS; r++)
        out[(blockIdx.x * ROUNDS + r) * blockDim.x + threadIdx.x] = curand(&state[blockIdx.x]);
}

int main(int argc, char **argv) {
    unsigned long long seed = strtoull(argv[1], NULL, 10);
    int threads = atoi(argv[2]);
    curandStateMtgp32 *states;
    mtgp32_kernel_params *params;
    unsigned int *out;
    cudaMalloc(&states, BLOCKS * sizeof *states);
    cudaMalloc(&params, sizeof *params);
    cudaMallocManaged(&out, BLOCKS * ROUNDS * threads * sizeof *out);
    if (curandMakeMTGP32Constants(mtgp32dc_params_fast_11213, params) != CURAND_STATUS_SUCCESS ||
        curandMakeMTGP32KernelState(states, mtgp32dc_params_fast_11213, params, BLOCKS, seed) != CURAND_STATUS_SUCCESS) {
        printf("FAILED to set up MTGP32\n");
        return 1;
    }
    draw<<<BLOCKS, threads>>>(states, out);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { printf("FAILED %s\n", cudaGetErrorString(e)); return 1; }
    for (int b = 0; b < BLOCKS; b++) {
        printf("%d", b);
        for (int i = 0; i < ROUNDS * threads; i++) printf(" %u", out[b * ROUNDS * threads + i]);
        printf("\n");
    }
    return 0;
}
