"""Build: LLVM IR text to machine code for this CPU, and what keeps that work from repeating.

`jit` compiles an LLVM module to a native object and links objects into the process; `tiers`
makes quick code at once and optimised code in a compile server beside the program; `cache`
keeps compiled code on disk, keyed by what was compiled and by the compiler itself.

Layer: the last stage of compiler/pipeline.py. It takes LLVM IR as text, so it knows nothing of
PTX or of how the IR was lowered; it may import the compiler's shared modules and cpu/ (the
streaming-store pass runs on the module before code generation), never the stages above it
nor runtime/ or driver/.
"""
