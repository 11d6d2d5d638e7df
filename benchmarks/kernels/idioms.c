/* Hand-written OpenMP C for the idiom kernels (benchmarks/idioms.py), built with
   reference.c by gcc -O3 -march=native -fopenmp. One loop per computation: the spellings
   of a CUDA kernel (guard or grid-stride) all compare with the same loop. Transposes and
   stencils compare with reference.c's transpose and stencil5. */
#include <stddef.h>

/* Same signatures as the CUDA kernels (idioms_streaming.cu). */
#define STREAM_REF(NAME, T, I, BODY)                                   \
    void NAME(I n, T a, const T* x, T* y, T* z) {                      \
        (void)a; (void)x; (void)y; (void)z;                            \
        _Pragma("omp parallel for simd")                               \
        for (I i = 0; i < n; ++i) BODY;                                \
    }

STREAM_REF(copy_f32, float, int, z[i] = x[i])
STREAM_REF(copy_f64, double, int, z[i] = x[i])
STREAM_REF(scale_f32, float, size_t, z[i] = a * x[i])
STREAM_REF(scale_f64, double, size_t, z[i] = a * x[i])
STREAM_REF(saxpy_f32, float, int, y[i] = a * x[i] + y[i])
STREAM_REF(saxpy_f64, double, int, y[i] = a * x[i] + y[i])
STREAM_REF(triad_f32, float, size_t, z[i] = x[i] + a * y[i])
STREAM_REF(triad_f64, double, size_t, z[i] = x[i] + a * y[i])

int reduce_sum_i32(const int* x, int n) {
    int s = 0;
    #pragma omp parallel for simd reduction(+:s)
    for (int i = 0; i < n; ++i) s += x[i];
    return s;
}
