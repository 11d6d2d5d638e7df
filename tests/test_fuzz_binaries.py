"""Fuzzed fatbinaries and ELF cubins: lying sizes and offsets, truncation, corrupt zstd/LZ4
payloads, wrong magic numbers and versions. The readers (anycuda.fatbin, anycuda.elf) must
give their entries or a FatbinError / ElfError with a message; never another exception, a
hang or a crash.

Seeds are built here: containers with a PTX entry stored plain, as an LZ4 block and as a zstd
frame, a wrapper around one, and a small cubin with a kernel symbol and initialised and
constant variables, laid out as ELF64 defines.
"""
from __future__ import annotations

import struct

from hypothesis import given, strategies as st

import fuzz_harness as fh

PTX = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n\tret;\n}\n"


def _compressed_container(flag: int, compress) -> bytes:
    """A container whose one PTX entry is compressed: the header gives the stored size at
    0x10, the flags at 0x28 and the decompressed size at 0x38."""
    from anycuda import fatbin
    text = PTX.encode() + b"\0"
    packed = compress(text)
    payload = packed + b"\0" * (-len(packed) % 8)
    entry = struct.pack("<HHIQIIHHIIIQQQ", fatbin.KIND_PTX, 0x0101, fatbin.ENTRY_HEADER_MIN, len(payload),
                        len(packed), 0, 0, 8, 80, 0, 0, 0x11 | flag, 0, len(text))
    return struct.pack("<IHHQ", fatbin.CONTAINER_MAGIC, 1, fatbin.CONTAINER_HEADER,
                       len(entry) + len(payload)) + entry + payload


def _elf_section(name_off, kind, off, size, link=0, info=0, entsize=0):
    return struct.pack("<IIQQQQIIQQ", name_off, kind, 0, 0, off, size, link, info, 1, entsize)


def tiny_cubin() -> bytes:
    """ELF64 little-endian with .shstrtab, .strtab, .symtab, .nv.global.init and
    .nv.constant3: a kernel `k` (FUNC, st_other 0x10) and variables `g` and `c`."""
    names = b"\0.shstrtab\0.strtab\0.symtab\0.nv.global.init\0.nv.constant3\0"
    strtab = b"\0k\0g\0c\0"
    init, const = bytes(range(1, 9)), bytes(range(9, 13))
    symtab = bytes(24) + b"".join(struct.pack("<IBBHQQ", *s) for s in (
        (1, 0x12, 0x10, 0, 0, 0), (3, 0x11, 0, 4, 0, 8), (5, 0x11, 0, 5, 0, 4)))
    body = [names, strtab, symtab, init, const]
    offsets, pos = [], 64
    for part in body:
        offsets.append(pos)
        pos += len(part)
    shoff = (pos + 7) // 8 * 8
    sections = [bytes(64), _elf_section(1, 3, offsets[0], len(names)), _elf_section(11, 3, offsets[1], len(strtab)),
                _elf_section(19, 2, offsets[2], len(symtab), 2, 1, 24), _elf_section(27, 1, offsets[3], len(init)),
                _elf_section(43, 1, offsets[4], len(const))]
    header = (b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 1, 190, 1, 0, 0, shoff, 0, 64,
                                                                0, 0, 64, len(sections), 1))
    data = header + b"".join(body)
    return data + bytes(shoff - len(data)) + b"".join(sections)


def elf_container(cubin: bytes) -> bytes:
    from anycuda import fatbin
    payload = cubin + b"\0" * (-len(cubin) % 8)
    entry = struct.pack("<HHIQIIHHIIIQQQ", fatbin.KIND_ELF, 0x0101, fatbin.ENTRY_HEADER_MIN, len(payload), 0, 0,
                        0, 0, 80, 0, 0, 0x11, 0, 0)
    return struct.pack("<IHHQ", fatbin.CONTAINER_MAGIC, 1, fatbin.CONTAINER_HEADER,
                       len(entry) + len(payload)) + entry + payload


def seed_images() -> list:
    import lz4.block
    import zstandard
    from anycuda import fatbin
    plain = fatbin.ptx_container(PTX, 80, (8, 0))
    lz4_one = _compressed_container(fatbin.FLAG_LZ4, lambda b: lz4.block.compress(b, store_size=False))
    zstd_one = _compressed_container(fatbin.FLAG_ZSTD, zstandard.ZstdCompressor().compress)
    cubin = tiny_cubin()
    return [plain, lz4_one, zstd_one, plain + bytes(-len(plain) % 8) + zstd_one, elf_container(cubin), cubin]


SEEDS = seed_images()
FIELD_VALUES = [0, 1, 7, 8, 15, 16, 63, 64, 0x7F, 0xFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
                2**40, 2**63, 2**64 - 1]


