// Block barriers: in loops, after early exits, with reductions of predicates.
extern "C" __global__ void loop_barriers(const int* in, int* out, int iters) {
    extern __shared__ int buf[];
    int t = threadIdx.x, n = blockDim.x;
    int v = in[blockIdx.x * n + t];
    for (int k = 0; k < iters; ++k) {
        buf[t] = v;
        __syncthreads();
        v = buf[(t + 1) % n] + (k & 1 ? buf[(t + n - 1) % n] : 0);
        __syncthreads();
    }
    out[blockIdx.x * n + t] = v;
}

// Threads past `active` return at once; the others still meet at __syncthreads.
extern "C" __global__ void early_exit_reduce(const float* in, float* out, int active) {
    __shared__ float s[1024];
    int t = threadIdx.x;
    if (t >= active) return;
    s[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int stride = 1; stride < active; stride *= 2) {
        float add = (t % (2 * stride) == 0 && t + stride < active) ? s[t + stride] : 0.0f;
        __syncthreads();
        s[t] += add;
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

extern "C" __global__ void sync_reductions(const int* flags, int* out) {
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int nthreads = blockDim.x * blockDim.y * blockDim.z;
    int b = blockIdx.x;
    int f = flags[b * nthreads + t];
    int c = __syncthreads_count(f);
    int a = __syncthreads_and(f);
    int o = __syncthreads_or(f);
    out[3 * (b * nthreads + t)] = c; out[3 * (b * nthreads + t) + 1] = a; out[3 * (b * nthreads + t) + 2] = o;
}

// Divergent inner loops between two barriers in every iteration.
extern "C" __global__ void divergent_between_barriers(int* out, int rounds) {
    __shared__ int total;
    int t = threadIdx.x;
    if (t == 0) total = 0;
    __syncthreads();
    for (int r = 0; r < rounds; ++r) {
        int acc = 0;
        for (int j = 0; j < (t * 7 + r) % 13; ++j) acc += j;
        atomicAdd(&total, acc);
        __syncthreads();
        if (t == 0) out[blockIdx.x * rounds + r] = total;
        __syncthreads();
    }
}
