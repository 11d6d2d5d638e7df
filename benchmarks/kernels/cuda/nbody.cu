// All-pairs n-body accelerations (GPU Gems 3, ch. 31 style): bodies are float4 (x, y, z,
// mass); each block stages tiles of blockDim.x bodies in shared memory.
extern "C" __global__ void nbody_accel(const float4* pos, float4* acc, int n, float eps2) {
    extern __shared__ float4 tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 p = pos[i];                     // n is a multiple of blockDim.x
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int t = 0; t < n; t += blockDim.x) {
        tile[threadIdx.x] = pos[t + threadIdx.x];
        __syncthreads();
        for (int j = 0; j < blockDim.x; ++j) {
            float4 q = tile[j];
            float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
            float inv = rsqrtf(dx * dx + dy * dy + dz * dz + eps2);
            float s = q.w * inv * inv * inv;
            ax += dx * s;
            ay += dy * s;
            az += dz * s;
        }
        __syncthreads();
    }
    acc[i] = make_float4(ax, ay, az, 0.0f);
}
