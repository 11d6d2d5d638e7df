/* A C model of scan's first kernel (benchmarks/kernels/cuda/scan.cu, scan_blocks: 256
 * threads, 4 ints each) run as a *block-wide vector program*: every thread of the block is
 * a lane of one program specialised on the block size, barriers are nothing, shuffles move
 * values between the lanes of a 32-lane segment. It measures what such a program would
 * cost before anycuda builds one (benchmarks/NOTES.md, "Block-wide programs: a C model of
 * scan").
 *
 *   gcc -O3 -march=native -fopenmp block_program_scan.c -o blockscan -lm && ./blockscan
 *
 * Two forms of the program for a full block:
 *   registers (default; AVX-512)  the block's values in vector registers, 16 per <256 x i32>,
 *       as LLVM lowers wide vectors: each lane's 4 elements loaded as 64 consecutive ints and
 *       split by permutes (an interleaved group), shfl.up as a shift across a warp's two
 *       registers, the stores merged back by permutes
 *   arrays (-DREGISTERS=0)  each stretch between barriers one loop over 256 lanes through
 *       arrays, which gcc vectorises (values go through memory from stretch to stretch, as
 *       anycuda's rounds keep them in per-thread arrays)
 * The last, partial block always runs the arrays form with its bounds checks.
 * Reported: ns per block of 1024 ints with the data in cache (one block again and again)
 * and from memory (2^24 ints, as the benchmark) on one and all threads; the whole scan
 * (this kernel, then the block totals scanned and added as scan_totals and scan_add do)
 * against the benchmark's C reference (reference.c's scan_inclusive, included). */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS 256
#define PER_THREAD 4
#define PER_BLOCK (THREADS * PER_THREAD)
#define LANES 32
#ifndef REGISTERS
#define REGISTERS 1
#endif
#ifndef FULL_BLOCKS
#define FULL_BLOCKS 1
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* `v += shfl_up(v, o)` for lanes >= o, in every 32-lane segment: from a copy, as the
 * shuffle reads the values before the add */
static inline void shuffle_up_add(int* v, int count, int o) {
    int before[THREADS];
    memcpy(before, v, sizeof(int) * count);
    #pragma omp simd
    for (int t = 0; t < count; ++t)
        v[t] += (t & (LANES - 1)) >= o ? before[t - o] : 0;
}

/* one block of scan_blocks as one program over its 256 lanes */
static void scan_block(const int* in, int* out, int* totals, int n, int block) {
    int v[PER_THREAD][THREADS], run[THREADS], incl[THREADS], warp_totals[LANES];
    int base = block * PER_BLOCK;
    /* up to the first barrier: each lane's 4 elements (the loads interleaved by 4), the
     * warps' shuffle scans, lane 31's total. The bounds check `i < n` holds in every lane of
     * every block but the last: a program specialised on it (as anycuda's probed bounds are)
     * runs without it there */
    if (FULL_BLOCKS && base + PER_BLOCK <= n) {
        #pragma omp simd
        for (int t = 0; t < THREADS; ++t) {
            int r = 0;
            for (int k = 0; k < PER_THREAD; ++k) {
                r += in[base + t * PER_THREAD + k];
                v[k][t] = r;
            }
            run[t] = r;
            incl[t] = r;
        }
    } else {
        #pragma omp simd
        for (int t = 0; t < THREADS; ++t) {
            int r = 0;
            for (int k = 0; k < PER_THREAD; ++k) {
                int i = base + t * PER_THREAD + k;
                r += i < n ? in[i] : 0;
                v[k][t] = r;
            }
            run[t] = r;
            incl[t] = r;
        }
    }
    for (int o = 1; o < LANES; o <<= 1) shuffle_up_add(incl, THREADS, o);
    for (int w = 0; w < THREADS / LANES; ++w) warp_totals[w] = incl[w * LANES + LANES - 1];
    /* warp 0 scans the warp totals (lanes past the block's warps hold 0) */
    for (int w = THREADS / LANES; w < LANES; ++w) warp_totals[w] = 0;
    for (int o = 1; o < LANES; o <<= 1) shuffle_up_add(warp_totals, LANES, o);
    /* every lane adds the totals of the warps before its own, stores its 4 elements */
    #pragma omp simd
    for (int t = 0; t < THREADS; ++t) {
        int w = t / LANES;
        int in_block = incl[t] + (w > 0 ? warp_totals[w - 1] : 0);
        int before = in_block - run[t];
        for (int k = 0; k < PER_THREAD; ++k) {
            int i = base + t * PER_THREAD + k;
            if (i < n) out[i] = v[k][t] + before;
        }
        incl[t] = in_block;
    }
    totals[block] = incl[THREADS - 1];
}

