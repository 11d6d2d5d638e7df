/* Legacy cuBLAS routines whose result is not a status (a float, a cuComplex, an index), called
 * when anycuda's library cannot answer them (its Python did not start, or has gone at exit):
 * each must answer a zero of its own type, and cublasGetError the status, once.
 * Built as a program (the calls in main) or as a library whose destructor makes them (after a
 * Python program's interpreter has been finalised). Prints one line per round of calls. */
#include <stdio.h>

typedef struct { float x, y; } cuComplex;
float cublasSdot(int n, const float *x, int incx, const float *y, int incy);
double cublasDnrm2(int n, const double *x, int incx);
cuComplex cublasCdotu(int n, const cuComplex *x, int incx, const cuComplex *y, int incy);
int cublasIsamax(int n, const float *x, int incx);
int cublasGetError(void);

void valued_calls(const char *when) {
    float x[3] = {1, -4, 2};
    double d[2] = {3, 4};
    cuComplex c[2] = {{1, 2}, {3, 4}};
    float dot = cublasSdot(3, x, 1, x, 1);
    int after_dot = cublasGetError();
    int again = cublasGetError();
    double norm = cublasDnrm2(2, d, 1);
    int index = cublasIsamax(3, x, 1);
    cuComplex cdot = cublasCdotu(2, c, 1, c, 1);
    int after_all = cublasGetError();
    printf("%s dot=%g error=%d again=%d norm=%g index=%d cdot=%g,%g error=%d\n", when, dot, after_dot, again,
           norm, index, cdot.x, cdot.y, after_all);
    fflush(stdout);
}

#ifdef AT_EXIT
__attribute__((destructor)) static void at_exit(void) { valued_calls("exit"); }
#else
int main(void) {
    valued_calls("main");
    return 0;
}
#endif
