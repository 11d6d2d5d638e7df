// Transposes: out (cols x rows) = transpose of in (rows x cols), one element per thread.

// Naive: reads along rows, writes with a stride of `rows`; any 2-D block shape.
extern "C" __global__ void transpose_naive(const float* in, float* out, int rows, int cols) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows) out[x * rows + y] = in[y * cols + x];
}

// Through a padded 32 x 32 shared tile, blocks of 32 x 32 threads.
extern "C" __global__ void transpose_tiled32(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    if (x < cols && y < rows) tile[threadIdx.y][threadIdx.x] = in[y * cols + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    if (x < rows && y < cols) out[y * rows + x] = tile[threadIdx.x][threadIdx.y];
}
