// 256-bin histogram of bytes: a private histogram per block in shared memory (atomics),
// merged into the global one with one atomicAdd per non-empty bin.
extern "C" __global__ void histogram256(const unsigned char* data, unsigned int* bins, int n) {
    __shared__ unsigned int h[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) h[i] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&h[data[i]], 1u);
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        if (h[i]) atomicAdd(&bins[i], h[i]);
}
