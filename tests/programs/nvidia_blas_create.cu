// Creates cuBLASLt's and cuBLAS's handles and prints the statuses: run with NVIDIA's own
// libraries put first (LD_PRELOAD), through anycuda's libcuda.so.1.
#include <cstdio>
#include <cublasLt.h>
#include <cublas_v2.h>

int main() {
    cublasLtHandle_t lt;
    cublasHandle_t blas;
    int s1 = (int)cublasLtCreate(&lt);
    int s2 = (int)cublasCreate(&blas);
    std::printf("cublasLtCreate %d cublasCreate %d\n", s1, s2);
    if (s2 == 0) cublasDestroy(blas);
    if (s1 == 0) cublasLtDestroy(lt);
    return 0;
}
