// Atomics under contention from many blocks, on global and shared memory.
#include <cuda_fp16.h>
extern "C" __global__ void global_atomics(int* i32, unsigned* u32, unsigned long long* u64, float* f32,
                                          double* f64, const int* vals, int n, int slots) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    int v = vals[t], s = t % slots;
    atomicAdd(&i32[s], v);
    atomicSub(&i32[slots + s], v);
    atomicMin(&i32[2 * slots + s], v);
    atomicMax(&i32[3 * slots + s], v);
    atomicAnd(&u32[s], (unsigned)v | 0x80000000u);
    atomicOr(&u32[slots + s], 1u << (v & 31));
    atomicXor(&u32[2 * slots + s], (unsigned)v);
    atomicMin(&u32[3 * slots + s], (unsigned)v);
    atomicMax(&u32[4 * slots + s], (unsigned)v);
    atomicAdd(&u64[s], (unsigned long long)(unsigned)v);
    atomicMax(&u64[slots + s], (unsigned long long)(long long)v);
    atomicAdd(&f32[s], (float)(v & 0xff));
    atomicAdd(&f64[s], (double)v * 0.5);
}

extern "C" __global__ void tickets(unsigned* counter, unsigned* order, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) order[t] = atomicAdd(counter, 1u);
}

extern "C" __global__ void inc_dec_exch_cas(unsigned* inc, unsigned* dec, int* exch, int* cas, unsigned long long* cas64,
                                            unsigned limit, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    atomicInc(inc, limit);
    atomicDec(dec, limit);
    atomicExch(exch, t);
    int old = *cas, assumed;
    do { assumed = old; old = atomicCAS(cas, assumed, assumed + t); } while (old != assumed);
    unsigned long long o64 = *cas64, a64;
    do { a64 = o64; o64 = atomicCAS(cas64, a64, a64 + (unsigned long long)t * 3); } while (o64 != a64);
}

// Float max through a CAS loop, as people write it.
__device__ float atomic_max_float(float* addr, float v) {
    int* p = (int*)addr;
    int old = *p, assumed;
    do {
        assumed = old;
        if (__int_as_float(assumed) >= v) break;
        old = atomicCAS(p, assumed, __float_as_int(v));
    } while (old != assumed);
    return __int_as_float(old);
}

extern "C" __global__ void float_max(const float* x, float* out, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) atomic_max_float(out, x[t]);
}

extern "C" __global__ void shared_histogram(const unsigned char* data, unsigned* bins, int n) {
    __shared__ unsigned local[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) local[i] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x) atomicAdd(&bins[i], local[i]);
    __threadfence();
}

// More widths: unsigned add, signed 64-bit min/max, 64-bit bitwise ops, float exchange,
// block- and system-scoped adds (results unused, so these come out as `red`).
extern "C" __global__ void wide_atomics(unsigned* u32, long long* s64, unsigned long long* b64, float* fx,
                                        const long long* vals, int n, int slots) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    long long v = vals[t];
    int s = t % slots;
    atomicAdd(&u32[s], (unsigned)v);
    atomicAdd_block(&u32[slots + s], 1u);
    atomicAdd_system(&u32[2 * slots + s], 3u);
    atomicMin(&s64[s], v);
    atomicMax(&s64[slots + s], v);
    atomicAnd(&b64[s], (unsigned long long)v | 0xF0F0F0F000000000ull);
    atomicOr(&b64[slots + s], 1ull << (v & 63));
    atomicXor(&b64[2 * slots + s], (unsigned long long)v);
    if (t == n - 1) atomicExch(fx, 2.5f);
}

