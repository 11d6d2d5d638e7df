// CUDA arrays, texture objects and surface objects through the CUDA runtime.
// Usage: textures <seed> <out.bin>   writes every input and output as named records
//        textures trap                reads a surface out of range with cudaBoundaryModeTrap
// Inputs are random (from the seed); output buffers are poisoned (all bits set: NaN) before
// each launch. tests/test_binaries.py checks the outputs against the documented formulas.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"   // cudaMemcpyToArray is tested on purpose

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("%s:%d: %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_)); exit(1); } } while (0)

static const int M = 512;               // lookups per test

static FILE *out;
static void record(const char *name, const void *data, size_t bytes) {
    unsigned n = (unsigned)strlen(name), b = (unsigned)bytes;
    fwrite(&n, 4, 1, out); fwrite(name, 1, n, out);
    fwrite(&b, 4, 1, out); fwrite(data, 1, bytes, out);
}

static uint64_t state;
static uint32_t next_u32() { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return (uint32_t)(state >> 16); }
static float uniform(float lo, float hi) { return lo + (hi - lo) * (next_u32() / 4294967296.0f); }

template <class T> static T *device_poisoned(size_t n) {
    T *p; CHECK(cudaMalloc(&p, n * sizeof(T))); CHECK(cudaMemset(p, 0xFF, n * sizeof(T))); return p;
}
template <class T> static T *device_copy(const std::vector<T> &v) {
    T *p; CHECK(cudaMalloc(&p, v.size() * sizeof(T)));
    CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice)); return p;
}
template <class T> static void record_device(const char *name, const T *p, size_t n) {
    std::vector<T> h(n); CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    record(name, h.data(), n * sizeof(T));
}

__global__ void fetch1d(cudaTextureObject_t t, const int *idx, float *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = tex1Dfetch<float>(t, idx[i]);
}
__global__ void sample2d(cudaTextureObject_t t, const float2 *c, float *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = tex2D<float>(t, c[i].x, c[i].y);
}
__global__ void sample2d4(cudaTextureObject_t t, const float2 *c, float4 *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = tex2D<float4>(t, c[i].x, c[i].y);
}
__global__ void sample2du4(cudaTextureObject_t t, const float2 *c, uint4 *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { uchar4 v = tex2D<uchar4>(t, c[i].x, c[i].y); o[i] = make_uint4(v.x, v.y, v.z, v.w); }
}
__global__ void sample3d(cudaTextureObject_t t, const float4 *c, float *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = tex3D<float>(t, c[i].x, c[i].y, c[i].z);
}
__global__ void sample2dlayered(cudaTextureObject_t t, const float4 *c, float *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) o[i] = tex2DLayered<float>(t, c[i].x, c[i].y, (int)c[i].z);
}
__global__ void gather2d(cudaTextureObject_t t, const float2 *c, float4 *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = tex2Dgather<float4>(t, c[i].x, c[i].y, 0);
}
__global__ void surface_map(cudaSurfaceObject_t src, cudaSurfaceObject_t dst, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) {
        float v; surf2Dread(&v, src, x * 4, y);
        surf2Dwrite(2.0f * v + 1.0f, dst, x * 4, y);
    }
}
__global__ void surface_modes(cudaSurfaceObject_t s, const int2 *c, float *zero, float *clamped, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v; surf2Dread(&v, s, c[i].x * 4, c[i].y, cudaBoundaryModeZero); zero[i] = v;
        surf2Dread(&v, s, c[i].x * 4, c[i].y, cudaBoundaryModeClamp); clamped[i] = v;
    }
}
__global__ void surface_trap(cudaSurfaceObject_t s, int x, float *o) {
    float v; surf2Dread(&v, s, x * 4, 0); o[0] = v;
}
__global__ void sample1d(cudaTextureObject_t t, const float *c, float *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = tex1D<float>(t, c[i]);
}
__global__ void sample2d2(cudaTextureObject_t t, const float2 *c, float2 *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = tex2D<float2>(t, c[i].x, c[i].y);
}
__global__ void surface_3d(cudaSurfaceObject_t s, int w, int h, int d) {
    int x = threadIdx.x, y = threadIdx.y, z = blockIdx.x;
    if (x < w && y < h && z < d) surf3Dwrite((short)(x + 10 * y + 100 * z), s, x * 2, y, z);
}
__global__ void surface_1d(cudaSurfaceObject_t s, int *o, int n) {
    int i = threadIdx.x;
    if (i < n) { int2 v; surf1Dread(&v, s, i * 8); o[i] = v.x + v.y; }
}
__global__ void mip_lod(cudaTextureObject_t t, const float4 *c, float *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = tex2DLod<float>(t, c[i].x, c[i].y, c[i].z);
}
__global__ void mip_grad(cudaTextureObject_t t, const float4 *c, float *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) o[i] = tex2DGrad<float>(t, c[i].x, c[i].y, make_float2(c[i].z, 0), make_float2(0, c[i].w));
}
__global__ void queries(cudaTextureObject_t t, cudaSurfaceObject_t s, int *o) {
    int a, b, c, d;
    asm("txq.width.b32 %0, [%1];" : "=r"(a) : "l"(t));
    asm("txq.height.b32 %0, [%1];" : "=r"(b) : "l"(t));
    asm("suq.width.b32 %0, [%1];" : "=r"(c) : "l"(s));
    asm("suq.height.b32 %0, [%1];" : "=r"(d) : "l"(s));
    o[0] = a; o[1] = b; o[2] = c; o[3] = d;
}

