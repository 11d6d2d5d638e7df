// Conversions between every pair C++ casts and CUDA intrinsics produce.
#include <cuda_fp16.h>
#define NC 20
extern "C" __global__ void from_f32(const float* a, long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i];
    long long* o = out + i * NC;
    o[0] = __float2int_rn(x); o[1] = __float2int_rz(x); o[2] = __float2int_rd(x); o[3] = __float2int_ru(x);
    o[4] = __float2uint_rn(x); o[5] = __float2uint_rz(x);
    o[6] = __float2ll_rn(x); o[7] = __float2ll_rz(x); o[8] = (long long)__float2ull_rd(x);
    o[9] = (int)x; o[10] = (unsigned)x; o[11] = (signed char)(int)x; o[12] = (short)(int)x;
    o[13] = __float_as_int(x); o[14] = __float_as_uint(__saturatef(x));
    o[15] = __float_as_int((float)(double)x); o[16] = __double_as_longlong((double)x);
    o[17] = (long long)x; o[18] = (unsigned long long)x; o[19] = __half_as_ushort(__float2half_rn(x));
}

#define NI 12
extern "C" __global__ void to_float(const long long* a, float* f, double* d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long v = a[i];
    int v32 = (int)v; unsigned u32 = (unsigned)v; unsigned long long u64 = (unsigned long long)v;
    float* o = f + i * NI;
    o[0] = (float)v32; o[1] = __int2float_rz(v32); o[2] = __int2float_rd(v32); o[3] = __int2float_ru(v32);
    o[4] = (float)u32; o[5] = __uint2float_rz(u32); o[6] = (float)v; o[7] = __ll2float_rz(v);
    o[8] = __ll2float_rd(v); o[9] = __ull2float_ru(u64); o[10] = (float)u64; o[11] = (float)(short)v32;
    d[2 * i] = (double)v; d[2 * i + 1] = __ull2double_rz(u64);
}

extern "C" __global__ void f64_narrow(const double* a, float* out, int* ints, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i];
    out[4 * i] = __double2float_rn(x); out[4 * i + 1] = __double2float_rz(x);
    out[4 * i + 2] = __double2float_rd(x); out[4 * i + 3] = __double2float_ru(x);
    ints[3 * i] = __double2int_rn(x); ints[3 * i + 1] = __double2int_rz(x); ints[3 * i + 2] = (int)__double2uint_rd(x);
}

extern "C" __global__ void int_casts(const long long* a, long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long v = a[i];
    long long* o = out + 6 * i;
    o[0] = (signed char)v; o[1] = (unsigned char)v; o[2] = (short)v; o[3] = (unsigned short)v;
    o[4] = (int)v; o[5] = (unsigned)v;
}

// The remaining float -> integer intrinsics (every rounding mode, signed/unsigned, 32/64 bit)
#define NC2 24
extern "C" __global__ void f2i_all(const float* a, const double* d, long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i]; double y = d[i];
    long long* o = out + i * NC2;
    o[0] = __float2uint_rd(x); o[1] = __float2uint_ru(x); o[2] = __float2ll_rd(x); o[3] = __float2ll_ru(x);
    o[4] = (long long)__float2ull_rn(x); o[5] = (long long)__float2ull_rz(x); o[6] = (long long)__float2ull_ru(x);
    o[7] = __double2int_rd(y); o[8] = __double2int_ru(y); o[9] = __double2uint_rn(y); o[10] = __double2uint_rz(y);
    o[11] = __double2uint_ru(y); o[12] = __double2ll_rn(y); o[13] = __double2ll_rz(y); o[14] = __double2ll_rd(y);
    o[15] = __double2ll_ru(y); o[16] = (long long)__double2ull_rn(y); o[17] = (long long)__double2ull_rz(y);
    o[18] = (long long)__double2ull_rd(y); o[19] = (long long)__double2ull_ru(y);
    o[20] = (short)y; o[21] = (unsigned char)x; o[22] = (long long)y; o[23] = (unsigned long long)y;
}

// The remaining integer -> float intrinsics
#define NI2 20
extern "C" __global__ void i2f_all(const long long* a, float* f, double* d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long v = a[i];
    int v32 = (int)v; unsigned u32 = (unsigned)v; unsigned long long u64 = (unsigned long long)v;
    float* o = f + i * NI2;
    o[0] = __int2float_rn(v32); o[1] = __uint2float_rn(u32); o[2] = __uint2float_rd(u32); o[3] = __uint2float_ru(u32);
    o[4] = __ll2float_rn(v); o[5] = __ll2float_ru(v); o[6] = __ull2float_rn(u64); o[7] = __ull2float_rz(u64);
    o[8] = __ull2float_rd(u64); o[9] = (float)(unsigned char)v; o[10] = (float)(signed char)v;
    o[11] = (float)(unsigned short)v; o[12] = __int_as_float(v32); o[13] = __uint_as_float(u32 ^ 0x80000000u);
    double* p = d + i * 10;
    p[0] = __int2double_rn(v32); p[1] = __uint2double_rn(u32); p[2] = __ll2double_rn(v); p[3] = __ll2double_rz(v);
    p[4] = __ll2double_rd(v); p[5] = __ll2double_ru(v); p[6] = __ull2double_rn(u64); p[7] = __ull2double_rd(u64);
    p[8] = __ull2double_ru(u64); p[9] = __longlong_as_double(v);
    o[14] = (float)p[0]; o[15] = (float)(short)v; o[16] = (float)(double)(v >> 20);
    o[17] = __hiloint2double(v32, (int)(v >> 32)) == 0.0 ? 1.0f : 0.0f;
    o[18] = (float)__double2hiint(p[9]); o[19] = (float)__double2loint(p[9]);
}

// float <-> double, __saturatef, and the float conversions that keep the type (cvt.rni etc.)
extern "C" __global__ void f2f(const float* a, const double* d, double* wide, float* narrow, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i];
    wide[2 * i] = (double)x;
    wide[2 * i + 1] = (double)__saturatef(x);
    narrow[3 * i] = (float)d[i];
    narrow[3 * i + 1] = __saturatef((float)d[i]);
    float r;
    asm("cvt.sat.f32.f32 %0, %1;" : "=f"(r) : "f"(x)); narrow[3 * i + 2] = r;
}
