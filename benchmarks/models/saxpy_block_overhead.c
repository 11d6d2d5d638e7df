/* A C model of what anycuda does around saxpy's vector loop, to tell whether that code is
 * what makes some of anycuda's timed runs 1.3-2x slower than the C reference's
 * (benchmarks/NOTES.md, "saxpy's slow rounds"). Three forms of y = a * x + y on 2^25 floats:
 *   static    the C reference: OpenMP static halves, one vector loop each
 *   blocks    one non-inlined call per 256-float block, blocks taken 1024 at a time from a
 *             shared counter (anycuda's chunking)
 *   anylike   as blocks, plus what anycuda's block function and worker do per block: the
 *             thread frame's header stores, a non-inlined bounds probe that reads the
 *             parameters through the launch record, a relaxed atomic read of the launch's
 *             error word, the block index split by the grid's width
 * Rounds as benchmarks/run.py times them: a pause of 0.1 s, then 4 back-to-back runs of each
 * form in turn. Reported: the median per run and the rounds slower than 1.2x the form's
 * first quartile.
 *
 *   gcc -O3 -march=native -fopenmp saxpy_block_overhead.c -o saxpy_blocks && ./saxpy_blocks [rounds]
 */
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define BLOCK 256
#define CHUNK 1024

typedef struct { int n; float a; const float* x; float* y; } Params;
typedef struct { int grid_x, block_x, block_y, block_z; long nblocks; _Atomic long next; Params* params; _Atomic int error; } Launch;

static void saxpy_static(int n, float a, const float* x, float* y) {
    #pragma omp parallel for simd schedule(static)
    for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}

__attribute__((noinline)) static void plain_block(long b, float a, const float* x, float* y) {
    #pragma omp simd
    for (int t = 0; t < BLOCK; t++) y[b * BLOCK + t] = a * x[b * BLOCK + t] + y[b * BLOCK + t];
}

static void saxpy_blocks(int n, float a, const float* x, float* y) {
    #pragma omp parallel for schedule(dynamic, CHUNK)
    for (long b = 0; b < n / BLOCK; b++) plain_block(b, a, x, y);
}

__attribute__((noinline)) static int probe(const Launch* L, int cta) {
    return (long)(cta + 1) * L->block_x <= L->params->n;
}

__attribute__((noinline)) static void anylike_block(const Launch* L, int* header, int cta, int worker) {
    const int stores[] = {13, 18, 19, 27};
    for (int k = 0; k < 4; k++) header[stores[k]] = 0;
    header[20] = worker; header[26] = -1; header[12] = -1; header[6] = cta;
    header[3] = L->block_x; header[4] = L->block_y; header[5] = L->block_z; header[9] = L->grid_x;
    ((const Launch**)header)[8] = L;
    if (!probe(L, cta)) return;
    const Params* p = L->params;
    long base = (long)cta * L->block_x;
    #pragma omp simd
    for (int t = 0; t < BLOCK; t++) p->y[base + t] = p->a * p->x[base + t] + p->y[base + t];
}

static void saxpy_anylike(int n, float a, const float* x, float* y) {
    Params p = {n, a, x, y};
    Launch L = {n / BLOCK, BLOCK, 1, 1, n / BLOCK, 0, &p, 0};
    #pragma omp parallel
    {
        int* header = aligned_alloc(64, 4096);
        long next = 0, end = 0;
        while (!atomic_load_explicit(&L.error, memory_order_relaxed)) {
            if (next >= end) {
                long first = atomic_fetch_add_explicit(&L.next, CHUNK, memory_order_relaxed);
                if (first >= L.nblocks) break;
                next = first;
                end = first + CHUNK < L.nblocks ? first + CHUNK : L.nblocks;
            }
            long b = next++;
            anylike_block(&L, header, (int)(b % L.grid_x), omp_get_thread_num());
        }
        free(header);
    }
}

static int by_value(const void* a, const void* b) {
    double d = *(const double*)a - *(const double*)b;
    return (d > 0) - (d < 0);
}

int main(int argc, char** argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 25, n = 1 << 25;
    float *x, *y;
    if (posix_memalign((void**)&x, 1 << 21, (size_t)n * 4) || posix_memalign((void**)&y, 1 << 21, (size_t)n * 4)) return 1;
    madvise(x, (size_t)n * 4, MADV_HUGEPAGE);
    madvise(y, (size_t)n * 4, MADV_HUGEPAGE);
    for (int i = 0; i < n; i++) { x[i] = i * 1e-7f; y[i] = 1; }
    void (*forms[])(int, float, const float*, float*) = {saxpy_static, saxpy_blocks, saxpy_anylike};
    const char* names[] = {"static", "blocks", "anylike"};
    enum { FORMS = 3 };
    double* ms = calloc((size_t)FORMS * rounds, sizeof(double));
    for (int r = 0; r < rounds; r++)
        for (int f = 0; f < FORMS; f++) {
            usleep(100000);
            double t = omp_get_wtime();
            for (int k = 0; k < 4; k++) forms[f](n, 1.0001f, x, y);
            ms[f * rounds + r] = (omp_get_wtime() - t) / 4 * 1e3;
        }
    for (int f = 0; f < FORMS; f++) {
        double* v = ms + f * rounds;
        double sorted[rounds];
        for (int r = 0; r < rounds; r++) sorted[r] = v[r];
        qsort(sorted, rounds, sizeof(double), by_value);
        int slow = 0;
        for (int r = 0; r < rounds; r++) slow += v[r] > 1.2 * sorted[rounds / 4];
        printf("%-8s median %.2f ms  slow rounds %d of %d\n", names[f], sorted[rounds / 2], slow, rounds);
    }
    return 0;
}
