// Cooperative launches and grid-wide synchronisation (cooperative_groups::this_grid().sync()).
//
// The grid is as large as can be co-resident (occupancy x multiprocessors). One kernel runs
// several phases separated by grid.sync(): a grid-wide sum, a normalisation by it, and
// Jacobi smoothing steps where each thread reads neighbours written by other blocks in the
// previous step. The result is written to argv[1] for the test to check against numpy, and
// checked here against a host reference too. Also: the cooperative-launch attribute, a grid
// too large to be co-resident, grid.is_valid() in a normal and a cooperative launch, and the
// same kernel launched through cudaLaunchKernelEx with the cooperative attribute.
//
// `cooperative deadlock`: block 0 leaves before the grid barrier the others wait at.
// `cooperative invalid-sync`: grid.sync() in a normal launch.
// `cooperative openmp` (built with -Xcompiler -fopenmp): a cooperative launch from inside the
// program's own OpenMP parallel region.
#include <cooperative_groups.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace cg = cooperative_groups;

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("%s failed: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)

constexpr int BLOCK = 128;
constexpr int STEPS = 12;

// x: n inputs; partial: one per block; total: [0] the sum; u, v: n floats of work space.
// Ends with the smoothed, normalised values in u (STEPS is even).
__global__ void phases(const float *x, float *partial, float *total, float *u, float *v, int n) {
  cg::grid_group grid = cg::this_grid();
  __shared__ float sum[BLOCK];
  // 1. each block's share of the sum
  float s = 0.0f;
  for (int i = grid.thread_rank(); i < n; i += grid.size()) s += x[i];
  sum[threadIdx.x] = s;
  __syncthreads();
  for (int w = BLOCK / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) sum[threadIdx.x] += sum[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sum[0];
  grid.sync();
  // 2. the total, by the last block (not block 0: any block sees every partial now)
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) {
    float t = 0.0f;
    for (int b = 0; b < gridDim.x; b++) t += partial[b];
    total[0] = t;
  }
  grid.sync();
  // 3. normalise
  float inv = 1.0f / total[0];
  for (int i = grid.thread_rank(); i < n; i += grid.size()) u[i] = x[i] * inv;
  grid.sync();
  // 4. Jacobi steps: the ends stay fixed, each inner point becomes the mean of its neighbours
  for (int step = 0; step < STEPS; step++) {
    const float *from = step % 2 ? v : u;
    float *to = step % 2 ? u : v;
    for (int i = grid.thread_rank(); i < n; i += grid.size())
      to[i] = (i == 0 || i == n - 1) ? from[i] : 0.5f * (from[i - 1] + from[i + 1]);
    grid.sync();
  }
}

__global__ void validity(int *out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = cg::this_grid().is_valid() ? 1 : 0;
}

__global__ void leaves_early(int *out) {
  if (blockIdx.x == 0) return;              // never reaches the grid barrier
  cg::this_grid().sync();
  out[blockIdx.x] = 1;
}

__global__ void sync_anyway(int *out) {
  cg::this_grid().sync();
  out[blockIdx.x] = 1;
}

static void host_reference(const std::vector<float> &x, std::vector<double> &u) {
  int n = (int)x.size();
  double t = 0.0;
  for (float v : x) t += v;
  u.assign(n, 0.0);
  for (int i = 0; i < n; i++) u[i] = x[i] / t;
  std::vector<double> w(n);
  for (int step = 0; step < STEPS; step++) {
    for (int i = 0; i < n; i++) w[i] = (i == 0 || i == n - 1) ? u[i] : 0.5 * (u[i - 1] + u[i + 1]);
    u.swap(w);
  }
}

static int launch_failure(const char *what, void (*kernel)(int *), int grid) {
  int *out;
  CHECK(cudaMalloc(&out, grid * sizeof(int)));
  void *args[] = {&out};
  cudaError_t e = strcmp(what, "deadlock") == 0
      ? cudaLaunchCooperativeKernel((void *)kernel, grid, BLOCK, args, 0, 0)
      : cudaLaunchKernel((void *)kernel, grid, BLOCK, args, 0, 0);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  printf("%s: %s\n", what, cudaGetErrorName(e));
  return 0;
}

static int from_openmp(int grid) {
  int *out, ones = 0;
  CHECK(cudaMalloc(&out, grid * sizeof(int)));
  CHECK(cudaMemset(out, 0, grid * sizeof(int)));
  cudaError_t e = cudaErrorUnknown;
#ifdef _OPENMP
#pragma omp parallel num_threads(2)
  if (omp_get_thread_num() == 1) {
    void *args[] = {&out};
    e = cudaLaunchCooperativeKernel((void *)sync_anyway, grid, BLOCK, args, 0, 0);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
  }
#endif
  std::vector<int> got(grid);
  CHECK(cudaMemcpy(got.data(), out, grid * sizeof(int), cudaMemcpyDeviceToHost));
  for (int v : got) ones += v;
  printf("openmp: %s, %d of %d blocks passed the grid barrier\n", cudaGetErrorName(e), ones, grid);
  return 0;
}

int main(int argc, char **argv) {
  CHECK(cudaSetDevice(0));
  int dev = 0, coop = 0, sms = 0, per_sm = 0;
  CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  if (argc > 1 && strcmp(argv[1], "deadlock") == 0) return launch_failure("deadlock", leaves_early, 2 * sms);
  if (argc > 1 && strcmp(argv[1], "invalid-sync") == 0) return launch_failure("invalid-sync", sync_anyway, 2);
  if (argc > 1 && strcmp(argv[1], "openmp") == 0) return from_openmp(4 * sms);
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, phases, BLOCK, 0));
  int grid = per_sm * sms;
  printf("cooperative attribute %d sms %d blocks per sm %d grid %d\n", coop, sms, per_sm, grid);

  const int n = 10007;
  std::vector<float> x(n);
  for (int i = 0; i < n; i++) x[i] = 0.25f + (float)((i * 37) % 101) / 16.0f;
  float *dx, *partial, *total, *u, *v;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&partial, grid * sizeof(float)));
  CHECK(cudaMalloc(&total, sizeof(float)));
  CHECK(cudaMalloc(&u, n * sizeof(float)));
  CHECK(cudaMalloc(&v, n * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  int nn = n;
  void *args[] = {&dx, &partial, &total, &u, &v, &nn};

  // too large to be co-resident
  cudaError_t e = cudaLaunchCooperativeKernel((void *)phases, grid + 1, BLOCK, args, 0, 0);
  printf("grid %d: %s\n", grid + 1, cudaGetErrorName(e));
  cudaGetLastError();

  std::vector<float> got(n);
  std::vector<double> want;
  host_reference(x, want);
  for (int how = 0; how < 2; how++) {
    CHECK(cudaMemset(u, 0xff, n * sizeof(float)));
    if (how == 0) {
      CHECK(cudaLaunchCooperativeKernel((void *)phases, grid, BLOCK, args, 0, 0));
    } else {
      cudaLaunchConfig_t config = {};
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeCooperative;
      attr[0].val.cooperative = 1;
      config.gridDim = grid;
      config.blockDim = BLOCK;
      config.attrs = attr;
      config.numAttrs = 1;
      CHECK(cudaLaunchKernelEx(&config, phases, (const float *)dx, partial, total, u, v, nn));
    }
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(got.data(), u, n * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0.0;
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs(got[i] - want[i]) / fabs(want[i]));
    printf("%s: max relative error %s\n", how == 0 ? "cudaLaunchCooperativeKernel" : "cudaLaunchKernelEx",
           worst < 1e-4 ? "below 1e-4" : "too large");
  }
  if (argc > 1) {
    FILE *fh = fopen(argv[1], "wb");
    fwrite(got.data(), sizeof(float), n, fh);
    fclose(fh);
  }

  int *flag, valid = -1;
  CHECK(cudaMalloc(&flag, sizeof(int)));
  validity<<<2, BLOCK>>>(flag);
  CHECK(cudaMemcpy(&valid, flag, sizeof(int), cudaMemcpyDeviceToHost));
  printf("normal launch: grid valid %d\n", valid);
  void *vargs[] = {&flag};
  CHECK(cudaLaunchCooperativeKernel((void *)validity, 2, BLOCK, vargs, 0, 0));
  CHECK(cudaMemcpy(&valid, flag, sizeof(int), cudaMemcpyDeviceToHost));
  printf("cooperative launch: grid valid %d\n", valid);
  return 0;
}
