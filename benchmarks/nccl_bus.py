"""Bus bandwidth of anycuda's NCCL across processes, in the form nccl-tests prints, beside
MPI's own MPI_Allreduce on the same buffers in the same run. Run under an MPI launcher:

    mpirun -np 2 python benchmarks/nccl_bus.py [--max-bytes 268435456] [--iters 20]

For each size (8 B, then x4): the time of one operation (median of --iters after warm-up,
each followed by a stream synchronisation), algbw = bytes / time, busbw = algbw x the
collective's factor (all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n), as
nccl-tests defines them. Bytes are the all-reduce's buffer, the all-gather's output and the
reduce-scatter's input (float32 elements, sum)."""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

import numpy as np
from mpi4py import MPI

import anycuda as ac
from anycuda.driver import api
from anycuda.libraries.nccl import functions

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from library_calls import caller, stream_handle        # noqa: E402

call = caller(functions.table())
world = MPI.COMM_WORLD
rank, n = world.Get_rank(), world.Get_size()
FACTORS = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n}


def device_floats(count):
    mem = ac.Memory(max(4, count * 4))
    view = np.frombuffer((ctypes.c_char * (count * 4)).from_address(mem.ptr), np.float32)
    view[:] = 1.0
    return mem, view


def timed(fn, iters):
    for _ in range(2):
        fn()
    times = []
    for _ in range(iters):
        world.Barrier()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    local = float(np.median(times))
    return world.allreduce(local, op=MPI.MAX)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    raw = (ctypes.c_char * 128)()
    if rank == 0:
        call("ncclGetUniqueId", ctypes.addressof(raw))
    uid = world.bcast(bytes(raw) if rank == 0 else None)
    out = ctypes.c_uint64()
    call("ncclCommInitRank", ctypes.addressof(out), n, uid, rank)
    comm, stream = out.value, stream_handle(ac.Stream())

    def sync():
        api.wait_for_stream(stream)

    if rank == 0:
        print(f"# anycuda NCCL over MPI, {n} ranks; times in us, bandwidths in GB/s")
        print(f"# {'size':>12} {'collective':>15} {'time':>10} {'algbw':>8} {'busbw':>8} "
              f"{'MPI time':>10} {'MPI busbw':>9} {'ratio':>6}")
    size = 8
    while size <= args.max_bytes:
        count = size // 4
        big_mem, big = device_floats(count * n)
        small_mem, small = device_floats(max(1, count // n))
        per = max(1, count // n)
        rows = {
            "all_reduce": (size, lambda: (call("ncclAllReduce", big_mem.ptr, big_mem.ptr, count, 7, 0, comm, stream),
                                          sync())),
            "all_gather": (per * n * 4, lambda: (call("ncclAllGather", small_mem.ptr, big_mem.ptr, per, 7, comm,
                                                      stream), sync())),
            "reduce_scatter": (per * n * 4, lambda: (call("ncclReduceScatter", big_mem.ptr, small_mem.ptr, per, 7, 0,
                                                          comm, stream), sync())),
        }
        mpi_time = timed(lambda: world.Allreduce(MPI.IN_PLACE, big[:count]), args.iters)
        for name, (nbytes, fn) in rows.items():
            t = timed(fn, args.iters)
            algbw = nbytes / t / 1e9
            busbw = algbw * FACTORS[name]
            if rank == 0:
                extra = ""
                if name == "all_reduce":
                    mpi_bus = nbytes / mpi_time / 1e9 * FACTORS[name]
                    extra = f" {mpi_time * 1e6:10.1f} {mpi_bus:9.3f} {busbw / mpi_bus:6.2f}"
                print(f"  {nbytes:>12} {name:>15} {t * 1e6:10.1f} {algbw:8.3f} {busbw:8.3f}{extra}", flush=True)
        del big_mem, small_mem
        size *= 4
    call("ncclCommDestroy", comm)


if __name__ == "__main__":
    main()
