// A graph built node by node (memset, kernels, a host node, a 1-D memcpy, an empty join
// node) and launched twice; a 3-D copy between pitched device memory and the host.
#include <cstdio>
#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("%s failed: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)

__global__ void add(int *p, int n, int v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += v;
}

static int host_calls = 0;
static void CUDART_CB note(void *) { host_calls++; }

int main() {
  const int n = 512;
  int *d, *h;
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  CHECK(cudaMallocHost(&h, n * sizeof(int)));
  cudaGraph_t g;
  CHECK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t zero, k1, k2, join, host, copy;
  cudaMemsetParams mp = {};
  mp.dst = d; mp.value = 0; mp.elementSize = 4; mp.width = n; mp.height = 1;
  CHECK(cudaGraphAddMemsetNode(&zero, g, nullptr, 0, &mp));
  int nn = n, v1 = 5, v2 = 7;
  void *a1[] = {&d, &nn, &v1}, *a2[] = {&d, &nn, &v2};
  cudaKernelNodeParams kp = {};
  kp.func = (void *)add; kp.gridDim = dim3(n / 128); kp.blockDim = dim3(128); kp.kernelParams = a1;
  CHECK(cudaGraphAddKernelNode(&k1, g, &zero, 1, &kp));
  v1 = 1000;                                            // parameters were copied when the node was made
  kp.kernelParams = a2;
  CHECK(cudaGraphAddKernelNode(&k2, g, &k1, 1, &kp));
  CHECK(cudaGraphAddEmptyNode(&join, g, &k2, 1));
  CHECK(cudaGraphAddMemcpyNode1D(&copy, g, &join, 1, h, d, n * sizeof(int), cudaMemcpyDeviceToHost));
  cudaHostNodeParams hp = {note, nullptr};
  CHECK(cudaGraphAddHostNode(&host, g, &copy, 1, &hp));
  cudaGraphExec_t ex;
  CHECK(cudaGraphInstantiate(&ex, g, 0));
  CHECK(cudaGraphLaunch(ex, 0));
  CHECK(cudaGraphLaunch(ex, 0));
  CHECK(cudaDeviceSynchronize());
  printf("graph h[0] %d h[511] %d host calls %d\n", h[0], h[n - 1], host_calls);

  // 3-D: a 4 x 3 x 2 box of ints through pitched device memory
  cudaExtent ext = make_cudaExtent(4 * sizeof(int), 3, 2);
  cudaPitchedPtr dev;
  CHECK(cudaMalloc3D(&dev, ext));
  int src[2][3][4], back[2][3][4];
  for (int z = 0; z < 2; z++) for (int y = 0; y < 3; y++) for (int x = 0; x < 4; x++) src[z][y][x] = 100 * z + 10 * y + x;
  cudaMemcpy3DParms up = {};
  up.srcPtr = make_cudaPitchedPtr(src, 4 * sizeof(int), 4, 3);
  up.dstPtr = dev; up.extent = ext; up.kind = cudaMemcpyHostToDevice;
  CHECK(cudaMemcpy3D(&up));
  cudaMemcpy3DParms down = {};
  down.srcPtr = dev; down.dstPtr = make_cudaPitchedPtr(back, 4 * sizeof(int), 4, 3);
  down.extent = ext; down.kind = cudaMemcpyDeviceToHost;
  CHECK(cudaMemcpy3D(&down));
  printf("3d pitch_ok %d back %d %d\n", dev.pitch >= 16, back[1][2][3], back[0][1][2]);
  return 0;
}
