"""Target-neutral passes over PTX IR and the CPU target (PTX IR -> LLVM IR -> machine code).

The stages and their order are written in compiler/pipeline.py: `compile_kernel` compiles one
kernel of a module from its unit (ptx/index.py), `compile_variables` the module's variables.
"""
from __future__ import annotations

from .pipeline import CompiledKernel, CompiledVariables, compile_kernel, compile_variables

__all__ = ["CompiledKernel", "CompiledVariables", "compile_kernel", "compile_variables"]
