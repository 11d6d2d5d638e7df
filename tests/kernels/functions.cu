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

// Struct parameters and returns of several sizes, out-parameters into local memory
struct Small { char c; short s; };
struct Mid { float f[3]; int k; };
struct Wide { double d[4]; long long q; };
__device__ __noinline__ Wide combine(Small a, Mid b, Wide w, float4 v) {
    Wide r;
    for (int j = 0; j < 4; ++j) r.d[j] = w.d[j] * b.f[j % 3] + a.s;
    r.q = w.q + a.c + b.k + (long long)(v.x + v.y + v.z + v.w);
    return r;
}
__device__ __noinline__ float4 swizzle(float4 v, int k) {
    return k & 1 ? make_float4(v.w, v.z, v.y, v.x) : make_float4(v.y, v.x, v.w, v.z);
}
__device__ __noinline__ void split(double x, long long* ip, double* fp) {
    *ip = (long long)x;
    *fp = x - (double)(long long)x;
}

// Deep recursion: an implicit binary tree, mutual recursion, and a linear chain
__device__ __noinline__ long long tree(int depth, long long k) {
    if (depth == 0) return (k * 2654435761LL) % 1000;
    return tree(depth - 1, 2 * k) + tree(depth - 1, 2 * k + 1);
}
__device__ __noinline__ bool is_odd(int n);
__device__ __noinline__ bool is_even(int n) { return n == 0 ? true : is_odd(n - 1); }
__device__ __noinline__ bool is_odd(int n) { return n == 0 ? false : is_even(n - 1); }
__device__ __noinline__ double chain(int n, double acc) {
    double buf[4] = {acc, acc * 0.5, (double)n, 1.0};      // a frame with local memory
    if (n == 0) return acc;
    return chain(n - 1, buf[(n & 1)] + buf[2] * buf[3]);
}

// Indirect calls: tables in __device__ and __constant__ memory, a pointer passed to a
// higher-order function, virtual functions
typedef double (*binop)(double, int);
__device__ double op_pow(double x, int k) { double r = 1; for (int j = 0; j < k; ++j) r *= x; return r; }
__device__ double op_scale(double x, int k) { return x * k; }
__device__ double op_shift(double x, int k) { return x + k; }
__device__ double op_neg(double x, int k) { return -x - k; }
__constant__ binop ctable[4] = {op_pow, op_scale, op_shift, op_neg};
__device__ __noinline__ double apply_all(binop f, const double* v, int n, int k) {
    double s = 0;
    for (int j = 0; j < n; ++j) s += f(v[j], k);
    return s;
}
struct Shape {
    __device__ virtual double area() const { return 0; }
    __device__ virtual int sides() const { return 0; }
};
struct Square : Shape {
    double a;
    __device__ Square(double a_) : a(a_) {}
    __device__ double area() const override { return a * a; }
    __device__ int sides() const override { return 4; }
};
struct Tri : Shape {
    double b, h;
    __device__ Tri(double b_, double h_) : b(b_), h(h_) {}
    __device__ double area() const override { return 0.5 * b * h; }
    __device__ int sides() const override { return 3; }
};
__device__ __noinline__ double describe(const Shape* s) { return s->area() * 10 + s->sides(); }

extern "C" __global__ void calls2(const double* v, const int* sel, long long* out, double* dout, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    Small a = {(char)(t - 5), (short)(t * 100)};
    Mid b = {{1.5f, -2.0f, 0.25f}, t};
    Wide w = {{v[t], v[t] * 2, -v[t], 3.0}, (long long)t << 33};
    Wide r = combine(a, b, w, make_float4(t, 1, 2, 3));
    for (int j = 0; j < 4; ++j) dout[12 * t + j] = r.d[j];
    out[8 * t] = r.q;
    float4 s = swizzle(make_float4(1, 2, 3, 4), t);
    dout[12 * t + 4] = s.x * 1000 + s.y * 100 + s.z * 10 + s.w;
    long long ip; double fp;
    split(v[t] * 10, &ip, &fp);
    out[8 * t + 1] = ip; dout[12 * t + 5] = fp;
    out[8 * t + 2] = tree(10 + t % 3, t);
    out[8 * t + 3] = is_even(t * 7 % 200);
    dout[12 * t + 6] = chain(12 + t % 9, v[t]);
    dout[12 * t + 7] = ctable[sel[t] & 3](v[t], t % 5);
    binop local_ptrs[2] = {op_scale, op_shift};                  // a table in local memory
    dout[12 * t + 8] = apply_all(local_ptrs[t & 1], v, 4, t % 7);
    dout[12 * t + 9] = apply_all(ctable[(sel[t] >> 2) & 3], v + 4, 3, 2);
    Square sq(v[t]); Tri tr(v[t], 3.0);
    const Shape* sh = (sel[t] & 16) ? (const Shape*)&sq : (const Shape*)&tr;
    dout[12 * t + 10] = describe(sh);
    dout[12 * t + 11] = sh->area();
}
