"""Stand-ins for the parts of NVIDIA's toolchain that JIT users call at run time to get machine
code: small shared libraries with NVIDIA's sonames that `anycuda run` preloads, so that a
program (or the Python stack inside it) gets code anycuda runs, with no setting of its own.

- nvJitLink (numba-cuda, cuda.core): numba-cuda and cuda.core link through nvJitLink when its
  library exports `__nvJitLinkVersion` (numba-cuda then also turns on link-time optimisation,
  handing nvJitLink NVVM's LTO IR); nvJitLink's output is a cubin holding machine code only.
  cuda.pathfinder takes a library that is already loaded before it searches the pip wheels, so
  a preloaded library of that soname without the version symbol makes both fall back to the
  driver's cuLink* with PTX inputs, which anycuda's libcuda.so.1 answers.
- NVRTC (CuPy, cuda.core's `Program(code_type="cubin")`): asked for a cubin (-arch=sm_XX), the
  stand-in (nvrtc_standin.c) has NVIDIA's NVRTC compile PTX of that architecture and returns a
  fatbinary container carrying it. Found the same way as nvJitLink (pathfinder, or the soname
  a program is linked against), it forwards every other call to the real NVRTC, found through
  ANYCUDA_NVRTC_DIRS (nvrtc_folders).
- ptxas (Triton) is a program, not a library: see anycuda.ptxas.
"""
from __future__ import annotations

import glob
import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

NVJITLINK_STANDINS = ("libnvJitLink.so.13", "libnvJitLink.so.12")
NVRTC_STANDINS = ("libnvrtc.so.13", "libnvrtc.so.12")
STANDINS = NVJITLINK_STANDINS + NVRTC_STANDINS
NVRTC_SOURCE = Path(__file__).resolve().with_name("nvrtc_standin.c")

_NVJITLINK_STANDIN_SOURCE = """
/* anycuda's stand-in for libnvJitLink: exports no nvJitLink function, so its users fall back
   to the CUDA driver's linker (cuLink*), which anycuda implements over PTX. */
const char anycuda_nvjitlink_standin[] = "anycuda";
"""

# NVIDIA versions NVRTC's symbols by soname (nvrtcCompileProgram@@libnvrtc.so.13): programs
# linked against NVRTC ask for that version, so the stand-in defines it too
_NVRTC_VERSION_SCRIPT = "SONAME { global: nvrtc*; local: *; };\n"


def _compiler() -> list:
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc") or ["cc"]


def _install(staged: Path, folder: Path, name: str) -> None:
    partial = folder / (name + f".tmp{os.getpid()}")
    shutil.copy(staged, partial)
    os.replace(partial, folder / name)


def build_standins(folder: Path) -> None:
    """Compile every stand-in (one small shared library per soname) into `folder`."""
    with tempfile.TemporaryDirectory(prefix="anycuda-standins-") as tmp:
        tmp = Path(tmp)
        source = tmp / "nvjitlink.c"
        source.write_text(_NVJITLINK_STANDIN_SOURCE)
        for soname in NVJITLINK_STANDINS:
            subprocess.run(_compiler() + ["-shared", "-fPIC", "-o", str(tmp / soname), str(source),
                                          f"-Wl,-soname,{soname}"], check=True, capture_output=True)
            _install(tmp / soname, folder, soname)
        for soname in NVRTC_STANDINS:
            script = tmp / (soname + ".map")
            script.write_text(_NVRTC_VERSION_SCRIPT.replace("SONAME", soname))
            subprocess.run(_compiler() + ["-shared", "-fPIC", "-O2", f'-DSONAME="{soname}"', "-o", str(tmp / soname),
                                          str(NVRTC_SOURCE), f"-Wl,-soname,{soname}",
                                          f"-Wl,--version-script={script}", "-ldl", "-lpthread"],
                           check=True, capture_output=True)
            _install(tmp / soname, folder, soname)


def nvrtc_folders(site_folders=()) -> list:
    """Folders holding NVIDIA's NVRTC (libnvrtc.so.13 or .12) that the NVRTC stand-in may forward
    to: NVIDIA's pip wheels in `site_folders` (this environment's site-packages when none are
    given) and the CUDA toolkit of CUDA_PATH, CUDA_HOME or the nvcc on PATH."""
    if not site_folders:
        import site
        site_folders = site.getsitepackages() + [site.getusersitepackages()]
    found = []
    for base in site_folders:
        found += sorted(glob.glob(os.path.join(base, "nvidia", "cu1*", "lib")))
        found += sorted(glob.glob(os.path.join(base, "nvidia", "cuda_nvrtc", "lib")))
    toolkits = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        toolkits.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    for root in filter(None, toolkits):
        found += [os.path.join(root, "lib64")] + sorted(glob.glob(os.path.join(root, "targets", "*", "lib")))
    folders = []
    for folder in found:
        if folder not in folders and any(os.path.exists(os.path.join(folder, n)) for n in NVRTC_STANDINS):
            folders.append(folder)
    return folders
