// cuBLAS's legacy API (cublas.h) as an old program calls it: cublasInit, cublasAlloc, scalars
// and complex scalars by value, characters for operations, results returned, errors read with
// cublasGetError; and, through cublas_api.h's v2 names (cublas.h and cublas_v2.h exclude each
// other), a handle's rotg and batched gemv. Reads a pool of random doubles (argv[1]), takes its
// inputs from it in order, writes every result, in order, to argv[2]; statuses and scalars go
// to stdout as "name value".
#include <cublas.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

static std::vector<double> pool;
static size_t taken = 0;
static FILE *out;

#define CHECK(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    printf("FAILED %s = %d at line %d\n", #x, (int)s_, __LINE__); exit(1); } } while (0)
#define CLEAN(what) do { cublasStatus_t s_ = cublasGetError(); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    printf("FAILED %s: cublasGetError = %d at line %d\n", what, (int)s_, __LINE__); exit(1); } } while (0)

template <typename T> static std::vector<T> take(size_t n) {
    std::vector<T> v(n);
    for (size_t i = 0; i < n; i++) v[i] = (T)pool[taken++];
    return v;
}

template <typename T> static T *device(const std::vector<T> &host) {
    void *p;
    CHECK(cublasAlloc((int)host.size(), sizeof(T), &p));
    CHECK(cublasSetVector((int)host.size(), sizeof(T), host.data(), 1, p, 1));
    return (T *)p;
}

template <typename T> static void emit(const T *dev, int n) {
    std::vector<T> host(n);
    CHECK(cublasGetVector(n, sizeof(T), dev, 1, host.data(), 1));
    fwrite(host.data(), sizeof(T), n, out);
}

int main(int argc, char **argv) {
    FILE *in = fopen(argv[1], "rb");
    double v;
    while (fread(&v, sizeof v, 1, in) == 1) pool.push_back(v);
    fclose(in);
    out = fopen(argv[2], "wb");
    const int m = 37, n = 29, k = 21, batch = 3;

    // 1. a routine before cublasInit: returns 0, keeps NOT_INITIALIZED for cublasGetError
    printf("dot_before_init %g\n", cublasSdot(4, NULL, 1, NULL, 1));
    printf("before_init %d\n", (int)cublasGetError());
    printf("after_reading %d\n", (int)cublasGetError());
    CHECK(cublasInit());

    {   // 2. Sgemm 'T','N' with a padded C: C = 1.5 A^T B - 0.5 C
        float *A = device(take<float>(k * m)), *B = device(take<float>(k * n)), *C = device(take<float>((m + 2) * n));
        cublasSgemm('T', 'n', m, n, k, 1.5f, A, k, B, k, -0.5f, C, m + 2);
        CLEAN("Sgemm");
        emit(C, (m + 2) * n);
        CHECK(cublasFree(A));
        CHECK(cublasFree(B));
        CHECK(cublasFree(C));
    }
    {   // 3. Dgemv 'N' and level 1 results returned by value
        double *A = device(take<double>(m * n)), *x = device(take<double>(n)), *y = device(take<double>(m));
        cublasDgemv('N', m, n, 2.0, A, m, x, 1, 0.0, y, 1);
        emit(y, m);
        printf("ddot %.17g\n", cublasDdot(m, y, 1, y, 1));
        printf("dnrm2 %.17g\n", cublasDnrm2(n, x, 1));
        printf("idamax %d\n", cublasIdamax(n, x, 1));
        CLEAN("level 1 and 2");
    }
    {   // 4. Zgemm 'C','N' with complex scalars by value, Cdotc's complex result
        std::vector<double> a = take<double>(2 * k * m), b = take<double>(2 * k * n);
        cuDoubleComplex *A = device(std::vector<cuDoubleComplex>((cuDoubleComplex *)a.data(),
                                                                 (cuDoubleComplex *)a.data() + k * m));
        cuDoubleComplex *B = device(std::vector<cuDoubleComplex>((cuDoubleComplex *)b.data(),
                                                                 (cuDoubleComplex *)b.data() + k * n));
        cuDoubleComplex *C = device(std::vector<cuDoubleComplex>(m * n, make_cuDoubleComplex(0, 0)));
        cublasZgemm('C', 'N', m, n, k, make_cuDoubleComplex(1, -2), A, k, B, k, make_cuDoubleComplex(0, 0), C, m);
        emit(C, m * n);
        std::vector<float> x = take<float>(2 * n), y = take<float>(2 * n);
        cuComplex *dx = device(std::vector<cuComplex>((cuComplex *)x.data(), (cuComplex *)x.data() + n));
        cuComplex *dy = device(std::vector<cuComplex>((cuComplex *)y.data(), (cuComplex *)y.data() + n));
        cuComplex dot = cublasCdotc(n, dx, 1, dy, 1);
        printf("cdotc %.9g %.9g\n", cuCrealf(dot), cuCimagf(dot));
        CLEAN("complex");
    }
    {   // 5. errors: an unknown operation character, a negative size; each read once
        float *A = device(take<float>(4));
        cublasSgemm('X', 'N', 2, 2, 2, 1.0f, A, 2, A, 2, 0.0f, A, 2);
        printf("bad_character %d\n", (int)cublasGetError());
        printf("read_twice %d\n", (int)cublasGetError());
        cublasStrsv('U', 'N', 'N', -1, A, 2, A, 1);
        printf("negative_n %d\n", (int)cublasGetError());
        void *p;
        printf("alloc_zero %d\n", (int)cublasAlloc(0, 4, &p));
    }
    {   // 6. the kernel stream: legacy routines are queued on it, and cublasGetVector (a blocking
        // copy, as cudaMemcpy) reads the result after them without a synchronisation
        cudaStream_t stream;
        cudaStreamCreate(&stream);
        CHECK(cublasSetKernelStream(stream));
        float *x = device(take<float>(n));
        cublasSscal(n, 3.0f, x, 1);
        emit(x, n);
        CHECK(cublasSetKernelStream(0));
    }
    {   // 7. v2 beside the legacy API: rotg in host pointer mode, Dgemv batched
        cublasHandle_t h;
        CHECK(cublasCreate_v2(&h));
        float a = (float)pool[taken], b = (float)pool[taken + 1], c, s;
        taken += 2;
        CHECK(cublasSrotg_v2(h, &a, &b, &c, &s));
        printf("rotg %.9g %.9g %.9g %.9g\n", a, b, c, s);
        double *As[batch], *xs[batch], *ys[batch];
        for (int i = 0; i < batch; i++) {
            As[i] = device(take<double>(m * n));
            xs[i] = device(take<double>(m));
            ys[i] = device(std::vector<double>(n, 0.0));
        }
        double **dA = device(std::vector<double *>(As, As + batch));
        double **dx = device(std::vector<double *>(xs, xs + batch));
        double **dy = device(std::vector<double *>(ys, ys + batch));
        double alpha = 0.5, beta = 0;
        CHECK(cublasDgemvBatched(h, CUBLAS_OP_T, m, n, &alpha, dA, m, dx, 1, &beta, dy, 1, batch));
        for (int i = 0; i < batch; i++) emit(ys[i], n);
        CHECK(cublasDestroy_v2(h));
    }
    CHECK(cublasShutdown());
    printf("shutdown_twice %d\n", (int)cublasShutdown());
    fclose(out);
    printf("done\n");
    return 0;
}
