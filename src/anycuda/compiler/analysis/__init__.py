"""Analysis: facts about a PTX function body, computed before any LLVM IR is made.

By concept: `suspensions` (which instructions stop a thread), `cfg` (basic blocks, loops),
`dataflow` (definitions and uses, liveness across suspensions, reaching definitions),
`affine` (thread-linear forms), `uniformity` (what every thread of a block computes alike),
`gridstride` (grid-stride loops that get a yield), `memory` (pointer roots, streaming stores,
block order), `fusion` (the mul/add pairs ptxas fuses), `guards` (known branches a block's
threads may all pass, and the probe that finds out).

Layer: the lowest stage: it reads PTX IR (anycuda.ptx) and the compiler's `types`, and knows
nothing of LLVM IR, of the stages above it (simt/, cpu/, ops/, vector/, lowering/, build/) or
of runtime/ and driver/. Inside, modules import one another in the order listed above
(suspensions first), never back.
"""
