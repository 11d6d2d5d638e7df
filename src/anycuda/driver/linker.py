"""Linking PTX modules into one, as the device linker does for relocatable device code
(`nvcc -rdc=true` with several translation units: each carries its own PTX, and a kernel in
one calls functions and uses variables defined in another).

Works on the text: each module is split into its top-level statements (ptx/index.py); `.extern`
declarations of symbols another module defines are dropped, the first of several `.weak`
(or `.common`) definitions wins, two `.visible` definitions of one name are an error, and
module-private symbols whose names clash with another module's are renamed. Debug file
numbers (`.file`/`.loc`) are shifted so every module keeps its own.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..ptx.errors import PtxError
from ..ptx.index import split_items
from ..runtime.errors import CudaError, CUresult

_IDENT = r"[A-Za-z_$%][\w$]*"
_HEADER = (".version", ".target", ".address_size")


@dataclass
class Statement:
    text: str
    linkage: str = ""            # '', extern, visible, weak, common
    name: str = ""               # the symbol declared, '' for anything else
    defines: bool = False        # a definition (function body or variable storage), not a declaration


def split_statements(ptx: str) -> list:
    """Top-level statements of a module (ptx/index.py splits it), each as its text."""
    try:
        return [ptx[item.start:item.end] for item in split_items(ptx, "<linked module>")]
    except PtxError as e:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_PTX, f"linking PTX: {e}") from None


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def classify(text: str) -> Statement:
    code = _strip_comments(text).strip()
    words = code.split()
    if not words or words[0] in _HEADER or words[0] == ".file":
        return Statement(text)
    linkage = ""
    if words[0] in (".extern", ".visible", ".weak", ".common"):
        linkage = words[0][1:]
    m = re.search(r"\.(func|entry)\b\s*(\([^)]*\))?\s*(" + _IDENT + ")", code)
    if m:
        return Statement(text, linkage, m.group(3), defines="{" in code)
    before_init = code.split("=", 1)[0].rstrip().rstrip(";")
    names = re.findall(r"(" + _IDENT + r")\s*(?:\[[^\]]*\]\s*)*$", before_init)
    if not names:
        return Statement(text, linkage)
    return Statement(text, linkage, names[0], defines=linkage != "extern")


def _rename(text: str, old: str, new: str) -> str:
    return re.sub(r"(?<![\w$%])" + re.escape(old) + r"(?![\w$])", new, text)


def _header(modules) -> str:
    """The newest .version among the modules, the first module's .target and .address_size."""
    versions, target, address = [], None, None
    for module in modules:
        for m in re.finditer(r"^\s*\.version\s+(\d+)\.(\d+)", module, re.M):
            versions.append((int(m.group(1)), int(m.group(2))))
        if target is None:
            m = re.search(r"^\s*(\.target[^\n]*)", module, re.M)
            target = m.group(1).strip() if m else None
        if address is None:
            m = re.search(r"^\s*(\.address_size[^\n]*)", module, re.M)
            address = m.group(1).strip() if m else None
    major, minor = max(versions) if versions else (9, 0)
    return "\n".join([f".version {major}.{minor}", target or ".target sm_75", address or ".address_size 64"]) + "\n"


