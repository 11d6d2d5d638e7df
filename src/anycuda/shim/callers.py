"""Who calls a driver entry point, for the few answers that depend on it.

NVIDIA's driver answers the CUDA runtime (libcudart, or the copy of it linked into a program or
a library) partly through private paths, and one of its answers differs from the public driver
API's: a launch whose grid, block or shared memory is out of bounds is cudaErrorInvalidConfiguration
(9) for the runtime, as the runtime's documentation of cudaLaunchKernel says and as every
`kernel<<<1, 2048>>>` on a GPU shows, and CUDA_ERROR_INVALID_VALUE for a driver API caller
(numba-cuda, cuda-python, a program's own cuLaunchKernel). The runtime passes the driver's code on
unchanged, so the shim must give it the runtime's code itself.

The caller is told by its module (the program or shared object whose code made the call: dladdr of
the return address, in C). A module is the runtime's once it asks for one of the export tables only
the runtime asks for; the runtime does that before it resolves anything else. The price: a program
with the runtime linked in statically that also calls cuLaunchKernel itself gets the runtime's code
there too.
"""
from __future__ import annotations

import re

from ..runtime.errors import CudaError, LaunchConfigurationError

# cudaError_t's value for a launch configuration the device cannot run (driver_types.h)
CUDA_ERROR_INVALID_CONFIGURATION_FOR_RUNTIME = 9

# export tables that NVIDIA's runtime, and nothing else, asks for
RUNTIME_TABLES = frozenset({"BOOTSTRAP_BYPASS", "CUDART_INTERFACE"})

# The entry points that learn their caller. The shim's Python implements each as
# anycuda_<name>(..., const void *caller); the exported C function of the driver's name adds the
# caller's module.
PROTOTYPES = """
CUresult cuGetExportTable(const void **ppExportTable, const void *pExportTableId);
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                        unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra);
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra);
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                   unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream, void **kernelParams);
"""

PREFIX = "anycuda_"
_PROTOTYPE = re.compile(r"CUresult\s+(\w+)\((.*?)\);", re.S)


def _signatures():
    """(name, [declared parameters], [parameter names]) of each entry point in PROTOTYPES."""
    for name, params in _PROTOTYPE.findall(PROTOTYPES):
        declared = [" ".join(p.split()) for p in params.split(",")]
        yield name, declared, [re.findall(r"\w+", p)[-1] for p in declared]


NAMES = frozenset(name for name, _, _ in _signatures())

# cffi declarations of the Python implementations
DECLARATIONS = "".join(
    f'extern "Python" CUresult {PREFIX}{name}({", ".join(declared + ["const void *caller"])});\n'
    for name, declared, _ in _signatures())

# The exported entry points. The module of the last return address is kept per thread: a program
# calls from a handful of places, and dladdr walks the loaded objects.
SOURCE = """
#include <dlfcn.h>
static const void *anycuda_module_of(const void *code) {
    static __thread const void *last_code, *last_module;
    if (code != last_code) {
        Dl_info info;
        last_module = dladdr(code, &info) ? info.dli_fbase : 0;
        last_code = code;
    }
    return last_module;
}
""" + "".join(
    f"static CUresult {PREFIX}{name}({', '.join(declared + ['const void *caller'])});\n"
    f"__attribute__((visibility(\"default\"))) CUresult {name}({', '.join(declared)}) {{\n"
    f"    return {PREFIX}{name}({', '.join(names)}, anycuda_module_of(__builtin_return_address(0)));\n}}\n"
    for name, declared, names in _signatures())

_runtime_modules = set()


def note_table_request(table: str | None, caller: int) -> None:
    """A module asking for one of the runtime's export tables is the runtime's."""
    if table in RUNTIME_TABLES:
        _runtime_modules.add(caller)


def code_for(error: CudaError, caller: int) -> int:
    """The status that `error` gives the module `caller` (its load address)."""
    if isinstance(error, LaunchConfigurationError) and caller in _runtime_modules:
        return CUDA_ERROR_INVALID_CONFIGURATION_FOR_RUNTIME
    return int(error.code)
