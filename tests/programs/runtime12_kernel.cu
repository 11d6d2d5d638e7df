// The device side of runtime12.cpp: fills p[i] with i * scale.
__constant__ int scale;

extern "C" __global__ void fill(int *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = i * scale;
}
