// Streaming kernels as people write them, in three spellings: one thread per element
// behind an `if (i < n)` guard, the same with an early `if (i >= n) return;`, and a
// grid-stride loop over a fixed grid. Float, double and half (__half's own operators, each
// rounding to half as a GPU's do); int indices (copy, saxpy) and size_t indices (scale,
// triad). One signature for all, the scalar passed as S and converted to the element type:
// z = x (copy), z = a*x (scale), y = a*x + y (saxpy, in place), z = x + a*y (triad).
#include <cuda_fp16.h>

#define GUARDED(NAME, T, S, I, BODY)                                                     \
    extern "C" __global__ void NAME##_guard(I n, S s, const T* x, T* y, T* z) {           \
        const T a = T(s);                                                                 \
        I i = (I)blockIdx.x * blockDim.x + threadIdx.x;                                   \
        if (i < n) BODY;                                                                  \
    }
#define RETURNING(NAME, T, S, I, BODY)                                                   \
    extern "C" __global__ void NAME##_return(I n, S s, const T* x, T* y, T* z) {          \
        I i = (I)blockIdx.x * blockDim.x + threadIdx.x;                                   \
        if (i >= n) return;                                                               \
        const T a = T(s);                                                                 \
        BODY;                                                                             \
    }
#define GRID_STRIDE(NAME, T, S, I, BODY)                                                 \
    extern "C" __global__ void NAME##_stride(I n, S s, const T* x, T* y, T* z) {          \
        const T a = T(s);                                                                 \
        for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)blockDim.x * gridDim.x) \
            BODY;                                                                         \
    }
#define BOTH(NAME, T, S, I, BODY) GUARDED(NAME, T, S, I, BODY) GRID_STRIDE(NAME, T, S, I, BODY)
#define ALL_THREE(NAME, T, S, I, BODY) BOTH(NAME, T, S, I, BODY) RETURNING(NAME, T, S, I, BODY)

ALL_THREE(copy_f32, float, float, int, z[i] = x[i])
BOTH(copy_f64, double, double, int, z[i] = x[i])
BOTH(copy_f16, __half, float, int, z[i] = x[i])
ALL_THREE(scale_f32, float, float, size_t, z[i] = a * x[i])
BOTH(scale_f64, double, double, size_t, z[i] = a * x[i])
BOTH(scale_f16, __half, float, size_t, z[i] = a * x[i])
ALL_THREE(saxpy_f32, float, float, int, y[i] = a * x[i] + y[i])
BOTH(saxpy_f64, double, double, int, y[i] = a * x[i] + y[i])
BOTH(saxpy_f16, __half, float, int, y[i] = a * x[i] + y[i])
ALL_THREE(triad_f32, float, float, size_t, z[i] = x[i] + a * y[i])
BOTH(triad_f64, double, double, size_t, z[i] = x[i] + a * y[i])
BOTH(triad_f16, __half, float, size_t, z[i] = x[i] + a * y[i])
