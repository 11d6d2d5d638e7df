// The rest of cuBLAS through NVIDIA's own headers, so the C types of every argument are the
// header's (size_t sizes of cublasXt, int64_t of the _64 forms, cudaDataType codes): cublasXt on
// host memory, syrkx_64, complex syr2, Ex level-1 routines, grouped gemms. Reads a pool of
// random doubles (argv[1]), takes its inputs from it in order, writes every result, in order,
// to argv[2]; scalar results go to stdout as "name value".
#include <cublasXt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

static std::vector<double> pool;
static size_t taken = 0;
static FILE *out;

#define CHECK(x) do { int s_ = (int)(x); if (s_ != 0) { \
    printf("FAILED %s = %d at line %d\n", #x, s_, __LINE__); exit(1); } } while (0)

template <typename T> static std::vector<T> take(size_t n) {
    std::vector<T> v(n);
    for (size_t i = 0; i < n; i++) v[i] = (T)pool[taken++];
    return v;
}

static std::vector<cuComplex> take_complex(size_t n) {
    std::vector<cuComplex> v(n);
    for (size_t i = 0; i < n; i++) { v[i].x = (float)pool[taken++]; v[i].y = (float)pool[taken++]; }
    return v;
}

static std::vector<cuDoubleComplex> take_double_complex(size_t n) {
    std::vector<cuDoubleComplex> v(n);
    for (size_t i = 0; i < n; i++) { v[i].x = pool[taken++]; v[i].y = pool[taken++]; }
    return v;
}

template <typename T> static T *device(const std::vector<T> &host) {
    T *p;
    CHECK(cudaMalloc(&p, host.size() * sizeof(T)));
    CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}

template <typename T> static void emit(const T *dev, size_t n) {
    std::vector<T> host(n);
    CHECK(cudaMemcpy(host.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
    fwrite(host.data(), sizeof(T), n, out);
}

template <typename T> static void emit_host(const std::vector<T> &v) { fwrite(v.data(), sizeof(T), v.size(), out); }

int main(int argc, char **argv) {
    FILE *in = fopen(argv[1], "rb");
    pool.resize(200000);
    pool.resize(fread(pool.data(), sizeof(double), pool.size(), in));
    fclose(in);
    out = fopen(argv[2], "wb");

    // 1. cublasXt: host memory, size_t sizes, synchronous
    cublasXtHandle_t xt;
    CHECK(cublasXtCreate(&xt));
    int devices[1] = {0};
    CHECK(cublasXtDeviceSelect(xt, 1, devices));
    CHECK(cublasXtSetBlockDim(xt, 64));
    size_t m = 9, n = 7, k = 5;
    std::vector<double> A = take<double>(m * k), B = take<double>(n * k), C = take<double>(m * n);
    double two = 2, half = 0.5;
    CHECK(cublasXtDgemm(xt, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &two, A.data(), m, B.data(), n, &half, C.data(), m));
    emit_host(C);                                                            // 2 A B^T + C / 2
    std::vector<cuDoubleComplex> P = take_double_complex(n * k), Q = take_double_complex(n * k);
    std::vector<cuDoubleComplex> H = take_double_complex(n * n);
    cuDoubleComplex zalpha = {0.5, -1};
    double dbeta = 2;
    CHECK(cublasXtZherkx(xt, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, n, k, &zalpha, P.data(), n, Q.data(), n, &dbeta,
                         H.data(), n));
    emit_host(H);                                                            // upper of a P Q^H + 2 H
    std::vector<float> AP = take<float>(m * (m + 1) / 2), SB = take<float>(m * n), SC(m * n, 0.0f);
    float sone = 1, szero = 0;
    CHECK(cublasXtSspmm(xt, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, m, n, &sone, AP.data(), SB.data(), m, &szero,
                        SC.data(), m));
    emit_host(SC);                                                           // sym(AP) B
    CHECK(cublasXtDestroy(xt));

    // 2. v2 routines on device memory, with 64-bit sizes where the header has them
    cublasHandle_t h;
    CHECK(cublasCreate(&h));
    std::vector<float> X = take<float>(m * k), Y = take<float>(m * k), S = take<float>(m * m);
    float *dS = device(S);
    CHECK(cublasSsyrkx_64(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, (int64_t)m, (int64_t)k, &sone,
                          device(X), (int64_t)m, device(Y), (int64_t)m, &sone, dS, (int64_t)m));
    emit(dS, m * m);                                                         // lower of X Y^T + S
    std::vector<cuComplex> x = take_complex(m), y = take_complex(m), CA = take_complex(m * m);
    cuComplex calpha = {1.5f, 0.5f};
    cuComplex *dCA = device(CA);
    CHECK(cublasCsyr2(h, CUBLAS_FILL_MODE_UPPER, (int)m, &calpha, device(x), 1, device(y), 1, dCA, (int)m));
    emit(dCA, m * m);                                                        // upper of a (x y^T + y x^T) + CA

    // 3. Ex level 1: results in host memory (the call waits for them)
    std::vector<cuComplex> u = take_complex(m), v = take_complex(m);
    cuComplex dot;
    CHECK(cublasDotcEx(h, (int)m, device(u), CUDA_C_32F, 1, device(v), CUDA_C_32F, 1, &dot, CUDA_C_32F, CUDA_C_32F));
    printf("dotc %.9g %.9g\n", dot.x, dot.y);
    std::vector<cuDoubleComplex> w = take_double_complex(m);
    double norm;
    CHECK(cublasNrm2Ex(h, (int)m, device(w), CUDA_C_64F, 1, &norm, CUDA_R_64F, CUDA_R_64F));
    printf("nrm2 %.17g\n", norm);
    int64_t index;
    CHECK(cublasIamaxEx_64(h, (int64_t)m, device(w), CUDA_C_64F, 1, &index));
    printf("iamax %lld\n", (long long)index);
    std::vector<double> ax = take<double>(m), ay = take<double>(m);
    double *day = device(ay);
    CHECK(cublasAxpyEx(h, (int)m, &half, CUDA_R_64F, device(ax), CUDA_R_64F, 1, day, CUDA_R_64F, 1, CUDA_R_64F));
    emit(day, m);                                                            // y + x / 2
    double d1 = 2, d2 = 3, x1 = pool[taken++], y1 = pool[taken++], param[5] = {0, 0, 0, 0, 0};
    CHECK(cublasRotmgEx(h, &d1, CUDA_R_64F, &d2, CUDA_R_64F, &x1, CUDA_R_64F, &y1, CUDA_R_64F, param, CUDA_R_64F,
                        CUDA_R_64F));
    printf("rotmg %.17g %.17g %.17g %.17g %.17g %.17g\n", param[0], param[1], param[2], param[3], param[4], x1);

    // 4. grouped gemms: two groups (3 x 4 x 2, two products; 2 x 2 x 3, one product), 64-bit arrays
    cublasOperation_t ta[2] = {CUBLAS_OP_N, CUBLAS_OP_T}, tb[2] = {CUBLAS_OP_N, CUBLAS_OP_N};
    int64_t gm[2] = {3, 2}, gn[2] = {4, 2}, gk[2] = {2, 3}, lda[2] = {3, 3}, ldb[2] = {2, 3}, ldc[2] = {3, 2};
    int64_t sizes[2] = {2, 1};
    float galpha[2] = {1, -1}, gbeta[2] = {0, 1};
    float *As[3], *Bs[3], *Cs[3];
    size_t a_count[3] = {6, 6, 6}, b_count[3] = {8, 8, 6}, c_count[3] = {12, 12, 4};
    for (int i = 0; i < 3; i++) {
        As[i] = device(take<float>(a_count[i]));
        Bs[i] = device(take<float>(b_count[i]));
        Cs[i] = device(take<float>(c_count[i]));
    }
    float **dAs = device(std::vector<float *>(As, As + 3)), **dBs = device(std::vector<float *>(Bs, Bs + 3));
    float **dCs = device(std::vector<float *>(Cs, Cs + 3));
    CHECK(cublasSgemmGroupedBatched_64(h, ta, tb, gm, gn, gk, galpha, (const float *const *)dAs, lda,
                                       (const float *const *)dBs, ldb, gbeta, dCs, ldc, 2, sizes));
    for (int i = 0; i < 3; i++) emit(Cs[i], c_count[i]);
    int im[1] = {3}, in_[1] = {4}, ik[1] = {2}, ilda[1] = {3}, ildb[1] = {2}, ildc[1] = {3}, isize[1] = {2};
    float eone[1] = {2}, ezero[1] = {0};
    CHECK(cublasGemmGroupedBatchedEx(h, ta, tb, im, in_, ik, eone, (const void *const *)dAs, CUDA_R_32F, ilda,
                                     (const void *const *)dBs, CUDA_R_32F, ildb, ezero, (void *const *)dCs, CUDA_R_32F,
                                     ildc, 1, isize, CUBLAS_COMPUTE_32F));
    for (int i = 0; i < 2; i++) emit(Cs[i], c_count[i]);                     // 2 A B, the first group again
    CHECK(cublasDestroy(h));
    fclose(out);
    printf("done\n");
    return 0;
}
