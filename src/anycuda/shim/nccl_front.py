"""What libnccl's C front (anycuda/libraries/nccl/front.c: small collectives answered in C on
the caller's thread; large.c: large ones queued to a C thread) adds to the library's build: the entry points it answers first, each
falling back to the library's Python under the name `anycuda_python_<name>`, and the C
functions the Python half (anycuda.libraries.nccl.front) calls. Data only: pip's build reads it.
(The C is NCCL's semantics, so it lives with the library; the shim only compiles it in.)"""
from __future__ import annotations

from pathlib import Path

# front.c first: large.c (large collectives queued to a C thread) uses its statics
SOURCES = tuple(Path(__file__).resolve().parent.parent / "libraries" / "nccl" / name for name in ("front.c", "large.c"))
ANSWERS_FIRST = ("ncclGroupStart", "ncclGroupEnd", "ncclAllReduce", "ncclBroadcast", "ncclBcast", "ncclReduce",
                 "ncclAllGather", "ncclReduceScatter")
PYTHON_PREFIX = "anycuda_python_"
CDEF = """
int anycuda_nccl_front_setup(void *busy, void *isend, void *irecv, void *test, intptr_t byte, size_t small_bytes,
                             long spin_ns, double spin_ns_per_byte, int tag_base, int tag_span,
                             void *live_streams, size_t live_count, uintptr_t first_handle, uintptr_t handle_stride);
int anycuda_nccl_front_register(void *shared);
void anycuda_nccl_front_unregister(void *shared);
int anycuda_nccl_front_finish(void *op);
void anycuda_nccl_front_free(void *op);
extern "Python" int anycuda_python_nccl_adopt(void *comm, void *stream, void *op);
int anycuda_nccl_large_setup(void *foreign, void *allreduce, void *allgather, void *reduce_scatter_block,
                             void *bcast, void *reduce, intptr_t *types, intptr_t *ops, void *in_place,
                             size_t piece_bytes);
uint64_t anycuda_nccl_large_claim(uint64_t *handle, uintptr_t *stream, int *device);
uint64_t anycuda_nccl_large_pending(uint64_t *handle, uintptr_t *stream, int *device);
void anycuda_nccl_large_wait(uint64_t ticket);
uint64_t anycuda_nccl_large_issued(void);
uint64_t anycuda_nccl_large_done(void);
"""
