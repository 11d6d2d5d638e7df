"""Target-neutral passes over PTX IR and the CPU target (PTX IR -> LLVM IR -> machine code)."""
