"""Just enough of ELF64 (little-endian) to read named sections of a binary or library."""
from __future__ import annotations

import struct


class ElfError(ValueError):
    pass


ELF64_HEADER = 64


def sections(data: bytes) -> dict:
    """{section name: (file offset, size, virtual address)}."""
    return {name: (off, size, addr) for name, _type, off, size, addr in section_table(data)}


def section_table(data: bytes) -> list:
    """[(name, type, file offset, size, virtual address)] in section-index order."""
    if data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if len(data) < ELF64_HEADER:
        raise ElfError(f"truncated ELF header: {len(data)} bytes of {ELF64_HEADER}")
    if data[4] != 2 or data[5] != 1:
        raise ElfError("only 64-bit little-endian ELF is supported")
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        str_off = headers[shstrndx][4]
        out = []
        for name_off, kind, _flags, addr, off, size, *_ in headers:
            end = data.index(b"\0", str_off + name_off)
            out.append((data[str_off + name_off:end].decode(), kind, off, size, addr))
        return out
    except (struct.error, IndexError, ValueError, OverflowError) as e:     # offsets past the file
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


STO_CUDA_ENTRY = 0x10        # st_other of a kernel's symbol in a cubin (device functions lack it)


def symbols(data: bytes) -> list:
    """[(name, type, st_other, section index, value, size)] of a file's .symtab."""
    symtab, strtab = section_bytes(data, ".symtab"), section_bytes(data, ".strtab")
    if symtab is None or strtab is None:
        return []
    out = []
    try:
        for off in range(0, len(symtab) - 23, 24):
            name_off, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", symtab, off)
            end = strtab.index(b"\0", name_off)
            out.append((strtab[name_off:end].decode("utf-8", "replace"), info & 0xF, other, shndx, value, size))
    except (struct.error, ValueError, OverflowError) as e:
        raise ElfError(f"malformed symbol table: {e}") from None
    return out


def entry_functions(data: bytes) -> list:
    """The kernels a cubin defines: its FUNC symbols marked as entries, in symbol order."""
    return [name for name, kind, other, *_ in symbols(data) if kind == 2 and other & STO_CUDA_ENTRY]


SHT_NOBITS = 8


def data_objects(data: bytes) -> list:
    """The module variables a cubin defines: [(name, 'global' or 'const', bytes)] for each
    OBJECT symbol in .nv.global (zeroed), .nv.global.init or a .nv.constant<N> bank other than
    a kernel's parameters (.nv.constant0.*)."""
    table = section_table(data)
    out = []
    for name, kind, _other, shndx, value, size in symbols(data):
        if kind != 1 or not 0 < shndx < len(table):
            continue
        section, stype, off, ssize, _ = table[shndx]
        if section in (".nv.global", ".nv.global.init"):
            space = "global"
        elif section.startswith(".nv.constant") and not section.startswith(".nv.constant0"):
            space = "const"
        else:
            continue
        if stype == SHT_NOBITS:
            out.append((name, space, bytes(size)))
        elif value + size <= ssize and off + value + size <= len(data):
            out.append((name, space, data[off + value:off + value + size]))
        else:
            raise ElfError(f"variable {name} runs past its section {section}")
    return out

