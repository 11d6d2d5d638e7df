"""SIMT: how a block's threads run on one CPU thread.

`blockfunction` makes a kernel's block function from its step function: uniform rounds (one
loop over the threads, vectorised by LLVM), general rounds thread by thread, and the sites where
threads stop (barriers, warp collectives and mbarrier waits, resolved by `barriers`,
`collectives` and `mbarrierwaits`) over the block's workspace (`workspace`: frames, spill and
collective arrays, turn areas); `gridsync` makes a cooperative launch's grid barrier wait; `probebounds` bounds a block's known branches
before the guard probe runs thread by thread.

Layer: above analysis/ (guards' probe protocol); below cpu/ (whose launch loop runs block
functions), ops/, vector/ and lowering/. It may import the compiler's shared modules and
analysis/, nothing above it, nor runtime/ or driver/.
"""
