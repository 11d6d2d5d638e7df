// Every state space and access width: global, shared (static and dynamic), local,
// constant, module variables, vector types, struct and large parameters.
struct Mixed { float f; int i; double d; short s; char c; };
struct Big { int v[1000]; };

__constant__ float table[8] = {1.5f, -2.0f, 3.25f, 0.0f, 8.0f, -0.5f, 7.0f, 100.0f};
__device__ int counter = 42;
__device__ double scale = 0.25;

extern "C" __global__ void widths(const char* c8, const short* s16, const long long* i64, const float4* v4,
                                  const double2* d2, const int4* i4, long long* out, float* fout, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[6 * i] = c8[i]; out[6 * i + 1] = s16[i]; out[6 * i + 2] = i64[i];
    int4 q = i4[i];
    out[6 * i + 3] = (long long)q.x + q.y + q.z + q.w;
    out[6 * i + 4] = (unsigned char)c8[i]; out[6 * i + 5] = (unsigned short)s16[i];
    float4 f = __ldg(&v4[i]);
    double2 d = d2[i];
    fout[2 * i] = f.x * 1 + f.y * 2 + f.z * 3 + f.w * 4;
    fout[2 * i + 1] = (float)(d.x - d.y);
}

extern "C" __global__ void spaces(const int* idx, float* out, int n) {
    extern __shared__ float dyn[];
    __shared__ float stat[64];
    float local[16];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    for (int k = 0; k < 16; ++k) local[k] = k * 0.5f + t;
    stat[t] = table[t % 8];
    dyn[t] = (float)counter * (float)scale;
    __syncthreads();
    if (i < n) out[i] = local[idx[i] & 15] + stat[(t + 1) % blockDim.x] + dyn[blockDim.x - 1 - t];
}

extern "C" __global__ void struct_param(Mixed m, double* out) {
    out[0] = m.f; out[1] = m.i; out[2] = m.d; out[3] = m.s; out[4] = m.c;
}

extern "C" __global__ void big_param(Big b, int* out) {
    int t = threadIdx.x;
    int s = 0;
    for (int k = t; k < 1000; k += blockDim.x) s += b.v[k] * (k % 7);
    atomicAdd(out, s);
}

extern "C" __global__ void many_params(int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7, int a8, int a9,
                                       double b0, double b1, float c0, float c1, char d0, short d1,
                                       long long e0, unsigned long long e1, int* out, double* dout) {
    out[0] = a0 + 2 * a1 + 3 * a2 + 4 * a3 + 5 * a4 + 6 * a5 + 7 * a6 + 8 * a7 + 9 * a8 + 10 * a9;
    out[1] = d0; out[2] = d1;
    dout[0] = b0 * b1 + c0 * c1 + (double)e0 + (double)e1;
}

extern "C" __global__ void bump_counter(int* before) {
    int old = atomicAdd(&counter, 1);
    if (threadIdx.x == 0 && blockIdx.x == 0) *before = old;
}

__device__ __noinline__ float sum_shared(const float* p, int k) {   // a generic pointer into shared memory
    float s = 0;
    for (int j = 0; j < k; ++j) s += p[j];
    return s;
}

extern "C" __global__ void generic_shared(float* out) {
    __shared__ float s[128];
    s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = sum_shared(s, threadIdx.x + 1);
}

// Stores of every width and vector shape; volatile and non-coherent loads
extern "C" __global__ void store_widths(const long long* src, char* c8, short* s16, long long* i64, float4* f4,
                                        int2* i2, double2* d2, char4* c4, short4* s4, ushort2* u2, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long v = src[i];
    c8[i] = (char)v; s16[i] = (short)(v >> 8); i64[i] = v * 3;
    f4[i] = make_float4((float)(v & 0xFF), (float)((v >> 8) & 0xFF), -1.5f, (float)i);
    i2[i] = make_int2((int)v, (int)(v >> 32));
    d2[i] = make_double2((double)(int)v, 0.25 * i);
    c4[i] = make_char4((char)v, (char)(v >> 8), (char)(v >> 16), (char)(v >> 24));
    s4[i] = make_short4((short)v, (short)(v >> 16), (short)(v >> 32), (short)(v >> 48));
    u2[i] = make_ushort2((unsigned short)(v >> 3), (unsigned short)(v >> 19));
}

extern "C" __global__ void load_shapes(const char4* c4, const short2* s2, const int2* i2, const longlong2* l2,
                                       const double* __restrict__ d, volatile int* vol, long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    char4 a = c4[i]; short2 b = s2[i]; int2 c = i2[i]; longlong2 e = l2[i];
    long long* o = out + 6 * i;
    o[0] = a.x + 2 * a.y + 3 * a.z + 4 * a.w;
    o[1] = b.x - b.y;
    o[2] = (long long)c.x * 3 - c.y;
    o[3] = e.x ^ e.y;
    o[4] = (long long)(__ldg(&d[i]) * 8.0);
    vol[i] = i * 7;              // volatile store then load
    o[5] = vol[i] + 1;
}

