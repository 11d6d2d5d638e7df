// y = A x for A in CSR (row pointers, column indices, float values), n rows.

// Scalar: one thread per row.
extern "C" __global__ void spmv_csr_scalar(int n, const int* rowptr, const int* cols, const float* vals,
                                           const float* x, float* y) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n) {
        float sum = 0.0f;
        for (int j = rowptr[row]; j < rowptr[row + 1]; ++j) sum += vals[j] * x[cols[j]];
        y[row] = sum;
    }
}

// Vector: one warp per row; the lanes stride over the row's nonzeros, a shuffle tree sums
// their partial sums and lane 0 writes.
extern "C" __global__ void spmv_csr_vector(int n, const int* rowptr, const int* cols, const float* vals,
                                           const float* x, float* y) {
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (row < n) {
        float sum = 0.0f;
        for (int j = rowptr[row] + lane; j < rowptr[row + 1]; j += 32) sum += vals[j] * x[cols[j]];
        for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffff, sum, offset);
        if (lane == 0) y[row] = sum;
    }
}
