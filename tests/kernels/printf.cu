// Device printf, assert and trap.
#ifdef __CUDACC_RTC__
// NVRTC ships no <cassert>; this is the device assert CUDA's header defines
extern "C" __device__ void __assertfail(const char*, const char*, unsigned, const char*, size_t);
#define assert(e) ((e) ? (void)0 : __assertfail(#e, __FILE__, __LINE__, __func__, 1))
#else
#include <cassert>
#endif
extern "C" __global__ void say(int n, float f, const char* unused) {
    int t = threadIdx.x;
    if (t < n)
        printf("t=%d f=%f s=%s c=%c x=%x ll=%lld w=%5.2f u=%u %%\n", t, f * t, "hi", 'A' + t, 255 + t,
               -1234567890123LL * t, f, 4000000000u);
}

extern "C" __global__ void check(const int* v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) assert(v[i] >= 0);
}

extern "C" __global__ void maybe_trap(int* out, int bad_block) {
    if (blockIdx.x == bad_block) __trap();
    out[blockIdx.x] = 1;
}

// The common conversions in one format, a pointer among them.
extern "C" __global__ void say_all(const int* p, int n) {
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    if (t < n)
        printf("%d %f %s %c %x %lld %5.2f %p\n", t - 2, 0.25f * t, "str", 'a' + t, 0xbeef + t,
               1LL << (t + 32), 3.14159 * t, p + t);
}

// Other flags, widths and conversions; doubles; unsigned 64-bit; from several blocks.
extern "C" __global__ void say_more(double d, unsigned long long big) {
    int t = threadIdx.x, b = blockIdx.x;
    if (t % 16 == 3)
        printf("[%d,%d] %-6d|%06d|%+d|%.3e|%g|%llu|%10.4f|%X|%o|%s\n", b, t, t, b * 1000 + t, -t, d * t, d / (t + 1),
               big + t, d - b, 0xabcu * (t + 1), t + 8, b & 1 ? "odd" : "even");
}

// A 2-D assert: the message names the block and thread in all three dimensions.
extern "C" __global__ void check2d(int bad_x, int bad_y) {
    assert(!(blockIdx.y == 1 && threadIdx.x == bad_x && threadIdx.y == bad_y));
}

// A string from global memory, and several lines per thread (kept in program order).
extern "C" __global__ void say_seq(const char* s, int lines) {
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    for (int k = 0; k < lines; ++k) printf("%d:%d <%s>\n", t, k, s + (t + k) % 4);
}
