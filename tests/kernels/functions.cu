// Device functions that stay calls: recursion, function pointers, struct returns.
struct Pair { double a; long long b; };

__device__ __noinline__ long long fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }
__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__device__ __noinline__ int tree_sum(const int* v, int lo, int hi) {
    if (hi - lo == 1) return v[lo];
    int mid = (lo + hi) / 2;
    return tree_sum(v, lo, mid) + tree_sum(v, mid, hi);
}
__device__ __noinline__ Pair make_pair(double a, long long b, int k) {
    Pair p; p.a = a * k; p.b = b + k; return p;
}
__device__ __noinline__ float with_local(int t) {
    float buf[32];
    for (int k = 0; k < 32; ++k) buf[k] = k * t;
    return buf[(t * 7) & 31] + buf[t & 31];
}

typedef float (*unary_fn)(float);
__device__ float twice(float x) { return 2 * x; }
__device__ float square(float x) { return x * x; }
__device__ float negate(float x) { return -x; }
__device__ unary_fn fns[3] = {twice, square, negate};

extern "C" __global__ void calls(const int* v, long long* out, float* fout, double* dout, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    out[4 * t] = fact(t % 21);
    out[4 * t + 1] = fib(t % 16);
    out[4 * t + 2] = tree_sum(v, 0, 1 + t % 64);
    Pair p = make_pair(1.5, t, 3);
    out[4 * t + 3] = p.b;
    dout[t] = p.a;
    fout[2 * t] = fns[t % 3]((float)t + 0.5f);
    fout[2 * t + 1] = with_local(t);
}
