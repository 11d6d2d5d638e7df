// Streaming kernels as people write them, each in two spellings: one thread per element
// behind an `if (i < n)` guard, and a grid-stride loop over a fixed grid. Float and double;
// int indices (copy, saxpy) and size_t indices (scale, triad). One signature for all:
// z = x (copy), z = a*x (scale), y = a*x + y (saxpy, in place), z = x + a*y (triad).
#define GUARDED(NAME, T, I, BODY)                                                        \
    extern "C" __global__ void NAME##_guard(I n, T a, const T* x, T* y, T* z) {           \
        I i = (I)blockIdx.x * blockDim.x + threadIdx.x;                                   \
        if (i < n) BODY;                                                                  \
    }
#define GRID_STRIDE(NAME, T, I, BODY)                                                    \
    extern "C" __global__ void NAME##_stride(I n, T a, const T* x, T* y, T* z) {          \
        for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)blockDim.x * gridDim.x) \
            BODY;                                                                         \
    }
#define BOTH(NAME, T, I, BODY) GUARDED(NAME, T, I, BODY) GRID_STRIDE(NAME, T, I, BODY)

BOTH(copy_f32, float, int, z[i] = x[i])
BOTH(copy_f64, double, int, z[i] = x[i])
BOTH(scale_f32, float, size_t, z[i] = a * x[i])
BOTH(scale_f64, double, size_t, z[i] = a * x[i])
BOTH(saxpy_f32, float, int, y[i] = a * x[i] + y[i])
BOTH(saxpy_f64, double, int, y[i] = a * x[i] + y[i])
BOTH(triad_f32, float, size_t, z[i] = x[i] + a * y[i])
BOTH(triad_f64, double, size_t, z[i] = x[i] + a * y[i])
