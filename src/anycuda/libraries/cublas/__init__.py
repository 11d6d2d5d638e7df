"""anycuda's cuBLAS: handles, streams and pointer modes (handle.py, calls.py), levels 1-3 on
the CPU's BLAS (level12.py, level3.py, rotations.py, gemv_batched.py), the mixed-type products
(gemm_ex.py), batched factorizations on LAPACK (factorizations.py), the legacy API of cublas.h
on top of the v2 routines (legacy.py), and the table of C functions the drop-in libcublas
answers (functions.py)."""
