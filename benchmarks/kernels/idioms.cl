// OpenCL versions of idioms.py's kernels where they are simple (PoCL's column): the
// streaming operations in float and double, one work-item per element behind a guard or a
// grid-stride loop over a fixed NDRange; CSR products a row per work-item and a row per 32
// work-items (a tree in local memory for the row's partial sums: OpenCL 1.2 has no
// sub-group shuffles); gather and scatter through a permutation.
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#define GUARDED(NAME, T, BODY)                                                             \
    __kernel void NAME##_guard(long n, T a, __global const T* x, __global T* y, __global T* z) { \
        long i = get_global_id(0);                                                        \
        if (i < n) BODY;                                                                  \
    }
#define GRID_STRIDE(NAME, T, BODY)                                                         \
    __kernel void NAME##_stride(long n, T a, __global const T* x, __global T* y, __global T* z) { \
        for (long i = get_global_id(0); i < n; i += get_global_size(0)) BODY;             \
    }
#define BOTH(NAME, T, BODY) GUARDED(NAME, T, BODY) GRID_STRIDE(NAME, T, BODY)

BOTH(copy_f32, float, z[i] = x[i])
BOTH(copy_f64, double, z[i] = x[i])
BOTH(scale_f32, float, z[i] = a * x[i])
BOTH(scale_f64, double, z[i] = a * x[i])
BOTH(saxpy_f32, float, y[i] = a * x[i] + y[i])
BOTH(saxpy_f64, double, y[i] = a * x[i] + y[i])
BOTH(triad_f32, float, z[i] = x[i] + a * y[i])
BOTH(triad_f64, double, z[i] = x[i] + a * y[i])

__kernel void spmv_csr_scalar(int n, __global const int* rowptr, __global const int* cols,
                              __global const float* vals, __global const float* x, __global float* y) {
    int row = get_global_id(0);
    if (row < n) {
        float sum = 0.0f;
        for (int j = rowptr[row]; j < rowptr[row + 1]; ++j) sum += vals[j] * x[cols[j]];
        y[row] = sum;
    }
}

// 32 work-items a row; work-groups of 256 (8 rows), `partial` 256 floats of local memory.
__kernel void spmv_csr_vector(int n, __global const int* rowptr, __global const int* cols,
                              __global const float* vals, __global const float* x, __global float* y,
                              __local float* partial) {
    int row = get_global_id(0) / 32, lane = get_local_id(0) % 32, t = get_local_id(0);
    float sum = 0.0f;
    if (row < n)
        for (int j = rowptr[row] + lane; j < rowptr[row + 1]; j += 32) sum += vals[j] * x[cols[j]];
    partial[t] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int offset = 16; offset > 0; offset /= 2) {
        if (lane < offset) partial[t] += partial[t + offset];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lane == 0 && row < n) y[row] = partial[t];
}

__kernel void gather(int n, __global const int* idx, __global const float* x, __global float* out) {
    int i = get_global_id(0);
    if (i < n) out[i] = x[idx[i]];
}

__kernel void scatter(int n, __global const int* idx, __global const float* x, __global float* out) {
    int i = get_global_id(0);
    if (i < n) out[idx[i]] = x[i];
}

__kernel void embedding_flat(__global float* out, __global const int* tokens, __global const float* wte,
                             __global const float* wpe, int B, int T, int C) {
    int i = get_global_id(0);
    if (i >= B * T * C) return;
    int bt = i / C, c = i % C, t = bt % T;
    out[i] = wte[tokens[bt] * C + c] + wpe[t * C + c];
}

__kernel void embedding_rows(__global float* out, __global const int* tokens, __global const float* wte,
                             __global const float* wpe, int B, int T, int C) {
    int bt = get_group_id(1), t = bt % T;
    __global const float* e = wte + (size_t)tokens[bt] * C;
    __global const float* w = wpe + (size_t)t * C;
    __global float* o = out + (size_t)bt * C;
    for (int c = get_local_id(0); c < C; c += get_local_size(0)) o[c] = e[c] + w[c];
}
