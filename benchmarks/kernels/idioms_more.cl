// OpenCL versions of the rest of idioms.py's kernels (PoCL's column), each the algorithm of
// the CUDA kernel of that idiom (kernels/cuda/idioms_*.cu, idioms_rows.cu, idioms_sort.cu,
// idioms_compute.cu) with the CUDA block as the work-group. Names start with idiom_: this
// file is built in one program with bench.cl, whose kernels have the suite's plain names.
// OpenCL 1.2 has no warp shuffles: where the CUDA kernel shuffles within a warp, 32
// consecutive work-items sum or max through a tree in local memory instead.

// ------------------------------------------------------------------ helpers

// The sum / max of each 32 consecutive work-items' v, returned to all 32 (a shuffle
// reduction's result). s: one slot a work-item; every work-item of the group must call it.
#define IDIOM_WARP_REDUCE(NAME, OP)                                                        \
    float NAME(float v, __local float* s) {                                                \
        int lid = get_local_id(0), lane = lid & 31;                                        \
        s[lid] = v;                                                                        \
        barrier(CLK_LOCAL_MEM_FENCE);                                                      \
        for (int o = 16; o > 0; o >>= 1) {                                                 \
            if (lane < o) s[lid] = OP(s[lid], s[lid + o]);                                 \
            barrier(CLK_LOCAL_MEM_FENCE);                                                  \
        }                                                                                  \
        v = s[lid - lane];                                                                 \
        barrier(CLK_LOCAL_MEM_FENCE);                                                      \
        return v;                                                                          \
    }
#define IDIOM_ADD(a, b) ((a) + (b))
IDIOM_WARP_REDUCE(idiom_warp_sum, IDIOM_ADD)
IDIOM_WARP_REDUCE(idiom_warp_max, fmax)

// A block's sum as the CUDA block_sum helpers take it: each warp's, then the warps' sums
// (at most 32, in `warps`) by the first warp. The total goes to every work-item.
float idiom_block_sum(float v, __local float* s, __local float* warps) {
    int lid = get_local_id(0), lane = lid & 31, nwarps = get_local_size(0) / 32;
    v = idiom_warp_sum(v, s);
    if (lane == 0) warps[lid / 32] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < 32 && lid >= nwarps) warps[lid] = 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int o = 16; o > 0; o >>= 1) {
        if (lid < o) warps[lid] += warps[lid + o];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = warps[0];
    barrier(CLK_LOCAL_MEM_FENCE);          // s and warps are reused by the next call
    return v;
}

// ------------------------------------------------------------------ SGEMM (idioms_sgemm.cu)
// C = A B for any n: loads past the edge read zeros, only outputs inside are written.

#define IDIOM_SGEMM_TILED(T)                                                               \
    __kernel void idiom_sgemm_tiled_##T##x##T(__global const float* A, __global const float* B, \
                                             __global float* C, int n) {                   \
        __local float As[T][T];                                                            \
        __local float Bs[T][T];                                                            \
        int tx = get_local_id(0), ty = get_local_id(1);                                    \
        int row = get_group_id(1) * T + ty, col = get_group_id(0) * T + tx;                \
        float acc = 0.0f;                                                                  \
        for (int t = 0; t < n; t += T) {                                                   \
            As[ty][tx] = row < n && t + tx < n ? A[row * n + t + tx] : 0.0f;               \
            Bs[ty][tx] = t + ty < n && col < n ? B[(t + ty) * n + col] : 0.0f;             \
            barrier(CLK_LOCAL_MEM_FENCE);                                                  \
            for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];                      \
            barrier(CLK_LOCAL_MEM_FENCE);                                                  \
        }                                                                                  \
        if (row < n && col < n) C[row * n + col] = acc;                                    \
    }

IDIOM_SGEMM_TILED(16)
IDIOM_SGEMM_TILED(32)

