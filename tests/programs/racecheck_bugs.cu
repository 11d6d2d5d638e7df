// Shared- and global-memory races of our own, for anycuda's racecheck: `racecheck_bugs CASE`.
// Each racy line is marked BUG:<case>:<what>; the tests read the line numbers from here.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define N 256

// a tree reduction whose first step reads its neighbours' loads without waiting for them
__global__ void reduce_no_first_barrier(const float *in, float *out) {
    __shared__ float s[N];
    unsigned t = threadIdx.x;
    s[t] = in[t];                                            // BUG:raw:write
    for (unsigned stride = N / 2; stride > 0; stride /= 2) {
        if (t < stride)
            s[t] += s[t + stride];                           // BUG:raw:read
        __syncthreads();
    }
    if (t == 0)
        *out = s[0];
}

// the same reduction, correct
__global__ void reduce(const float *in, float *out) {
    __shared__ float s[N];
    unsigned t = threadIdx.x;
    s[t] = in[t];
    __syncthreads();
    for (unsigned stride = N / 2; stride > 0; stride /= 2) {
        if (t < stride)
            s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0)
        *out = s[0];
}

// an inclusive scan step that reads the left neighbour while it is being written
__global__ void scan_step_no_barrier(const int *in, int *out) {
    __shared__ int s[N];
    unsigned t = threadIdx.x;
    s[t] = in[t];
    __syncthreads();
    int left = t > 0 ? s[t - 1] : 0;                         // BUG:scan:read
    s[t] += left;                                            // BUG:scan:write
    out[t] = s[t];
}

// the same step in global memory: each thread adds its left neighbour's element of `out`,
// which that neighbour may not have finished writing
__global__ void scan_global_no_barrier(const int *in, int *out) {
    unsigned t = threadIdx.x;
    out[t] = in[t];
    int left = t > 0 ? out[t - 1] : 0;                       // BUG:gscan:read
    out[t] += left;                                          // BUG:gscan:write
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "clean";
    float hin[N], *din, *dout, sum = 0;
    int iin[N], *diin, *diout;
    for (int i = 0; i < N; i++) { hin[i] = (float)(i % 7); iin[i] = i % 5; }
    cudaMalloc(&din, sizeof hin); cudaMalloc(&dout, sizeof(float));
    cudaMalloc(&diin, sizeof iin); cudaMalloc(&diout, sizeof iin);
    cudaMemcpy(din, hin, sizeof hin, cudaMemcpyHostToDevice);
    cudaMemcpy(diin, iin, sizeof iin, cudaMemcpyHostToDevice);
    if (!strcmp(which, "raw"))
        reduce_no_first_barrier<<<1, N>>>(din, dout);
    else if (!strcmp(which, "scan"))
        scan_step_no_barrier<<<1, N>>>(diin, diout);
    else if (!strcmp(which, "gscan"))
        scan_global_no_barrier<<<1, N>>>(diin, diout);
    else
        reduce<<<2, N>>>(din, dout);
    cudaError_t e = cudaDeviceSynchronize();
    cudaMemcpy(&sum, dout, sizeof sum, cudaMemcpyDeviceToHost);
    printf("%s: %s sum %.1f\n", which, cudaGetErrorName(e), sum);
    cudaFree(din); cudaFree(dout); cudaFree(diin); cudaFree(diout);
    return 0;
}
