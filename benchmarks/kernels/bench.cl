// The benchmark kernels as OpenCL C 1.2, for PoCL: the same algorithms as cuda/*.cu.
// OpenCL 1.2 has no warp shuffles: those steps go through local memory instead.
__kernel void saxpy(int n, float a, __global const float* x, __global float* y) {
    int i = get_global_id(0);
    if (i < n) y[i] = a * x[i] + y[i];
}

__kernel void vector_add(__global const float* a, __global const float* b, __global float* c, int n) {
    int i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}

#define TILE 16
__kernel void sgemm(__global const float* A, __global const float* B, __global float* C, int n) {
    __local float As[TILE][TILE];
    __local float Bs[TILE][TILE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int row = get_group_id(1) * TILE + ty, col = get_group_id(0) * TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        As[ty][tx] = A[row * n + t + tx];
        Bs[ty][tx] = B[(t + ty) * n + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[row * n + col] = acc;
}

// Work-group tree reduction in local memory (get_local_size(0) a power of two <= 256).
__kernel void reduce_sum(__global const float* x, __global float* partial, int n) {
    __local float s[256];
    int lid = get_local_id(0);
    float v = 0.0f;
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) v += x[i];
    s[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int off = get_local_size(0) / 2; off > 0; off >>= 1) {
        if (lid < off) s[lid] += s[lid + off];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) partial[get_group_id(0)] = s[0];
}

__kernel void histogram256(__global const uchar* data, __global uint* bins, int n) {
    __local uint h[256];
    int lid = get_local_id(0), ls = get_local_size(0);
    for (int i = lid; i < 256; i += ls) h[i] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) atomic_inc(&h[data[i]]);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = lid; i < 256; i += ls)
        if (h[i]) atomic_add(&bins[i], h[i]);
}

__kernel void stencil5(__global const float* in, __global float* out, int nx, int ny) {
    int x = get_global_id(0), y = get_global_id(1);
    if (x >= nx || y >= ny) return;
    int i = y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        out[i] = in[i];
        return;
    }
    out[i] = 0.5f * in[i] + 0.125f * ((in[i - 1] + in[i + 1]) + (in[i - nx] + in[i + nx]));
}

#define TDIM 32
#define TROWS 8
__kernel void transpose(__global const float* in, __global float* out, int rows, int cols) {
    __local float tile[TDIM][TDIM + 1];
    int tx = get_local_id(0), ty = get_local_id(1);
    int x = get_group_id(0) * TDIM + tx, y = get_group_id(1) * TDIM + ty;
    for (int j = 0; j < TDIM; j += TROWS)
        if (x < cols && y + j < rows) tile[ty + j][tx] = in[(y + j) * cols + x];
    barrier(CLK_LOCAL_MEM_FENCE);
    x = get_group_id(1) * TDIM + tx;
    y = get_group_id(0) * TDIM + ty;
    for (int j = 0; j < TDIM; j += TROWS)
        if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[tx][ty + j];
}

