// Host threads each with their own stream, cudaDeviceReset and work after it, and the
// per-thread default stream (also the default stream when built with --default-stream per-thread).
#include <cstdio>
#include <thread>
#include <vector>
__global__ void fill(int *p, int n, int v) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = v * i; }
int work(int t) {
  int *d; cudaMalloc(&d, 1000 * sizeof(int));
  cudaStream_t s; cudaStreamCreate(&s);
  fill<<<4, 256, 0, s>>>(d, 1000, t + 1);
  int h[1000]; cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s); cudaFree(d);
  return h[999];
}
int main() {
  std::vector<std::thread> ts; int res[4];
  for (int t = 0; t < 4; t++) ts.emplace_back([t, &res] { res[t] = work(t); });
  for (auto &t : ts) t.join();
  printf("threads %d %d %d %d\n", res[0], res[1], res[2], res[3]);
  cudaDeviceReset();
  printf("again %d %s\n", work(9), cudaGetErrorName(cudaGetLastError()));
  // default stream per thread
  int *d; cudaMalloc(&d, 4000);
  fill<<<4, 256, 0, cudaStreamPerThread>>>(d, 1000, 2);
  int h[1000]; cudaMemcpyAsync(h, d, 4000, cudaMemcpyDeviceToHost, cudaStreamPerThread);
  cudaStreamSynchronize(cudaStreamPerThread);
  printf("ptds %d\n", h[10]);
  return 0;
}
