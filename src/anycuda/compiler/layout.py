"""Where a PTX function's parameters and variables lie: the sizes and alignments of its
declarations, and which kernel parameters a step function takes as values. Read by the
module's lowering (the layout of parameter buffers and shared memory) and a function's
(its reads of parameters and variables) alike."""
from __future__ import annotations

from dataclasses import dataclass

from ..ptx import ir as pir
from .types import I32, PTR, width


@dataclass
class ParamInfo:
    name: str
    offset: int
    size: int
    align: int
    ptx_type: str
    count: int = 1       # array length for `.b8 name[N]` parameters


def decl_size(decl: pir.VarDecl) -> int:
    n = decl.count if decl.count else 1
    return max(width(decl.type) // 8, 1) * n * (decl.vector or 1)


def passed_parameters(params) -> list:
    """(ParamInfo, LLVM type) of the kernel parameters passed to step functions as values:
    scalars of 1 to 8 bytes; 8-byte ones as pointers (their integer value is recovered with
    ptrtoint, so nothing is lost when they are not addresses)."""
    out = []
    for p in params:
        if p.count == 1 and p.size in (4, 8) and p.ptx_type != "pred":
            out.append((p, PTR if p.size == 8 else I32))
    return out


def align_up(v, a):
    return (v + a - 1) // a * a


def natural_align(decl):
    return decl.align or max(width(decl.type) // 8, 1) * (decl.vector or 1)
