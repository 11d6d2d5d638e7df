// A 7-point Jacobi step on an nx x ny x nz grid (x fastest): interior points become
// 0.4 u + 0.1 (the six neighbours' sum), boundary points are copied.
__device__ __forceinline__ float stencil7_point(const float* in, int x, int y, int z, int nx, int ny, int nz) {
    size_t sy = nx, sz = (size_t)nx * ny, i = z * sz + y * sy + x;
    if (x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1) return in[i];
    return 0.4f * in[i] + 0.1f * (((in[i - 1] + in[i + 1]) + (in[i - sy] + in[i + sy])) + (in[i - sz] + in[i + sz]));
}

// One thread per point, 3-D blocks (32 x 4 x 4).
extern "C" __global__ void stencil7_3d_block(const float* in, float* out, int nx, int ny, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y,
        z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < nx && y < ny && z < nz)
        out[(size_t)z * nx * ny + (size_t)y * nx + x] = stencil7_point(in, x, y, z, nx, ny, nz);
}

// 2-D blocks (32 x 8) over the x-y plane, each thread marching along z.
extern "C" __global__ void stencil7_zloop(const float* in, float* out, int nx, int ny, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < nx && y < ny)
        for (int z = 0; z < nz; ++z)
            out[(size_t)z * nx * ny + (size_t)y * nx + x] = stencil7_point(in, x, y, z, nx, ny, nz);
}
