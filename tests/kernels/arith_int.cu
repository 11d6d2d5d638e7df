// Integer arithmetic: one thread per input pair, one output column per operation.
#define NOPS32 24
extern "C" __global__ void int32_ops(const int* a, const int* b, const unsigned* sh, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int x = a[i], y = b[i];
    unsigned ux = (unsigned)x, uy = (unsigned)y, s = sh[i];
    int* o = out + i * NOPS32;
    o[0] = x + y;            o[1] = x - y;            o[2] = x * y;
    o[3] = __mulhi(x, y);    o[4] = (int)__umulhi(ux, uy);
    o[5] = y ? x / y : 0;    o[6] = y ? x % y : 0;
    o[7] = uy ? (int)(ux / uy) : 0;  o[8] = uy ? (int)(ux % uy) : 0;
    o[9] = abs(x);           o[10] = min(x, y);       o[11] = max(x, y);
    o[12] = (int)min(ux, uy); o[13] = (int)max(ux, uy); o[14] = -x;
    o[15] = x & y;           o[16] = x | y;           o[17] = x ^ y;   o[18] = ~x;
    o[19] = x << (s & 31);   o[20] = x >> (s & 31);   o[21] = (int)(ux >> (s & 31));
    o[22] = __mul24(x, y);   o[23] = x * 7 + y;
}

#define NOPS64 12
extern "C" __global__ void int64_ops(const long long* a, const long long* b, long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long x = a[i], y = b[i];
    unsigned long long ux = x, uy = y;
    long long* o = out + i * NOPS64;
    o[0] = x + y; o[1] = x - y; o[2] = x * y;
    o[3] = y ? x / y : 0; o[4] = y ? x % y : 0;
    o[5] = uy ? (long long)(ux / uy) : 0; o[6] = uy ? (long long)(ux % uy) : 0;
    o[7] = __mul64hi(x, y); o[8] = (long long)__umul64hi(ux, uy);
    o[9] = min(x, y); o[10] = (long long)max(ux, uy); o[11] = x >> (int)(uy & 63);
}

// 32x32 -> 64 products and 128-bit carry chains through inline PTX
extern "C" __global__ void wide_and_carry(const unsigned* a, const unsigned* b, unsigned long long* wide,
                                          unsigned* sum128, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    wide[2 * i] = (unsigned long long)a[i] * b[i];
    wide[2 * i + 1] = (unsigned long long)((long long)(int)a[i] * (int)b[i]);
    const unsigned* x = a + 4 * (i / 4);
    const unsigned* y = b + 4 * (i / 4);
    unsigned r0, r1, r2, r3;
    asm("add.cc.u32 %0, %4, %8;\n\t"
        "addc.cc.u32 %1, %5, %9;\n\t"
        "addc.cc.u32 %2, %6, %10;\n\t"
        "addc.u32 %3, %7, %11;"
        : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
        : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(y[0]), "r"(y[1]), "r"(y[2]), "r"(y[3]));
    if (i % 4 == 0) { sum128[i] = r0; sum128[i + 1] = r1; sum128[i + 2] = r2; sum128[i + 3] = r3; }
}

// PTX's rules at the edges: shifts by >= width clamp; saturating add; division corner cases
extern "C" __global__ void edges(const int* a, const unsigned* s, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int x = a[i]; unsigned k = s[i];
    int r_shl, r_shr_s; unsigned r_shr_u; int r_sat;
    asm("shl.b32 %0, %1, %2;" : "=r"(r_shl) : "r"(x), "r"(k));
    asm("shr.s32 %0, %1, %2;" : "=r"(r_shr_s) : "r"(x), "r"(k));
    asm("shr.u32 %0, %1, %2;" : "=r"(r_shr_u) : "r"(x), "r"(k));
    asm("add.sat.s32 %0, %1, %2;" : "=r"(r_sat) : "r"(x), "r"(x));
    out[4 * i] = r_shl; out[4 * i + 1] = r_shr_s; out[4 * i + 2] = (int)r_shr_u; out[4 * i + 3] = r_sat;
}

extern "C" __global__ void div_corner(const int* a, const int* b, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[2 * i] = a[i] / b[i];          // includes x/0 and INT_MIN/-1: must not crash
    out[2 * i + 1] = a[i] % b[i];
}

extern "C" __global__ void div_corner64(const long long* a, const long long* b, long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long ua = a[i], ub = b[i];
    out[4 * i] = a[i] / b[i];          // x/0 and LLONG_MIN/-1: any value, no crash
    out[4 * i + 1] = a[i] % b[i];
    out[4 * i + 2] = (long long)(ua / ub);
    out[4 * i + 3] = (long long)(ua % ub);
}

