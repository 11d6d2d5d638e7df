/* FFTW's interface as a program linked against libcufftw calls it, declared here as FFTW3
 * documents it (no NVIDIA header needed). Inputs come, in order, from the doubles on stdin;
 * results go, in order, to stdout as doubles (tests/test_cufftw.py computes each with numpy). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "input_pool.h"
#include <string.h>

typedef double fftw_complex[2];
typedef float fftwf_complex[2];
typedef void *fftw_plan;
typedef void *fftwf_plan;
typedef struct { int n, is, os; } fftw_iodim;
#define FFTW_FORWARD (-1)
#define FFTW_BACKWARD 1
#define FFTW_ESTIMATE 0x01U
#define FFTW_MEASURE 0x02U

fftw_plan fftw_plan_dft_1d(int n, fftw_complex *in, fftw_complex *out, int sign, unsigned flags);
fftw_plan fftw_plan_dft_2d(int n0, int n1, fftw_complex *in, fftw_complex *out, int sign, unsigned flags);
fftw_plan fftw_plan_dft_r2c_3d(int n0, int n1, int n2, double *in, fftw_complex *out, unsigned flags);
fftw_plan fftw_plan_dft_c2r_1d(int n, fftw_complex *in, double *out, unsigned flags);
fftwf_plan fftwf_plan_many_dft(int rank, const int *n, int howmany, fftwf_complex *in, const int *inembed,
                               int istride, int idist, fftwf_complex *out, const int *onembed, int ostride, int odist,
                               int sign, unsigned flags);
fftw_plan fftw_plan_guru_dft_r2c(int rank, const fftw_iodim *dims, int howmany_rank, const fftw_iodim *howmany_dims,
                                 double *in, fftw_complex *out, unsigned flags);
void fftw_execute(const fftw_plan plan);
void fftwf_execute(const fftwf_plan plan);
void fftw_execute_dft(const fftw_plan plan, fftw_complex *in, fftw_complex *out);
void fftw_destroy_plan(fftw_plan plan);
void fftwf_destroy_plan(fftwf_plan plan);
void *fftw_malloc(size_t n);
void fftw_free(void *p);
fftw_complex *fftw_alloc_complex(size_t n);
double *fftw_alloc_real(size_t n);
fftwf_complex *fftwf_alloc_complex(size_t n);
void fftw_cleanup(void);


static void fill(double *x, size_t count) { for (size_t i = 0; i < count; i++) x[i] = take(); }
static void put(const double *x, size_t count) { fwrite(x, sizeof *x, count, stdout); }
static void put_float(const float *x, size_t count) {
    for (size_t i = 0; i < count; i++) { double v = x[i]; put(&v, 1); }
}

int main(void) {
    /* 1d forward, out of place: planning with FFTW_ESTIMATE leaves both arrays as they were */
    int n = 16;
    fftw_complex *in = fftw_alloc_complex(n), *out = fftw_alloc_complex(n), *other = fftw_alloc_complex(n);
    fill(&in[0][0], 2 * n);
    for (int i = 0; i < 2 * n; i++) (&out[0][0])[i] = NAN;
    double before = in[3][1];
    fftw_plan p = fftw_plan_dft_1d(n, in, out, FFTW_FORWARD, FFTW_ESTIMATE);
    double untouched = p && isnan(out[5][0]) && in[3][1] == before;
    put(&untouched, 1);
    fftw_execute(p);
    put(&out[0][0], 2 * n);
    /* the same plan on other arrays */
    fill(&other[0][0], 2 * n);
    fftw_execute_dft(p, other, out);
    put(&out[0][0], 2 * n);
    fftw_destroy_plan(p);

    /* 2d backward, in place (unnormalised) */
    fftw_complex *grid = fftw_malloc(sizeof(fftw_complex) * 8 * 6);
    double aligned = ((uintptr_t)grid % 16) == 0;
    put(&aligned, 1);
    fill(&grid[0][0], 2 * 8 * 6);
    p = fftw_plan_dft_2d(8, 6, grid, grid, FFTW_BACKWARD, FFTW_MEASURE);
    fftw_execute(p);
    put(&grid[0][0], 2 * 8 * 6);
    fftw_destroy_plan(p);

    /* 3d real to complex */
    double *cube = fftw_alloc_real(4 * 5 * 6);
    fftw_complex *spectrum = fftw_alloc_complex(4 * 5 * 4);
    fill(cube, 4 * 5 * 6);
    p = fftw_plan_dft_r2c_3d(4, 5, 6, cube, spectrum, FFTW_ESTIMATE);
    fftw_execute(p);
    put(&spectrum[0][0], 2 * 4 * 5 * 4);
    fftw_destroy_plan(p);

    /* 1d complex to real, in place: the real result in the padded array */
    fftw_complex *half = fftw_alloc_complex(7);              /* n = 12: 7 complex, 14 reals */
    fill(&half[0][0], 14);
    half[0][1] = half[6][1] = 0;                              /* a real signal's spectrum */
    p = fftw_plan_dft_c2r_1d(12, half, (double *)half, FFTW_ESTIMATE);
    fftw_execute(p);
    put((double *)half, 12);
    fftw_destroy_plan(p);

    /* single precision, 3 transforms of 10 points, elements 2 apart, transforms 21 apart */
    int sizes[1] = {10};
    fftwf_complex *strided = fftwf_alloc_complex(63), *dense = fftwf_alloc_complex(30);
    for (int i = 0; i < 63; i++) { strided[i][0] = (float)take(); strided[i][1] = (float)take(); }
    fftwf_plan q = fftwf_plan_many_dft(1, sizes, 3, strided, NULL, 2, 21, dense, NULL, 1, 10, FFTW_FORWARD,
                                       FFTW_ESTIMATE);
    fftwf_execute(q);
    put_float(&dense[0][0], 60);
    fftwf_destroy_plan(q);

    /* guru: 2 real transforms of 8 points stored as the columns of an 8 x 2 row-major array,
       their spectra the rows of a 2 x 5 one */
    fftw_iodim dim = {8, 2, 1}, batch = {2, 1, 5};
    double *columns = fftw_alloc_real(16);
    fftw_complex *rows = fftw_alloc_complex(10);
    fill(columns, 16);
    p = fftw_plan_guru_dft_r2c(1, &dim, 1, &batch, columns, rows, FFTW_ESTIMATE);
    fftw_execute(p);
    put(&rows[0][0], 20);
    fftw_destroy_plan(p);

    /* refused arguments give NULL plans */
    double refused = fftw_plan_dft_1d(0, in, out, FFTW_FORWARD, FFTW_ESTIMATE) == NULL
                     && fftw_plan_dft_1d(4, in, out, 3, FFTW_ESTIMATE) == NULL;
    put(&refused, 1);
    fftw_free(in); fftw_free(out); fftw_free(other); fftw_free(grid); fftw_free(cube); fftw_free(spectrum);
    fftw_free(half); fftw_free(strided); fftw_free(dense); fftw_free(columns); fftw_free(rows);
    fftw_cleanup();
    return 0;
}
