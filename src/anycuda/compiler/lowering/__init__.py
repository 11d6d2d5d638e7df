"""Lowering: a parsed PTX module to one LLVM module.

`module` (ModuleLowering) lays out the module's variables and parameters, lowers each
function, and gives each kernel its block function (simt/) and launch function (cpu/);
`function` (FunctionLowering) turns one function into its step function: registers, operands,
addresses, control flow, the suspension sites where a thread stops and how it resumes, with
the instructions' semantics from ops/ and the vector code of vector/; `inline` first inlines
device functions that suspend (a barrier or collective inside a call).

Layer: the stage that puts the others together, above analysis/, simt/, cpu/, ops/ and
vector/, which it calls; below compiler/pipeline.py only. It may import any of those and the
compiler's shared modules, never build/ (it hands LLVM IR on as text) nor runtime/ or driver/.
"""
