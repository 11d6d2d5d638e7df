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
