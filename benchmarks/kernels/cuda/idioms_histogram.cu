// 256-bin histograms of bytes, grid-stride loops over a fixed grid of 256-thread blocks, and
// one thread an element (histogram.cu is the suite's: shared bins for any block size, empty
// bins not merged).

// One atomicAdd per element on the global bins.
extern "C" __global__ void histogram_global_atomics(const unsigned char* data, unsigned int* bins, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&bins[data[i]], 1u);
}

// Per-block bins in shared memory, one bin per thread (blockDim.x == 256): zeroed, counted
// with shared atomics, then each thread adds its bin to the global one.
extern "C" __global__ void histogram_shared_atomics(const unsigned char* data, unsigned int* bins, int n) {
    __shared__ unsigned int h[256];
    h[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&h[data[i]], 1u);
    __syncthreads();
    atomicAdd(&bins[threadIdx.x], h[threadIdx.x]);
}

// One thread an element, one atomicAdd each on the global bins: the grid covers the data.
extern "C" __global__ void histogram_global_thread(const unsigned char* data, unsigned int* bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[data[i]], 1u);
}
