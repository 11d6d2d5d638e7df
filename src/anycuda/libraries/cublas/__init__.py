"""anycuda's cuBLAS: handles, streams and pointer modes (handle.py, calls.py), levels 1-3 on
the CPU's BLAS (level12.py, level3.py, rotations.py, gemv_batched.py), the rank updates CBLAS
lacks (rank_k.py), the mixed-type products (gemm_ex.py, blocks.py), the level-1 Ex routines
(level1_ex.py), the grouped batched gemms (grouped.py), batched factorizations on LAPACK
(factorizations.py), the legacy API of cublas.h on top of the v2 routines (legacy.py), cublasXt
on top of them too (xt.py), and the table of C functions the drop-in libcublas answers
(functions.py)."""
