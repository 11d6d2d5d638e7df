"""The build of anycuda's libcuda.so.1: cffi embedding, C declarations, marshalling only."""
