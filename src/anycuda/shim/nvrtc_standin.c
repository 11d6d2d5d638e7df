/* anycuda's stand-in for NVIDIA's NVRTC (libnvrtc.so.13 and .12), preloaded by `anycuda run`.

   JIT users (CuPy, cuda.core, ...) ask NVRTC for machine code of the device's architecture
   (-arch=sm_XX, then nvrtcGetCUBIN). A cubin of NVIDIA machine code cannot run on anycuda, so
   this library asks the real NVRTC for PTX of the same architecture (compute_XX) instead and
   hands back, as the "cubin", a fatbinary container carrying that PTX: the container CUDA's
   drivers load, anycuda's and NVIDIA's alike. Everything else is NVIDIA's NVRTC itself,
   reached through the real library (its parser, its headers, its errors and logs).

   The real library is the first file named SONAME, other than this one, in the folders of
   ANYCUDA_NVRTC_DIRS (set by `anycuda run`), LD_LIBRARY_PATH, CUDA_PATH/lib64,
   CUDA_HOME/lib64 and /usr/local/cuda/lib64. Compiled with -DSONAME="libnvrtc.so.NN". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvrtcResult;
typedef void *nvrtcProgram;
enum { NVRTC_SUCCESS = 0, NVRTC_ERROR_OUT_OF_MEMORY = 1, NVRTC_ERROR_INVALID_INPUT = 3,
       NVRTC_ERROR_INVALID_PROGRAM = 4, NVRTC_ERROR_INTERNAL_ERROR = 11 };

/* ---- finding the real NVRTC ---- */

static void *real_library;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

static int is_this_library(const char *path) {
    Dl_info self;
    char mine[PATH_MAX], theirs[PATH_MAX];
    if (!dladdr((void *)&is_this_library, &self) || !self.dli_fname)
        return 0;
    if (!realpath(self.dli_fname, mine) || !realpath(path, theirs))
        return 0;
    return strcmp(mine, theirs) == 0;
}

/* Try SONAME in each folder of a ':'-separated list; sets real_library on success. */
static void try_folders(const char *list, const char *suffix) {
    char folder[PATH_MAX], path[PATH_MAX];
    while (list && *list && !real_library) {
        size_t n = strcspn(list, ":");
        if (n > 0 && n < sizeof folder) {
            memcpy(folder, list, n);
            folder[n] = 0;
            snprintf(path, sizeof path, "%s%s/%s", folder, suffix, SONAME);
            if (!is_this_library(path)) {
                void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
                if (handle && dlsym(handle, "nvrtcCompileProgram"))
                    real_library = handle;
                else if (handle)
                    dlclose(handle);
            }
        }
        list += n + (list[n] == ':');
    }
}

static void find_real_library(void) {
    try_folders(getenv("ANYCUDA_NVRTC_DIRS"), "");
    try_folders(getenv("LD_LIBRARY_PATH"), "");
    try_folders(getenv("CUDA_PATH"), "/lib64");
    try_folders(getenv("CUDA_HOME"), "/lib64");
    try_folders("/usr/local/cuda", "/lib64");
    if (!real_library)
        fprintf(stderr, "anycuda: no NVIDIA NVRTC (%s) found to compile CUDA C++ with: install the "
                "NVRTC wheel of that version (nvidia-cuda-nvrtc) or name its folder in ANYCUDA_NVRTC_DIRS\n",
                SONAME);
}

static void *real(const char *name) {
    pthread_once(&real_once, find_real_library);
    return real_library ? dlsym(real_library, name) : NULL;
}

/* Functions passed through unchanged: every one that only NVRTC can answer. A function the real
   library lacks (an older or newer NVRTC) answers NVRTC_ERROR_INTERNAL_ERROR. FORWARD_AS makes a
   forwarder of another name, for the functions this library answers itself in some cases. */
