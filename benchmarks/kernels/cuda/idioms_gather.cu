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

// An LLM's token and position embeddings, summed (the encoder step of GPT-2 training):
// out[b][t][c] = wte[tokens[b][t]][c] + wpe[t][c]. One thread per output element, its
// token row, position and channel worked out from the flat index by divisions by the
// runtime sizes, as llm.c's encoder kernel writes it.
extern "C" __global__ void embedding_flat(float* out, const int* tokens, const float* wte, const float* wpe,
                                          int B, int T, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * T * C) return;
    int bt = i / C, c = i % C, t = bt % T;
    out[i] = wte[tokens[bt] * C + c] + wpe[t * C + c];
}

// The same with a block per token (blockIdx.y) and a block-stride loop over its channels.
extern "C" __global__ void embedding_rows(float* out, const int* tokens, const float* wte, const float* wpe,
                                          int B, int T, int C) {
    int bt = blockIdx.y, t = bt % T;
    const float* e = wte + (size_t)tokens[bt] * C;
    const float* w = wpe + (size_t)t * C;
    float* o = out + (size_t)bt * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = e[c] + w[c];
}
