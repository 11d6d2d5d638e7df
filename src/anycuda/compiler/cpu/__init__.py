"""CPU: what the generated code needs of the CPU and the OS it runs on.

`launch` is a kernel's launch function: workers on libgomp's threads take blocks from a shared
counter and call the block function; `faults` turns a memory fault in a worker into a launch
error (signal handler, sigsetjmp); `placement` moves workers off the launching thread's CPU;
`streamstores` writes a large launch's output past the caches (x86 non-temporal stores).

Layer: above simt/ (the launch loop lays out a block's workspace as the block function does);
below ops/ (an atomic's streaming-store fence), vector/, lowering/ and build/ (jit runs the
streaming-store pass). It may import the compiler's shared modules and simt/, nothing above it,
nor runtime/ or driver/.
"""
