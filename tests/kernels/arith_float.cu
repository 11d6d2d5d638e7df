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

// More IEEE-exact single-precision operations: plain C++ operators and functions whose
// results are exactly defined (no approximation), for bit-pattern inputs.
#define NF2 18
extern "C" __global__ void f32_exact2(const float* a, const float* b, const float* c, const int* k, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i], z = c[i];
    float* o = out + i * NF2;
    int e;
    o[0] = x / y; o[1] = sqrtf(x); o[2] = fmaf(x, y, z); o[3] = roundf(x); o[4] = nearbyintf(x);
    o[5] = fdimf(x, y); o[6] = fmodf(x, y); o[7] = remainderf(x, y); o[8] = ldexpf(x, k[i]);
    o[9] = frexpf(x, &e); o[10] = (float)e; o[11] = (float)ilogbf(x); o[12] = nextafterf(x, y);
    o[13] = __frsqrt_rn(x); o[14] = x * y - z; o[15] = scalbnf(y, -k[i]);
    float ip; o[16] = modff(x, &ip); o[17] = ip;
}

// Directed rounding of sqrt, reciprocal and subtraction; the sign of exact zero results
#define NR2 12
extern "C" __global__ void f32_directed2(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i];
    float* o = out + i * NR2;
    o[0] = __fsqrt_rz(x); o[1] = __fsqrt_rd(x); o[2] = __fsqrt_ru(x);
    o[3] = __frcp_rz(y); o[4] = __frcp_rd(y); o[5] = __frcp_ru(y);
    o[6] = __fsub_rz(x, y); o[7] = __fsub_rd(x, y); o[8] = __fsub_ru(x, y);
    o[9] = __fadd_rd(x, -x); o[10] = __fadd_rn(x, -x); o[11] = __fmul_rd(x, y);
}

// Double precision: exact operations on bit-pattern inputs, directed rounding, classification
#define ND2 24
extern "C" __global__ void f64_exact2(const double* a, const double* b, const double* c, const int* k, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i], y = b[i], z = c[i];
    double* o = out + i * ND2;
    o[0] = x + y; o[1] = x - y; o[2] = x * y; o[3] = x / y; o[4] = sqrt(x); o[5] = fma(x, y, z);
    o[6] = fmin(x, y); o[7] = fmax(x, y); o[8] = ceil(x); o[9] = trunc(x); o[10] = round(x); o[11] = rint(x);
    o[12] = copysign(x, y); o[13] = fabs(x); o[14] = fmod(x, y); o[15] = remainder(x, y); o[16] = ldexp(x, k[i]);
    o[17] = __dadd_rz(x, y); o[18] = __dadd_rd(x, y); o[19] = __dmul_ru(x, y); o[20] = __ddiv_rz(x, y);
    o[21] = __fma_rd(x, y, z); o[22] = __dsqrt_ru(x); o[23] = __dadd_rn(__dmul_rn(x, y), z);
}

extern "C" __global__ void classify64(const double* a, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i];
    int fin, inf, nan, norm, sub;
    asm("{ .reg .pred p; testp.finite.f64 p, %1; selp.s32 %0, 1, 0, p; }" : "=r"(fin) : "d"(x));
    asm("{ .reg .pred p; testp.infinite.f64 p, %1; selp.s32 %0, 1, 0, p; }" : "=r"(inf) : "d"(x));
    asm("{ .reg .pred p; testp.number.f64 p, %1; selp.s32 %0, 1, 0, p; }" : "=r"(nan) : "d"(x));
    asm("{ .reg .pred p; testp.normal.f64 p, %1; selp.s32 %0, 1, 0, p; }" : "=r"(norm) : "d"(x));
    asm("{ .reg .pred p; testp.subnormal.f64 p, %1; selp.s32 %0, 1, 0, p; }" : "=r"(sub) : "d"(x));
    int* o = out + 9 * i;
    o[0] = fin; o[1] = inf; o[2] = nan; o[3] = norm; o[4] = sub;
    o[5] = isnan(x) ? 1 : 0; o[6] = isinf(x) ? 1 : 0; o[7] = isfinite(x) ? 1 : 0; o[8] = signbit(x) ? 1 : 0;
}

// The math library (code nvcc inlines): one column per function, one row per input pair
#define NL32 34
extern "C" __global__ void f32_library(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i];
    float* o = out + i * NL32;
    o[0] = sinf(x); o[1] = cosf(x); o[2] = tanf(x); o[3] = asinf(x); o[4] = acosf(x); o[5] = atanf(x);
    o[6] = atan2f(x, y); o[7] = sinhf(x); o[8] = coshf(x); o[9] = tanhf(x); o[10] = asinhf(x); o[11] = acoshf(x);
    o[12] = atanhf(x); o[13] = expf(x); o[14] = exp2f(x); o[15] = exp10f(x); o[16] = expm1f(x); o[17] = logf(x);
    o[18] = log2f(x); o[19] = log10f(x); o[20] = log1pf(x); o[21] = powf(x, y); o[22] = cbrtf(x); o[23] = hypotf(x, y);
    o[24] = erff(x); o[25] = erfcf(x); o[26] = rsqrtf(x); o[27] = sinpif(x); o[28] = cospif(x); o[29] = rcbrtf(x);
    float s, c; sincosf(x, &s, &c); o[30] = s; o[31] = c; o[32] = lgammaf(x); o[33] = tgammaf(x);
}

#define NL64 24
extern "C" __global__ void f64_library(const double* a, const double* b, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i], y = b[i];
    double* o = out + i * NL64;
    o[0] = sin(x); o[1] = cos(x); o[2] = tan(x); o[3] = asin(x); o[4] = acos(x); o[5] = atan(x);
    o[6] = atan2(x, y); o[7] = sinh(x); o[8] = cosh(x); o[9] = tanh(x); o[10] = asinh(x); o[11] = acosh(x);
    o[12] = atanh(x); o[13] = exp(x); o[14] = exp2(x); o[15] = expm1(x); o[16] = log(x); o[17] = log2(x);
    o[18] = log10(x); o[19] = log1p(x); o[20] = pow(x, y); o[21] = cbrt(x); o[22] = hypot(x, y); o[23] = rsqrt(x);
}

// The fast intrinsics (approximate PTX instructions)
#define NA 10
extern "C" __global__ void f32_intrinsics(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i];
    float* o = out + i * NA;
    o[0] = __sinf(x); o[1] = __cosf(x); o[2] = __expf(x); o[3] = __exp10f(x); o[4] = __logf(fabsf(x));
    o[5] = __log2f(fabsf(x)); o[6] = __log10f(fabsf(x)); o[7] = __fdividef(x, y); o[8] = __tanf(x);
    o[9] = __powf(fabsf(x), y);
}
