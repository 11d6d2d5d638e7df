"""Kernel names as people wrote them: C++ names demangled by the toolkit's cu++filt, or c++filt."""
from __future__ import annotations

import functools
import shutil
import subprocess


def demangled_names(mangled) -> dict:
    """{mangled: demangled} through cu++filt or c++filt when one is installed (best effort:
    {} without one)."""
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not tool or not mangled:
        return {}
    try:
        out = subprocess.run([tool], input="\n".join(mangled), capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(zip(mangled, out.splitlines()))


@functools.lru_cache(maxsize=256)
def readable(name: str) -> str:
    """`name` demangled where it is a C++ name and a demangler is installed, else as it is."""
    if not name.startswith("_Z"):
        return name
    return demangled_names([name]).get(name, name)
