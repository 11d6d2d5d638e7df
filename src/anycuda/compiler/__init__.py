"""Target-neutral passes over PTX IR and the CPU target (PTX IR -> LLVM IR -> machine code).

`compile_ptx(text)` is the whole pipeline: parse, lower every function, optimise and emit a
native object, through the on-disk cache.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ptx import parse
from . import cache


@dataclass
class CompiledModule:
    kernels: dict            # kernel name -> module.KernelInfo
    globals: dict            # variable name -> (symbol in the object, size in bytes)
    function_errors: dict    # device function name -> PtxError (it cannot run)
    object_code: bytes


def compile_ptx(ptx_text: str, source_name: str = "<ptx>") -> CompiledModule:
    """Compile a PTX module for this CPU. Raises PtxError for malformed PTX; a function that
    cannot be lowered is recorded in the result instead (see KernelInfo.error)."""
    key = cache.key_for(ptx_text, source_name)
    hit = cache.load(key)
    if isinstance(hit, CompiledModule):
        return hit
    from .jit import compile_to_object
    from .module import ModuleLowering
    lowering = ModuleLowering(parse(ptx_text, source_name), source_name).lower()
    obj = compile_to_object(str(lowering.mod), source_name)
    globals_ = {}
    for name, g in lowering.globals.items():
        pointee = g.type.pointee
        globals_[name] = (g.name, pointee.count * (8 if str(pointee.element) == "i64" else 1))
    result = CompiledModule(lowering.kernels, globals_, dict(lowering.function_errors), obj)
    cache.store(key, result)
    return result
