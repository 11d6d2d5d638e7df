// Sorting idioms (benchmarks/idioms_sort.py): a bitonic sort that does most of its steps in
// shared memory, and an LSD radix sort of uint32 keys in three kernels a pass.
// cub's block-wide headers one by one: <cub/cub.cuh> refuses NVRTC (CCCL 13), which is what
// anycuda compiles with when both it and nvcc are installed.
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

// ------------------------------------------------------------------ bitonic, shared memory

// Elements a block sorts or merges in shared memory, two a thread: launched with
// BITONIC_CHUNK / 2 threads. n is a power of two, at least BITONIC_CHUNK.
#define BITONIC_CHUNK 1024

// The compare-exchange of the pair (i, i + j), i < i + j, both indices into the whole array:
// the direction of a pair depends on its global position, so every kernel below agrees with
// the one-launch-a-step network (bitonic.cu) step for step.
__device__ __forceinline__ void bitonic_exchange(float& a, float& b, unsigned global_i, unsigned k) {
    bool ascending = (global_i & k) == 0;
    if ((a > b) == ascending) {
        float t = a;
        a = b;
        b = t;
    }
}

// Thread p's pair for step j: the p-th index with bit j clear, and its partner.
__device__ __forceinline__ unsigned bitonic_low(unsigned p, unsigned j) {
    return 2 * p - (p & (j - 1));
}

// A block's chunk between global and shared memory, two elements a thread.
__device__ __forceinline__ void load_chunk(float* s, const float* data, unsigned base) {
    s[threadIdx.x] = data[base + threadIdx.x];
    s[threadIdx.x + BITONIC_CHUNK / 2] = data[base + threadIdx.x + BITONIC_CHUNK / 2];
}

__device__ __forceinline__ void store_chunk(const float* s, float* data, unsigned base) {
    __syncthreads();
    data[base + threadIdx.x] = s[threadIdx.x];
    data[base + threadIdx.x + BITONIC_CHUNK / 2] = s[threadIdx.x + BITONIC_CHUNK / 2];
}

// The steps j = j_top, j_top / 2, ..., 1 of one k on the chunk in shared memory.
__device__ __forceinline__ void merge_in_shared(float* s, unsigned base, unsigned k, unsigned j_top) {
    for (unsigned j = j_top; j > 0; j >>= 1) {
        __syncthreads();
        unsigned i = bitonic_low(threadIdx.x, j);
        bitonic_exchange(s[i], s[i + j], base + i, k);
    }
}

// Every step with k <= BITONIC_CHUNK, on one chunk a block: these never cross a chunk, so
// the whole first part of the network runs out of shared memory with one launch.
extern "C" __global__ void bitonic_sort_shared(float* data) {
    __shared__ float s[BITONIC_CHUNK];
    unsigned base = blockIdx.x * BITONIC_CHUNK;
    load_chunk(s, data, base);
    for (unsigned k = 2; k <= BITONIC_CHUNK; k <<= 1)
        merge_in_shared(s, base, k, k >> 1);
    store_chunk(s, data, base);
}

// One step (k, j) with j >= BITONIC_CHUNK, whose pairs span chunks: one thread a pair, n / 2
// threads, one launch a step.
extern "C" __global__ void bitonic_merge_global(float* data, unsigned j, unsigned k) {
    unsigned p = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned i = bitonic_low(p, j);
    float a = data[i], b = data[i + j];
    if ((a > b) == ((i & k) == 0)) {        // only a swapped pair is written back
        data[i] = b;
        data[i + j] = a;
    }
}

// The steps j < BITONIC_CHUNK of one k > BITONIC_CHUNK: after the global steps each chunk
// holds a bitonic sequence on its own, so one launch finishes this k in shared memory.
extern "C" __global__ void bitonic_merge_shared(float* data, unsigned k) {
    __shared__ float s[BITONIC_CHUNK];
    unsigned base = blockIdx.x * BITONIC_CHUNK;
    load_chunk(s, data, base);
    merge_in_shared(s, base, k, BITONIC_CHUNK / 2);
    store_chunk(s, data, base);
}

// ------------------------------------------------------------------ LSD radix sort

// 8-bit digits, four passes; a tile of RADIX_THREADS x RADIX_ITEMS keys a block. The
// histogram and scatter kernels are launched with RADIX_THREADS threads and one block a
// tile, the same grid, so counts[digit * gridDim.x + blockIdx.x] means the same tile in both.
#define RADIX_BITS 8
#define RADIX_DIGITS (1 << RADIX_BITS)
#define RADIX_THREADS 256
#define RADIX_ITEMS 8
#define RADIX_TILE (RADIX_THREADS * RADIX_ITEMS)
#define RADIX_SCAN_THREADS 1024

