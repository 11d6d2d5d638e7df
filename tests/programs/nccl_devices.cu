// NCCL over the devices of one process (run with ANYCUDA_DEVICES=N): ncclCommInitAll, then on
// each device's own stream a kernel makes the input, a grouped all-reduce (float, sum), a
// kernel uses its result, an all-gather of ints, a broadcast of doubles from the last rank and
// a grouped send/receive ring; then the error codes and texts. The NCCL prototypes it needs are
// declared here (no NCCL header). Usage: nccl_devices <input floats file> <output file>.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

typedef struct ncclComm *ncclComm_t;
extern "C" {
int ncclGetVersion(int *version);
int ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);
int ncclCommDestroy(ncclComm_t comm);
int ncclCommCount(ncclComm_t comm, int *count);
int ncclCommUserRank(ncclComm_t comm, int *rank);
int ncclGroupStart(void);
int ncclGroupEnd(void);
int ncclAllReduce(const void *s, void *r, size_t n, int type, int op, ncclComm_t comm, cudaStream_t st);
int ncclAllGather(const void *s, void *r, size_t n, int type, ncclComm_t comm, cudaStream_t st);
int ncclBroadcast(const void *s, void *r, size_t n, int type, int root, ncclComm_t comm, cudaStream_t st);
int ncclSend(const void *s, size_t n, int type, int peer, ncclComm_t comm, cudaStream_t st);
int ncclRecv(void *r, size_t n, int type, int peer, ncclComm_t comm, cudaStream_t st);
const char *ncclGetErrorString(int result);
const char *ncclGetLastError(ncclComm_t comm);
int ncclCommInitRankScalable(ncclComm_t *c, int n, int r, int nid, void *ids, void *config);
}
enum { ncclInt32 = 2, ncclFloat32 = 7, ncclFloat64 = 8, ncclSum = 0 };

#define CHECK(call) do { int e_ = (int)(call); if (e_) { printf("%s failed: %d\n", #call, e_); return 1; } } while (0)
#define N 1000
#define MAXDEV 8

__global__ void make(float *dst, const float *src, int n, int rank) {      // dst = 2 src + rank
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = 2 * src[i] + rank;
}

__global__ void square(float *p, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = p[i] * p[i];
}

int main(int argc, char **argv) {
  int ndev = 0, version = 0;
  CHECK(cudaGetDeviceCount(&ndev));
  if (ndev > MAXDEV) ndev = MAXDEV;
  CHECK(ncclGetVersion(&version));
  printf("devices %d version %d\n", ndev, version);
  float *input = (float *)malloc(sizeof(float) * N * ndev);
  FILE *f = fopen(argv[1], "rb");
  if (!f || fread(input, sizeof(float), (size_t)N * ndev, f) != (size_t)N * ndev) return 2;
  fclose(f);

  ncclComm_t comms[MAXDEV];
  CHECK(ncclCommInitAll(comms, ndev, NULL));
  cudaStream_t streams[MAXDEV];
  float *stage[MAXDEV], *send[MAXDEV], *recv[MAXDEV];
  int *ints[MAXDEV], *gathered[MAXDEV], *ring[MAXDEV];
  double *dbl[MAXDEV];
  for (int d = 0; d < ndev; d++) {
    int count = 0, rank = -1;
    CHECK(ncclCommCount(comms[d], &count));
    CHECK(ncclCommUserRank(comms[d], &rank));
    printf("comm %d count %d rank %d\n", d, count, rank);
    CHECK(cudaSetDevice(d));
    CHECK(cudaStreamCreate(&streams[d]));
    CHECK(cudaMalloc(&stage[d], N * sizeof(float)));
    CHECK(cudaMalloc(&send[d], N * sizeof(float)));
    CHECK(cudaMalloc(&recv[d], N * sizeof(float)));
    CHECK(cudaMalloc(&ints[d], 4 * sizeof(int)));
    CHECK(cudaMalloc(&gathered[d], 4 * ndev * sizeof(int)));
    CHECK(cudaMalloc(&ring[d], 2 * sizeof(int)));
    CHECK(cudaMalloc(&dbl[d], 3 * sizeof(double)));
    CHECK(cudaMemset(recv[d], 0xFF, N * sizeof(float)));
    int mine[4] = {d, 10 * d, 100 * d, -d};
    double mydbl[3] = {d + 0.5, d * 1.25, -1.0 * d};
    int myring[2] = {1000 + d, -1};
    CHECK(cudaMemcpy(ints[d], mine, sizeof(mine), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dbl[d], mydbl, sizeof(mydbl), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(ring[d], myring, sizeof(myring), cudaMemcpyHostToDevice));
  }
  for (int d = 0; d < ndev; d++) {                 // the inputs: a copy and a kernel, queued
    CHECK(cudaSetDevice(d));
    CHECK(cudaMemcpyAsync(stage[d], input + (size_t)d * N, N * sizeof(float), cudaMemcpyHostToDevice, streams[d]));
    make<<<4, 128, 0, streams[d]>>>(send[d], stage[d], N, d);
  }
  CHECK(ncclGroupStart());
  for (int d = 0; d < ndev; d++)
    CHECK(ncclAllReduce(send[d], recv[d], N, ncclFloat32, ncclSum, comms[d], streams[d]));
  CHECK(ncclGroupEnd());
  for (int d = 0; d < ndev; d++) {                 // a kernel after the collective on the same stream
    CHECK(cudaSetDevice(d));
    square<<<4, 128, 0, streams[d]>>>(recv[d], N);
  }
  CHECK(ncclGroupStart());
  for (int d = 0; d < ndev; d++) {
    CHECK(ncclAllGather(ints[d], gathered[d], 4, ncclInt32, comms[d], streams[d]));
    CHECK(ncclBroadcast(dbl[d], dbl[d], 3, ncclFloat64, ndev - 1, comms[d], streams[d]));
    CHECK(ncclSend(ring[d], 1, ncclInt32, (d + 1) % ndev, comms[d], streams[d]));
    CHECK(ncclRecv(ring[d] + 1, 1, ncclInt32, (d + ndev - 1) % ndev, comms[d], streams[d]));
  }
  CHECK(ncclGroupEnd());

  FILE *out = fopen(argv[2], "wb");
  float *host = (float *)malloc(N * sizeof(float));
  for (int d = 0; d < ndev; d++) {
    CHECK(cudaSetDevice(d));
    CHECK(cudaStreamSynchronize(streams[d]));
    int g[4 * MAXDEV], r[2];
    double b[3];
    CHECK(cudaMemcpy(host, recv[d], N * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(g, gathered[d], 4 * ndev * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(b, dbl[d], sizeof(b), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(r, ring[d], sizeof(r), cudaMemcpyDeviceToHost));
    fwrite(host, sizeof(float), N, out);
    printf("gathered %d:", d);
    for (int i = 0; i < 4 * ndev; i++) printf(" %d", g[i]);
    printf("\nbroadcast %d: %g %g %g\nring %d: %d %d\n", d, b[0], b[1], b[2], d, r[0], r[1]);
  }
  fclose(out);
  int bad = ncclAllReduce(send[0], recv[0], N, 99, ncclSum, comms[0], streams[0]);
  printf("bad type %d \"%s\" last error has type: %d\n", bad, ncclGetErrorString(bad),
         ncclGetLastError(comms[0])[0] != 0);
  printf("not implemented %d\n", ncclCommInitRankScalable(NULL, 1, 0, 1, NULL, NULL));
  for (int d = 0; d < ndev; d++) CHECK(ncclCommDestroy(comms[d]));
  printf("done\n");
  return 0;
}
