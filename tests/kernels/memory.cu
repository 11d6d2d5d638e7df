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