#define FORWARD_AS(function, name, params, args)                            \
    nvrtcResult function params {                                           \
        nvrtcResult (*f) params = (nvrtcResult (*) params)real(#name);      \
        return f ? f args : NVRTC_ERROR_INTERNAL_ERROR;                     \
    }
#define FORWARD(name, params, args) FORWARD_AS(name, name, params, args)

FORWARD(nvrtcVersion, (int *major, int *minor), (major, minor))
FORWARD(nvrtcGetNumSupportedArchs, (int *count), (count))
FORWARD(nvrtcGetSupportedArchs, (int *archs), (archs))
FORWARD(nvrtcCreateProgram, (nvrtcProgram *prog, const char *src, const char *name, int count,
                             const char *const *headers, const char *const *include_names),
        (prog, src, name, count, headers, include_names))
FORWARD(nvrtcGetPTXSize, (nvrtcProgram prog, size_t *size), (prog, size))
FORWARD(nvrtcGetPTX, (nvrtcProgram prog, char *ptx), (prog, ptx))
FORWARD(nvrtcGetLTOIRSize, (nvrtcProgram prog, size_t *size), (prog, size))
FORWARD(nvrtcGetLTOIR, (nvrtcProgram prog, char *out), (prog, out))
FORWARD(nvrtcGetOptiXIRSize, (nvrtcProgram prog, size_t *size), (prog, size))
FORWARD(nvrtcGetOptiXIR, (nvrtcProgram prog, char *out), (prog, out))
FORWARD(nvrtcGetTileIRSize, (nvrtcProgram prog, size_t *size), (prog, size))
FORWARD(nvrtcGetTileIR, (nvrtcProgram prog, char *out), (prog, out))
FORWARD(nvrtcGetNVVMSize, (nvrtcProgram prog, size_t *size), (prog, size))
FORWARD(nvrtcGetNVVM, (nvrtcProgram prog, char *out), (prog, out))
FORWARD(nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t *size), (prog, size))
FORWARD(nvrtcGetProgramLog, (nvrtcProgram prog, char *log), (prog, log))
FORWARD(nvrtcAddNameExpression, (nvrtcProgram prog, const char *const expression), (prog, expression))
FORWARD(nvrtcGetLoweredName, (nvrtcProgram prog, const char *const expression, const char **lowered),
        (prog, expression, lowered))
FORWARD(nvrtcGetPCHHeapSize, (size_t *size), (size))
FORWARD(nvrtcSetPCHHeapSize, (size_t size), (size))
FORWARD(nvrtcGetPCHCreateStatus, (nvrtcProgram prog), (prog))
FORWARD(nvrtcGetPCHHeapSizeRequired, (nvrtcProgram prog, size_t *size), (prog, size))
FORWARD(nvrtcSetFlowCallback, (nvrtcProgram prog, int (*callback)(void *, void *), void *payload),
        (prog, callback, payload))
FORWARD(nvrtcInstallBundledHeaders, (const char *path, unsigned int flags, const char **log), (path, flags, log))
FORWARD(nvrtcGetBundledHeadersInfo, (void *info, const char **log), (info, log))
FORWARD(nvrtcRemoveBundledHeaders, (const char *path, const char **log), (path, log))
static FORWARD_AS(real_compile, nvrtcCompileProgram, (nvrtcProgram prog, int count, const char *const *options),
                  (prog, count, options))
static FORWARD_AS(real_destroy, nvrtcDestroyProgram, (nvrtcProgram *prog), (prog))
static FORWARD_AS(real_cubin_size, nvrtcGetCUBINSize, (nvrtcProgram prog, size_t *size), (prog, size))
static FORWARD_AS(real_cubin, nvrtcGetCUBIN, (nvrtcProgram prog, char *cubin), (prog, cubin))

const char *nvrtcGetErrorString(nvrtcResult result) {
    const char *(*f)(nvrtcResult) = (const char *(*)(nvrtcResult))real("nvrtcGetErrorString");
    return f ? f(result) : "NVRTC_ERROR_INTERNAL_ERROR (anycuda found no NVIDIA NVRTC to forward to)";
}

/* ---- programs asked for machine code ---- */

/* The programs compiled as PTX in place of a cubin, with the architecture asked for. */
struct machine_request { nvrtcProgram prog; unsigned sm; struct machine_request *next; };
static struct machine_request *requests;
static pthread_mutex_t requests_lock = PTHREAD_MUTEX_INITIALIZER;

