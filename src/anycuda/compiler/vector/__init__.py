"""Vector: a warp's (or a block's) threads as vector code, where the lanes can run together.

`warpruns` turns runs of fixed shuffles into 32-lane vector code; `warpregions` runs a warp's
lanes in lockstep from its first shuffle (or barrier) to the next stop, with `laneshapes`
(the stride each register keeps across lanes), `regiondivisors` (quotients kept one value in
lockstep, divisors' reciprocals), `lanereloads` (values a lane loop can reload instead of keep)
and `laneatomics` (one atomic for a warp whose lanes share its address);
`blockprograms` makes a whole block of an acyclic kernel one vector program.

Layer: above analysis/, simt/ (the block function's workspace, collective arrays and shuffle
sources), cpu/ (the launch loop a block program runs in, streaming stores) and ops/ (scalar
handlers a vector op falls back to or mirrors); below lowering/, which calls it per function.
It may import the compiler's shared modules and those packages, never lowering/ or build/.
"""
