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

// 2-D blocks (32 x 8) marching along z with the current plane in shared memory (a 2.5-D
// blocking): each thread keeps its column's points behind and ahead in registers, the
// block's tile of the plane and its one-point halo go through shared memory.
#define TX 32
#define TY 8
extern "C" __global__ void stencil7_smem_zloop(const float* in, float* out, int nx, int ny, int nz) {
    __shared__ float plane[TY + 2][TX + 2];
    int x = blockIdx.x * TX + threadIdx.x, y = blockIdx.y * TY + threadIdx.y;
    int tx = threadIdx.x + 1, ty = threadIdx.y + 1;
    bool inside = x < nx && y < ny;
    size_t sz = (size_t)nx * ny, i = (size_t)y * nx + x;
    float behind = 0.0f, here = inside ? in[i] : 0.0f, ahead = inside && nz > 1 ? in[i + sz] : 0.0f;
    for (int z = 0; z < nz; ++z) {
        const float* p = in + z * sz;
        __syncthreads();                       // the last plane's readers are done with it
        plane[ty][tx] = here;
        if (threadIdx.x == 0) plane[ty][0] = x > 0 && y < ny ? p[i - 1] : 0.0f;
        if (threadIdx.x == TX - 1) plane[ty][TX + 1] = x + 1 < nx && y < ny ? p[i + 1] : 0.0f;
        if (threadIdx.y == 0) plane[0][tx] = y > 0 && x < nx ? p[i - nx] : 0.0f;
        if (threadIdx.y == TY - 1) plane[TY + 1][tx] = y + 1 < ny && x < nx ? p[i + nx] : 0.0f;
        __syncthreads();
        if (inside) {
            bool boundary = x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1;
            out[z * sz + i] = boundary ? here : 0.4f * here + 0.1f * (((plane[ty][tx - 1] + plane[ty][tx + 1])
                                                 + (plane[ty - 1][tx] + plane[ty + 1][tx])) + (behind + ahead));
        }
        behind = here;
        here = ahead;
        ahead = inside && z + 2 < nz ? in[(z + 2) * sz + i] : 0.0f;
    }
}
