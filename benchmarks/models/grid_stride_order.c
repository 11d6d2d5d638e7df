/* A C model of the order in which anycuda's workers run reduce's grid-stride loop
 * (benchmarks/kernels/cuda/reduce.cu: 2^24 floats, 256 blocks of 256 threads), to measure
 * orders before building them (benchmarks/NOTES.md, "Grid-stride order", "Blocks in flight").
 *
 *   gcc -O3 -march=native -fopenmp grid_stride_order.c -o order && ./order
 *   ./order K AHEAD GROUP [K AHEAD GROUP ...]     # only these orders
 *
 * Each warp adds the 32 floats it reads per iteration into two vector accumulators, as a
 * warp region in lockstep does. An order is (K, GROUP): GROUP consecutive blocks are run
 * together, their warps in turns of K iterations each (warp 0's K iterations, warp 1's, ...,
 * then warp 0's next K). K = 256 (the whole loop) and GROUP 1 is a warp's loop whole, one
 * warp after the other (anycuda's regions before turns); K = 1 interleaves the warps
 * iteration by iteration; K = 8 with GROUP 1 is a block's warps in turns (warpregions'
 * TURN_ITERATIONS), with GROUP 4 scheduler's BLOCKS_IN_FLIGHT. AHEAD prefetches each warp's
 * lines that many iterations ahead into L2. Times are medians of 101 runs (ms). */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define N (1 << 24)
#define BLOCKS 256
#define THREADS 256
#define WARPS (THREADS / 32)
#define STRIDE (BLOCKS * THREADS)
#define ITERS (N / STRIDE)
#define MAX_GROUP 16
#define RUNS 101

static float sink[BLOCKS * THREADS];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* the warps of `group` consecutive blocks from block b0, in turns of k iterations */
static void run_group(const float* x, int b0, int group, int k, int ahead) {
    int n = group * WARPS;
    __m512 acc[2 * MAX_GROUP * WARPS];
    for (int j = 0; j < 2 * n; ++j) acc[j] = _mm512_setzero_ps();
    for (int k0 = 0; k0 < ITERS; k0 += k)
        for (int w = 0; w < n; ++w)
            for (int i = k0; i < k0 + k && i < ITERS; ++i) {
                const float* p = x + (size_t)i * STRIDE + (size_t)b0 * THREADS + 32 * w;
                if (ahead) {
                    _mm_prefetch((const char*)(p + (size_t)ahead * STRIDE), _MM_HINT_T1);
                    _mm_prefetch((const char*)(p + (size_t)ahead * STRIDE + 16), _MM_HINT_T1);
                }
                acc[2 * w] = _mm512_add_ps(acc[2 * w], _mm512_loadu_ps(p));
                acc[2 * w + 1] = _mm512_add_ps(acc[2 * w + 1], _mm512_loadu_ps(p + 16));
            }
    for (int j = 0; j < 2 * n; ++j) _mm512_storeu_ps(sink + (size_t)(b0 * THREADS + 16 * j) % (STRIDE - 16), acc[j]);
}

static int by_value(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

static double median_ms(const float* x, int group, int k, int ahead) {
    double t[RUNS];
    for (int r = 0; r < RUNS; ++r) {
        double t0 = now();
        if (group == 0) {          /* the C reference's sequential order */
            float s = 0.0f;
            #pragma omp parallel for simd reduction(+ : s)
            for (int i = 0; i < N; ++i) s += x[i];
            sink[0] = s;
        } else {
            #pragma omp parallel for schedule(dynamic, 1)
            for (int g = 0; g < BLOCKS / group; ++g) run_group(x, g * group, group, k, ahead);
        }
        t[r] = (now() - t0) * 1e3;
    }
    qsort(t, RUNS, sizeof(double), by_value);
    return t[RUNS / 2];
}

int main(int argc, char** argv) {
    static const int orders[][3] = {{256, 16, 1}, {1, 16, 1}, {8, 16, 1}, {8, 0, 1}, {8, 16, 2},
                                    {8, 16, 4}, {8, 0, 4}, {8, 16, 8}, {8, 16, 16}, {1, 16, 4}};
    float* x = aligned_alloc(1 << 21, (size_t)N * sizeof(float));
    madvise(x, (size_t)N * sizeof(float), MADV_HUGEPAGE);
    for (int i = 0; i < N; ++i) x[i] = 1.0f;
    int given = (argc - 1) / 3, count = given ? given : (int)(sizeof orders / sizeof orders[0]);
    for (int o = 0; o < count; ++o) {
        int k = given ? atoi(argv[1 + 3 * o]) : orders[o][0];
        int ahead = given ? atoi(argv[2 + 3 * o]) : orders[o][1];
        int group = given ? atoi(argv[3 + 3 * o]) : orders[o][2];
        if (k < 1 || group < 1 || group > MAX_GROUP || BLOCKS % group) {
            fprintf(stderr, "K >= 1 and GROUP in 1..%d dividing %d, please\n", MAX_GROUP, BLOCKS);
            return 1;
        }
        printf("K %3d  ahead %2d  group %2d: %.2f ms\n", k, ahead, group, median_ms(x, group, k, ahead));
    }
    printf("sequential (the C reference's order): %.2f ms\n", median_ms(x, 0, 0, 0));
    return 0;
}
