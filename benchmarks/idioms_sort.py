"""Sorting idioms of the benchmark suite (issue: the suite covers the idioms, not one
spelling; a sort needs at least two). suite.Bitonic is the bitonic network as one launch a
(k, j) step over global memory. Here:

- `bitonic_smem`: the same network as NVIDIA's sortingNetworks sample arranges it. One
  launch sorts every chunk of 1024 floats in shared memory (all k up to the chunk, with
  __syncthreads between steps); then for each larger k, one launch a step for the steps
  whose pairs span chunks (j >= 1024) and one shared-memory launch for all the rest of that
  k. Most steps run out of shared memory, with a barrier between them instead of a launch.
  C: reference.c's bitonic_sort, the same network.
- `radix_sort`: an LSD radix sort of uint32 keys (8-bit digits, four passes), the way GPU
  code is written without CUB's device-wide sort: per pass a histogram kernel (shared
  atomics, counts digit-major), a one-block exclusive scan of the counts, and a scatter kernel
  that ranks its tile's keys stably with cub::BlockRadixSort on the digit and writes each
  where the scan says; keys ping-pong between two buffers. Atomics, block-wide scans and a
  scatter rather than a fixed network. C: idioms_sort.c's radix_sort_u32, an OpenMP LSD
  radix sort with per-thread histograms and a stable parallel scatter.

Both are suite.Bench classes (the `(run, result)` protocol) with their CUDA C++ in
kernels/cuda/idioms_sort.cu; each run sorts the unsorted input again. `bitonic_smem` has a
PoCL version, the same three kernels in OpenCL (kernels/idioms_more.cl); `radix_sort` does not.
"""
from __future__ import annotations

import numpy as np

import suite
from suite import Bench, _equal, cdiv, p

CU = "idioms_sort.cu"


class BitonicSmem(suite.Bitonic):
    """suite.Bitonic's floats, check and C reference, sorted by idioms_sort.cu's three kernels."""
    name, cu, kernel = "bitonic_smem", CU, "bitonic_sort_shared"
    CHUNK = 1024                    # BITONIC_CHUNK in the .cu: elements a block, two a thread
    block = (CHUNK // 2,)
    MERGE_THREADS = 256             # bitonic_merge_global: one thread a pair
    sizes = {"full": dict(n=1 << 22), "quick": dict(n=1 << 12)}
    sim = Bench.sim                 # suite.Bitonic's would time its step kernel under this name

    def setup(self, n):
        if n < self.CHUNK or n & (n - 1):
            raise ValueError(f"bitonic_smem sorts a power of two of at least {self.CHUNK} keys, not {n}")
        super().setup(n)

    def schedule(self):
        """(kernel name, blocks, threads, (j, k) or (k,)) of every launch after the chunk sort, in order."""
        chunks, pairs = self.n // self.CHUNK, self.n // 2 // self.MERGE_THREADS
        out, k = [], 2 * self.CHUNK
        while k <= self.n:
            j = k // 2
            while j >= self.CHUNK:
                out.append(("bitonic_merge_global", pairs, self.MERGE_THREADS, (np.uint32(j), np.uint32(k))))
                j //= 2
            out.append(("bitonic_merge_shared", chunks, self.block[0], (np.uint32(k),)))
            k *= 2
        return out

    def launches(self, g, data):
        """(kernel, grid, block, args) of every launch after the chunk sort, in order."""
        return [(g.fn(self.cu, name), (blocks,), (threads,), (data, *jk))
                for name, blocks, threads, jk in self.schedule()]

    def anycuda(self, g):
        sort = g.fn(self.cu, self.kernel)
        d = g.ac.empty(self.n, np.float32)
        chunks = (self.n // self.CHUNK,)
        rest = self.launches(g, d)

        def run():
            d.set(self.x)              # the unsorted input again, every run
            sort(chunks, self.block, (d,))
            for k, grid, block, args in rest:
                k(grid, block, args)
            g.sync()
        return run, d.get

    def pocl(self, cl):
        d = cl.buffer(nbytes=self.x.nbytes)
        t = self.block[0]
        rest = [(f"idiom_{name}", (blocks * threads,), (threads,), jk) for name, blocks, threads, jk in self.schedule()]

        def run():
            cl.copy_in(d, self.x)      # the unsorted input again, every run
            cl.launch("idiom_bitonic_sort_shared", (self.n // self.CHUNK * t,), (t,), d)
            for name, size, local, jk in rest:
                cl.launch(name, size, local, d, *jk)
            cl.finish()
        return run, lambda: cl.read(d, self.n, np.float32)


class RadixSort(Bench):
    """n uint32 keys over the whole range, with runs of duplicates and the extremes (the
    scatter pads partial tiles with 0xFFFFFFFF: real keys of that value must still come out)."""
    name, cu, kernel, unit = "radix_sort", CU, "radix_scatter", None
    BITS, THREADS, TILE, SCAN_THREADS = 8, 256, 256 * 8, 1024     # RADIX_* in the .cu
    DIGITS = 1 << BITS
    block = (THREADS,)
    # quick: not a multiple of the tile, so the last tile of every pass is partial
    sizes = {"full": dict(n=1 << 22), "quick": dict(n=100_003)}
    POISON = 0xDEADBEEF             # in the second buffer: a missed write in the last pass leaves stale keys

    def setup(self, n):
        self.n = n
        x = self.rng.integers(0, 1 << 32, n, dtype=np.uint32)
        # duplicates: a quarter of the keys repeat others (LSD is right only if every pass is stable)
        dup = self.rng.choice(n, n // 4, replace=False)
        x[dup] = x[self.rng.integers(0, n, n // 4)]
        few = min(n, 16)
        x[self.rng.choice(n, few, replace=False)] = np.resize(np.array([0, 0xFFFFFFFF], np.uint32), few)
        self.x = x
        self.ref = np.sort(x)
        self.blocks = cdiv(n, self.TILE)
        self.passes = 32 // self.BITS
        assert self.passes % 2 == 0         # the result ends in the buffer the input went into
        self.work = n

    rate = suite.Bitonic.rate        # Mkeys/s

    def check(self, out):
        _equal(out, self.ref, "sorted")

    def anycuda(self, g):
        hist, scan, scatter = (g.fn(self.cu, k) for k in ("radix_histogram", "radix_scan", "radix_scatter"))
        keys = g.ac.empty(self.n, np.uint32)
        other = g.ac.asarray(np.full(self.n, self.POISON, np.uint32))
        counts = g.ac.empty(self.DIGITS * self.blocks, np.uint32)
        grid, n, m = (self.blocks,), np.int32(self.n), np.int32(self.DIGITS * self.blocks)
        shifts = [np.int32(s) for s in range(0, 32, self.BITS)]

        def run():
            keys.set(self.x)           # the unsorted input again, every run
            src, dst = keys, other
            for shift in shifts:
                hist(grid, self.block, (src, counts, n, shift))
                scan((1,), (self.SCAN_THREADS,), (counts, m))
                scatter(grid, self.block, (src, dst, counts, n, shift))
                src, dst = dst, src
            g.sync()
        return run, keys.get

    def c(self, lib):
        keys, other = np.empty_like(self.x), np.full(self.n, self.POISON, np.uint32)

        def run():
            np.copyto(keys, self.x)
            lib.radix_sort_u32(p(keys), p(other), self.n)
        return run, lambda: keys


BENCHMARKS = [BitonicSmem, RadixSort]