// Multiply-add forms, 24-bit products, sums of absolute differences, saturation, abs/neg
// of the most negative value (all through inline PTX where C++ leaves the result undefined).
#define NMAD 22
extern "C" __global__ void mad_family(const int* a, const int* b, const int* c, int* out, long long* wide, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int x = a[i], y = b[i], z = c[i];
    unsigned ux = x, uy = y, uz = z;
    int* o = out + i * NMAD;
    int r; unsigned u; long long w; unsigned long long uw;
    o[0] = x * y + z;                                                   // mad.lo.s32
    asm("mad.hi.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(z)); o[1] = r;
    asm("mad.hi.u32 %0, %1, %2, %3;" : "=r"(u) : "r"(ux), "r"(uy), "r"(uz)); o[2] = (int)u;
    asm("mad.hi.sat.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(z)); o[3] = r;
    asm("mul24.lo.s32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y)); o[4] = r;
    asm("mul24.hi.s32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y)); o[5] = r;
    asm("mul24.hi.u32 %0, %1, %2;" : "=r"(u) : "r"(ux), "r"(uy)); o[6] = (int)u;
    asm("mad24.lo.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(z)); o[7] = r;
    o[8] = (int)__umul24(ux, uy);
    o[9] = (int)__sad(x, y, uz);
    o[10] = (int)__usad(ux, uy, uz);
    asm("add.sat.s32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y)); o[11] = r;
    asm("sub.sat.s32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y)); o[12] = r;
    asm("abs.s32 %0, %1;" : "=r"(r) : "r"(x)); o[13] = r;
    asm("neg.s32 %0, %1;" : "=r"(r) : "r"(x)); o[14] = r;
    asm("min.u32 %0, %1, %2;" : "=r"(u) : "r"(ux), "r"(uy)); o[15] = (int)u;
    asm("max.s32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y)); o[16] = r;
    asm("mul.hi.s32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y)); o[17] = r;
    o[18] = __hadd(x, y);            // (x + y) >> 1 without overflow
    o[19] = __rhadd(x, y);           // (x + y + 1) >> 1
    o[20] = (int)__uhadd(ux, uy);
    o[21] = (int)__urhadd(ux, uy);
    asm("mad.wide.s32 %0, %1, %2, %3;" : "=l"(w) : "r"(x), "r"(y), "l"((long long)z * 65536)); wide[3 * i] = w;
    asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(uw) : "r"(ux), "r"(uy), "l"((unsigned long long)uz << 31)); wide[3 * i + 1] = (long long)uw;
    asm("mul.wide.s32 %0, %1, %2;" : "=l"(w) : "r"(x), "r"(y)); wide[3 * i + 2] = w;
}

// 16-bit and 8-bit arithmetic: C++ on short/char, and PTX's own 16-bit instructions
#define N16 20
extern "C" __global__ void small_ints(const short* a, const short* b, const unsigned* s, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    short x = a[i], y = b[i];
    unsigned short ux = x, uy = y;
    signed char cx = (signed char)x, cy = (signed char)y;
    unsigned char bx = (unsigned char)x, by = (unsigned char)y;
    unsigned short k = (unsigned short)s[i];
    int* o = out + i * N16;
    short r; unsigned short u; int w;
    o[0] = (short)(x + y); o[1] = (short)(x * y); o[2] = (unsigned short)(ux * uy);
    o[3] = y ? (short)(x / y) : 0; o[4] = y ? (short)(x % y) : 0;
    o[5] = (signed char)(cx * cy); o[6] = (unsigned char)(bx + by * 3);
    o[7] = cy ? (signed char)(cx / cy) : 0; o[8] = by ? (unsigned char)(bx % by) : 0;
    asm("add.s16 %0, %1, %2;" : "=h"(r) : "h"(x), "h"(y)); o[9] = r;
    asm("sub.u16 %0, %1, %2;" : "=h"(u) : "h"(ux), "h"(uy)); o[10] = u;
    asm("mul.lo.s16 %0, %1, %2;" : "=h"(r) : "h"(x), "h"(y)); o[11] = r;
    asm("mul.hi.s16 %0, %1, %2;" : "=h"(r) : "h"(x), "h"(y)); o[12] = r;
    asm("mul.hi.u16 %0, %1, %2;" : "=h"(u) : "h"(ux), "h"(uy)); o[13] = u;
    asm("mul.wide.s16 %0, %1, %2;" : "=r"(w) : "h"(x), "h"(y)); o[14] = w;
    asm("mul.wide.u16 %0, %1, %2;" : "=r"(w) : "h"(ux), "h"(uy)); o[15] = w;
    asm("shl.b16 %0, %1, %2;" : "=h"(u) : "h"(ux), "r"((unsigned)k)); o[16] = u;
    asm("shr.s16 %0, %1, %2;" : "=h"(r) : "h"(x), "r"((unsigned)k)); o[17] = r;
    asm("shr.u16 %0, %1, %2;" : "=h"(u) : "h"(ux), "r"((unsigned)k)); o[18] = u;
    asm("min.s16 %0, %1, %2;" : "=h"(r) : "h"(x), "h"(y)); o[19] = r;
}

// 64-bit operations nvcc emits for C++, and PTX's 64-bit shift clamping and absolute value
#define N64B 14
extern "C" __global__ void int64_more(const long long* a, const long long* b, const long long* c,
                                      const unsigned* s, long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long x = a[i], y = b[i], z = c[i];
    unsigned long long ux = x, uy = y;
    unsigned k = s[i];
    long long* o = out + i * N64B;
    long long r; unsigned long long u;
    o[0] = x * y + z; o[1] = x & ~y; o[2] = x | (y ^ z); o[3] = (long long)(ux >> (k & 63));
    o[4] = x << (k & 63); o[5] = max(x, y); o[6] = (long long)min(ux, uy);
    asm("abs.s64 %0, %1;" : "=l"(r) : "l"(x)); o[7] = r;
    asm("neg.s64 %0, %1;" : "=l"(r) : "l"(x)); o[8] = r;
    asm("shl.b64 %0, %1, %2;" : "=l"(u) : "l"(ux), "r"(k)); o[9] = (long long)u;
    asm("shr.s64 %0, %1, %2;" : "=l"(r) : "l"(x), "r"(k)); o[10] = r;
    asm("shr.u64 %0, %1, %2;" : "=l"(u) : "l"(ux), "r"(k)); o[11] = (long long)u;
    asm("mad.lo.s64 %0, %1, %2, %3;" : "=l"(r) : "l"(x), "l"(y), "l"(z)); o[12] = r;
    asm("mad.hi.u64 %0, %1, %2, %3;" : "=l"(u) : "l"(ux), "l"(uy), "l"((unsigned long long)z)); o[13] = (long long)u;
}

// 64x64 -> 128 products through 32-bit limbs and mad/madc carry chains, 128-bit
// subtraction through sub.cc/subc, and 64-bit-limb carries through add.cc.u64.
extern "C" __global__ void carry_chains(const unsigned long long* a, const unsigned long long* b, unsigned* prod,
                                        unsigned* diff, unsigned long long* sum, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long x = a[i], y = b[i];
    unsigned a0 = (unsigned)x, a1 = (unsigned)(x >> 32), b0 = (unsigned)y, b1 = (unsigned)(y >> 32);
    unsigned r0, r1, r2, r3;
    asm("mul.lo.u32 %0, %4, %6;\n\t"
        "mul.hi.u32 %1, %4, %6;\n\t"
        "mad.lo.cc.u32 %1, %4, %7, %1;\n\t"
        "madc.hi.u32 %2, %4, %7, 0;\n\t"
        "mad.lo.cc.u32 %1, %5, %6, %1;\n\t"
        "madc.hi.cc.u32 %2, %5, %6, %2;\n\t"
        "addc.u32 %3, 0, 0;\n\t"
        "mad.lo.cc.u32 %2, %5, %7, %2;\n\t"
        "madc.hi.u32 %3, %5, %7, %3;"
        : "=&r"(r0), "=&r"(r1), "=&r"(r2), "=&r"(r3) : "r"(a0), "r"(a1), "r"(b0), "r"(b1));
    prod[4 * i] = r0; prod[4 * i + 1] = r1; prod[4 * i + 2] = r2; prod[4 * i + 3] = r3;
    // (x : y) - (y : x) as 128-bit numbers (high word first), borrow out in the fifth word
    unsigned d0, d1, d2, d3, bo;
    asm("sub.cc.u32 %0, %5, %7;\n\t"
        "subc.cc.u32 %1, %6, %8;\n\t"
        "subc.cc.u32 %2, %7, %5;\n\t"
        "subc.cc.u32 %3, %8, %6;\n\t"
        "subc.u32 %4, 0, 0;"
        : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3), "=r"(bo) : "r"(b0), "r"(b1), "r"(a0), "r"(a1));
    diff[5 * i] = d0; diff[5 * i + 1] = d1; diff[5 * i + 2] = d2; diff[5 * i + 3] = d3; diff[5 * i + 4] = bo;
    // (x : x) + (y : y) with 64-bit limbs and the carry out
    unsigned long long s0, s1, s2;
    asm("add.cc.u64 %0, %3, %4;\n\t"
        "addc.cc.u64 %1, %3, %4;\n\t"
        "addc.u64 %2, 0, 0;"
        : "=l"(s0), "=l"(s1), "=l"(s2) : "l"(x), "l"(y));
    sum[3 * i] = s0; sum[3 * i + 1] = s1; sum[3 * i + 2] = s2;
}