static void forget_request(nvrtcProgram prog) {
    pthread_mutex_lock(&requests_lock);
    for (struct machine_request **r = &requests; *r; r = &(*r)->next)
        if ((*r)->prog == prog) {
            struct machine_request *gone = *r;
            *r = gone->next;
            free(gone);
            break;
        }
    pthread_mutex_unlock(&requests_lock);
}

static void note_request(nvrtcProgram prog, unsigned sm) {
    struct machine_request *r = malloc(sizeof *r);
    forget_request(prog);
    if (!r)
        return;
    r->prog = prog;
    r->sm = sm;
    pthread_mutex_lock(&requests_lock);
    r->next = requests;
    requests = r;
    pthread_mutex_unlock(&requests_lock);
}

static unsigned requested_sm(nvrtcProgram prog) {
    unsigned sm = 0;
    pthread_mutex_lock(&requests_lock);
    for (struct machine_request *r = requests; r; r = r->next)
        if (r->prog == prog)
            sm = r->sm;
    pthread_mutex_unlock(&requests_lock);
    return sm;
}

/* "sm_86" (or "sm_90a"): the same architecture as a virtual one, "compute_86", in `out`;
   returns the architecture number, 0 when `arch` names no real architecture. */
static unsigned as_virtual(const char *arch, char *out, size_t size) {
    unsigned sm;
    if (strncmp(arch, "sm_", 3) != 0 || sscanf(arch + 3, "%u", &sm) != 1)
        return 0;
    snprintf(out, size, "compute_%s", arch + 3);
    return sm;
}

static const char *const arch_flags[] = { "-arch", "--gpu-architecture" };

/* The option list with each real architecture made virtual; *sm gets the last one named. */
static char **virtual_options(int count, const char *const *options, unsigned *sm) {
    char **out = calloc(count > 0 ? count : 1, sizeof *out);
    if (!out)
        return NULL;
    for (int i = 0; i < count; i++) {
        const char *option = options[i], *arch = NULL;
        size_t prefix = 0;
        for (size_t f = 0; f < sizeof arch_flags / sizeof *arch_flags; f++) {
            size_t n = strlen(arch_flags[f]);
            if (strncmp(option, arch_flags[f], n) == 0 && option[n] == '=')
                arch = option + n + 1, prefix = n + 1;
            else if (i > 0 && strcmp(options[i - 1], arch_flags[f]) == 0)
                arch = option;
        }
        char virtual_arch[64];
        unsigned found = arch ? as_virtual(arch, virtual_arch, sizeof virtual_arch) : 0;
        if (found) {
            *sm = found;
            size_t size = prefix + strlen(virtual_arch) + 1;
            out[i] = malloc(size);
            if (out[i])
                snprintf(out[i], size, "%.*s%s", (int)prefix, option, virtual_arch);
        } else {
            out[i] = strdup(option);
        }
        if (!out[i]) {
            while (i >= 0)
                free(out[i--]);
            free(out);
            return NULL;
        }
    }
    return out;
}

/* ANYCUDA_LOG=api (or nvrtc) traces each compile to stderr: its options as NVRTC got them, the
   result and the time it took. */
static int tracing(void) {
    const char *log = getenv("ANYCUDA_LOG");
    return log && (strstr(log, "api") || strstr(log, "nvrtc"));
}

static void trace_compile(int count, char **options, nvrtcResult result, double seconds) {
    fprintf(stderr, "anycuda: nvrtcCompileProgram(");
    for (int i = 0; i < count; i++)
        fprintf(stderr, "%s%s", i ? " " : "", options[i]);
    fprintf(stderr, ") -> %d in %.2f s\n", result, seconds);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int count, const char *const *options) {
    if (!real("nvrtcCompileProgram"))
        return NVRTC_ERROR_INTERNAL_ERROR;
    if (count < 0 || (count > 0 && !options))
        return real_compile(prog, count, options);
    unsigned sm = 0;
    char **rewritten = virtual_options(count, options, &sm);
    if (!rewritten)
        return NVRTC_ERROR_OUT_OF_MEMORY;
    double start = now();
    nvrtcResult result = real_compile(prog, count, (const char *const *)rewritten);
    if (tracing())
        trace_compile(count, rewritten, result, now() - start);
    for (int i = 0; i < count; i++)
        free(rewritten[i]);
    free(rewritten);
    if (sm)
        note_request(prog, sm);
    else
        forget_request(prog);
    return result;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog) {
    if (prog)
        forget_request(*prog);
    return real_destroy(prog);
}

