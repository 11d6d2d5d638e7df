"""anycuda's cuBLASLt: matmul, layout, preference and transform descriptors (descriptors.py),
cublasLtMatmul with its epilogues (matmul.py), the algorithm queries (algorithms.py), and the
table of C functions the drop-in libcublasLt answers (functions.py). Statuses are cuBLAS's."""