// Old values returned by every kind of atomic, each one checkable afterwards.
extern "C" __global__ void returned_olds(float* fcount, double* dcount, unsigned long long* ucount, int* down,
                                        unsigned* inc, unsigned* dec, int* exch, unsigned* orbits,
                                        unsigned* andbits, unsigned* xorbits, int* cas, unsigned limit,
                                        float* o_f, double* o_d, unsigned long long* o_u, int* o_down,
                                        unsigned* o_inc, unsigned* o_dec, int* o_exch, unsigned* o_or,
                                        unsigned* o_and, unsigned* o_xor, int* o_cas, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    o_f[t] = atomicAdd(fcount, 1.0f);
    o_d[t] = atomicAdd(dcount, 1.0);
    o_u[t] = atomicAdd(ucount, 1ull);
    o_down[t] = atomicSub(down, 1);
    o_inc[t] = atomicInc(inc, limit);
    o_dec[t] = atomicDec(dec, limit);
    o_exch[t] = atomicExch(exch, t);
    int word = t / 32, bit = t % 32;
    o_or[t] = atomicOr(&orbits[word], 1u << bit);
    o_and[t] = atomicAnd(&andbits[word], ~(1u << bit));
    o_xor[t] = atomicXor(&xorbits[word], 1u << bit);
    int old = *cas, assumed;                 // ticket through a CAS loop
    do { assumed = old; old = atomicCAS(cas, assumed, assumed + 1); } while (old != assumed);
    o_cas[t] = old;
}

// The same operations on shared memory, one set of counters per block.
extern "C" __global__ void shared_atomics(const int* vals, int* oi, unsigned* ou, unsigned long long* o64,
                                          float* of, double* od, int* tickets, unsigned limit) {
    __shared__ int si[5];
    __shared__ unsigned su[6];
    __shared__ unsigned long long s64[2];
    __shared__ float sf;
    __shared__ double sd;
    int t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
    if (t == 0) {
        si[0] = 0; si[1] = 0; si[2] = 0x7fffffff; si[3] = (int)0x80000000; si[4] = 0;
        su[0] = 0xffffffffu; su[1] = 0; su[2] = 0; su[3] = 0; su[4] = 0; su[5] = 0;
        s64[0] = 0; s64[1] = 0; sf = 0; sd = 0;
    }
    __syncthreads();
    int v = vals[g];
    atomicAdd(&si[0], v);
    atomicSub(&si[1], v);
    atomicMin(&si[2], v);
    atomicMax(&si[3], v);
    tickets[g] = atomicAdd(&si[4], 1);
    atomicAnd(&su[0], (unsigned)v | 0xff00ff00u);
    atomicOr(&su[1], (unsigned)v & 0x0f0f0f0fu);
    atomicXor(&su[2], (unsigned)v);
    atomicInc(&su[3], limit);
    atomicDec(&su[4], limit);
    atomicMax(&su[5], (unsigned)v);
    atomicAdd(&s64[0], (unsigned long long)(unsigned)v);
    unsigned long long o = s64[1], a;          // 64-bit CAS loop on shared memory
    do { a = o; o = atomicCAS(&s64[1], a, a + (unsigned long long)(v & 0xffff)); } while (o != a);
    atomicAdd(&sf, (float)(v & 0xf));
    atomicAdd(&sd, (double)v);
    atomicExch(&si[4], si[4]);                 // harmless: the count stays what it is
    __syncthreads();
    if (t == 0) {
        for (int k = 0; k < 4; ++k) oi[4 * blockIdx.x + k] = si[k];
        for (int k = 0; k < 6; ++k) ou[6 * blockIdx.x + k] = su[k];
        o64[2 * blockIdx.x] = s64[0]; o64[2 * blockIdx.x + 1] = s64[1];
        of[blockIdx.x] = sf; od[blockIdx.x] = sd;
    }
}

// Fences: the "last block finishes the job" pattern (partial sums, fence, counter).
extern "C" __global__ void last_block_sum(const float* x, float* partial, unsigned* done, float* total, int n) {
    __shared__ float s[256];
    __shared__ bool last;
    int t = threadIdx.x;
    float acc = 0;
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) acc += x[i];
    s[t] = acc;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if (t < o) s[t] += s[t + o];
        __syncthreads();
    }
    if (t == 0) {
        partial[blockIdx.x] = s[0];
        __threadfence();
        unsigned ticket = atomicInc(done, gridDim.x);
        last = (ticket == gridDim.x - 1);
    }
    __syncthreads();
    if (last && t == 0) {
        float sum = 0;
        for (int b = 0; b < gridDim.x; ++b) sum += ((volatile float*)partial)[b];
        *total = sum;
        *done = 0;
    }
    __threadfence_block();
    __threadfence_system();
}

