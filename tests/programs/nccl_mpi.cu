// One rank of an MPI + NCCL program, as llm.c's multi-GPU code starts its ranks: MPI_Init, the
// unique id made by rank 0 and sent with MPI_Bcast, ncclCommInitRank, then on a stream a kernel
// makes the input, an all-reduce (float sum), a kernel squares the result, an int average, and
// a grouped send/receive ring. Run as `mpirun -np N anycuda run -- nccl_mpi`. The NCCL
// prototypes it needs are declared here (no NCCL header). Prints "rank R ok ..." when every
// check on the host passed.
#include <cstdio>
#include <cstring>
#include <mpi.h>
#include <cuda_runtime.h>

typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
extern "C" {
int ncclGetUniqueId(ncclUniqueId *id);
int ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
int ncclCommDestroy(ncclComm_t comm);
int ncclGroupStart(void);
int ncclGroupEnd(void);
int ncclAllReduce(const void *s, void *r, size_t n, int type, int op, ncclComm_t comm, cudaStream_t st);
int ncclSend(const void *s, size_t n, int type, int peer, ncclComm_t comm, cudaStream_t st);
int ncclRecv(void *r, size_t n, int type, int peer, ncclComm_t comm, cudaStream_t st);
}
enum { ncclInt32 = 2, ncclFloat32 = 7, ncclSum = 0, ncclAvg = 4 };
#define CHECK(call) do { int e_ = (int)(call); if (e_) { printf("%s failed: %d\n", #call, e_); return 1; } } while (0)
#define N 100000

__global__ void make(float *p, int n, int rank) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = (i % 97) * (rank + 1);
}

__global__ void square(float *p, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = p[i] * p[i];
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ncclUniqueId id;
  if (rank == 0) CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  CHECK(cudaSetDevice(0));
  CHECK(ncclCommInitRank(&comm, size, id, rank));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  float *buf;
  int *ints, *ring;
  CHECK(cudaMalloc(&buf, N * sizeof(float)));
  CHECK(cudaMalloc(&ints, 3 * sizeof(int)));
  CHECK(cudaMalloc(&ring, 2 * sizeof(int)));
  int mine[3] = {rank, -7 * rank, 100 + rank}, myring[2] = {1000 + rank, -1};
  CHECK(cudaMemcpy(ints, mine, sizeof(mine), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(ring, myring, sizeof(myring), cudaMemcpyHostToDevice));

  make<<<8, 256, 0, stream>>>(buf, N, rank);
  CHECK(ncclAllReduce(buf, buf, N, ncclFloat32, ncclSum, comm, stream));       // in place
  square<<<8, 256, 0, stream>>>(buf, N);
  CHECK(ncclAllReduce(ints, ints, 3, ncclInt32, ncclAvg, comm, stream));
  CHECK(ncclGroupStart());
  CHECK(ncclRecv(ring + 1, 1, ncclInt32, (rank + size - 1) % size, comm, stream));
  CHECK(ncclSend(ring, 1, ncclInt32, (rank + 1) % size, comm, stream));
  CHECK(ncclGroupEnd());
  CHECK(cudaStreamSynchronize(stream));

  static float host[N];
  int avg[3], r[2];
  CHECK(cudaMemcpy(host, buf, sizeof(host), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(avg, ints, sizeof(avg), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(r, ring, sizeof(r), cudaMemcpyDeviceToHost));
  int factor = size * (size + 1) / 2, wrong = 0;
  for (int i = 0; i < N; i++) {
    float want = (float)((i % 97) * factor) * (float)((i % 97) * factor);
    if (host[i] != want) wrong++;
  }
  int level = -1;
  MPI_Query_thread(&level);
  printf("rank %d ok wrong %d avg %d %d %d ring %d %d thread level %d\n", rank, wrong, avg[0], avg[1], avg[2], r[0], r[1],
         level);
  CHECK(ncclCommDestroy(comm));
  MPI_Finalize();
  return 0;
}
