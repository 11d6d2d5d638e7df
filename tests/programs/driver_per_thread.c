/* The driver API's per-thread default stream by name: built with -DCUDA_API_PER_THREAD_DEFAULT_STREAM,
   cuda.h makes this program call cuLaunchKernel_ptsz, cuMemcpyHtoD_v2_ptds, cuStreamSynchronize_ptsz...
   straight from libcuda.so.1, and stream 0 is each host thread's own. Thread A's kernel waits
   (bounded by the global timer) for a flag that thread B's kernel, launched after A's, sets:
   "independent" when the two threads' default streams ran at once, "serialised" when B's kernel
   waited for A's (the legacy default stream, built without the macro). Then each thread runs
   a blocking copy in, a kernel and a copy out on its default stream, checked against the host.
   Usage: driver_per_thread <module.ptx> <timeout_ms>. Built and run by test_per_thread_default.py. */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { const char* s_ = 0; \
    cuGetErrorName(r_, &s_); fprintf(stderr, "%s failed: %s\n", #call, s_ ? s_ : "?"); exit(1); } } while (0)

static CUcontext ctx;
static CUfunction wait_fn, set_fn, scale_fn;
static CUdeviceptr flag, outcome;
static unsigned long long timeout_ns;
static volatile int launched;

static void *thread_a(void *arg) {
    CHECK(cuCtxSetCurrent(ctx));
    void *params[] = {&flag, &outcome, &timeout_ns};
    CHECK(cuLaunchKernel(wait_fn, 1, 1, 1, 1, 1, 1, 0, 0, params, 0));
    __atomic_store_n(&launched, 1, __ATOMIC_SEQ_CST);
    CHECK(cuStreamSynchronize(0));
    return arg;
}

static void *thread_b(void *arg) {
    CHECK(cuCtxSetCurrent(ctx));
    while (!__atomic_load_n(&launched, __ATOMIC_SEQ_CST)) {}
    void *params[] = {&flag};
    CHECK(cuLaunchKernel(set_fn, 1, 1, 1, 1, 1, 1, 0, 0, params, 0));
    CHECK(cuStreamSynchronize(0));
    return arg;
}

static void *scale_rounds(void *arg) {
    int t = (int)(size_t)arg, n = 3000 + t, bad = 0;
    CHECK(cuCtxSetCurrent(ctx));
    int *host = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) host[i] = i * (t + 1);
    CUdeviceptr d; CHECK(cuMemAlloc(&d, n * sizeof(int)));
    CHECK(cuMemcpyHtoD(d, host, n * sizeof(int)));
    int factor = t + 2;
    void *params[] = {&d, &factor, &n};
    CHECK(cuLaunchKernel(scale_fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0, params, 0));
    for (int i = 0; i < n; i++) host[i] = -1;
    CHECK(cuMemcpyDtoHAsync(host, d, n * sizeof(int), 0));
    CHECK(cuStreamSynchronize(0));
    for (int i = 0; i < n; i++) bad += host[i] != i * (t + 1) * (t + 2);
    CHECK(cuMemFree(d));
    free(host);
    return (void *)(size_t)bad;
}

int main(int argc, char **argv) {
    CUdevice dev; CUmodule mod;
    if (argc < 3) return 2;
    timeout_ns = strtoull(argv[2], 0, 10) * 1000000ull;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoad(&mod, argv[1]));
    CHECK(cuModuleGetFunction(&wait_fn, mod, "wait_for_flag"));
    CHECK(cuModuleGetFunction(&set_fn, mod, "set_flag"));
    CHECK(cuModuleGetFunction(&scale_fn, mod, "scale"));
    CHECK(cuMemAllocManaged(&flag, 4, CU_MEM_ATTACH_GLOBAL));
    CHECK(cuMemAllocManaged(&outcome, 4, CU_MEM_ATTACH_GLOBAL));
    *(int *)flag = 0; *(int *)outcome = 0;
    pthread_t a, b, workers[8];
    pthread_create(&a, 0, thread_a, 0);
    pthread_create(&b, 0, thread_b, 0);
    pthread_join(a, 0); pthread_join(b, 0);
    CHECK(cuCtxSynchronize());
    int o = *(int *)outcome;
    printf("%s flag %d\n", o == 1 ? "independent" : o == 2 ? "serialised" : "unfinished", *(int *)flag);
    size_t bad = 0;
    for (size_t t = 0; t < 8; t++) pthread_create(&workers[t], 0, scale_rounds, (void *)t);
    for (int t = 0; t < 8; t++) { void *r; pthread_join(workers[t], &r); bad += (size_t)r; }
    printf("wrong %zu\n", bad);
    return 0;
}
