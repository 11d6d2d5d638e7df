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

// Barriers inside branches that are uniform per block (the branch depends on blockIdx and a
// kernel argument only); the two sides hold different numbers of barriers.
extern "C" __global__ void uniform_branch_barriers(const int* in, int* out, int mode) {
    extern __shared__ int sb[];
    int t = threadIdx.x, n = blockDim.x, base = blockIdx.x * n;
    int v = in[base + t];
    if (((blockIdx.x + mode) & 1) == 0) {
        sb[t] = v;
        __syncthreads();
        v = sb[n - 1 - t];            // reverse
        __syncthreads();
    } else {
        for (int r = 0; r < 3; ++r) { // rotate by one, three times
            sb[t] = v;
            __syncthreads();
            v = sb[(t + 1) % n];
            __syncthreads();
        }
    }
    if (mode > 1) {                   // uniform over the whole grid
        sb[t] = v;
        __syncthreads();
        v += sb[0];
    }
    out[base + t] = v;
}

// Four barriers per iteration, three shared arrays, trip count from an argument.
extern "C" __global__ void multi_barrier_loop(const int* in, int* out, int iters) {
    __shared__ int a[256], b[256], c[256];
    int t = threadIdx.x, n = blockDim.x;
    int v = in[blockIdx.x * n + t];
    for (int k = 0; k < iters; ++k) {
        a[t] = v;
        __syncthreads();
        b[t] = 2 * a[n - 1 - t] + k;
        __syncthreads();
        c[t] = b[(t + 3) % n] - a[t];
        __syncthreads();
        v = c[t] ^ b[t];
        __syncthreads();
    }
    out[blockIdx.x * n + t] = v;
}

// A data-dependent uniform loop: iterate until no thread changed anything (shared flag).
// Every thread halves its value towards the block minimum until all agree.
extern "C" __global__ void converge_loop(const int* in, int* out, int* rounds) {
    __shared__ int vals[512];
    __shared__ int changed;
    int t = threadIdx.x, n = blockDim.x;
    vals[t] = in[blockIdx.x * n + t];
    int r = 0;
    __syncthreads();
    while (true) {
        if (t == 0) changed = 0;
        __syncthreads();
        int left = vals[(t + n - 1) % n];
        int mine = vals[t];
        __syncthreads();
        if (left < mine) { vals[t] = left; changed = 1; }
        __syncthreads();
        if (!changed) break;
        ++r;
        __syncthreads();
    }
    out[blockIdx.x * n + t] = vals[t];
    if (t == 0) rounds[blockIdx.x] = r;
}

// Every thread takes part in the first phase, then the upper half exits and the lower half
// goes on through further barriers (exited threads must not hold them up).
extern "C" __global__ void exit_between_barriers(const int* in, int* out, int keep) {
    __shared__ int s[1024];
    int t = threadIdx.x, n = blockDim.x;
    s[t] = in[blockIdx.x * n + t];
    __syncthreads();
    int mirrored = s[n - 1 - t];
    if (t >= keep) return;
    __syncthreads();
    s[t] = mirrored;                  // only the first `keep` slots are rewritten
    __syncthreads();
    int sum = 0;
    for (int k = 0; k < keep; ++k) sum += s[k];
    __syncthreads();
    out[blockIdx.x * n + t] = sum + t;
}

// 3-D blocks and 3-D grids: a barrier-separated neighbour exchange on the linear thread id.
extern "C" __global__ void barriers_3d(const int* in, int* out, int iters) {
    extern __shared__ int sh[];
    int n = blockDim.x * blockDim.y * blockDim.z;
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int v = in[b * n + t];
    for (int k = 0; k < iters; ++k) {
        sh[t] = v;
        __syncthreads();
        v = sh[(t + 1) % n] * 3 + sh[(t + n - 1) % n];
        __syncthreads();
    }
    out[b * n + t] = v;
}

