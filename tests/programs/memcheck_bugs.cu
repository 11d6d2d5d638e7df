// Memory bugs for anycuda's memcheck, one per case named on the command line. Each
// faulting statement carries a marker comment (BUG:<case>) so that the test can find its line.
// The program prints what the CUDA runtime answered and exits 0: the exit status is the
// sanitizer's to set (--error-exitcode).
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void scale(float *out, const float *in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}

__global__ void write_past_end(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = i;  // BUG:global_write
    (void)n;
}

__global__ void read_before_start(int *out, const int *in) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i - 3];  // BUG:global_read
}

__global__ void shared_overflow(int *out, int limit) {
    __shared__ int tile[32];
    int t = threadIdx.x;
    if (t < limit) tile[t] = t;  // BUG:shared
    __syncthreads();
    out[t] = tile[t % 32];
}

__global__ void local_overflow(int *out, int index) {
    int scratch[8];
    for (int k = 0; k < 8; ++k) scratch[k] = out[k] + k;
    scratch[index] = 7;  // BUG:local
    out[threadIdx.x] = scratch[threadIdx.x % 8];
}

__global__ void misaligned_store(char *bytes) {
    *(int *)(bytes + 2) = 42;  // BUG:misaligned
}

static int report(const char *what) {
    cudaError_t e = cudaDeviceSynchronize();
    printf("%s: %s\n", what, cudaGetErrorName(e));
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "clean";
    if (!strcmp(mode, "clean")) {
        const int n = 1000;
        float host[n], back[n];
        for (int i = 0; i < n; ++i) host[i] = (float)i * 0.5f;
        float *in, *out;
        cudaMalloc(&in, n * sizeof(float));
        cudaMalloc(&out, n * sizeof(float));
        cudaMemcpy(in, host, sizeof host, cudaMemcpyHostToDevice);
        scale<<<(n + 127) / 128, 128>>>(out, in, n);
        cudaMemcpy(back, out, sizeof back, cudaMemcpyDeviceToHost);
        double sum = 0;
        for (int i = 0; i < n; ++i) sum += back[i];
        printf("clean: sum %.1f\n", sum);
        cudaFree(in);
        cudaFree(out);
        return report("clean");
    }
    if (!strcmp(mode, "global_write")) {
        int *out;
        cudaMalloc(&out, 100 * sizeof(int));
        write_past_end<<<1, 128>>>(out, 100);
        report(mode);
        cudaFree(out);
        return 0;
    }
    if (!strcmp(mode, "global_read")) {
        int *in, *out;
        cudaMalloc(&in, 64 * sizeof(int));
        cudaMalloc(&out, 64 * sizeof(int));
        read_before_start<<<2, 32>>>(out, in);
        report(mode);
        return 0;   // leaks both: the leak check finds them
    }
    if (!strcmp(mode, "shared")) {
        int *out;
        cudaMalloc(&out, 64 * sizeof(int));
        shared_overflow<<<1, 64>>>(out, 40);
        report(mode);
        cudaFree(out);
        return 0;
    }
    if (!strcmp(mode, "local")) {
        int *out;
        cudaMalloc(&out, 32 * sizeof(int));
        local_overflow<<<1, 32>>>(out, 5000);
        report(mode);
        cudaFree(out);
        return 0;
    }
    if (!strcmp(mode, "misaligned")) {
        char *bytes;
        cudaMalloc(&bytes, 64);
        misaligned_store<<<1, 1>>>(bytes);
        report(mode);
        cudaFree(bytes);
        return 0;
    }
    if (!strcmp(mode, "bad_free")) {
        int *p;
        cudaMalloc(&p, 256);
        cudaError_t e = cudaFree(p + 4);
        printf("bad_free: %s\n", cudaGetErrorName(e));
        cudaFree(p);
        return 0;
    }
    fprintf(stderr, "unknown case %s\n", mode);
    return 2;
}