#ifdef __AVX512F__
/* The same program for a full block in AVX-512 registers, as LLVM would lower a block's
 * `<256 x i32>` values (16 registers each): loads of 64 consecutive ints split into the
 * lanes' four elements by permutes (an interleaved group, not gathers), each shuffle
 * `shfl.up` a shift across the two registers of a warp, the stores merged back. */
static inline __m512i shift_up(__m512i lo_reg, __m512i hi_reg, int o, int high) {
    /* lanes of the warp's `high` half after shfl.up by o (0 where lane < o) */
    __m512i zero = _mm512_setzero_si512();
    if (o == 16) return high ? lo_reg : zero;
    switch (o) {
#define SHIFT(k) case k: return high ? _mm512_alignr_epi32(hi_reg, lo_reg, 16 - k) : _mm512_alignr_epi32(lo_reg, zero, 16 - k);
        SHIFT(1) SHIFT(2) SHIFT(4) SHIFT(8)
#undef SHIFT
    }
    return zero;
}

static void warp_scans(__m512i* v, int regs) {
    for (int o = 1; o < LANES; o <<= 1)
        for (int w = 0; w < regs; w += 2) {
            __m512i lo_up = shift_up(v[w], v[w + 1], o, 0), hi_up = shift_up(v[w], v[w + 1], o, 1);
            v[w] = _mm512_add_epi32(v[w], lo_up);
            v[w + 1] = _mm512_add_epi32(v[w + 1], hi_up);
        }
}

static void scan_block_registers(const int* in, int* out, int* totals, int block) {
    enum { REGS = THREADS / 16 };
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i pick_lo = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i pick_hi = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    const __m512i idx2 = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    __m512i e[PER_THREAD][REGS], run[REGS], incl[REGS];
    const int* src = in + (size_t)block * PER_BLOCK;
    int* dst = out + (size_t)block * PER_BLOCK;
    for (int r = 0; r < REGS; ++r) {
        /* 16 lanes' 4 elements: 64 consecutive ints in 4 registers */
        __m512i a0 = _mm512_loadu_si512(src + 64 * r), a1 = _mm512_loadu_si512(src + 64 * r + 16);
        __m512i a2 = _mm512_loadu_si512(src + 64 * r + 32), a3 = _mm512_loadu_si512(src + 64 * r + 48);
        __m512i p01 = _mm512_permutex2var_epi32(a0, idx, a1), p23 = _mm512_permutex2var_epi32(a2, idx, a3);
        __m512i q01 = _mm512_permutex2var_epi32(a0, idx2, a1), q23 = _mm512_permutex2var_epi32(a2, idx2, a3);
        __m512i k0 = _mm512_permutex2var_epi32(p01, pick_lo, p23), k1 = _mm512_permutex2var_epi32(p01, pick_hi, p23);
        __m512i k2 = _mm512_permutex2var_epi32(q01, pick_lo, q23), k3 = _mm512_permutex2var_epi32(q01, pick_hi, q23);
        e[0][r] = k0;
        e[1][r] = _mm512_add_epi32(k0, k1);
        e[2][r] = _mm512_add_epi32(e[1][r], k2);
        e[3][r] = _mm512_add_epi32(e[2][r], k3);
        run[r] = incl[r] = e[3][r];
    }
    warp_scans(incl, REGS);
    /* warp 0 scans the warp totals: lane 31 of each warp, the high register's last lane */
    int wt[LANES] = {0};
    for (int w = 0; w < REGS / 2; ++w) wt[w] = _mm512_cvtsi512_si32(_mm512_alignr_epi32(incl[2 * w + 1], incl[2 * w + 1], 15));
    __m512i t2[2] = {_mm512_loadu_si512(wt), _mm512_loadu_si512(wt + 16)};
    warp_scans(t2, 2);
    _mm512_storeu_si512(wt, t2[0]);
    _mm512_storeu_si512(wt + 16, t2[1]);
    for (int r = 0; r < REGS; ++r) {
        int w = r / 2;
        __m512i in_block = _mm512_add_epi32(incl[r], _mm512_set1_epi32(w > 0 ? wt[w - 1] : 0));
        __m512i before = _mm512_sub_epi32(in_block, run[r]);
        __m512i k0 = _mm512_add_epi32(e[0][r], before), k1 = _mm512_add_epi32(e[1][r], before);
        __m512i k2 = _mm512_add_epi32(e[2][r], before), k3 = _mm512_add_epi32(e[3][r], before);
        /* back to 64 consecutive ints: pairs (k0, k1) and (k2, k3) of 32 bits, then those
         * pairs of 64 bits */
        const __m512i pairs_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const __m512i pairs_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        const __m512i quads_lo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
        const __m512i quads_hi = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
        __m512i p01[2] = {_mm512_permutex2var_epi32(k0, pairs_lo, k1), _mm512_permutex2var_epi32(k0, pairs_hi, k1)};
        __m512i p23[2] = {_mm512_permutex2var_epi32(k2, pairs_lo, k3), _mm512_permutex2var_epi32(k2, pairs_hi, k3)};
        for (int h = 0; h < 2; ++h) {
            _mm512_storeu_si512(dst + 64 * r + 32 * h, _mm512_permutex2var_epi64(p01[h], quads_lo, p23[h]));
            _mm512_storeu_si512(dst + 64 * r + 32 * h + 16, _mm512_permutex2var_epi64(p01[h], quads_hi, p23[h]));
        }
        incl[r] = in_block;
    }
    totals[block] = wt[REGS / 2 - 1];
}
#endif

