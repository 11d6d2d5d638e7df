"""Fatbinary containers: what nvcc embeds in a binary, and where the PTX is.

A container (magic 0xBA55ED50) holds entries, each a header and a payload: PTX text
(kind 1) or an ELF cubin of SASS (kind 2). Payloads may be compressed (LZ4 block or zstd
frame, per the entry's flags). The host code registers containers through a wrapper
(magic 0x466243B1) whose version-2 form, used with -rdc=true, lists further containers.
Layouts were read off the output of nvcc 13.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .ptx.targets import NEWEST_ISA

CONTAINER_MAGIC = 0xBA55ED50
WRAPPER_MAGIC = 0x466243B1
KIND_PTX, KIND_ELF = 1, 2
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000
CONTAINER_HEADER = 16
ENTRY_HEADER_MIN = 64


class FatbinError(ValueError):
    """A malformed or unusable fatbinary (the message says what and where)."""


@dataclass(frozen=True)
class FatbinEntry:
    kind: str                  # 'ptx', 'elf' or 'unknown'
    sm: int                    # the architecture, e.g. 75
    ptx_version: tuple         # (major, minor) for PTX entries, else None
    flags: int
    compressed: str            # None, 'lz4' or 'zstd'
    payload: bytes             # decompressed

    def ptx_text(self) -> str:
        if self.kind != "ptx":
            raise FatbinError(f"entry for sm_{self.sm} is {self.kind}, not PTX")
        return self.payload.split(b"\0", 1)[0].decode("utf-8", "replace")


def _decompress(data: bytes, flags: int, size: int, where: int) -> tuple:
    try:
        if flags & FLAG_ZSTD:
            import zstandard
            return zstandard.ZstdDecompressor().decompress(data, max_output_size=max(size, 1 << 20)), "zstd"
        if flags & FLAG_LZ4:
            import lz4.block
            return lz4.block.decompress(data, uncompressed_size=size), "lz4"
    except Exception as e:
        raise FatbinError(f"entry at offset {where}: cannot decompress its payload: {e}") from None
    return data, None


def parse_container(data: bytes, offset: int = 0) -> tuple:
    """The entries of the container at `offset`, and the offset just after it."""
    if offset + CONTAINER_HEADER > len(data):
        raise FatbinError(f"truncated container header at offset {offset}")
    magic, _version, header_size, size = struct.unpack_from("<IHHQ", data, offset)
    if magic != CONTAINER_MAGIC:
        raise FatbinError(f"bad container magic 0x{magic:08x} at offset {offset}")
    start = offset + header_size
    end = start + size
    if header_size < CONTAINER_HEADER or end > len(data):
        raise FatbinError(f"container at offset {offset} claims {size} bytes; only {len(data) - start} present")
    entries, pos = [], start
    while pos < end:
        if pos + ENTRY_HEADER_MIN > end:
            raise FatbinError(f"truncated entry header at offset {pos}")
        kind, _, ehs, psize = struct.unpack_from("<HHIQ", data, pos)
        compressed_size = struct.unpack_from("<I", data, pos + 0x10)[0]
        minor, major = struct.unpack_from("<HH", data, pos + 0x18)
        sm = struct.unpack_from("<I", data, pos + 0x1C)[0]
        flags = struct.unpack_from("<Q", data, pos + 0x28)[0]
        full_size = struct.unpack_from("<Q", data, pos + 0x38)[0]
        if ehs < ENTRY_HEADER_MIN or psize == 0 and ehs == 0 or pos + ehs + psize > end:
            raise FatbinError(f"entry at offset {pos} has sizes (header {ehs}, payload {psize}) past its container")
        raw = data[pos + ehs:pos + ehs + psize]
        if flags & (FLAG_LZ4 | FLAG_ZSTD):
            if not 0 < compressed_size <= psize:
                raise FatbinError(f"entry at offset {pos}: compressed size {compressed_size} outside its payload")
            raw = raw[:compressed_size]
        payload, how = _decompress(raw, flags, full_size, pos)
        name = {KIND_PTX: "ptx", KIND_ELF: "elf"}.get(kind, "unknown")
        entries.append(FatbinEntry(name, sm, (major, minor) if kind == KIND_PTX else None, flags, how, payload))
        pos += ehs + psize
    return entries, end


def split_containers(data: bytes) -> list:
    """Containers laid back to back (8-byte aligned), as in a .nv_fatbin section: one list
    of entries per container."""
    containers, pos = [], 0
    while pos + CONTAINER_HEADER <= len(data):
        if struct.unpack_from("<I", data, pos)[0] != CONTAINER_MAGIC:
            if any(data[pos:pos + 8]):
                raise FatbinError(f"bad container magic at offset {pos}")
            pos += 8            # alignment padding
            continue
        found, pos = parse_container(data, pos)
        containers.append(found)
        pos = (pos + 7) // 8 * 8
    return containers


def parse_containers(data: bytes) -> list:
    """All entries of the containers laid back to back in `data`."""
    return [e for c in split_containers(data) for e in c]


def read_container_at(read_memory, address: int) -> list:
    """The entries of the container at `address`, read through read_memory(addr, n)."""
    head = read_memory(address, CONTAINER_HEADER)
    magic, _, header_size, size = struct.unpack("<IHHQ", head)
    if magic != CONTAINER_MAGIC:
        raise FatbinError(f"bad container magic 0x{magic:08x} at 0x{address:x}")
    if size > 1 << 32:
        raise FatbinError(f"container at 0x{address:x} claims an implausible {size} bytes")
    return parse_container(read_memory(address, header_size + size))[0]


def read_wrapper_containers(read_memory, address: int) -> list:
    """The containers a wrapper {magic, version, data, prelinked list} registers, each as
    its list of entries: the main container first, then (version 2, -rdc=true) one
    relocatable container per translation unit from the NULL-terminated list."""
    magic, version, data, extra = struct.unpack("<IIQQ", read_memory(address, 24))
    if magic != WRAPPER_MAGIC:
        raise FatbinError(f"bad fatbin wrapper magic 0x{magic:08x} at 0x{address:x}")
    containers = [read_container_at(read_memory, data) if data else []]
    if version == 2 and extra:
        for i in range(4096):
            p = struct.unpack("<Q", read_memory(extra + 8 * i, 8))[0]
            if not p:
                break
            containers.append(read_container_at(read_memory, p))
    return containers


def read_wrapper(read_memory, address: int) -> list:
    """Entries registered through a wrapper, all containers together."""
    return [e for c in read_wrapper_containers(read_memory, address) for e in c]


def ptx_modules(containers) -> list:
    """The PTX to run from a wrapper's containers, one entry per module to link: the best
    PTX of each relocatable container when there are such (-rdc=true: one per translation
    unit), else the main container's."""
    relocatable = [choose_ptx(c) for c in containers[1:]]
    relocatable = [e for e in relocatable if e is not None]
    if relocatable:
        return relocatable
    return [require_ptx(containers[0] if containers else [])]


