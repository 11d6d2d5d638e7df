// Resources stay flat in an unmodified program: 100,000 launches, 10,000 allocate/free cycles,
// and 200 short-lived host threads each using its default stream (built with --default-stream
// per-thread: each thread's stream, and the worker behind it, must go when the thread ends).
// Prints the growth of the resident set (KiB) after a warm-up, and the process's threads.
#include <cstdio>
#include <cstring>
#include <thread>
#include <dirent.h>
#include <unistd.h>

#define CHECK(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
  printf("error %s at line %d\n", cudaGetErrorName(e), __LINE__); return 1; } } while (0)

__global__ void empty() {}
__global__ void add(int *p, int v) { atomicAdd(p, v); }

static long resident_kib() {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) { if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0; fclose(f); }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int threads_now() {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  for (dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

static int launches(int n) {
  for (int i = 0; i < n; i++) {
    empty<<<1, 1>>>();
    if (i % 10000 == 9999) CHECK(cudaDeviceSynchronize());
  }
  CHECK(cudaDeviceSynchronize());
  return 0;
}

static int cycles(int n) {
  for (int i = 0; i < n; i++) {
    void *p;
    CHECK(cudaMalloc(&p, 1 << 18));
    CHECK(cudaMemset(p, 1, 1 << 18));          // touched: its pages are really taken
    CHECK(cudaFree(p));
  }
  return 0;
}

static int short_lived_threads(int n, int *sum) {
  for (int i = 0; i < n; i++) {
    std::thread t([sum, i] { add<<<1, 1>>>(sum, i); cudaStreamSynchronize(0); });
    t.join();
  }
  return 0;
}

int main() {
  if (launches(10000)) return 1;
  long before = resident_kib();
  if (launches(90000)) return 1;
  printf("launches grew %ld\n", resident_kib() - before);
  if (cycles(1000)) return 1;
  before = resident_kib();
  if (cycles(9000)) return 1;
  printf("cycles grew %ld\n", resident_kib() - before);
  int *sum;
  CHECK(cudaMallocManaged(&sum, sizeof(int)));
  *sum = 0;
  if (short_lived_threads(20, sum)) return 1;
  int threads_before = threads_now();
  before = resident_kib();
  if (short_lived_threads(180, sum)) return 1;
  CHECK(cudaDeviceSynchronize());
  usleep(200000);                                 // the workers of ended threads' streams leave
  printf("threads grew %ld KiB, %d threads\n", resident_kib() - before, threads_now() - threads_before);
  printf("sum %d\n", *sum);
  return 0;
}
