"""The format of the golden records (tests/golden/*.npz), shared by the recorder
(scripts/record_golden.py, run on an NVIDIA GPU) and the replay (tests/test_golden.py).

A record holds one module's cases: "meta" (JSON: the kernel file, nvcc options, nvcc release,
the device that ran it, and per case the kernel, launch shape and argument list) and, per
argument array, "c<case>_a<arg>" (the input) and "c<case>_a<arg>_out" (the buffer after the
launch; output buffers start as POISON_BYTE bytes) and, for a case that prints, "c<case>_text"
(the bytes device printf wrote to standard output). No anycuda import here: the recorder
runs where only CuPy is."""
from __future__ import annotations

import hashlib
import re

import numpy as np

POISON_BYTE = 0xCD
UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}     # bit patterns by item size

_ENTRY = re.compile(r"\.entry\s+(\w+)")


def top_level_items(ptx: str) -> list[str]:
    """The PTX split into its top-level statements and bodies (a directive ending in ';',
    or a function or entry up to its closing brace)."""
    items, current, depth = [], [], 0
    for line in ptx.splitlines():
        current.append(line)
        code = line.split("//", 1)[0]
        depth += code.count("{") - code.count("}")
        if depth == 0 and (code.rstrip().endswith((";", "}"))):
            items.append("\n".join(current))
            current = []
    if current:
        items.append("\n".join(current))
    return items


def kernel_fingerprint(ptx: str, kernel: str) -> str:
    """SHA-256 of the module's PTX with every entry but `kernel` removed: it changes when the
    kernel, a function or a declaration it might use, or the compiler's output changes, and
    not when another kernel of the same file does."""
    kept = []
    for item in top_level_items(ptx):
        m = _ENTRY.search(item)
        if m is None or m.group(1) == kernel:
            kept.append(item)
    return hashlib.sha256("\n".join(kept).encode()).hexdigest()


def array_key(case: int, arg: int, after: bool = False) -> str:
    return f"c{case}_a{arg}" + ("_out" if after else "")


def text_key(case: int) -> str:
    return f"c{case}_text"
