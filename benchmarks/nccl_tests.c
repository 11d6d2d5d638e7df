/* Bus bandwidth of anycuda's NCCL in the form nccl-tests measures and prints it, beside the MPI
 * library's own collectives on the same buffers in the same run. A C program linked against
 * libnccl.so.2 and libcuda.so.1 as a CUDA program is (NCCL's and the driver's prototypes are
 * declared here), so the time includes every layer a program meets:
 *
 *   mpicc -O2 benchmarks/nccl_tests.c -o /tmp/nccl_tests -L"$(anycuda shim-path)" -l:libnccl.so.2 -l:libcuda.so.1
 *   mpirun -np 2 anycuda run -- /tmp/nccl_tests [max_bytes] [iters] [repeats]
 *
 * For each size (8 B, then x2 up to max_bytes, 256 MB by default, as nccl-tests steps): `iters` operations issued
 * back to back on one stream and one stream synchronisation, as nccl-tests times them (20), the
 * median of `repeats` such timings (5) after a warm-up, the slowest rank's; MPI's column is
 * MPI_Allreduce (MPI_IN_PLACE), MPI_Allgather and MPI_Reduce_scatter_block on the same buffers,
 * timed alike. algbw = bytes / time, busbw = algbw x 2(n-1)/n for all-reduce and (n-1)/n for
 * all-gather and reduce-scatter; bytes are the all-reduce's buffer, the all-gather's output and
 * the reduce-scatter's input (float32, sum). Every all-reduce result is checked. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef void *ncclComm_t;
typedef void *CUstream;
int ncclGetUniqueId(ncclUniqueId *id);
int ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
int ncclCommDestroy(ncclComm_t comm);
int ncclAllReduce(const void *s, void *r, size_t n, int type, int op, ncclComm_t comm, CUstream st);
int ncclAllGather(const void *s, void *r, size_t n, int type, ncclComm_t comm, CUstream st);
int ncclReduceScatter(const void *s, void *r, size_t n, int type, int op, ncclComm_t comm, CUstream st);
int cuInit(unsigned flags);
int cuDevicePrimaryCtxRetain(void **ctx, int device);
int cuCtxSetCurrent(void *ctx);
int cuMemAlloc_v2(unsigned long long *ptr, size_t bytes);
int cuMemFree_v2(unsigned long long ptr);
int cuMemsetD32_v2(unsigned long long ptr, unsigned value, size_t count);
int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes);
int cuStreamCreate(CUstream *stream, unsigned flags);
int cuStreamSynchronize(CUstream stream);

enum { FLOAT32 = 7, SUM = 0, MAX_REPEATS = 64 };
#define CHECK(call) do { int e_ = (int)(call); if (e_) { fprintf(stderr, "%s failed: %d\n", #call, e_); \
                                                         MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

static int rank, nranks;

enum { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, MPI_ALL_REDUCE, MPI_ALL_GATHER, MPI_REDUCE_SCATTER };

static void issue(int what, ncclComm_t comm, CUstream stream, float *big, float *small, size_t count) {
    size_t per = count / nranks;
    switch (what) {
    case ALL_REDUCE: CHECK(ncclAllReduce(big, big, count, FLOAT32, SUM, comm, stream)); break;
    case ALL_GATHER: CHECK(ncclAllGather(small, big, per, FLOAT32, comm, stream)); break;
    case REDUCE_SCATTER: CHECK(ncclReduceScatter(big, small, per, FLOAT32, SUM, comm, stream)); break;
    case MPI_ALL_REDUCE: MPI_Allreduce(MPI_IN_PLACE, big, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case MPI_ALL_GATHER: MPI_Allgather(small, (int)per, MPI_FLOAT, big, (int)per, MPI_FLOAT, MPI_COMM_WORLD); break;
    default: MPI_Reduce_scatter_block(big, small, (int)per, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* seconds per operation: the median of `repeats` timings of `iters` operations, slowest rank */
