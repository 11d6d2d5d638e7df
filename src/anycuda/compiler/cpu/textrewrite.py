"""Rewrites of an optimised module's LLVM IR text (streamstores.py, loopprefetch.py,
maskedaccesses.py, gatherruns.py).

What no LLVM pass that Python can ask for does (a non-temporal store chosen per launch, a
prefetch ahead of the vectoriser's masked loads, a test of its masked stores and loads
for when a plain access does) is done on the module's printed text after optimisation, and the text is parsed back.
"""
from __future__ import annotations

import re

import llvmlite.binding as llvm

VALUE = r'%[-\w.$]+|%"[^"]*"'          # an IR value's name, plain or quoted
_ALIGN = re.compile(r"\balign (\d+)\b")
LABEL = re.compile(r"^([-\w.$]+|\"[^\"]*\"):(?:\s*; preds = (.*))?$")     # a block's label line
ELEMENT_BYTES = {"float": 4, "double": 8, "half": 2, "bfloat": 2, "i8": 1, "i16": 2, "i32": 4, "i64": 8}


def rewritten(mod: llvm.ModuleRef, rewrite) -> llvm.ModuleRef:
    """`mod` with its text passed through rewrite(text): a new module (verified, with mod's
    name, triple and data layout), or `mod` itself where rewrite gave the text back unchanged
    (the same object)."""
    text = str(mod)
    new = rewrite(text)
    if new is text:
        return mod
    out = llvm.parse_assembly(new)
    out.name, out.triple, out.data_layout = mod.name, mod.triple, mod.data_layout
    out.verify()
    return out


def arguments(text: str) -> list:
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


def align_suffix(argument: str) -> str:
    """`, align N` of a pointer argument that carries an `align N` attribute, else ""."""
    align = _ALIGN.search(argument)
    return f", align {align.group(1)}" if align else ""


def suffixed(name: str, suffix: str) -> str:
    """An IR value name with `suffix` added (quoted names keep their quotes)."""
    return f'{name[:-1]}{suffix}"' if name.endswith('"') else name + suffix


def split_in_self_loops(text: str, split) -> str:
    """`text` with each line of a loop of one block (the vector body LLVM's vectoriser makes)
    for which split(line, k, before) gives (lines, join) replaced by those lines, k counting
    the splits from 1, `before` the function's lines so far (the block's own since its last
    label line) and `join` the label of the block that goes on after them; the phis that
    named the split block name its last part. The text itself where nothing was split."""
    out, function, renamed, count = [], [], {}, 0
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
            lines = split(line, count + 1, function)
            if lines is not None:
                count += 1
                lines, renamed[block] = lines
                function.extend(lines)
                continue
        function.append(line)
    out.extend(function)
    return text if not count else "\n".join(out)


def _renamed_predecessors(lines: list, renamed: dict) -> list:
    """A function's `lines` with each phi's incoming block that was split named by its last
    part (the parts' names are new)."""
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


def in_self_loop(label_match) -> bool:
    """Whether the block that this label line starts branches back to itself (its own name
    among the predecessors the printer lists)."""
    name, preds = label_match.group(1), label_match.group(2) or ""
    return f"%{name}" in (p.strip() for p in preds.split(","))
