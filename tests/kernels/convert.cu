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
