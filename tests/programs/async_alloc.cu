// Stream-ordered allocation (cudaMallocAsync/cudaFreeAsync and the default memory pool),
// an asynchronous copy to a __constant__ symbol, a kernel opting in to 64 KiB of dynamic
// shared memory, managed-memory hints, device limits, and a device-side assert that leaves
// the context unusable (cudaErrorAssert, sticky).
#include <cstdio>
#include <cassert>
#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("%s failed: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)

__constant__ int lut[4];

__global__ void spread(int *p, int n) {
  extern __shared__ int s[];               // 64 KiB: more than the default 48 KiB
  int i = threadIdx.x;
  for (int j = i; j < 16384; j += blockDim.x) s[j] = lut[j % 4] * (j / 4);
  __syncthreads();
  if (i < n) p[i] = s[16383 - i];
}

__global__ void checker(int v) { assert(v < 10); }

int main() {
  cudaStream_t st;
  CHECK(cudaStreamCreate(&st));
  cudaMemPool_t pool;
  CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  unsigned long long threshold = 1 << 20, back = 0;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &back));
  int *p;
  CHECK(cudaMallocAsync(&p, 64 * sizeof(int), st));
  int h[4] = {1, 2, 3, 4};
  CHECK(cudaMemcpyToSymbolAsync(lut, h, sizeof h, 0, cudaMemcpyHostToDevice, st));
  CHECK(cudaFuncSetAttribute(spread, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
  spread<<<1, 64, 64 * 1024, st>>>(p, 64);
  CHECK(cudaGetLastError());
  int out[64];
  CHECK(cudaMemcpyAsync(out, p, sizeof out, cudaMemcpyDeviceToHost, st));
  CHECK(cudaFreeAsync(p, st));
  CHECK(cudaStreamSynchronize(st));
  printf("threshold %llu out %d %d %d\n", back, out[0], out[1], out[63]);
  int *m;
  CHECK(cudaMallocManaged(&m, 1024));
  cudaMemLocation loc = {cudaMemLocationTypeDevice, 0};
  CHECK(cudaMemPrefetchAsync(m, 1024, loc, 0, st));
  CHECK(cudaMemAdvise(m, 1024, cudaMemAdviseSetReadMostly, loc));
  CHECK(cudaDeviceSetLimit(cudaLimitPrintfFifoSize, 1 << 22));
  size_t limit = 0;
  CHECK(cudaDeviceGetLimit(&limit, cudaLimitPrintfFifoSize));
  printf("limit %zu\n", limit);
  checker<<<1, 1>>>(3);
  printf("assert holds: %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
  checker<<<1, 1>>>(20);
  printf("assert fails: %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
  int *q;
  printf("malloc after: %s\n", cudaGetErrorName(cudaMalloc(&q, 16)));
  return 0;
}
