"""On-disk cache of compiled code: kernels, block programs and modules' variables.

Keyed by a SHA-256 of the text of what was compiled (a kernel's unit, ptx/index.py), the host
CPU (name and features), LLVM's version, anycuda's version and a fingerprint of anycuda's own
compiler sources, so an upgraded or changed compiler never reuses stale code.

An entry is a pickle, and loading a pickle runs code: an entry is loaded only when it, its
folder and the cache folder belong to the user running anycuda and no one else may write
them (no group or world write bit). Folders are created 0700 and entries 0600, so a cache in
a shared or world-writable place is never code another user could have written; one that
fails the check is not used (one warning on stderr), and nothing is written into it.

Entries are written atomically (a private temporary file, then rename), so processes that
compile the same kernel at once each get a correct result and leave one entry. Each entry
carries a digest of its payload: a truncated or corrupt one is compiled again and rewritten
(one warning). A read-only or full cache folder only costs speed: anycuda runs without
caching (one warning). ANYCUDA_CACHE=0 turns the cache off; ANYCUDA_CACHE_DIR moves it.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import re
import stat
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from .. import irutil

FORMAT = 2
MAGIC = b"anycuda-cache\n"
_DIGEST = 32                     # bytes of a SHA-256
_warned = set()                  # the warnings given in this process


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
    root = _package_root()
    return [(str(p.relative_to(root)), p) for sub in ("ptx", "compiler") for p in sorted((root / sub).rglob("*.py"))]


def _package_root() -> Path:
    return Path(__file__).resolve().parents[2]          # the anycuda package


def anycuda_version() -> str:
    """anycuda's version, read from the package's __init__.py (importing the package from
    here would make the compiler depend on the layers above it)."""
    text = (_package_root() / "__init__.py").read_text()
    return re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1)


@lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """Hash of what decides the code generated: anycuda's version, its compiler's sources,
    LLVM's version, the host CPU (and how masked stores are made for it), whether block programs
    carry stretch markers, and this cache's format."""
    h = hashlib.sha256()
    h.update(f"anycuda {anycuda_version()}\0".encode())
    for name, p in fingerprint_sources():
        h.update(name.encode())
        h.update(p.read_bytes())
    h.update(llvmlite.__version__.encode())
    h.update(llvm.get_host_cpu_name().encode())
    h.update(llvm.get_host_cpu_features().flatten().encode())
    h.update(f"masked stores blended: {irutil.masked_stores_slow()}\0".encode())     # (a choice one may force)
    h.update(f"masked loads plain: {irutil.masked_loads_slow()}\0".encode())
    h.update(f"stretch marks: {irutil.stretch_marks()}\0".encode())                  # (ANYCUDA_PERF_MAP=stretches)
    h.update(str(FORMAT).encode())
    return h.hexdigest()


def key_for(ptx_text: str, source_name: str) -> str:
    h = hashlib.sha256()
    h.update(compiler_fingerprint().encode())
    h.update(source_name.encode())
    h.update(b"\0")
    h.update(ptx_text.encode())
    return h.hexdigest()


# ---------------------------------------------------------------- trust

def untrusted_because(st: os.stat_result) -> str | None:
    """Why a file or folder with status `st` may hold what another user wrote, or None."""
    if st.st_uid != os.getuid():
        return f"it belongs to user id {st.st_uid}, not {os.getuid()}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"others may write it (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _warn_once(kind: str, message: str) -> None:
    if kind not in _warned:
        _warned.add(kind)
        sys.stderr.write(f"anycuda: {message}\n")


def trusted_folders(d: Path, folder: Path) -> bool:
    """Whether the cache folder `d` and the entry folder `folder` are the user's own (missing
    ones count as such: they are created private); one warning when they are not. A folder
    reached through a symbolic link is judged by the folder it names."""
    for path in (d, folder):
        try:
            why = untrusted_because(os.stat(path))
        except (FileNotFoundError, NotADirectoryError):
            continue              # to be created (or, if it cannot be, run without caching)
        except OSError as e:
            why = str(e)
        if why is not None:
            _warn_once(f"untrusted {d}", f"the compile cache {d} is not used: {path}: {why}")
            return False
    return True


# ---------------------------------------------------------------- entries

def _entry_path(d: Path, key: str) -> Path:
    return d / key[:2] / (key + ".pkl")


def encode(value) -> bytes:
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return MAGIC + hashlib.sha256(payload).digest() + payload


def decode(data: bytes):
    """The value of an entry's bytes; ValueError when they are truncated or corrupt."""
    head = len(MAGIC) + _DIGEST
    if len(data) < head or not data.startswith(MAGIC):
        raise ValueError("not an anycuda cache entry, or truncated")
    payload = data[head:]
    if hashlib.sha256(payload).digest() != data[len(MAGIC):head]:
        raise ValueError("its contents do not match their digest (truncated or corrupt)")
    return pickle.loads(payload)


def read_own_file(path: Path) -> bytes | None:
    """The bytes of cache entry `path` when it is the user's own regular file that no one else
    may write, else None (one warning when it exists but is not)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        _warn_once(f"unreadable {path}", f"the compile cache entry {path} cannot be read ({e}); compiling again")
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        why = untrusted_because(st) if stat.S_ISREG(st.st_mode) else "it is not a regular file"
        if why is not None:
            _warn_once(f"untrusted {path}", f"the compile cache entry {path} is not loaded: {why}")
            return None
        return fh.read()


def load(key: str):
    d = cache_dir()
    if d is None:
        return None
    path = _entry_path(d, key)
    if not trusted_folders(d, path.parent):
        return None
    data = read_own_file(path)
    if data is None:
        return None
    try:
        return decode(data)
    except Exception as e:        # truncated, corrupt, or classes this version lacks: compile again
        _warn_once(f"corrupt {path}", f"the compile cache entry {path} is unusable ({e}); compiling again")
        return None


def private_folder(path: Path) -> None:
    """Create `path` and the folders above it up to an existing one, each 0700."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass                  # another process made it meanwhile


def store(key: str, value) -> None:
    store_in(cache_dir(), key, value)


def store_in(d: Path | None, key: str, value) -> None:
    """Store `value` in the cache folder `d` (cache_dir() as it was when the work was asked
    for: a compile that finishes later belongs there, whatever the environment says then)."""
    if d is None:
        return
    path = _entry_path(d, key)
    if not trusted_folders(d, path.parent):
        return
    tmp = None
    try:
        private_folder(path.parent)
        if not trusted_folders(d, path.parent):
            return
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")      # 0600
        with os.fdopen(fd, "wb") as fh:
            fh.write(encode(value))
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        _warn_once(f"unwritable {d}", f"the compile cache {d} cannot be written ({e.strerror or e}); "
                                      f"running without caching")
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
