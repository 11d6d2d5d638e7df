// Device printf from several blocks, flushed by cudaDeviceSynchronize.
#include <cstdio>

__global__ void hello(int base) {
  printf("block %d thread %d value %d %.2f %s\n", blockIdx.x, threadIdx.x,
         base + blockIdx.x * blockDim.x + threadIdx.x, 0.5f * threadIdx.x, "ok");
}

int main() {
  printf("host before\n");
  fflush(stdout);
  hello<<<2, 3>>>(100);
  cudaError_t e = cudaDeviceSynchronize();
  fflush(stdout);
  printf("host after: %s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}
