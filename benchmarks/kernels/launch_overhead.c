/* Empty-kernel launch overhead through the CUDA driver API from a C host program, the way an
   nvcc-built program reaches anycuda: run it as `anycuda run -- ./launch_overhead`, which puts
   anycuda's libcuda.so.1 first on the loader path. The driver functions are looked up with
   dlopen/dlsym, so no CUDA header or library is needed to build it.

   Prints one line of three numbers, in microseconds, for a <<<1, 1>>> kernel that returns at
   once: the launch-to-launch gap (the median of 7 rounds of 1000 back-to-back launches, each
   round ended by cuCtxSynchronize, per launch), the launch latency (the median time for one
   cuLaunchKernel call to return, of 1001 calls each made with the stream idle), and the round
   trip (the median time for a launch and the cuCtxSynchronize after it, of 1001). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*init_fn)(unsigned);
typedef int (*device_get_fn)(int *, int);
typedef int (*ctx_create_fn)(void **, unsigned, int);
typedef int (*module_load_fn)(void **, const void *);
typedef int (*get_function_fn)(void **, void *, const char *);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, void *, void **, void **);
typedef int (*sync_fn)(void);

static const char EMPTY_PTX[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry empty() { ret; }\n";

static void *need(void *lib, const char *name) {
  void *f = dlsym(lib, name);
  if (!f) {
    fprintf(stderr, "libcuda.so.1 has no %s\n", name);
    exit(2);
  }
  return f;
}

static void check(int rc, const char *what) {
  if (rc != 0) {
    fprintf(stderr, "%s failed: CUresult %d\n", what, rc);
    exit(3);
  }
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "cannot load libcuda.so.1: %s\n", dlerror());
    return 2;
  }
  init_fn cuInit = (init_fn)need(lib, "cuInit");
  device_get_fn cuDeviceGet = (device_get_fn)need(lib, "cuDeviceGet");
  ctx_create_fn cuCtxCreate = (ctx_create_fn)need(lib, "cuCtxCreate_v2");
  module_load_fn cuModuleLoadData = (module_load_fn)need(lib, "cuModuleLoadData");
  get_function_fn cuModuleGetFunction = (get_function_fn)need(lib, "cuModuleGetFunction");
  launch_fn cuLaunchKernel = (launch_fn)need(lib, "cuLaunchKernel");
  sync_fn cuCtxSynchronize = (sync_fn)need(lib, "cuCtxSynchronize");

  int dev;
  void *ctx, *mod, *fn;
  check(cuInit(0), "cuInit");
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  check(cuCtxCreate(&ctx, 0, dev), "cuCtxCreate");
  check(cuModuleLoadData(&mod, EMPTY_PTX), "cuModuleLoadData");
  check(cuModuleGetFunction(&fn, mod, "empty"), "cuModuleGetFunction");
  check(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), "cuLaunchKernel");   /* warm-up */
  check(cuCtxSynchronize(), "cuCtxSynchronize");

  enum { ROUNDS = 7, LAUNCHES = 1000 };
  double us[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    double t = now();
    for (int i = 0; i < LAUNCHES; i++)
      check(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), "cuLaunchKernel");
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    us[r] = (now() - t) / LAUNCHES * 1e6;
  }
  qsort(us, ROUNDS, sizeof us[0], by_value);

  enum { CALLS = 1001 };
  static double call_us[CALLS];
  for (int i = 0; i < CALLS; i++) {
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    double t = now();
    check(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), "cuLaunchKernel");
    call_us[i] = (now() - t) * 1e6;
  }
  check(cuCtxSynchronize(), "cuCtxSynchronize");
  qsort(call_us, CALLS, sizeof call_us[0], by_value);

  static double round_us[CALLS];
  for (int i = 0; i < CALLS; i++) {
    double t = now();
    check(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), "cuLaunchKernel");
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    round_us[i] = (now() - t) * 1e6;
  }
  qsort(round_us, CALLS, sizeof round_us[0], by_value);
  printf("%.3f %.3f %.3f\n", us[ROUNDS / 2], call_us[CALLS / 2], round_us[CALLS / 2]);
  return 0;
}