def choose_ptx(entries, max_version=NEWEST_ISA):
    """The PTX entry to run: the highest architecture, then the newest ISA version that
    anycuda reads (a newer one would be refused: ptx/targets.py)."""
    ptx = [e for e in entries if e.kind == "ptx" and e.ptx_version <= tuple(max_version)]
    return max(ptx, key=lambda e: (e.sm, e.ptx_version)) if ptx else None


MACHINE_CODE_HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"


def machine_code_module(entries) -> tuple:
    """(PTX text, kernel names) of a container without PTX, from its newest SASS entry: its
    module variables as PTX declarations with their bytes (a program may read and write them),
    and the names of its kernels, which anycuda can name but not run."""
    from .elf import ElfError, data_objects, entry_functions
    elves = [e for e in entries if e.kind == "elf"]
    if not elves:
        raise FatbinError("the container holds neither PTX nor SASS")
    cubin = max(elves, key=lambda e: e.sm).payload
    try:
        names, variables = entry_functions(cubin), data_objects(cubin)
    except ElfError as e:
        raise FatbinError(f"the SASS entry's symbols cannot be read: {e}") from None
    lines = [MACHINE_CODE_HEADER]
    for name, space, data in variables:
        if not data:
            continue
        init = f" = {{{', '.join(map(str, data))}}}" if any(data) else ""
        lines.append(f".visible .{space} .align 8 .b8 {name}[{len(data)}]{init};\n")
    return "".join(lines), names


def require_ptx(entries) -> FatbinEntry:
    entry = choose_ptx(entries)
    if entry is None:
        archs = sorted({e.sm for e in entries if e.kind == "elf"}) or [75]
        xx = archs[-1]
        raise FatbinError(f"the binary carries no PTX (only SASS for {', '.join(f'sm_{a}' for a in archs)}); "
                          f"rebuild it with PTX included, e.g. -gencode arch=compute_{xx},code=compute_{xx}")
    return entry


def ptx_container(ptx: str, sm: int, version: tuple) -> bytes:
    """A container holding `ptx` (of ISA `version`, as (major, minor)) as its one entry, for
    architecture `sm`: what anycuda's toolchain stand-ins hand back where NVIDIA's tools would
    give machine code (the same layout as nvrtc_standin.c writes, and as nvcc writes a PTX entry)."""
    text = ptx.encode()
    payload = text + b"\0" * (8 - len(text) % 8)
    major, minor = version
    entry = struct.pack("<HHIQIIHHIIIQQQ", KIND_PTX, 0x0101, ENTRY_HEADER_MIN, len(payload), 0, 0,
                        minor, major, sm, 0, 0, 0x11, 0, 0)
    return struct.pack("<IHHQ", CONTAINER_MAGIC, 1, CONTAINER_HEADER, len(entry) + len(payload)) + entry + payload


def entries_from_elf(path) -> list:
    """Every fatbinary entry embedded in an executable or shared library."""
    from .elf import section_bytes
    with open(path, "rb") as fh:
        data = fh.read()
    entries = []
    for name in (".nv_fatbin", "__nv_relfatbin"):
        sec = section_bytes(data, name)
        if sec:
            entries += parse_containers(sec)
    return entries