def link(modules: list) -> str:
    """One PTX module equivalent to `modules` linked together."""
    if len(modules) == 1:
        return modules[0]
    parsed = [[classify(s) for s in split_statements(m)] for m in modules]

    # who defines what
    definers = {}
    for k, statements in enumerate(parsed):
        for st in statements:
            if st.name and st.defines and st.linkage in ("visible", "weak", "common"):
                definers.setdefault(st.name, []).append((k, st.linkage))
    for name, where in definers.items():
        strong = [k for k, linkage in where if linkage == "visible"]
        if len(strong) > 1:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_IMAGE,
                            f"linking PTX: {name} is defined in modules {strong[0]} and {strong[1]}")

    # module-private names that clash with a name any other module uses at top level
    top_names = [{st.name for st in statements if st.name} for statements in parsed]
    out = [_header(modules)]
    declared, files = set(), 0
    for k, statements in enumerate(parsed):
        private = {st.name for st in statements if st.name and not st.linkage}
        others = set().union(*(names for j, names in enumerate(top_names) if j != k))
        renames = {name: f"{name}_m{k}" for name in private & others}
        highest_file = 0
        pieces = []
        for st in statements:
            code = _strip_comments(st.text).strip()
            if code.startswith(_HEADER):
                continue
            if st.name and st.linkage == "extern":
                if st.name in definers or st.name in declared:
                    continue           # defined (or declared already) elsewhere
                declared.add(st.name)
            elif st.name and st.defines and st.linkage in ("weak", "common"):
                first = definers[st.name]
                strong = [j for j, linkage in first if linkage == "visible"]
                winner = strong[0] if strong else first[0][0]
                if winner != k:
                    continue
            elif st.name and not st.defines and st.linkage in ("visible", "weak") and st.name in definers:
                if st.name in declared:
                    continue
                declared.add(st.name)
            text = st.text
            for old, new in renames.items():
                text = _rename(text, old, new)
            if files:
                text = re.sub(r"(^|\n)(\s*\.file\s+)(\d+)", lambda m: f"{m.group(1)}{m.group(2)}{int(m.group(3)) + files}", text)
                text = re.sub(r"(\.loc\s+)(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) + files}", text)
            for m in re.finditer(r"(?:^|\n)\s*\.file\s+(\d+)", st.text):
                highest_file = max(highest_file, int(m.group(1)))
            pieces.append(text)
        files += highest_file
        out.append(f"\n// ---- module {k}\n" + "\n".join(p.strip("\n") for p in pieces) + "\n")
    return "".join(out)


# ---------------------------------------------------------------- inputs of the driver's linker (cuLink*)

JIT_INPUT_CUBIN, JIT_INPUT_PTX, JIT_INPUT_FATBINARY, JIT_INPUT_OBJECT, JIT_INPUT_LIBRARY = 0, 1, 2, 3, 4
_INPUT_NAMES = {0: "cubin", 1: "PTX", 2: "fatbinary", 3: "object", 4: "library", 5: "NVVM IR"}


def _ptx_of_containers(containers) -> list:
    from .. import fatbin
    return [e.ptx_text() for e in map(fatbin.choose_ptx, containers) if e is not None]


def _ptx_of_elf(data: bytes) -> list:
    from .. import elf, fatbin
    found = []
    for section in (".nv_fatbin", "__nv_relfatbin"):
        sec = elf.section_bytes(data, section)
        if sec:
            found += _ptx_of_containers(fatbin.split_containers(sec))
    return found


def _ar_members(data: bytes):
    """The members of a Unix `ar` archive (a static library)."""
    pos = 8
    while pos + 60 <= len(data):
        size = int(data[pos + 48:pos + 58].decode().strip() or 0)
        yield data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)


def ptx_of_input(kind: int, data: bytes, name: str = "") -> list:
    """The PTX modules an input of the driver's linker contributes (CUjitInputType `kind`)."""
    from .. import fatbin
    what = f"{_INPUT_NAMES.get(kind, f'input type {kind}')} {name}".strip()
    try:
        if kind == JIT_INPUT_PTX:
            return [data.split(b"\0", 1)[0].decode("utf-8")]
        if kind == JIT_INPUT_FATBINARY:
            return _ptx_of_containers(fatbin.split_containers(data))
        if kind in (JIT_INPUT_CUBIN, JIT_INPUT_OBJECT):
            if data[:4] != b"\x7fELF":
                raise CudaError(CUresult.CUDA_ERROR_INVALID_IMAGE, f"{what} is not an ELF file")
            found = _ptx_of_elf(data)
            if not found:
                raise CudaError(CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU,
                                f"{what} holds machine code only (anycuda runs PTX): give the PTX instead")
            return found
        if kind == JIT_INPUT_LIBRARY:
            if not data.startswith(b"!<arch>\n"):
                raise CudaError(CUresult.CUDA_ERROR_INVALID_IMAGE, f"{what} is not an ar archive")
            return [ptx for member in _ar_members(data) if member[:4] == b"\x7fELF" for ptx in _ptx_of_elf(member)]
    except (fatbin.FatbinError, UnicodeDecodeError, ValueError) as e:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_IMAGE, f"{what}: {e}") from None
    raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED, f"linking {what} is not supported")
