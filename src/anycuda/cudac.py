"""CUDA C++ to PTX: NVRTC when its wheel is installed, else `nvcc -ptx` from PATH.

Results are cached on disk (keyed by source, options and compiler identity), so a test
suite or a notebook compiles each kernel once. Cache entries are written atomically and an
unreadable one is compiled again; as the compile cache's (compiler/build/cache.py), its folders
are private and an entry another user could have written is never read.
"""
from __future__ import annotations

import ctypes
import glob
import hashlib
import json
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from .compiler.build import cache
from .runtime.device import compute_capability

SUPPORTED_ARCHS = (75, 80, 86, 87, 89, 90)


class CompileError(RuntimeError):
    """CUDA C++ could not be compiled (the message carries the compiler's log)."""


def default_arch() -> int:
    """The sm_XX to compile for: the device's compute capability, clamped to sm_75...sm_90
    and to what the local nvcc supports."""
    major, minor = compute_capability()
    cc = major * 10 + minor
    archs = [a for a in SUPPORTED_ARCHS if a in _nvcc_archs()] or list(SUPPORTED_ARCHS)
    fitting = [a for a in archs if a <= cc]
    return fitting[-1] if fitting else archs[0]


@lru_cache(maxsize=1)
def _nvcc_archs() -> tuple:
    nvcc = find_nvcc()
    if not nvcc or find_nvrtc():
        return SUPPORTED_ARCHS
    try:
        out = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return SUPPORTED_ARCHS
    found = tuple(int(m) for m in re.findall(r"compute_(\d+)", out))
    return found or SUPPORTED_ARCHS


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


def _cache_dir() -> Path:
    root = os.environ.get("ANYCUDA_CACHE_DIR")
    if root:
        return Path(root) / "ptx"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "anycuda" / "ptx"


def _backend(backend):
    """'nvrtc' or 'nvcc': the one asked for, else NVRTC when installed, else nvcc."""
    if backend not in (None, "nvrtc", "nvcc"):
        raise ValueError(f"backend must be 'nvrtc' or 'nvcc', not {backend!r}")
    if backend == "nvrtc" and not find_nvrtc():
        raise CompileError("backend='nvrtc' asked for, but NVRTC is not installed: pip install nvidia-cuda-nvrtc "
                           "nvidia-cuda-runtime (or pip install anycuda[nvrtc])")
    if backend == "nvcc" and not find_nvcc():
        raise CompileError("backend='nvcc' asked for, but nvcc is not on PATH: install the CUDA toolkit")
    if backend:
        return backend
    if find_nvrtc():
        return "nvrtc"
    if find_nvcc():
        return "nvcc"
    raise CompileError("no CUDA C++ compiler found: pip install nvidia-cuda-nvrtc nvidia-cuda-runtime "
                       "(or pip install anycuda[nvrtc]), or install the CUDA toolkit so that nvcc is on PATH; "
                       "PTX runs without either (RawModule(ptx=...))")


def _identity(backend) -> str:
    nvrtc, nvcc = find_nvrtc(), find_nvcc()
    if backend == "nvrtc":
        return "nvrtc:" + nvrtc + ":" + str(os.path.getsize(nvrtc) if os.path.exists(nvrtc) else 0)
    return "nvcc:" + _nvcc_version(nvcc)


@lru_cache(maxsize=4)
def _nvcc_version(nvcc) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    return nvcc + "\n" + out


def _read_cache(path: Path, want_names: bool):
    """(PTX, names) from a cache entry, or None when it is missing or unreadable, or when
    another user could have written it (PTX is code anycuda runs: compiler/build/cache.py)."""
    if not cache.trusted_folders(_cache_dir(), path.parent):
        return None
    try:
        data = cache.read_own_file(path)
        if data is None:
            return None
        text = data.decode()
        if ".version" not in text or ".target" not in text:
            return None
        names = {}
        if want_names:
            data = cache.read_own_file(path.with_suffix(".names.json"))
            names = json.loads(data.decode()) if data is not None else None
            if not isinstance(names, dict):
                return None
        return text, names
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _write_atomically(path: Path, text: str) -> None:
    if not cache.trusted_folders(_cache_dir(), path.parent):
        return
    try:
        cache.private_folder(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass       # a cache that cannot be written only costs time


def compile_with_names(source: str, options=(), name: str = "kernel.cu", name_expressions=(),
                       backend: str = None):
    """(PTX, {name expression: lowered (mangled) name}) for CUDA C++ `source`.

    With NVRTC, name expressions such as "my_kernel<float>" are instantiated and their
    lowered names come from NVRTC. With nvcc they are instantiated by taking their address
    at the end of the source and the mapping is left empty (RawModule then matches
    demangled names)."""
    options = tuple(str(o) for o in options)
    name_expressions = tuple(name_expressions or ())
    backend = _backend(backend)
    if not _has_arch(options):
        options = options + (f"-arch=sm_{default_arch()}",)
    key = hashlib.sha256("\0".join((_identity(backend), name, source, "names:") + name_expressions
                                    + ("options:",) + options).encode()).hexdigest()
    path = _cache_dir() / key[:2] / (key + ".ptx")
    hit = _read_cache(path, bool(name_expressions))
    if hit is not None:
        return hit
    if backend == "nvrtc":
        ptx, names = _compile_nvrtc(source, options, name, name_expressions)
    else:
        ptx, names = _compile_nvcc(_with_instantiations(source, name_expressions), options, name), {}
    if name_expressions:
        _write_atomically(path.with_suffix(".names.json"), json.dumps(names))
    _write_atomically(path, ptx)
    return ptx, names


def compile_to_ptx(source: str, options=(), name: str = "kernel.cu", backend: str = None) -> str:
    """PTX for CUDA C++ `source` (extern "C" names keep their spelling). Cached on disk."""
    return compile_with_names(source, options, name, (), backend=backend)[0]


def _with_instantiations(source: str, name_expressions) -> str:
    if not name_expressions:
        return source
    lines = [source, "", "// anycuda: instantiate the name expressions"]
    for i, expr in enumerate(name_expressions):
        lines.append(f"static void* const __anycuda_name_expression_{i} __attribute__((unused)) = (void*)&({expr});")
    return "\n".join(lines) + "\n"


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


def _compile_nvrtc(source, options, name, name_expressions=()):
    lib = ctypes.CDLL(find_nvrtc())
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def check(rc, what):
        if rc != 0:
            raise CompileError(f"NVRTC {what} failed: {lib.nvrtcGetErrorString(rc).decode(errors='replace')}")

    prog = ctypes.c_void_p()
    check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None), "nvrtcCreateProgram")
    try:
        for expr in name_expressions:
            check(lib.nvrtcAddNameExpression(prog, expr.encode()), f"adding the name expression {expr!r}")
        opts = [o.encode() for o in _nvrtc_options(options)]
        arr = (ctypes.c_char_p * len(opts))(*opts)
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value + 1)
        lib.nvrtcGetProgramLog(prog, log)
        if rc != 0:
            raise CompileError(f"NVRTC could not compile {name} ({' '.join(options)}):\n"
                               f"{log.value.decode(errors='replace')}")
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value + 1)
        check(lib.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
        names = {}
        for expr in name_expressions:
            lowered = ctypes.c_char_p()
            check(lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(lowered)), f"lowering {expr!r}")
            names[expr] = lowered.value.decode()
        return ptx.value.decode(), names
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
