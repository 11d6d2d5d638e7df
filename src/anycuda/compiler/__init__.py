"""Target-neutral passes over PTX IR and the CPU target (PTX IR -> LLVM IR -> machine code).

The stages and their order are written in compiler/pipeline.py: `compile_kernel` compiles one
kernel of a module from its unit (ptx/index.py), `compile_variables` the module's variables.

Sub-packages by stage, each importing only those listed before it (and the shared modules):

  analysis/   facts about a PTX function body: suspensions, CFG, dataflow, affine forms,
              uniformity, grid-stride loops, memory, fusion, known branches (guards)
  simt/       how a block's threads run on one CPU thread: the block function, its
              workspace, warp collectives, barriers, grid barriers, the probe's bounds
  cpu/        what the code needs of the CPU and OS: the launch loop on libgomp's workers,
              the memory-fault trap, worker placement, streaming stores
  ops/        the scalar semantics of PTX instructions: one handler table (ops/table.py)
  vector/     a warp's or a block's lanes as vector code: warp runs, warp regions, block
              programs
  lowering/   a PTX module to one LLVM module: module, function, spills, inlining
  build/      LLVM IR to machine code: JIT, quick and optimised tiers, on-disk cache

Shared modules at this level: types (PTX types in LLVM), irutil (IR-building helpers), layout
(parameter layout), and abi and texdesc, which runtime/ and driver/ share with generated code.
"""
from __future__ import annotations

from .pipeline import CompiledKernel, CompiledVariables, compile_kernel, compile_variables

__all__ = ["CompiledKernel", "CompiledVariables", "compile_kernel", "compile_variables"]
