/* C references of the sorting idioms (benchmarks/idioms_sort.py). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define RADIX_BITS 8
#define RADIX_DIGITS (1 << RADIX_BITS)

/* LSD radix sort of n uint32 keys, 8-bit digits (as the CUDA version), four passes between
   keys and tmp, the result in keys. Each thread owns one contiguous slice for every pass:
   it counts its slice's digits, then (after one prefix over digits, then threads) writes
   its slice in order from its own offsets. Slices are in input order and a digit's offsets
   in thread order, so each pass is stable. */
void radix_sort_u32(unsigned* keys, unsigned* tmp, int n) {
    int most = omp_get_max_threads();
    unsigned* hist = malloc((size_t)most * RADIX_DIGITS * sizeof *hist);
    #pragma omp parallel num_threads(most)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        long lo = (long)n * t / nt, hi = (long)n * (t + 1) / nt;
        unsigned* h = hist + (size_t)t * RADIX_DIGITS;    /* 1 KiB a thread: no false sharing */
        unsigned *src = keys, *dst = tmp;
        for (int shift = 0; shift < 32; shift += RADIX_BITS) {
            memset(h, 0, RADIX_DIGITS * sizeof *h);
            for (long i = lo; i < hi; ++i)
                h[(src[i] >> shift) & (RADIX_DIGITS - 1)]++;
            #pragma omp barrier
            #pragma omp single
            {
                unsigned sum = 0;
                for (int d = 0; d < RADIX_DIGITS; ++d)
                    for (int u = 0; u < nt; ++u) {
                        unsigned c = hist[(size_t)u * RADIX_DIGITS + d];
                        hist[(size_t)u * RADIX_DIGITS + d] = sum;
                        sum += c;
                    }
            }   /* the implied barrier: every offset is ready */
            for (long i = lo; i < hi; ++i) {
                unsigned k = src[i];
                dst[h[(k >> shift) & (RADIX_DIGITS - 1)]++] = k;
            }
            #pragma omp barrier             /* dst complete before it is read as src */
            unsigned* s = src;
            src = dst;
            dst = s;
        }
    }
    free(hist);
}
