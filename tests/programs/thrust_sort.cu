// Thrust (header-only, on CUB) unchanged: a device_vector sorted by CUB's radix sort and a
// transform_reduce. CUB picks its code paths by the kernels' PTX version (cudaFuncGetAttributes).
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/sort.h>
#include <thrust/reduce.h>
#include <thrust/transform.h>
#include <cstdio>
struct sq { __host__ __device__ long long operator()(int x) const { return (long long)x * x; } };
int main() {
  thrust::host_vector<int> h(5000);
  unsigned s = 12345;
  for (int i = 0; i < 5000; i++) { s = s * 1103515245u + 12345u; h[i] = (int)(s >> 8) % 100000; }
  thrust::device_vector<int> v = h;
  thrust::sort(v.begin(), v.end());
  thrust::host_vector<int> r = v;
  long long sum = thrust::transform_reduce(v.begin(), v.end(), sq(), 0LL, thrust::plus<long long>());
  printf("first %d last %d median %d sumsq %lld\n", r[0], r[4999], r[2500], sum);
  return 0;
}