// Named barriers (bar.sync id, count): warps 0-1 and warps 2-3 of a 128-thread block each
// synchronise among themselves only, running different numbers of rounds.
extern "C" __global__ void named_barriers(const int* in, int* out, int rounds_lo, int rounds_hi) {
    __shared__ int s[128];
    int t = threadIdx.x;
    int group = t / 64, g = t % 64;
    int* mine = s + group * 64;
    int v = in[blockIdx.x * 128 + t];
    int rounds = group ? rounds_hi : rounds_lo;
    for (int r = 0; r < rounds; ++r) {
        mine[g] = v;
        if (group == 0) asm volatile("bar.sync 1, 64;" ::: "memory");
        else asm volatile("bar.sync 2, 64;" ::: "memory");
        v = mine[(g + 1) % 64] + r;
        if (group == 0) asm volatile("bar.sync 1, 64;" ::: "memory");
        else asm volatile("bar.sync 2, 64;" ::: "memory");
    }
    // Barrier 0 for the whole block: only now may one group read the other's results
    // (a barrier that ignored its id would let group 0 through while group 1 still loops).
    s[t] = v;
    __syncthreads();
    out[blockIdx.x * 128 + t] = v + 7 * s[(t + 64) % 128];
}

// The same with the barrier id in a register.
extern "C" __global__ void named_barriers_reg(const int* in, int* out, int rounds_lo, int rounds_hi) {
    __shared__ int s[128];
    int t = threadIdx.x;
    int group = t / 64, g = t % 64;
    int* mine = s + group * 64;
    int v = in[blockIdx.x * 128 + t];
    int id = 1 + group, rounds = group ? rounds_hi : rounds_lo;
    for (int r = 0; r < rounds; ++r) {
        mine[g] = v;
        asm volatile("bar.sync %0, 64;" :: "r"(id) : "memory");
        v = mine[(g + 63) % 64] * 2 - r;
        asm volatile("bar.sync %0, 64;" :: "r"(id) : "memory");
    }
    s[t] = v;
    __syncthreads();
    out[blockIdx.x * 128 + t] = v - s[(t + 64) % 128];
}

// clock64() and clock() read per thread across a loop with barriers: never decreasing.
extern "C" __global__ void clocks(long long* c64, unsigned* c32, float* sink, int iters) {
    __shared__ float acc[256];
    int t = threadIdx.x, n = blockDim.x;
    int g = blockIdx.x * n + t;
    float x = t;
    acc[t] = 0;
    for (int k = 0; k < iters; ++k) {
        c64[g * iters + k] = clock64();
        c32[g * iters + k] = clock();
        for (int j = 0; j < 200; ++j) x = x * 1.0001f + 0.5f;
        acc[t] += x;
        __syncthreads();
    }
    sink[g] = acc[t];
}

// A block reduction in a device function that is not inlined, called in a loop: the
// barriers and shuffles sit inside a call.
__device__ __noinline__ float block_sum_fn(float v, float* warp_sums) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();                  // earlier readers of warp_sums are done
    if (lane == 0) warp_sums[w] = v;
    __syncthreads();
    float s = 0;
    for (int k = 0; k < nw; ++k) s += warp_sums[k];
    return s;
}

extern "C" __global__ void reduce_in_function(const float* in, float* out, int rounds) {
    __shared__ float ws[32];
    int t = threadIdx.x, n = blockDim.x;
    float v = in[blockIdx.x * n + t];
    for (int r = 0; r < rounds; ++r) {
        float s = block_sum_fn(v, ws);
        v = v * 0.5f + s / n;         // every thread needs the block total each round
    }
    out[blockIdx.x * n + t] = v;
}

// Odd threads exit at once: every warp is left half-populated, the even threads reduce.
extern "C" __global__ void odd_exit_reduce(const int* in, int* out) {
    __shared__ int s[1024];
    int t = threadIdx.x, n = blockDim.x;
    if (t & 1) return;
    s[t / 2] = in[blockIdx.x * n + t];
    int m = (n + 1) / 2;
    for (int stride = 1; stride < m; stride *= 2) {
        __syncthreads();
        int i = t / 2;
        int add = (i % (2 * stride) == 0 && i + stride < m) ? s[i + stride] : 0;
        __syncthreads();
        s[i] += add;
    }
    __syncthreads();
    if (t == 0) out[blockIdx.x] = s[0];
}