def corrupt(d, seeds=SEEDS) -> bytes:
    """A seed corrupted 1-3 times (`d`: fuzz_harness.Draws): a field that lies, a byte, a cut,
    an insertion or a deletion."""
    data = bytearray(d.pick(seeds))
    for _ in range(d.number(1, 3)):
        how = d.pick(["field", "field", "byte", "cut", "insert", "delete"])
        at = d.number(0, max(len(data) - 1, 0))
        if how == "field":           # a size, offset, count, magic or version that lies
            width = d.pick([2, 4, 8])
            kind = d.pick(["listed", "length", "any"])
            value = d.pick(FIELD_VALUES) if kind == "listed" else len(data) if kind == "length" else d.number(0, 2**64 - 1)
            data[at:at + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
        elif how == "byte":
            data[at:at + 1] = bytes([d.number(0, 255)])
        elif how == "cut":
            del data[at:]
        elif how == "insert":
            data[at:at] = bytes(d.number(0, 255) for _ in range(d.number(1, 16)))
        else:
            del data[at:at + d.number(1, 16)]
    return bytes(data)


@st.composite
def corrupted(draw) -> bytes:
    return corrupt(fh.HypothesisDraws(draw))


class PastTheImage(Exception):
    """A read beyond the image's bytes. The C API passes an image without its length, so
    there a reader trusts the sizes it finds; this harness stops such a read instead."""


def reader_over(data: bytes, base: int = 0x10000):
    def read_memory(address, n):
        if address < base or address - base + n > len(data):
            raise PastTheImage(f"{n} bytes at 0x{address:x}, past the image")
        return data[address - base:address - base + n]
    return read_memory


def read_everything(data: bytes):
    """Every reader an image goes through on its way to a module."""
    from anycuda import elf, fatbin
    if data[:4] == b"\x7fELF":
        return elf.entry_functions(data), elf.data_objects(data)
    entries = fatbin.parse_containers(data)
    fatbin.read_container_at(reader_over(data), 0x10000)
    if fatbin.choose_ptx(entries) is not None:
        return fatbin.require_ptx(entries).ptx_text()
    return fatbin.machine_code_module(entries)


def check_image(data):
    from anycuda.elf import ElfError
    from anycuda.fatbin import FatbinError
    fh.allowed_outcome(lambda: read_everything(data), (FatbinError, ElfError, PastTheImage), data)


def check_wrapper(container, version, extra_at):
    """A wrapper {magic, version, container address, list address} in front of a container."""
    from anycuda import fatbin
    base = 0x10000
    image = struct.pack("<IIQQ", fatbin.WRAPPER_MAGIC, version, base + 32, base + 24 + extra_at) + bytes(8) + container
    reader = reader_over(image, base)
    fh.allowed_outcome(lambda: fatbin.ptx_modules(fatbin.read_wrapper_containers(reader, base)),
                       (fatbin.FatbinError, PastTheImage), image)


WRAPPER_VERSIONS, WRAPPER_LIST_AT = [1, 2], [0, 8, 16]


@fh.fuzz_settings(default=400)
@given(corrupted())
def fuzz_images(data):
    check_image(data)


@fh.fuzz_settings(default=200)
@given(corrupted(), st.sampled_from(WRAPPER_VERSIONS), st.sampled_from(WRAPPER_LIST_AT))
def fuzz_wrappers(container, version, extra_at):
    check_wrapper(container, version, extra_at)


def replay_image(seed: int, index: int) -> None:
    """Input `index` of `seed` of the plain driver."""
    check_image(corrupt(fh.plain_draws(seed, index)))


def replay_wrapper(seed: int, index: int) -> None:
    d = fh.plain_draws(seed, index)
    check_wrapper(corrupt(d), d.pick(WRAPPER_VERSIONS), d.pick(WRAPPER_LIST_AT))


def fuzz_images_plain():
    fh.plain_run("test_fuzz_binaries.replay_image({seed}, {index})", replay_image, default=2000)


def fuzz_wrappers_plain():
    fh.plain_run("test_fuzz_binaries.replay_wrapper({seed}, {index})", replay_wrapper, default=1000)


def test_seeds_are_read_as_built():
    """The fuzzing starts from valid images: each seed reads back what it was built from."""
    from anycuda import elf, fatbin
    for container in SEEDS[:3]:
        assert fatbin.require_ptx(fatbin.parse_containers(container)).ptx_text() == PTX
    assert [e.compressed for e in fatbin.parse_containers(SEEDS[3])] == [None, "zstd"]
    assert elf.entry_functions(SEEDS[5]) == ["k"]
    assert elf.data_objects(SEEDS[5]) == [("g", "global", bytes(range(1, 9))), ("c", "const", bytes(range(9, 13)))]
    ptx, names = fatbin.machine_code_module(fatbin.parse_containers(SEEDS[4]))
    assert names == ["k"] and ".b8 g[8] = {1, 2, 3, 4, 5, 6, 7, 8}" in ptx


def test_fuzz_images():
    fh.run_in_child("test_fuzz_binaries", "fuzz_images")


def test_fuzz_wrappers():
    fh.run_in_child("test_fuzz_binaries", "fuzz_wrappers")


def test_fuzz_images_plain():
    fh.run_in_child("test_fuzz_binaries", "fuzz_images_plain")


def test_fuzz_wrappers_plain():
    fh.run_in_child("test_fuzz_binaries", "fuzz_wrappers_plain")
