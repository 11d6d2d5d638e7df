// A program against NVIDIA's CUDA 12 runtime (libcudart.so.12), which nvcc 13 no longer links:
// what nvcc's generated host code does is written out here. Arguments: the kernel's fatbinary
// (PTX only), the scale, the element count. The fatbinary is registered with the runtime, the
// kernel launched through cudaLaunchKernel, and results and errors printed for the test to check.
#include <cstdio>
#include <cstdlib>
#include <vector>

// The runtime's functions this program calls, declared here: the runtime wheel has no headers
// that compile alone, and their C interface is the same in every CUDA release since 12.0.
extern "C" {
typedef int cudaError_t;
struct dim3 { unsigned x, y, z; };
enum { cudaMemcpyDeviceToHost = 2 };
cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaMalloc(void **ptr, size_t size);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, int kind);
cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset, int kind);
cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shared, void *stream);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorName(cudaError_t error);
void **__cudaRegisterFatBinary(void *wrapper);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaUnregisterFatBinary(void **handle);
void __cudaRegisterFunction(void **handle, const char *host_function, char *device_function,
                            const char *device_name, int thread_limit, void *tid, void *bid,
                            void *block_dim, void *grid_dim, int *warp_size);
void __cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *device_name,
                       int ext, size_t size, int constant, int global);
}

struct FatbinWrapper { int magic; int version; const void *data; void *unused; };

static int scale;                        // stands for the device's `__constant__ int scale`
static void fill_stub() {}               // the host-side handle of the kernel `fill`

int main(int argc, char **argv) {
  FILE *f = fopen(argv[1], "rb");
  if (!f) { perror(argv[1]); return 2; }
  std::vector<char> image(1 << 20);
  image.resize(fread(image.data(), 1, image.size(), f));
  fclose(f);
  FatbinWrapper wrapper = {0x466243b1, 1, image.data(), nullptr};
  void **handle = __cudaRegisterFatBinary(&wrapper);
  __cudaRegisterFunction(handle, (const char *)fill_stub, (char *)"fill", "fill", -1,
                         nullptr, nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterVar(handle, (char *)&scale, (char *)"scale", "scale", 0, sizeof(int), 1, 0);
  __cudaRegisterFatBinaryEnd(handle);

  int version = 0;
  cudaRuntimeGetVersion(&version);
  printf("runtime: %d\n", version / 1000);
  int factor = atoi(argv[2]), n = atoi(argv[3]);
  int *d;
  printf("malloc: %s\n", cudaGetErrorName(cudaMalloc((void **)&d, n * sizeof(int))));
  printf("symbol: %s\n", cudaGetErrorName(cudaMemcpyToSymbol((const void *)&scale, &factor, sizeof factor, 0, 1)));
  void *args[] = {&d, &n};
  printf("launch: %s\n", cudaGetErrorName(cudaLaunchKernel((const void *)fill_stub, dim3{4, 1, 1}, dim3{256, 1, 1}, args, 0, 0)));
  std::vector<int> h(n);
  printf("copy: %s\n", cudaGetErrorName(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost)));
  long sum = 0;
  for (int v : h) sum += v;
  printf("sum: %ld\n", sum);
  printf("bad config: %s\n",
         cudaGetErrorName(cudaLaunchKernel((const void *)fill_stub, dim3{1, 1, 1}, dim3{2048, 1, 1}, args, 0, 0)));
  printf("last error: %s\n", cudaGetErrorName(cudaGetLastError()));
  printf("after clear: %s\n", cudaGetErrorName(cudaGetLastError()));
  cudaFree(d);
  __cudaUnregisterFatBinary(handle);
  return 0;
}
