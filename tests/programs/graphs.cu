// CUDA graphs by stream capture: a fork-join capture over two streams (event record and
// wait), with a memset, kernels, a device-to-host copy and a host function in the graph;
// the graph is instantiated once and launched several times.
#include <cstdio>
#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("%s failed: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)

__global__ void add(int *p, int n, int v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += v;
}

__global__ void combine(int *dst, const int *a, const int *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] += a[i] * b[i];
}

static int host_calls = 0;
static void CUDART_CB count_call(void *) { host_calls++; }

int main() {
  const int n = 1000;
  int *a, *b, *acc, *h;
  CHECK(cudaMalloc(&a, n * sizeof(int)));
  CHECK(cudaMalloc(&b, n * sizeof(int)));
  CHECK(cudaMalloc(&acc, n * sizeof(int)));
  CHECK(cudaMallocHost(&h, n * sizeof(int)));
  CHECK(cudaMemset(acc, 0, n * sizeof(int)));
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaStreamCreate(&s2));
  cudaEvent_t fork, join;
  CHECK(cudaEventCreate(&fork));
  CHECK(cudaEventCreate(&join));

  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureStatus status;
  CHECK(cudaStreamIsCapturing(s1, &status));
  printf("capturing %d\n", status == cudaStreamCaptureStatusActive);
  CHECK(cudaMemsetAsync(a, 0, n * sizeof(int), s1));
  CHECK(cudaEventRecord(fork, s1));
  CHECK(cudaStreamWaitEvent(s2, fork, 0));              // s2 joins the capture
  CHECK(cudaMemsetAsync(b, 0, n * sizeof(int), s2));
  add<<<(n + 255) / 256, 256, 0, s2>>>(b, n, 3);
  CHECK(cudaEventRecord(join, s2));
  add<<<(n + 255) / 256, 256, 0, s1>>>(a, n, 2);
  CHECK(cudaStreamWaitEvent(s1, join, 0));              // and comes back
  combine<<<(n + 255) / 256, 256, 0, s1>>>(acc, a, b, n);
  CHECK(cudaMemcpyAsync(h, acc, n * sizeof(int), cudaMemcpyDeviceToHost, s1));
  CHECK(cudaLaunchHostFunc(s1, count_call, nullptr));
  CHECK(cudaStreamEndCapture(s1, &graph));
  CHECK(cudaStreamIsCapturing(s1, &status));
  printf("capturing after %d, nothing ran yet %d\n", status == cudaStreamCaptureStatusActive, host_calls == 0);

  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < 4; r++) CHECK(cudaGraphLaunch(exec, s1));
  CHECK(cudaStreamSynchronize(s1));
  long long sum = 0;
  for (int i = 0; i < n; i++) sum += h[i];
  printf("host calls %d acc[0] %d sum %lld\n", host_calls, h[0], sum);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  return 0;
}
