// Device printf: output from several blocks appears at the synchronisation, after what the
// host printed before it (no fflush needed: the driver writes through the program's own
// stdout). A kernel the program never waits for prints by the time it exits under anycuda;
// on an H200 (driver 580) its output was lost.
#include <cstdio>

__global__ void hello(int base) {
  printf("block %d thread %d value %d %.2f %s\n", blockIdx.x, threadIdx.x,
         base + blockIdx.x * blockDim.x + threadIdx.x, 0.5f * threadIdx.x, "ok");
}

__global__ void bye() { printf("bye from the device\n"); }

int main() {
  printf("host before\n");
  hello<<<2, 3>>>(100);
  cudaError_t e = cudaDeviceSynchronize();
  printf("host after: %s\n", cudaGetErrorString(e));
  bye<<<1, 1>>>();
  return e != cudaSuccess;
}
