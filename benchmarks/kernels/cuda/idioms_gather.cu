// Indexed loads and stores, one thread per element behind a guard: out = x[idx] (gather)
// and out[idx] = x (scatter; idx a permutation, so every element is written once).
extern "C" __global__ void gather(int n, const int* idx, const float* x, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[idx[i]];
}

extern "C" __global__ void scatter(int n, const int* idx, const float* x, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[idx[i]] = x[i];
}
