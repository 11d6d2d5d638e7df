"""Analysis: facts about a PTX function body, computed before any LLVM IR is made."""
