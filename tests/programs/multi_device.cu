// Two devices (run with ANYCUDA_DEVICES=2): device properties and peer queries, peer access
// enabled and disabled with CUDA's error codes, per-device memory accounting, a kernel on
// each device in a stream of its own, peer copies both ways ordered by events across the
// devices, a synchronous peer copy, a 3-D peer copy of a box, pointer attributes naming the
// owning device, the errors CUDA gives for a stream or event of the other device, and
// __device__ / __constant__ variables that each device holds a copy of.
#include <cstdio>
#include <cstring>
#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("%s failed: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)

__device__ int counter = 7;                                      // one copy per device
__constant__ int step;

__global__ void bump(int times) {
  if (threadIdx.x < times) atomicAdd(&counter, step);
}

__global__ void fill(int *p, int n, int base) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = base + i;
}

__global__ void add_twice(int *dst, const int *src, int n) {      // dst += 2 * src
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] += 2 * src[i];
}

__global__ void subtract(int *dst, const int *src, int n) {       // dst -= src
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] -= src[i];
}

int main() {
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  printf("count %d\n", count);
  if (count < 2) return 1;
  for (int d = 0; d < 2; d++) {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, d));
    printf("device %d sms %d bus %d total %zu\n", d, prop.multiProcessorCount, prop.pciBusID, prop.totalGlobalMem);
  }
  printf("set invalid %d\n", (int)cudaSetDevice(count));
  cudaGetLastError();

  int can01 = -1, can10 = -1, can00 = -1;
  CHECK(cudaDeviceCanAccessPeer(&can01, 0, 1));
  CHECK(cudaDeviceCanAccessPeer(&can10, 1, 0));
  CHECK(cudaDeviceCanAccessPeer(&can00, 0, 0));
  printf("can access %d %d %d\n", can01, can10, can00);

  // peer access: enabling twice, disabling twice
  CHECK(cudaSetDevice(0));
  int e1 = cudaDeviceEnablePeerAccess(1, 0);
  int e2 = cudaDeviceEnablePeerAccess(1, 0);
  cudaGetLastError();
  CHECK(cudaSetDevice(1));
  int e3 = cudaDeviceEnablePeerAccess(0, 0);
  int e4 = cudaDeviceDisablePeerAccess(0);
  int e5 = cudaDeviceDisablePeerAccess(0);
  cudaGetLastError();
  int e6 = cudaDeviceEnablePeerAccess(0, 0);
  printf("peer access %d %d %d %d %d %d\n", e1, e2, e3, e4, e5, e6);
  int dev = -1;
  CHECK(cudaGetDevice(&dev));
  printf("current %d\n", dev);

  // memory accounting: an allocation on device 1 shows in device 1's free memory
  const size_t big = 64 << 20;
  size_t free1a, total1, free1b, free0, total0;
  CHECK(cudaMemGetInfo(&free1a, &total1));
  void *block1;
  CHECK(cudaMalloc(&block1, big));
  CHECK(cudaMemGetInfo(&free1b, &total1));
  CHECK(cudaSetDevice(0));
  CHECK(cudaMemGetInfo(&free0, &total0));
  printf("meminfo drop %d totals %zu %zu\n", free1a - free1b >= big, total0, total1);

  // a kernel on each device, each in a stream of its own; copies both ways between them
  const int n = 3000;
  int *a0, *b0, *a1, *b1, *c1;
  cudaStream_t s0, s1;
  cudaEvent_t ev0, ev1;
  CHECK(cudaSetDevice(0));
  CHECK(cudaMalloc(&a0, n * sizeof(int)));
  CHECK(cudaMalloc(&b0, n * sizeof(int)));
  CHECK(cudaStreamCreate(&s0));
  CHECK(cudaEventCreate(&ev0));
  fill<<<4, 128, 0, s0>>>(a0, n, 1000);
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(ev0, s0));

  CHECK(cudaSetDevice(1));
  CHECK(cudaMalloc(&a1, n * sizeof(int)));
  CHECK(cudaMalloc(&b1, n * sizeof(int)));
  CHECK(cudaMalloc(&c1, n * sizeof(int)));
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaEventCreate(&ev1));
  fill<<<3, 256, 0, s1>>>(a1, n, 5000);
  CHECK(cudaGetLastError());
  // a launch into device 0's stream while device 1 is current fails
  fill<<<1, 32, 0, s0>>>(a1, 32, 0);
  printf("launch other device's stream %d\n", (int)cudaGetLastError());
  // so does recording device 0's event in device 1's stream
  printf("record other device's event %d\n", (int)cudaEventRecord(ev0, s1));
  cudaGetLastError();
  CHECK(cudaStreamWaitEvent(s1, ev0, 0));                   // waiting on another device's event is fine
  CHECK(cudaMemcpyPeerAsync(b1, 1, a0, 0, n * sizeof(int), s1));      // device 0 -> device 1
  add_twice<<<5, 64, 0, s1>>>(a1, b1, n);                   // a1 = 5000 + i + 2 * (1000 + i)
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(ev1, s1));

  CHECK(cudaSetDevice(0));
  CHECK(cudaStreamWaitEvent(s0, ev1, 0));
  CHECK(cudaMemcpyPeerAsync(b0, 0, a1, 1, n * sizeof(int), s0));      // device 1 -> device 0
  subtract<<<2, 256, 0, s0>>>(b0, a0, n);                   // b0 = a1 - a0
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(s0));
  static int h[n];
  CHECK(cudaMemcpy(h, b0, sizeof h, cudaMemcpyDeviceToHost));
  long long sum = 0;
  for (int i = 0; i < n; i++) sum += h[i];
  printf("both ways h[0] %d h[%d] %d sum %lld\n", h[0], n - 1, h[n - 1], sum);

  // a synchronous peer copy back to device 1, read there
  CHECK(cudaMemcpyPeer(c1, 1, b0, 0, n * sizeof(int)));
  CHECK(cudaSetDevice(1));
  memset(h, 0, sizeof h);
  CHECK(cudaMemcpy(h, c1, sizeof h, cudaMemcpyDeviceToHost));
  printf("peer sync h[7] %d\n", h[7]);

  // events: elapsed time within device 1, and across devices (an error)
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  CHECK(cudaEventRecord(t0, s1));
  fill<<<1, 64, 0, s1>>>(c1, 64, 0);
  CHECK(cudaEventRecord(t1, s1));
  CHECK(cudaEventSynchronize(t1));
  float ms = -1;
  CHECK(cudaEventElapsedTime(&ms, t0, t1));
  printf("elapsed ok %d across devices %d\n", ms >= 0, (int)cudaEventElapsedTime(&ms, ev0, t1));
  cudaGetLastError();

  // a 3-D peer copy: a 3 x 3 x 2 box of ints from an 8 x 6 x 4 volume on device 0, at
  // (1, 2, 1), into a 5 x 4 x 3 volume on device 1, at (0, 1, 1)
  int vol[4][6][8];
  for (int z = 0; z < 4; z++)
    for (int y = 0; y < 6; y++)
      for (int x = 0; x < 8; x++) vol[z][y][x] = 100 * z + 10 * y + x;
  int *src3, *dst3;
  CHECK(cudaSetDevice(0));
  CHECK(cudaMalloc(&src3, sizeof vol));
  CHECK(cudaMemcpy(src3, vol, sizeof vol, cudaMemcpyHostToDevice));
  CHECK(cudaSetDevice(1));
  CHECK(cudaMalloc(&dst3, 5 * 4 * 3 * sizeof(int)));
  CHECK(cudaMemset(dst3, 0xff, 5 * 4 * 3 * sizeof(int)));
  cudaMemcpy3DPeerParms p;
  memset(&p, 0, sizeof p);
  p.srcPtr = make_cudaPitchedPtr(src3, 8 * sizeof(int), 8, 6);
  p.srcPos = make_cudaPos(1 * sizeof(int), 2, 1);
  p.srcDevice = 0;
  p.dstPtr = make_cudaPitchedPtr(dst3, 5 * sizeof(int), 5, 4);
  p.dstPos = make_cudaPos(0, 1, 1);
  p.dstDevice = 1;
  p.extent = make_cudaExtent(3 * sizeof(int), 3, 2);
  CHECK(cudaMemcpy3DPeer(&p));
  int out3[3 * 4 * 5];
  CHECK(cudaMemcpy(out3, dst3, sizeof out3, cudaMemcpyDeviceToHost));
  printf("3d");
  for (int i = 0; i < 3 * 4 * 5; i++) printf(" %d", out3[i]);
  printf("\n");

  // pointer attributes name the device that allocated the memory
  cudaPointerAttributes pa0, pa1;
  CHECK(cudaPointerGetAttributes(&pa0, a0 + 5));
  CHECK(cudaPointerGetAttributes(&pa1, a1 + 5));
  printf("owners %d %d types %d %d\n", pa0.device, pa1.device, (int)pa0.type, (int)pa1.type);

  // the default stream of each device, and synchronisation of each
  for (int d = 0; d < 2; d++) {
    CHECK(cudaSetDevice(d));
    fill<<<2, 32, 0, 0>>>(d ? a1 : a0, 64, 10 * d);
    CHECK(cudaDeviceSynchronize());
  }
  int x0, x1;
  CHECK(cudaMemcpy(&x0, a0 + 63, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&x1, a1 + 63, sizeof(int), cudaMemcpyDefault));
  printf("default streams %d %d\n", x0, x1);
  // each device has its own counter (starting at 7) and its own step
  for (int d = 0; d < 2; d++) {
    CHECK(cudaSetDevice(d));
    int st = 10 + d;
    CHECK(cudaMemcpyToSymbol(step, &st, sizeof st));
  }
  for (int d = 1; d >= 0; d--) {
    CHECK(cudaSetDevice(d));
    bump<<<1, 64>>>(3 + d);                                  // 7 + 10 * 3 on 0, 7 + 11 * 4 on 1
    CHECK(cudaGetLastError());
  }
  int counters[2];
  void *where[2];
  for (int d = 0; d < 2; d++) {
    CHECK(cudaSetDevice(d));
    CHECK(cudaMemcpyFromSymbol(&counters[d], counter, sizeof(int)));
    CHECK(cudaGetSymbolAddress(&where[d], counter));
  }
  printf("counters %d %d distinct %d\n", counters[0], counters[1], where[0] != where[1]);
  CHECK(cudaFree(block1));
  printf("done\n");
  return 0;
}
