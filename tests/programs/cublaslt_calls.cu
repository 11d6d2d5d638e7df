// cuBLASLt as training code calls it (the shape of llm.c's matmul_cublaslt): a bf16 layer
// forward with bias and GELU (keeping GELU's input), its backward through DGELU, and a bias
// gradient from B, each found through the heuristic with a workspace. Reads a pool of random
// doubles (argv[1]) and writes every result, in order, to argv[2].
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

#define CHECK(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    printf("FAILED %s = %d at line %d\n", #x, (int)s_, __LINE__); exit(1); } } while (0)
#define CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("FAILED %s = %s at line %d\n", #x, cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)

static std::vector<double> pool;
static size_t taken = 0;
static FILE *out;

static __nv_bfloat16 *take(size_t n) {
    std::vector<__nv_bfloat16> host(n);
    for (size_t i = 0; i < n; i++) host[i] = __float2bfloat16((float)pool[taken++]);
    __nv_bfloat16 *dev;
    CUDA(cudaMalloc(&dev, n * sizeof *dev));
    CUDA(cudaMemcpy(dev, host.data(), n * sizeof *dev, cudaMemcpyHostToDevice));
    return dev;
}

static void emit(const void *dev, size_t bytes) {
    std::vector<char> host(bytes);
    CUDA(cudaMemcpy(host.data(), dev, bytes, cudaMemcpyDeviceToHost));
    fwrite(host.data(), 1, bytes, out);
}

// d (m x n) = epilogue(op(a) op(b)), all column-major bf16, as llm.c lays out its layers
static void matmul(cublasLtHandle_t lt, void *workspace, size_t workspace_size, cudaStream_t stream,
                   __nv_bfloat16 *d, const __nv_bfloat16 *a, const __nv_bfloat16 *b, int m, int n, int k,
                   bool transA, bool transB, cublasLtEpilogue_t epilogue, void *bias, void *aux) {
    cublasLtMatmulDesc_t desc;
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    if (bias) CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    if (aux) {
        int64_t ld = m;
        CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    cublasLtMatrixLayout_t la, lb, ld;
    CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, transA ? k : m, transA ? m : k, transA ? k : m));
    CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, transB ? n : k, transB ? k : n, transB ? n : k));
    CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, m));
    cublasLtMatmulPreference_t pref;
    CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_size,
                                               sizeof workspace_size));
    cublasLtMatmulHeuristicResult_t heuristic;
    int found = 0;
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &heuristic, &found));
    if (found == 0 || heuristic.workspaceSize > workspace_size) { printf("FAILED no algorithm\n"); exit(1); }
    float alpha = 1, beta = 0;
    CHECK(cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heuristic.algo, workspace,
                         workspace_size, stream));
    CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CHECK(cublasLtMatrixLayoutDestroy(la));
    CHECK(cublasLtMatrixLayoutDestroy(lb));
    CHECK(cublasLtMatrixLayoutDestroy(ld));
    CHECK(cublasLtMatmulDescDestroy(desc));
}

int main(int argc, char **argv) {
    FILE *in = fopen(argv[1], "rb");
    double v;
    while (fread(&v, sizeof v, 1, in) == 1) pool.push_back(v);
    fclose(in);
    out = fopen(argv[2], "wb");
    const int C = 48, OC = 80, BT = 33;           // channels in, channels out, tokens
    cublasLtHandle_t lt;
    CHECK(cublasLtCreate(&lt));
    printf("version %zu\n", cublasLtGetVersion());
    size_t workspace_size = 32 << 20;
    void *workspace;
    CUDA(cudaMalloc(&workspace, workspace_size));
    cudaStream_t stream;
    CUDA(cudaStreamCreate(&stream));

    // forward: out (OC x BT) = GELU(weight^T (OC x C) inp (C x BT) + bias), keeping the pre-GELU values
    __nv_bfloat16 *weight = take(C * OC), *inp = take(C * BT), *bias = take(OC), *pre, *outp;
    CUDA(cudaMalloc(&pre, OC * BT * sizeof *pre));
    CUDA(cudaMalloc(&outp, OC * BT * sizeof *outp));
    matmul(lt, workspace, workspace_size, stream, outp, weight, inp, OC, BT, C, true, false,
           CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias, pre);
    // backward: dinp (C x BT) = weight (C x OC) dout (OC x BT), then through GELU with DGELU
    __nv_bfloat16 *dout = take(OC * BT), *dinp, *dweight, *dbias;
    CUDA(cudaMalloc(&dinp, C * BT * sizeof *dinp));
    CUDA(cudaMalloc(&dweight, C * OC * sizeof *dweight));
    CUDA(cudaMalloc(&dbias, OC * sizeof *dbias));
    matmul(lt, workspace, workspace_size, stream, dinp, weight, dout, C, BT, OC, false, false,
           CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL);
    __nv_bfloat16 *dpre;
    CUDA(cudaMalloc(&dpre, OC * BT * sizeof *dpre));
    // dpre (OC x BT) = (I (OC x OC) dout) * GELU'(pre): an identity product carries DGELU
    std::vector<__nv_bfloat16> eye(OC * OC, __float2bfloat16(0.f));
    for (int i = 0; i < OC; i++) eye[i * OC + i] = __float2bfloat16(1.f);
    __nv_bfloat16 *identity;
    CUDA(cudaMalloc(&identity, OC * OC * sizeof *identity));
    CUDA(cudaMemcpy(identity, eye.data(), OC * OC * sizeof *identity, cudaMemcpyHostToDevice));
    matmul(lt, workspace, workspace_size, stream, dpre, identity, dout, OC, BT, OC, false, false,
           CUBLASLT_EPILOGUE_DGELU, NULL, pre);
    // dweight (C x OC) = inp (C x BT) dpre^T (BT x OC), and dbias = the row sums of dpre (BGRADB)
    matmul(lt, workspace, workspace_size, stream, dweight, inp, dpre, C, OC, BT, false, true,
           CUBLASLT_EPILOGUE_BGRADB, dbias, NULL);
    CUDA(cudaStreamSynchronize(stream));
    emit(outp, OC * BT * 2);
    emit(pre, OC * BT * 2);
    emit(dinp, C * BT * 2);
    emit(dpre, OC * BT * 2);
    emit(dweight, C * OC * 2);
    emit(dbias, OC * 2);
    CHECK(cublasLtDestroy(lt));
    fclose(out);
    printf("done\n");
    return 0;
}
