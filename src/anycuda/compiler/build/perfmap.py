"""Names for `perf`: with ANYCUDA_PERF_MAP=1, every function of the code anycuda links (a
kernel's block function, its warp regions and block programs, the workers) is listed in
`/tmp/perf-<pid>.map`, the file where Linux's `perf report` looks up addresses of code made
at run time. Without it a profile of a kernel shows bare addresses.

The object's ELF symbol table gives each function's offset in its section and its size; the
address where MCJIT put the section comes from an exported function of the same section
(the internal ones have no address to ask for). Sections without one are left out.
"""
from __future__ import annotations

import os
import struct
import threading

_lock = threading.Lock()

_SHT_SYMTAB, _STT_FUNC, _STB_LOCAL = 2, 2, 0


def enabled() -> bool:
    return os.environ.get("ANYCUDA_PERF_MAP", "") not in ("", "0")


def path() -> str:
    return f"/tmp/perf-{os.getpid()}.map"


def function_symbols(object_code: bytes) -> list:
    """[(name, section index, offset, size, exported)] of the functions of a little-endian
    ELF64 relocatable object; [] for anything else."""
    if object_code[:4] != b"\x7fELF" or object_code[4] != 2 or object_code[5] != 1:
        return []
    shoff, = struct.unpack_from("<Q", object_code, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", object_code, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", object_code, shoff + i * shentsize) for i in range(shnum)]
    out = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != _SHT_SYMTAB or not entsize:
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, entsize):
            name_at, info, _, shndx, value, fsize = struct.unpack_from("<IBBHQQ", object_code, at)
            if info & 0xF != _STT_FUNC or not fsize:
                continue
            end = object_code.index(b"\0", strings + name_at)
            out.append((object_code[strings + name_at:end].decode("utf-8", "replace"), shndx, value, fsize,
                        info >> 4 != _STB_LOCAL))
    return out


def record(object_code: bytes, address_of) -> None:
    """Append the object's functions to this process's perf map (`address_of(name)`: where
    an exported function was linked, 0 where unknown)."""
    symbols = function_symbols(object_code)
    bases = {}
    for name, shndx, value, _, exported in symbols:
        if exported and shndx not in bases:
            address = address_of(name)
            if address:
                bases[shndx] = address - value
    lines = [f"{bases[shndx] + value:x} {size:x} {name}\n" for name, shndx, value, size, _ in symbols
             if shndx in bases]
    with _lock, open(path(), "a") as fh:
        fh.writelines(lines)
