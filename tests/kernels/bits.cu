// Bit manipulation intrinsics and the PTX bit-field instructions.
#define NB 20
extern "C" __global__ void bit_ops(const unsigned* a, const unsigned* b, const unsigned* c,
                                   const unsigned long long* w, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = a[i], y = b[i], s = c[i];
    unsigned long long v = w[i];
    unsigned* o = out + i * NB;
    o[0] = __popc(x); o[1] = __clz(x); o[2] = __ffs(x); o[3] = __brev(x);
    o[4] = __byte_perm(x, y, s); o[5] = __funnelshift_l(x, y, s); o[6] = __funnelshift_r(x, y, s);
    o[7] = __funnelshift_lc(x, y, s); o[8] = __funnelshift_rc(x, y, s);
    o[9] = __popcll(v); o[10] = __clzll(v); o[11] = __ffsll(v); o[12] = (unsigned)(__brevll(v) >> 17);
    unsigned r;
    asm("bfe.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(s & 0xff), "r"((s >> 8) & 0xff)); o[13] = r;
    asm("bfe.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(s & 0xff), "r"((s >> 8) & 0xff)); o[14] = r;
    asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(x), "r"(y), "r"(s & 0xff), "r"((s >> 8) & 0xff)); o[15] = r;
    asm("bfind.u32 %0, %1;" : "=r"(r) : "r"(x)); o[16] = r;
    asm("bfind.s32 %0, %1;" : "=r"(r) : "r"(x)); o[17] = r;
    asm("bfind.shiftamt.u32 %0, %1;" : "=r"(r) : "r"(x)); o[18] = r;
    asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(r) : "r"(x), "r"(y), "r"(s)); o[19] = r;
}

#define NL 8
__constant__ unsigned char luts[NL] = {0x00, 0xFF, 0xE8, 0x80, 0x1E, 0xCA, 0x6A, 0x5B};
extern "C" __global__ void lop3_table(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = a[i], y = b[i], z = c[i], r;
#define L(k, imm) asm("lop3.b32 %0, %1, %2, %3, " #imm ";" : "=r"(r) : "r"(x), "r"(y), "r"(z)); out[i * NL + k] = r;
    L(0, 0x00) L(1, 0xFF) L(2, 0xE8) L(3, 0x80) L(4, 0x1E) L(5, 0xCA) L(6, 0x6A) L(7, 0x5B)
}

extern "C" __global__ void dot_products(const int* a, const int* b, const int* c, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[5 * i] = __dp4a(a[i], b[i], c[i]);
    out[5 * i + 1] = (int)__dp4a((unsigned)a[i], (unsigned)b[i], (unsigned)c[i]);
    out[5 * i + 2] = __dp2a_lo(a[i], b[i], c[i]);
    out[5 * i + 3] = __dp2a_hi(a[i], b[i], c[i]);
    out[5 * i + 4] = __sad(a[i], b[i], (unsigned)c[i]);
}
