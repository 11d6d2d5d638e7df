"""Just enough of ELF64 (little-endian) to read named sections of a binary or library."""
from __future__ import annotations

import struct


class ElfError(ValueError):
    pass


def sections(data: bytes) -> dict:
    """{section name: (file offset, size, virtual address)}."""
    if data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ElfError("only 64-bit little-endian ELF is supported")
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        str_off = headers[shstrndx][4]
        out = {}
        for name_off, _type, _flags, addr, off, size, *_ in headers:
            end = data.index(b"\0", str_off + name_off)
            out[data[str_off + name_off:end].decode()] = (off, size, addr)
        return out
    except (struct.error, IndexError, ValueError) as e:
        raise ElfError(f"malformed ELF section table: {e}") from None


def section_bytes(data: bytes, name: str):
    """The contents of section `name`, or None when the file has no such section."""
    found = sections(data).get(name)
    if found is None:
        return None
    off, size, _ = found
    if off + size > len(data):
        raise ElfError(f"section {name} runs past the end of the file")
    return data[off:off + size]