static void scan_one(const int* in, int* out, int* totals, int n, int b) {
#ifdef __AVX512F__
    if (REGISTERS && (b + 1) * PER_BLOCK <= n) {
        scan_block_registers(in, out, totals, b);
        return;
    }
#endif
    scan_block(in, out, totals, n, b);
}

static void scan_blocks(const int* in, int* out, int* totals, int n, int nblocks) {
    #pragma omp parallel for schedule(dynamic, 16)
    for (int b = 0; b < nblocks; ++b) scan_one(in, out, totals, n, b);
}

/* the block totals scanned in place and added to every later block (scan_totals, scan_add) */
static void finish_scan(int* out, int* totals, int n, int nblocks) {
    for (int b = 1; b < nblocks; ++b) totals[b] += totals[b - 1];
    #pragma omp parallel for schedule(static)
    for (int b = 1; b < nblocks; ++b) {
        int add = totals[b - 1], end = (b + 1) * PER_BLOCK < n ? (b + 1) * PER_BLOCK : n;
        #pragma omp simd
        for (int i = b * PER_BLOCK; i < end; ++i) out[i] += add;
    }
}

#include "../kernels/reference.c"     /* scan_inclusive: the benchmark's C reference */

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

#define REPEATS 31
#define MEDIAN(expr) ({ double ts[REPEATS]; for (int r_ = 0; r_ < REPEATS; ++r_) { \
    double t0_ = now(); expr; ts[r_] = now() - t0_; } qsort(ts, REPEATS, sizeof(double), cmp_double); ts[REPEATS / 2]; })

int main(void) {
    int n = 1 << 24, nblocks = (n + PER_BLOCK - 1) / PER_BLOCK;
    int* in = malloc(sizeof(int) * n);
    int* out = malloc(sizeof(int) * n);
    int* ref = malloc(sizeof(int) * n);
    int* totals = malloc(sizeof(int) * nblocks);
    srand(1);
    for (int i = 0; i < n; ++i) in[i] = rand() % 10;
    scan_blocks(in, out, totals, n, nblocks);
    finish_scan(out, totals, n, nblocks);
    scan_inclusive(in, ref, n);
    for (int i = 0; i < n; ++i)
        if (out[i] != ref[i]) {
            printf("wrong at %d: %d != %d\n", i, out[i], ref[i]);
            return 1;
        }
    int threads = omp_get_max_threads();
    /* in cache: each thread scans block 0's input again and again */
    int scratch_totals[1];
    double cached = MEDIAN(for (int k = 0; k < 1000; ++k) scan_one(in, out, scratch_totals, n, 0)) / 1000;
    printf("block program, one block in cache:       %7.1f ns per block of %d ints\n", cached * 1e9, PER_BLOCK);
    /* 64 blocks: 256 KiB in and 256 KiB out, in L2 (as block_program_scan_ir.py measures) */
    double in_l2 = MEDIAN(for (int k = 0; k < 30; ++k) for (int b = 0; b < 64; ++b) scan_one(in, out, totals, n, b)) / (30 * 64);
    printf("block program, 64 blocks in L2:          %7.1f ns per block\n", in_l2 * 1e9);
    for (int nt = 1; nt <= threads; nt = nt < threads && nt * 2 > threads ? threads : nt * 2) {
        omp_set_num_threads(nt);
        double first = MEDIAN(scan_blocks(in, out, totals, n, nblocks));
        double whole = MEDIAN((scan_blocks(in, out, totals, n, nblocks), finish_scan(out, totals, n, nblocks)));
        double c = MEDIAN(scan_inclusive(in, ref, n));
        printf("%d thread(s): first kernel %6.2f ms (%5.1f ns per block per thread), whole scan %6.2f ms, "
               "C reference %6.2f ms, ratio %.2f\n", nt, first * 1e3, first * 1e9 * nt / nblocks, whole * 1e3,
               c * 1e3, whole / c);
    }
    return 0;
}
