/* Hand-written OpenMP C for the idiom kernels (benchmarks/idioms.py), built with
   reference.c by gcc -O3 -march=native -fopenmp. One loop per computation: the spellings
   of a CUDA kernel (guard or grid-stride) all compare with the same loop. Transposes, the
   5-point stencils, SGEMMs and histograms compare with reference.c's transpose, stencil5,
   sgemm and histogram256. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

/* Same signatures as the CUDA kernels (idioms_streaming.cu): the scalar passed as S. */
#define STREAM_REF(NAME, T, S, I, BODY)                                \
    void NAME(I n, S s, const T* x, T* y, T* z) {                      \
        const T a = (T)s;                                              \
        (void)a; (void)x; (void)y; (void)z;                            \
        _Pragma("omp parallel for simd")                               \
        for (I i = 0; i < n; ++i) BODY;                                \
    }
#define EACH_TYPE(OP, I, BODY)                                         \
    STREAM_REF(OP##_f32, float, float, I, BODY)                        \
    STREAM_REF(OP##_f64, double, double, I, BODY)                      \
    STREAM_REF(OP##_f16, _Float16, float, I, BODY)

EACH_TYPE(copy, int, z[i] = x[i])
EACH_TYPE(scale, size_t, z[i] = a * x[i])
EACH_TYPE(saxpy, int, y[i] = a * x[i] + y[i])
EACH_TYPE(triad, size_t, z[i] = x[i] + a * y[i])

double reduce_sum_f64(const double* x, int n) {
    double s = 0.0;
    #pragma omp parallel for simd reduction(+:s)
    for (int i = 0; i < n; ++i) s += x[i];
    return s;
}

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

/* C = A B for double matrices (idioms_sgemm.cu's dgemm_tiled_16x16): reference.c's sgemm loop
   in double. */
void dgemm(const double* A, const double* B, double* C, int n) {
    #pragma omp parallel for
    for (int i = 0; i < n; ++i) {
        double* c = C + (size_t)i * n;
        for (int j = 0; j < n; ++j) c[j] = 0.0;
        for (int k = 0; k < n; ++k) {
            double a = A[(size_t)i * n + k];
            const double* b = B + (size_t)k * n;
            #pragma omp simd
            for (int j = 0; j < n; ++j) c[j] += a * b[j];
        }
    }
}

/* C = A B for half matrices (idioms_sgemm.cu's hgemm_tiled_16x16), as a C programmer without
   half arithmetic writes it: A and B widened to float (F16C converts eight at a time),
   reference.c's sgemm (linked with this file), each output rounded to half once. (Summing a row
   into a private buffer instead let gcc turn the loops around into strided dot products: 4x
   slower.) */
void sgemm(const float* A, const float* B, float* C, int n);

static void widen16(const _Float16* h, float* f, size_t count) {
    #pragma omp parallel for simd
    for (size_t e = 0; e < count; ++e) f[e] = (float)h[e];
}

void hgemm(const _Float16* A, const _Float16* B, _Float16* C, int n) {
    size_t nn = (size_t)n * n;
    float *a = malloc(nn * sizeof(float)), *b = malloc(nn * sizeof(float)), *c = malloc(nn * sizeof(float));
    widen16(A, a, nn);
    widen16(B, b, nn);
    sgemm(a, b, c, n);
    #pragma omp parallel for simd
    for (size_t e = 0; e < nn; ++e) C[e] = (_Float16)c[e];
    free(a);
    free(b);
    free(c);
}

void gather(int n, const int* idx, const float* x, float* out) {
    #pragma omp parallel for simd
    for (int i = 0; i < n; ++i) out[i] = x[idx[i]];
}

void scatter(int n, const int* idx, const float* x, float* out) {
    #pragma omp parallel for simd
    for (int i = 0; i < n; ++i) out[idx[i]] = x[i];
}

/* Token and position embeddings summed, a token row at a time (idioms_gather.cu's embedding). */
void embedding(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; ++bt) {
        const float* e = wte + (size_t)tokens[bt] * C;
        const float* w = wpe + (size_t)(bt % T) * C;
        float* o = out + (size_t)bt * C;
        #pragma omp simd
        for (int c = 0; c < C; ++c) o[c] = e[c] + w[c];
    }
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

/* Monte Carlo estimates of pi (idioms_compute.cu): `threads` independent streams, each
   drawing `samples` points of the unit square; returns how many fall in the quarter circle.
   XORWOW is curand's generator (Marsaglia's xorshift of five words plus a Weyl sequence);
   each stream's state lives in `states` (six words) between calls, as on the GPU. */
static inline unsigned xorwow_next(unsigned* s) {
    unsigned t = s[0] ^ (s[0] >> 2);
    s[0] = s[1];
    s[1] = s[2];
    s[2] = s[3];
    s[3] = s[4];
    s[4] = (s[4] ^ (s[4] << 4)) ^ (t ^ (t << 1));
    s[5] += 362437;
    return s[4] + s[5];
}

/* curand_uniform's mapping: (0, 1], the middle of each step of 2^-32 */
static inline float uniform01(unsigned u) { return u * 2.3283064e-10f + 1.1641532e-10f; }

unsigned long long mc_pi_xorwow(unsigned* states, int threads, int samples) {
    unsigned long long hits = 0;
    #pragma omp parallel for reduction(+:hits)
    for (int id = 0; id < threads; ++id) {
        unsigned s[6], count = 0;
        for (int w = 0; w < 6; ++w) s[w] = states[6 * id + w];
        for (int k = 0; k < samples; ++k) {
            float x = uniform01(xorwow_next(s)), y = uniform01(xorwow_next(s));
            count += x * x + y * y <= 1.0f;
        }
        for (int w = 0; w < 6; ++w) states[6 * id + w] = s[w];
        hits += count;
    }
    return hits;
}

/* Philox4x32-10 (Salmon et al.), four words per counter: stream id in the counter's high
   half, the seed as key, as curand_init places them. */
static inline void philox4x32_10(unsigned c[4], unsigned k0, unsigned k1) {
    for (int round = 0; round < 10; ++round) {
        unsigned long long p0 = (unsigned long long)0xD2511F53u * c[0], p1 = (unsigned long long)0xCD9E8D57u * c[2];
        unsigned n0 = (unsigned)(p1 >> 32) ^ c[1] ^ k0, n2 = (unsigned)(p0 >> 32) ^ c[3] ^ k1;
        c[1] = (unsigned)p1;
        c[3] = (unsigned)p0;
        c[0] = n0;
        c[2] = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

unsigned long long mc_pi_philox(unsigned long long seed, unsigned long long offset, int threads, int samples) {
    unsigned long long hits = 0;
    #pragma omp parallel for reduction(+:hits)
    for (int id = 0; id < threads; ++id) {
        unsigned count = 0;
        for (int k = 0; k < samples; k += 2) {
            unsigned long long block = offset / 4 + k / 2;
            unsigned c[4] = {(unsigned)block, (unsigned)(block >> 32), (unsigned)id, 0};
            philox4x32_10(c, (unsigned)seed, (unsigned)(seed >> 32));
            float x0 = uniform01(c[0]), y0 = uniform01(c[1]), x1 = uniform01(c[2]), y1 = uniform01(c[3]);
            count += (x0 * x0 + y0 * y0 <= 1.0f) + (x1 * x1 + y1 * y1 <= 1.0f);
        }
        hits += count;
    }
    return hits;
}

/* 5x5 convolution of a w x h image, zero outside it (idioms_compute.cu): the border rows and
   columns test their taps, the interior runs without tests. Taps in the CUDA kernels' order. */
static float conv_point(const float* in, int w, int h, const float* mask, int x, int y) {
    float s = 0.0f;
    for (int dy = -2; dy <= 2; ++dy)
        for (int dx = -2; dx <= 2; ++dx) {
            int xx = x + dx, yy = y + dy;
            if (xx >= 0 && xx < w && yy >= 0 && yy < h) s += mask[(dy + 2) * 5 + dx + 2] * in[yy * w + xx];
        }
    return s;
}

void conv2d_5x5(const float* in, float* out, int w, int h, const float* mask) {
    #pragma omp parallel for
    for (int y = 0; y < h; ++y) {
        float* o = out + (size_t)y * w;
        if (y < 2 || y >= h - 2 || w < 5) {
            for (int x = 0; x < w; ++x) o[x] = conv_point(in, w, h, mask, x, y);
            continue;
        }
        for (int x = 0; x < 2; ++x) o[x] = conv_point(in, w, h, mask, x, y);
        #pragma omp simd
        for (int x = 2; x < w - 2; ++x) {
            float s = 0.0f;
            for (int dy = 0; dy < 5; ++dy)
                for (int dx = 0; dx < 5; ++dx) s += mask[dy * 5 + dx] * in[(size_t)(y + dy - 2) * w + x + dx - 2];
            o[x] = s;
        }
        for (int x = w - 2; x < w; ++x) o[x] = conv_point(in, w, h, mask, x, y);
    }
}

/* llm.c's GELU (tanh approximation), idioms_elementwise.cu's gelu_* kernels. */
void gelu(int n, const float* inp, float* out) {
    #pragma omp parallel for simd
    for (int i = 0; i < n; ++i) {
        float x = inp[i], cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + cube)));
    }
}

/* A column x broadcast by a row y over R x C: idioms_elementwise.cu's broadcast_* kernels. */
void broadcast(int R, int C, const float* x, const float* y, float* out) {
    #pragma omp parallel for
    for (int r = 0; r < R; ++r) {
        float xr = x[r];
        #pragma omp simd
        for (int c = 0; c < C; ++c) out[(size_t)r * C + c] = xr * y[c];
    }
}
