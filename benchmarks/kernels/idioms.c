/* Hand-written OpenMP C for the idiom kernels (benchmarks/idioms.py), built with
   reference.c by gcc -O3 -march=native -fopenmp. One loop per computation: the spellings
   of a CUDA kernel (guard or grid-stride) all compare with the same loop. Transposes, the
   5-point stencils, SGEMMs and histograms compare with reference.c's transpose, stencil5,
   sgemm and histogram256. */
#include <math.h>
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

/* y = A x, A in CSR with n rows (idioms_spmv.cu). */
void spmv_csr(int n, const int* rowptr, const int* cols, const float* vals, const float* x, float* y) {
    #pragma omp parallel for
    for (int r = 0; r < n; ++r) {
        float s = 0.0f;
        for (int j = rowptr[r]; j < rowptr[r + 1]; ++j) s += vals[j] * x[cols[j]];
        y[r] = s;
    }
}

void gather(int n, const int* idx, const float* x, float* out) {
    #pragma omp parallel for simd
    for (int i = 0; i < n; ++i) out[i] = x[idx[i]];
}

void scatter(int n, const int* idx, const float* x, float* out) {
    #pragma omp parallel for simd
    for (int i = 0; i < n; ++i) out[idx[i]] = x[i];
}

/* The 7-point step of idioms_stencil3d.cu: interior 0.4 u + 0.1 (neighbours), boundary copied. */
void stencil7(const float* in, float* out, int nx, int ny, int nz) {
    size_t sy = nx, sz = (size_t)nx * ny;
    #pragma omp parallel for collapse(2)
    for (int z = 0; z < nz; ++z)
        for (int y = 0; y < ny; ++y) {
            const float* r = in + z * sz + y * sy;
            float* o = out + z * sz + y * sy;
            if (z == 0 || y == 0 || z == nz - 1 || y == ny - 1) {
                for (int x = 0; x < nx; ++x) o[x] = r[x];
                continue;
            }
            o[0] = r[0];
            #pragma omp simd
            for (int x = 1; x < nx - 1; ++x)
                o[x] = 0.4f * r[x]
                       + 0.1f * (((r[x - 1] + r[x + 1]) + (r[x - sy] + r[x + sy])) + (r[x - sz] + r[x + sz]));
            o[nx - 1] = r[nx - 1];
        }
}

/* Black-Scholes call and put prices, the formula of idioms_blackscholes.cu in float. */
static inline float normal_cdf(float d) {
    float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
    float poly = k * (0.319381530f + k * (-0.356563782f + k * (1.781477937f + k * (-1.821255978f + k * 1.330274429f))));
    float tail = 0.39894228040143267794f * expf(-0.5f * d * d) * poly;
    return d > 0.0f ? 1.0f - tail : tail;
}

void blackscholes(int n, const float* S, const float* X, const float* T, float r, float v, float* call, float* put) {
    #pragma omp parallel for simd
    for (int i = 0; i < n; ++i) {
        float sqrtT = sqrtf(T[i]);
        float d1 = (logf(S[i] / X[i]) + (r + 0.5f * v * v) * T[i]) / (v * sqrtT), d2 = d1 - v * sqrtT;
        float n1 = normal_cdf(d1), n2 = normal_cdf(d2), disc = X[i] * expf(-r * T[i]);
        call[i] = S[i] * n1 - disc * n2;
        put[i] = disc * (1.0f - n2) - S[i] * (1.0f - n1);
    }
}
