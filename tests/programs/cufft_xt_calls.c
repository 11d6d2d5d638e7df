/* cuFFT's extensible API as a program linked against libcufft calls it, declared here as cuFFT's
 * documentation describes it (no NVIDIA header needed). Run with two devices. Inputs come, in
 * order, from the doubles on stdin; results go, in order, to stdout as doubles
 * (tests/test_cufft_xt.py computes each with numpy). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "input_pool.h"

typedef int cufftHandle;
typedef struct { double x, y; } cufftDoubleComplex;
typedef struct { float x, y; } cufftComplex;
typedef struct {
    int version, nGPUs, GPUs[64];
    void *data[64];
    size_t size[64];
    void *cudaXtState;
} cudaXtDesc;
typedef struct {
    int version;
    cudaXtDesc *descriptor;
    int library, subFormat;
    void *libDescriptor;
} cudaLibXtDesc;

enum { CUDA_R_32F = 0, CUDA_C_32F = 4 };
enum { CUFFT_Z2Z = 0x69, CUFFT_FORWARD = -1, CUFFT_INVERSE = 1 };
enum { CUFFT_XT_FORMAT_INPLACE = 2 };
enum { CUFFT_COPY_HOST_TO_DEVICE, CUFFT_COPY_DEVICE_TO_HOST };

int cufftCreate(cufftHandle *plan);
int cufftDestroy(cufftHandle plan);
int cufftMakePlan2d(cufftHandle plan, int nx, int ny, int type, size_t *work);
int cufftXtSetGPUs(cufftHandle plan, int count, int *gpus);
int cufftXtMakePlanMany(cufftHandle plan, int rank, long long *n, long long *inembed, long long istride,
                        long long idist, int inputtype, long long *onembed, long long ostride, long long odist,
                        int outputtype, long long batch, size_t *work, int executiontype);
int cufftXtExec(cufftHandle plan, void *input, void *output, int direction);
int cufftXtMalloc(cufftHandle plan, cudaLibXtDesc **descriptor, int format);
int cufftXtMemcpy(cufftHandle plan, void *dst, void *src, int type);
int cufftXtExecDescriptorZ2Z(cufftHandle plan, cudaLibXtDesc *input, cudaLibXtDesc *output, int direction);
int cufftXtFree(cudaLibXtDesc *descriptor);
int cufftXtSetCallback(cufftHandle plan, void **routine, int type, void **info);


static void put(double v) { fwrite(&v, sizeof v, 1, stdout); }

#define CHECK(call) do { int r_ = (call); if (r_) { fprintf(stderr, "%s: %d\n", #call, r_); exit(3); } } while (0)

int main(void) {
    /* single precision real to complex through cudaDataType, 2 transforms of 16, in host memory
       (one address space: anycuda's device pointers are host addresses) */
    cufftHandle real_plan;
    long long n = 16;
    size_t work = 99;
    float signal[32];
    cufftComplex spectrum[18];
    for (int i = 0; i < 32; i++) signal[i] = (float)take();
    for (int i = 0; i < 18; i++) spectrum[i].x = spectrum[i].y = NAN;
    CHECK(cufftCreate(&real_plan));
    CHECK(cufftXtMakePlanMany(real_plan, 1, &n, NULL, 1, 0, CUDA_R_32F, NULL, 1, 0, CUDA_C_32F, 2, &work, CUDA_C_32F));
    put((double)work);
    CHECK(cufftXtExec(real_plan, signal, spectrum, CUFFT_FORWARD));
    CHECK(cufftDestroy(real_plan));

    /* a 6 x 8 double complex transform over GPUs 1 and 0: forward, then inverse */
    cufftHandle plan;
    int gpus[2] = {1, 0};
    cufftDoubleComplex grid[48];
    for (int i = 0; i < 48; i++) { grid[i].x = take(); grid[i].y = take(); }
    CHECK(cufftCreate(&plan));
    CHECK(cufftXtSetGPUs(plan, 2, gpus));
    CHECK(cufftMakePlan2d(plan, 6, 8, CUFFT_Z2Z, &work));
    cudaLibXtDesc *desc;
    CHECK(cufftXtMalloc(plan, &desc, CUFFT_XT_FORMAT_INPLACE));
    put(desc->descriptor->nGPUs);
    put(desc->descriptor->GPUs[0]);
    put(desc->descriptor->GPUs[1]);
    CHECK(cufftXtMemcpy(plan, desc, grid, CUFFT_COPY_HOST_TO_DEVICE));
    CHECK(cufftXtExecDescriptorZ2Z(plan, desc, desc, CUFFT_FORWARD));
    put(desc->subFormat);
    CHECK(cufftXtMemcpy(plan, grid, desc, CUFFT_COPY_DEVICE_TO_HOST));
    for (int i = 0; i < 48; i++) { put(grid[i].x); put(grid[i].y); }
    CHECK(cufftXtExecDescriptorZ2Z(plan, desc, desc, CUFFT_INVERSE));
    put(desc->subFormat);
    CHECK(cufftXtMemcpy(plan, grid, desc, CUFFT_COPY_DEVICE_TO_HOST));
    for (int i = 0; i < 48; i++) { put(grid[i].x); put(grid[i].y); }
    CHECK(cufftXtFree(desc));
    /* cufftXtMemcpy waited for the default stream, so the first transform is done too */
    for (int i = 0; i < 18; i++) { put(spectrum[i].x); put(spectrum[i].y); }

    /* callbacks: refused, CUFFT_NOT_SUPPORTED */
    void *routine = NULL;
    put(cufftXtSetCallback(plan, &routine, 0, NULL));
    CHECK(cufftDestroy(plan));
    return 0;
}
