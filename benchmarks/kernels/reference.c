/* The same computations written for the CPU by hand (the "hand-ported" reference),
   built with gcc -O3 -march=native -fopenmp at benchmark time. */
#include <stddef.h>

void saxpy(int n, float a, const float* x, float* y) {
    #pragma omp parallel for simd
    for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}

void vector_add(const float* a, const float* b, float* c, int n) {
    #pragma omp parallel for simd
    for (int i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

void triad(const float* a, const float* b, float* c, float s, int n) {
    #pragma omp parallel for simd
    for (int i = 0; i < n; ++i) c[i] = a[i] + s * b[i];
}

void sgemm(const float* A, const float* B, float* C, int n) {
    #pragma omp parallel for
    for (int i = 0; i < n; ++i) {
        float* c = C + (size_t)i * n;
        for (int j = 0; j < n; ++j) c[j] = 0.0f;
        for (int k = 0; k < n; ++k) {
            float a = A[(size_t)i * n + k];
            const float* b = B + (size_t)k * n;
            #pragma omp simd
            for (int j = 0; j < n; ++j) c[j] += a * b[j];
        }
    }
}

float reduce_sum(const float* x, int n) {
    float s = 0.0f;
    #pragma omp parallel for simd reduction(+:s)
    for (int i = 0; i < n; ++i) s += x[i];
    return s;
}
