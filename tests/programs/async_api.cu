// Launches return at once, as on a GPU. First the asyncAPI pattern: a copy in, a kernel and a
// copy out queued on the default stream, an event recorded after them, and the host counting
// its own iterations while cudaEventQuery answers cudaErrorNotReady. Then a kernel that waits
// for a flag in mapped host memory which the host sets only after the launch has returned
// (a launch that blocked would leave the kernel to give up after `bound` polls).
#include <cstdio>
#include <cstring>

__global__ void increment(int *g, int inc, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) g[i] = g[i] + inc;
}

__global__ void wait_for_flag(volatile int *flag, int *seen, long long bound) {
  long long i = 0;
  while (*flag == 0 && i < bound) ++i;
  *seen = *flag;
}

int main() {
  const int n = 16 * 1024 * 1024, inc = 26;
  const size_t bytes = n * sizeof(int);
  int *h = nullptr, *d = nullptr;
  cudaMallocHost(&h, bytes);
  memset(h, 0, bytes);
  cudaMalloc(&d, bytes);
  cudaMemset(d, 255, bytes);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaDeviceSynchronize();

  cudaEventRecord(start, 0);
  cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, 0);
  increment<<<n / 512, 512>>>(d, inc, n);
  cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, 0);
  cudaEventRecord(stop, 0);
  unsigned long counter = 0;
  while (cudaEventQuery(stop) == cudaErrorNotReady) counter++;
  printf("CPU executed %lu iterations while waiting for GPU to finish\n", counter);
  int wrong = 0;
  for (int i = 0; i < n; i++) wrong += h[i] != inc;
  printf("wrong values: %d\n", wrong);

  int *flag = nullptr, *dflag = nullptr, *seen = nullptr, got = -1;
  printf("host alloc: %s\n", cudaGetErrorName(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped)));
  *flag = 0;
  printf("device pointer: %s\n", cudaGetErrorName(cudaHostGetDevicePointer(&dflag, flag, 0)));
  cudaMalloc(&seen, sizeof(int));
  wait_for_flag<<<1, 1>>>(dflag, seen, 1LL << 33);
  printf("query after launch: %s\n", cudaGetErrorName(cudaStreamQuery(0)));
  *(volatile int *)flag = 1;
  printf("synchronize: %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
  cudaMemcpy(&got, seen, sizeof(int), cudaMemcpyDeviceToHost);
  printf("kernel saw flag: %d\n", got);
  printf("query after synchronize: %s\n", cudaGetErrorName(cudaStreamQuery(0)));
  return 0;
}
