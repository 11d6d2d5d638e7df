"""Device printf: format a `vprintf(fmt, argbuf)` call as CUDA does.

nvcc packs the arguments into a local buffer, each aligned to its own size: 4-byte ints
and chars, 8-byte longs, pointers and doubles (float arguments are promoted to double).

A GPU prints bytes: a format, a `%s` string or a `%c` byte that is not UTF-8 comes out as
it is. The text is kept as a str whose undecodable bytes are surrogate escapes, and
`write_device_text` turns it back into those bytes.
"""
from __future__ import annotations

import ctypes
import re
import struct

_SPEC = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?"
                   r"(?P<len>hh|h|ll|l|L|z|j|t)?(?P<conv>[diouxXeEfFgGaAcspn%])")


def _read(buf: int, off: int, size: int, fmt: str):
    off = (off + size - 1) // size * size
    raw = ctypes.string_at(buf + off, size)
    return struct.unpack("<" + fmt, raw)[0], off + size


def format_device_printf(fmt: bytes, buf: int) -> str:
    """The text a GPU prints for `printf(fmt, ...)` with arguments packed at address `buf`."""
    text = fmt.decode("utf-8", "surrogateescape")
    out, pos, off = [], 0, 0
    for m in _SPEC.finditer(text):
        out.append(text[pos:m.start()])
        pos = m.end()
        conv, length = m.group("conv"), m.group("len") or ""
        if conv == "%":
            out.append("%")
            continue
        spec = "%" + m.group("flags")
        for part, prefix in (("width", ""), ("prec", ".")):
            val = m.group(part)
            if val == "*":
                val, off = _read(buf, off, 4, "i")
            if val is not None:
                spec += prefix + str(val)
        if conv in "eEfFgGaA":
            v, off = _read(buf, off, 8, "d")
            out.append((spec + conv).replace("a", "e").replace("A", "E") % v if conv in "aA" else (spec + conv) % v)
        elif conv == "s":
            p, off = _read(buf, off, 8, "Q")
            s = ctypes.string_at(p).decode("utf-8", "surrogateescape") if p else "(null)"
            out.append((spec + "s") % s)
        elif conv == "p":
            p, off = _read(buf, off, 8, "Q")
            out.append((spec + "s") % ("0x%x" % p if p else "(nil)"))
        elif conv == "c":
            v, off = _read(buf, off, 4, "i")
            out.append((spec + "c") % bytes([v & 0xFF]).decode("utf-8", "surrogateescape"))
        elif conv == "n":
            continue
        else:
            wide = length in ("l", "ll", "z", "j", "t")
            signed = conv in "di"
            v, off = _read(buf, off, 8 if wide else 4, ("q" if signed else "Q") if wide else ("i" if signed else "I"))
            if length == "h":
                v = (v & 0xFFFF) - (0x10000 if signed and v & 0x8000 else 0)
            elif length == "hh":
                v = (v & 0xFF) - (0x100 if signed and v & 0x80 else 0)
            py_conv = "d" if conv in "iu" else conv
            out.append((spec + py_conv) % v)
    out.append(text[pos:])
    return "".join(out)


def write_device_text(text: str, stream) -> None:
    """Write what kernels printed to `stream` as the bytes they printed (through its binary
    buffer where it has one; else with the bytes that are not UTF-8 replaced)."""
    data = text.encode("utf-8", "surrogateescape")
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        stream.flush()
        buffer.write(data)
        buffer.flush()
    else:
        stream.write(data.decode("utf-8", "replace"))
        stream.flush()
