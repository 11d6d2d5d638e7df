// y = a*x + y with the runtime API as most programs use it: cudaMalloc, cudaMemcpy, a <<<>>>
// launch, cudaDeviceSynchronize. Input file: int32 n, float32 a, n floats x, n floats y;
// the result (n floats) is written to the output file.
#include <cstdio>
#include <cstdlib>

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)

__global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: saxpy IN OUT\n"); return 2; }
  FILE *in = fopen(argv[1], "rb");
  int n = 0;
  float a = 0;
  if (!in || fread(&n, 4, 1, in) != 1 || fread(&a, 4, 1, in) != 1) { fprintf(stderr, "bad input\n"); return 2; }
  float *hx = (float *)malloc(n * sizeof(float)), *hy = (float *)malloc(n * sizeof(float));
  if (fread(hx, 4, n, in) != (size_t)n || fread(hy, 4, n, in) != (size_t)n) { fprintf(stderr, "short input\n"); return 2; }
  fclose(in);
  float *dx, *dy;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CHECK(cudaMemcpy(dx, hx, n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, hy, n * sizeof(float), cudaMemcpyHostToDevice));
  saxpy<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(hy, dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  FILE *out = fopen(argv[2], "wb");
  fwrite(hy, 4, n, out);
  fclose(out);
  printf("saxpy done n=%d\n", n);
  return 0;
}
