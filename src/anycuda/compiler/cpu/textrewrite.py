"""Rewrites of an optimised module's LLVM IR text (streamstores.py, maskedprefetch.py).

What no LLVM pass that Python can ask for does (a non-temporal store chosen per launch, a
prefetch ahead of the vectoriser's masked loads) is done on the module's printed text after
optimisation, and the text is parsed back.
"""
from __future__ import annotations

import llvmlite.binding as llvm


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