// 32 x 8 work-items for a 32 x 32 tile, rows ty, ty+8, ty+16, ty+24 each.
__kernel void idiom_sgemm_tiled_32x8(__global const float* A, __global const float* B, __global float* C, int n) {
    __local float As[32][32];
    __local float Bs[32][32];
    int tx = get_local_id(0), ty = get_local_id(1);
    int row0 = get_group_id(1) * 32, col = get_group_id(0) * 32 + tx;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int t = 0; t < n; t += 32) {
        for (int r = ty; r < 32; r += 8) {
            As[r][tx] = row0 + r < n && t + tx < n ? A[(row0 + r) * n + t + tx] : 0.0f;
            Bs[r][tx] = t + r < n && col < n ? B[(t + r) * n + col] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < 32; ++k) {
            float b = Bs[k][tx];
            for (int i = 0; i < 4; ++i) acc[i] += As[ty + 8 * i][k] * b;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < 4; ++i) {
        int row = row0 + ty + 8 * i;
        if (row < n && col < n) C[row * n + col] = acc[i];
    }
}

// 16 x 16 work-items for a 64 x 64 tile, a 4 x 4 register block each (rows ty + 16i,
// columns tx + 16j), from 64 x 16 tiles of A and 16 x 64 of B.
#define IDIOM_BK 16
__kernel void idiom_sgemm_regblock_64x64(__global const float* A, __global const float* B, __global float* C, int n) {
    __local float As[64][IDIOM_BK];
    __local float Bs[IDIOM_BK][64];
    int tx = get_local_id(0), ty = get_local_id(1), tid = ty * 16 + tx;
    int row0 = get_group_id(1) * 64, col0 = get_group_id(0) * 64;
    float acc[4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    for (int t = 0; t < n; t += IDIOM_BK) {
        for (int e = tid; e < 64 * IDIOM_BK; e += 256) {
            int ar = e / IDIOM_BK, ac = e % IDIOM_BK, br = e / 64, bc = e % 64;
            As[ar][ac] = row0 + ar < n && t + ac < n ? A[(row0 + ar) * n + t + ac] : 0.0f;
            Bs[br][bc] = t + br < n && col0 + bc < n ? B[(t + br) * n + col0 + bc] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < IDIOM_BK; ++k) {
            float a[4], b[4];
            for (int i = 0; i < 4; ++i) a[i] = As[ty + 16 * i][k];
            for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx + 16 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            int row = row0 + ty + 16 * i, col = col0 + tx + 16 * j;
            if (row < n && col < n) C[row * n + col] = acc[i][j];
        }
}

// ------------------------------------------------------------------ sums (idioms_reduce.cu)

// One element a work-item, a tree in local memory, one partial a group; the host launches
// it again on the partials until one value is left.
__kernel void idiom_reduce_tree(__global const float* in, __global float* out, int n, __local float* sdata) {
    int tid = get_local_id(0), i = get_global_id(0);
    sdata[tid] = i < n ? in[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (tid == 0) out[get_group_id(0)] = sdata[0];
}

// A grid-stride sum a work-item, the CUDA kernel's warp shuffles as 32-wide local trees
// (idiom_block_sum); a second launch of one group of up to 1024 sums the partials.
__kernel void idiom_reduce_shfl(__global const float* in, __global float* out, int n) {
    __local float s[1024], warps[32];
    float sum = 0.0f;
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) sum += in[i];
    sum = idiom_block_sum(sum, s, warps);
    if (get_local_id(0) == 0) out[get_group_id(0)] = sum;
}

// cub::BlockReduce's place: a tree over the group's 256 values in local memory.
__kernel void idiom_reduce_cub(__global const float* in, __global float* out, int n) {
    __local float s[256];
    int tid = get_local_id(0);
    float sum = 0.0f;
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) sum += in[i];
    s[tid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int o = 128; o > 0; o >>= 1) {
        if (tid < o) s[tid] += s[tid + o];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (tid == 0) out[get_group_id(0)] = s[0];
}

// OpenCL 1.2 has no float atomic add: compare-and-swap on the bits until no one else wrote between.
void idiom_atomic_add_f32(volatile __global float* p, float v) {
    uint seen = as_uint(*p), want;
    do {
        want = seen;
        seen = atomic_cmpxchg((volatile __global uint*)p, want, as_uint(as_float(want) + v));
    } while (seen != want);
}

__kernel void idiom_reduce_atomic_f32(__global const float* in, volatile __global float* out, int n) {
    int i = get_global_id(0);
    if (i < n) idiom_atomic_add_f32(out, in[i]);
}

__kernel void idiom_reduce_atomic_i32(__global const int* in, volatile __global int* out, int n) {
    int i = get_global_id(0);
    if (i < n) atomic_add(out, in[i]);
}

// ------------------------------------------------------------------ scans (idioms_scan.cu)
// A group scans its part in local memory and writes its total; the host scans the totals
// with the same kernel, level by level, then idiom_scan_add_totals adds them back down.
// (Run in place on the totals: each work-item reads only the elements it writes.)

// Hillis and Steele: log2(512) steps over a double buffer, every work-item adding at each.
#define IDIOM_HS 512
__kernel void idiom_scan_hillis_steele(__global const int* in, __global int* out, __global int* totals, int n) {
    __local int buf[2][IDIOM_HS];
    int t = get_local_id(0), i = get_group_id(0) * IDIOM_HS + t, from = 0;
    buf[0][t] = i < n ? in[i] : 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int offset = 1; offset < IDIOM_HS; offset <<= 1) {
        int to = 1 - from;
        buf[to][t] = t >= offset ? buf[from][t] + buf[from][t - offset] : buf[from][t];
        barrier(CLK_LOCAL_MEM_FENCE);
        from = to;
    }
    if (i < n) out[i] = buf[from][t];
    if (t == IDIOM_HS - 1) totals[get_group_id(0)] = buf[from][t];
}

// Blelloch: up-sweep, down-sweep to the exclusive scan, two elements a work-item.
#define IDIOM_BL_THREADS 256
#define IDIOM_BL_ELEMENTS (2 * IDIOM_BL_THREADS)
__kernel void idiom_scan_blelloch(__global const int* in, __global int* out, __global int* totals, int n) {
    __local int temp[IDIOM_BL_ELEMENTS];
    int t = get_local_id(0), a = get_group_id(0) * IDIOM_BL_ELEMENTS + 2 * t, b = a + 1;
    int va = a < n ? in[a] : 0, vb = b < n ? in[b] : 0;
    temp[2 * t] = va;
    temp[2 * t + 1] = vb;
    int offset = 1;
    for (int d = IDIOM_BL_THREADS; d > 0; d >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t < d) temp[offset * (2 * t + 2) - 1] += temp[offset * (2 * t + 1) - 1];
        offset <<= 1;
    }
    if (t == 0) {
        totals[get_group_id(0)] = temp[IDIOM_BL_ELEMENTS - 1];
        temp[IDIOM_BL_ELEMENTS - 1] = 0;
    }
    for (int d = 1; d < IDIOM_BL_ELEMENTS; d <<= 1) {
        offset >>= 1;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            int v = temp[ai];
            temp[ai] = temp[bi];
            temp[bi] += v;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (a < n) out[a] = temp[2 * t] + va;
    if (b < n) out[b] = temp[2 * t + 1] + vb;
}

__kernel void idiom_scan_add_totals(__global int* out, __global const int* scanned_totals, int n, int per_block) {
    int b = get_group_id(0);
    if (b == 0) return;
    int add = scanned_totals[b - 1], end = min(n, (b + 1) * per_block);
    for (int i = b * per_block + get_local_id(0); i < end; i += get_local_size(0)) out[i] += add;
}

// ------------------------------------------------------------------ transposes, 2-D stencils

__kernel void idiom_transpose_naive(__global const float* in, __global float* out, int rows, int cols) {
    int x = get_global_id(0), y = get_global_id(1);
    if (x < cols && y < rows) out[x * rows + y] = in[y * cols + x];
}

__kernel void idiom_transpose_tiled32(__global const float* in, __global float* out, int rows, int cols) {
    __local float tile[32][33];
    int tx = get_local_id(0), ty = get_local_id(1);
    int x = get_group_id(0) * 32 + tx, y = get_group_id(1) * 32 + ty;
    if (x < cols && y < rows) tile[ty][tx] = in[y * cols + x];
    barrier(CLK_LOCAL_MEM_FENCE);
    x = get_group_id(1) * 32 + tx;
    y = get_group_id(0) * 32 + ty;
    if (x < rows && y < cols) out[y * rows + x] = tile[tx][ty];
}

// bench.cl's stencil5 with the group's tile and a one-point halo in local memory first.
#define IDIOM_STENCIL5_SMEM(BX, BY)                                                          \
    __kernel void idiom_stencil5_smem_##BX##x##BY(__global const float* in, __global float* out, int nx, int ny) { \
        __local float t[BY + 2][BX + 2];                                                      \
        int lx = get_local_id(0), ly = get_local_id(1), tx = lx + 1, ty = ly + 1;             \
        int x = get_global_id(0), y = get_global_id(1);                                       \
        int i = y * nx + x;                                                                   \
        bool inside = x < nx && y < ny;                                                       \
        if (inside) {                                                                         \
            t[ty][tx] = in[i];                                                                \
            if (lx == 0 && x > 0) t[ty][0] = in[i - 1];                                       \
            if (lx == BX - 1 && x + 1 < nx) t[ty][BX + 1] = in[i + 1];                        \
            if (ly == 0 && y > 0) t[0][tx] = in[i - nx];                                      \
            if (ly == BY - 1 && y + 1 < ny) t[BY + 1][tx] = in[i + nx];                       \
        }                                                                                     \
        barrier(CLK_LOCAL_MEM_FENCE);                                                         \
        if (!inside) return;                                                                  \
        if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)                                   \
            out[i] = t[ty][tx];                                                               \
        else                                                                                  \
            out[i] = 0.5f * t[ty][tx] + 0.125f * ((t[ty][tx - 1] + t[ty][tx + 1]) + (t[ty - 1][tx] + t[ty + 1][tx])); \
    }