static cudaTextureObject_t texture(cudaArray_t a, cudaTextureAddressMode mode, cudaTextureFilterMode filter,
                                   int normalized, cudaTextureReadMode read, const float border[4]) {
    cudaResourceDesc rd; memset(&rd, 0, sizeof rd);
    rd.resType = cudaResourceTypeArray; rd.res.array.array = a;
    cudaTextureDesc td; memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = mode;
    td.filterMode = filter; td.readMode = read; td.normalizedCoords = normalized;
    if (border) for (int k = 0; k < 4; k++) td.borderColor[k] = border[k];
    cudaTextureObject_t t; CHECK(cudaCreateTextureObject(&t, &rd, &td, NULL));
    return t;
}

static cudaSurfaceObject_t surface(cudaArray_t a) {
    cudaResourceDesc rd; memset(&rd, 0, sizeof rd);
    rd.resType = cudaResourceTypeArray; rd.res.array.array = a;
    cudaSurfaceObject_t s; CHECK(cudaCreateSurfaceObject(&s, &rd)); return s;
}

static int trap_run() {
    cudaChannelFormatDesc cf = cudaCreateChannelDesc<float>();
    cudaArray_t a; CHECK(cudaMallocArray(&a, &cf, 16, 4, cudaArraySurfaceLoadStore));
    cudaSurfaceObject_t s = surface(a);
    float *o = device_poisoned<float>(1);
    surface_trap<<<1, 1>>>(s, 15, o);                // the last element: fine
    CHECK(cudaDeviceSynchronize());
    surface_trap<<<1, 1>>>(s, 16, o);                // one past the row
    printf("out of range: %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "trap")) return trap_run();
    if (argc != 3) { fprintf(stderr, "usage: textures <seed> <out.bin> | textures trap\n"); return 2; }
    state = strtoull(argv[1], 0, 10) * 2654435761ull + 1;
    out = fopen(argv[2], "wb");
    const int blocks = (M + 127) / 128;

    // ---- a 2-D float array: copies in and out, then tex2D with every mode
    const int W = 37, H = 23;
    std::vector<float> img(W * H);
    for (auto &v : img) v = uniform(-1, 1);
    record("img", img.data(), img.size() * 4);
    cudaChannelFormatDesc cf = cudaCreateChannelDesc<float>();
    cudaArray_t arr; CHECK(cudaMallocArray(&arr, &cf, W, H));
    const size_t hpitch = (W + 5) * 4;              // a host pitch wider than a row
    std::vector<float> padded(hpitch / 4 * H, -7.0f);
    for (int y = 0; y < H; y++) memcpy(&padded[y * hpitch / 4], &img[y * W], W * 4);
    CHECK(cudaMemcpy2DToArray(arr, 0, 0, padded.data(), hpitch, W * 4, H, cudaMemcpyHostToDevice));
    {
        cudaChannelFormatDesc got; cudaExtent ext; unsigned flags;
        CHECK(cudaArrayGetInfo(&got, &ext, &flags, arr));
        int info[5] = {got.x, got.f, (int)ext.width, (int)ext.height, (int)ext.depth};
        record("array_info", info, sizeof info);
        std::vector<float> back(W * H, -1.0f);      // array -> host
        CHECK(cudaMemcpy2DFromArray(back.data(), W * 4, arr, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
        record("roundtrip", back.data(), back.size() * 4);
        cudaArray_t arr2; CHECK(cudaMallocArray(&arr2, &cf, W, H));   // array -> array, a sub-box
        CHECK(cudaMemcpy2DArrayToArray(arr2, 0, 0, arr, 0, 0, W * 4, H, cudaMemcpyDeviceToDevice));
        float *d = device_poisoned<float>(8 * 5);    // array -> device, a sub-box at (3, 2)
        CHECK(cudaMemcpy2DFromArray(d, 8 * 4, arr2, 3 * 4, 2, 8 * 4, 5, cudaMemcpyDeviceToDevice));
        record_device("subbox", d, 8 * 5);
        CHECK(cudaFree(d)); CHECK(cudaFreeArray(arr2));
    }
    std::vector<float2> c2(M);
    const float border[4] = {uniform(-2, 2), uniform(-2, 2), uniform(-2, 2), uniform(-2, 2)};
    record("border", border, sizeof border);
    float2 *dc2 = device_copy(c2);
    float *o = device_poisoned<float>(M);
    const cudaTextureAddressMode modes[4] = {cudaAddressModeWrap, cudaAddressModeClamp, cudaAddressModeMirror,
                                             cudaAddressModeBorder};
    for (int normalized = 0; normalized < 2; normalized++)
        for (int m = 0; m < 4; m++)
            for (int filter = 0; filter < 2; filter++) {
                if (!normalized && (m == 0 || m == 2)) continue;   // wrap and mirror need normalised coordinates
                for (auto &c : c2)
                    c = normalized ? make_float2(uniform(-1.5f, 2.5f), uniform(-1.5f, 2.5f))
                                   : make_float2(uniform(-5, W + 5), uniform(-5, H + 5));
                CHECK(cudaMemcpy(dc2, c2.data(), M * 8, cudaMemcpyHostToDevice));
                cudaTextureObject_t t = texture(arr, modes[m], filter ? cudaFilterModeLinear : cudaFilterModePoint,
                                                normalized, cudaReadModeElementType, border);
                CHECK(cudaMemset(o, 0xFF, M * 4));
                sample2d<<<blocks, 128>>>(t, dc2, o, M);
                CHECK(cudaGetLastError());
                char name[64];
                snprintf(name, sizeof name, "tex2d_n%d_m%d_f%d_coords", normalized, m, filter);
                record(name, c2.data(), M * 8);
                snprintf(name, sizeof name, "tex2d_n%d_m%d_f%d", normalized, m, filter);
                record_device(name, o, M);
                CHECK(cudaDestroyTextureObject(t));
            }

    // ---- tex2Dgather: component 0 of the bilinear footprint (clamp, unnormalised)
    {
        for (auto &c : c2) c = make_float2(uniform(-3, W + 3), uniform(-3, H + 3));
        CHECK(cudaMemcpy(dc2, c2.data(), M * 8, cudaMemcpyHostToDevice));
        cudaTextureObject_t t = texture(arr, cudaAddressModeClamp, cudaFilterModePoint, 0, cudaReadModeElementType, 0);
        float4 *o4 = device_poisoned<float4>(M);
        gather2d<<<blocks, 128>>>(t, dc2, o4, M);
        record("gather_coords", c2.data(), M * 8);
        record_device("gather", o4, M);
        CHECK(cudaDestroyTextureObject(t)); CHECK(cudaFree(o4));
    }

    // ---- tex1Dfetch on linear memory, indices in and out of range
    {
        const int N = 1000;
        std::vector<float> lin(N);
        for (auto &v : lin) v = uniform(-100, 100);
        float *dl = device_copy(lin);
        std::vector<int> idx(M);
        for (auto &i : idx) i = (int)(next_u32() % (N + 40)) - 20;
        int *di = device_copy(idx);
        cudaResourceDesc rd; memset(&rd, 0, sizeof rd);
        rd.resType = cudaResourceTypeLinear; rd.res.linear.devPtr = dl;
        rd.res.linear.desc = cf; rd.res.linear.sizeInBytes = N * 4;
        cudaTextureDesc td; memset(&td, 0, sizeof td); td.readMode = cudaReadModeElementType;
        cudaTextureObject_t t; CHECK(cudaCreateTextureObject(&t, &rd, &td, NULL));
        CHECK(cudaMemset(o, 0xFF, M * 4));
        fetch1d<<<blocks, 128>>>(t, di, o, M);
        record("lin", lin.data(), N * 4);
        record("lin_idx", idx.data(), M * 4);
        record_device("fetch1d", o, M);
        cudaResourceDesc back; CHECK(cudaGetTextureObjectResourceDesc(&back, t));
        unsigned long long got[3] = {(unsigned long long)back.resType, (unsigned long long)(uintptr_t)back.res.linear.devPtr,
                                     (unsigned long long)back.res.linear.sizeInBytes};
        unsigned long long want[3] = {(unsigned long long)cudaResourceTypeLinear, (unsigned long long)(uintptr_t)dl,
                                      (unsigned long long)(N * 4)};
        printf("resource desc round trip: %s\n", memcmp(got, want, sizeof got) ? "differs" : "same");
        CHECK(cudaDestroyTextureObject(t)); CHECK(cudaFree(dl)); CHECK(cudaFree(di));
    }

    // ---- uchar4: normalised-float reads (point and linear) and element-type reads
    {
        const int UW = 19, UH = 13;
        std::vector<uchar4> u(UW * UH);
        for (auto &v : u) v = make_uchar4(next_u32() & 255, next_u32() & 255, next_u32() & 255, next_u32() & 255);
        record("u8img", u.data(), u.size() * 4);
        cudaChannelFormatDesc cu = cudaCreateChannelDesc<uchar4>();
        cudaArray_t ua; CHECK(cudaMallocArray(&ua, &cu, UW, UH));
        CHECK(cudaMemcpy2DToArray(ua, 0, 0, u.data(), UW * 4, UW * 4, UH, cudaMemcpyHostToDevice));
        for (auto &c : c2) c = make_float2(uniform(-2, UW + 2), uniform(-2, UH + 2));
        CHECK(cudaMemcpy(dc2, c2.data(), M * 8, cudaMemcpyHostToDevice));
        record("u8_coords", c2.data(), M * 8);
        float4 *o4 = device_poisoned<float4>(M);
        for (int filter = 0; filter < 2; filter++) {
            cudaTextureObject_t t = texture(ua, cudaAddressModeClamp, filter ? cudaFilterModeLinear : cudaFilterModePoint,
                                            0, cudaReadModeNormalizedFloat, 0);
            CHECK(cudaMemset(o4, 0xFF, M * 16));
            sample2d4<<<blocks, 128>>>(t, dc2, o4, M);
            record_device(filter ? "u8_norm_linear" : "u8_norm_point", o4, M);
            CHECK(cudaDestroyTextureObject(t));
        }
        cudaTextureObject_t t = texture(ua, cudaAddressModeClamp, cudaFilterModePoint, 0, cudaReadModeElementType, 0);
        uint4 *ou = device_poisoned<uint4>(M);
        sample2du4<<<blocks, 128>>>(t, dc2, ou, M);
        record_device("u8_element", ou, M);
        CHECK(cudaDestroyTextureObject(t)); CHECK(cudaFree(o4)); CHECK(cudaFree(ou)); CHECK(cudaFreeArray(ua));
    }

    // ---- tex3D, linear filtering, clamp; a 3-D array filled with cudaMemcpy3D
    {
        const int X = 9, Y = 7, Z = 5;
        std::vector<float> vol(X * Y * Z);
        for (auto &v : vol) v = uniform(-1, 1);
        record("vol", vol.data(), vol.size() * 4);
        cudaArray_t va; CHECK(cudaMalloc3DArray(&va, &cf, make_cudaExtent(X, Y, Z)));
        cudaMemcpy3DParms p; memset(&p, 0, sizeof p);
        p.srcPtr = make_cudaPitchedPtr(vol.data(), X * 4, X, Y); p.dstArray = va;
        p.extent = make_cudaExtent(X, Y, Z); p.kind = cudaMemcpyHostToDevice;
        CHECK(cudaMemcpy3D(&p));
        std::vector<float> back(X * Y * Z, -1.0f);
        memset(&p, 0, sizeof p);
        p.srcArray = va; p.dstPtr = make_cudaPitchedPtr(back.data(), X * 4, X, Y);
        p.extent = make_cudaExtent(X, Y, Z); p.kind = cudaMemcpyDeviceToHost;
        CHECK(cudaMemcpy3D(&p));
        record("vol_roundtrip", back.data(), back.size() * 4);
        std::vector<float4> c4(M);
        for (auto &c : c4) c = make_float4(uniform(-2, X + 2), uniform(-2, Y + 2), uniform(-2, Z + 2), 0);
        float4 *dc4 = device_copy(c4);
        record("vol_coords", c4.data(), M * 16);
        for (int filter = 0; filter < 2; filter++) {
            cudaTextureObject_t t = texture(va, cudaAddressModeClamp, filter ? cudaFilterModeLinear : cudaFilterModePoint,
                                            0, cudaReadModeElementType, 0);
            CHECK(cudaMemset(o, 0xFF, M * 4));
            sample3d<<<blocks, 128>>>(t, dc4, o, M);
            record_device(filter ? "tex3d_linear" : "tex3d_point", o, M);
            CHECK(cudaDestroyTextureObject(t));
        }
        CHECK(cudaFree(dc4)); CHECK(cudaFreeArray(va));
    }

    // ---- tex2DLayered, point sampling, wrap on normalised coordinates
    {
        const int X = 11, Y = 9, L = 3;
        std::vector<float> lay(X * Y * L);
        for (auto &v : lay) v = uniform(-1, 1);
        record("layers", lay.data(), lay.size() * 4);
        cudaArray_t la; CHECK(cudaMalloc3DArray(&la, &cf, make_cudaExtent(X, Y, L), cudaArrayLayered));
        cudaMemcpy3DParms p; memset(&p, 0, sizeof p);
        p.srcPtr = make_cudaPitchedPtr(lay.data(), X * 4, X, Y); p.dstArray = la;
        p.extent = make_cudaExtent(X, Y, L); p.kind = cudaMemcpyHostToDevice;
        CHECK(cudaMemcpy3D(&p));
        std::vector<float4> c4(M);
        for (auto &c : c4) c = make_float4(uniform(-1, 2), uniform(-1, 2), (float)(next_u32() % L), 0);
        float4 *dc4 = device_copy(c4);
        record("layer_coords", c4.data(), M * 16);
        cudaTextureObject_t t = texture(la, cudaAddressModeWrap, cudaFilterModePoint, 1, cudaReadModeElementType, 0);
        CHECK(cudaMemset(o, 0xFF, M * 4));
        sample2dlayered<<<blocks, 128>>>(t, dc4, o, M);
        record_device("tex2d_layered", o, M);
        CHECK(cudaDestroyTextureObject(t)); CHECK(cudaFree(dc4)); CHECK(cudaFreeArray(la));
    }

    // ---- surfaces: surf2Dread/surf2Dwrite between two arrays, boundary modes zero and clamp
    {
        const int SW = 33, SH = 17;
        std::vector<float> s(SW * SH);
        for (auto &v : s) v = uniform(-10, 10);
        record("surf_in", s.data(), s.size() * 4);
        cudaArray_t sa, sb;
        CHECK(cudaMallocArray(&sa, &cf, SW, SH, cudaArraySurfaceLoadStore));
        CHECK(cudaMallocArray(&sb, &cf, SW, SH, cudaArraySurfaceLoadStore));
        CHECK(cudaMemcpy2DToArray(sa, 0, 0, s.data(), SW * 4, SW * 4, SH, cudaMemcpyHostToDevice));
        std::vector<float> poison(SW * SH);
        memset(poison.data(), 0xFF, poison.size() * 4);
        CHECK(cudaMemcpy2DToArray(sb, 0, 0, poison.data(), SW * 4, SW * 4, SH, cudaMemcpyHostToDevice));
        cudaSurfaceObject_t ss = surface(sa), sd = surface(sb);
        surface_map<<<dim3((SW + 7) / 8, (SH + 7) / 8), dim3(8, 8)>>>(ss, sd, SW, SH);
        CHECK(cudaGetLastError());
        std::vector<float> res(SW * SH);
        CHECK(cudaMemcpy2DFromArray(res.data(), SW * 4, sb, 0, 0, SW * 4, SH, cudaMemcpyDeviceToHost));
        record("surf_out", res.data(), res.size() * 4);
        std::vector<int2> ci(M);
        for (auto &c : ci) c = make_int2((int)(next_u32() % (SW + 10)) - 5, (int)(next_u32() % (SH + 10)) - 5);
        int2 *dci = device_copy(ci);
        float *z = device_poisoned<float>(M), *cl = device_poisoned<float>(M);
        surface_modes<<<blocks, 128>>>(ss, dci, z, cl, M);
        record("surf_coords", ci.data(), M * 8);
        record_device("surf_zero", z, M);
        record_device("surf_clamp", cl, M);
        cudaTextureObject_t t = texture(sa, cudaAddressModeClamp, cudaFilterModePoint, 0, cudaReadModeElementType, 0);
        int *q = device_poisoned<int>(4);
        queries<<<1, 1>>>(t, ss, q);
        record_device("queries", q, 4);
        CHECK(cudaDestroyTextureObject(t)); CHECK(cudaDestroySurfaceObject(ss)); CHECK(cudaDestroySurfaceObject(sd));
        CHECK(cudaFree(dci)); CHECK(cudaFree(z)); CHECK(cudaFree(cl)); CHECK(cudaFree(q));
        CHECK(cudaFreeArray(sa)); CHECK(cudaFreeArray(sb));
    }
    // ---- half floats read as float (linear), short2 as normalised floats, a pitched 2-D
    // resource with a border, tex1D with mirror on a 1-D array
    {
        const int HW = 21, HH = 11;
        std::vector<__half> hv(HW * HH);
        std::vector<float> hf(HW * HH);
        for (int k = 0; k < HW * HH; k++) { hv[k] = __float2half(uniform(-4, 4)); hf[k] = __half2float(hv[k]); }
        record("half_img", hf.data(), hf.size() * 4);
        cudaChannelFormatDesc ch = cudaCreateChannelDescHalf();
        cudaArray_t ha; CHECK(cudaMallocArray(&ha, &ch, HW, HH));
        CHECK(cudaMemcpy2DToArray(ha, 0, 0, hv.data(), HW * 2, HW * 2, HH, cudaMemcpyHostToDevice));
        for (auto &c : c2) c = make_float2(uniform(-2, HW + 2), uniform(-2, HH + 2));
        CHECK(cudaMemcpy(dc2, c2.data(), M * 8, cudaMemcpyHostToDevice));
        record("half_coords", c2.data(), M * 8);
        cudaTextureObject_t t = texture(ha, cudaAddressModeClamp, cudaFilterModeLinear, 0, cudaReadModeElementType, 0);
        CHECK(cudaMemset(o, 0xFF, M * 4));
        sample2d<<<blocks, 128>>>(t, dc2, o, M);
        record_device("half_linear", o, M);
        CHECK(cudaDestroyTextureObject(t)); CHECK(cudaFreeArray(ha));

        std::vector<short2> sv(HW * HH);
        for (auto &v : sv) v = make_short2((short)(next_u32() & 0xFFFF), (short)(next_u32() & 0xFFFF));
        record("s16_img", sv.data(), sv.size() * 4);
        cudaChannelFormatDesc cs = cudaCreateChannelDesc<short2>();
        cudaArray_t sa; CHECK(cudaMallocArray(&sa, &cs, HW, HH));
        CHECK(cudaMemcpy2DToArray(sa, 0, 0, sv.data(), HW * 4, HW * 4, HH, cudaMemcpyHostToDevice));
        t = texture(sa, cudaAddressModeClamp, cudaFilterModePoint, 0, cudaReadModeNormalizedFloat, 0);
        float2 *o2 = device_poisoned<float2>(M);
        sample2d2<<<blocks, 128>>>(t, dc2, o2, M);
        record_device("s16_norm", o2, M);
        CHECK(cudaDestroyTextureObject(t)); CHECK(cudaFreeArray(sa)); CHECK(cudaFree(o2));

        float *pm; size_t pitch;                    // the 2-D float image again, in pitched memory
        CHECK(cudaMallocPitch(&pm, &pitch, W * 4, H));
        CHECK(cudaMemcpy2D(pm, pitch, img.data(), W * 4, W * 4, H, cudaMemcpyHostToDevice));
        cudaResourceDesc rd; memset(&rd, 0, sizeof rd);
        rd.resType = cudaResourceTypePitch2D; rd.res.pitch2D.devPtr = pm; rd.res.pitch2D.desc = cf;
        rd.res.pitch2D.width = W; rd.res.pitch2D.height = H; rd.res.pitch2D.pitchInBytes = pitch;
        cudaTextureDesc td; memset(&td, 0, sizeof td);
        td.addressMode[0] = td.addressMode[1] = cudaAddressModeBorder; td.filterMode = cudaFilterModeLinear;
        td.readMode = cudaReadModeElementType;
        for (int k = 0; k < 4; k++) td.borderColor[k] = border[k];
        CHECK(cudaCreateTextureObject(&t, &rd, &td, NULL));
        for (auto &c : c2) c = make_float2(uniform(-3, W + 3), uniform(-3, H + 3));
        CHECK(cudaMemcpy(dc2, c2.data(), M * 8, cudaMemcpyHostToDevice));
        record("pitch2d_coords", c2.data(), M * 8);
        CHECK(cudaMemset(o, 0xFF, M * 4));
        sample2d<<<blocks, 128>>>(t, dc2, o, M);
        record_device("pitch2d_border_linear", o, M);
        CHECK(cudaDestroyTextureObject(t)); CHECK(cudaFree(pm));

        const int N1 = 29;                          // tex1D, normalised, mirror, linear
        std::vector<float> row(N1);
        for (auto &v : row) v = uniform(-1, 1);
        record("row", row.data(), N1 * 4);
        cudaArray_t ra; CHECK(cudaMallocArray(&ra, &cf, N1));
        CHECK(cudaMemcpyToArray(ra, 0, 0, row.data(), N1 * 4, cudaMemcpyHostToDevice));
        std::vector<float> c1(M);
        for (auto &c : c1) c = uniform(-2.5f, 3.5f);
        float *dc1 = device_copy(c1);
        record("row_coords", c1.data(), M * 4);
        t = texture(ra, cudaAddressModeMirror, cudaFilterModeLinear, 1, cudaReadModeElementType, 0);
        CHECK(cudaMemset(o, 0xFF, M * 4));
        sample1d<<<blocks, 128>>>(t, dc1, o, M);
        record_device("tex1d_mirror_linear", o, M);
        CHECK(cudaDestroyTextureObject(t)); CHECK(cudaFreeArray(ra)); CHECK(cudaFree(dc1));
    }

    // ---- surf3Dwrite into a 3-D array of shorts, surf1Dread of int2 from a 1-D array
    {
        const int X = 6, Y = 5, Z = 4;
        cudaChannelFormatDesc cs = cudaCreateChannelDesc<short>();
        cudaArray_t va; CHECK(cudaMalloc3DArray(&va, &cs, make_cudaExtent(X, Y, Z), cudaArraySurfaceLoadStore));
        cudaSurfaceObject_t s3 = surface(va);
        surface_3d<<<Z, dim3(X, Y)>>>(s3, X, Y, Z);
        CHECK(cudaGetLastError());
        std::vector<short> back(X * Y * Z, -1);
        cudaMemcpy3DParms p; memset(&p, 0, sizeof p);
        p.srcArray = va; p.dstPtr = make_cudaPitchedPtr(back.data(), X * 2, X, Y);
        p.extent = make_cudaExtent(X, Y, Z); p.kind = cudaMemcpyDeviceToHost;
        CHECK(cudaMemcpy3D(&p));
        record("surf3d", back.data(), back.size() * 2);
        CHECK(cudaDestroySurfaceObject(s3)); CHECK(cudaFreeArray(va));

        const int N1 = 40;
        std::vector<int2> iv(N1);
        for (auto &v : iv) v = make_int2((int)(next_u32() % 1000), (int)(next_u32() % 1000));
        record("surf1d_in", iv.data(), N1 * 8);
        cudaChannelFormatDesc ci = cudaCreateChannelDesc<int2>();
        cudaArray_t ia; CHECK(cudaMallocArray(&ia, &ci, N1, 0, cudaArraySurfaceLoadStore));
        CHECK(cudaMemcpy2DToArray(ia, 0, 0, iv.data(), N1 * 8, N1 * 8, 1, cudaMemcpyHostToDevice));
        cudaSurfaceObject_t s1 = surface(ia);
        int *oi = device_poisoned<int>(N1);
        surface_1d<<<1, 64>>>(s1, oi, N1);
        record_device("surf1d", oi, N1);
        CHECK(cudaDestroySurfaceObject(s1)); CHECK(cudaFreeArray(ia)); CHECK(cudaFree(oi));
    }

    // ---- a mipmapped 2-D array (4 levels): tex2DLod with point and linear filtering between
    // levels (bias and level clamps), tex2DGrad, and tex2D (level 0)
    {
        const int MW = 37, MH = 23, LEVELS = 4;
        cudaMipmappedArray_t mm;
        CHECK(cudaMallocMipmappedArray(&mm, &cf, make_cudaExtent(MW, MH, 0), LEVELS));
        for (int k = 0; k < LEVELS; k++) {
            cudaArray_t level; CHECK(cudaGetMipmappedArrayLevel(&level, mm, k));
            int w = MW >> k > 1 ? MW >> k : 1, h = MH >> k > 1 ? MH >> k : 1;
            std::vector<float> v(w * h);
            for (auto &x : v) x = uniform(-1, 1);
            CHECK(cudaMemcpy2DToArray(level, 0, 0, v.data(), w * 4, w * 4, h, cudaMemcpyHostToDevice));
            char name[32]; snprintf(name, sizeof name, "mip%d", k);
            record(name, v.data(), v.size() * 4);
        }
        std::vector<float4> c4(M);
        for (auto &c : c4) c = make_float4(uniform(-0.2f, 1.2f), uniform(-0.2f, 1.2f), uniform(-1, 4.5f), 0);
        float4 *dc4 = device_copy(c4);
        record("mip_lod_coords", c4.data(), M * 16);
        const float params[3] = {0.25f, 0.0f, 2.5f};       // bias, min and max level clamps
        record("mip_params", params, sizeof params);
        for (int mf = 0; mf < 2; mf++) {
            cudaResourceDesc rd; memset(&rd, 0, sizeof rd);
            rd.resType = cudaResourceTypeMipmappedArray; rd.res.mipmap.mipmap = mm;
            cudaTextureDesc td; memset(&td, 0, sizeof td);
            td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp; td.filterMode = cudaFilterModeLinear;
            td.readMode = cudaReadModeElementType; td.normalizedCoords = 1;
            td.mipmapFilterMode = mf ? cudaFilterModeLinear : cudaFilterModePoint;
            td.mipmapLevelBias = params[0]; td.minMipmapLevelClamp = params[1]; td.maxMipmapLevelClamp = params[2];
            cudaTextureObject_t t; CHECK(cudaCreateTextureObject(&t, &rd, &td, NULL));
            CHECK(cudaMemset(o, 0xFF, M * 4));
            mip_lod<<<blocks, 128>>>(t, dc4, o, M);
            record_device(mf ? "mip_lod_linear" : "mip_lod_point", o, M);
            if (mf) {
                std::vector<float4> g(M);
                for (auto &c : g) c = make_float4(uniform(0, 1), uniform(0, 1), uniform(0, 0.3f), uniform(0, 0.3f));
                float4 *dg = device_copy(g);
                record("mip_grad_coords", g.data(), M * 16);
                CHECK(cudaMemset(o, 0xFF, M * 4));
                mip_grad<<<blocks, 128>>>(t, dg, o, M);
                record_device("mip_grad", o, M);
                for (auto &c : c2) c = make_float2(uniform(-0.2f, 1.2f), uniform(-0.2f, 1.2f));
                CHECK(cudaMemcpy(dc2, c2.data(), M * 8, cudaMemcpyHostToDevice));
                record("mip_plain_coords", c2.data(), M * 8);
                CHECK(cudaMemset(o, 0xFF, M * 4));
                sample2d<<<blocks, 128>>>(t, dc2, o, M);
                record_device("mip_plain", o, M);
                CHECK(cudaFree(dg));
            }
            CHECK(cudaDestroyTextureObject(t));
        }
        CHECK(cudaFree(dc4)); CHECK(cudaFreeMipmappedArray(mm));
    }

    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(o)); CHECK(cudaFree(dc2)); CHECK(cudaFreeArray(arr));
    fclose(out);
    printf("textures done\n");
    return 0;
}
