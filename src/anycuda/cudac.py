"""CUDA C++ to PTX: NVRTC when its wheel is installed, else `nvcc -ptx` from PATH.

Results are cached on disk (keyed by source, options and compiler identity), so a test
suite or a notebook compiles each kernel once. Cache entries are written atomically and an
unreadable one is compiled again.
"""
from __future__ import annotations

import ctypes
import glob
import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from .runtime.device import compute_capability

SUPPORTED_ARCHS = (75, 80, 86, 87, 89, 90)


class CompileError(RuntimeError):
    """CUDA C++ could not be compiled (the message carries the compiler's log)."""


def default_arch() -> int:
    major, minor = compute_capability()
    cc = major * 10 + minor
    fitting = [a for a in SUPPORTED_ARCHS if a <= cc]
    return fitting[-1] if fitting else SUPPORTED_ARCHS[0]


def _has_arch(options) -> bool:
    return any(o.startswith(("-arch", "--gpu-architecture", "-gencode", "--generate-code")) for o in options)


@lru_cache(maxsize=1)
def find_nvrtc():
    """Path of libnvrtc from the nvidia-cuda-nvrtc wheel or the system, or None."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []
    for root in roots:
        for pattern in ("cu13/lib/libnvrtc.so*", "cuda_nvrtc/lib/libnvrtc.so*", "cu12/lib/libnvrtc.so*"):
            hits = sorted(p for p in glob.glob(os.path.join(root, pattern)) if "builtins" not in p)
            if hits:
                return hits[0]
    return None


def find_nvcc():
    return shutil.which("nvcc")


def compiler_description() -> str:
    nvrtc, nvcc = find_nvrtc(), find_nvcc()
    if nvrtc:
        return f"NVRTC ({nvrtc})"
    if nvcc:
        return f"nvcc ({nvcc})"
    return "none (pip install nvidia-cuda-nvrtc, or install the CUDA toolkit for nvcc)"


@lru_cache(maxsize=1)
def _compiler_identity() -> str:
    nvrtc, nvcc = find_nvrtc(), find_nvcc()
    if nvrtc:
        return "nvrtc:" + nvrtc
    if nvcc:
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        return "nvcc:" + nvcc + out
    return ""


def _cache_dir() -> Path:
    root = os.environ.get("ANYCUDA_CACHE_DIR")
    if root:
        return Path(root) / "ptx"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "anycuda" / "ptx"


def compile_to_ptx(source: str, options=(), name: str = "kernel.cu") -> str:
    """PTX for CUDA C++ `source` (extern "C" names keep their spelling)."""
    options = tuple(options)
    identity = _compiler_identity()
    if not identity:
        raise CompileError("no CUDA C++ compiler found: pip install nvidia-cuda-nvrtc, or install the "
                           "CUDA toolkit so that nvcc is on PATH (or pass PTX: RawModule(ptx=...))")
    if not _has_arch(options):
        options = options + (f"-arch=sm_{default_arch()}",)
    key = hashlib.sha256("\0".join((identity, name, source) + options).encode()).hexdigest()
    path = _cache_dir() / key[:2] / (key + ".ptx")
    try:
        text = path.read_text()
        if text.lstrip().startswith(("//", ".version")):
            return text
    except (OSError, UnicodeDecodeError):
        pass
    ptx = _compile_nvrtc(source, options, name) if find_nvrtc() else _compile_nvcc(source, options, name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(ptx)
        os.replace(tmp, path)
    except OSError:
        pass
    return ptx


def _compile_nvcc(source, options, name) -> str:
    with tempfile.TemporaryDirectory(prefix="anycuda-nvcc-") as d:
        src = os.path.join(d, os.path.basename(name) if name.endswith(".cu") else "kernel.cu")
        out = os.path.join(d, "out.ptx")
        with open(src, "w") as fh:
            fh.write(source)
        cmd = [find_nvcc(), "-ptx", *options, "-o", out, src]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as e:
            raise CompileError(f"nvcc could not run: {e}") from None
        if r.returncode != 0:
            log = (r.stderr + r.stdout).replace(d + "/", "")
            raise CompileError(f"nvcc failed ({' '.join(options)}):\n{log}")
        return Path(out).read_text()


def _wheel_include_dirs():
    """CUDA headers shipped in NVIDIA's wheels: cuda_fp16.h and friends (nvidia-cuda-runtime),
    libcu++ and cooperative groups' dependencies (nvidia-cuda-cccl)."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []
    dirs = []
    for root in roots:
        for sub in ("cu13/include", "cuda_runtime/include", "cu12/include"):
            d = os.path.join(root, sub)
            if os.path.exists(os.path.join(d, "cuda_fp16.h")):
                dirs.append(d)
            if os.path.isdir(os.path.join(d, "cccl")):     # nvidia-cuda-cccl: cuda/std, nv/target
                dirs.append(os.path.join(d, "cccl"))
    return dirs


def _nvrtc_options(options):
    out = [f"-I{d}" for d in _wheel_include_dirs()]
    for o in options:
        if o.startswith("-arch=sm_"):
            out.append("--gpu-architecture=compute_" + o[len("-arch=sm_"):])
        elif o.startswith("--gpu-architecture=sm_"):
            out.append("--gpu-architecture=compute_" + o[len("--gpu-architecture=sm_"):])
        else:
            out.append(o)
    return out


def _compile_nvrtc(source, options, name) -> str:
    lib = ctypes.CDLL(find_nvrtc())
    prog = ctypes.c_void_p()
    check = lambda rc, what: None if rc == 0 else (_ for _ in ()).throw(CompileError(f"NVRTC {what} failed ({rc})"))
    check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None), "create")
    try:
        opts = [o.encode() for o in _nvrtc_options(options)]
        arr = (ctypes.c_char_p * len(opts))(*opts)
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value + 1)
        lib.nvrtcGetProgramLog(prog, log)
        if rc != 0:
            raise CompileError(f"NVRTC failed:\n{log.value.decode(errors='replace')}")
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value + 1)
        check(lib.nvrtcGetPTX(prog, ptx), "get PTX")
        return ptx.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