IDIOM_STENCIL5_SMEM(16, 16)
IDIOM_STENCIL5_SMEM(32, 8)

// ------------------------------------------------------------------ histograms (idioms_histogram.cu)
// Grid-stride loops over a fixed grid of 256-work-item groups.

__kernel void idiom_histogram_global_atomics(__global const uchar* data, volatile __global uint* bins, int n) {
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) atomic_inc(&bins[data[i]]);
}

// One work-item an element.
__kernel void idiom_histogram_global_thread(__global const uchar* data, volatile __global uint* bins, int n) {
    int i = get_global_id(0);
    if (i < n) atomic_inc(&bins[data[i]]);
}

// Per-group bins in local memory, one a work-item (groups of 256), merged with one global atomic each.
__kernel void idiom_histogram_shared_atomics(__global const uchar* data, volatile __global uint* bins, int n) {
    __local uint h[256];
    int lid = get_local_id(0);
    h[lid] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) atomic_inc(&h[data[i]]);
    barrier(CLK_LOCAL_MEM_FENCE);
    atomic_add(&bins[lid], h[lid]);
}

// ------------------------------------------------------------------ 3-D stencils (idioms_stencil3d.cu)
// Interior points become 0.4 u + 0.1 (the six neighbours' sum), boundary points are copied.

