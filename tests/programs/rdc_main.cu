// Relocatable device code over two translation units (built with rdc_lib.cu): a kernel here
// calls a function and uses variables defined there; both units have a private function
// and a printf format of their own, and share a template instantiation.
#include <cstdio>
#include "rdc_common.h"

extern __device__ float scale_by(float v);
extern __device__ int calls;
extern __constant__ float factor;
int lib_report(int *out);

static __device__ int helper(int v) { return v + 1000; }       // rdc_lib.cu has its own helper

__global__ void apply(float *p, int *tags, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    p[i] = scale_by(p[i]);
    tags[i] = helper(twice(i));
    atomicAdd(&calls, 1);
  }
  if (i == 0) printf("main unit: factor %.2f\n", factor);
}

int main() {
  const int n = 100;
  float h[n];
  int tags[n];
  for (int i = 0; i < n; i++) h[i] = i;
  float *d;
  int *dt;
  cudaMalloc(&d, sizeof h);
  cudaMalloc(&dt, sizeof tags);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  apply<<<1, 128>>>(d, dt, n);
  printf("launch %s\n", cudaGetErrorName(cudaGetLastError()));
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  cudaMemcpy(tags, dt, sizeof tags, cudaMemcpyDeviceToHost);
  int c = 0;
  cudaMemcpyFromSymbol(&c, calls, sizeof c);
  int lib_tag = 0;
  printf("lib %s\n", cudaGetErrorName((cudaError_t)lib_report(&lib_tag)));
  printf("h[7] %g tags[7] %d calls %d lib_tag %d\n", h[7], tags[7], c, lib_tag);
  return 0;
}
