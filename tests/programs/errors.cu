// Errors as a GPU reports them: a bad launch configuration is reported by cudaGetLastError
// and cleared; a kernel that writes out of bounds makes the context unusable (sticky).
#include <cstdio>
#include <cuda.h>

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
  fill<<<1, 64, 1 << 20>>>(d, 64, 7); // more dynamic shared memory than a block may have
  printf("too much shared: %s\n", cudaGetErrorName(cudaGetLastError()));
  fill<<<0, 64>>>(d, 64, 7);          // an empty grid
  printf("empty grid: %s\n", cudaGetErrorName(cudaGetLastError()));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(1);
  config.blockDim = dim3(32, 32, 2);
  printf("bad config ex: %s\n", cudaGetErrorName(cudaLaunchKernelEx(&config, fill, d, 64, 7)));
  cudaGetLastError();
  // the same launch through the driver API, from the program's own code: the driver API's code
  typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                unsigned, CUstream, void **, void **);
  void *launch = nullptr;
  cudaDriverEntryPointQueryResult found;
  cudaGetDriverEntryPointByVersion("cuLaunchKernel", &launch, 12000, cudaEnableDefault, &found);
  cudaFunction_t fill_fn;
  cudaGetFuncBySymbol(&fill_fn, (const void *)fill);
  int n = 64, value = 7;
  void *args[] = {&d, &n, &value};
  printf("driver api bad config: %d\n",
         (int)((launch_fn)launch)((CUfunction)fill_fn, 1, 1, 1, 2048, 1, 1, 0, 0, args, nullptr));
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
