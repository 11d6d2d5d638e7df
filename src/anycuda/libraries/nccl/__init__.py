"""anycuda's NCCL: communicators of ranks (devices of one process, or processes started by an
MPI launcher) and their collectives, each queued on its CUDA stream like a kernel."""
