// __managed__ variables: read and written by the host directly and by kernels, one copy for
// every device.
#include <cstdio>
__managed__ int counter = 5;
__managed__ float vec[8];
__global__ void bump() { atomicAdd(&counter, 1); vec[threadIdx.x] = threadIdx.x * 0.5f; }
int main() {
  printf("before %d\n", counter);
  bump<<<1, 8>>>();
  cudaError_t e = cudaDeviceSynchronize();
  printf("after %d vec[7] %g %s\n", counter, vec[7], cudaGetErrorName(e));
  counter = 100;
  bump<<<1, 8>>>();
  cudaDeviceSynchronize();
  printf("host write %d\n", counter);
  int devices = 0;
  cudaGetDeviceCount(&devices);
  for (int d = 1; d < devices; d++) {          // kernels on every device update the same copy
    cudaSetDevice(d);
    bump<<<1, 8>>>();
    cudaDeviceSynchronize();
    printf("device %d %d\n", d, counter);
  }
  return 0;
}
