// Atomics under contention from many blocks, on global and shared memory.
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
