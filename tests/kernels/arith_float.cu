// Float arithmetic: IEEE-exact operations, directed rounding and the math library.
#define NF 16
extern "C" __global__ void f32_exact(const float* a, const float* b, const float* c, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i], z = c[i];
    float* o = out + i * NF;
    o[0] = __fadd_rn(x, y); o[1] = __fsub_rn(x, y); o[2] = __fmul_rn(x, y); o[3] = __fdiv_rn(x, y);
    o[4] = __fmaf_rn(x, y, z); o[5] = __fsqrt_rn(fabsf(x)); o[6] = __frcp_rn(y);
    o[7] = fminf(x, y); o[8] = fmaxf(x, y); o[9] = fabsf(x); o[10] = -x; o[11] = copysignf(x, y);
    o[12] = floorf(x); o[13] = ceilf(x); o[14] = truncf(x); o[15] = rintf(x);
}

#define ND 10
extern "C" __global__ void f64_exact(const double* a, const double* b, const double* c, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i], y = b[i], z = c[i];
    double* o = out + i * ND;
    o[0] = __dadd_rn(x, y); o[1] = __dmul_rn(x, y); o[2] = __ddiv_rn(x, y); o[3] = __fma_rn(x, y, z);
    o[4] = __dsqrt_rn(fabs(x)); o[5] = __drcp_rn(y); o[6] = fmin(x, y); o[7] = fmax(x, y);
    o[8] = floor(x); o[9] = x - y;
}

#define NR 12
extern "C" __global__ void f32_directed(const float* a, const float* b, const float* c, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i], z = c[i];
    float* o = out + i * NR;
    o[0] = __fadd_rz(x, y); o[1] = __fadd_rd(x, y); o[2] = __fadd_ru(x, y);
    o[3] = __fmul_rz(x, y); o[4] = __fmul_rd(x, y); o[5] = __fmul_ru(x, y);
    o[6] = __fmaf_rz(x, y, z); o[7] = __fmaf_rd(x, y, z); o[8] = __fmaf_ru(x, y, z);
    o[9] = __fdiv_rz(x, y); o[10] = __fdiv_rd(x, y); o[11] = __fdiv_ru(x, y);
}

#define NM 14
extern "C" __global__ void f32_math(const float* a, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i];
    float* o = out + i * NM;
    o[0] = sinf(x); o[1] = cosf(x); o[2] = expf(x * 0.1f); o[3] = logf(fabsf(x) + 1e-3f);
    o[4] = exp2f(x * 0.1f); o[5] = log2f(fabsf(x) + 1e-3f); o[6] = powf(fabsf(x), 1.5f);
    o[7] = tanhf(x * 0.1f); o[8] = erff(x * 0.1f); o[9] = atan2f(x, 1.5f);
    o[10] = __sinf(x); o[11] = __expf(x * 0.1f); o[12] = rsqrtf(fabsf(x) + 1.0f); o[13] = __fdividef(x, 3.0f);
}

// Non-contracted a*b+c with .rn must round twice; a plain expression may fuse.
extern "C" __global__ void contraction(const float* a, const float* b, const float* c, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[2 * i] = __fadd_rn(__fmul_rn(a[i], b[i]), c[i]);
    out[2 * i + 1] = a[i] * b[i] + c[i];
}

extern "C" __global__ void classify(const float* a, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i];
    int fin, inf, nan, norm, sub;
    asm("{ .reg .pred p; testp.finite.f32 p, %1; selp.s32 %0, 1, 0, p; }" : "=r"(fin) : "f"(x));
    asm("{ .reg .pred p; testp.infinite.f32 p, %1; selp.s32 %0, 1, 0, p; }" : "=r"(inf) : "f"(x));
    asm("{ .reg .pred p; testp.notanumber.f32 p, %1; selp.s32 %0, 1, 0, p; }" : "=r"(nan) : "f"(x));
    asm("{ .reg .pred p; testp.normal.f32 p, %1; selp.s32 %0, 1, 0, p; }" : "=r"(norm) : "f"(x));
    asm("{ .reg .pred p; testp.subnormal.f32 p, %1; selp.s32 %0, 1, 0, p; }" : "=r"(sub) : "f"(x));
    int* o = out + 8 * i;
    o[0] = fin; o[1] = inf; o[2] = nan; o[3] = norm; o[4] = sub;
    o[5] = isnan(x) ? 1 : 0; o[6] = isinf(x) ? 1 : 0; o[7] = signbit(x) ? 1 : 0;
}
