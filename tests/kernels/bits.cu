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

// Raw prmt (the sign-replicating selector bit too, which __byte_perm never sets) and its modes
#define NP 7
extern "C" __global__ void prmt_modes(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = a[i], y = b[i], s = c[i], r;
    unsigned* o = out + i * NP;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s)); o[0] = r;
    asm("prmt.b32.f4e %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s)); o[1] = r;
    asm("prmt.b32.b4e %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s)); o[2] = r;
    asm("prmt.b32.rc8 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s)); o[3] = r;
    asm("prmt.b32.ecl %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s)); o[4] = r;
    asm("prmt.b32.ecr %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s)); o[5] = r;
    asm("prmt.b32.rc16 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s)); o[6] = r;
}

// 64-bit bit fields, masks, sign/zero extension, find-n-th-set, cnot
#define NX 12
extern "C" __global__ void bitfields_more(const unsigned long long* w, const unsigned* a, const unsigned* c,
                                          const int* off, unsigned long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long v = w[i], r64;
    unsigned x = a[i], s = c[i], r;
    unsigned pos = s & 0xff, len = (s >> 8) & 0xff;
    unsigned long long* o = out + i * NX;
    asm("bfe.u64 %0, %1, %2, %3;" : "=l"(r64) : "l"(v), "r"(pos), "r"(len)); o[0] = r64;
    asm("bfe.s64 %0, %1, %2, %3;" : "=l"(r64) : "l"(v), "r"(pos), "r"(len)); o[1] = r64;
    asm("bfi.b64 %0, %1, %2, %3, %4;" : "=l"(r64) : "l"(v), "l"(~v * 3), "r"(pos), "r"(len)); o[2] = r64;
    asm("bmsk.clamp.b32 %0, %1, %2;" : "=r"(r) : "r"(pos & 63), "r"(len & 63)); o[3] = r;
    asm("bmsk.wrap.b32 %0, %1, %2;" : "=r"(r) : "r"(pos & 63), "r"(len & 63)); o[4] = r;
    asm("bfe.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(pos), "r"(len)); o[5] = r;
    asm("bfe.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(pos), "r"(len)); o[6] = r;
    asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(x), "r"(s), "r"(pos), "r"(len)); o[7] = r;
    o[8] = __popc(x & s) + __clzll(v);
    asm("cnot.b32 %0, %1;" : "=r"(r) : "r"(x & s)); o[9] = r;
    asm("bfind.u64 %0, %1;" : "=r"(r) : "l"(v >> (s & 63))); o[10] = r;
    asm("bfind.shiftamt.s64 %0, %1;" : "=r"(r) : "l"((long long)v >> (s & 63))); o[11] = r;
}

// sign/zero extension from a run-time bit width (sm_70+)
extern "C" __global__ void szext_ops(const unsigned* a, const unsigned* c, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = a[i], k = c[i], r;
    asm("szext.clamp.s32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(k)); out[4 * i] = r;
    asm("szext.wrap.s32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(k)); out[4 * i + 1] = r;
    asm("szext.clamp.u32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(k)); out[4 * i + 2] = r;
    asm("szext.wrap.u32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(k)); out[4 * i + 3] = r;
}

// the n-th set bit at or beyond a base position (__fns -> fns.b32)
extern "C" __global__ void fns_ops(const unsigned* a, const unsigned* base, const int* off, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = __fns(a[i], base[i], off[i]);
}

// lop3 with a truth table chosen per thread at run time: one asm statement per table
#define LOP3_CASE(L) case L: asm("lop3.b32 %0, %1, %2, %3, " #L ";" : "=r"(r) : "r"(x), "r"(y), "r"(z)); break;
#define LOP3_16(H) LOP3_CASE(H##0) LOP3_CASE(H##1) LOP3_CASE(H##2) LOP3_CASE(H##3) LOP3_CASE(H##4) LOP3_CASE(H##5) \
    LOP3_CASE(H##6) LOP3_CASE(H##7) LOP3_CASE(H##8) LOP3_CASE(H##9) LOP3_CASE(H##a) LOP3_CASE(H##b) LOP3_CASE(H##c) \
    LOP3_CASE(H##d) LOP3_CASE(H##e) LOP3_CASE(H##f)
extern "C" __global__ void lop3_any(const unsigned* a, const unsigned* b, const unsigned* c, const int* lut,
                                    unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = a[i], y = b[i], z = c[i], r = 0xDEADBEEF;
    switch (lut[i]) {
        LOP3_16(0x0) LOP3_16(0x1) LOP3_16(0x2) LOP3_16(0x3) LOP3_16(0x4) LOP3_16(0x5) LOP3_16(0x6) LOP3_16(0x7)
        LOP3_16(0x8) LOP3_16(0x9) LOP3_16(0xa) LOP3_16(0xb) LOP3_16(0xc) LOP3_16(0xd) LOP3_16(0xe) LOP3_16(0xf)
    }
    out[i] = r;
}
