"""CUDA driver API semantics in Python: results, handles, contexts, modules, launches.

Functions here take and return plain Python values (ints for pointers and handles) and
raise CudaError; the shim turns them into C entry points of libcuda.so.1.
"""
