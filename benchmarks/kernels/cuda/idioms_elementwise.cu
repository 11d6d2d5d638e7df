// Elementwise kernels as Python GPU stacks and LLM training code write them: llm.c's GELU (tanh
// approximation) with a thread an element and as a grid-stride loop (the suite also builds the
// loop with -use_fast_math, as llm.c's Makefile does), and a broadcast of a column by a row,
// x[i / C] * y[i % C], the index arithmetic of CuPy's elementwise kernels.
#define GELU_SCALE 0.7978845608028654f      // sqrt(2 / pi)

__device__ __forceinline__ float gelu(float x) {
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + cube)));
}

extern "C" __global__ void gelu_guard(float* out, const float* inp, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = gelu(inp[i]);
}

extern "C" __global__ void gelu_stride(float* out, const float* inp, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        out[i] = gelu(inp[i]);
}

extern "C" __global__ void broadcast_guard(float* out, const float* x, const float* y, int n, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i / C] * y[i % C];
}

extern "C" __global__ void broadcast_stride(float* out, const float* x, const float* y, int n, int C) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        out[i] = x[i / C] * y[i % C];
}
