"""On-disk cache of compiled code: kernels, block programs and modules' variables.

Keyed by the text of what was compiled (a kernel's unit, ptx/index.py), the host CPU (name and features), LLVM's version and a fingerprint
of anycuda's own compiler sources, so a changed compiler never reuses stale code. Entries
are written atomically (temporary file, then rename); one that cannot be read is
recompiled and overwritten. ANYCUDA_CACHE=0 turns the cache off; ANYCUDA_CACHE_DIR moves it.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from functools import lru_cache
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

FORMAT = 1


def cache_dir() -> Path | None:
    if os.environ.get("ANYCUDA_CACHE", "1") == "0":
        return None
    root = os.environ.get("ANYCUDA_CACHE_DIR")
    if root:
        return Path(root) / "kernels"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "anycuda" / "kernels"


def fingerprint_sources() -> list:
    """(name, path) of every module of ptx/ and compiler/, sub-packages included."""
    root = Path(__file__).resolve().parents[2]          # the anycuda package
    return [(str(p.relative_to(root)), p) for sub in ("ptx", "compiler") for p in sorted((root / sub).rglob("*.py"))]


@lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """Hash of the sources that decide what code is generated."""
    h = hashlib.sha256()
    for name, p in fingerprint_sources():
        h.update(name.encode())
        h.update(p.read_bytes())
    h.update(llvmlite.__version__.encode())
    h.update(llvm.get_host_cpu_name().encode())
    h.update(llvm.get_host_cpu_features().flatten().encode())
    h.update(str(FORMAT).encode())
    return h.hexdigest()


def key_for(ptx_text: str, source_name: str) -> str:
    h = hashlib.sha256()
    h.update(compiler_fingerprint().encode())
    h.update(source_name.encode())
    h.update(b"\0")
    h.update(ptx_text.encode())
    return h.hexdigest()


def load(key: str):
    d = cache_dir()
    if d is None:
        return None
    path = d / key[:2] / (key + ".pkl")
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except FileNotFoundError:
        return None
    except Exception:
        return None     # corrupt or from another version: compile again


def store(key: str, value) -> None:
    d = cache_dir()
    if d is None:
        return
    folder = d / key[:2]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, folder / (key + ".pkl"))
    except OSError:
        pass    # a read-only or full cache directory only costs speed