float idiom_stencil7_point(__global const float* in, int x, int y, int z, int nx, int ny, int nz) {
    size_t sy = nx, sz = (size_t)nx * ny, i = z * sz + y * sy + x;
    if (x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1) return in[i];
    return 0.4f * in[i] + 0.1f * (((in[i - 1] + in[i + 1]) + (in[i - sy] + in[i + sy])) + (in[i - sz] + in[i + sz]));
}

// A work-item a point, 32 x 4 x 4 groups.
__kernel void idiom_stencil7_3d_block(__global const float* in, __global float* out, int nx, int ny, int nz) {
    int x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);
    if (x < nx && y < ny && z < nz)
        out[(size_t)z * nx * ny + (size_t)y * nx + x] = idiom_stencil7_point(in, x, y, z, nx, ny, nz);
}

// 32 x 8 groups over the x-y plane, each work-item marching along z.
__kernel void idiom_stencil7_zloop(__global const float* in, __global float* out, int nx, int ny, int nz) {
    int x = get_global_id(0), y = get_global_id(1);
    if (x < nx && y < ny)
        for (int z = 0; z < nz; ++z)
            out[(size_t)z * nx * ny + (size_t)y * nx + x] = idiom_stencil7_point(in, x, y, z, nx, ny, nz);
}

