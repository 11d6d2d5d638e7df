// Black-Scholes call and put prices of n European options (spot S, strike X, years T) at
// riskless rate r and volatility v, in float; the normal CDF by the Abramowitz-Stegun
// polynomial 26.2.17. One thread per option behind a guard, and a grid-stride loop.
__device__ __forceinline__ float normal_cdf(float d) {
    float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
    float poly = k * (0.319381530f + k * (-0.356563782f + k * (1.781477937f + k * (-1.821255978f + k * 1.330274429f))));
    float tail = 0.39894228040143267794f * expf(-0.5f * d * d) * poly;
    return d > 0.0f ? 1.0f - tail : tail;
}

__device__ __forceinline__ void price(float S, float X, float T, float r, float v, float* call, float* put) {
    float sqrtT = sqrtf(T);
    float d1 = (logf(S / X) + (r + 0.5f * v * v) * T) / (v * sqrtT), d2 = d1 - v * sqrtT;
    float n1 = normal_cdf(d1), n2 = normal_cdf(d2), disc = X * expf(-r * T);
    *call = S * n1 - disc * n2;
    *put = disc * (1.0f - n2) - S * (1.0f - n1);
}

extern "C" __global__ void blackscholes(int n, const float* S, const float* X, const float* T, float r, float v,
                                        float* call, float* put) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) price(S[i], X[i], T[i], r, v, &call[i], &put[i]);
}

extern "C" __global__ void blackscholes_stride(int n, const float* S, const float* X, const float* T, float r,
                                               float v, float* call, float* put) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        price(S[i], X[i], T[i], r, v, &call[i], &put[i]);
}
