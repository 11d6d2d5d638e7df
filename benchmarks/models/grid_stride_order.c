/* A C model of the order in which anycuda's workers run reduce's grid-stride loop
 * (benchmarks/kernels/cuda/reduce.cu: 2^24 floats, 256 blocks of 256 threads), to measure
 * orders before building them (benchmarks/NOTES.md, "Grid-stride order").
 *
 *   gcc -O3 -march=native -fopenmp grid_stride_order.c -o order && ./order
 *
 * Each warp adds the 32 floats it reads per iteration into two vector accumulators, as a
 * warp region in lockstep does. Orders:
 *   warps    one warp's whole loop after the other (anycuda's regions today)
 *   block    the block's 8 warps interleaved, iteration by iteration (a block-wide region)
 *   group G  G consecutive blocks interleaved, iteration by iteration
 * `ahead` prefetches each warp's lines that many iterations ahead, with the hint HINT. The
 * input is on transparent huge pages, as numpy gives anycuda's device memory. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#ifndef HINT
#define HINT _MM_HINT_T1
#endif
#define N (1 << 24)
#define BLOCKS 256
#define THREADS 256
#define WARPS (THREADS / 32)
#define STRIDE (BLOCKS * THREADS)
#define ITERS (N / STRIDE)
#define MAX_GROUP 16

static float sink[BLOCKS * THREADS];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* warps of `group` consecutive blocks starting at block b0, interleaved if `together`
 * (else each warp's loop whole, one after the other) */
static void run_blocks(const float* x, int b0, int group, int together, int ahead) {
    int n = group * WARPS;
    __m512 acc[2 * MAX_GROUP * WARPS];
    for (int j = 0; j < 2 * n; ++j) acc[j] = _mm512_setzero_ps();
    for (int outer = 0; outer < (together ? 1 : n); ++outer)
        for (int k = 0; k < ITERS; ++k)
            for (int w = together ? 0 : outer; w < (together ? n : outer + 1); ++w) {
                const float* p = x + (size_t)k * STRIDE + (size_t)b0 * THREADS + 32 * w;
                if (ahead) {
                    _mm_prefetch((const char*)(p + (size_t)ahead * STRIDE), HINT);
                    _mm_prefetch((const char*)(p + (size_t)ahead * STRIDE + 16), HINT);
                }
                acc[2 * w] = _mm512_add_ps(acc[2 * w], _mm512_loadu_ps(p));
                acc[2 * w + 1] = _mm512_add_ps(acc[2 * w + 1], _mm512_loadu_ps(p + 16));
            }
    for (int j = 0; j < 2 * n; ++j) _mm512_storeu_ps(sink + (size_t)b0 * THREADS + 16 * j, acc[j]);
}

static double best_of(const float* x, int group, int together, int ahead) {
    double best = 1e9;
    for (int r = 0; r < 7; ++r) {
        double t = now();
        #pragma omp parallel for schedule(dynamic, 1)
        for (int g = 0; g < BLOCKS / group; ++g) run_blocks(x, g * group, group, together, ahead);
        t = now() - t;
        if (t < best) best = t;
    }
    return best * 1e3;
}

int main(void) {
    float* x = aligned_alloc(1 << 21, (size_t)N * sizeof(float));
    madvise(x, (size_t)N * sizeof(float), MADV_HUGEPAGE);
    for (int i = 0; i < N; ++i) x[i] = 1.0f;
    for (int ahead = 0; ahead <= 16; ahead += 8) {
        printf("ahead %2d: warps %.2f ms  block %.2f ms", ahead, best_of(x, 1, 0, ahead), best_of(x, 1, 1, ahead));
        for (int g = 2; g <= 16; g *= 2) printf("  group %d %.2f ms", g, best_of(x, g, 1, ahead));
        printf("\n");
    }
    double best = 1e9;
    for (int r = 0; r < 7; ++r) {
        double t = now();
        float s = 0.0f;
        #pragma omp parallel for simd reduction(+ : s)
        for (int i = 0; i < N; ++i) s += x[i];
        sink[0] = s;
        t = now() - t;
        if (t < best) best = t;
    }
    printf("sequential (the C reference's order): %.2f ms\n", best * 1e3);
    return 0;
}