// 32 x 8 groups marching along z, the column's points behind and ahead in registers, the
// group's tile of the plane and its halo in local memory.
#define IDIOM_TX 32
#define IDIOM_TY 8
__kernel void idiom_stencil7_smem_zloop(__global const float* in, __global float* out, int nx, int ny, int nz) {
    __local float plane[IDIOM_TY + 2][IDIOM_TX + 2];
    int lx = get_local_id(0), ly = get_local_id(1), tx = lx + 1, ty = ly + 1;
    int x = get_global_id(0), y = get_global_id(1);
    bool inside = x < nx && y < ny;
    size_t sz = (size_t)nx * ny, i = (size_t)y * nx + x;
    float behind = 0.0f, here = inside ? in[i] : 0.0f, ahead = inside && nz > 1 ? in[i + sz] : 0.0f;
    for (int z = 0; z < nz; ++z) {
        __global const float* p = in + z * sz;
        barrier(CLK_LOCAL_MEM_FENCE);          // the last plane's readers are done with it
        plane[ty][tx] = here;
        if (lx == 0) plane[ty][0] = x > 0 && y < ny ? p[i - 1] : 0.0f;
        if (lx == IDIOM_TX - 1) plane[ty][IDIOM_TX + 1] = x + 1 < nx && y < ny ? p[i + 1] : 0.0f;
        if (ly == 0) plane[0][tx] = y > 0 && x < nx ? p[i - nx] : 0.0f;
        if (ly == IDIOM_TY - 1) plane[IDIOM_TY + 1][tx] = y + 1 < ny && x < nx ? p[i + nx] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
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

// ------------------------------------------------------------------ Black-Scholes (idioms_blackscholes.cu)

float idiom_normal_cdf(float d) {
    float k = 1.0f / (1.0f + 0.2316419f * fabs(d));
    float poly = k * (0.319381530f + k * (-0.356563782f + k * (1.781477937f + k * (-1.821255978f + k * 1.330274429f))));
    float tail = 0.39894228040143267794f * exp(-0.5f * d * d) * poly;
    return d > 0.0f ? 1.0f - tail : tail;
}

void idiom_price(float S, float X, float T, float r, float v, __global float* call, __global float* put) {
    float sqrtT = sqrt(T);
    float d1 = (log(S / X) + (r + 0.5f * v * v) * T) / (v * sqrtT), d2 = d1 - v * sqrtT;
    float n1 = idiom_normal_cdf(d1), n2 = idiom_normal_cdf(d2), disc = X * exp(-r * T);
    *call = S * n1 - disc * n2;
    *put = disc * (1.0f - n2) - S * (1.0f - n1);
}

__kernel void idiom_blackscholes(int n, __global const float* S, __global const float* X, __global const float* T,
                                 float r, float v, __global float* call, __global float* put) {
    int i = get_global_id(0);
    if (i < n) idiom_price(S[i], X[i], T[i], r, v, &call[i], &put[i]);
}

__kernel void idiom_blackscholes_stride(int n, __global const float* S, __global const float* X,
                                        __global const float* T, float r, float v, __global float* call,
                                        __global float* put) {
    for (int i = get_global_id(0); i < n; i += get_global_size(0))
        idiom_price(S[i], X[i], T[i], r, v, &call[i], &put[i]);
}

// ------------------------------------------------------------------ rows (idioms_rows.cu)
// 32 work-items a row where the CUDA kernels take a warp a row. The CUDA warps past the last
// row return; here they stay (they reach the barriers of the local-memory reductions) with
// no columns to read or write.

__kernel void idiom_softmax_warp(__global float* out, __global const float* inp, int N, int C) {
    __local float s[256];
    int lane = get_local_id(0) % 32, row = get_global_id(0) / 32;
    int c = row < N ? C : 0;
    __global const float* x = inp + (size_t)row * C;
    __global float* y = out + (size_t)row * C;
    float m = -INFINITY;
    for (int i = lane; i < c; i += 32) m = fmax(m, x[i]);
    m = idiom_warp_max(m, s);
    float sum = 0.0f;
    for (int i = lane; i < c; i += 32) {
        float e = exp(x[i] - m);
        y[i] = e;
        sum += e;
    }
    float inv = 1.0f / idiom_warp_sum(sum, s);
    for (int i = lane; i < c; i += 32) y[i] *= inv;
}

// The online softmax: one pass keeps a running maximum and a sum rescaled to it.
__kernel void idiom_softmax_online_cg(__global float* out, __global const float* inp, int N, int C) {
    __local float s[256];
    int lane = get_local_id(0) % 32, row = get_global_id(0) / 32;
    int c = row < N ? C : 0;
    __global const float* x = inp + (size_t)row * C;
    __global float* y = out + (size_t)row * C;
    float maxval = -INFINITY, sumval = 0.0f;
    for (int i = lane; i < c; i += 32) {
        float v = x[i], m = fmax(maxval, v);
        sumval = sumval * exp(maxval - m) + exp(v - m);
        maxval = m;
    }
    float rowmax = idiom_warp_max(maxval, s);
    sumval *= maxval == -INFINITY ? 0.0f : exp(maxval - rowmax);   // a lane with no elements adds nothing
    float inv = 1.0f / idiom_warp_sum(sumval, s);
    for (int i = lane; i < c; i += 32) y[i] = exp(x[i] - rowmax) * inv;
}

__kernel void idiom_layernorm_cg(__global float* out, __global float* mean, __global float* rstd,
                                 __global const float* inp, __global const float* weight,
                                 __global const float* bias, int N, int C) {
    __local float s[256];
    int lane = get_local_id(0) % 32, row = get_global_id(0) / 32;
    int c = row < N ? C : 0;
    __global const float* x = inp + (size_t)row * C;
    float sum = 0.0f;
    for (int i = lane; i < c; i += 32) sum += x[i];
    float m = idiom_warp_sum(sum, s) / C;
    sum = 0.0f;
    for (int i = lane; i < c; i += 32) {
        float diff = x[i] - m;
        sum += diff * diff;
    }
    float r = rsqrt(idiom_warp_sum(sum, s) / C + 1e-5f);
    if (lane == 0 && row < N) {
        mean[row] = m;
        rstd[row] = r;
    }
    __global float* o = out + (size_t)row * C;
    for (int i = lane; i < c; i += 32) o[i] = r * (x[i] - m) * weight[i] + bias[i];
}

// A group a row, every work-item striding over it, the sums through idiom_block_sum.
__kernel void idiom_layernorm_block(__global float* out, __global float* mean, __global float* rstd,
                                    __global const float* inp, __global const float* weight,
                                    __global const float* bias, int N, int C) {
    __local float s[1024], warps[32];
    int row = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
    __global const float* x = inp + (size_t)row * C;
    float a = 0.0f;
    for (int i = lid; i < C; i += ls) a += x[i];
    float m = idiom_block_sum(a, s, warps) / C;
    float v = 0.0f;
    for (int i = lid; i < C; i += ls) {
        float d = x[i] - m;
        v += d * d;
    }
    float r = rsqrt(idiom_block_sum(v, s, warps) / C + 1e-5f);
    if (lid == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
    __global float* y = out + (size_t)row * C;
    for (int i = lid; i < C; i += ls) y[i] = r * (x[i] - m) * weight[i] + bias[i];
}

// ------------------------------------------------------------------ compute (idioms_compute.cu)

// All pairs, every work-item reading all bodies from global memory (no local tile).
__kernel void idiom_nbody_naive(__global const float4* pos, __global float4* acc, int n, float eps2) {
    int i = get_global_id(0);
    if (i >= n) return;
    float4 p = pos[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int j = 0; j < n; ++j) {
        float4 q = pos[j];
        float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
        float inv = rsqrt(dx * dx + dy * dy + dz * dz + eps2);
        float s = q.w * inv * inv * inv;
        ax += dx * s;
        ay += dy * s;
        az += dz * s;
    }
    acc[i] = (float4)(ax, ay, az, 0.0f);
}

// Monte Carlo estimates of pi: a work-item draws `samples` points of the unit square and
// counts those inside the quarter circle; the group's counts meet in local memory, one
// 64-bit atomic add a group. curand's generators written out: XORWOW (its states seeded by
// the host, curand_init's skip-ahead left out, kept between launches as on the GPU) and
// Philox4x32-10 (seed as key, offset / 4 and the work-item's id as counter, as curand_init
// places them).
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable

// curand_uniform's mapping to (0, 1]: the middle of each step of 2^-32
float idiom_uniform01(uint u) {
    return u * 2.3283064e-10f + 1.1641532e-10f;
}

// (total: a __local uint of the kernel's; OpenCL allows them in kernels only)
void idiom_add_group_count(uint count, volatile __local uint* total, volatile __global ulong* hits) {
    if (get_local_id(0) == 0) *total = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    atomic_add(total, count);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0) atom_add(hits, (ulong)*total);
}

uint idiom_xorwow_next(uint* s) {
    uint t = s[0] ^ (s[0] >> 2);
    s[0] = s[1];
    s[1] = s[2];
    s[2] = s[3];
    s[3] = s[4];
    s[4] = (s[4] ^ (s[4] << 4)) ^ (t ^ (t << 1));
    s[5] += 362437;
    return s[4] + s[5];
}

__kernel void idiom_mc_pi_xorwow(__global uint* states, volatile __global ulong* hits, int samples) {
    __local uint total;
    __global uint* st = states + 6 * get_global_id(0);
    uint s[6], count = 0;
    for (int w = 0; w < 6; ++w) s[w] = st[w];
    for (int k = 0; k < samples; ++k) {
        float x = idiom_uniform01(idiom_xorwow_next(s)), y = idiom_uniform01(idiom_xorwow_next(s));
        if (x * x + y * y <= 1.0f) ++count;
    }
    for (int w = 0; w < 6; ++w) st[w] = s[w];        // the next launch continues the sequences
    idiom_add_group_count(count, &total, hits);
}

uint4 idiom_philox4x32_10(uint4 c, uint k0, uint k1) {
    for (int round = 0; round < 10; ++round) {
        ulong p0 = (ulong)0xD2511F53u * c.x, p1 = (ulong)0xCD9E8D57u * c.z;
        c = (uint4)((uint)(p1 >> 32) ^ c.y ^ k0, (uint)p1, (uint)(p0 >> 32) ^ c.w ^ k1, (uint)p0);
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c;
}

__kernel void idiom_mc_pi_philox(ulong seed, ulong offset, volatile __global ulong* hits, int samples) {
    __local uint total;
    uint id = get_global_id(0), count = 0;
    for (int k = 0; k < samples; k += 2) {          // two points a counter, as curand_uniform4 draws them
        ulong block = offset / 4 + k / 2;
        uint4 r = idiom_philox4x32_10((uint4)((uint)block, (uint)(block >> 32), id, 0), (uint)seed, (uint)(seed >> 32));
        float x0 = idiom_uniform01(r.x), y0 = idiom_uniform01(r.y), x1 = idiom_uniform01(r.z), y1 = idiom_uniform01(r.w);
        count += (x0 * x0 + y0 * y0 <= 1.0f) + (x1 * x1 + y1 * y1 <= 1.0f);
    }
    idiom_add_group_count(count, &total, hits);
}

// 5x5 convolution of a w x h image, zero outside it; the filter in constant memory (an
// argument here: OpenCL's program-scope constants cannot be written from the host).
#define IDIOM_R 2
#define IDIOM_K (2 * IDIOM_R + 1)
#define IDIOM_CTILE 16

__kernel void idiom_conv2d_global(__global const float* in, __global float* out, int w, int h,
                                  __constant float* mask) {
    int x = get_global_id(0), y = get_global_id(1);
    if (x >= w || y >= h) return;
    float s = 0.0f;
    for (int dy = -IDIOM_R; dy <= IDIOM_R; ++dy)
        for (int dx = -IDIOM_R; dx <= IDIOM_R; ++dx) {
            int xx = x + dx, yy = y + dy;
            if (xx >= 0 && xx < w && yy >= 0 && yy < h) s += mask[(dy + IDIOM_R) * IDIOM_K + dx + IDIOM_R] * in[yy * w + xx];
        }
    out[y * w + x] = s;
}

// The group's 16 x 16 outputs from a 20 x 20 local tile, its halo loaded by the same work-items.
__kernel void idiom_conv2d_tiled(__global const float* in, __global float* out, int w, int h,
                                 __constant float* mask) {
    __local float tile[IDIOM_CTILE + 2 * IDIOM_R][IDIOM_CTILE + 2 * IDIOM_R];
    int lx = get_local_id(0), ly = get_local_id(1);
    int x0 = get_group_id(0) * IDIOM_CTILE - IDIOM_R, y0 = get_group_id(1) * IDIOM_CTILE - IDIOM_R;
    for (int t = ly * IDIOM_CTILE + lx; t < (IDIOM_CTILE + 2 * IDIOM_R) * (IDIOM_CTILE + 2 * IDIOM_R);
         t += IDIOM_CTILE * IDIOM_CTILE) {
        int ty = t / (IDIOM_CTILE + 2 * IDIOM_R), tx = t % (IDIOM_CTILE + 2 * IDIOM_R), xx = x0 + tx, yy = y0 + ty;
        tile[ty][tx] = xx >= 0 && xx < w && yy >= 0 && yy < h ? in[yy * w + xx] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    int x = get_global_id(0), y = get_global_id(1);
    if (x >= w || y >= h) return;
    float s = 0.0f;
    for (int dy = 0; dy < IDIOM_K; ++dy)
        for (int dx = 0; dx < IDIOM_K; ++dx) s += mask[dy * IDIOM_K + dx] * tile[ly + dy][lx + dx];
    out[y * w + x] = s;
}

// ------------------------------------------------------------------ bitonic sort (idioms_sort.cu)
// Chunks of 1024 floats in local memory, two a work-item (groups of 512). A pair's direction
// depends on its global index, so every kernel agrees with bench.cl's bitonic_step.
#define IDIOM_CHUNK 1024

// Work-item p's pair for step j: the p-th index with bit j clear (its partner is + j).
uint idiom_bitonic_low(uint p, uint j) {
    return 2 * p - (p & (j - 1));
}

// The steps j = j_top, ..., 1 of one k on the chunk in local memory.
void idiom_merge_local(__local float* s, uint base, uint k, uint j_top) {
    for (uint j = j_top; j > 0; j >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        uint i = idiom_bitonic_low(get_local_id(0), j);
        float a = s[i], b = s[i + j];
        if ((a > b) == (((base + i) & k) == 0)) {
            s[i] = b;
            s[i + j] = a;
        }
    }
}

void idiom_load_chunk(__local float* s, __global const float* data, uint base) {
    uint t = get_local_id(0);
    s[t] = data[base + t];
    s[t + IDIOM_CHUNK / 2] = data[base + t + IDIOM_CHUNK / 2];
}

void idiom_store_chunk(__local const float* s, __global float* data, uint base) {
    uint t = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    data[base + t] = s[t];
    data[base + t + IDIOM_CHUNK / 2] = s[t + IDIOM_CHUNK / 2];
}

// Every step with k <= 1024, one chunk a group, in one launch.
__kernel void idiom_bitonic_sort_shared(__global float* data) {
    __local float s[IDIOM_CHUNK];
    uint base = get_group_id(0) * IDIOM_CHUNK;
    idiom_load_chunk(s, data, base);
    for (uint k = 2; k <= IDIOM_CHUNK; k <<= 1) idiom_merge_local(s, base, k, k >> 1);
    idiom_store_chunk(s, data, base);
}

// One step (k, j) with j >= 1024, whose pairs span chunks: a work-item a pair, a launch a step.
__kernel void idiom_bitonic_merge_global(__global float* data, uint j, uint k) {
    uint i = idiom_bitonic_low(get_global_id(0), j);
    float a = data[i], b = data[i + j];
    if ((a > b) == ((i & k) == 0)) {
        data[i] = b;
        data[i + j] = a;
    }
}

// The steps j < 1024 of one k > 1024: each chunk is bitonic on its own by then.
__kernel void idiom_bitonic_merge_shared(__global float* data, uint k) {
    __local float s[IDIOM_CHUNK];
    uint base = get_group_id(0) * IDIOM_CHUNK;
    idiom_load_chunk(s, data, base);
    idiom_merge_local(s, base, k, IDIOM_CHUNK / 2);
    idiom_store_chunk(s, data, base);
}