static_assert(RADIX_THREADS == RADIX_DIGITS, "the scatter kernel gives each thread one digit");

__device__ __forceinline__ unsigned radix_digit(unsigned key, int shift) {
    return (key >> shift) & (RADIX_DIGITS - 1);
}

// Digit counts of one tile, digit-major so that one exclusive scan of the whole array gives
// every (digit, tile) its first output position: all 0s of every tile, then all 1s, ...
extern "C" __global__ void radix_histogram(const unsigned* keys, unsigned* counts, int n, int shift) {
    __shared__ unsigned bins[RADIX_DIGITS];
    for (int d = threadIdx.x; d < RADIX_DIGITS; d += blockDim.x)
        bins[d] = 0;
    __syncthreads();
    int base = blockIdx.x * RADIX_TILE;
    int end = min(base + RADIX_TILE, n);
    for (int i = base + threadIdx.x; i < end; i += blockDim.x)
        atomicAdd(&bins[radix_digit(keys[i], shift)], 1u);
    __syncthreads();
    for (int d = threadIdx.x; d < RADIX_DIGITS; d += blockDim.x)
        counts[d * gridDim.x + blockIdx.x] = bins[d];
}

// Exclusive prefix sum of m counts in place, one block of RADIX_SCAN_THREADS: each thread
// sums a contiguous run, one block scan of the run totals, then each thread rewrites its
// run from its run's offset (a raking scan: the counts are a few hundred thousand at most).
extern "C" __global__ void radix_scan(unsigned* counts, int m) {
    typedef cub::BlockScan<unsigned, RADIX_SCAN_THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    int per = (m + RADIX_SCAN_THREADS - 1) / RADIX_SCAN_THREADS;
    int lo = min((int)threadIdx.x * per, m), hi = min(lo + per, m);
    unsigned sum = 0;
    for (int i = lo; i < hi; ++i)
        sum += counts[i];
    unsigned offset;
    Scan(tmp).ExclusiveSum(sum, offset);
    for (int i = lo; i < hi; ++i) {
        unsigned c = counts[i];
        counts[i] = offset;
        offset += c;
    }
}

// Each tile's keys to their places for this digit. The tile is sorted by the digit alone
// with cub's block radix sort, which is stable, so a key's position r in the sorted tile
// minus the first position of its digit in the tile is its rank among the tile's keys of
// that digit, in input order: what makes the pass stable, and LSD correct.
extern "C" __global__ void radix_scatter(const unsigned* in, unsigned* out, const unsigned* offsets,
                                         int n, int shift) {
    typedef cub::BlockRadixSort<unsigned, RADIX_THREADS, RADIX_ITEMS> Sort;
    typedef cub::BlockScan<unsigned, RADIX_THREADS> DigitScan;
    __shared__ union {
        typename Sort::TempStorage sort;
        typename DigitScan::TempStorage scan;
    } tmp;
    __shared__ unsigned bins[RADIX_DIGITS];
    __shared__ unsigned dest[RADIX_DIGITS];

    int base = blockIdx.x * RADIX_TILE;
    int valid = min(RADIX_TILE, n - base);
    unsigned keys[RADIX_ITEMS];
    // Blocked (thread t holds keys t*ITEMS ...): the order the block sort keeps among equal
    // digits. The padding of a partial tile has the largest digit and comes last, so after
    // the (stable) sort it is still past every real key: positions >= valid, never written.
    cub::LoadDirectBlocked(threadIdx.x, in + base, keys, valid, 0xFFFFFFFFu);

    bins[threadIdx.x] = 0;
    __syncthreads();
    for (int i = 0; i < RADIX_ITEMS; ++i)
        if ((int)threadIdx.x * RADIX_ITEMS + i < valid)
            atomicAdd(&bins[radix_digit(keys[i], shift)], 1u);
    __syncthreads();
    unsigned first;
    DigitScan(tmp.scan).ExclusiveSum(bins[threadIdx.x], first);
    // the key at sorted position r goes to dest[digit] + r; unsigned wrap-around is exact
    dest[threadIdx.x] = offsets[threadIdx.x * gridDim.x + blockIdx.x] - first;
    __syncthreads();                // tmp.scan is done before the sort reuses the storage

    Sort(tmp.sort).SortBlockedToStriped(keys, shift, shift + RADIX_BITS);
    for (int i = 0; i < RADIX_ITEMS; ++i) {
        int r = i * RADIX_THREADS + threadIdx.x;       // striped: consecutive threads, consecutive r
        if (r < valid)
            out[dest[radix_digit(keys[i], shift)] + r] = keys[i];
    }
}
