// The other half of rdc_main.cu.
#include <cstdio>
#include "rdc_common.h"

__device__ int calls = 0;
__constant__ float factor = 2.5f;

static __device__ int helper(int v) { return v * 10; }         // private to this unit

__device__ float scale_by(float v) { return v * factor + 1.0f; }

__global__ void lib_kernel(int *out) {
  *out = helper(twice(3)) + calls;
  printf("lib unit: calls %d\n", calls);
}

int lib_report(int *out) {
  int *d;
  cudaMalloc(&d, sizeof(int));
  lib_kernel<<<1, 1>>>(d);
  cudaError_t e = cudaMemcpy(out, d, sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(d);
  return e;
}
