"""anycuda's own CUDA libraries: the semantics of cuBLAS, cuBLASLt, cuRAND, cuFFT and cuFFTW on
maintained CPU libraries (OpenBLAS, pocketfft), one subpackage each.

Layer: above `driver/` (a library call is work queued on a CUDA stream through
`driver.api.submit`, so it keeps the stream's order and joins a graph capture like a kernel)
and below `shim/` (which builds the drop-in `libcublas.so.13` etc. and only marshals C
arguments into these functions). Device pointers are host addresses (one address space).
"""
