"""Ops: the scalar semantics of PTX instructions as LLVM IR, one thread at a time.

`table` is the one handler table (opcode -> handler, operand counts); `instructions` holds the
handlers of most families and imports `atomics`, `textures`, `asynccopy` (cp.async and
cp.async.bulk), `mbarrier` (mbarrier objects, and the waits after their tests) and
`suspending` (block barriers and warp collectives, which suspend a thread until the others
arrive), which register theirs there;
`bitops` and `floatops` are the named helpers for awkward integer and float operations;
`calls` lowers `call` (the ABI of device functions and of the runtime's helpers); `matrix`
lowers the warp matrix instructions (mma, wmma, ldmatrix, ...) from the fragment layouts of
`fragments`; `aggregation` combines a block's atomics to one address into one atomic after
its last thread (the block function calls the hooks it emits).

Layer: above analysis/, simt/ (a warp collective's operands go to the block's collective
arrays, a grid barrier is polled through simt.gridsync) and cpu/ (the streaming-store fence
before an atomic); below vector/ and lowering/, whose FunctionLowering a handler is given.
It may import the compiler's shared modules and those packages, never a stage above it.
"""
