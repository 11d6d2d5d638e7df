// One Jacobi step of a 2-D 5-point stencil on an ny x nx grid; the border is copied.
extern "C" __global__ void stencil5(const float* in, float* out, int nx, int ny) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    int i = y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        out[i] = in[i];
        return;
    }
    out[i] = 0.5f * in[i] + 0.125f * ((in[i - 1] + in[i + 1]) + (in[i - nx] + in[i + nx]));
}
