/* The same computations written for the CPU by hand (the "hand-ported" reference), built
   with gcc -O3 -march=native -fopenmp at benchmark time. Same algorithms and float
   operation order as the CUDA kernels where it matters for the result. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <omp.h>

void saxpy(int n, float a, const float* x, float* y) {
    #pragma omp parallel for simd
    for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}

void vector_add(const float* a, const float* b, float* c, int n) {
    #pragma omp parallel for simd
    for (int i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

/* STREAM-style triad, the memory-bandwidth yardstick. */
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

/* A private histogram per thread, merged at the end. */
void histogram256(const unsigned char* data, unsigned int* bins, int n) {
    memset(bins, 0, 256 * sizeof(unsigned int));
    #pragma omp parallel
    {
        unsigned int h[256] = {0};
        #pragma omp for nowait
        for (int i = 0; i < n; ++i) h[data[i]]++;
        for (int b = 0; b < 256; ++b) {
            if (h[b]) {
                #pragma omp atomic
                bins[b] += h[b];
            }
        }
    }
}

void stencil5(const float* in, float* out, int nx, int ny) {
    #pragma omp parallel for
    for (int y = 0; y < ny; ++y) {
        const float* r = in + (size_t)y * nx;
        float* o = out + (size_t)y * nx;
        if (y == 0 || y == ny - 1) {
            memcpy(o, r, nx * sizeof(float));
            continue;
        }
        o[0] = r[0];
        #pragma omp simd
        for (int x = 1; x < nx - 1; ++x)
            o[x] = 0.5f * r[x] + 0.125f * ((r[x - 1] + r[x + 1]) + (r[x - nx] + r[x + nx]));
        o[nx - 1] = r[nx - 1];
    }
}

/* Blocked transpose, 32 x 32 tiles. */
void transpose(const float* in, float* out, int rows, int cols) {
    #pragma omp parallel for collapse(2)
    for (int by = 0; by < rows; by += 32)
        for (int bx = 0; bx < cols; bx += 32) {
            int ye = by + 32 < rows ? by + 32 : rows, xe = bx + 32 < cols ? bx + 32 : cols;
            for (int x = bx; x < xe; ++x)
                for (int y = by; y < ye; ++y) out[(size_t)x * rows + y] = in[(size_t)y * cols + x];
        }
}

/* Inclusive scan: each thread scans its chunk, the chunk totals are scanned, then added. */
void scan_inclusive(const int* in, int* out, int n) {
    int totals[1024];
    #pragma omp parallel
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        if (nt > 1024) nt = 1024;
        size_t lo = (size_t)n * t / nt, hi = (size_t)n * (t + 1) / nt;
        int run = 0;
        if (t < nt)
            for (size_t i = lo; i < hi; ++i) out[i] = run += in[i];
        if (t < nt) totals[t] = run;
        #pragma omp barrier
        int add = 0;
        for (int u = 0; u < t && u < nt; ++u) add += totals[u];
        if (t < nt && add)
            #pragma omp simd
            for (size_t i = lo; i < hi; ++i) out[i] += add;
    }
}

void softmax_forward(float* out, const float* inp, int N, int C) {
    #pragma omp parallel for
    for (int r = 0; r < N; ++r) {
        const float* x = inp + (size_t)r * C;
        float* y = out + (size_t)r * C;
        float m = -INFINITY;
        for (int i = 0; i < C; ++i) m = fmaxf(m, x[i]);
        float s = 0.0f;
        for (int i = 0; i < C; ++i) {
            y[i] = expf(x[i] - m);
            s += y[i];
        }
        float inv = 1.0f / s;
        for (int i = 0; i < C; ++i) y[i] *= inv;
    }
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
    #pragma omp parallel for
    for (int r = 0; r < N; ++r) {
        const float* x = inp + (size_t)r * C;
        float s = 0.0f;
        #pragma omp simd reduction(+:s)
        for (int i = 0; i < C; ++i) s += x[i];
        float m = s / C;
        float v = 0.0f;
        #pragma omp simd reduction(+:v)
        for (int i = 0; i < C; ++i) {
            float d = x[i] - m;
            v += d * d;
        }
        float rs = 1.0f / sqrtf(v / C + 1e-5f);
        float* y = out + (size_t)r * C;
        #pragma omp simd
        for (int i = 0; i < C; ++i) y[i] = rs * (x[i] - m) * weight[i] + bias[i];
        mean[r] = m;
        rstd[r] = rs;
    }
}

/* pos and acc hold n float4s (x, y, z, mass / unused). */
void nbody_accel(const float* pos, float* acc, int n, float eps2) {
    #pragma omp parallel for
    for (int i = 0; i < n; ++i) {
        float px = pos[4 * i], py = pos[4 * i + 1], pz = pos[4 * i + 2];
        float ax = 0.0f, ay = 0.0f, az = 0.0f;
        #pragma omp simd reduction(+:ax, ay, az)
        for (int j = 0; j < n; ++j) {
            float dx = pos[4 * j] - px, dy = pos[4 * j + 1] - py, dz = pos[4 * j + 2] - pz;
            float inv = 1.0f / sqrtf(dx * dx + dy * dy + dz * dz + eps2);
            float s = pos[4 * j + 3] * inv * inv * inv;
            ax += dx * s;
            ay += dy * s;
            az += dz * s;
        }
        acc[4 * i] = ax;
        acc[4 * i + 1] = ay;
        acc[4 * i + 2] = az;
        acc[4 * i + 3] = 0.0f;
    }
}

/* The same bitonic network (n a power of two), iterating over the n/2 pairs of each step. */
void bitonic_sort(float* d, int n) {
    #pragma omp parallel
    for (int k = 2; k <= n; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            #pragma omp for simd
            for (int p = 0; p < n / 2; ++p) {
                int i = ((p & ~(j - 1)) << 1) | (p & (j - 1)), l = i | j;
                float a = d[i], b = d[l];
                float lo = a < b ? a : b, hi = a < b ? b : a;
                int up = (i & k) == 0;
                d[i] = up ? lo : hi;
                d[l] = up ? hi : lo;
            }
        }
}
