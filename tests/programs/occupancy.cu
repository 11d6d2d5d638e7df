// The runtime's occupancy API (and the driver's, through cudaGetDriverEntryPointByVersion):
// prints what the device reports about a multiprocessor and what the occupancy calls answer
// for kernels without shared memory, with static shared memory, with dynamic shared memory
// and with __launch_bounds__, so the test can check the answers against the attributes.
// Run with ANYCUDA_DEVICES=2: the minimum grid size follows the current device's
// multiprocessor count.
#include <cstdio>
#include <cuda.h>
#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("%s failed: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)

__global__ void plain(float *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = 2.0f * i;
}

__global__ void with_static(float *p) {
  __shared__ float buf[4096];                 // 16 KiB
  buf[threadIdx.x] = threadIdx.x;
  __syncthreads();
  p[blockIdx.x * blockDim.x + threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

__global__ void with_dynamic(float *p) {
  extern __shared__ float s[];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  p[blockIdx.x * blockDim.x + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

__global__ void __launch_bounds__(256) bounded(float *p) {
  p[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}

struct EightFloatsPerThread {                 // dynamic shared memory as a function of the block size
  __host__ __device__ size_t operator()(int block) const { return (size_t)block * 8 * sizeof(float); }
};

typedef CUresult (*MaxPotential)(int *, int *, CUfunction, CUoccupancyB2DSize, size_t, int);
typedef CUresult (*AvailableSmem)(size_t *, CUfunction, int, int);

static size_t sixteen_per_thread(int block) { return (size_t)block * 16; }

#define FUNC(name, f) do { cudaFuncAttributes a; CHECK(cudaFuncGetAttributes(&a, f)); \
    printf("func %s static %zu regs %d maxthreads %d maxdyn %d\n", name, a.sharedSizeBytes, a.numRegs, \
           a.maxThreadsPerBlock, a.maxDynamicSharedSizeBytes); } while (0)

int main() {
  CHECK(cudaSetDevice(0));
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  printf("device sms %d maxthreads_sm %d maxblocks_sm %d smem_sm %zu smem_block %zu smem_optin %zu "
         "reserved %zu regs_sm %d warp %d maxthreads %d\n",
         p.multiProcessorCount, p.maxThreadsPerMultiProcessor, p.maxBlocksPerMultiProcessor,
         p.sharedMemPerMultiprocessor, p.sharedMemPerBlock, p.sharedMemPerBlockOptin, p.reservedSharedMemPerBlock,
         p.regsPerMultiprocessor, p.warpSize, p.maxThreadsPerBlock);
  FUNC("plain", plain);
  FUNC("with_static", with_static);
  FUNC("with_dynamic", with_dynamic);
  FUNC("bounded", bounded);

  // active blocks for every block size (whole warps and a few others)
  printf("plain");
  for (int b = 32; b <= 1024; b += 32) {
    int blocks = -1;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, plain, b, 0));
    printf(" %d:%d", b, blocks);
  }
  printf("\n");
  printf("odd");
  const int odd[] = {1, 17, 33, 100, 1000, 1025};
  for (int b : odd) {
    int blocks = -1;
    cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, plain, b, 0);
    printf(" %d:%d", b, e == cudaSuccess ? blocks : -(int)e);
    cudaGetLastError();
  }
  printf("\n");
  printf("static");
  for (int b : {64, 256, 1024}) {
    int blocks = -1;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, with_static, b, 0));
    printf(" %d:%d", b, blocks);
  }
  printf("\n");
  printf("bounded");
  for (int b : {128, 256, 512}) {
    int blocks = -1;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, bounded, b, 0, cudaOccupancyDefault));
    printf(" %d:%d", b, blocks);
  }
  printf("\n");

  // more dynamic shared memory: fewer (or as many) blocks; past the kernel's limit none,
  // until the kernel opts in to more
  const size_t sweep[] = {0, 1000, 4096, 10000, 16384, 30000, 49152, 65536};
  printf("dynamic");
  for (size_t s : sweep) {
    int blocks = -1;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, with_dynamic, 128, s));
    printf(" %zu:%d", s, blocks);
  }
  printf("\n");
  CHECK(cudaFuncSetAttribute(with_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)p.sharedMemPerBlockOptin));
  printf("dynamic optin");
  for (size_t s : sweep) {
    int blocks = -1;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, with_dynamic, 128, s));
    printf(" %zu:%d", s, blocks);
  }
  printf("\n");

  // available dynamic shared memory for n blocks of a size, and the blocks that then fit
  printf("available");
  const int want[][2] = {{1, 128}, {2, 128}, {3, 256}, {5, 64}, {8, 256}, {2, 1024}, {3, 1024}};
  for (auto &w : want) {
    size_t avail = 0;
    CHECK(cudaOccupancyAvailableDynamicSMemPerBlock(&avail, with_dynamic, w[0], w[1]));
    int blocks = -1;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, with_dynamic, w[1], avail));
    printf(" %d,%d:%zu:%d", w[0], w[1], avail, blocks);
  }
  printf("\n");

  // suggested block sizes
  int grid = -1, block = -1;
  CHECK(cudaOccupancyMaxPotentialBlockSize(&grid, &block, plain, 0, 0));
  printf("potential plain %d %d\n", grid, block);
  CHECK(cudaOccupancyMaxPotentialBlockSize(&grid, &block, plain, 0, 200));
  printf("potential plain limit200 %d %d\n", grid, block);
  CHECK(cudaOccupancyMaxPotentialBlockSize(&grid, &block, bounded, 0, 0));
  printf("potential bounded %d %d\n", grid, block);
  CHECK(cudaOccupancyMaxPotentialBlockSize(&grid, &block, with_dynamic, 40000, 0));
  printf("potential dynamic40000 %d %d\n", grid, block);
  CHECK(cudaOccupancyMaxPotentialBlockSizeVariableSMem(&grid, &block, with_dynamic, EightFloatsPerThread(), 0));
  printf("potential variable %d %d\n", grid, block);

  // the driver's own calls, with a block-size-to-shared-memory callback
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult status;
  CHECK(cudaGetDriverEntryPointByVersion("cuOccupancyMaxPotentialBlockSize", &fn, 12000, cudaEnableDefault, &status));
  MaxPotential max_potential = (MaxPotential)fn;
  CHECK(cudaGetDriverEntryPointByVersion("cuOccupancyAvailableDynamicSMemPerBlock", &fn, 12000, cudaEnableDefault, &status));
  AvailableSmem available = (AvailableSmem)fn;
  cudaFunction_t f;
  CHECK(cudaGetFuncBySymbol(&f, (const void *)with_dynamic));
  int r1 = max_potential(&grid, &block, (CUfunction)f, sixteen_per_thread, 0, 0);
  printf("driver potential callback %d %d %d\n", r1, grid, block);
  int r2 = max_potential(&grid, &block, (CUfunction)f, nullptr, 20000, 512);
  printf("driver potential fixed %d %d %d\n", r2, grid, block);
  size_t avail = 0;
  int r3 = available(&avail, (CUfunction)f, 4, 256);
  printf("driver available %d %zu\n", r3, avail);

  // the suggested configuration runs
  CHECK(cudaOccupancyMaxPotentialBlockSize(&grid, &block, plain, 0, 0));
  int n = 10007;
  float *d;
  CHECK(cudaMalloc(&d, n * sizeof(float)));
  plain<<<(n + block - 1) / block, block>>>(d, n);
  CHECK(cudaGetLastError());
  float last;
  CHECK(cudaMemcpy(&last, d + n - 1, sizeof last, cudaMemcpyDeviceToHost));
  printf("ran %g\n", last);

  // on the second device the grid follows its multiprocessor count
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  if (count > 1) {
    CHECK(cudaSetDevice(1));
    int sms1 = 0;
    CHECK(cudaDeviceGetAttribute(&sms1, cudaDevAttrMultiProcessorCount, 1));
    CHECK(cudaOccupancyMaxPotentialBlockSize(&grid, &block, plain, 0, 0));
    printf("device1 sms %d potential %d %d\n", sms1, grid, block);
  }
  printf("done\n");
  return 0;
}
