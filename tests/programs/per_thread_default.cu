// The default stream of host threads, as `nvcc --default-stream per-thread` makes it: each
// host thread's stream 0 is a stream of its own. Built without that flag, stream 0 is the
// legacy default stream shared by every thread, and the same program still gives the same
// results, only serialised.
//   per_thread_default rounds <seed> <threads> <rounds>: each thread transforms its own array
//     on its default stream (launches, blocking and asynchronous copies, memsets, events) and
//     prints a checksum the test recomputes.
//   per_thread_default independence <timeout_ms>: thread A's kernel waits (bounded) for a flag
//     that thread B's kernel, launched after A's, sets: "independent" when the two default
//     streams ran at once, "serialised" when B's kernel had to wait for A's.
//   per_thread_default capture <threads> <runs>: each thread captures work on its default stream
//     into a graph and launches it; the legacy default stream refuses to be captured.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define CHECK(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
  printf("error %s at line %d\n", cudaGetErrorName(e), __LINE__); std::exit(1); } } while (0)

__global__ void step(unsigned *x, int n, unsigned a, unsigned b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b + (unsigned)i;
}

__global__ void mix(unsigned *dst, const unsigned *src, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] ^= src[n - 1 - i];
}

static unsigned long long rounds_of(int t, unsigned seed, int n, int rounds) {
  std::vector<unsigned> h(n);
  for (int i = 0; i < n; i++) h[i] = (seed + 7919u * t + (unsigned)i) * 2654435761u;
  unsigned *x, *y;
  CHECK(cudaMalloc(&x, n * sizeof(unsigned)));
  CHECK(cudaMalloc(&y, n * sizeof(unsigned)));
  CHECK(cudaMemcpy(x, h.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));   // blocking: _ptds
  CHECK(cudaMemset(y, 0, n * sizeof(unsigned)));
  cudaEvent_t done; CHECK(cudaEventCreate(&done));
  int blocks = (n + 127) / 128;
  for (int r = 0; r < rounds; r++) {
    step<<<blocks, 128>>>(x, n, 2u * r + 1u, (unsigned)t);                      // stream 0: _ptsz
    if (r % 4 == 1) CHECK(cudaMemcpyAsync(y, x, n * sizeof(unsigned), cudaMemcpyDeviceToDevice, 0));
    if (r % 4 == 3) mix<<<blocks, 128>>>(x, y, n);
    if (r % 5 == 4) CHECK(cudaMemsetAsync(x + r, 0xff, 3 * sizeof(unsigned), 0));
    if (r % 7 == 6) { CHECK(cudaEventRecord(done, 0)); CHECK(cudaEventSynchronize(done)); }
  }
  CHECK(cudaMemcpyAsync(h.data(), x, n * sizeof(unsigned), cudaMemcpyDeviceToHost, 0));
  CHECK(cudaStreamSynchronize(0));
  unsigned long long sum = 0;
  for (int i = 0; i < n; i++) sum += (unsigned long long)(h[i] ^ (unsigned)i) * (unsigned)(i % 13 + 1);
  CHECK(cudaEventDestroy(done));
  CHECK(cudaFree(x)); CHECK(cudaFree(y));
  return sum;
}

static int run_rounds(unsigned seed, int threads, int rounds) {
  std::vector<unsigned long long> sums(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++)
    ts.emplace_back([t, seed, rounds, &sums] { sums[t] = rounds_of(t, seed, 1000 + 37 * t, rounds); });
  for (auto &t : ts) t.join();
  for (int t = 0; t < threads; t++) printf("thread %d %llu\n", t, sums[t]);
  return 0;
}

// Spins on `flag` for at most timeout_ns of the device's global timer: never hangs.
__global__ void wait_for_flag(volatile int *flag, int *outcome, unsigned long long timeout_ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    if (*flag) { *outcome = 1; return; }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < timeout_ns);
  *outcome = 2;
}

__global__ void set_flag(volatile int *flag) { *flag = 1; }