// Shared memory of several element types, vector accesses to shared, dynamic shared
// carved into differently typed pieces
extern "C" __global__ void shared_types(const double* in, double* out, int n) {
    __shared__ double sd[128];
    __shared__ short ss[128];
    __shared__ unsigned char sc[128];
    __shared__ float4 sv[32];
    extern __shared__ char dyn_raw[];
    double* dd = (double*)dyn_raw;                    // blockDim.x doubles
    int* di = (int*)(dd + blockDim.x);                // then blockDim.x ints
    int t = threadIdx.x;
    double v = in[blockIdx.x * blockDim.x + t];
    sd[t] = v; ss[t] = (short)(t * 300); sc[t] = (unsigned char)(t * 3);
    if (t < 32) sv[t] = make_float4(t, t + 0.5f, -t, 2.0f * t);
    dd[t] = v * 2; di[t] = t * t;
    __syncthreads();
    int r = blockDim.x - 1 - t;
    float4 q = sv[t % 32];
    out[blockIdx.x * blockDim.x + t] = sd[r] + ss[r] + sc[r] + q.x + q.y + q.z + q.w + dd[(t + 1) % blockDim.x] + di[r];
}

// Local arrays of several types indexed at run time, and generic pointers to every space
__device__ __noinline__ double sum_generic(const double* p, int k) {
    double s = 0;
    for (int j = 0; j < k; ++j) s += p[j];
    return s;
}
__device__ double gbuf[64] = {1, 2, 3, 4, 5, 6, 7, 8};
extern "C" __global__ void locals_and_generic(const int* idx, double* out, int* spaces, int n) {
    __shared__ double sh[64];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    double loc[24]; char lc[40]; long long ll[8];
    for (int k = 0; k < 24; ++k) loc[k] = k * 1.5 + t;
    for (int k = 0; k < 40; ++k) lc[k] = (char)(k - t);
    for (int k = 0; k < 8; ++k) ll[k] = (long long)k << 40;
    sh[t] = t;
    __syncthreads();
    if (i >= n) return;
    int j = idx[i];
    const double* gp = (j & 1) ? loc : (j & 2) ? sh : gbuf;      // one generic pointer, three spaces
    out[4 * i] = sum_generic(gp, 8);
    out[4 * i + 1] = loc[j % 24] + lc[j % 40] + (double)(ll[j % 8] >> 40);
    out[4 * i + 2] = sum_generic(loc + (j % 16), 8);
    out[4 * i + 3] = sum_generic(sh + (j % 56), 8);
    spaces[3 * i] = __isGlobal(gp) | (__isShared(gp) << 1) | (__isLocal(gp) << 2);
    spaces[3 * i + 1] = (int)__cvta_generic_to_shared(&sh[t]);
    spaces[3 * i + 2] = __isShared(&sh[0]) && !__isGlobal(&sh[0]) && __isGlobal(out) && __isLocal(loc);
}

// Constant memory: arrays indexed by thread, a struct, doubles; device arrays written by the host
struct Coeffs { float a; int b; double c; short d[4]; };
__constant__ Coeffs coeffs = {0.5f, -3, 1e10, {1, -2, 3, -4}};
__constant__ double cdouble[16] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5, 12.5, 13.5, 14.5, 15.5};
__constant__ int host_set[8];
__device__ long long dev_table[8] = {10, 20, 30, 40, 50, 60, 70, 80};
extern "C" __global__ void constants(double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[4 * i] = cdouble[i % 16] + table[i % 8];
    out[4 * i + 1] = coeffs.a * i + coeffs.b + coeffs.c + coeffs.d[i % 4];
    out[4 * i + 2] = host_set[i % 8];
    out[4 * i + 3] = (double)dev_table[i % 8];
}

// Struct parameters of 16, 40 and 48 bytes (mixed fields, a pointer, 16-byte alignment);
// a 16000-byte parameter
struct S16 { float f; int i; short s; char c; unsigned char u; unsigned w; };
struct S40 { double d; float* p; int i; char c; long long q; float f; };
struct __align__(16) S48 { float4 v; double d; int k; float3 w; };
struct Huge { long long v[2000]; };
extern "C" __global__ void struct_params(S16 a, S40 b, S48 c, double* out) {
    out[0] = a.f; out[1] = a.i; out[2] = a.s; out[3] = a.c; out[4] = a.u; out[5] = a.w;
    out[6] = b.d; out[7] = b.i; out[8] = b.c; out[9] = (double)b.q; out[10] = b.f;
    b.p[0] = 99.5f;                                 // the pointer inside the struct is usable
    out[11] = c.v.x + c.v.y * 10 + c.v.z * 100 + c.v.w * 1000; out[12] = c.d; out[13] = c.k;
    out[14] = c.w.x - c.w.y + c.w.z;
}
extern "C" __global__ void huge_param(Huge h, long long* out) {
    long long s = 0;
    for (int k = threadIdx.x; k < 2000; k += blockDim.x) s += h.v[k] * (k + 1);
    atomicAdd((unsigned long long*)out, (unsigned long long)s);
}

// Pointer arithmetic: tables of device pointers, pointer differences and comparisons
extern "C" __global__ void pointer_math(int* const* rows, const int* base, long long* out, int n) {
    int i = threadIdx.x;
    if (i >= n) return;
    const int* r = rows[i];
    out[3 * i] = r - base;                            // element difference
    out[3 * i + 1] = (r > base) + 2 * (r + 1 == rows[i] + 1) + 4 * ((const char*)r - (const char*)base == 4 * (r - base));
    out[3 * i + 2] = r[1] + *(r + 2);
}
