// A kernel fault makes the context unusable (sticky, as on a GPU) until cudaDeviceReset; after
// the reset the process goes on: new memory, launches and copies work.
#include <cstdio>

__global__ void wild(int *p) { p[(size_t)1 << 40] = 1; }   // far outside any allocation

__global__ void square(int *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = i * i;
}

int main() {
  int *d = nullptr;
  cudaMalloc(&d, 16);
  wild<<<1, 1>>>(d);
  printf("fault: %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
  printf("malloc after fault: %s\n", cudaGetErrorName(cudaMalloc(&d, 16)));
  printf("reset: %s\n", cudaGetErrorName(cudaDeviceReset()));
  cudaGetLastError();                 // the runtime's last error is still the failed malloc's
  const int n = 1000;
  printf("malloc after reset: %s\n", cudaGetErrorName(cudaMalloc(&d, n * sizeof(int))));
  square<<<(n + 255) / 256, 256>>>(d, n);
  printf("launch after reset: %s\n", cudaGetErrorName(cudaGetLastError()));
  int h[n];
  printf("copy after reset: %s\n", cudaGetErrorName(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost)));
  int wrong = 0;
  for (int i = 0; i < n; i++) wrong += h[i] != i * i;
  printf("wrong values: %d\n", wrong);
  return 0;
}
