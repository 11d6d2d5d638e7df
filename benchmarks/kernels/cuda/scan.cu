// Inclusive prefix sum of n ints in three launches: each block of 256 threads scans 1024
// elements (4 per thread, then a warp-shuffle scan of the thread totals) and writes its
// total; one block scans the block totals; every block then adds the totals before it.
#define SCAN_THREADS 256
#define SCAN_PER_THREAD 4
#define SCAN_BLOCK (SCAN_THREADS * SCAN_PER_THREAD)

// Inclusive scan of v across the block (blockDim.x a multiple of 32, at most 1024).
__device__ int block_inclusive_scan(int v, int* warp_totals) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 1; o < 32; o <<= 1) {
        int u = __shfl_up_sync(0xffffffff, v, o);
        if (lane >= o) v += u;
    }
    if (lane == 31) warp_totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int w = lane < (int)(blockDim.x >> 5) ? warp_totals[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) {
            int u = __shfl_up_sync(0xffffffff, w, o);
            if (lane >= o) w += u;
        }
        warp_totals[lane] = w;
    }
    __syncthreads();
    if (warp > 0) v += warp_totals[warp - 1];
    __syncthreads();                       // warp_totals is reused by the next call
    return v;
}

extern "C" __global__ void scan_blocks(const int* in, int* out, int* block_totals, int n) {
    __shared__ int warp_totals[32];
    int base = blockIdx.x * SCAN_BLOCK + threadIdx.x * SCAN_PER_THREAD;
    int v[SCAN_PER_THREAD];
    int run = 0;
    for (int k = 0; k < SCAN_PER_THREAD; ++k) {
        run += base + k < n ? in[base + k] : 0;
        v[k] = run;
    }
    int incl = block_inclusive_scan(run, warp_totals);
    int before = incl - run;
    for (int k = 0; k < SCAN_PER_THREAD; ++k)
        if (base + k < n) out[base + k] = v[k] + before;
    if (threadIdx.x == blockDim.x - 1) block_totals[blockIdx.x] = incl;
}

// One block: inclusive scan of the m block totals in place, in chunks of blockDim.x.
extern "C" __global__ void scan_totals(int* totals, int m) {
    __shared__ int warp_totals[32];
    __shared__ int carry;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    for (int start = 0; start < m; start += blockDim.x) {
        int i = start + threadIdx.x;
        int v = i < m ? totals[i] : 0;
        int incl = block_inclusive_scan(v, warp_totals) + carry;
        if (i < m) totals[i] = incl;
        __syncthreads();
        if (threadIdx.x == blockDim.x - 1) carry = incl;
        __syncthreads();
    }
}

extern "C" __global__ void scan_add(int* out, const int* totals, int n) {
    if (blockIdx.x == 0) return;
    int add = totals[blockIdx.x - 1];
    int base = blockIdx.x * SCAN_BLOCK;
    for (int k = threadIdx.x; k < SCAN_BLOCK; k += blockDim.x)
        if (base + k < n) out[base + k] += add;
}
