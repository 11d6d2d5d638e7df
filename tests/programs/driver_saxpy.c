/* A host program that uses the CUDA driver API directly: loads PTX, launches saxpy,
   checks the result, and exercises error reporting. Built and run by test_shim.py. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { const char* s_ = 0; \
    cuGetErrorName(r_, &s_); fprintf(stderr, "%s failed: %s\n", #call, s_ ? s_ : "?"); return 1; } } while (0)

static char* read_file(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    char* buf = malloc(n + 1);
    if (fread(buf, 1, n, f) != (size_t)n) { fclose(f); return 0; }
    buf[n] = 0; fclose(f);
    return buf;
}

int main(int argc, char** argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s kernel.ptx\n", argv[0]); return 2; }
    int version = 0, count = 0, major = 0, minor = 0, sms = 0;
    CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction fn; CUstream stream;
    CHECK(cuInit(0));
    CHECK(cuDriverGetVersion(&version));
    CHECK(cuDeviceGetCount(&count));
    CHECK(cuDeviceGet(&dev, 0));
    char name[128];
    CHECK(cuDeviceGetName(name, sizeof name, dev));
    CHECK(cuDeviceComputeCapability(&major, &minor, dev));
    CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    printf("driver %d, %d device(s): %s, compute %d.%d, %d SMs\n", version, count, name, major, minor, sms);
    CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
    char* ptx = read_file(argv[1]);
    if (!ptx) { fprintf(stderr, "cannot read %s\n", argv[1]); return 2; }
    CHECK(cuModuleLoadData(&mod, ptx));
    CHECK(cuModuleGetFunction(&fn, mod, "saxpy"));
    const int n = 100000;
    float* hx = malloc(n * sizeof(float)); float* hy = malloc(n * sizeof(float)); float* out = malloc(n * sizeof(float));
    for (int i = 0; i < n; ++i) { hx[i] = (float)i; hy[i] = 1.0f; }
    CUdeviceptr dx, dy;
    CHECK(cuMemAlloc(&dx, n * sizeof(float)));
    CHECK(cuMemAlloc(&dy, n * sizeof(float)));
    CHECK(cuMemcpyHtoD(dx, hx, n * sizeof(float)));
    CHECK(cuMemcpyHtoD(dy, hy, n * sizeof(float)));
    float a = 2.0f; int nn = n;
    void* args[] = {&dx, &dy, &a, &nn};
    CHECK(cuStreamCreate(&stream, 0));
    CHECK(cuLaunchKernel(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, stream, args, NULL));
    CHECK(cuStreamSynchronize(stream));
    CHECK(cuMemcpyDtoH(out, dy, n * sizeof(float)));
    for (int i = 0; i < n; ++i)
        if (out[i] != 2.0f * i + 1.0f) { fprintf(stderr, "mismatch at %d: %f\n", i, out[i]); return 1; }
    /* errors are codes, not crashes */
    CUfunction missing;
    CUresult r = cuModuleGetFunction(&missing, mod, "no_such_kernel");
    const char* rname = 0; cuGetErrorName(r, &rname);
    printf("missing kernel -> %s\n", rname);
    r = cuLaunchKernel(fn, 1, 1, 1, 2048, 1, 1, 0, 0, args, NULL);
    cuGetErrorName(r, &rname);
    printf("block of 2048 -> %s\n", rname);
    CHECK(cuMemFree(dx)); CHECK(cuMemFree(dy));
    r = cuMemFree(dx);
    cuGetErrorName(r, &rname);
    printf("double free -> %s\n", rname);
    CHECK(cuStreamDestroy(stream));
    CHECK(cuModuleUnload(mod));
    CHECK(cuCtxDestroy(ctx));
    printf("saxpy OK\n");
    return 0;
}