static int run_independence(unsigned long long timeout_ms) {
  int *flag, *outcome;
  CHECK(cudaMallocManaged(&flag, sizeof(int)));
  CHECK(cudaMallocManaged(&outcome, sizeof(int)));
  *flag = 0; *outcome = 0;
  std::atomic<int> launched{0};
  std::thread a([&] {
    wait_for_flag<<<1, 1>>>(flag, outcome, timeout_ms * 1000000ull);
    CHECK(cudaGetLastError());
    launched = 1;
    CHECK(cudaStreamSynchronize(0));
  });
  std::thread b([&] {
    while (!launched) std::this_thread::yield();
    set_flag<<<1, 1>>>(flag);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(0));
  });
  a.join(); b.join();
  CHECK(cudaDeviceSynchronize());
  printf("%s flag %d\n", *outcome == 1 ? "independent" : *outcome == 2 ? "serialised" : "unfinished", *flag);
  return 0;
}

// Each thread captures its default stream's work into a graph and launches it `runs` times:
// the per-thread default stream can be captured, the legacy one cannot (an error, as CUDA says).
static unsigned long long captured_of(int t, int runs, cudaError_t *error) {
  const int n = 500 + t;
  unsigned *x;
  CHECK(cudaMalloc(&x, n * sizeof(unsigned)));
  CHECK(cudaMemset(x, 0, n * sizeof(unsigned)));
  *error = cudaStreamBeginCapture(0, cudaStreamCaptureModeThreadLocal);
  if (*error != cudaSuccess) { cudaGetLastError(); CHECK(cudaFree(x)); return 0; }
  cudaStreamCaptureStatus status;
  CHECK(cudaStreamIsCapturing(0, &status));
  step<<<(n + 127) / 128, 128>>>(x, n, 3u, (unsigned)t);
  CHECK(cudaMemsetAsync(x + 1, 0, sizeof(unsigned), 0));
  step<<<(n + 127) / 128, 128>>>(x, n, 5u, 1u);
  cudaGraph_t graph;
  CHECK(cudaStreamEndCapture(0, &graph));
  if (status != cudaStreamCaptureStatusActive) { printf("not capturing\n"); std::exit(1); }
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < runs; r++) CHECK(cudaGraphLaunch(exec, 0));
  std::vector<unsigned> h(n);
  CHECK(cudaMemcpyAsync(h.data(), x, n * sizeof(unsigned), cudaMemcpyDeviceToHost, 0));
  CHECK(cudaStreamSynchronize(0));
  unsigned long long sum = 0;
  for (int i = 0; i < n; i++) sum += (unsigned long long)h[i] * (unsigned)(i + 1);
  CHECK(cudaGraphExecDestroy(exec)); CHECK(cudaGraphDestroy(graph)); CHECK(cudaFree(x));
  return sum;
}

static int run_capture(int threads, int runs) {
  std::vector<unsigned long long> sums(threads);
  std::vector<cudaError_t> errors(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++)
    ts.emplace_back([t, runs, &sums, &errors] { sums[t] = captured_of(t, runs, &errors[t]); });
  for (auto &t : ts) t.join();
  for (int t = 0; t < threads; t++)
    if (errors[t] != cudaSuccess) printf("thread %d %s\n", t, cudaGetErrorName(errors[t]));
    else printf("thread %d %llu\n", t, sums[t]);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 4 && !strcmp(argv[1], "capture")) return run_capture(atoi(argv[2]), atoi(argv[3]));
  if (argc >= 5 && !strcmp(argv[1], "rounds")) return run_rounds(strtoul(argv[2], 0, 10), atoi(argv[3]), atoi(argv[4]));
  if (argc >= 3 && !strcmp(argv[1], "independence")) return run_independence(strtoull(argv[2], 0, 10));
  printf("usage: %s rounds <seed> <threads> <rounds> | independence <timeout_ms> | capture <threads> <runs>\n",
         argv[0]);
  return 2;
}
