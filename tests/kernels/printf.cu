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
