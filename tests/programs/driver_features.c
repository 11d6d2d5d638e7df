/* Driver API beyond the basics: events, async copies, host callbacks, stream/event
   dependencies, pointer and function attributes, occupancy, managed and pinned memory,
   modules loaded from a file. Built and run by test_shim.py. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { const char* s_ = 0; \
    cuGetErrorName(r_, &s_); fprintf(stderr, "%s failed: %s\n", #call, s_ ? s_ : "?"); return 1; } } while (0)

static int callbacks = 0;
static void CUDA_CB on_host(void* data) { callbacks += *(int*)data; }

int main(int argc, char** argv) {
    CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction fn; CUstream s1, s2; CUevent start, stop, done;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CUdevice got; CHECK(cuCtxGetDevice(&got));
    CHECK(cuModuleLoad(&mod, argv[1]));
    CHECK(cuModuleGetFunction(&fn, mod, "saxpy"));
    int maxthreads = 0, occupancy = 0;
    CHECK(cuFuncGetAttribute(&maxthreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn));
    CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, fn, 256, 0));
    const int n = 1 << 16;
    float *hx, *hy;
    CHECK(cuMemAllocHost((void**)&hx, n * sizeof(float)));
    CHECK(cuMemAllocHost((void**)&hy, n * sizeof(float)));
    for (int i = 0; i < n; ++i) { hx[i] = (float)i; hy[i] = 2.0f; }
    CUdeviceptr dx, dy;
    CHECK(cuMemAlloc(&dx, n * sizeof(float)));
    CHECK(cuMemAllocManaged(&dy, n * sizeof(float), CU_MEM_ATTACH_GLOBAL));
    unsigned int memtype = 0; int managed = 0;
    CHECK(cuPointerGetAttribute(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dx + 40));
    CHECK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, dy));
    CHECK(cuStreamCreate(&s1, 0)); CHECK(cuStreamCreate(&s2, 0));
    CHECK(cuEventCreate(&start, 0)); CHECK(cuEventCreate(&stop, 0)); CHECK(cuEventCreate(&done, 0));
    CHECK(cuEventRecord(start, s1));
    CHECK(cuMemcpyHtoDAsync(dx, hx, n * sizeof(float), s1));
    CHECK(cuMemcpyHtoDAsync(dy, hy, n * sizeof(float), s1));
    float a = 3.0f; int nn = n;
    void* args[] = {&dx, &dy, &a, &nn};
    CHECK(cuLaunchKernel(fn, n / 256, 1, 1, 256, 1, 1, 0, s1, args, NULL));
    int add = 5;
    CHECK(cuLaunchHostFunc(s1, on_host, &add));
    CHECK(cuEventRecord(done, s1));
    CHECK(cuStreamWaitEvent(s2, done, 0));           /* s2's copy waits for s1's kernel */
    CHECK(cuMemcpyDtoHAsync(hy, dy, n * sizeof(float), s2));
    CHECK(cuEventRecord(stop, s2));
    CHECK(cuEventSynchronize(stop));
    CHECK(cuStreamSynchronize(s1));
    float ms = -1.0f;
    CHECK(cuEventElapsedTime(&ms, start, stop));
    for (int i = 0; i < n; ++i)
        if (hy[i] != 3.0f * i + 2.0f) { fprintf(stderr, "mismatch at %d: %f\n", i, hy[i]); return 1; }
    float* managed_host = (float*)(uintptr_t)dy;     /* managed memory is readable on the host */
    printf("device %d, max threads %d, occupancy %d, memtype %u, managed %d, callbacks %d, elapsed>=0 %d, managed[7] %.1f, query %d\n",
           got, maxthreads, occupancy, memtype, managed, callbacks, ms >= 0.0f, managed_host[7], cuStreamQuery(s2));
    CHECK(cuEventDestroy(start)); CHECK(cuEventDestroy(stop)); CHECK(cuEventDestroy(done));
    CHECK(cuMemFreeHost(hx)); CHECK(cuMemFreeHost(hy));
    CHECK(cuMemFree(dx)); CHECK(cuMemFree(dy));
    printf("features OK\n");
    return 0;
}
