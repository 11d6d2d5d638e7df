// Errors as a GPU reports them: a bad launch configuration is reported by cudaGetLastError
// and cleared; a kernel that writes out of bounds makes the context unusable (sticky).
#include <cstdio>

__global__ void fill(int *p, int n, int value) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;
}

__global__ void wild(int *p) {
  p[(size_t)1 << 40] = 1;            // far outside any allocation
}

int main() {
  int *d;
  printf("malloc: %s\n", cudaGetErrorName(cudaMalloc(&d, 64 * sizeof(int))));
  fill<<<1, 2048>>>(d, 64, 7);      // more threads per block than allowed
  printf("bad config: %s\n", cudaGetErrorName(cudaGetLastError()));
  printf("after clear: %s\n", cudaGetErrorName(cudaGetLastError()));
  fill<<<1, 64>>>(d, 64, 7);
  printf("good launch: %s\n", cudaGetErrorName(cudaGetLastError()));
  int h[64];
  printf("copy: %s\n", cudaGetErrorName(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost)));
  printf("h[63] %d\n", h[63]);
  wild<<<1, 1>>>(d);
  printf("fault sync: %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
  printf("last error: %s\n", cudaGetErrorName(cudaGetLastError()));
  int *d2;
  printf("malloc after fault: %s\n", cudaGetErrorName(cudaMalloc(&d2, 16)));
  return 0;
}