/* The fatbinary container: a 16-byte header and one 64-byte entry header before the PTX text,
   padded with zeros to 8 bytes (the layout anycuda.fatbin reads; nvcc writes the same fields). */
enum { CONTAINER_HEADER = 16, ENTRY_HEADER = 64 };

static size_t padded_text_size(size_t ptx_size) { return (ptx_size + 1 + 7) & ~(size_t)7; }

static void put16(char *at, uint16_t v) { memcpy(at, &v, 2); }
static void put32(char *at, uint32_t v) { memcpy(at, &v, 4); }
static void put64(char *at, uint64_t v) { memcpy(at, &v, 8); }

static void write_container(char *out, const char *ptx, size_t ptx_size, unsigned sm) {
    size_t payload = padded_text_size(ptx_size);
    unsigned major = 0, minor = 0;
    const char *version = strstr(ptx, ".version");
    if (version)
        sscanf(version + 8, " %u.%u", &major, &minor);
    memset(out, 0, CONTAINER_HEADER + ENTRY_HEADER + payload);
    put32(out, 0xBA55ED50);                    /* container magic */
    put16(out + 4, 1);                         /* version */
    put16(out + 6, CONTAINER_HEADER);
    put64(out + 8, ENTRY_HEADER + payload);
    char *entry = out + CONTAINER_HEADER;
    put16(entry, 1);                           /* kind: PTX */
    put16(entry + 2, 0x0101);
    put32(entry + 4, ENTRY_HEADER);
    put64(entry + 8, payload);
    put16(entry + 0x18, (uint16_t)minor);
    put16(entry + 0x1A, (uint16_t)major);
    put32(entry + 0x1C, sm);
    put64(entry + 0x28, 0x11);                 /* 64-bit addresses, Linux host */
    memcpy(entry + ENTRY_HEADER, ptx, ptx_size);
}

/* The PTX of a program compiled for a machine-code request (NUL-terminated, malloc'd). */
static char *program_ptx(nvrtcProgram prog, size_t *size, nvrtcResult *result) {
    size_t n = 0;
    *result = nvrtcGetPTXSize(prog, &n);
    if (*result != NVRTC_SUCCESS)
        return NULL;
    char *ptx = calloc(n + 1, 1);
    if (!ptx) {
        *result = NVRTC_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    if ((*result = nvrtcGetPTX(prog, ptx)) != NVRTC_SUCCESS) {
        free(ptx);
        return NULL;
    }
    *size = strlen(ptx);
    return ptx;
}

/* A program compiled for a machine-code request: the container's size in *size (when not
   NULL), the container itself in out (when not NULL). */
static nvrtcResult answer_with_container(nvrtcProgram prog, unsigned sm, size_t *size, char *out) {
    nvrtcResult result;
    size_t ptx_size = 0;
    char *ptx = program_ptx(prog, &ptx_size, &result);
    if (!ptx)
        return result;
    if (size)
        *size = CONTAINER_HEADER + ENTRY_HEADER + padded_text_size(ptx_size);
    if (out)
        write_container(out, ptx, ptx_size, sm);
    free(ptx);
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *size) {
    unsigned sm = prog ? requested_sm(prog) : 0;
    if (!sm)
        return real_cubin_size(prog, size);
    return size ? answer_with_container(prog, sm, size, NULL) : NVRTC_ERROR_INVALID_INPUT;
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin) {
    unsigned sm = prog ? requested_sm(prog) : 0;
    if (!sm)
        return real_cubin(prog, cubin);
    return cubin ? answer_with_container(prog, sm, NULL, cubin) : NVRTC_ERROR_INVALID_INPUT;
}
