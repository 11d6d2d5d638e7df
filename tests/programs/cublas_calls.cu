// cuBLAS as a program calls it: handles, streams, pointer modes, levels 1-3, the mixed-type
// products, argument errors, and calls ordered with kernels and captured into a graph.
// Reads a pool of random doubles (argv[1]), takes its inputs from it in order, and writes
// every result, in order, to argv[2]; statuses and scalars go to stdout as "name value".
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

static std::vector<double> pool;
static size_t taken = 0;
static FILE *out;

#define CHECK(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    printf("FAILED %s = %d at line %d\n", #x, (int)s_, __LINE__); exit(1); } } while (0)
#define CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("FAILED %s = %s at line %d\n", #x, cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)

template <typename T> static std::vector<T> take(size_t n) {
    std::vector<T> v(n);
    for (size_t i = 0; i < n; i++) v[i] = (T)pool[taken++];
    return v;
}

template <typename T> static T *device(const std::vector<T> &host) {
    T *p;
    CUDA(cudaMalloc(&p, host.size() * sizeof(T) + 1));
    CUDA(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}

template <typename T> static void emit(const T *dev, size_t n) {
    std::vector<T> host(n);
    CUDA(cudaMemcpy(host.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
    fwrite(host.data(), sizeof(T), n, out);
}

__global__ void scale(float *x, int n, float by) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= by;
}

int main(int argc, char **argv) {
    FILE *in = fopen(argv[1], "rb");
    double v;
    while (fread(&v, sizeof v, 1, in) == 1) pool.push_back(v);
    fclose(in);
    out = fopen(argv[2], "wb");
    const int m = 67, n = 45, k = 33, batch = 3;
    cublasHandle_t h;
    CHECK(cublasCreate(&h));
    int version = 0;
    CHECK(cublasGetVersion(h, &version));
    printf("version %d\n", version);

    {   // 1. Sgemm, A transposed, padded leading dimensions, beta != 0 (padding rows untouched)
        const int lda = k + 2, ldc = m + 1;
        float *A = device(take<float>(lda * m)), *B = device(take<float>(k * n)), *C = device(take<float>(ldc * n));
        float alpha = 1.5f, beta = 0.5f;
        CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, A, lda, B, k, &beta, C, ldc));
        emit(C, ldc * n);
    }
    {   // 2. Dgemm, B transposed, beta 0 over a C full of NaN
        double *A = device(take<double>(m * k)), *B = device(take<double>(n * k));
        std::vector<double> nan(m * n, 0.0 / 0.0);
        double *C = device(nan);
        double alpha = -0.75, beta = 0;
        CHECK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &alpha, A, m, B, n, &beta, C, m));
        emit(C, m * n);
    }
    {   // 3. Zgemm, A conjugate-transposed
        std::vector<double> a = take<double>(2 * k * m), b = take<double>(2 * k * n);
        cuDoubleComplex *A = (cuDoubleComplex *)device(a), *B = (cuDoubleComplex *)device(b), *C;
        CUDA(cudaMalloc(&C, m * n * sizeof *C));
        cuDoubleComplex alpha = make_cuDoubleComplex(1, 2), beta = make_cuDoubleComplex(0, 0);
        CHECK(cublasZgemm(h, CUBLAS_OP_C, CUBLAS_OP_N, m, n, k, &alpha, A, k, B, k, &beta, C, m));
        emit(C, m * n);
    }
    {   // 4. SgemmStridedBatched, A's stride longer than its matrix
        const long long sa = m * k + 5;
        float *A = device(take<float>(sa * batch)), *B = device(take<float>(k * n * batch)), *C;
        CUDA(cudaMalloc(&C, m * n * batch * sizeof *C));
        float alpha = 1, beta = 0;
        CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A, m, sa, B, k, (long long)k * n,
                                        &beta, C, m, (long long)m * n, batch));
        emit(C, m * n * batch);
    }
    {   // 5. GemmEx: half inputs, float output, float compute
        std::vector<float> a = take<float>(m * k), b = take<float>(k * n);
        std::vector<__half> ha(a.size()), hb(b.size());
        for (size_t i = 0; i < a.size(); i++) ha[i] = __float2half(a[i]);
        for (size_t i = 0; i < b.size(); i++) hb[i] = __float2half(b[i]);
        __half *A = device(ha), *B = device(hb);
        float *C;
        CUDA(cudaMalloc(&C, m * n * sizeof *C));
        float alpha = 1, beta = 0;
        CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A, CUDA_R_16F, m, B, CUDA_R_16F, k, &beta, C,
                           CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        emit(C, m * n);
    }
    {   // 6. GemmEx: bfloat16 in and out, A transposed
        std::vector<float> a = take<float>(k * m), b = take<float>(k * n);
        std::vector<__nv_bfloat16> ba(a.size()), bb(b.size());
        for (size_t i = 0; i < a.size(); i++) ba[i] = __float2bfloat16(a[i]);
        for (size_t i = 0; i < b.size(); i++) bb[i] = __float2bfloat16(b[i]);
        __nv_bfloat16 *A = device(ba), *B = device(bb), *C;
        CUDA(cudaMalloc(&C, m * n * sizeof *C));
        float alpha = 0.5f, beta = 0;
        CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, A, CUDA_R_16BF, k, B, CUDA_R_16BF, k, &beta, C,
                           CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
        emit(C, m * n);
    }
    {   // 7. GemmEx: int8 inputs, int32 output and compute, integer scalars
        std::vector<double> a = take<double>(m * k), b = take<double>(k * n), c = take<double>(m * n);
        std::vector<int8_t> ia(a.size()), ib(b.size());
        std::vector<int32_t> ic(c.size());
        for (size_t i = 0; i < a.size(); i++) ia[i] = (int8_t)(a[i] * 40);
        for (size_t i = 0; i < b.size(); i++) ib[i] = (int8_t)(b[i] * 40);
        for (size_t i = 0; i < c.size(); i++) ic[i] = (int32_t)(c[i] * 1000);
        int8_t *A = device(ia), *B = device(ib);
        int32_t *C = device(ic);
        int32_t alpha = 2, beta = 1;
        CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A, CUDA_R_8I, m, B, CUDA_R_8I, k, &beta, C,
                           CUDA_R_32I, m, CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT));
        emit(C, m * n);
    }
    {   // 8. level 1: dot in both pointer modes, nrm2, iamax, axpy, scal
        float *x = device(take<float>(n)), *y = device(take<float>(n)), *result;
        CUDA(cudaMalloc(&result, sizeof(float)));
        float dot = 0, norm = 0, two = 2, third = 1.0f / 3;
        int at = 0;
        CHECK(cublasSdot(h, n, x, 1, y, 1, &dot));
        CHECK(cublasSnrm2(h, n, x, 1, &norm));
        CHECK(cublasIsamax(h, n, x, 1, &at));
        printf("sdot %.9g\nsnrm2 %.9g\nisamax %d\n", dot, norm, at);
        CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
        CHECK(cublasSdot(h, n, x, 1, y, 1, result));
        CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
        emit(result, 1);
        CHECK(cublasSaxpy(h, n, &two, x, 1, y, 1));
        CHECK(cublasSscal(h, n, &third, y, 1));
        emit(y, n);
    }
    {   // 9. Sgemv and 10. Strsm (lower, a diagonal that keeps it well conditioned)
        std::vector<float> a = take<float>(m * m);
        for (int i = 0; i < m; i++) a[i * m + i] += m;
        float *A = device(a), *x = device(take<float>(m)), *y, *B = device(take<float>(m * n));
        CUDA(cudaMalloc(&y, m * sizeof *y));
        float one = 1, zero = 0, alpha = 2;
        CHECK(cublasSgemv(h, CUBLAS_OP_N, m, m, &one, A, m, x, 1, &zero, y, 1));
        emit(y, m);
        CHECK(cublasStrsm(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, m, n, &alpha,
                          A, m, B, m));
        emit(B, m * n);
    }
    {   // 11. Sgeam: C = alpha A^T + beta B
        float *A = device(take<float>(n * m)), *B = device(take<float>(m * n)), *C;
        CUDA(cudaMalloc(&C, m * n * sizeof *C));
        float alpha = 2, beta = -1;
        CHECK(cublasSgeam(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, &alpha, A, n, &beta, B, m, C, m));
        emit(C, m * n);
    }
    {   // 12. statuses of bad arguments and of a function anycuda does not implement
        float one = 1, *A;
        CUDA(cudaMalloc(&A, m * k * sizeof *A));
        printf("lda_too_small %d\n", (int)cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, m - 1, A, k, &one, A, m));
        printf("negative_m %d\n", (int)cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, n, k, &one, A, m, A, k, &one, A, m));
        printf("bad_operation %d\n", (int)cublasSgemm(h, (cublasOperation_t)7, CUBLAS_OP_N, m, n, k, &one, A, m, A, k, &one, A, m));
        printf("bad_pointer_mode %d\n", (int)cublasSetPointerMode(h, (cublasPointerMode_t)5));
        printf("unsupported_types %d\n", (int)cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, CUDA_R_64F, m, A,
                                                          CUDA_R_64F, k, &one, A, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                                                          CUBLAS_GEMM_DEFAULT));
        printf("not_implemented %d\n", (int)cublasUint8gemmBias(h, CUBLAS_OP_N, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2,
                                                               (const unsigned char *)A, 0, m, (const unsigned char *)A,
                                                               0, k, (unsigned char *)A, 0, m, 1, 0));
        printf("status_name %s\n", cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE));
    }
    {   // 13. a kernel and a product on one stream: the product sees the kernel's writes
        cudaStream_t stream;
        CUDA(cudaStreamCreate(&stream));
        CHECK(cublasSetStream(h, stream));
        cudaStream_t got;
        CHECK(cublasGetStream(h, &got));
        printf("same_stream %d\n", got == stream);
        float *A = device(take<float>(m * k)), *B = device(take<float>(k * n)), *C;
        CUDA(cudaMalloc(&C, m * n * sizeof *C));
        std::vector<float> host(m * n);
        float alpha = 1, beta = 0;
        scale<<<(m * k + 127) / 128, 128, 0, stream>>>(A, m * k, 3.0f);
        CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A, m, B, k, &beta, C, m));
        CUDA(cudaMemcpyAsync(host.data(), C, m * n * sizeof(float), cudaMemcpyDeviceToHost, stream));
        CUDA(cudaStreamSynchronize(stream));
        fwrite(host.data(), sizeof(float), host.size(), out);

        // 14. the same product captured into a graph (C += A B) and replayed twice
        CUDA(cudaMemset(C, 0, m * n * sizeof *C));
        beta = 1;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A, m, B, k, &beta, C, m));
        CUDA(cudaStreamEndCapture(stream, &graph));
        CUDA(cudaGraphInstantiate(&exec, graph, 0));
        CUDA(cudaGraphLaunch(exec, stream));
        CUDA(cudaGraphLaunch(exec, stream));
        CUDA(cudaStreamSynchronize(stream));
        emit(C, m * n);
    }
    CHECK(cublasDestroy(h));
    printf("destroyed_twice %d\n", (int)cublasDestroy(h));
    fclose(out);
    printf("done\n");
    return 0;
}
