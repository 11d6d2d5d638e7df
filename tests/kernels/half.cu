// __half and __nv_bfloat16 arithmetic, comparisons and conversions.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
// bfloat16 fused multiply-add exists from sm_80 on; below, these columns hold a marker NaN
#if __CUDA_ARCH__ >= 800
#define BF16_FMA(a, b, c) __hfma(a, b, c)
#define BF16_FMA2(a, b, c) __hfma2(a, b, c)
#else
#define BF16_FMA(a, b, c) __ushort_as_bfloat16(0x7FBF)
#define BF16_FMA2(a, b, c) __halves2bfloat162(__ushort_as_bfloat16(0x7FBF), __ushort_as_bfloat16(0x7FBF))
#endif
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
    o[2] = __bfloat16_as_ushort(__hmul(x, y)); o[3] = __bfloat16_as_ushort(BF16_FMA(x, y, x));
    __nv_bfloat162 p = __halves2bfloat162(x, y);
    __nv_bfloat162 q = __hmul2(p, p);
    o[4] = __bfloat16_as_ushort(__low2bfloat16(q)); o[5] = __bfloat16_as_ushort(__high2bfloat16(q));
    o[6] = __bfloat16_as_ushort(__float2bfloat16_rz(a[i]));
    back[i] = __bfloat162float(x);
}

// Every half and every bfloat16 bit pattern widened to float
extern "C" __global__ void widen_all(float* h, float* b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 65536) return;
    h[i] = __half2float(__ushort_as_half((unsigned short)i));
    b[i] = __bfloat162float(__ushort_as_bfloat16((unsigned short)i));
}

// More half operations: division, paired ops, unordered comparisons, saturation, conversions
#define NH2 26
extern "C" __global__ void half_more(const __half* a, const __half* b, const __half* c, unsigned short* out,
                                     int* ints, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half x = a[i], y = b[i], z = c[i];
    unsigned short* o = out + i * NH2;
    __half2 p = __halves2half2(x, y), q = __halves2half2(y, z);
    o[0] = __half_as_ushort(__hdiv(x, y)); o[1] = __half_as_ushort(__habs(x));
    __half2 s = __hadd2(p, q), d = __hsub2(p, q), ng = __hneg2(p), ab = __habs2(q);
    o[2] = __half_as_ushort(__low2half(s)); o[3] = __half_as_ushort(__high2half(s));
    o[4] = __half_as_ushort(__low2half(d)); o[5] = __half_as_ushort(__high2half(d));
    o[6] = __half_as_ushort(__low2half(ng)); o[7] = __half_as_ushort(__high2half(ab));
    o[8] = __half_as_ushort(__hadd_sat(x, y)); o[9] = __half_as_ushort(__hfma_sat(x, y, z));
    __half2 sw = __lowhigh2highlow(p);
    o[10] = __half_as_ushort(__low2half(sw)); o[11] = __half_as_ushort(__high2half(__half2half2(z)));
    o[12] = __hne(x, y) | (__hle(x, y) << 1) | (__hgt(x, y) << 2) | (__hequ(x, y) << 3) | (__hltu(x, y) << 4) |
            (__hgeu(x, y) << 5) | (__hisinf(x) != 0) << 6;
    o[13] = __half_as_ushort(__int2half_rn(ints[2 * i])); o[14] = __half_as_ushort(__int2half_rz(ints[2 * i]));
    o[15] = __half_as_ushort(__short2half_rn((short)ints[2 * i + 1])); o[16] = __half_as_ushort(__ushort2half_rd((unsigned short)ints[2 * i + 1]));
    float2 f = __half22float2(p);
    __half2 back = __float22half2_rn(make_float2(f.x * 3.0f, f.y / 3.0f));
    o[17] = __half_as_ushort(__low2half(back)); o[18] = __half_as_ushort(__high2half(back));
    __half2 m2 = __hmax2(p, q), n2 = __hmin2(p, q);
    o[19] = __half_as_ushort(__low2half(m2)); o[20] = __half_as_ushort(__high2half(n2));
    o[21] = __hbeq2(p, q) | (__hblt2(p, q) << 1);
    __half2 cmp = __hle2(p, q);
    o[22] = __half_as_ushort(__low2half(cmp)); o[23] = __half_as_ushort(__high2half(cmp));
    o[24] = __half_as_ushort(__float2half(__low2float(q) + __high2float(q)));
    o[25] = __half_as_ushort(__double2half((double)__half2float(x) / 7.0));
    int* r = ints + 2 * i;
    __syncwarp();
    int hi = __half2int_rn(x), hz = __half2int_rz(x), hd = __half2int_rd(x), hu = __half2int_ru(x);
    __syncwarp();
    r[0] = hi; r[1] = (hz & 0xFFFF) | ((hd & 0xFF) << 16) | ((hu & 0xFF) << 24);
}

// bfloat16: directed conversions, paired arithmetic, comparisons, conversions to/from int
#define NB2 16
extern "C" __global__ void bf16_more(const float* a, const float* b, const float* c, unsigned short* out, int* ints, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_bfloat16 x = __float2bfloat16(a[i]), y = __float2bfloat16(b[i]), z = __float2bfloat16(c[i]);
    unsigned short* o = out + i * NB2;
    o[0] = __bfloat16_as_ushort(__float2bfloat16_rd(a[i])); o[1] = __bfloat16_as_ushort(__float2bfloat16_ru(a[i]));
    __nv_bfloat162 p = __halves2bfloat162(x, y), q = __halves2bfloat162(z, x);
    __nv_bfloat162 s = __hadd2(p, q), f = BF16_FMA2(p, q, p), d = __hsub2(p, q);
    o[2] = __bfloat16_as_ushort(__low2bfloat16(s)); o[3] = __bfloat16_as_ushort(__high2bfloat16(s));
    o[4] = __bfloat16_as_ushort(__low2bfloat16(f)); o[5] = __bfloat16_as_ushort(__high2bfloat16(f));
    o[6] = __bfloat16_as_ushort(__low2bfloat16(d)); o[7] = __bfloat16_as_ushort(__hneg(x));
    o[8] = __bfloat16_as_ushort(__hmin(x, y)); o[9] = __bfloat16_as_ushort(__hmax(x, y));
    o[10] = __heq(x, y) | (__hlt(x, y) << 1) | (__hge(x, y) << 2) | (__hisnan(x) << 3);
    o[11] = __bfloat16_as_ushort(__hsub(x, y)); o[12] = __bfloat16_as_ushort(BF16_FMA(x, y, z));
    o[13] = __bfloat16_as_ushort(__int2bfloat16_rn(ints[i])); o[14] = __bfloat16_as_ushort(__habs(y));
    o[15] = __bfloat16_as_ushort(__float2bfloat16_rz(b[i]));
    ints[i] = __bfloat162int_rz(y);
}