#define SCAN_PER_THREAD 4
// Inclusive Hillis-Steele scan of v across the work-group (size <= 1024) in local memory.
int group_inclusive_scan(int v, __local int* s) {
    int lid = get_local_id(0), ls = get_local_size(0);
    s[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int o = 1; o < ls; o <<= 1) {
        int u = lid >= o ? s[lid - o] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        s[lid] += u;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = s[lid];
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
}

__kernel void scan_blocks(__global const int* in, __global int* out, __global int* block_totals, int n) {
    __local int s[1024];
    int lid = get_local_id(0);
    int base = get_group_id(0) * get_local_size(0) * SCAN_PER_THREAD + lid * SCAN_PER_THREAD;
    int v[SCAN_PER_THREAD];
    int run = 0;
    for (int k = 0; k < SCAN_PER_THREAD; ++k) {
        run += base + k < n ? in[base + k] : 0;
        v[k] = run;
    }
    int incl = group_inclusive_scan(run, s);
    int before = incl - run;
    for (int k = 0; k < SCAN_PER_THREAD; ++k)
        if (base + k < n) out[base + k] = v[k] + before;
    if (lid == get_local_size(0) - 1) block_totals[get_group_id(0)] = incl;
}

__kernel void scan_totals(__global int* totals, int m) {
    __local int s[1024];
    __local int carry;
    int lid = get_local_id(0), ls = get_local_size(0);
    if (lid == 0) carry = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int start = 0; start < m; start += ls) {
        int i = start + lid;
        int incl = group_inclusive_scan(i < m ? totals[i] : 0, s) + carry;
        if (i < m) totals[i] = incl;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid == ls - 1) carry = incl;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

__kernel void scan_add(__global int* out, __global const int* totals, int n) {
    int g = get_group_id(0);
    if (g == 0) return;
    int add = totals[g - 1];
    int chunk = get_local_size(0) * SCAN_PER_THREAD, base = g * chunk;
    for (int k = get_local_id(0); k < chunk; k += get_local_size(0))
        if (base + k < n) out[base + k] += add;
}

// Block-wide max / sum in local memory (work-group size a power of two <= 1024).
float group_max(float v, __local float* s) {
    int lid = get_local_id(0);
    s[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int o = get_local_size(0) / 2; o > 0; o >>= 1) {
        if (lid < o) s[lid] = fmax(s[lid], s[lid + o]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = s[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
}
float group_sum(float v, __local float* s) {
    int lid = get_local_id(0);
    s[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int o = get_local_size(0) / 2; o > 0; o >>= 1) {
        if (lid < o) s[lid] += s[lid + o];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = s[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
}

__kernel void softmax_forward(__global float* out, __global const float* inp, int N, int C) {
    __local float s[1024];
    int row = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
    __global const float* x = inp + (size_t)row * C;
    __global float* y = out + (size_t)row * C;
    float m = -INFINITY;
    for (int i = lid; i < C; i += ls) m = fmax(m, x[i]);
    float offset = group_max(m, s);
    float sum = 0.0f;
    for (int i = lid; i < C; i += ls) {
        float e = exp(x[i] - offset);
        y[i] = e;
        sum += e;
    }
    float inv = 1.0f / group_sum(sum, s);
    for (int i = lid; i < C; i += ls) y[i] *= inv;
}

// One 32-wide group of work-items per row, as the CUDA kernel uses one warp per row.
__kernel void layernorm_forward(__global float* out, __global float* mean, __global float* rstd,
                                __global const float* inp, __global const float* weight,
                                __global const float* bias, int N, int C) {
    __local float s[1024];
    int lid = get_local_id(0), lane = lid & 31, w = lid >> 5;
    int row = get_group_id(0) * (get_local_size(0) >> 5) + w;
    __local float* sw = s + w * 32;
    __global const float* x = inp + (size_t)row * C;   // N is a multiple of the rows per group
    float a = 0.0f;
    for (int i = lane; i < C; i += 32) a += x[i];
    sw[lane] = a;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int o = 16; o > 0; o >>= 1) {
        if (lane < o) sw[lane] += sw[lane + o];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float m = sw[0] / C;
    barrier(CLK_LOCAL_MEM_FENCE);
    float v = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float d = x[i] - m;
        v += d * d;
    }
    sw[lane] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int o = 16; o > 0; o >>= 1) {
        if (lane < o) sw[lane] += sw[lane + o];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = rsqrt(sw[0] / C + 1e-5f);
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
    __global float* y = out + (size_t)row * C;
    for (int i = lane; i < C; i += 32) y[i] = r * (x[i] - m) * weight[i] + bias[i];
}

__kernel void nbody_accel(__global const float4* pos, __global float4* acc, int n, float eps2,
                          __local float4* tile) {
    int i = get_global_id(0), lid = get_local_id(0), ls = get_local_size(0);
    float4 p = pos[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int t = 0; t < n; t += ls) {
        tile[lid] = pos[t + lid];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int j = 0; j < ls; ++j) {
            float4 q = tile[j];
            float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
            float inv = rsqrt(dx * dx + dy * dy + dz * dz + eps2);
            float s = q.w * inv * inv * inv;
            ax += dx * s;
            ay += dy * s;
            az += dz * s;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    acc[i] = (float4)(ax, ay, az, 0.0f);
}

__kernel void bitonic_step(__global float* data, int j, int k) {
    uint i = get_global_id(0);
    uint l = i ^ j;
    if (l > i) {
        float a = data[i], b = data[l];
        bool ascending = (i & k) == 0;
        if ((a > b) == ascending) {
            data[i] = b;
            data[l] = a;
        }
    }
}
