// Inclusive prefix sums of ints as the textbooks write them (GPU Gems 3, ch. 39), one
// element per thread or two: each block scans its part in shared memory and writes its
// total; the host scans the totals with the same kernel (again, while there are more than
// one block's worth), then adds each block's scanned predecessor total to its part.

// Hillis and Steele: log2(512) steps over a double buffer, every thread adding at each step.
#define HS_THREADS 512
extern "C" __global__ void scan_hillis_steele(const int* in, int* out, int* totals, int n) {
    __shared__ int buf[2][HS_THREADS];
    int t = threadIdx.x, i = blockIdx.x * HS_THREADS + t;
    int from = 0;
    buf[0][t] = i < n ? in[i] : 0;
    __syncthreads();
    for (int offset = 1; offset < HS_THREADS; offset <<= 1) {
        int to = 1 - from;
        buf[to][t] = t >= offset ? buf[from][t] + buf[from][t - offset] : buf[from][t];
        __syncthreads();
        from = to;
    }
    if (i < n) out[i] = buf[from][t];
    if (t == HS_THREADS - 1) totals[blockIdx.x] = buf[from][t];
}

// Blelloch's work-efficient scan: an up-sweep builds partial sums in place, a down-sweep
// turns them into the exclusive scan; each thread holds two elements and adds its own back.
#define BL_THREADS 256
#define BL_ELEMENTS (2 * BL_THREADS)
extern "C" __global__ void scan_blelloch(const int* in, int* out, int* totals, int n) {
    __shared__ int temp[BL_ELEMENTS];
    int t = threadIdx.x, a = blockIdx.x * BL_ELEMENTS + 2 * t, b = a + 1;
    int va = a < n ? in[a] : 0, vb = b < n ? in[b] : 0;
    temp[2 * t] = va;
    temp[2 * t + 1] = vb;
    int offset = 1;
    for (int d = BL_THREADS; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d) temp[offset * (2 * t + 2) - 1] += temp[offset * (2 * t + 1) - 1];
        offset <<= 1;
    }
    if (t == 0) {
        totals[blockIdx.x] = temp[BL_ELEMENTS - 1];
        temp[BL_ELEMENTS - 1] = 0;
    }
    for (int d = 1; d < BL_ELEMENTS; d <<= 1) {
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            int v = temp[ai];
            temp[ai] = temp[bi];
            temp[bi] += v;
        }
    }
    __syncthreads();
    if (a < n) out[a] = temp[2 * t] + va;
    if (b < n) out[b] = temp[2 * t + 1] + vb;
}

// Block b > 0 of `per_block` elements adds the scanned total of the blocks before it.
extern "C" __global__ void scan_add_totals(int* out, const int* scanned_totals, int n, int per_block) {
    int b = blockIdx.x;
    if (b == 0) return;
    int add = scanned_totals[b - 1], end = min(n, (b + 1) * per_block);
    for (int i = b * per_block + threadIdx.x; i < end; i += blockDim.x) out[i] += add;
}
