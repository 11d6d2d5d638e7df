// A tour of the runtime API beyond the basics: device queries, memset, device-to-device and
// cudaMemcpyDefault copies, managed memory, a template kernel with dynamic shared memory,
// cudaLaunchKernel, function attributes and occupancy, pitched 2-D copies, registered host
// memory, pointer attributes and cudaDeviceReset.
#include <cstdio>
#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("%s failed: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)

template <typename T>
__global__ void reverse(T *p, int n) {
  extern __shared__ unsigned char smem[];
  T *s = (T *)smem;
  int t = threadIdx.x;
  if (t < n) s[t] = p[t];
  __syncthreads();
  if (t < n) p[t] = s[n - 1 - t];
}

__global__ void iota(int *p, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = i;
}

int main() {
  int count = 0, dev = -1;
  CHECK(cudaGetDeviceCount(&count));
  CHECK(cudaSetDevice(0));
  CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int warp = 0;
  CHECK(cudaDeviceGetAttribute(&warp, cudaDevAttrWarpSize, 0));
  printf("count %d dev %d warp %d %d maxthreads %d name_nonempty %d\n", count, dev, warp, prop.warpSize,
         prop.maxThreadsPerBlock, prop.name[0] != 0);
  size_t free_b, total_b;
  CHECK(cudaMemGetInfo(&free_b, &total_b));
  printf("meminfo %d\n", free_b <= total_b && total_b > 0);
  // memset, device-to-device copy, managed memory
  int *a, *b, *m;
  CHECK(cudaMalloc(&a, 1000 * sizeof(int)));
  CHECK(cudaMalloc(&b, 1000 * sizeof(int)));
  CHECK(cudaMemset(a, 0xff, 1000 * sizeof(int)));
  int h[1000];
  CHECK(cudaMemcpy(h, a, sizeof h, cudaMemcpyDeviceToHost));
  printf("memset %d\n", h[999]);
  iota<<<3, 64>>>(a, 1000);
  CHECK(cudaMemcpy(b, a, 1000 * sizeof(int), cudaMemcpyDeviceToDevice));
  CHECK(cudaMemcpy(h, b, sizeof h, cudaMemcpyDefault));
  printf("d2d %d %d\n", h[0], h[999]);
  CHECK(cudaMallocManaged(&m, 256 * sizeof(int)));
  iota<<<1, 256>>>(m, 256);
  CHECK(cudaDeviceSynchronize());
  printf("managed %d\n", m[255]);
  // template kernel with dynamic shared memory
  double hd[100];
  for (int i = 0; i < 100; i++) hd[i] = i * 1.5;
  double *dd;
  CHECK(cudaMalloc(&dd, sizeof hd));
  CHECK(cudaMemcpy(dd, hd, sizeof hd, cudaMemcpyHostToDevice));
  reverse<double><<<1, 128, 100 * sizeof(double)>>>(dd, 100);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost));
  printf("reverse %g %g\n", hd[0], hd[99]);
  // explicit cudaLaunchKernel
  int n = 10;
  void *args[] = {&a, &n};
  CHECK(cudaLaunchKernel((const void *)iota, dim3(1), dim3(32), args, 0, 0));
  CHECK(cudaDeviceSynchronize());
  cudaFuncAttributes fa;
  CHECK(cudaFuncGetAttributes(&fa, reverse<double>));
  printf("func maxthreads %d\n", fa.maxThreadsPerBlock);
  int min_grid = 0, block = 0;
  CHECK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, iota, 0, 0));
  printf("occupancy block %d\n", block > 0);
  int blocks = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, iota, 128, 0));
  printf("active blocks %d\n", blocks > 0);
  // pitched memory
  float *pitched; size_t pitch;
  CHECK(cudaMallocPitch(&pitched, &pitch, 10 * sizeof(float), 4));
  float src2[4][10];
  for (int r = 0; r < 4; r++) for (int c = 0; c < 10; c++) src2[r][c] = r * 10 + c;
  CHECK(cudaMemcpy2D(pitched, pitch, src2, 10 * sizeof(float), 10 * sizeof(float), 4, cudaMemcpyHostToDevice));
  float back[4][10];
  CHECK(cudaMemcpy2D(back, 10 * sizeof(float), pitched, pitch, 10 * sizeof(float), 4, cudaMemcpyDeviceToHost));
  printf("pitch %d back %g\n", pitch >= 40, back[3][9]);
  void *host_reg = malloc(4096);
  CHECK(cudaHostRegister(host_reg, 4096, 0));
  CHECK(cudaHostUnregister(host_reg));
  cudaPointerAttributes pa;
  CHECK(cudaPointerGetAttributes(&pa, a));
  printf("ptr type %d\n", (int)pa.type);
  CHECK(cudaFree(a)); CHECK(cudaFree(b)); CHECK(cudaFree(m)); CHECK(cudaFree(dd)); CHECK(cudaFree(pitched));
  CHECK(cudaDeviceReset());
  printf("done\n");
  return 0;
}