// `red` (reduction without a result): nvcc emits `atom` even when the old value is unused,
// so the red forms are written out here.
extern "C" __global__ void red_forms(const int* vals, int* gi, unsigned* gu, unsigned long long* g64,
                                     float* gf, double* gd, unsigned limit, int n) {
    __shared__ unsigned sh;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0) sh = 0;
    __syncthreads();
    if (t < n) {
        int v = vals[t];
        unsigned u = (unsigned)v;
        unsigned long long w = u;
        float f = (float)(v & 0xff);
        double d = (double)v;
        asm volatile("red.global.add.s32 [%0], %1;" :: "l"(gi), "r"(v) : "memory");
        asm volatile("red.global.min.s32 [%0], %1;" :: "l"(gi + 1), "r"(v) : "memory");
        asm volatile("red.global.max.s32 [%0], %1;" :: "l"(gi + 2), "r"(v) : "memory");
        asm volatile("red.global.min.u32 [%0], %1;" :: "l"(gu), "r"(u) : "memory");
        asm volatile("red.global.max.u32 [%0], %1;" :: "l"(gu + 1), "r"(u) : "memory");
        asm volatile("red.global.and.b32 [%0], %1;" :: "l"(gu + 2), "r"(u | 0x0ff00ff0u) : "memory");
        asm volatile("red.global.or.b32 [%0], %1;" :: "l"(gu + 3), "r"(u & 0x11111111u) : "memory");
        asm volatile("red.global.xor.b32 [%0], %1;" :: "l"(gu + 4), "r"(u) : "memory");
        asm volatile("red.global.inc.u32 [%0], %1;" :: "l"(gu + 5), "r"(limit) : "memory");
        asm volatile("red.global.dec.u32 [%0], %1;" :: "l"(gu + 6), "r"(limit) : "memory");
        asm volatile("red.global.add.u64 [%0], %1;" :: "l"(g64), "l"(w) : "memory");
        asm volatile("red.global.add.f32 [%0], %1;" :: "l"(gf), "f"(f) : "memory");
        asm volatile("red.global.add.f64 [%0], %1;" :: "l"(gd), "d"(d) : "memory");
        unsigned sa = (unsigned)__cvta_generic_to_shared(&sh);
        asm volatile("red.shared.add.u32 [%0], %1;" :: "r"(sa), "r"(u & 0xffff) : "memory");
        asm volatile("red.add.u32 [%0], %1;" :: "l"(gu + 7), "r"(1u) : "memory");   // generic address
    }
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(&gu[8], sh);
}

// __half2 atomicAdd (sm_70+): both halves add exactly for small integers.
extern "C" __global__ void half2_add(__half2* acc, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) atomicAdd(acc + (t & 3), __halves2half2(__int2half_rn(1), __int2half_rn((t & 7) - 3)));
}

// A double minimum through a 64-bit CAS loop, and unsigned 64-bit min.
extern "C" __global__ void double_min(const double* x, double* out, unsigned long long* umin, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    double v = x[t];
    unsigned long long* p = (unsigned long long*)out;
    unsigned long long old = *p, assumed;
    do {
        assumed = old;
        if (__longlong_as_double(assumed) <= v) break;
        old = atomicCAS(p, assumed, __double_as_longlong(v));
    } while (old != assumed);
    atomicMin(umin, (unsigned long long)__double_as_longlong(v));
}

// 16-bit CAS (sm_70+) on neighbouring halves of one word: each counter counts exactly.
extern "C" __global__ void cas16_counters(unsigned short* c, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    unsigned short* p = c + (t & 3);
    unsigned short old = *p, a;
    do { a = old; old = atomicCAS(p, a, (unsigned short)(a + 1 + (t & 3))); } while (old != a);
}
