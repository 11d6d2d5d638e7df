"""Target-neutral passes over PTX IR and the CPU target (PTX IR -> LLVM IR -> machine code).

`compile_ptx(text)` is the whole pipeline: parse, lower every function, optimise and emit a
native object, through the on-disk cache (quick code first where the module is new:
compiler/tiers.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ptx import parse
from . import cache, tiers


@dataclass
class CompiledModule:
    kernels: dict            # kernel name -> module.KernelInfo
    globals: dict            # variable name -> (symbol in the object, size in bytes)
    function_errors: dict    # device function name -> PtxError (it cannot run)
    object_code: bytes
    optimised: object = None  # quick code: tiers.OptimisedCode, the optimised object on its way
    ptx_text: str = ""        # the module's PTX, for the block programs made at launch (compiler/blockprograms.py)
    source_name: str = "<ptx>"

    def __getstate__(self):
        return dict(self.__dict__, optimised=None)


def compile_ptx(ptx_text: str, source_name: str = "<ptx>") -> CompiledModule:
    """Compile a PTX module for this CPU. Raises PtxError for malformed PTX; a function that
    cannot be lowered is recorded in the result instead (see KernelInfo.error)."""
    mode = tiers.mode()
    key = cache.key_for(ptx_text, source_name)
    hit = cache.load(key)
    if isinstance(hit, CompiledModule):
        return hit
    from .jit import compile_to_object
    from .module import ModuleLowering
    lowering = ModuleLowering(parse(ptx_text, source_name), source_name).lower()
    globals_ = {}
    for name, g in lowering.globals.items():
        pointee = g.type.pointee
        globals_[name] = (g.name, pointee.count * (8 if str(pointee.element) == "i64" else 1))
    llvm_ir = str(lowering.mod)
    result = CompiledModule(lowering.kernels, globals_, dict(lowering.function_errors), b"",
                            ptx_text=ptx_text, source_name=source_name)
    if mode == tiers.TIERED and not globals_:      # queued before the quick compile: the server starts sooner
        result.optimised = tiers.optimise_in_background(llvm_ir, source_name)
    quick = mode == tiers.QUICK or result.optimised is not None
    result.object_code = compile_to_object(llvm_ir, source_name, optimised=not quick)
    if result.optimised is not None:
        def arrived(object_code):
            if object_code is not None:
                result.object_code, result.optimised = object_code, None
                cache.store(key, result)
        result.optimised.subscribe(arrived)
    elif not quick:
        cache.store(key, result)        # the cache holds optimised code only
    return result