static double timed(int what, ncclComm_t comm, CUstream stream, float *big, float *small, size_t count, int iters,
                    int repeats) {
    double t[MAX_REPEATS];
    for (int i = 0; i < 5; i++)
        issue(what, comm, stream, big, small, count);
    CHECK(cuStreamSynchronize(stream));
    for (int r = 0; r < repeats; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            issue(what, comm, stream, big, small, count);
        CHECK(cuStreamSynchronize(stream));
        t[r] = (MPI_Wtime() - start) / iters;
    }
    qsort(t, repeats, sizeof *t, compare);
    double mine = t[repeats / 2], slowest;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

/* an all-reduce of ones, `rounds` times over: every element must be nranks^rounds */
static void check_all_reduce(ncclComm_t comm, CUstream stream, float *big, size_t count) {
    CHECK(cuMemsetD32_v2((unsigned long long)big, 0x3f800000u, count));
    CHECK(ncclAllReduce(big, big, count, FLOAT32, SUM, comm, stream));
    CHECK(ncclAllReduce(big, big, count, FLOAT32, SUM, comm, stream));
    CHECK(cuStreamSynchronize(stream));
    float *host = malloc(count * sizeof *host);
    CHECK(cuMemcpyDtoH_v2(host, (unsigned long long)big, count * sizeof *host));
    for (size_t i = 0; i < count; i++)
        if (host[i] != (float)(nranks * nranks)) {
            fprintf(stderr, "rank %d: element %zu of %zu is %g, not %d\n", rank, i, count, host[i], nranks * nranks);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    free(host);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t max_bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)256 << 20;
    int iters = argc > 2 ? atoi(argv[2]) : 20, repeats = argc > 3 ? atoi(argv[3]) : 5;
    if (repeats < 1 || repeats > MAX_REPEATS || iters < 1) {
        fprintf(stderr, "iters >= 1, 1 <= repeats <= %d\n", MAX_REPEATS);
        return 2;
    }
    void *ctx;
    CHECK(cuInit(0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuCtxSetCurrent(ctx));
    ncclUniqueId id;
    if (rank == 0)
        CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    CHECK(ncclCommInitRank(&comm, nranks, id, rank));
    CUstream stream;
    CHECK(cuStreamCreate(&stream, 0));
    if (rank == 0)
        printf("# anycuda NCCL, %d ranks, nccl-tests' timing (%d back to back, median of %d); us, GB/s\n"
               "# %12s %15s %10s %8s %8s %10s %9s %6s\n", nranks, iters, repeats, "bytes", "collective", "time",
               "algbw", "busbw", "MPI time", "MPI busbw", "ratio");
    for (size_t bytes = 8; bytes <= max_bytes; bytes *= 2) {
        size_t count = bytes / 4;
        unsigned long long big, small;
        CHECK(cuMemAlloc_v2(&big, count * 4 + 4 * nranks));
        CHECK(cuMemAlloc_v2(&small, count * 4 / nranks + 4));
        CHECK(cuMemsetD32_v2(big, 0, count + nranks));
        CHECK(cuMemsetD32_v2(small, 0, count / nranks + 1));
        check_all_reduce(comm, stream, (float *)big, count);
        static const char *names[] = {"all_reduce", "all_gather", "reduce_scatter"};
        for (int what = ALL_REDUCE; what <= REDUCE_SCATTER; what++) {
            size_t moved = what == ALL_REDUCE ? count * 4 : count / nranks * nranks * 4;
            if (!moved)
                continue;
            double t = timed(what, comm, stream, (float *)big, (float *)small, count, iters, repeats);
            double mpi = timed(what + MPI_ALL_REDUCE, comm, stream, (float *)big, (float *)small, count, iters,
                               repeats);
            double factor = what == ALL_REDUCE ? 2.0 * (nranks - 1) / nranks : (double)(nranks - 1) / nranks;
            double busbw = moved / t / 1e9 * factor, mpi_busbw = moved / mpi / 1e9 * factor;
            if (rank == 0)
                printf("  %12zu %15s %10.2f %8.3f %8.3f %10.2f %9.3f %6.2f\n", moved, names[what], t * 1e6,
                       moved / t / 1e9, busbw, mpi * 1e6, mpi_busbw, mpi / t);
            fflush(stdout);
        }
        CHECK(cuMemFree_v2(big));
        CHECK(cuMemFree_v2(small));
    }
    CHECK(ncclCommDestroy(comm));
    MPI_Finalize();
    return 0;
}
