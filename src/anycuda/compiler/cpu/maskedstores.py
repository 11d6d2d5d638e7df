"""Plain stores where the vectoriser's masked stores find every lane on.

LLVM's loop vectoriser turns a store under a condition (a kernel's `if (x < nx && y < ny &&
z < nz) out[i] = ...`, where the guard holds in nearly every thread) into a masked store.
On a CPU whose masked stores are slow (irutil.masked_stores_slow: AMD's before Zen 4 make
AVX's vmaskmovps in microcode, ~7 ns for 32 bytes), such a store costs more than the
computation it ends: perf put 56% of stencil7_3d_block's (one worker) on its masked rows,
27% on the instruction after their masked store, every lane of it on.

So after LLVM's optimisation (`plain_where_whole`, called by jit, after loopprefetch's
prefetches), each masked store in a loop of one block (the vector body LLVM's vectoriser
makes) becomes a test of its mask: a plain store where every lane is on, the masked store
otherwise. Splitting the body renames it, for the phis that name it as their predecessor,
after the last split part. A plain store where every lane is on writes exactly what the
masked store would. stencil7_3d_block 21.5-22.3 -> 18.1-18.6 ms (A B B A, `run.py --repeats
3`); the guarded streaming kernels (saxpy, triad, copy under `if (i < n)`) within the noise.
"""
from __future__ import annotations

import re

import llvmlite.binding as llvm

from ..irutil import masked_stores_slow
from .textrewrite import LABEL, in_self_loop, rewritten

_MASKED_STORE = re.compile(r"^(\s*)(?:tail )?call void @llvm\.masked\.store\.v(\d+)\w+\.p0\((.*)\)(?:, !.*)?$")
_ALIGN = re.compile(r"\balign (\d+)\b")


def _arguments(text: str) -> list:
    """The top-level comma-separated parts of a call's argument list."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _split(line: str, k: int):
    """The lines that replace masked store `line` (the k-th split), ending in the label of the
    block that goes on after it; None where the store is not one to split (a constant mask)."""
    store = _MASKED_STORE.match(line)
    if store is None:
        return None
    indent, lanes = store.group(1), int(store.group(2))
    args = _arguments(store.group(3))
    if len(args) != 3 or not args[2].startswith(f"<{lanes} x i1> %"):
        return None
    value, pointer, mask = args
    pointer_value = pointer.split()[-1]
    align = _ALIGN.search(pointer)
    bits, whole, part, join = (f"anycuda.ms{what}.{k}" for what in ("bits", "whole", "part", "join"))
    return [
        f"{indent}%{bits} = bitcast {mask} to i{lanes}",
        f"{indent}%{bits}.all = icmp eq i{lanes} %{bits}, -1",
        f"{indent}br i1 %{bits}.all, label %{whole}, label %{part}",
        f"{whole}:",
        f"{indent}store {value}, ptr {pointer_value}" + (f", align {align.group(1)}" if align else ""),
        f"{indent}br label %{join}",
        f"{part}:",
        line,
        f"{indent}br label %{join}",
        f"{join}:",
    ], join


def rewrite(text: str) -> str:
    """The optimised module's IR text with each masked store in a loop of one block tested
    for a whole mask (see the module docstring); the text itself where there is none."""
    if "@llvm.masked.store." not in text:
        return text
    out, function, renamed, split = [], [], {}, 0
    block, looping = None, False
    for line in text.split("\n"):
        label = LABEL.match(line)
        if label:
            block, looping = label.group(1), in_self_loop(label)
        elif line.startswith(("define ", "}")):
            block, looping = None, False
            if line.startswith("}"):        # (block names are a function's own)
                out.extend(_renamed_predecessors(function, renamed))
                function, renamed = [], {}
        elif looping:
            lines = _split(line, split + 1)
            if lines is not None:
                split += 1
                lines, renamed[block] = lines
                function.extend(lines)
                continue
        function.append(line)
    out.extend(function)
    return text if not split else "\n".join(out)


def _renamed_predecessors(lines: list, renamed: dict) -> list:
    """A function's `lines` with each phi's incoming block that was split named by its last
    part (the anycuda.ms* names are new)."""
    if not renamed:
        return lines
    patterns = {re.compile(r"(\[[^\[\]]*, )%" + re.escape(old) + r"( \])"): new for old, new in renamed.items()}
    out = []
    for line in lines:
        if " = phi " in line:
            for pattern, new in patterns.items():
                line = pattern.sub(lambda m, new=new: f"{m.group(1)}%{new}{m.group(2)}", line)
        out.append(line)
    return out


def plain_where_whole(mod: llvm.ModuleRef) -> llvm.ModuleRef:
    """`mod` (optimised) with its loops' masked stores made plain where every lane is on: a
    new module, or `mod` itself where it has none or this CPU's masked stores are not slow."""
    if not masked_stores_slow():
        return mod
    return rewritten(mod, rewrite)
