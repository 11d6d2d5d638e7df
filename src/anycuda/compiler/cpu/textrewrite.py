"""Rewrites of an optimised module's LLVM IR text (streamstores.py, loopprefetch.py,
maskedaccesses.py).

What no LLVM pass that Python can ask for does (a non-temporal store chosen per launch, a
prefetch ahead of the vectoriser's masked loads, a test of its masked stores and loads
for when a plain access does) is done on the module's printed text after optimisation, and the text is parsed back.
"""
from __future__ import annotations

import re

import llvmlite.binding as llvm

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


def in_self_loop(label_match) -> bool:
    """Whether the block that this label line starts branches back to itself (its own name
    among the predecessors the printer lists)."""
    name, preds = label_match.group(1), label_match.group(2) or ""
    return f"%{name}" in (p.strip() for p in preds.split(","))
