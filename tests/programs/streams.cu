// Two streams, async copies, events and a host callback: each stream scales its half of
// an array; the event orders a second kernel on the other stream after the first.
#include <cstdio>

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("%s failed: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)

__global__ void scale(float *p, int n, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= s;
}

__global__ void add_from(float *dst, const float *src, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] += src[i];
}

static int callbacks = 0;
static void CUDART_CB note(void *data) { callbacks += *(int *)data; }

int main() {
  const int n = 4096, half = n / 2;
  float *h;
  CHECK(cudaMallocHost(&h, n * sizeof(float)));
  for (int i = 0; i < n; i++) h[i] = (float)(i % 100);
  float *d;
  CHECK(cudaMalloc(&d, n * sizeof(float)));
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t start, done1, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&done1));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start, s1));
  CHECK(cudaMemcpyAsync(d, h, half * sizeof(float), cudaMemcpyHostToDevice, s1));
  CHECK(cudaMemcpyAsync(d + half, h + half, half * sizeof(float), cudaMemcpyHostToDevice, s2));
  scale<<<half / 256, 256, 0, s1>>>(d, half, 2.0f);
  scale<<<half / 256, 256, 0, s2>>>(d + half, half, 3.0f);
  CHECK(cudaEventRecord(done1, s1));
  CHECK(cudaStreamWaitEvent(s2, done1, 0));
  add_from<<<half / 256, 256, 0, s2>>>(d + half, d, half);   // needs s1's result
  int one = 1, ten = 10;
  CHECK(cudaLaunchHostFunc(s1, note, &one));
  CHECK(cudaLaunchHostFunc(s2, note, &ten));
  CHECK(cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, s2));
  CHECK(cudaEventRecord(stop, s2));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaStreamSynchronize(s1));
  float ms = -1;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  printf("query %s elapsed_ok %d callbacks %d\n", cudaGetErrorName(cudaStreamQuery(s2)), ms >= 0, callbacks);
  double sum = 0;
  for (int i = 0; i < n; i++) sum += h[i];
  printf("h[1] %g h[2049] %g sum %.1f\n", h[1], h[half + 1], sum);
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaStreamDestroy(s2));
  CHECK(cudaFreeHost(h));
  CHECK(cudaFree(d));
  return 0;
}
