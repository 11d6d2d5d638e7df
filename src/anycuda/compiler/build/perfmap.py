"""Names for `perf`: with ANYCUDA_PERF_MAP=1, every function of the code anycuda links (a
kernel's block function, its warp regions and block programs, the workers) is listed in
`/tmp/perf-<pid>.map`, the file where Linux's `perf report` looks up addresses of code made
at run time. Without it a profile of a kernel shows bare addresses. ANYCUDA_PERF_MAP=stretches
names each stretch of a block program as a function of its own (`...block:stretch3`), from
the markers irutil.mark_stretch puts at their starts.

The object's ELF symbol table gives each function's offset in its section and its size; the
address where MCJIT put the section comes from an exported function of the same section
(the internal ones have no address to ask for). Sections without one are left out.
"""
from __future__ import annotations

import os
import struct
import threading

from ..irutil import MARK_BASE, MARK_OPCODE, stretch_marks

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
    sections = _section_headers(object_code)
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


def _section_headers(object_code: bytes) -> list:
    """The section headers of an ELF64 object, each the tuple of its fields (the fifth: the
    section's offset in the file)."""
    shoff, = struct.unpack_from("<Q", object_code, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", object_code, 0x3A)
    return [struct.unpack_from("<IIQQQQIIQQ", object_code, shoff + i * shentsize) for i in range(shnum)]


def _parts(name: str, code: bytes, size: int) -> list:
    """[(start, end, name)] of a function of `size` bytes: itself whole, or where its `code`
    holds stretch markers (irutil.mark_stretch), the code before the first as `name` and
    each stretch from its marker to the next as `name:stretchN`, side by side."""
    marks = []
    at = code.find(MARK_OPCODE)
    while at >= 0:
        n = int.from_bytes(code[at + 3:at + 7], "little") - MARK_BASE
        if 0 <= n < 1 << 16:
            marks.append((at, f"{name}:stretch{n}"))
        at = code.find(MARK_OPCODE, at + 1)
    starts = [(0, name)] + marks
    ends = [at for at, _ in marks] + [size]
    return [(start, end, part) for (start, part), end in zip(starts, ends) if end > start]


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
    offsets = [header[4] for header in _section_headers(object_code)] if stretch_marks() else []
    lines = []
    for name, shndx, value, size, _ in symbols:
        if shndx not in bases:
            continue
        code = object_code[offsets[shndx] + value:offsets[shndx] + value + size] if offsets else b""
        for start, end, part in _parts(name, code, size):
            lines.append(f"{bases[shndx] + value + start:x} {end - start:x} {part}\n")
    with _lock, open(path(), "a") as fh:
        fh.writelines(lines)
