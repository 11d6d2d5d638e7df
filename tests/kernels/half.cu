// __half and __nv_bfloat16 arithmetic, comparisons and conversions.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define NH 12
extern "C" __global__ void half_ops(const __half* a, const __half* b, const __half* c, unsigned short* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half x = a[i], y = b[i], z = c[i];
    unsigned short* o = out + i * NH;
    o[0] = __half_as_ushort(__hadd(x, y)); o[1] = __half_as_ushort(__hsub(x, y));
    o[2] = __half_as_ushort(__hmul(x, y)); o[3] = __half_as_ushort(__hfma(x, y, z));
    o[4] = __half_as_ushort(__hneg(x)); o[5] = __half_as_ushort(__hmin(x, y)); o[6] = __half_as_ushort(__hmax(x, y));
    o[7] = __heq(x, y) | (__hlt(x, y) << 1) | (__hge(x, y) << 2) | (__hisnan(x) << 3);
    __half2 p = __halves2half2(x, y), q = __halves2half2(z, x);
    __half2 r = __hfma2(p, q, p);
    o[8] = __half_as_ushort(__low2half(r)); o[9] = __half_as_ushort(__high2half(r));
    __half2 m = __hmul2(p, q);
    o[10] = __half_as_ushort(__low2half(m)); o[11] = __half_as_ushort(__high2half(m));
}

extern "C" __global__ void half_convert(const float* f, unsigned short* h, float* back, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = f[i];
    h[4 * i] = __half_as_ushort(__float2half_rn(x)); h[4 * i + 1] = __half_as_ushort(__float2half_rz(x));
    h[4 * i + 2] = __half_as_ushort(__float2half_rd(x)); h[4 * i + 3] = __half_as_ushort(__float2half_ru(x));
    back[i] = __half2float(__float2half_rn(x));
}

#define NBF 7
extern "C" __global__ void bf16_ops(const float* a, const float* b, unsigned short* out, float* back, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_bfloat16 x = __float2bfloat16(a[i]), y = __float2bfloat16(b[i]);
    unsigned short* o = out + i * NBF;
    o[0] = __bfloat16_as_ushort(x); o[1] = __bfloat16_as_ushort(__hadd(x, y));
    o[2] = __bfloat16_as_ushort(__hmul(x, y)); o[3] = __bfloat16_as_ushort(__hfma(x, y, x));
    __nv_bfloat162 p = __halves2bfloat162(x, y);
    __nv_bfloat162 q = __hmul2(p, p);
    o[4] = __bfloat16_as_ushort(__low2bfloat16(q)); o[5] = __bfloat16_as_ushort(__high2bfloat16(q));
    o[6] = __bfloat16_as_ushort(__float2bfloat16_rz(a[i]));
    back[i] = __bfloat162float(x);
}
