// __constant__ and __device__ symbols reached from the host: cudaMemcpyToSymbol,
// cudaMemcpyFromSymbol, cudaGetSymbolAddress, cudaGetSymbolSize, and a statically
// initialised device variable.
#include <cstdio>
#include <cstdlib>

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("%s failed: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)

__constant__ float coeffs[4];
__device__ int counter;
__device__ int table[8] = {3, 1, 4, 1, 5, 9, 2, 6};

__global__ void poly(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = coeffs[0] + v * (coeffs[1] + v * (coeffs[2] + v * coeffs[3])) + table[i % 8];
    atomicAdd(&counter, 1);
  }
}

int main() {
  const int n = 300;
  float hx[n], hy[n];
  for (int i = 0; i < n; i++) hx[i] = (i % 17) * 0.25f - 2.0f;
  float hc[4] = {1.5f, -2.0f, 0.5f, 0.125f};
  CHECK(cudaMemcpyToSymbol(coeffs, hc, sizeof hc));
  int zero = 0;
  CHECK(cudaMemcpyToSymbol(counter, &zero, sizeof zero));
  float *dx, *dy;
  CHECK(cudaMalloc(&dx, sizeof hx));
  CHECK(cudaMalloc(&dy, sizeof hy));
  CHECK(cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice));
  poly<<<(n + 127) / 128, 128>>>(dx, dy, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(hy, dy, sizeof hy, cudaMemcpyDeviceToHost));
  int count = -1;
  CHECK(cudaMemcpyFromSymbol(&count, counter, sizeof count));
  int *table_ptr;
  size_t table_size = 0;
  CHECK(cudaGetSymbolAddress((void **)&table_ptr, table));
  CHECK(cudaGetSymbolSize(&table_size, table));
  int t5 = 0;
  CHECK(cudaMemcpy(&t5, table_ptr + 5, sizeof t5, cudaMemcpyDeviceToHost));
  printf("counter %d table_size %zu table[5] %d\n", count, table_size, t5);
  for (int i = 0; i < n; i++) printf("%.9g\n", hy[i]);
  return 0;
}
