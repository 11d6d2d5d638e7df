// cuRAND's discrete distributions used from kernels: curandCreatePoissonDistribution on the
// host, curand_discrete with the distribution in a kernel. Prints, per thread,
// thread id then two draws from each of three distributions (lambda 10, 1000, 5000).
#include <cstdio>
#include <cstdlib>
#include <curand.h>
#include <curand_kernel.h>

__global__ void draw(unsigned long long seed, curandDiscreteDistribution_t a, curandDiscreteDistribution_t b,
                     curandDiscreteDistribution_t c, unsigned int* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  curandState s;
  curand_init(seed, t, 0, &s);
  out[6 * t + 0] = curand_discrete(&s, a);
  out[6 * t + 1] = curand_discrete(&s, a);
  curandState s2;
  curand_init(seed, t, 0, &s2);
  out[6 * t + 2] = curand_discrete(&s2, b);
  out[6 * t + 3] = curand_discrete(&s2, b);
  curandState s3;
  curand_init(seed, t, 0, &s3);
  out[6 * t + 4] = curand_discrete(&s3, c);
  out[6 * t + 5] = curand_discrete(&s3, c);
}

int main(int argc, char** argv) {
  unsigned long long seed = strtoull(argv[1], 0, 10);
  const int threads = 64;
  curandDiscreteDistribution_t a, b, c;
  if (curandCreatePoissonDistribution(10.0, &a) || curandCreatePoissonDistribution(1000.0, &b) ||
      curandCreatePoissonDistribution(5000.0, &c)) { printf("create failed\n"); return 1; }
  unsigned int* out;
  cudaMalloc(&out, sizeof(unsigned int) * 6 * threads);
  draw<<<2, threads / 2>>>(seed, a, b, c, out);
  unsigned int host[6 * threads];
  if (cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost) != cudaSuccess) { printf("kernel failed\n"); return 1; }
  for (int t = 0; t < threads; t++) {
    printf("%d", t);
    for (int i = 0; i < 6; i++) printf(" %u", host[6 * t + i]);
    printf("\n");
  }
  if (curandDestroyDistribution(a) || curandDestroyDistribution(b) || curandDestroyDistribution(c)) {
    printf("destroy failed\n"); return 1;
  }
  printf("destroy twice: %d\n", (int)curandDestroyDistribution(a));
  return 0;
}
